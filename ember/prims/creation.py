"""Creation prims: ``iota`` and ``full``.

Why only two: every factory (zeros, ones, arange, linspace, eye, *_like)
is a ``full`` or an ``iota`` followed by elementwise prims, and a code
generator turns both into an index expression with no memory read.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import as_int_list, defprim, fail, fmt_shape, is_scalar

__all__ = ["iota", "full"]


def _iota_check(length, start, step, dtype, device=None):
    if isinstance(length, bool) or not (isinstance(length, numbers.Integral) or hasattr(length, "expr")):
        fail("iota", f"argument 'length' must be an int, not {type(length).__name__}")
    if isinstance(length, int) and length < 0:
        fail("iota", f"argument 'length' must be >= 0, got {length}")
    dt = _t.as_dtype(dtype)
    for n, v in (("start", start), ("step", step)):
        if not is_scalar(v):
            fail("iota", f"argument '{n}' must be a Python number, not {type(v).__name__}")
        if _t.scalar_category(v) > dt.category:
            fail("iota", f"argument '{n}' is a Python {type(v).__name__} but 'dtype' is {dt.name}")
    if dt is _t.bool_:
        fail("iota", "argument 'dtype' cannot be bool")


@defprim("iota(SymInt length, Scalar start, Scalar step, ScalarType dtype, Device? device=None) -> Tensor",
         check=_iota_check, meta=lambda length, start, step, dtype, device=None: _meta.out((length,), _t.as_dtype(dtype)))
def iota(xp, length, start, step, dtype, device=None):
    """The 1-D tensor ``[start + i * step for i in range(length)]`` of ``dtype``: integers
    exactly (wrapping), floats computed in float64 and rounded once (so ``start + i * step``
    is not an accumulated sum)."""
    dt = _t.as_dtype(dtype)
    n = int(length)
    if dt.category == 1:
        r = np.asarray(int(start), dtype=np.int64) + np.arange(n, dtype=np.int64) * np.int64(int(step))
    else:
        r = float(start) + np.arange(n, dtype=np.float64) * float(step)
    return xp.asarray(r.astype(dt.np))


def _full_check(shape, fill_value, dtype, device=None):
    shape = as_int_list("full", "shape", shape)
    for s in shape:
        if isinstance(s, int) and s < 0:
            fail("full", f"argument 'shape' has a negative size: {fmt_shape(shape)}")
    if not is_scalar(fill_value):
        fail("full", f"argument 'fill_value' must be a Python number, not {type(fill_value).__name__}")
    _t.as_dtype(dtype)


@defprim("full(SymInt[] shape, Scalar fill_value, ScalarType dtype, Device? device=None) -> Tensor",
         check=_full_check, meta=lambda shape, fill_value, dtype, device=None: _meta.out(tuple(shape), _t.as_dtype(dtype)))
def full(xp, shape, fill_value, dtype, device=None):
    """A contiguous tensor of ``shape`` and ``dtype`` with every element ``fill_value``
    converted to ``dtype`` (integers wrap, floats round to nearest, anything to bool is != 0).
    Unlike the other prims, ``fill_value`` may be of a higher kind than ``dtype``: the
    conversion is the point."""
    dt = _t.as_dtype(dtype)
    if dt is _t.bool_:
        v = np.asarray(fill_value != 0)
    elif dt.category == 1 and not isinstance(fill_value, (float, np.floating)):
        v = np.asarray(int(fill_value)).astype(dt.np)
    else:
        v = np.asarray(fill_value, dtype=np.float64).astype(dt.np) if dt.category == 2 else \
            np.asarray(float(fill_value)).astype(dt.np)
    # a numpy scalar, not the 0-d array: cupy's calls refuse host arrays
    return xp.full(tuple(int(s) for s in shape), v[()], dtype=dt.np)
