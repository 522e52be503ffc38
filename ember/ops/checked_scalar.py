"""PyTorch's checked conversion of a Python number into an integer dtype.

Arithmetic with a Python number wraps it into a narrow integer dtype (``int8_tensor + 300``
adds 44), in PyTorch as here. But where the number *becomes an element* or a bound -- a fill
value, ``masked_fill``/``index_fill``/``scatter``'s value, a ``clamp``/``hardtanh``/``threshold``
limit, ``alpha``, ``addcmul``'s ``value``, ``where``'s scalar branch, ``torch.tensor([...],
dtype=int8)`` -- PyTorch checks that it fits and raises "value cannot be converted to type
int8_t without overflow". Wrapping there would be a silent wrong answer (``masked_fill(m, 300)``
writing 44), so the kernels and their metas call :func:`check_fits` with the same arguments.

The rule is c10's ``overflows``: an integer fits a signed dtype when it lies in its range and an
unsigned one when it is at most the maximum and not below minus the maximum (-1 into uint8 is
255, as C converts); a float fits when it is finite and within the range before truncation (2.5
into int8 is 2). Floating dtypes are not checked (PyTorch's own rules there differ op by op).
"""
from __future__ import annotations

import math

import numpy as np

# the C type names PyTorch's op-level error uses, and the dtype names torch.tensor()'s uses
_C_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
            "float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
            "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t"}


def fits(value, dtype) -> bool:
    """Whether the Python number ``value`` converts to the integer ``dtype`` without overflow
    (always true for a bool, a non-integer dtype, or a value that is not a number)."""
    if isinstance(value, (complex, np.complexfloating)) and getattr(dtype, "category", 3) < 3:
        return False   # a complex number into a real dtype: torch refuses, it would drop the imaginary part
    if getattr(dtype, "category", None) != 1 or isinstance(value, (bool, np.bool_)):
        return True
    # a sub-byte dtype (ember.types.SUBBYTE_DTYPES): torch writes no numbers (zero: zero bytes)
    if dtype._limited is not None and dtype.np.names is not None:
        return value == 0
    info = np.iinfo(dtype.np)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return math.isfinite(v) and info.min <= v <= info.max
    if not isinstance(value, (int, np.integer)):
        return True
    v = int(value)
    if info.min < 0:
        return info.min <= v <= info.max
    return -info.max <= v <= info.max


def check_fits(value, dtype, *, tensor_names=False) -> None:
    """Raise PyTorch's ``RuntimeError`` when ``value`` does not fit ``dtype`` (see the module
    docstring). ``tensor_names`` words it as ``torch.tensor()`` does (``int8``, not ``int8_t``)."""
    if not fits(value, dtype):
        if dtype._limited is not None and dtype.np.names is not None:   # sub-byte: torch has no fill
            raise NotImplementedError(f'"fill_cpu" not implemented for \'{dtype._legacy}\'')
        name = dtype.name if tensor_names else _C_NAMES.get(dtype.name, dtype.name)
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def checked_array(xp, value, dtype):
    """``value`` (a Python number) as a 0-d array of ``dtype`` after :func:`check_fits`:
    integers that fit an unsigned dtype from below wrap as in C (-1 -> 255), floats truncate."""
    check_fits(value, dtype)
    if dtype.category == 1:
        if dtype._limited is not None and dtype.np.names is not None:   # sub-byte: only zero gets here
            return xp.zeros((), dtype.np)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return xp.asarray(value).astype(dtype.np)
    if dtype.np == np.float16 and isinstance(value, (float, np.floating)):
        value = np.float32(value)          # through float32, as PyTorch's c10::Half (double rounding)
    return xp.asarray(value, dtype=dtype.np)


def fits_floating(value, dtype) -> bool:
    """c10's ``overflows`` for a floating target: a finite number beyond the dtype's largest
    finite value overflows *before* rounding (65519 does not fit float16 though it would round
    to 65504); infinities and NaN fit. True for a non-floating dtype or a non-real value."""
    if not getattr(dtype, "is_floating_point", False) or isinstance(value, (bool, np.bool_)):
        return True
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return True
    try:
        v = float(value)
    except OverflowError:           # an int past float64's range
        return False
    if math.isinf(v) or math.isnan(v):
        return True
    return abs(v) <= _largest(dtype)


def _largest(dtype) -> float:
    """The largest finite value of a floating dtype (ml_dtypes knows bfloat16 and the float8s)."""
    import ml_dtypes
    return float(ml_dtypes.finfo(dtype.np).max)


def check_fits_floating(value, dtype) -> None:
    """Raise PyTorch's overflow ``RuntimeError`` where an op converts a Python number into a
    floating dtype by a checked conversion (a ``clamp`` bound, ``pow``'s exponent); most float
    arithmetic does not check (``x + 1e10`` in float16 is inf), hence a separate function."""
    if not fits_floating(value, dtype):
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES.get(dtype.name, dtype.name)} "
                           "without overflow")
