"""More of ``ember.nn.functional`` (imported into it): 3-d adaptive max / LP pooling, the
``*_with_indices`` aliases, max-unpooling, multilabel margin loss, triplet loss with a custom
distance, and a few in-place activation aliases.

Everything here is written with ember ops, so autograd and ``ember.compile`` traces see it."""
from __future__ import annotations

import numbers

from .. import types as _t
from ..ops import api as _api

__all__ = ["adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "max_pool3d_with_indices", "lp_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "multilabel_margin_loss",
           "selu_", "celu_", "rrelu_"]


def _F():
    import ember.nn.functional as F   # resolved at call time (this module is imported by it)
    return F


# ---------------------------------------------------------------------- pooling
def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _F()._adaptive_max(3, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _F()._adaptive_max(1, input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _F()._adaptive_max(2, input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return _F()._adaptive_max(3, input, output_size, True)


def max_pool3d_with_indices(*args, **kwargs):
    return _F().max_pool3d(*args, **{**kwargs, "return_indices": True})


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    F = _F()
    kd, kw, kh = F._tuple(kernel_size, 3, "kernel_size")
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return F.max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -F.max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = F.avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (_api.sign(out) * F.relu(_api.abs(out))).mul(kd * kw * kh).pow(1.0 / norm_type)


# ---------------------------------------------------------------------- max unpooling
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """PyTorch's ``_unpool_output_size``: the default ``(in - 1) * stride - 2 * pad + kernel`` or a
    checked ``output_size`` (which may include the batch and channel dims)."""
    nd = len(kernel_size)
    in_size = tuple(input.shape)
    default = [(in_size[-nd + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(nd)]
    if output_size is None:
        ret = default
    else:
        if isinstance(output_size, numbers.Integral):
            output_size = [output_size]
        if len(output_size) == nd + 2:
            output_size = output_size[2:]
        shown = output_size  # messages print the caller's sequence (tuple, list, Size) as torch does
        output_size = [int(o) for o in output_size]
        if len(output_size) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} elements, but it has "
                             f"a length of '{len(output_size)}'")
        for d in range(nd):
            min_size = default[d] - stride[d]
            max_size = default[d] + stride[d]
            if not (min_size < output_size[d] < max_size):
                raise ValueError(f'invalid output_size "{shown}" (dim {d} must be between {min_size} and '
                                 f'{max_size})')
        ret = output_size
    for d in range(nd):
        if ret[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={ret[d]}")
    return ret


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):
    F = _F()
    name = f"max_unpool{max(nd, 2)}d"
    k = F._tuple(kernel_size, nd, "kernel_size")
    s = k if stride is None else F._tuple(stride, nd, "stride")
    p = F._tuple(padding, nd, "padding")
    out_sp = tuple(_unpool_output_size(input, k, s, p, output_size))
    if indices.dtype != _t.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got {list(input.shape)}")
    unbatched = input.dim() == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    idx = indices.unsqueeze(0) if unbatched else indices
    N, C = x.shape[0], x.shape[1]
    total = 1
    for o in out_sp:
        total *= o
    # every value lands at its flat index in a zero plane: a scatter (its gradient is the gather)
    base = _api.zeros(N, C, total, dtype=x.dtype, device=x.device)
    out = base.scatter(2, idx.reshape(N, C, -1), x.reshape(N, C, -1)).reshape(N, C, *out_sp)
    return out.squeeze(0) if unbatched else out


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# ---------------------------------------------------------------------- losses
def _check_multilabel_margin(input, target):
    """torch's checks: a non-empty vector / matrix (or a scalar) input, a target of its shape (any
    shape of as many elements for a vector), and (eagerly) every target entry in [-1, C)."""
    nd = input.dim()
    if not ((nd == 2 and input.shape[1] != 0) or (nd == 1 and input.shape[0] != 0) or nd == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if nd <= 1:
        dim = input.shape[0] if nd == 1 else 1
        ok = target.dim() <= 1 and target.numel() == dim
    else:
        dim = input.shape[1]
        ok = target.dim() == 2 and tuple(target.shape) == tuple(input.shape)
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    if target.numel() and _F()._data_checks_allowed(target):
        if int(target.min().item()) < -1 or int(target.max().item()) >= dim:
            raise RuntimeError("argument #2 'target' is out of range")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[y_j] - x[i])) / C``; the targets of a
    row are its class indices up to the first ``-1``."""
    F = _F()
    reduction = F._legacy_reduction(size_average, reduce, reduction)
    _check_multilabel_margin(input, target)
    input, = F._autocast_args("multilabel_margin_loss", input)    # PyTorch's kernel: float32 under autocast
    x = input.reshape(1, -1) if input.dim() <= 1 else input
    t = target.reshape(x.shape[0], x.shape[1])
    C = x.shape[1]
    valid = (t >= 0).to(_t.int64).cumprod(1)                        # targets before the first -1
    tc = _api.where(valid.bool(), t, 0)
    validf = valid.to(x.dtype)
    is_target = (F.one_hot(tc, C).to(x.dtype) * validf.unsqueeze(-1)).sum(1).clamp(max=1)  # (N, C)
    x_y = x.gather(1, tc)                                              # (N, T)
    z = _api.clamp_min(1 - x_y.unsqueeze(-1) + x.unsqueeze(1), 0)      # (N, T, C)
    z = z * validf.unsqueeze(-1) * (1 - is_target).unsqueeze(1)
    loss = z.sum((1, 2)) / C
    if input.dim() <= 1:
        loss = loss.squeeze(0)
    return F._reduce(loss, reduction)


# (triplet_margin_with_distance_loss: ember/nn/_functional_traced.py, traced through by dynamo)


# ---------------------------------------------------------------------- in-place activation aliases
def selu_(input):
    return _F().selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return _F().celu(input, alpha, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return _F().rrelu(input, lower, upper, training, inplace=True)


# ``ember.nn.functional.__all__`` lists the callables whose ``__module__`` is that module
for _n in __all__:
    globals()[_n].__module__ = "ember.nn.functional"
del _n
