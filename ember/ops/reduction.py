"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std,
norm, logsumexp, cumsum/cumprod, all/any, softmax/log_softmax, topk, sort.

The reduced-dims convention everywhere: ``dim=None`` reduces all dims; a
gradient is expanded back with ``expand_reduced``.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ._helpers import wrap_dims
from .registry import defop

RED = ("reduction",)


def expand_reduced(g, shape, dims, keepdim):
    """Broadcast a reduction's gradient ``g`` back to the input ``shape``."""
    shape = tuple(shape)
    if not keepdim and len(shape) > 0:
        for d in sorted(wrap_dims(dims, len(shape))):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _sum_dtype(dt, dtype):
    if dtype is not None:
        return _t.as_dtype(dtype)
    return _t.int64 if dt.category < 2 else dt


@defop("sum(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       tags=RED, save=(), grad_fn_name=lambda a: "SumBackward0" if a[1] is None else "SumBackward1")
def sum(xp, a, dim=None, keepdim=False, dtype=None):
    dims = wrap_dims(dim, a.ndim)
    out_dt = _sum_dtype(_t.from_numpy_dtype(a.dtype), dtype)
    if a.dtype != out_dt.np:
        a = a.astype(out_dt.np)
    return xp.asarray(xp.sum(a, axis=dims, keepdims=keepdim))


@sum.derivative
def _sum_bw(ctx, g):
    a, dim, keepdim, dtype = ctx.args
    return (expand_reduced(g, a.shape, dim, keepdim),)


@defop("mean(Tensor self, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       tags=RED, save=(), grad_fn_name=lambda a: "MeanBackward0" if a[1] is None else "MeanBackward1")
def mean(xp, a, dim=None, keepdim=False, dtype=None):
    dt = _t.from_numpy_dtype(a.dtype) if dtype is None else _t.as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {dt.legacy_name}")
    dims = wrap_dims(dim, a.ndim)
    acc = np.float32 if dt in (_t.float16, _t.bfloat16) else dt.np
    return xp.asarray(xp.mean(a.astype(acc, copy=False), axis=dims, keepdims=keepdim)).astype(dt.np, copy=False)


@mean.derivative
def _mean_bw(ctx, g):
    a, dim, keepdim, dtype = ctx.args
    dims = wrap_dims(dim, len(a.shape))
    n = 1
    for d in dims:
        n *= a.shape[d]
    return (expand_reduced(g, a.shape, dim, keepdim) / max(n, 1) if n else
            expand_reduced(g, a.shape, dim, keepdim) * float("nan"),)
