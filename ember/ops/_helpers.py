"""Helpers shared by op kernels, meta functions and derivative formulas.

Kernels see backend arrays (numpy/cupy) and Python scalars, never Tensors;
formulas see Tensors. Both need PyTorch's promotion and dim handling, which
live here once.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..types import _BY_NP, from_numpy_dtype


def np_is_float(dt) -> bool:
    """Whether a numpy dtype is floating point, bfloat16 included: ml_dtypes'
    bfloat16 has ``kind == 'V'``, so ``dtype.kind == 'f'`` alone misses it."""
    return dt.kind == "f" or dt == _t.bfloat16.np


def np_finfo(dt):
    """``np.finfo`` that also knows bfloat16."""
    import ml_dtypes
    return ml_dtypes.finfo(dt)

_SCALAR_TYPES = (bool, int, float, complex, np.bool_, np.integer, np.floating, np.complexfloating)


def is_scalar(x):
    return isinstance(x, _SCALAR_TYPES)


# ---------------------------------------------------------------------- promotion (arrays)
def result_dtype(*xs):
    """PyTorch promotion over arrays (ndim>0 / 0-d tiers) and Python scalars."""
    if len(xs) == 2:
        a, b = xs
        if type(a) is np.ndarray:
            if type(b) is np.ndarray:
                if a.dtype == b.dtype:
                    return _BY_NP[a.dtype]
            elif type(b) is float:
                dt = _BY_NP[a.dtype]
                if dt.category == 2:
                    return dt
            elif type(b) is int:
                dt = _BY_NP[a.dtype]
                if dt.category >= 1:
                    return dt
    dims, zero, scal = [], [], []
    for x in xs:
        if x is None:
            continue
        if isinstance(x, _SCALAR_TYPES):
            scal.append(x)
        elif x.ndim == 0:
            zero.append(from_numpy_dtype(x.dtype))
        else:
            dims.append(from_numpy_dtype(x.dtype))
    return _t.result_type_from(dims, zero, scal)


def cast(x, dt):
    """Cast an array to ember dtype ``dt`` (no copy if already); scalars pass through."""
    if isinstance(x, _SCALAR_TYPES):
        if dt.category == 0:
            return bool(x)
        if dt.category == 1 and isinstance(x, (float, np.floating)):
            return x
        return x
    if x.dtype != dt.np:
        return x.astype(dt.np)
    return x


def float_dtype_for(dt):
    """The dtype a float-only op (exp, sqrt, ...) computes in for input dtype ``dt``."""
    return dt if dt.is_floating_point else _t.get_default_dtype()


def to_array(xp, x, dt):
    """An array of dtype ``dt`` for a scalar or array."""
    if isinstance(x, _SCALAR_TYPES):
        return xp.asarray(x, dtype=dt.np)
    return cast(x, dt)


def binary_kernel(npname, *, float_only=False, out_bool=False):
    """Kernel for a promoting binary pointwise op named ``npname`` in the array namespace."""
    def kernel(xp, a, b):
        dt = result_dtype(a, b)
        if float_only and not dt.is_floating_point:
            dt = _t.get_default_dtype()
        a = to_array(xp, a, dt)
        b = to_array(xp, b, dt)
        out = getattr(xp, npname)(a, b)
        return xp.asarray(out)
    kernel.__name__ = f"{npname}_kernel"
    return kernel


def unary_float_kernel(fn):
    """Kernel for a float-valued unary op: ints/bools compute in the default float dtype."""
    def kernel(xp, a):
        dt = from_numpy_dtype(a.dtype)
        if not dt.is_floating_point:
            a = a.astype(_t.get_default_dtype().np)
        return xp.asarray(fn(xp, a))
    kernel.__name__ = getattr(fn, "__name__", "unary_kernel")
    return kernel


# ---------------------------------------------------------------------- dims
def wrap_dim(dim, ndim):
    n = ndim if ndim > 1 else 1
    if type(dim) is int and -n <= dim < n:       # the common case (the ABC check costs ~0.4 us)
        return dim + n if dim < 0 else dim
    if not isinstance(dim, numbers.Integral):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def wrap_dims(dims, ndim):
    """Normalize ``dim`` arguments (int, list, tuple or None=all) to a sorted tuple."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, numbers.Integral):
        dims = (dims,)
    out = tuple(sorted({wrap_dim(d, ndim) for d in dims}))
    if len(out) != len(tuple(dims)):
        raise RuntimeError(f"dim {list(dims)} appears multiple times in the list of dims")
    return out


def broadcast_shapes(*shapes):
    for shape in shapes:
        for n in shape:
            if type(n) is not int:
                if isinstance(n, numbers.Integral):
                    continue
                # symbolic sizes (SymInt): numpy would force them to ints
                from ._meta import broadcast_shapes as _sym_broadcast
                return _sym_broadcast(*shapes)
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        a = tuple(shapes[0])           # torch's infer_size: the shapes broadcast one after another
        for b in shapes[1:]:
            b = tuple(b)
            for i in range(1, min(len(a), len(b)) + 1):
                if a[-i] != b[-i] and a[-i] != 1 and b[-i] != 1:
                    raise RuntimeError(f"The size of tensor a ({a[-i]}) must match the size of tensor b "
                                       f"({b[-i]}) at non-singleton dimension {max(len(a), len(b)) - i}") from None
            a = tuple(np.broadcast_shapes(a, b))
        raise RuntimeError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None


# ---------------------------------------------------------------------- formulas
def same_shape(a, b) -> bool:
    """``a`` and ``b`` are the same shape *for every size*: symbolic sizes are compared as
    expressions, never by their example values (``==`` on a SymInt decides by the hint and
    records a guard, and a tuple ``==`` compares items even when the lengths differ: a
    shortcut ``(s0*s1, 64) == (64,)`` would pin s0*s1 to 64 whenever the example matches).
    False where a size is symbolic and the expressions differ: callers then do the general
    thing (a no-op broadcast or reshape when the sizes turn out equal)."""
    a, b = tuple(a), tuple(b)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        ex, ey = getattr(x, "expr", None), getattr(y, "expr", None)
        if ex is None and ey is None:
            if x != y:
                return False
        elif ex is None or ey is None or ex != ey:
            return False
    return True


def sum_to(grad, shape):
    """Reduce a broadcast gradient back to ``shape`` (the inverse of broadcasting)."""
    shape = tuple(shape)
    gshape = tuple(grad.shape)
    if same_shape(gshape, shape):
        return grad
    lead = len(gshape) - len(shape)
    dims = list(range(lead))
    for i, s in enumerate(shape):
        if s == 1 and gshape[lead + i] != 1:
            dims.append(lead + i)
    if dims:
        grad = grad.sum(dims, keepdim=True)
    if lead:
        grad = grad.reshape(shape)
    elif not same_shape(grad.shape, shape):
        grad = grad.reshape(shape)
    return grad


def grad_for(g, x):
    """``g`` reduced to ``x``'s shape, or None when x is not a Tensor (a scalar arg)."""
    if x is None or isinstance(x, _SCALAR_TYPES):
        return None
    return sum_to(g, x.shape)


# ---------------------------------------------------------------------- PyTorch's output layouts
# Kernel halves of the layout rules in ``ember.ops._meta`` (``preserve_strides``,
# ``contiguous_strides``): the metas compute the same strides from tensor metadata, so an
# eager result and its fake twin agree. The row-major (common) case returns early, costing
# a flag test.
def estrides(a):
    """An array's strides in elements."""
    isz = a.itemsize
    return tuple(s // isz for s in a.strides)


def _canonical_c(a):
    """``a`` is row-major with the strides a fresh row-major array of its shape has (numpy's
    C flag ignores the strides of size-1 dims; PyTorch reports them)."""
    if not a.flags.c_contiguous:
        return False
    shape = a.shape
    if 1 not in shape or 0 in shape:
        return True
    key = (shape, a.itemsize)
    st = _C_STRIDES.get(key)
    if st is None:
        if len(_C_STRIDES) > 4096:
            _C_STRIDES.clear()
        acc, rev = a.itemsize, []
        for n in reversed(shape):
            rev.append(acc)
            acc *= n
        st = _C_STRIDES[key] = tuple(reversed(rev))
    return a.strides == st


_C_STRIDES = {}     # (shape with a size-1 dim, itemsize) -> row-major byte strides


def empty_strided(xp, shape, est, dtype):
    """An uninitialised array of ``shape`` with element strides ``est`` (dense, non-negative)."""
    shape = tuple(shape)
    from ._meta import contiguous_strides
    if tuple(est) == contiguous_strides(shape):
        return xp.empty(shape, dtype)
    dtype = np.dtype(dtype)
    n = 1
    for s in shape:
        n *= s
    buf = xp.empty(n, dtype)
    bst = tuple(s * dtype.itemsize for s in est)
    if xp is np:
        return np.ndarray(shape, dtype, buffer=buf, strides=bst)
    return xp.lib.stride_tricks.as_strided(buf, shape, bst)


def empty_preserve(xp, a, dtype=None):
    """An uninitialised array laid out as PyTorch's ``empty_like(a)`` (preserve_format:
    ``a``'s strides when it is dense, else dense in its dim order)."""
    dt = a.dtype if dtype is None else dtype
    if _canonical_c(a):
        return xp.empty(a.shape, dt)
    from ._meta import preserve_strides
    return empty_strided(xp, a.shape, preserve_strides(a.shape, estrides(a)), dt)


def half_source(a, npdt):
    """``a`` ready for a cast to ``npdt``: PyTorch converts float64 (and complex128) to
    float16 through float32 -- c10::Half is built from a float only -- so a value within a
    float32 ulp of a float16 tie rounds twice; numpy's direct cast would round it once and
    land one float16 step away from torch's. A bfloat16 source cast to an integer dtype goes
    through float32 (exact), as c10::BFloat16 converts through float: ml_dtypes' own cast
    gives 0 for nan/inf/out-of-range values and clamps negatives into unsigned types, where
    torch's C cast gives INT_MIN (int32/int64) or wraps through int (-2.5 -> uint8 254).
    Other casts are left to numpy."""
    if npdt == np.float16 and a.dtype in (np.float64, np.complex128):
        return a.astype(np.float32 if a.dtype == np.float64 else np.complex64)
    if a.dtype == _t.bfloat16.np and np.dtype(npdt).kind in "iu":
        return a.astype(np.float32)
    return a


def copy_preserve(xp, a, src=None, dtype=None):
    """A copy of ``src`` (default ``a``, same shape) in the layout of ``empty_like(a)``;
    values are copied unchanged (a dtype cast where ``dtype`` is given)."""
    src = a if src is None else src
    out = empty_preserve(xp, a, dtype)
    if out.dtype == src.dtype:
        out[...] = src
    else:
        xp.copyto(out, src, casting="unsafe")
    return out


def as_contiguous(xp, r, src=None):
    """``r`` as a row-major array with PyTorch's contiguous strides (size-1 dims included):
    ``r`` itself when it already is, a re-strided view of the same memory when only a
    size-1 dim's stride differs, else a row-major copy. ``src``: the kernel's input, when
    ``r`` is numpy's reduction, cumulative or elementwise result of it -- numpy allocates
    those row-major (size-1 dims included) for a row-major input, which then decides the
    common case without looking at ``r``'s strides."""
    if src is not None and src.flags.c_contiguous:
        return r
    if _canonical_c(r):
        return r
    if not r.flags.c_contiguous:
        return xp.ascontiguousarray(r)
    from ._meta import contiguous_strides
    bst = tuple(s * r.itemsize for s in contiguous_strides(r.shape))
    if xp is np:
        return np.ndarray(r.shape, r.dtype, buffer=r, strides=bst)
    return xp.lib.stride_tricks.as_strided(r, r.shape, bst)


def int_zero_check(xp, divisor) -> None:
    """Integer division by zero raises, as PyTorch's eager kernels do (the ops check before
    computing, the prims' integer division too, and compiled kernels flag it)."""
    if bool(xp.any(divisor == 0)):
        raise RuntimeError("ZeroDivisionError")
