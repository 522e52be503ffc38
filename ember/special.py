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
    """``-x log x`` elementwise: 0 at 0, -inf for x < 0, NaN stays NaN."""
    zero = _api.zeros_like(input)
    safe = _api.where(input > 0, input, _api.ones_like(input))
    val = -input * _api.log(safe)
    return _api.where(input > 0, val, _api.where(input == 0, zero, _api.full_like(input, -math.inf)))\
        .where(~_api.isnan(input), input)


def ndtr(input):
    """The standard normal distribution function, ``(1 + erf(x / sqrt 2)) / 2``."""
    x = input if input.dtype.is_floating_point else input.to(_t.get_default_dtype())
    return 0.5 * _api.erfc(x * (-1.0 / math.sqrt(2.0)))


def ndtri(input):
    """The inverse of :func:`ndtr`: ``sqrt 2 * erfinv(2p - 1)`` (-inf at 0, inf at 1, NaN outside)."""
    p = input if input.dtype.is_floating_point else input.to(_t.get_default_dtype())
    return math.sqrt(2.0) * _api.erfinv(2.0 * p - 1.0)


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
