"""BatchNorm1d/2d/3d and InstanceNorm1d/2d (running statistics as buffers)."""
from __future__ import annotations

import warnings

from ...autograd.grad_mode import no_grad as _no_grad
from ...tensor import Parameter
from .. import init
from ._F import F
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d"]


class _NormBase(Module):
    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        from ... import empty, int64, tensor, zeros, ones
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            with _no_grad():
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, bias={use_bias}, "
                "track_running_stats={track_running_stats}".format(**self.__dict__, use_bias=self.bias is not None))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # checkpoints from before num_batches_tracked existed
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                from ... import int64, tensor
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else tensor(0, dtype=int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs, assign)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        exponential_average_factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            nbt = self.num_batches_tracked
            with _no_grad():
                nbt.add_(1)     # through the dispatcher, so tracing and functionalization see it
            if self.momentum is None:
                exponential_average_factor = 1.0 / float(nbt.item())
            else:
                exponential_average_factor = self.momentum
        if self.training:
            bn_training = True
        else:
            bn_training = (self.running_mean is None) and (self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_stats else None,
                            self.running_var if use_stats else None, self.weight, self.bias, bn_training,
                            exponential_average_factor, self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _InstanceNorm(_NormBase):
    """Per-sample, per-channel normalisation: batch_norm over a (1, N*C, ...) view of the input."""

    _n_spatial = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input):
        n = self._n_spatial
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.dim()}D input)")

    def _check_num_features(self, input):
        """A channel count other than num_features: an error with affine parameters to apply, a
        warning without (num_features is then unused), as torch."""
        fdim = input.dim() - (self._n_spatial + 1)
        if input.shape[fdim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={fdim} to match num_features ({self.num_features}), "
                                 f"but got: {input.shape[fdim]}.")
            warnings.warn(f"input's size at dim={fdim} does not match num_features. You can silence this warning by "
                          "not passing in num_features, which is not used because affine=False")

    def forward(self, input):
        self._check_input_dim(input)
        self._check_num_features(input)
        unbatched = input.dim() == self._n_spatial + 1
        if unbatched:
            input = input.unsqueeze(0)
        if self.track_running_stats:
            # running statistics: updated from each sample's statistics in training, used in eval
            out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                  self.training, 0.0 if self.momentum is None else self.momentum, self.eps)
            return out.squeeze(0) if unbatched else out
        F._verify_spatial_size(input.size())
        n, c = input.shape[0], input.shape[1]
        x = input.reshape(1, n * c, *input.shape[2:])
        out = F.batch_norm(x, None, None, None, None, True, 0.0, self.eps).reshape(input.shape)
        if self.affine:
            view = (1, c) + (1,) * self._n_spatial
            out = out * self.weight.reshape(view)
            if self.bias is not None:
                out = out + self.bias.reshape(view)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _n_spatial = 1


class InstanceNorm2d(_InstanceNorm):
    _n_spatial = 2


class InstanceNorm3d(_InstanceNorm):
    _n_spatial = 3
