"""``ember.special``: PyTorch's ``torch.special`` functions that ember has.

Most are other names of ember ops (``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``, ``psi``
is ``digamma``); ``entr``, ``ndtr``, ``ndtri``, ``xlog1py`` and ``multigammaln`` are written in
ember ops, so they differentiate and compile like any composite. The incomplete gamma,
polygamma, zeta, i0e/i1/i1e, erfcx, log_ndtr, modified Bessel I0/I1, spherical j0 and orthogonal
polynomial functions are numpy kernels (``ember.ops.special_extra``), and so are the Bessel
functions J0/J1/Y0/Y1, K0/K1 (plain and exp-scaled) and the Airy function Ai
(``ember.ops.special_bessel``).
"""
from __future__ import annotations

import math

from . import types as _t
from .ops import _meta as _M
from .ops import api as _api
from .tensor import Tensor as _Tensor

expit = _api.sigmoid
gammaln = _api.lgamma
psi = digamma = _api.digamma
exp2 = _api.exp2
expm1 = _api.expm1
log1p = _api.log1p
erf = _api.erf
erfc = _api.erfc
erfinv = _api.erfinv
logit = _api.logit
xlogy = _api.xlogy
i0 = _api.i0
sinc = _api.sinc
round = _api.round  # noqa: A001 - PyTorch's name
logsumexp = _api.logsumexp


def softmax(input, dim, *, dtype=None):
    return _api.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _api.log_softmax(input, dim, dtype=dtype)


def entr(input):
    """``-x log x`` elementwise: 0 at 0, -inf for x < 0 and at inf, NaN stays NaN; its gradient
    is PyTorch's -(1 + log x) everywhere: inf at 0, NaN below 0, -inf at inf (where() alone
    would give 0 there). Each special point's branch is a constant with a zero-valued term
    that carries that derivative, finite wherever the branch is not taken."""
    x = input
    finite_pos = (x > 0) & _api.isfinite(x)
    xv = _api.where(finite_pos, x, 1.0)
    val = -xv * _api.log(xv)
    zero = x == 0
    at_zero = _api.sqrt(_api.where(zero, x, 1.0) + 0.0)            # 0, derivative inf
    neg = x < 0
    # exp(-inf) = 0 under a sqrt: derivative inf * 0 = NaN
    below = -math.inf + _api.sqrt(_api.exp(_api.where(neg, x, -1.0) * _ones_but(x, neg, math.inf)))
    big = _api.isposinf(x)
    at_inf = _api.where(big, x, 1.0) * _ones_but(x, big, -math.inf)     # -inf, derivative -inf
    nan = _api.isnan(x)
    at_nan = _api.where(nan, x, 0.0) * _ones_but(x, nan, math.nan)
    r = _api.where(finite_pos, val, _api.where(zero, at_zero, _api.where(neg, below, at_inf)))
    return _api.where(nan, at_nan, r)


def _ones_but(like, mask, value):
    """A constant of ``like``'s dtype: ``value`` where ``mask``, 1 elsewhere."""
    return _api.where(mask, value, _api.ones_like(like))


def ndtr(input):
    """The standard normal distribution function, ``(1 + erf(x / sqrt 2)) / 2``."""
    x = input if input.dtype.is_floating_point else input.to(_t.get_default_dtype())
    return 0.5 * _api.erfc(x * (-1.0 / math.sqrt(2.0)))


def ndtri(input):
    """The inverse of :func:`ndtr` (-inf at 0, inf at 1, NaN outside [0, 1]), accurate in both
    tails: ``sqrt 2 * erfinv(2p - 1)`` loses p's digits in ``2p - 1`` (float32's ndtri(1e-10)
    was -inf, float64's ndtri(1e-10) off in the 8th digit). Computed in float64 on the smaller
    tail ``q = min(p, 1 - p)`` (1 - p is exact for p >= 1/2), see :func:`_ndtri_lower`."""
    p = input if input.dtype.is_floating_point else input.to(_t.get_default_dtype())
    pd = p.to(_t.float64)
    upper = pd > 0.5
    q = _api.where(upper, 1.0 - pd, pd)
    x = _ndtri_lower(q)
    return _api.where(upper, -x, x).to(p.dtype)


_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _ndtri_lower(q):
    """ndtri of float64 ``q`` in [0, 1/2] (NaN below 0). A textbook rational start (Abramowitz
    & Stegun 26.2.23, within 5e-4), then Newton steps on ``log_ndtr(x) = log q``, which keep
    their precision however deep the tail (each step's slope, phi / Phi, from the logs).
    The gradient, sqrt(2 pi) exp(x^2 / 2) as PyTorch's, is attached by ``_with_ndtri_grad``."""
    qd = q.detach()
    valid = (qd > 0) & (qd <= 0.5)
    qs = _api.where(valid, qd, 0.25)
    t = _api.sqrt(-2.0 * _api.log(qs))
    x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
          (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    target = _api.log(qs)
    for _ in range(4):
        log_cdf = log_ndtr(x)
        log_pdf = -0.5 * x * x - math.log(_SQRT_2PI)
        x = x - (log_cdf - target) * _api.exp(log_cdf - log_pdf)
    x = _api.where(qd == 0.5, 0.0, x)
    x = _api.where(qd == 0, -math.inf, _api.where(valid | (qd == 0), x, math.nan))
    return _with_ndtri_grad(x, q)


def _with_ndtri_grad(x, q):
    """``x`` (the detached ndtri of ``q``) with its derivative k(x) = sqrt(2 pi) exp(x^2 / 2) in
    ``q``: x + dq k(x + dq k(x) / 2), dq = q - q.detach() (zero), has first derivative k(x) and
    second k'(x) k(x), as differentiating k(result) gives. Where k overflows (|x| > 37.6, and
    x = -inf at q = 0) it is x + sqrt(dq): x with derivative inf, as PyTorch's k(x) (the
    second derivative there is -inf rather than PyTorch's inf or NaN); NaN stays NaN."""
    if not q.requires_grad:
        return x
    dq = q - q.detach()
    xs = _api.where(_api.isfinite(x), x, 0.0)
    k = _SQRT_2PI * _api.exp(0.5 * xs * xs)
    nan = _api.isnan(x)
    steep = _api.logical_not(_api.isfinite(k) & _api.isfinite(x))
    k = _api.where(steep, 0.0, k)
    xs = _api.where(steep, 0.0, xs)
    inner = xs + dq * k * 0.5
    smooth = xs + dq * (_SQRT_2PI * _api.exp(0.5 * inner * inner))
    # each branch's derivative finite where another branch is taken (where() passes it a 0)
    steep_r = x + _api.sqrt(_api.where(steep, dq, 1.0) + 0.0)
    nan_r = _api.where(nan, x, 0.0) * (1.0 + dq)
    return _api.where(nan, nan_r, _api.where(steep, steep_r, smooth))


def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    if not isinstance(input, _Tensor):
        input = _api.scalar_tensor(input, dtype=other.dtype if other.dtype.is_floating_point
                                   else _t.get_default_dtype())
    if not isinstance(other, _Tensor):
        other = _api.scalar_tensor(other, dtype=input.dtype if input.dtype.is_floating_point
                                   else _t.get_default_dtype())
    dt = _M.result_dtype(input, other)
    if dt in (_t.float16, _t.bfloat16):
        # torch casts both to the half result dtype first (TensorIterator's common dtype), and
        # its half kernel rounds log1p(other) to it before the product
        input, other = input.to(dt), other.to(dt)
    r = input * _api.log1p(other)
    return _api.where((input == 0) & ~_api.isnan(other), _api.zeros_like(r), r)


def multigammaln(input, p):
    """The multivariate log-gamma of dimension ``p``: ``p(p-1)/4 log pi + sum_j lgamma(x - j/2)``."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not bool((input > (p - 1) / 2).all()):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    out = _api.lgamma(input) + p * (p - 1) / 4 * math.log(math.pi)
    for j in range(1, p):
        out = out + _api.lgamma(input - j / 2)
    return out


# the incomplete gamma, polygamma, zeta, scaled Bessel, erfcx/log_ndtr, Bessel and polynomial kernels
from .ops import special_extra as _sx  # noqa: E402

gammainc = _api.igamma
gammaincc = _api.igammac
polygamma = _api.polygamma
zeta = _sx.zeta
i0e = _sx.special_i0e.binding
i1 = _sx.special_i1.binding
i1e = _sx.special_i1e.binding
erfcx = _sx.special_erfcx.binding
log_ndtr = _sx.special_log_ndtr.binding
modified_bessel_i0 = _sx.special_modified_bessel_i0.binding
modified_bessel_i1 = _sx.special_modified_bessel_i1.binding
spherical_bessel_j0 = _sx.special_spherical_bessel_j0.binding
globals().update(_sx.POLY_OPS)

from .ops import special_bessel as _sb  # noqa: E402

bessel_j0 = _sb.special_bessel_j0.binding
bessel_j1 = _sb.special_bessel_j1.binding
bessel_y0 = _sb.special_bessel_y0.binding
bessel_y1 = _sb.special_bessel_y1.binding
modified_bessel_k0 = _sb.special_modified_bessel_k0.binding
modified_bessel_k1 = _sb.special_modified_bessel_k1.binding
scaled_modified_bessel_k0 = _sb.special_scaled_modified_bessel_k0.binding
scaled_modified_bessel_k1 = _sb.special_scaled_modified_bessel_k1.binding
airy_ai = _sb.special_airy_ai.binding

# torch's out= on every special function (ember/ops/_out.py)
from .ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), _out_mod.SPECIAL, "special.")
