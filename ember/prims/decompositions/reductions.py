"""Decompositions of the reductions (ember/ops/reduction.py) into prims.

The reduction prims drop the reduced dims and keep the dtype; so each
decomposition (1) wraps the user's dims (``None``/``[]`` = all), (2) converts
to the accumulation dtype first (integers and bool sum to int64, float16/
bfloat16 accumulate in float32), (3) reduces, (4) re-inserts kept dims with
``expand_dims`` and converts to the result dtype.

softmax/log_softmax/logsumexp subtract the maximum first, as the kernels do, so
they are stable for large inputs (logsumexp the finite one, ±inf -> 0, as PyTorch); var/std use ``prims.var``
(two-pass); topk/sort/argsort stay on the extern prims ``topk``/``sort``.
"""
from __future__ import annotations

import math

from ... import types as _t
from ...ops._helpers import wrap_dim
from ...ops.reduction import reduce_dims
from ..table import register_decomposition
from .pointwise import bcast, comp, fresh, full, to
from .shape import div_by_size

from ember import prims  # noqa: E402


def _dims(dim, ndim):
    """Wrapped, sorted dims of a reduction over a tensor of rank ``ndim`` (a 0-d tensor has none)."""
    return tuple(reduce_dims(dim, ndim)) if ndim else ()


def _keep(r, dims, keepdim, ndim):
    if keepdim and dims and ndim:
        return prims.expand_dims(r, dims)
    return r


def _numel(shape, dims):
    n = 1
    for d in dims:
        n = n * shape[d]
    return n


def _acc_dtype(dt):
    return _t.int64 if dt.category < 2 else dt


def _reduce(prim, x, dims, keepdim):
    """``prim`` over ``dims`` (a fresh tensor even for no dims), then keepdim."""
    r = prim(x, dims)
    return _keep(r, dims, keepdim, x.ndim)


# ---------------------------------------------------------------------- sum / mean / prod
@register_decomposition("sum")
def sum(self, dim=None, keepdim=False, *, dtype=None):
    out_dt = _t.as_dtype(dtype) if dtype is not None else _acc_dtype(self.dtype)
    dims = _dims(dim, self.ndim)
    x = to(self, comp(out_dt))
    return to(_reduce(prims.sum, x, dims, keepdim), out_dt)


@register_decomposition("mean")
def mean(self, dim=None, keepdim=False, *, dtype=None):
    dt = self.dtype if dtype is None else _t.as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {dt.legacy_name}")
    dims = _dims(dim, self.ndim)
    n = _numel(tuple(self.shape), dims)
    x = to(self, comp(dt))
    s = _reduce(prims.sum, x, dims, keepdim)
    r = div_by_size(s, n) if n else prims.mul(s, math.nan)
    return to(r, dt)


@register_decomposition("prod")
def prod(self, dim=None, keepdim=False, *, dtype=None):
    if dim is not None:
        dim = wrap_dim(dim, self.ndim)
    out_dt = _t.as_dtype(dtype) if dtype is not None else _acc_dtype(self.dtype)
    dims = _dims(dim, self.ndim)
    return to(_reduce(prims.prod, to(self, comp(out_dt)), dims, keepdim), out_dt)


# ---------------------------------------------------------------------- amax / amin / max / min
def _nonempty(name, x, dims, whole, exc):
    if x.numel() != 0:
        return
    if whole:
        raise exc(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                  f"reduction dim with the 'dim' argument.")
    for d in dims:
        if x.ndim and x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _amaxmin(name, prim):
    def f(self, dim=(), keepdim=False):
        dims = _dims(dim, self.ndim)
        whole = dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0)
        _nonempty(name, self, dims, whole, RuntimeError)
        return _reduce(prim, self, dims, keepdim)
    register_decomposition(name)(f)


_amaxmin("amax", prims.amax)
_amaxmin("amin", prims.amin)


def _full_maxmin(opname, name, prim):
    def f(self):
        _nonempty(name, self, (), True, RuntimeError)
        return prim(self, tuple(range(self.ndim)))
    register_decomposition(opname)(f)


_full_maxmin("max", "max", prims.amax)
_full_maxmin("min", "min", prims.amin)


def _dim_maxmin(opname, name, vprim, iprim):
    def f(self, dim, keepdim=False):
        d = wrap_dim(dim, self.ndim)
        if self.ndim == 0:
            return fresh(self), full((), 0, _t.int64, self.device)
        _nonempty(name, self, (d,), False, IndexError)
        vals = vprim(self, (d,))
        idx = iprim(self, d)
        return _keep(vals, (d,), keepdim, self.ndim), _keep(idx, (d,), keepdim, self.ndim)
    register_decomposition(opname)(f)


_dim_maxmin("max_dim", "max", prims.amax, prims.argmax)
_dim_maxmin("min_dim", "min", prims.amin, prims.argmin)


def _argmaxmin(name, prim):
    def f(self, dim=None, keepdim=False):
        if self.dtype is _t.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            _nonempty(name, self, (), True, IndexError)
            flat = prims.reshape(self, (self.numel(),)) if self.ndim != 1 else self
            r = prim(flat, 0)
            return prims.reshape(r, (1,) * self.ndim) if keepdim and self.ndim else r
        d = wrap_dim(dim, self.ndim)
        if self.ndim == 0:
            return full((), 0, _t.int64, self.device)
        _nonempty(name, self, (d,), False, IndexError)
        return _keep(prim(self, d), (d,), keepdim, self.ndim)
    register_decomposition(name)(f)


_argmaxmin("argmax", prims.argmax)
_argmaxmin("argmin", prims.argmin)


# ---------------------------------------------------------------------- var / std
def _var_acc_dtype(dt):
    """The dtype var/std/var_mean/std_mean compute in: float64 for float32 (torch's CPU Welford
    accumulates float in double, as eager: a float32 deviation near 1e19 squared overflows, and
    a row of values near 1e37 sums past float32's range, while the variance's root and the mean
    stay finite); float32 for float16/bfloat16 (as eager). The result is rounded once to ``dt``."""
    return _t.float64 if dt is _t.float32 else comp(dt)


def _var_core(a, dim, correction, keepdim, name, want_mean):
    if not a.dtype.is_floating_point:
        who = "std and var" if name in ("std", "var") else name
        raise RuntimeError(f"{who} only support floating point and complex dtypes")
    dims = _dims(dim, a.ndim)
    n = _numel(tuple(a.shape), dims)
    c = 1 if correction is None else correction
    if n - c <= 0:
        import warnings
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      f"reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    x = to(a, _var_acc_dtype(a.dtype))
    v = _keep(prims.var(x, dims, float(c)), dims, keepdim, a.ndim)
    m = None
    if want_mean:
        m = _keep(div_by_size(prims.sum(x, dims), n) if n else prims.mul(prims.sum(x, dims), math.nan),
                  dims, keepdim, a.ndim)
    return v, m


@register_decomposition("var")
def var(self, dim=None, *, correction=None, keepdim=False):
    v, _ = _var_core(self, dim, correction, keepdim, "var", False)
    return to(v, self.dtype)


@register_decomposition("std")
def std(self, dim=None, *, correction=None, keepdim=False):
    v, _ = _var_core(self, dim, correction, keepdim, "std", False)
    return to(prims.sqrt(v), self.dtype)        # the root of the float variance, rounded once (torch's kernel)


@register_decomposition("var_mean")
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    v, m = _var_core(self, dim, correction, keepdim, "var_mean", True)
    return to(v, self.dtype), to(m, self.dtype)


@register_decomposition("std_mean")
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    v, m = _var_core(self, dim, correction, keepdim, "std_mean", True)
    return to(prims.sqrt(v), self.dtype), to(m, self.dtype)


# ---------------------------------------------------------------------- norm
@register_decomposition("linalg_vector_norm")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    out_dt = self.dtype if dtype is None else _t.as_dtype(dtype)
    if not self.dtype.is_floating_point or not out_dt.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {self.dtype.legacy_name}")
    x = to(to(self, out_dt), comp(out_dt))
    dims = _dims(dim, self.ndim)
    p = float(ord)
    ax = prims.abs(x)
    if math.isinf(p):
        for d in dims:
            if self.shape[d] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {'' if p > 0 else '-'}inf norm "
                                   f"on the dimension {d} because this dimension is empty and the "
                                   f"operation does not have an identity")
        r = (prims.amax if p > 0 else prims.amin)(ax, dims)
    elif p == 0:
        r = prims.sum(prims.convert_element_type(prims.ne(ax, 0.0), ax.dtype), dims)
    elif p == 1:
        r = prims.sum(ax, dims)
    elif p == 2:
        r = prims.sqrt(prims.sum(prims.mul(ax, ax), dims))
    else:
        r = prims.pow(prims.sum(prims.pow(ax, p), dims), 1.0 / p)
    return to(_keep(r, dims, keepdim, self.ndim), out_dt)


# ---------------------------------------------------------------------- logsumexp
def _empty(x):
    """Whether ``x`` has no elements, without ``numel()`` (an int: it would specialise symbolic
    sizes); a zero size is always a plain int, never a SymInt."""
    return any(type(s) is int and s == 0 for s in x.shape)


def _finite_max(x, dims):
    """max over ``dims`` (kept as size 1) with ±inf replaced by 0, the kernels' shift."""
    if _empty(x):
        shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
        return full(shape, 0.0, x.dtype, x.device)
    m = prims.amax(x, dims)
    m = prims.where(prims.isinf(m), 0.0, m)
    return prims.expand_dims(m, dims) if dims else m


@register_decomposition("logsumexp")
def logsumexp(self, dim, keepdim=False):
    dt = self.dtype if self.dtype.is_floating_point else _t.get_default_dtype()
    x = to(to(self, dt), comp(dt))
    dims = _dims(dim, self.ndim)
    m = _finite_max(x, dims)
    e = prims.exp(prims.sub(x, bcast(m, tuple(x.shape))))
    s = prims.sum(e, dims)
    mm = prims.squeeze(m, dims) if dims else m
    r = prims.add(prims.log(s), mm)
    return to(_keep(r, dims, keepdim, self.ndim), dt)


# ---------------------------------------------------------------------- cumsum / cumprod
def _scan_in_acc(prim, x, d):
    """``prim`` (cumsum / cumprod) of ``x`` along ``d`` accumulated as PyTorch's CPU scan
    (``acc_type<T, false>``): float32 in float64, each partial result rounded once to float32
    (eager: ``ember.ops.reduction._cum_acc``; a float32 running sum was an ulp off eager in most
    rows). Other dtypes scan in their own (half precision accumulates in float32 in the
    lowering)."""
    if x.dtype is not _t.float32:
        return prim(x, d)
    return to(prim(to(x, _t.float64), d), _t.float32)


@register_decomposition("_reverse_cumsum")
def _reverse_cumsum(self, dim):
    if self.ndim == 0:
        return fresh(self)
    d = wrap_dim(dim, self.ndim)
    return prims.flip(_scan_in_acc(prims.cumsum, prims.flip(self, (d,)), d), (d,))


def _scan(name, prim):
    def f(self, dim, *, dtype=None):
        d = wrap_dim(dim, self.ndim)
        out_dt = _t.as_dtype(dtype) if dtype is not None else _acc_dtype(self.dtype)
        x = to(self, out_dt)
        if self.ndim == 0:
            return fresh(x) if x is self else x
        return _scan_in_acc(prim, x, d)
    register_decomposition(name)(f)


_scan("cumsum", prims.cumsum)
_scan("cumprod", prims.cumprod)


# ---------------------------------------------------------------------- all / any
def _allany(name, prim):
    def f(self, dim=None, keepdim=False):
        # (``dim=()`` reduces nothing -- elementwise ``x != 0``, as PyTorch and eager -- where
        # other reductions read an empty dim list as every dim)
        dims = () if isinstance(dim, (list, tuple)) and len(dim) == 0 else _dims(dim, self.ndim)
        r = _reduce(prim, self, dims, keepdim)
        return to(r, _t.uint8) if self.dtype is _t.uint8 else r
    register_decomposition(name)(f)


_allany("all", prims.all)
_allany("any", prims.any)


# ---------------------------------------------------------------------- softmax / log_softmax
def _softmax(log, name):
    def f(self, dim, half_to_float):
        if not self.dtype.is_floating_point:
            d = wrap_dim(dim, self.ndim)
            impl = f"{name}_lastdim_kernel_impl" if d == max(self.ndim, 1) - 1 else f"{name}_kernel_impl"
            raise NotImplementedError(f'"{impl}" not implemented for \'{self.dtype.legacy_name}\'')
        d = wrap_dim(dim, self.ndim)
        out_dt = _t.float32 if half_to_float else self.dtype
        x = to(self, comp(self.dtype))
        if self.ndim == 0:
            # a one-element softmax: x - max(x) is 0, or NaN for NaN and ±inf (as PyTorch's)
            z = prims.sub(x, x)
            return to(z if log else prims.exp(z), out_dt)
        if _empty(self):
            return to(fresh(x) if x is self else x, out_dt)
        shape = tuple(x.shape)
        # the raw max, not _finite_max (PyTorch's kernel): a row holding +inf, or only -inf,
        # is NaN throughout (inf - inf), as in eager
        m = prims.expand_dims(prims.amax(x, (d,)), (d,))
        z = prims.sub(x, bcast(m, shape))
        e = prims.exp(z)
        s = prims.expand_dims(prims.sum(e, (d,)), (d,))
        if log and x is not self and not half_to_float and d == self.ndim - 1:
            # eager's (torch's) last-dim half kernel: the sum and its log rounded to the half dtype
            s = to(to(s, self.dtype), x.dtype)
            r = prims.sub(z, bcast(to(to(prims.log(s), self.dtype), x.dtype), shape))
        elif log:
            r = prims.sub(z, bcast(prims.log(s), shape))
        elif x is not self and not half_to_float and d < self.ndim - 1:
            # a half softmax over a dim that is not the last: torch's vector path divides the
            # float32 exp by the sum (eager rounds its scalar-path lanes twice besides: an ulp)
            r = prims.div(e, bcast(s, shape))
        else:
            # times the reciprocal, as PyTorch's CPU kernel does: one divide per row, not per
            # element (a 1000x16000 softmax's last pass: 2.99 -> 2.84 ms in one process)
            r = prims.mul(e, bcast(prims.reciprocal(s), shape))
        return to(r, out_dt)
    return f


register_decomposition("_softmax")(_softmax(False, "softmax"))
register_decomposition("_log_softmax")(_softmax(True, "log_softmax"))


# ---------------------------------------------------------------------- sort / argsort / topk (extern prims)
@register_decomposition("sort")
def sort(self, dim=-1, descending=False, *, stable=False):
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return fresh(self), full((), 0, _t.int64, self.device)
    v, i = prims.sort(self, d, bool(descending), bool(stable))
    return v, i


@register_decomposition("argsort")
def argsort(self, dim=-1, descending=False, stable=False):
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return full((), 0, _t.int64, self.device)
    return prims.sort(self, d, bool(descending), bool(stable))[1]


@register_decomposition("topk")
def topk(self, k, dim=-1, largest=True, sorted=True):
    d = wrap_dim(dim, self.ndim)
    if self.dtype is _t.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = self.shape[d] if self.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if self.ndim == 0:
        return fresh(self), full((), 0, _t.int64, self.device)
    v, i = prims.topk(self, k, d, bool(largest), bool(sorted))
    return v, i


# ---------------------------------------------------------------------- gradient routing helpers
@register_decomposition("_reduction_gather")
def _reduction_gather(self, index, dim):
    if self.ndim == 0:
        return fresh(self)
    return prims.gather(self, wrap_dim(dim, self.ndim), to(index, _t.int64))


@register_decomposition("_reduction_scatter")
def _reduction_scatter(src, index, dim, size):
    if len(size) == 0:
        return prims.reshape(src, ())
    zeros = full(tuple(size), 0, src.dtype, src.device)
    return prims.scatter(zeros, wrap_dim(dim, len(size)), to(index, _t.int64), src)
