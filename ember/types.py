"""dtypes, devices, Size and PyTorch's type-promotion rules.

Everything here is metadata: no arrays are touched. Kernels ask this module
which numpy dtype to compute in, and meta functions ask it which ember dtype
an op produces, so eager kernels and fake tensors always agree.
"""
from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

# Name printed before dtypes (``ember.float32``) and sizes (``ember.Size``).
PUBLIC_PREFIX = "ember."


class dtype:
    """A tensor element type. Instances are singletons (compare with ``is``)."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex",
                 "is_signed", "category", "_legacy", "_differentiable", "_limited")

    def __init__(self, name, np_dtype, category, legacy):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        # 0 bool, 1 integer, 2 floating, 3 complex: the order promotion walks in.
        self.category = category
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        # autograd records gradients for floating and complex results only
        self._differentiable = category >= 2
        self.is_signed = name not in ("uint8", "bool")
        self._legacy = legacy  # "Float" in "ember.FloatTensor" (error messages)
        # None for the fully supported dtypes; "uint" / "float8" for the dtypes torch supports
        # only partially (ember.ops.limited_dtypes decides which ops they reach)
        self._limited = None

    def __repr__(self):
        return PUBLIC_PREFIX + self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))

    @property
    def is_signed_(self):  # pragma: no cover - alias kept for symmetry
        return self.is_signed

    def to_real(self):
        """The real dtype of a complex dtype's parts (complex64 -> float32); other dtypes: self."""
        return _TO_REAL.get(self, self)

    def to_complex(self):
        """The complex dtype whose parts are this float dtype (float32 -> complex64), as torch."""
        c = _TO_COMPLEX.get(self)
        if c is not None:
            return c
        if self.is_complex:
            return self
        if self is float16:
            raise _complex32_error()
        raise RuntimeError(f"Unknown Complex ScalarType for {self._legacy}")

    @property
    def legacy_name(self):
        return self._legacy


bool_ = dtype("bool", np.bool_, 0, "Bool")
uint8 = dtype("uint8", np.uint8, 1, "Byte")
int8 = dtype("int8", np.int8, 1, "Char")
int16 = dtype("int16", np.int16, 1, "Short")
int32 = dtype("int32", np.int32, 1, "Int")
int64 = dtype("int64", np.int64, 1, "Long")
float16 = dtype("float16", np.float16, 2, "Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2, "BFloat16")
float32 = dtype("float32", np.float32, 2, "Float")
float64 = dtype("float64", np.float64, 2, "Double")
complex64 = dtype("complex64", np.complex64, 3, "ComplexFloat")
complex128 = dtype("complex128", np.complex128, 3, "ComplexDouble")

ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64,
              complex128)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
COMPLEX_DTYPES = (complex64, complex128)
INT_DTYPES = (uint8, int8, int16, int32, int64)


# -- the partially supported dtypes: torch 2.13 stores and converts them but runs few ops on them
# (ember.ops.limited_dtypes holds the per-op allow-list). They stay out of ALL_DTYPES, whose
# members promote with each other and run every op.
def _limited_dtype(name, np_dtype, category, legacy, family, signed):
    d = dtype(name, np_dtype, category, legacy)
    d.is_signed = signed
    d._limited = family
    return d


uint16 = _limited_dtype("uint16", np.uint16, 1, "UInt16", "uint", False)
uint32 = _limited_dtype("uint32", np.uint32, 1, "UInt32", "uint", False)
uint64 = _limited_dtype("uint64", np.uint64, 1, "UInt64", "uint", False)
float8_e4m3fn = _limited_dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 2, "Float8_e4m3fn", "float8", True)
float8_e5m2 = _limited_dtype("float8_e5m2", ml_dtypes.float8_e5m2, 2, "Float8_e5m2", "float8", True)
float8_e4m3fnuz = _limited_dtype("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 2, "Float8_e4m3fnuz", "float8",
                                 True)
float8_e5m2fnuz = _limited_dtype("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 2, "Float8_e5m2fnuz", "float8",
                                 True)
float8_e8m0fnu = _limited_dtype("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, 2, "Float8_e8m0fnu", "float8",
                                False)
UINT_DTYPES = (uint16, uint32, uint64)
FLOAT8_DTYPES = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu)


# -- torch's sub-byte and bit-container dtypes (uint1..uint7, int1..int7, bits1x8 .. bits16,
# float4_e2m1fn_x2): placeholders that libraries (torchao) put behind their own tensor subclasses.
# torch can make, view, move and (some) copy them, and runs no arithmetic, no conversion and no
# fill on them. Each element is stored in one byte (two for bits16) of a numpy *structured* dtype
# named after the ember dtype: distinct per dtype (so an array's dtype names its ember dtype) and
# one numpy refuses to compute on. ember.ops.limited_dtypes holds the ops they allow.
class _bits_dtype(dtype):
    """A bitsNxM dtype: torch leaves their signedness undefined (``is_signed`` raises)."""

    __slots__ = ()

    @property
    def is_signed(self):
        raise RuntimeError("Bits types are undefined")

    @is_signed.setter
    def is_signed(self, value):   # dtype.__init__ assigns it; a bits dtype has none
        pass


def _subbyte_dtype(name, legacy, family, signed=False, itemsize=1, floating=False, cls=dtype):
    # category 1 for all: no promotion table holds them, and ember/ops/checked_scalar.py refuses
    # numbers written into them in its integer branch
    d = cls(name, np.dtype([(name, f"V{itemsize}")]), 1, legacy)
    d.is_floating_point = floating
    d._differentiable = floating      # torch lets a float4_e2m1fn_x2 tensor require grad
    d.is_signed = signed
    d._limited = family
    return d


SUBBYTE_UINT_DTYPES = tuple(_subbyte_dtype(f"uint{n}", f"UInt{n}", "subbyte") for n in range(1, 8))
SUBBYTE_INT_DTYPES = tuple(_subbyte_dtype(f"int{n}", f"Int{n}", "subbyte", signed=True) for n in range(1, 8))
uint1, uint2, uint3, uint4, uint5, uint6, uint7 = SUBBYTE_UINT_DTYPES
int1, int2, int3, int4, int5, int6, int7 = SUBBYTE_INT_DTYPES
bits1x8 = _subbyte_dtype("bits1x8", "Bits1x8", "bits", cls=_bits_dtype)
bits2x4 = _subbyte_dtype("bits2x4", "Bits2x4", "bits", cls=_bits_dtype)
bits4x2 = _subbyte_dtype("bits4x2", "Bits4x2", "bits", cls=_bits_dtype)
bits8 = _subbyte_dtype("bits8", "Bits8", "bits", cls=_bits_dtype)
bits16 = _subbyte_dtype("bits16", "Bits16", "bits", itemsize=2, cls=_bits_dtype)
float4_e2m1fn_x2 = _subbyte_dtype("float4_e2m1fn_x2", "Float4_e2m1fn_x2", "bits", signed=True, floating=True)
BITS_DTYPES = (bits1x8, bits2x4, bits4x2, bits8, bits16)
SUBBYTE_DTYPES = SUBBYTE_UINT_DTYPES + SUBBYTE_INT_DTYPES + BITS_DTYPES + (float4_e2m1fn_x2,)
LIMITED_DTYPES = UINT_DTYPES + FLOAT8_DTYPES + SUBBYTE_DTYPES

_TO_REAL = {complex64: float32, complex128: float64}
_TO_COMPLEX = {float32: complex64, float64: complex128, bfloat16: complex64}

_BY_NAME = {d.name: d for d in ALL_DTYPES + LIMITED_DTYPES}
_BY_NAME.update(half=float16, float=float32, double=float64, short=int16, int=int32,
                long=int64, cfloat=complex64, cdouble=complex128)
_BY_NP = {d.np: d for d in ALL_DTYPES + LIMITED_DTYPES}

# -- quantized dtypes (ember/_quantized): each element is an integer of ``.np`` read through the
# tensor's scale and zero point. Deliberately outside ALL_DTYPES, _BY_NP and the promotion table:
# no dense op computes on them (a quantized tensor's storage refuses dense reads).
qint8 = dtype("qint8", np.int8, 1, "QInt8")
quint8 = dtype("quint8", np.uint8, 1, "QUInt8")
qint32 = dtype("qint32", np.int32, 1, "QInt32")
quint4x2 = dtype("quint4x2", np.uint8, 1, "QUInt4x2")
quint2x4 = dtype("quint2x4", np.uint8, 1, "QUInt2x4")
quint8.is_signed = quint4x2.is_signed = quint2x4.is_signed = False
QUANTIZED_DTYPES = (qint8, quint8, qint32, quint4x2, quint2x4)
_BY_NAME.update((d.name, d) for d in QUANTIZED_DTYPES)


def _complex32_error():
    """complex32 (chalf) has no numpy dtype, so ember cannot store it: one clear error for the
    dtype's name and for promotions that would produce it (float16 with a complex number)."""
    return TypeError("ember does not support complex32 (torch.chalf / ComplexHalf) tensors: numpy has "
                     "no complex32 dtype; use complex64 instead")


def _dtype_by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> dtype:
    """The ember dtype of a numpy dtype; a clear error for ones ember lacks."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        d = np.dtype(np_dtype)
        if d in _BY_NP:
            return _BY_NP[d]
        raise TypeError(
            f"can't convert np.ndarray of type {d}. The only supported types are: "
            "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, uint32, "
            "uint16, uint8, and bool."
        ) from None


def as_dtype(d) -> dtype:
    """Accept an ember dtype, a numpy dtype, a Python type or a name."""
    if isinstance(d, dtype):
        return d
    if d is builtins.float:
        return get_default_dtype()
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool_
    if d is builtins.complex:
        return default_complex_dtype()
    if isinstance(d, str):
        name = d[len(PUBLIC_PREFIX):] if d.startswith(PUBLIC_PREFIX) else d
        if name in _BY_NAME:
            return _BY_NAME[name]
        if name in ("complex32", "chalf"):
            raise _complex32_error()
    try:
        return from_numpy_dtype(np.dtype(d))
    except TypeError:
        raise
    except Exception:
        raise TypeError(f"dtype must be an ember.dtype, got {d!r}") from None


# --------------------------------------------------------------------------
# default dtype
_default_float = [float32]


def get_default_dtype() -> dtype:
    return _default_float[0]


def default_complex_dtype() -> dtype:
    """The complex dtype of Python complex numbers: complex64 under float32 (and float16/
    bfloat16) defaults, complex128 under float64, as torch."""
    return complex128 if _default_float[0] is float64 else complex64


def set_default_dtype(d) -> None:
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float[0] = d


# --------------------------------------------------------------------------
# promotion
def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.category == 3 or b.category == 3:
        # complex wins; its parts are as wide as the wider floating operand (float64 with
        # complex64 is complex128)
        if a.category == 3 and b.category == 3:
            return a if a.itemsize > b.itemsize else b
        c, o = (a, b) if a.category == 3 else (b, a)
        if o is float64:
            return complex128
        return c
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    if a.category == 1:
        # uint8 with a signed type needs a signed type that holds 0..255.
        if a is uint8 or b is uint8:
            other = b if a is uint8 else a
            return int16 if other is int8 else other
        return a if a.itemsize > b.itemsize else b
    return a


def _refused_promotion(key):
    """torch's error for a pair the table lacks because torch refuses it (a uint16/32/64 or
    float8 dtype with another dtype, other than an unsigned dtype with a float one); a KeyError
    for other missing pairs. The table stays a plain dict: lookups are the promotion hot path."""
    a, b = key
    if getattr(a, "_limited", None) is None and getattr(b, "_limited", None) is None:
        return KeyError(key)
    return _promotion_error(a, b)


def _promotion_error(a, b):
    if a._limited == "float8" or b._limited == "float8":
        what = "Float8 Types"
    elif a in BITS_DTYPES or b in BITS_DTYPES:
        return RuntimeError(f"Promotion from {a._legacy} and {b._legacy} is unsupported.")
    elif a in UINT_DTYPES or b in UINT_DTYPES or a in SUBBYTE_UINT_DTYPES or b in SUBBYTE_UINT_DTYPES:
        what = "uint16, uint32, uint64 types"
    else:     # int1..int7 / float4_e2m1fn_x2 with another dtype: torch fails an internal assert
        return RuntimeError(f"Promotion from {a._legacy} and {b._legacy} is not supported (torch has no "
                            f"promotion rule for sub-byte dtypes)")
    return RuntimeError(f"Promotion for {what} is not supported, attempted to promote {a._legacy} and "
                        f"{b._legacy}")


_PROMOTE = {(a, b): _promote_pair(a, b) for a in ALL_DTYPES for b in ALL_DTYPES}
_PROMOTE.update({(d, d): d for d in LIMITED_DTYPES})
_PROMOTE.update({pair: f for u in UINT_DTYPES + SUBBYTE_UINT_DTYPES for f in FLOAT_DTYPES
                 for pair in ((u, f), (f, u))})


def promote_types(a: dtype, b: dtype) -> dtype:
    try:
        return _PROMOTE[(a, b)]
    except KeyError:
        raise _refused_promotion((a, b)) from None


def scalar_category(x) -> int:
    if isinstance(x, builtins.bool) or isinstance(x, np.bool_):
        return 0
    if isinstance(x, (builtins.int, np.integer)):
        return 1
    if isinstance(x, (builtins.float, np.floating)):
        return 2
    if isinstance(x, (complex, np.complexfloating)):
        return 3
    raise TypeError(f"expected a number, got {type(x).__name__}")


_DEFAULT_FOR_CATEGORY = {0: bool_, 1: int64}


def default_for_category(cat: int) -> dtype:
    if cat == 3:
        return default_complex_dtype()
    return get_default_dtype() if cat == 2 else _DEFAULT_FOR_CATEGORY[cat]


def _combine(higher, lower):
    """torch's ``combine_categories``: a lower promotion tier (0-d tensors, then Python
    numbers) only matters when it is of a higher category; a complex lower tier over a
    floating higher tier keeps the higher tier's precision (float64 tensor * 1j is
    complex128, float32 tensor * complex128 0-d tensor is complex64)."""
    if lower is None:
        return higher
    if higher is None:
        return lower
    if lower.category <= higher.category:
        return higher
    if lower.category == 3 and higher.category == 2:
        return higher.to_complex()
    return lower


def result_type_from(dims, zero_dims, scalars) -> dtype:
    """PyTorch's three-tier promotion.

    ``dims``: dtypes of tensors with ndim > 0; ``zero_dims``: dtypes of 0-d
    tensors; ``scalars``: Python numbers. A lower tier only matters when it
    is of a higher category (bool < int < float) than the tiers above it.
    """
    result = zd = None
    try:
        for d in dims:
            result = d if result is None else _PROMOTE[(result, d)]
        for d in zero_dims:
            zd = d if zd is None else _PROMOTE[(zd, d)]
    except KeyError as e:
        raise _refused_promotion(e.args[0]) from None
    cat = -1
    for s in scalars:
        c = scalar_category(s)
        if c > cat:
            cat = c
    if cat == 3 or zd is not None and zd.category == 3:
        # complex in a lower tier: torch's nested combine (dims, (0-d, numbers))
        return _combine(result, _combine(zd, default_for_category(cat) if cat >= 0 else None)) \
            or _no_operands()
    if zd is not None:
        if result is None or zd.category > result.category:
            result = zd
    if cat >= 0:
        if result is None or cat > result.category:
            result = default_for_category(cat)
    if result is None:
        raise TypeError("result_type needs at least one tensor or number")
    return result


def _no_operands():
    raise TypeError("result_type needs at least one tensor or number")


def can_cast(frm: dtype, to: dtype) -> bool:
    """PyTorch's rule for in-place results: no category demotion."""
    return frm.category <= to.category


# --------------------------------------------------------------------------
# devices
class device:
    """``ember.device('cpu')`` or ``ember.device('cuda', 0)``.

    ``xp`` is the array namespace the device's kernels run on (numpy for cpu,
    cupy for cuda), so one kernel body serves both.
    """

    __slots__ = ("type", "index")
    _cache: dict = {}

    def __new__(cls, type_or_str="cpu", index=None):
        if isinstance(type_or_str, device):
            return type_or_str
        if isinstance(type_or_str, builtins.int):
            type_or_str, index = "cuda", type_or_str
        if not isinstance(type_or_str, str):
            raise TypeError(f"device() expected a string or device, got {type(type_or_str).__name__}")
        s = type_or_str
        if ":" in s:
            s, idx = s.split(":", 1)
            if index is not None:
                raise RuntimeError(f"device string {type_or_str!r} already has an index")
            try:
                index = builtins.int(idx)
            except ValueError:
                raise RuntimeError(f"Invalid device string: '{type_or_str}'") from None
        if s not in ("cpu", "cuda", "meta"):
            raise RuntimeError(
                f"Expected one of cpu, cuda, meta device type at start of device string: {type_or_str}")
        if s == "cuda" and index is None:
            index = 0
        key = (s, index)
        obj = cls._cache.get(key)
        if obj is None:
            obj = object.__new__(cls)
            object.__setattr__(obj, "type", s)
            object.__setattr__(obj, "index", index)
            cls._cache[key] = obj
        return obj

    def __setattr__(self, k, v):
        raise AttributeError("ember.device is immutable")

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return self is other

    # devices are interned singletons: identity hashing is exact and fast
    __hash__ = object.__hash__

    def __reduce__(self):
        return (device, (self.type, self.index))

    # ``with ember.device("meta"):`` -- torch's default-device context: factories called inside
    # without a device make their tensors on this one; the previous default (per thread) comes
    # back on exit, so the blocks nest.
    def __enter__(self):
        from ._state import DEFAULT_DEVICE_SET, STATE
        STATE.__dict__.setdefault("device_stack", []).append(STATE.default_device)
        STATE.default_device = self
        if self.type != "cpu":
            DEFAULT_DEVICE_SET[0] = True
        return self

    def __exit__(self, *exc):
        from ._state import STATE
        STATE.default_device = STATE.device_stack.pop()
        return False


cpu = device("cpu")


def as_device(d) -> device:
    if d is None:
        return cpu
    return device(d)


class Size(tuple):
    """A tuple of ints that prints like ``ember.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self):
        return f"{PUBLIC_PREFIX}Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))


# ---- torch.types' aliases for symbolic scalars, storages and common argument types ----------
def __getattr__(name):
    """The symbolic scalar classes live in ember.fx's shape machinery (imported on first use,
    so ``import ember.types`` stays light); the aliases built from them likewise."""
    import os
    import typing
    import ember
    if name in ("SymInt", "SymFloat", "SymBool"):
        return getattr(ember, name)
    if name == "py_sym_types":
        return (ember.SymInt, ember.SymFloat, ember.SymBool)
    if name == "IntLikeType":
        return typing.Union[int, ember.SymInt]
    if name == "FloatLikeType":
        return typing.Union[float, ember.SymFloat]
    if name == "BoolLikeType":
        return typing.Union[bool, ember.SymBool]
    if name == "PySymType":
        return typing.Union[ember.SymInt, ember.SymFloat, ember.SymBool]
    if name == "Storage":
        return ember.UntypedStorage
    if name == "Number":
        return typing.Union[int, float, bool]
    if name == "Device":
        return typing.Optional[typing.Union[ember.device, str, int]]
    if name == "FileLike":
        return typing.Union[str, os.PathLike, typing.IO[bytes]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
