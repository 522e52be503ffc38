"""More pointwise ops PyTorch users reach for: hypot, logaddexp(2), xlogy, signbit, deg2rad,
rad2deg, fmax, fmin, heaviside, sinc, float_power, ldexp, lgamma, digamma, i0, nextafter,
gcd, lcm.

Composites over existing ops wherever one is reasonable, so autograd, fake tensors and the
compiler (which decomposes them into prims) need nothing new. The special functions are
series / rational approximations evaluated in float64 and rounded to the result dtype:

* ``lgamma``  Lanczos (g=7, 9 terms) for x >= 1/2, the reflection formula below;
* ``digamma`` the recurrence up to x + 10 and the asymptotic series, reflection below 1/2;
* ``i0``      Cephes' Chebyshev expansions (the coefficients numpy's ``i0`` uses).

Their gradients are the derivatives of those approximations (close to digamma, trigamma
and i1 to ~1e-13 relative in float64).

``nextafter``, ``gcd`` and ``lcm`` are kernels (numpy's ufuncs) with no decomposition: no
composite is reasonable for a bit-level successor or a Euclid loop. They are listed extern
in ``ember.prims.coverage``.

The in-place variants (``hypot_``, ...) compute the functional result and copy it into
``self`` with PyTorch's checks (no category demotion, no broadcasting of ``self``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta as _M
from . import api
from .registry import defcomposite, defop

_HALF = (_t.float16, _t.bfloat16)


def _not_impl(kernel, dt):
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt.legacy_name}\'')


def _rdt(*xs):
    """PyTorch's promotion over tensors and Python numbers."""
    return _M.result_dtype(*xs)


def _floaty(dt):
    return dt if dt.is_floating_point else _t.get_default_dtype()


def _as(x, dt):
    """A tensor or Python number in dtype ``dt`` (numbers stay numbers)."""
    if isinstance(x, Tensor):
        return x if x.dtype is dt else x.to(dt)
    return x


def _comp(dt):
    """The dtype a multi-step composite computes in: float32 for the half types (as PyTorch's
    CPU kernels do), so intermediate steps are not rounded to 8 or 11 bits."""
    return _t.float32 if dt in _HALF else dt


def _operand(x, dt, c):
    """An operand of a composite whose result dtype is ``dt``, in its compute dtype ``c``; for a
    float16/bfloat16 ``dt`` an operand of another dtype (a 0-dim float32/float64/int64 tensor, a
    Python number) is rounded to ``dt`` first, as torch's CPU TensorIterator casts every input to
    the common dtype before the kernel computes in float32 (3.3 becomes float16's 3.30078125)."""
    if dt in _HALF:
        if isinstance(x, Tensor):
            return x.to(dt).to(c)
        return float(np.float32(x).astype(dt.np))
    return _as(x, c)


def _check_inplace(name, self, res):
    if not _t.can_cast(res.dtype, self.dtype):
        raise RuntimeError(f"result type {res.dtype.legacy_name} can't be cast to the desired output "
                           f"type {self.dtype.legacy_name}")
    if tuple(res.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(res.shape)}")


def _inplace(name, fn):
    """``Tensor.<name>_``: the functional op on ``self`` (a clone when autograd needs the old value),
    copied back into ``self``."""
    def method(self, *args, **kwargs):
        from ..autograd import is_grad_enabled
        src = self.clone() if (self.requires_grad and is_grad_enabled()) else self
        res = fn(src, *args, **kwargs)
        _check_inplace(name, self, res)
        return self.copy_(res)
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place :func:`{name}`."
    return method


_INPLACE = {}     # name -> in-place method, attached at the end


# ---------------------------------------------------------------------- hypot, logaddexp(2)
def _float_binary_dtype(kernel, a, b):
    dt = _rdt(a, b)
    if not dt.is_floating_point:
        raise _not_impl(kernel, dt)
    return dt


@defcomposite("hypot(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def hypot(self, other):
    """``sqrt(self**2 + other**2)`` in the promoted float dtype (integers are refused, as PyTorch),
    as C's ``hypot``: the squares neither overflow (``hypot(1e20, 1e20)`` is 1.41e20 in float32,
    not inf) nor underflow (``hypot(1e-30, 1e-30)`` is not 0), and an infinite side gives +inf
    even against NaN. The float32 and 16-bit types square in float64, where no square of theirs
    overflows or underflows; float64 divides by the larger magnitude first."""
    dt = _float_binary_dtype("hypot_cpu", self, other)
    c = _t.float64
    a, b = _operand(self, dt, c), _operand(other, dt, c)
    if dt is not _t.float64:
        r = api.sqrt(a * a + b * b)
    else:
        # s * sqrt((a/s)**2 + (b/s)**2) is hypot(a, b) for any s > 0, so s needs no gradient
        m = api.maximum(api.abs(a), api.abs(b)).detach()
        s = api.where(api.isfinite(m) & (m > 0), m, 1.0)
        a_s, b_s = a / s, b / s
        r = s * api.sqrt(a_s * a_s + b_s * b_s)
    return api.where(api.isinf(a) | api.isinf(b), float("inf"), r).to(dt)


_INPLACE["hypot"] = hypot


def _logaddexp(kernel, self, other, base2):
    if not base2 and _rdt(self, other).is_complex:
        # complex (torch supports logaddexp, not logaddexp2): shift by the larger real part
        from .search import _logaddexp_complex
        dt = _rdt(self, other)
        return _logaddexp_complex(_as(self, dt), _as(other, dt))
    dt = _float_binary_dtype(kernel, self, other)
    c = _comp(dt)
    a, b = _operand(self, dt, c), _operand(other, dt, c)
    m = api.maximum(a, b)
    d = -api.abs(a - b)
    if base2:
        r = m + api.log1p(api.exp2(d)) * (1.0 / math.log(2.0))
    else:
        r = m + api.log1p(api.exp(d))
    # equal infinities: inf - inf is NaN in the formula; the result is that infinity
    r = api.where(api.isinf(a) & (a == b), a, r)
    return r.to(dt)


@defcomposite("logaddexp(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def logaddexp(self, other):
    """``log(exp(self) + exp(other))`` without overflow: ``max + log1p(exp(-|self - other|))``."""
    return _logaddexp("logaddexp_cpu", self, other, False)


@defcomposite("logaddexp2(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def logaddexp2(self, other):
    """``log2(2**self + 2**other)`` without overflow."""
    return _logaddexp("logaddexp2_cpu", self, other, True)


# ---------------------------------------------------------------------- xlogy
@defcomposite("xlogy(Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=("pointwise",))
def xlogy(self, other):
    """``self * log(other)``, 0 where ``self == 0`` unless ``other`` is NaN (then NaN). Integer
    and bool inputs give the default float dtype."""
    if not isinstance(self, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlogy(): expected at least one Tensor argument")
    dt = _floaty(_rdt(self, other))
    x, y = _as(self, dt), _as(other, dt)
    if not isinstance(x, Tensor):
        x = float(x)
        if x == 0:
            # the tensor path's value and PyTorch's gradient for other, grad * 0 / other
            return xlogy(api.zeros_like(y), y)
        if dt in _HALF:
            # torch's half kernel: the number rounded to ``dt`` (``_operand``) times log(y)
            # rounded to ``dt`` (a c10 half log), the product rounded once
            x = _operand(x, dt, dt)
        return x * api.log(y)
    nan_number = False
    if not isinstance(y, Tensor):
        nan_number = math.isnan(float(y))
        y = api.full_like(x, float(y))
    # where self is 0: the value is 0 (also for y = 0 or inf), the gradient for self is log(y),
    # or 0 where y <= 0 (PyTorch's ``xlogy(grad, other).masked_fill((self == 0) & (other <= 0), 0)``;
    # its Scalar-other overload masks a NaN number too)
    zero = x == 0
    to_one = (y <= 0) | (y == float("inf"))
    y_safe = api.where(zero & (to_one | api.isnan(y) if nan_number else to_one), 1.0, y)
    r = x * api.log(y_safe)
    # PyTorch's value where self is 0 is +0.0; the product is -0.0 for a negative log(y) (or
    # self = -0.0), and adding +0.0 turns -0.0 into +0.0 (NaN stays NaN), keeping the gradient
    at_zero = r + (float("nan") if nan_number else 0.0) + _xlogy_zero_self_grads(x, y, zero)
    return api.where(zero, at_zero, r)


def _xlogy_zero_self_grads(x, y, zero):
    """Zero, with the parts of PyTorch's xlogy gradients at self == 0 that ``x * log(y_safe)``
    (y_safe = 1 at other <= 0 or inf) lacks: grad * log(inf) = inf for self at other = +inf,
    and grad * 0 / 0 = NaN for other at other = 0. Each is a zero-valued term whose derivative
    is the wanted inf / NaN: sqrt at +0 has derivative inf (times other's 0 it is NaN). where()
    passes the terms' (possibly NaN) gradients only to the masked elements."""
    at_inf = zero & (y == float("inf"))
    at_zero = zero & (y == 0)
    grow = api.sqrt(api.where(at_inf, x, 0.0) + 0.0) * at_inf.to(x.dtype)
    y0 = api.where(at_zero, y, 1.0)
    undefined = api.sqrt(y0 * y0) * at_zero.to(y.dtype)
    return grow + undefined


_INPLACE["xlogy"] = xlogy


# ---------------------------------------------------------------------- signbit, deg2rad, rad2deg
@defcomposite("signbit(Tensor self) -> Tensor", tags=("pointwise",))
def signbit(self):
    """Whether the sign bit is set: True for -0.0 and for NaNs with the sign bit (``copysign``
    sees both), ``< 0`` for integers, all False for bool."""
    if self.dtype is _t.bool_:
        return api.zeros_like(self, dtype=_t.bool_)
    if not self.dtype.is_floating_point:
        return self < 0
    return api.copysign(api.ones_like(self), self.detach()) < 0


@defcomposite("deg2rad(Tensor self) -> Tensor", tags=("pointwise",))
def deg2rad(self):
    """Degrees to radians; integers and bools give the default float dtype."""
    return _as(self, _floaty(self.dtype)) * (math.pi / 180.0)


@defcomposite("rad2deg(Tensor self) -> Tensor", tags=("pointwise",))
def rad2deg(self):
    """Radians to degrees; integers and bools give the default float dtype."""
    return _as(self, _floaty(self.dtype)) * (180.0 / math.pi)


_INPLACE["deg2rad"] = deg2rad
_INPLACE["rad2deg"] = rad2deg


# ---------------------------------------------------------------------- fmax, fmin, heaviside
def _fminmax(self, other, is_max):
    dt = _rdt(self, other)
    a, b = _as(self, dt), _as(other, dt)
    if dt.is_floating_point:
        keep_a = ((a >= b) if is_max else (a <= b)) | api.isnan(b)
    else:
        keep_a = (a >= b) if is_max else (a <= b)
    # ties go to ``self`` (its gradient gets it all), as PyTorch's formula
    return api.where(keep_a, a, b)


@defcomposite("fmax(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def fmax(self, other):
    """Elementwise maximum that ignores NaN: a NaN loses to a number (NaN only where both are)."""
    return _fminmax(self, other, True)


@defcomposite("fmin(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def fmin(self, other):
    """Elementwise minimum that ignores NaN."""
    return _fminmax(self, other, False)


@defcomposite("heaviside(Tensor self, Tensor values) -> Tensor", tags=("pointwise",))
def heaviside(self, values):
    """Step function: 0 below zero, 1 above, ``values`` at zero (NaN counts as below). Both
    tensors must have one dtype, as in PyTorch. Not differentiable (PyTorch has no formula):
    the result does not require grad."""
    if self.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = self.detach(), values.detach()
    return api.where(x == 0, v, (x > 0).to(x.dtype))


_INPLACE["heaviside"] = heaviside


# ---------------------------------------------------------------------- sinc
@defcomposite("sinc(Tensor self) -> Tensor", tags=("pointwise",))
def sinc(self):
    """``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there); integers give the default float dtype,
    complex stays complex."""
    if self.dtype.is_complex:
        zero = self == 0
        pz = api.where(zero, 1.0, self) * math.pi
        return api.where(zero, 1.0, api.sin(pz) / pz).to(self.dtype)
    dt = _floaty(self.dtype)
    c = _comp(dt)
    x = _as(self, c)
    # |pi x| < 0.05: the Taylor series through t**8 (its next term is below float64's rounding
    # there; 1 at 0). The quotient's gradient, cos(t) / x - sin(t) / (pi x**2), cancels to noise
    # for small t in float32 and is inf once x * x underflows (x = 3e-39), where the true slope
    # is ~0. The quotient branch sees x = 1 in the series' range, so its gradient stays finite.
    small = api.abs(x) < 0.05 / math.pi
    px = api.where(small, 1.0, x) * math.pi
    t = api.where(small, x, 0.0) * math.pi
    t2 = t * t
    series = 1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0 * (1.0 - t2 / 72.0)))
    return api.where(small, series, api.sin(px) / px).to(dt)


_INPLACE["sinc"] = sinc


# ---------------------------------------------------------------------- float_power, ldexp
@defcomposite("float_power(Tensor|Scalar self, Tensor|Scalar exponent) -> Tensor", tags=("pointwise",))
def float_power(self, exponent):
    """``pow`` in float64, whatever the inputs' dtypes."""
    if not isinstance(self, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): expected at least one Tensor argument")
    # float64, or complex128 when either side is complex (torch)
    cplx = any((isinstance(v, Tensor) and v.dtype.is_complex) or isinstance(v, complex) for v in (self, exponent))
    target, scalar = (_t.complex128, complex) if cplx else (_t.float64, float)
    a = _as(self, target) if isinstance(self, Tensor) else scalar(self)
    b = _as(exponent, target) if isinstance(exponent, Tensor) else scalar(exponent)
    return api.pow(a, b)


def _float_power_(self, exponent):
    if self.dtype is not _t.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.legacy_name} but the "
                           f"operation's result requires dtype Double")
    return _inplace("float_power", float_power)(self, exponent)


@defcomposite("ldexp(Tensor self, Tensor other) -> Tensor", tags=("pointwise",))
def ldexp(self, other):
    """``self * 2**other``.

    An integer exponent scales exactly, as PyTorch's kernel does: the result keeps ``self``'s
    floating dtype (the default float dtype for an integer ``self``), ``0 * 2**1100`` is 0,
    ``-inf * 2**-200`` is -inf and ``1e-30 * 2**200`` is finite in float32. Rounding ``2**other``
    to the result dtype first would overflow it to inf (or flush it to 0) and give NaN, inf or 0
    there. A floating exponent is PyTorch's ``self * pow(2, other)``, promotion and overflow included."""
    if (self.dtype.is_complex or not isinstance(other, Tensor) or other.dtype.is_floating_point
            or other.dtype.is_complex or other.dtype is _t.bool_):
        return self * api.pow(2.0, other)
    dt = _floaty(self.dtype)
    x = _as(self, _t.float64)
    other = _as(other, _t.int64)      # (an int8 exponent could not hold the clamp bounds)
    if dt is not _t.float64:
        # a 24-bit (or shorter) mantissa times 2**e, |e| <= 1000, is exact in float64 unless the
        # product is below float64's normal range -- where the narrower result is a zero anyway;
        # |e| > 1000 gives the same inf / 0 as 1000 does for any non-zero float32 value
        e = api.clamp(other, -1000, 1000).to(_t.float64)
        return (x * api.pow(2.0, e)).to(dt)
    # float64: 2**e overflows beyond 1023, so scale in three steps of at most 2**734 each;
    # |e| > 2200 gives the same inf / 0 as 2200 does for any non-zero float64 value
    e = api.clamp(other, -2200, 2200)
    a = api.floor_divide(e, 3)
    b = api.floor_divide(e - a, 2)
    c = e - a - b
    for k in (a, b, c):
        x = x * api.pow(2.0, k.to(_t.float64))
    return x


_INPLACE["ldexp"] = ldexp


# ---------------------------------------------------------------------- lgamma, digamma, i0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)


def _lanczos_lgamma(y):
    """lgamma for y >= 1/2 (float64)."""
    z = y - 1.0
    acc = api.full_like(z, _LANCZOS[0])
    for i in range(1, len(_LANCZOS)):
        acc = acc + _LANCZOS[i] / (z + float(i))
    t = z + 7.5
    return _HALF_LOG_2PI + (z + 0.5) * api.log(t) - t + api.log(acc)


@defcomposite("lgamma(Tensor self) -> Tensor", tags=("pointwise",))
def lgamma(self):
    """``log|Gamma(x)|``: +inf at the poles (0, -1, -2, ...) and at +-inf."""
    dt = _floaty(self.dtype)
    fast = _eager("lgamma", self, dt)      # no autograd/mode to see the ops: one native loop
    if fast is not None:
        return fast
    x0 = self.to(_t.float64)
    pole = (x0 <= 0) & (x0 == api.floor(x0))
    big = api.isinf(x0)
    x = api.where(pole | big, 1.0, x0)
    reflect = x < 0.5
    y = api.where(reflect, 1.0 - x, x)
    lg = _lanczos_lgamma(y)
    r = x - api.round(x)                                      # in [-1/2, 1/2]: exact near the integers
    s = api.abs(api.sin(math.pi * api.where(reflect, r, 0.5)))  # |sin(pi x)|, away from its zeros
    r = api.where(reflect, _LOG_PI - api.log(s) - lg, lg)
    r = api.where(big, _inf_at_infinities(x0, big), api.where(pole, _inf_with_grad(x0, pole & ~big), r))
    return r.to(dt)


def _inf_at_infinities(x0, big):
    """lgamma's +inf at x0 = +-inf with PyTorch's derivative there, digamma(x0): +inf at +inf,
    NaN at -inf (a constant inf, as where() would otherwise take, has derivative 0).
    At +inf: where(x0 == inf, x0, 1) * inf is inf with derivative inf. At -inf: that product is
    the constant 1 * inf, and sqrt(exp(x0)) adds 0 whose derivative is NaN (sqrt's inf at 0 times
    exp's 0). Off these points every factor is finite and where() passes them no gradient."""
    pos = x0 == float("inf")
    neg = x0 == float("-inf")
    grows = api.where(pos, x0, 1.0) * api.where(big, float("inf"), 1.0)
    return grows + api.sqrt(api.exp(api.where(neg, x0, 0.0))) * api.where(neg, 1.0, 0.0)


def _inf_with_grad(x0, pole):
    """+inf whose derivative is digamma at lgamma's poles, as PyTorch's lgamma' = digamma gives:
    -inf at +0, +inf at -0, NaN at the negative integers (a constant inf, as where() would
    otherwise take, has derivative 0). (1 + k x0) * inf is inf for these finite x0, and its
    derivative inf * k: k = -1 / +1 at +0 / -0, 0 (inf * 0 = NaN) at the negative integers.
    Off the poles the factor is 1, not inf, so where()'s zero gradient stays 0 (not 0 * inf)."""
    k = api.where(pole & (x0 == 0), api.where(api.signbit(x0), 1.0, -1.0), 0.0)
    return (1.0 + x0 * k) * api.where(pole, float("inf"), 1.0)


_INPLACE["lgamma"] = lgamma


def _eager(which, t, dt):
    if t.dtype.is_complex or t.dtype._limited is not None:
        return None                     # the composite's own errors
    from ._native_special import special_eager
    return special_eager(which, t, dt)

_PSI_ASYMPT = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


@defcomposite("digamma(Tensor self) -> Tensor", tags=("pointwise",))
def digamma(self):
    """``d/dx log Gamma(x)``: -inf at +0, +inf at -0, NaN at the negative integers."""
    dt = _floaty(self.dtype)
    fast = _eager("digamma", self, dt)
    if fast is not None:
        return fast
    x0 = self.to(_t.float64)
    zero = x0 == 0
    negint = (x0 < 0) & (x0 == api.floor(x0))
    x = api.where(zero | negint, 1.0, x0)
    reflect = x < 0.5
    y = api.where(reflect, 1.0 - x, x)
    # psi(y) = psi(y + 10) - sum 1 / (y + k); the asymptotic series at w = y + 10 >= 10.5
    shift = 1.0 / y
    for k in range(1, 10):
        shift = shift + 1.0 / (y + float(k))
    w = y + 10.0
    w2 = 1.0 / (w * w)
    series = api.zeros_like(w)
    for c in reversed(_PSI_ASYMPT):
        series = (series + c) * w2
    psi = api.log(w) - 0.5 / w - series - shift
    r = x - api.round(x)                                      # tan has period 1 in pi x
    t = api.tan(math.pi * api.where(reflect, r, 0.25))
    r = api.where(reflect, psi - math.pi / t, psi)
    r = api.where(zero, -1.0 / x0, api.where(negint, float("nan") + x0 * _trigamma_at_negint(x0, negint), r))
    return r.to(dt)


def _trigamma_at_negint(x0, negint):
    """A constant (no gradient) that is PyTorch's trigamma formula at the negative integers, 0
    elsewhere: NaN + x0 * it is digamma's NaN there with derivative polygamma(1, x0), as PyTorch's
    digamma' gives (huge finite, pi^2 / sin(pi x0)^2 of the rounded pi x0), not where()'s 0.
    The reflection pi^2 / sin(pi x)^2 - trigamma(1 - x), trigamma by 6 recurrence steps and the
    asymptotic series, in PyTorch's calc_trigamma's order of operations (so its roundings)."""
    x = api.where(negint, x0, -0.5).detach()
    s = api.sin(math.pi * x)
    acc = -(api.full_like(s, math.pi * math.pi) / (s * s))   # a true division: scalar / t is c * (1 / t)
    y = 1.0 - x
    for _ in range(6):
        acc = acc + 1.0 / (y * y)
        y = y + 1.0
    iyy = 1.0 / (y * y)
    acc = acc + (1.0 + 1.0 / (2.0 * y) + iyy * (1.0 / 6 - iyy * (1.0 / 30 - iyy * (1.0 / 42)))) / y
    return api.where(negint, -acc, 0.0)


_INPLACE["digamma"] = digamma

_I0A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
        1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
        -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
        9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
        -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
        1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
        -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
        1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
        -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
        1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
        3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
        1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
        -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
        7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
        -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
        3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
        2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
        8.04490411014108831608E-1)


# i0 itself is an op with PyTorch's derivative (i1), beside i0e / i1 / i1e in ember.ops.special_extra:
# autograd through the Chebyshev composite it used to be gave wrong-sign slopes near 0, NaN from x = 710.


# ---------------------------------------------------------------------- kernels: nextafter, gcd, lcm
def _binary_meta(kernel, ok):
    def meta(a, b):
        dt = _rdt(a, b)
        if not ok(dt):
            raise _not_impl(kernel, dt)
        shape = _M.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        return _M.pointwise_out(shape, dt, a, b)
    return meta


def _bcast_err(a, b):
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        sa, sb = list(a.shape), list(b.shape)
        n = max(len(sa), len(sb))
        sa, sb = [1] * (n - len(sa)) + sa, [1] * (n - len(sb)) + sb
        for i in range(n - 1, -1, -1):
            if sa[i] != sb[i] and sa[i] != 1 and sb[i] != 1:
                raise RuntimeError(f"The size of tensor a ({sa[i]}) must match the size of tensor b ({sb[i]}) "
                                   f"at non-singleton dimension {i}") from None
        raise


def _dt_of(arr):
    return _t.from_numpy_dtype(arr.dtype)


def _promote_arrays(a, b):
    da, db = _dt_of(a), _dt_of(b)
    return _t.result_type_from([d for d, x in ((da, a), (db, b)) if x.ndim > 0],
                               [d for d, x in ((da, a), (db, b)) if x.ndim == 0], [])


@defop("nextafter(Tensor self, Tensor other) -> Tensor", tags=("pointwise", "nondifferentiable"),
       inplace=True)
def nextafter(xp, a, b):
    """The next representable value after ``self`` towards ``other`` (numpy's ``nextafter``;
    bfloat16 steps through float32 bit patterns, so it is computed on the raw 16 bits)."""
    dt = _promote_arrays(a, b)
    if not dt.is_floating_point:
        raise _not_impl("nextafter_cpu", dt)
    _bcast_err(a, b)
    a, b = a.astype(dt.np, copy=False), b.astype(dt.np, copy=False)
    if dt is _t.bfloat16:
        a, b = xp.broadcast_arrays(a, b)
        bits = a.view(np.uint16).astype(np.int32)
        af, bf = a.astype(np.float32), b.astype(np.float32)
        # sign-magnitude: moving away from zero adds one to the magnitude bits
        up = bf > af
        neg = af < 0
        away = xp.where(neg, ~up, up)
        nb = xp.where(away, bits + 1, bits - 1)
        zero = af == 0
        nb = xp.where(zero, xp.where(up, 1, 0x8001), nb)
        nb = xp.where(af == bf, b.view(np.uint16).astype(np.int32), nb)
        out = (nb & 0xFFFF).astype(np.uint16).view(dt.np)
        return xp.where(xp.isnan(af) | xp.isnan(bf), af + bf, out.astype(np.float32)).astype(dt.np)
    r = xp.asarray(xp.nextafter(a, b)).astype(dt.np, copy=False)
    if dt is _t.float16:
        # C's nextafter returns y when x == y (so nextafter(0, -0) is -0); numpy's half one returns x
        r = xp.where(a == b, b, r)
    return r


nextafter.meta = _binary_meta("nextafter_cpu", lambda d: d.is_floating_point)


def _int_kernel(name, fn):
    def kernel(xp, a, b):
        dt = _promote_arrays(a, b)
        if dt.category != 1:
            raise _not_impl(f"{name}_cpu", dt)
        _bcast_err(a, b)
        f = getattr(xp, fn) if isinstance(fn, str) else lambda x, y: fn(xp, x, y)
        return xp.asarray(f(a.astype(dt.np, copy=False), b.astype(dt.np, copy=False))).astype(dt.np, copy=False)
    kernel.__name__ = name
    return kernel


gcd = defop("gcd(Tensor self, Tensor other) -> Tensor", tags=("pointwise", "nondifferentiable"),
            inplace=True)(_int_kernel("gcd", "gcd"))
gcd.meta = _binary_meta("gcd_cpu", lambda d: d.category == 1)


def _lcm_wrapping(xp, a, b):
    """PyTorch's lcm, ``g == 0 ? 0 : abs(a / g * b)`` with ``g = gcd(a, b)``, wrapping on overflow
    as its C++ does (numpy's ``|a| / g * |b|`` wraps to another value: lcm(-16, 2**63 - 1) is 16
    in PyTorch, -16 in numpy)."""
    g = xp.gcd(a, b)
    with np.errstate(all="ignore"):
        q = a // xp.where(g == 0, 1, g).astype(a.dtype, copy=False)     # exact: g divides a
        return xp.where(g == 0, 0, xp.abs(q * b))


lcm = defop("lcm(Tensor self, Tensor other) -> Tensor", tags=("pointwise", "nondifferentiable"),
            inplace=True)(_int_kernel("lcm", _lcm_wrapping))
lcm.meta = _binary_meta("lcm_cpu", lambda d: d.category == 1)


# ---------------------------------------------------------------------- positive
def positive(input):
    """``input`` itself (PyTorch returns the same tensor); bool tensors are refused."""
    if not isinstance(input, Tensor):
        raise TypeError(f"positive(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype is _t.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ---------------------------------------------------------------------- exports
# in-place variants PyTorch also has as ``torch.<name>_`` (the others are Tensor methods only)
_TOP_INPLACE = ("xlogy", "deg2rad", "rad2deg", "sinc", "ldexp")
for _name, _fn in _INPLACE.items():
    _m = _inplace(_name, getattr(api, _name))
    setattr(Tensor, _name + "_", _m)
    if _name in _TOP_INPLACE:
        setattr(api, _name + "_", _m)
Tensor.float_power_ = _float_power_
api.positive = positive
Tensor.positive = positive
