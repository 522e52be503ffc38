"""``ember.finfo`` / ``ember.iinfo``: machine limits of ember's dtypes, as PyTorch's.

``ember.finfo(x.dtype).min`` is what attention masks fill with. The values come from
numpy (``ml_dtypes`` for bfloat16 and the float8 dtypes); ``dtype`` is the dtype's name, a str, as in PyTorch.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import types as _t

# torch's epsilon where it is not the format's: c10's numeric_limits<Float8_e5m2fnuz>::epsilon()
# is 2**-3 (the format's spacing at 1 is 2**-2)
_EPS = {"float8_e5m2fnuz": 0.125}
_RESOLUTION = {"float16": 0.001, "bfloat16": 0.01, "float32": 1e-06, "float64": 1e-15}


def _g(v):
    return "%g" % v


class finfo:
    """``finfo(type=None)``: ``bits, eps, max, min, tiny, smallest_normal, resolution, dtype``
    of a floating-point dtype (the default dtype when none is given)."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):
        d = _t.get_default_dtype() if type is None else type
        if not isinstance(d, _t.dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be ember.dtype, not {d.__class__.__name__}")
        if not d.is_floating_point:
            raise TypeError("ember.finfo() requires a floating point input type. Use ember.iinfo to handle "
                            "'ember.finfo'")
        if d.np.names is not None:      # float4_e2m1fn_x2 (ember.types.SUBBYTE_DTYPES): torch has no finfo for it
            raise TypeError("bad argument type for built-in operation")
        ml = d.name == "bfloat16" or d._limited == "float8"
        info = ml_dtypes.finfo(d.np) if ml else np.finfo(d.np)
        self.bits = int(d.itemsize * 8)
        self.eps = _EPS.get(d.name, float(info.eps))
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.tiny)
        self.smallest_normal = float(info.smallest_normal)
        # torch gives every float8 dtype a resolution of 1 (10 ** -floor(digits10), digits10 = 0)
        self.resolution = _RESOLUTION.get(d.name, 1.0)
        self.dtype = d.name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, max={_g(self.max)}, "
                f"eps={_g(self.eps)}, smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, "
                f"dtype={self.dtype})")

    __str__ = __repr__


class iinfo:
    """``iinfo(type)``: ``bits, max, min, dtype`` of an integer dtype (bool is refused)."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):
        d = type
        if not isinstance(d, _t.dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be ember.dtype, not {d.__class__.__name__}")
        if d is _t.bool_:
            raise TypeError("ember.bool is not supported by ember.iinfo")
        if d.is_floating_point or d.np.names is not None:     # (sub-byte dtypes too, as torch)
            raise TypeError("ember.iinfo() requires an integer input type. Use ember.finfo to handle "
                            "'ember.iinfo'")
        info = np.iinfo(d.np)
        self.bits = int(d.itemsize * 8)
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = d.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={_g(self.min)}, max={_g(self.max)}, dtype={self.dtype})"

    __str__ = __repr__
