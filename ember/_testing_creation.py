"""``ember.testing.make_tensor``: random test inputs with torch.testing's per-dtype ranges.

Kept apart from the comparison code in ``testing.py`` because it only creates tensors. The
defaults (floats in [-9, 9), integers in [-9, 10) clamped to the dtype, bools either value),
the argument checks and their messages follow torch 2.13 so a test written against torch
behaves the same here.
"""
from __future__ import annotations

import collections.abc
import math
import warnings

from . import types as _t


def _dtypes(*names):
    return tuple(getattr(_t, n) for n in names if hasattr(_t, n))


_BOOLEAN_OR_INTEGRAL = _dtypes("bool_", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
_COMPLEX = _dtypes("complex32", "complex64", "complex128")
_FLOATING_OR_COMPLEX = _dtypes("float16", "bfloat16", "float32", "float64") + _COMPLEX


def _finfo(dtype):
    """finfo of ``dtype``, of its real part for complex dtypes (torch.finfo accepts those)."""
    import ember
    real = {_t.complex64: _t.float32, _t.complex128: _t.float64}.get(dtype, dtype)
    return ember.finfo(real)


def _modify_low_high(low, high, *, lowest_inclusive, highest_exclusive, default_low, default_high, dtype):
    """Apply the defaults, reject bad bounds and clamp them into what ``dtype`` can hold."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype in _FLOATING_OR_COMPLEX:
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types "
                      "is deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                      FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest_inclusive or low >= highest_exclusive:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), "
                         f"but {dtype} only supports [{lowest_inclusive}, {highest_exclusive})")
    low = min(max(low, lowest_inclusive), highest_exclusive)
    high = min(max(high, lowest_inclusive), highest_exclusive)
    if dtype in _BOOLEAN_OR_INTEGRAL:
        # randint's upper bound is exclusive: ceil both so no value falls below ``low``
        return math.ceil(low), math.ceil(high)
    return low, high


def _uniform_fill(t, low, high):
    """uniform_ on [low, high); a range wider than the dtype's max is drawn halved, then doubled."""
    if high - low >= _finfo(t.dtype).max:
        t.uniform_(low / 2, high / 2)
        return t.mul_(2)
    return t.uniform_(low, high)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` filled with values drawn uniformly from [low, high) (see the module)."""
    from . import ops  # noqa: F401  (registers the factories)
    import ember
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
                         f"but got noncontiguous={noncontiguous} and memory_format={memory_format}")
    if requires_grad and dtype in _BOOLEAN_OR_INTEGRAL:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, "
                         f"but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        # twice the last dim, then every other element from index 1: distinct values, an offset view
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is _t.bool_:
        low, high = _modify_low_high(low, high, lowest_inclusive=0, highest_exclusive=2, default_low=0,
                                     default_high=2, dtype=dtype)
        result = ember.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _BOOLEAN_OR_INTEGRAL:
        info = ember.iinfo(dtype)
        # randint cannot sample int64's max (its bounds are int64), so that one stays exclusive
        low, high = _modify_low_high(low, high, lowest_inclusive=info.min,
                                     highest_exclusive=info.max + (1 if dtype is not _t.int64 else 0),
                                     default_low=-9, default_high=10, dtype=dtype)
        result = ember.randint(low, high, shape, device=device, dtype=dtype)
    elif dtype in _FLOATING_OR_COMPLEX:
        info = _finfo(dtype)
        low, high = _modify_low_high(low, high, lowest_inclusive=info.min, highest_exclusive=info.max,
                                     default_low=-9, default_high=9, dtype=dtype)
        result = ember.empty(shape, device=device, dtype=dtype)
        _uniform_fill(ember.view_as_real(result) if dtype in _COMPLEX else result, low, high)
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by torch.testing.make_tensor()."
                        " To request support, file an issue at: https://github.com/pytorch/pytorch/issues")
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype in _BOOLEAN_OR_INTEGRAL else _finfo(dtype).tiny
    if dtype in _FLOATING_OR_COMPLEX:
        result.requires_grad = requires_grad
    return result
