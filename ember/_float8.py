"""Conversions into torch's float8 dtypes with torch's rounding, where ml_dtypes' differs.

ember stores float8 tensors as ml_dtypes arrays, and ml_dtypes' casts agree bit for bit with
torch's for float8_e5m2, float8_e4m3fnuz and float8_e5m2fnuz (NaN payloads aside). Two differ:

* float8_e4m3fn: torch's tensor conversion saturates: a finite value or an infinity beyond
  +-448 becomes +-448 (ml_dtypes gives NaN);
* float8_e8m0fnu (an exponent only, no sign, no zero): torch takes the float32's biased exponent
  and rounds it half to even on the first dropped mantissa bits (1.5 -> 2, 0.3 -> 0.25), ignores
  the sign (-3 -> 4) and maps 0 to 2**-127; ml_dtypes gives NaN for zero and negatives.

Like torch, a wider source converts through float32 first.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
# the NaN torch writes for each float8 dtype that has signed NaNs: all ones, with the sign of the
# source (ml_dtypes writes a positive one)
_NAN_BITS = {np.dtype(ml_dtypes.float8_e5m2): 0x7F, _E4M3FN: 0x7F}


_FLOAT8 = frozenset(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"))


def needs_torch_rounding(np_dtype) -> bool:
    """Whether converting into ``np_dtype`` goes through :func:`to_float8` (every float8 dtype: the
    rounding or the NaNs differ for some, and writing a number checks its range for all)."""
    return np_dtype in _FLOAT8


def to_float8(arr, np_dtype):
    """``arr`` (a numpy array of any real dtype) converted into float8 ``np_dtype`` as torch does."""
    np_dtype = np.dtype(np_dtype)
    src = np.asarray(arr)
    if src.dtype == np_dtype:
        return src.copy()
    if src.dtype.kind == "c":
        src = src.real
    with np.errstate(over="ignore"):
        f = src.astype(np.float32)
    if np_dtype == _E8M0:
        return _to_e8m0(f)
    if np_dtype == _E4M3FN:
        with np.errstate(invalid="ignore"):
            f = np.where(np.isnan(f), f, np.clip(f, -448.0, 448.0)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        out = f.astype(np_dtype)
    nan_bits = _NAN_BITS.get(np_dtype)
    if nan_bits is not None:
        nan = np.isnan(f)
        if nan.any():
            bits = out.view(np.uint8)
            sign = np.signbit(f)
            bits[nan] = np.where(sign[nan], nan_bits | 0x80, nan_bits).astype(np.uint8)
    return out


def _to_e8m0(f):
    bits = np.ascontiguousarray(f).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint32)
    g = (bits & 0x400000) != 0          # the first dropped mantissa bit
    rs = (bits & 0x3FFFFF) != 0          # any bit after it
    lsb = exponent > 0                   # the implied leading bit: set for a normal float32
    up = g & (rs | lsb) & (exponent != 0xFF)
    exponent = exponent + up.astype(np.uint32)
    return exponent.astype(np.uint8).view(_E8M0).reshape(f.shape)


def fits_float8(value, np_dtype) -> bool:
    """c10's overflow check for a Python number written as an element (fill_, full): a finite
    value beyond the dtype's range does not fit; infinities fit only a dtype that has them; for
    float8_e8m0fnu a value at or below 0 does not fit either."""
    np_dtype = np.dtype(np_dtype)
    v = float(value.real if isinstance(value, complex) else value)
    if v != v:
        return True
    info = ml_dtypes.finfo(np_dtype)
    if np_dtype == _E8M0:
        return 0 < v <= float(info.max)
    if v in (float("inf"), float("-inf")):
        return np_dtype == np.dtype(ml_dtypes.float8_e5m2)
    return -float(info.max) <= v <= float(info.max)
