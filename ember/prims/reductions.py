"""Reduction and scan prims.

Reductions take ``dims``: a tuple of canonical dims (``0 <= d < ndim``, no
repeats); the result drops them (``keepdim`` is ``expand_dims`` afterwards)
and keeps the input's dtype (decompositions upcast first: ``sum`` of int32
in PyTorch is int64, so its decomposition converts before reducing). An empty
``dims`` reduces nothing (a copy). float16/bfloat16 accumulate in float32 and
round once. Scans (``cumsum``/``cumprod``) keep the shape.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import (check_dim, check_dims, check_dtype, compute_np, defprim, dtype_of, fail, finish,
                       is_scalar)

__all__: list = []   # prim names defined here (bound in ember.prims)

NUM = frozenset({"integer", "floating"})
ANY = frozenset({"integer", "floating", "bool"})
FLOAT = frozenset({"floating"})


def _export(b):
    """Prims are exported by ``ember.prims`` (from ``PRIMS``), not as module globals here:
    names like ``slice``, ``sum``, ``abs``, ``round`` would shadow builtins."""
    __all__.append(b.__name__)
    return b


def _tensor(prim, a):
    if is_scalar(a):
        fail(prim, "argument 'a' must be a tensor, not a Python number")


def _reduction(name, fn, kinds, doc, *, out_bool=False, nonempty=False):
    def check(a, dims):
        _tensor(name, a)
        check_dtype(name, "a", a, kinds)
        dims = check_dims(name, "dims", dims, a.ndim)
        if nonempty:
            for d in dims:
                s = a.shape[d]
                if isinstance(s, int) and s == 0:
                    fail(name, f"cannot reduce over dim {d} of size 0 (the reduction has no identity)")

    def kernel(xp, a, dims):
        dt = dtype_of(a)
        out_dt = _t.bool_ if out_bool else dt
        dims = tuple(int(d) for d in dims)
        with np.errstate(all="ignore"):
            if not dims:
                if name == "sum" and dt.is_floating_point:
                    return finish(xp, a + a.dtype.type(0), out_dt)     # 0 + a: -0.0 sums to +0.0
                return finish(xp, a.copy() if not out_bool else a != 0, out_dt)
            r = fn(xp, a.astype(compute_np(dt), copy=False), dims)
        return finish(xp, r, out_dt)
    kernel.__name__ = name

    def meta(a, dims):
        shape = _meta.reduced_shape(tuple(a.shape), tuple(dims), False)
        return _meta.out(shape, _t.bool_ if out_bool else a.dtype)

    return _export(defprim(f"{name}(Tensor a, int[] dims) -> Tensor", meta=meta, tags=("reduction",),
                           check=check, doc=doc)(kernel))


_reduction("sum", lambda xp, x, d: xp.sum(x, axis=d), NUM,
           "Sum over ``dims`` (0 for an empty reduction, 0 + a over no dims: -0.0 gives +0.0); integers "
           "wrap.")
_reduction("prod", lambda xp, x, d: xp.prod(x, axis=d), NUM,
           "Product over ``dims`` (1 for an empty reduction); integers wrap.")
_reduction("amax", lambda xp, x, d: xp.max(x, axis=d), ANY,
           "Maximum over ``dims``; NaN if any element is NaN. Reducing a size-0 dim is an error.",
           nonempty=True)
_reduction("amin", lambda xp, x, d: xp.min(x, axis=d), ANY,
           "Minimum over ``dims``; NaN if any element is NaN. Reducing a size-0 dim is an error.",
           nonempty=True)
_reduction("any", lambda xp, x, d: xp.any(x != 0, axis=d), ANY,
           "Whether any element over ``dims`` is nonzero (NaN counts as nonzero), as bool.", out_bool=True)
_reduction("all", lambda xp, x, d: xp.all(x != 0, axis=d), ANY,
           "Whether every element over ``dims`` is nonzero, as bool (True for an empty reduction).",
           out_bool=True)


# ---------------------------------------------------------------------- argmax / argmin
def _arg(name, fn, doc):
    def check(a, dim):
        _tensor(name, a)
        check_dtype(name, "a", a, ANY)
        dim = check_dim(name, "dim", dim, a.ndim)
        if a.ndim:
            s = a.shape[dim]
            if isinstance(s, int) and s == 0:
                fail(name, f"cannot reduce over dim {dim} of size 0")

    def kernel(xp, a, dim):
        dt = dtype_of(a)
        if a.ndim == 0:
            return xp.zeros((), dtype=np.int64)
        x = a.astype(compute_np(dt), copy=False) if dt.category == 2 else a
        return finish(xp, fn(xp, x, int(dim)), _t.int64)
    kernel.__name__ = name

    def meta(a, dim):
        shape = _meta.reduced_shape(tuple(a.shape), (dim,) if a.ndim else (), False)
        return _meta.out(shape, _t.int64)

    return _export(defprim(f"{name}(Tensor a, int dim) -> Tensor", meta=meta, tags=("reduction",),
                           check=check, doc=doc)(kernel))


def _nan_first(npfn):
    def fn(xp, x, dim):
        r = npfn(x, axis=dim)
        if x.dtype.kind == "f":
            nan = xp.isnan(x)
            if nan.any():
                r = xp.where(nan.any(axis=dim), xp.argmax(nan, axis=dim), r)
        return r
    return fn


_arg("argmax", _nan_first(np.argmax), "Index (int64) of the largest element along ``dim``; the first one "
     "on ties; NaN counts as larger than everything (the first NaN wins). A 0-d input gives 0.")
_arg("argmin", _nan_first(np.argmin), "Index (int64) of the smallest element along ``dim``; the first one "
     "on ties; a NaN wins like in argmax (PyTorch's NaN propagation). A 0-d input gives 0.")


# ---------------------------------------------------------------------- var
def _var_check(a, dims, correction):
    _tensor("var", a)
    check_dtype("var", "a", a, FLOAT)
    check_dims("var", "dims", dims, a.ndim)


def _var_meta(a, dims, correction):
    return _meta.out(_meta.reduced_shape(tuple(a.shape), tuple(dims), False), a.dtype)


@defprim("var(Tensor a, int[] dims, float correction) -> Tensor", meta=_var_meta, tags=("reduction",),
         check=_var_check)
def _var(xp, a, dims, correction):
    """Variance over ``dims``: sum((a - mean)^2) / (N - correction), N the number of reduced
    elements, computed in two passes (the mean first, then the squared deviations) so it is
    stable for large means. N - correction <= 0 gives inf (or NaN for 0/0), as PyTorch.
    Floating tensors only; float16/bfloat16 accumulate in float32."""
    dt = dtype_of(a)
    dims = tuple(int(d) for d in dims)
    x = a.astype(compute_np(dt), copy=False)
    n = 1
    for d in dims:
        n *= a.shape[d]
    with np.errstate(all="ignore"):
        if not dims:
            m = x
        else:
            m = xp.mean(x, axis=dims, keepdims=True) if n else xp.full([1 if i in dims else s for i, s in
                                                                       enumerate(x.shape)], np.nan, x.dtype)
        dev = x - m
        ss = xp.sum(dev * dev, axis=dims) if dims else dev * dev
        r = ss / x.dtype.type(max(n - correction, 0))
    return finish(xp, r, dt)


_export(_var)


# ---------------------------------------------------------------------- scans
def _scan(name, fn, doc):
    def check(a, dim):
        _tensor(name, a)
        check_dtype(name, "a", a, NUM)
        check_dim(name, "dim", dim, a.ndim)

    def kernel(xp, a, dim):
        dt = dtype_of(a)
        if a.ndim == 0:
            return a.copy()
        with np.errstate(all="ignore"):
            r = fn(xp, a.astype(compute_np(dt), copy=False), int(dim))
        return finish(xp, r, dt)
    kernel.__name__ = name

    def meta(a, dim):
        return _meta.out(tuple(a.shape), a.dtype)

    return _export(defprim(f"{name}(Tensor a, int dim) -> Tensor", meta=meta, tags=("scan",), check=check,
                           doc=doc)(kernel))


# (``+ 0``: the running sum starts at +0, as PyTorch's and the compiled scan: a -0.0 prefix sums to +0.0)
_scan("cumsum", lambda xp, x, d: xp.cumsum(x, axis=d) + 0, "Inclusive prefix sum along ``dim`` (same dtype; "
      "integers wrap; float16/bfloat16 accumulate in float32).")
_scan("cumprod", lambda xp, x, d: xp.cumprod(x, axis=d), "Inclusive prefix product along ``dim`` (same "
      "dtype; integers wrap).")
