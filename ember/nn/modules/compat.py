"""Modules training scripts reach for: SyncBatchNorm, DataParallel, AdaptiveLogSoftmaxWithLoss.

* ``SyncBatchNorm`` is BatchNorm whose batch statistics are reduced across the processes of an
  ``ember.distributed`` process group (``process_group``, default the world) in training mode:
  the per-channel sum and then the sum of squared deviations are all-reduced (two passes, so
  the variance does not suffer ``E[x^2] - E[x]^2`` cancellation), and the backward all-reduces
  their gradients, so every rank normalises with the statistics of the global batch and the
  gradients equal those of one process holding it. Without an initialised process group (or
  in eval mode, or in a group of one) it is BatchNorm over the local batch, for any input of 2
  or more dims, as PyTorch. ``convert_sync_batchnorm(model)`` swaps every BatchNorm of a model
  for one, sharing its parameters and buffers.
* ``DataParallel`` lives in ``ember.nn.parallel`` (re-exported here).
* ``AdaptiveLogSoftmaxWithLoss`` (Grave et al., "Efficient softmax approximation for GPUs"):
  a head over the frequent classes plus one cluster token per tail cluster, each tail a
  low-rank projection; returns ``(output, loss)`` with the target's log-probability per row.
"""
from __future__ import annotations

from collections import namedtuple

from ...autograd.grad_mode import no_grad as _no_grad
from ._F import F
from .batchnorm import _BatchNorm
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module
from ..parallel.data_parallel import DataParallel

__all__ = ["SyncBatchNorm", "DataParallel", "AdaptiveLogSoftmaxWithLoss"]


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        pg = self._sync_group() if self.training else None
        if pg is None:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            with _no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        return _sync_batch_norm(input, self.weight, self.bias, self.running_mean if self.track_running_stats else None,
                                self.running_var if self.track_running_stats else None, factor, self.eps, pg)

    def _sync_group(self):
        """The group to reduce statistics over, or None when there is nobody to sync with."""
        from ... import distributed as dist
        if not dist.is_initialized():
            return None
        pg = self.process_group if self.process_group is not None else dist.group.WORLD
        if dist.get_world_size(pg) <= 1:
            return None
        return pg

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm*D replaced by a SyncBatchNorm holding the same
        parameters and running statistics (the module itself if it is one)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group)
            if module.affine:
                with _no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out


def _sync_batch_norm(input, weight, bias, running_mean, running_var, factor, eps, pg):
    """Batch norm with statistics of the batch spread over ``pg``'s ranks (differentiable)."""
    from ... import distributed as dist, tensor as _tensor, float64
    from ...autograd.function import Function

    class _AllReduceSum(Function):
        """Sum over the group; the gradient of a sum is the sum of the ranks' gradients."""

        @staticmethod
        def forward(ctx, t):
            out = t.clone()
            dist.all_reduce(out, group=pg)
            return out

        @staticmethod
        def backward(ctx, grad):
            g = grad.clone()
            dist.all_reduce(g, group=pg)
            return g

    c = input.size(1)
    dims = [0] + list(range(2, input.dim()))
    shape = [1, c] + [1] * (input.dim() - 2)
    count = _tensor([float(input.numel() // c)], dtype=float64)
    dist.all_reduce(count, group=pg)
    n = float(count.item())
    if n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(input.shape)} "
                         f"({int(n)} value(s) per channel over the whole process group)")
    mean = _AllReduceSum.apply(input.sum(dims)) / n
    xmu = input - mean.reshape(shape)
    var = _AllReduceSum.apply((xmu * xmu).sum(dims)) / n
    out = xmu * (var + eps).rsqrt().reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    if running_mean is not None:
        with _no_grad():
            running_mean.mul_(1 - factor).add_(mean.detach().to(running_mean.dtype) * factor)
            running_var.mul_(1 - factor).add_(var.detach().to(running_var.dtype) * (factor * n / (n - 1)))
    return out


_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 or \
                len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = dict(device=device, dtype=dtype)
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, **kw),
                                        Linear(hsz, osz, bias=False, **kw)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        elif targ_dim == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)

        used_rows = 0
        batch_size = target.size(0)
        output = input.new_zeros(batch_size)
        gather_inds = target.new_empty(batch_size)
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            mask = (target >= low) & (target < high)
            rows = mask.nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds = gather_inds.index_copy(0, rows, target[mask])
            else:
                cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
                local = cluster_logprob.gather(1, (target[mask] - low).unsqueeze(1))
                gather_inds = gather_inds.index_fill(0, rows, self.shortlist_size + i - 1)
                output = output.index_copy(0, rows, local.squeeze(1))
            used_rows += rows.numel()
        if used_rows != batch_size:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):
        from ... import cat
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, (start, stop) in enumerate(zip(self.cutoffs, self.cutoffs[1:])):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of every class, ``(N, n_classes)`` (or ``(n_classes,)``)."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._get_full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class per row (argmax of ``log_prob``)."""
        return self.log_prob(input).argmax(dim=-1)
