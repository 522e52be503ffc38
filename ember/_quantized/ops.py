"""Operations torch runs on (per-tensor) quantized tensors, on their integers, bit for bit torch's.

* ``cat`` / ``stack``: the result takes the *first* tensor's scale and zero point; a tensor with
  other parameters is dequantized and requantized with them (torch's rule); mixed dtypes or a
  per-channel tensor raise torch's errors.
* ``max`` / ``min`` (whole tensor or along a dim, with int64 indices): order does not change
  under an affine map with a positive scale, so they select integers and keep the parameters.
* ``flip``: the integers moved, the parameters kept.
* ``mean``: the sum of the raw integers divided by the count, rounded half to even, with the
  input's parameters (torch's kernel averages the stored integers).

Pooling and resizing are in pooling.py, clamps and activations in elementwise.py. The dispatcher
hands all of them here through ``QuantizedTensor.__ember_route__`` (op names in ``ROUTED``, built
on first use); the functions of ``ember.nn.quantized.functional`` call them directly.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import _make, _wrap_dim
from . import kernels as K
from .tensor import QuantizedTensor, make_qtensor


def _per_tensor(q, what):
    if q._qp.per_channel:
        raise RuntimeError(what)
    return q


def _like(q, ints):
    """A new quantized tensor over ``ints`` with ``q``'s dtype and (per-tensor) parameters."""
    return make_qtensor(np.ascontiguousarray(ints.astype(q._irepr.dtype, copy=False)) if ints.ndim else
                        np.asarray(ints, dtype=q._irepr.dtype), q.dtype, q._qp)


# -- joining ---------------------------------------------------------------------------
def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    first = tensors[0]
    for t in tensors:
        if not isinstance(t, QuantizedTensor):
            t.qscheme()                   # a dense tensor: torch's "no CPU kernel for qscheme" error
        if t._qp.per_channel:
            raise RuntimeError("Only per-tensor quantization is supported in 'cat'!")
    if any(t.dtype is not first.dtype for t in tensors):
        raise RuntimeError("All dtypes must be the same.")
    nd = first._irepr.ndim
    d = _wrap_dim(dim, nd)
    scale, zp = first._qp.scale, first._qp.zero_point
    parts = []
    for t in tensors:
        if t._irepr.ndim != nd or any(a != b for i, (a, b) in enumerate(zip(t._irepr.shape, first._irepr.shape))
                                      if i != d):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                               f"{first._irepr.shape[[i for i in range(nd) if i != d][0]] if nd > 1 else 0} but "
                               f"got size {t._irepr.shape[[i for i in range(nd) if i != d][0]] if nd > 1 else 0} "
                               "for tensor number 1 in the list.")
        if t._qp.same_as(first._qp):
            parts.append(t._irepr)
        else:
            parts.append(K.quantize_per_tensor(t.dequantize()._data, scale, zp, first.dtype))
    return _like(first, np.concatenate(parts, axis=d))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _wrap_dim(dim, tensors[0]._irepr.ndim + 1)
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError("stack expects each tensor to be equal size")
    return cat([t.unsqueeze(d) for t in tensors], d)


# -- reductions -------------------------------------------------------------------------
_MAX_PC = ("{} operator for quantized tensors only works for per tensor quantized tensors. Please open an issue on "
           "https://github.com/pytorch/pytorch/issues if you need per channel quantized tensor support.")


def _extreme(q, which):
    _per_tensor(q, _MAX_PC.format(which.capitalize()))
    if q._irepr.size == 0:
        raise RuntimeError(f"{which}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    return _like(q, np.asarray(q._irepr.max() if which == "max" else q._irepr.min()))


def _extreme_dim(q, dim, keepdim, which):
    from .. import return_types
    _per_tensor(q, _MAX_PC.format(which.capitalize()))
    arr = q._irepr
    d = _wrap_dim(dim, arr.ndim) if arr.ndim else 0
    a = arr if arr.ndim else arr.reshape(1)
    idx = np.argmax(a, axis=d) if which == "max" else np.argmin(a, axis=d)
    vals = np.take_along_axis(a, np.expand_dims(idx, d), d)
    if not keepdim:
        vals = np.squeeze(vals, d)
    else:
        idx = np.expand_dims(idx, d)
    if not arr.ndim:
        vals, idx = vals.reshape(()), idx.reshape(())
    cls = getattr(return_types, which)
    return cls(_like(q, vals), _make(np.ascontiguousarray(idx.astype(np.int64)), _t.cpu, _t.int64))


def _avg_round(total, count, dtype):
    """``rint(sum / count)`` of integer sums, clamped to the dtype's range."""
    lo, hi = K.qrange(dtype)
    return np.clip(np.rint(total / count), lo, hi)


def mean(q, dim=None, keepdim=False, dtype=None):
    q.q_scale()                           # (torch's per-tensor-only error for a per-channel tensor)
    if dtype is not None and _t.as_dtype(dtype) is not q.dtype:
        raise NotImplementedError(f"ember.quantization: mean of a quantized tensor with dtype={dtype} is not "
                                  "supported")
    arr = q._irepr.astype(np.int64)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        axes = tuple(range(arr.ndim))
    else:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
        axes = tuple(sorted({_wrap_dim(d, arr.ndim) for d in dims}))
    count = int(np.prod([arr.shape[a] for a in axes])) if axes else 1
    if axes and axes != tuple(range(arr.ndim - len(axes), arr.ndim)):
        # not the innermost dims: torch dequantizes, takes the float mean, quantizes again
        d = ((arr - q._qp.zero_point).astype(np.float32) * np.float32(q._qp.scale)).astype(np.float32)
        m = (d.sum(axis=axes, keepdims=bool(keepdim), dtype=np.float32) / np.float32(count)).astype(np.float32)
        return _like(q, K.quantize_per_tensor(m, q._qp.scale, q._qp.zero_point, q.dtype))
    total = arr.sum(axis=axes, keepdims=bool(keepdim)) if axes else arr
    return _like(q, np.asarray(_avg_round(total, count, q.dtype)))


def flip(q, dims):
    """The integers reversed along ``dims`` (per-tensor only, as torch)."""
    from .tensor import _UNIFORM_ONLY
    _per_tensor(q, _UNIFORM_ONLY)
    dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
    axes = tuple(sorted({_wrap_dim(d, q._irepr.ndim) for d in dims}))
    return _like(q, np.flip(q._irepr, axes))


# -- ordering ---------------------------------------------------------------------------
# order does not change under an affine map with a positive scale: sorting the stored integers
# sorts the values, which keep the input's parameters (per-tensor only, as torch)
_SORT_PC = ("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  (Could this error message "
            "be improved?  If so, please report an enhancement request to PyTorch.)")


def _order(q, d, descending):
    from ..ops.reduction import _sort_indices
    return _sort_indices(np, q._irepr, d, descending)


def _index_tensor(idx):
    idx = np.asarray(idx, dtype=np.int64)
    return _make(np.ascontiguousarray(idx) if idx.ndim else idx, _t.cpu, _t.int64)


def sort(q, dim=-1, descending=False, stable=False):
    """(values, int64 indices) along ``dim``; ties keep their order (torch's CPU sort is stable)."""
    from .. import return_types
    _per_tensor(q, _SORT_PC)
    arr = q._irepr
    if arr.ndim == 0:
        return return_types.sort(_like(q, arr.copy()), _index_tensor(np.asarray(0)))
    d = _wrap_dim(dim, arr.ndim)
    idx = _order(q, d, descending)
    return return_types.sort(_like(q, np.take_along_axis(arr, idx, d)), _index_tensor(idx))


def argsort(q, dim=-1, descending=False, stable=False):
    return sort(q, dim, descending, stable)[1]


def topk(q, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (smallest) values along ``dim`` and their indices. Among equal values
    ember returns the lower index first; torch's partial sort may order tied indices otherwise
    (the values agree)."""
    from .. import return_types
    _per_tensor(q, "Top-K is only supported on per-tensor quantization")
    arr = q._irepr
    n = arr.shape[_wrap_dim(dim, arr.ndim)] if arr.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if arr.ndim == 0:
        return return_types.topk(_like(q, arr.copy()), _index_tensor(np.asarray(0)))
    d = _wrap_dim(dim, arr.ndim)
    idx = np.take(_order(q, d, largest), np.arange(k), axis=d)
    return return_types.topk(_like(q, np.take_along_axis(arr, idx, d)), _index_tensor(idx))


def _routed_max(q):
    return _extreme(q, "max")


def _routed_min(q):
    return _extreme(q, "min")


# op name (ember/ops/registry.py) -> function taking the op's arguments as called
ROUTED = {}


def routed(name):
    """The function serving op ``name`` (the table is filled on first use: pooling.py and
    elementwise.py import this module)."""
    if not ROUTED:
        from . import elementwise as E
        from . import pooling as P
        ROUTED.update({
            "cat": cat, "stack": stack, "max": _routed_max, "min": _routed_min,
            "max_dim": lambda q, dim, keepdim=False: _extreme_dim(q, dim, keepdim, "max"),
            "min_dim": lambda q, dim, keepdim=False: _extreme_dim(q, dim, keepdim, "min"),
            "mean": mean, "flip": flip, "max_pool_with_indices": P.max_pool, "avg_pool": P.avg_pool,
            "_resample": P._resample, "_gather_axes": P._gather_axes, "clamp": E.clamp,
            "hardtanh": lambda q, min_val=-1.0, max_val=1.0: E.clamp(q, min_val, max_val),
            "sigmoid": E.sigmoid, "tanh": E.tanh, "hardsigmoid": E.hardsigmoid,
            "sort": sort, "argsort": argsort, "topk": topk,
        })
    return ROUTED[name]
