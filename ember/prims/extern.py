"""Extern prims: ops kept whole and lowered to library calls (BLAS, a
convolution library, a sort).

Why extern: decomposing a matrix multiply or a convolution into pointwise
prims and reductions would throw away the blocked, vectorised library
kernels; sort/topk have no efficient expression in the other prims. Like
every prim they take one dtype and do not broadcast.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import (check_dim, compute_np, defprim, dtype_of, fail, finish, fmt_shape, is_scalar, same_shape)

__all__ = ["mm", "bmm", "convolution", "sort", "topk"]

NUMK = ("integer", "floating")


def _same_dtype(prim, names, ts):
    t0 = ts[0]
    for n, t in zip(names[1:], ts[1:]):
        if t is not None and dtype_of(t) is not dtype_of(t0):
            fail(prim, f"argument '{n}' has dtype {dtype_of(t).name} but '{names[0]}' has {dtype_of(t0).name} "
                       f"— prims do no type promotion")
    if dtype_of(t0).category == 0:
        fail(prim, f"argument '{names[0]}' is a bool tensor; this prim takes numbers")


def _eq(a, b):
    return same_shape((a,), (b,))


def _mm_check(a, b):
    if a.ndim != 2 or b.ndim != 2:
        fail("mm", f"arguments 'a' {fmt_shape(a.shape)} and 'b' {fmt_shape(b.shape)} must both be 2-D")
    _same_dtype("mm", ("a", "b"), (a, b))
    if not _eq(a.shape[1], b.shape[0]):
        fail("mm", f"argument 'b' {fmt_shape(b.shape)} does not match 'a' {fmt_shape(a.shape)} "
                   f"(a.shape[1] != b.shape[0])")


@defprim("mm(Tensor a, Tensor b) -> Tensor", check=_mm_check,
         meta=lambda a, b: _meta.out((a.shape[0], b.shape[1]), a.dtype))
def mm(xp, a, b):
    """Matrix product of 2-D ``a`` (n, k) and ``b`` (k, m), same dtype; float16/bfloat16
    accumulate in float32; integers wrap."""
    dt = dtype_of(a)
    c = compute_np(dt)
    return finish(xp, xp.ascontiguousarray(xp.matmul(a.astype(c, copy=False), b.astype(c, copy=False))), dt)


def _bmm_check(a, b):
    if a.ndim != 3 or b.ndim != 3:
        fail("bmm", f"arguments 'a' {fmt_shape(a.shape)} and 'b' {fmt_shape(b.shape)} must both be 3-D")
    _same_dtype("bmm", ("a", "b"), (a, b))
    if not _eq(a.shape[0], b.shape[0]) or not _eq(a.shape[2], b.shape[1]):
        fail("bmm", f"argument 'b' {fmt_shape(b.shape)} does not match 'a' {fmt_shape(a.shape)} "
                    f"(batch sizes must be equal and a.shape[2] == b.shape[1])")


@defprim("bmm(Tensor a, Tensor b) -> Tensor", check=_bmm_check,
         meta=lambda a, b: _meta.out((a.shape[0], a.shape[1], b.shape[2]), a.dtype))
def bmm(xp, a, b):
    """Batched matrix product of 3-D ``a`` (B, n, k) and ``b`` (B, k, m), same dtype."""
    dt = dtype_of(a)
    c = compute_np(dt)
    return finish(xp, xp.ascontiguousarray(xp.matmul(a.astype(c, copy=False), b.astype(c, copy=False))), dt)


# ---------------------------------------------------------------------- convolution
def _conv_check(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    _same_dtype("convolution", ("x", "weight", "bias"), (x, weight, bias))
    if dtype_of(x).category != 2:
        fail("convolution", f"argument 'x' has dtype {dtype_of(x).name}; convolution takes floating tensors")
    nd = weight.ndim - 2
    if nd < 1 or x.ndim != nd + 2:
        fail("convolution", f"argument 'x' {fmt_shape(x.shape)} must have rank weight.ndim = {weight.ndim} "
                            f"(batched N, C, *spatial; unbatched inputs are unsqueezed by the decomposition)")
    for n, v in (("stride", stride), ("padding", padding), ("dilation", dilation),
                 ("output_padding", output_padding)):
        if len(v) != nd:
            fail("convolution", f"argument '{n}' has {len(v)} entries, expected {nd} (one per spatial dim)")
    if bias is not None and (bias.ndim != 1):
        fail("convolution", f"argument 'bias' must be 1-D, got {fmt_shape(bias.shape)}")


def _conv_shape(x, w, stride, padding, dilation, transposed, output_padding, groups):
    nd = len(w.shape) - 2
    if not transposed:
        sp = tuple((x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
                   for i in range(nd))
        return (x.shape[0], w.shape[0]) + sp
    sp = tuple((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w.shape[2 + i] - 1)
               + output_padding[i] + 1 for i in range(nd))
    return (x.shape[0], w.shape[1] * groups) + sp


def _conv_meta(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return _meta.out(_conv_shape(x, weight, stride, padding, dilation, transposed, output_padding, groups),
                     x.dtype)


@defprim("convolution(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
         "bool transposed, int[] output_padding, int groups) -> Tensor", check=_conv_check, meta=_conv_meta)
def convolution(xp, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """N-d convolution (cross-correlation) of batched ``x`` (N, C, *spatial) with ``weight``
    (O, C/groups, *kernel), or its transpose (``transposed``: weight (C, O/groups, *kernel),
    output size (L-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1), plus
    ``bias`` (O,) if given; PyTorch's ``convolution`` semantics, one dtype throughout,
    float16/bfloat16 accumulated in float32."""
    from ..ops import nn_ops
    dt = dtype_of(x)
    c = compute_np(dt)
    r = nn_ops.convolution.kernel(xp, x.astype(c, copy=False), weight.astype(c, copy=False),
                                  None if bias is None else bias.astype(c, copy=False), list(stride), list(padding),
                                  list(dilation), bool(transposed), list(output_padding), int(groups))
    return finish(xp, xp.ascontiguousarray(r), dt)


# ---------------------------------------------------------------------- sort / topk
def _argsort(xp, a, dim, descending):
    """Stable argsort along ``dim``; NaN sorts above +inf (last ascending, first descending);
    equal elements keep their order in both directions. bfloat16 sorts as float32 (exact):
    ml_dtypes' own sort leaves a NaN, and what follows it, unsorted."""
    if a.dtype == _t.bfloat16.np:
        a = a.astype(np.float32)
    if not descending:
        return xp.argsort(a, axis=dim, kind="stable")
    n = a.shape[dim]
    rev = xp.flip(a, axis=dim)
    idx = xp.argsort(rev, axis=dim, kind="stable")
    return (n - 1) - xp.flip(idx, axis=dim)


def _sort_check(a, dim, descending, stable):
    if is_scalar(a):
        fail("sort", "argument 'a' must be a tensor")
    check_dim("sort", "dim", dim, a.ndim)


def _sort_meta(a, dim, descending, stable):
    return _meta.out(tuple(a.shape), a.dtype), _meta.out(tuple(a.shape), _t.int64)


@defprim("sort(Tensor a, int dim, bool descending, bool stable) -> (Tensor, Tensor)", check=_sort_check,
         meta=_sort_meta)
def sort(xp, a, dim, descending, stable):
    """(values, int64 indices) of ``a`` sorted along ``dim``; NaN counts as the largest value.
    The reference is always stable (equal elements keep their input order), which satisfies
    both ``stable`` settings; a backend may ignore ties when ``stable`` is False."""
    if a.ndim == 0:
        return a.copy(), xp.zeros((), dtype=np.int64)
    idx = _argsort(xp, a, int(dim), bool(descending))
    return xp.ascontiguousarray(xp.take_along_axis(a, idx, axis=int(dim))), xp.ascontiguousarray(idx.astype(np.int64))


def _topk_check(a, k, dim, largest, sorted):
    if is_scalar(a):
        fail("topk", "argument 'a' must be a tensor")
    dim = check_dim("topk", "dim", dim, a.ndim)
    n = a.shape[dim] if a.ndim else 1
    if isinstance(k, int) and isinstance(n, int) and not 0 <= k <= n:
        fail("topk", f"argument 'k' is {k}, out of range for a dim of size {n}")


def _topk_meta(a, k, dim, largest, sorted):
    shape = list(a.shape)
    if a.ndim:
        shape[dim] = k
    return _meta.out(tuple(shape), a.dtype), _meta.out(tuple(shape), _t.int64)


@defprim("topk(Tensor a, SymInt k, int dim, bool largest, bool sorted) -> (Tensor, Tensor)", check=_topk_check,
         meta=_topk_meta)
def topk(xp, a, k, dim, largest, sorted):
    """(values, int64 indices) of the ``k`` largest (``largest``) or smallest elements along
    ``dim``, in sorted order (the reference always sorts; NaN counts as the largest value;
    among equal values the lower index comes first)."""
    if a.ndim == 0:
        return a.copy(), xp.zeros((), dtype=np.int64)
    dim = int(dim)
    idx = _argsort(xp, a, dim, bool(largest))
    idx = xp.take(idx, np.arange(int(k)), axis=dim)
    return xp.ascontiguousarray(xp.take_along_axis(a, idx, axis=dim)), xp.ascontiguousarray(idx.astype(np.int64))
