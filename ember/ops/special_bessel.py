"""``torch.special``'s Bessel functions of the first and second kind (``bessel_j0``, ``bessel_j1``,
``bessel_y0``, ``bessel_y1``), the modified Bessel functions of the second kind (``modified_bessel_k0``,
``modified_bessel_k1`` and their ``exp(x)``-scaled forms) and the Airy function ``airy_ai``.

Like the other special-function kernels (``ember.ops.special_extra``) these are float64 numpy
kernels (float32 input is computed in float64 and rounded; the half types and complex raise
PyTorch's "not implemented for" error), kept whole by the compiler (extern). PyTorch has no
derivative for any of them (its results do not require grad), so they are tagged
nondifferentiable here too.

The method: each function is split into elementary pieces (a logarithm, the known zeros, an
exponential or a phase) times smooth factors, and each smooth factor is a Chebyshev expansion whose
coefficients ember computes itself in 100-digit arithmetic (``ember.ops._bessel_gen``, tables in
``ember.ops._bessel_tables``):

* ``J0 = (x^2 - j_{0,1}^2)(x^2 - j_{0,2}^2) R(x^2)`` on [0, 8] with the zeros in double-double, so
  the result keeps its relative accuracy next to the zeros; ``J1`` likewise with ``x`` factored;
* ``Y0 = 2/pi log(x) J0 + S(x^2)``, ``Y1 = 2/pi (J1 log x - 1/x) + x S(x^2)`` on (0, 8];
* past 8, Hankel's form ``sqrt(2/(pi x)) (P cos chi -+ Q sin chi)`` with ``P``, ``x Q`` expanded in
  ``64/x^2``; the phase ``chi = x - pi/4`` (``3 pi/4``) is rounded as PyTorch (Cephes) rounds it,
  so huge arguments agree with PyTorch rather than with the exact phase;
* ``K0 = -log(x/2) I0 + A(x^2)``, ``K1 = 1/x + log(x/2) I1 + x A(x^2)`` on (0, 1], and
  ``exp(x) sqrt(x) K`` expanded in ``2/x`` past 1;
* ``Ai`` expanded directly on [-2, 2]; past 2 ``exp(-zeta) / (2 sqrt(pi) x^(1/4)) F(1/zeta)``
  (0 past 103.892, PyTorch's cut-off), below -2 the modulus/phase form
  ``|x|^(-1/4) / sqrt(pi) (P sin(zeta + pi/4) - Q cos(zeta + pi/4))``.

Edge values follow PyTorch: J0/J1 NaN at +-inf; Y0/Y1 -inf at 0, NaN for x < 0 and at inf;
K0/K1 inf at 0, 0 at inf, NaN for x < 0; Ai NaN at +-inf.
"""
from __future__ import annotations

import math

import numpy as np

from . import _bessel_tables as T
from .special_extra import _nd_unary, np_bessel_i

_TWO_OVER_PI = 2.0 / math.pi
_PIO4 = math.pi / 4
_3PIO4 = 3 * math.pi / 4
_SQ2OPI = math.sqrt(2.0 / math.pi)
_AIRY_MAX = 103.892   # PyTorch returns 0 above this (Ai underflows to subnormals there)


def _cheb(c, t):
    """Clenshaw's recurrence for ``c[0]/2 + sum_k c[k] T_k(t)``."""
    b1 = np.zeros_like(t)
    b2 = np.zeros_like(t)
    t2 = 2.0 * t
    for ck in reversed(c[1:]):
        b1, b2 = ck + t2 * b1 - b2, b1
    return 0.5 * c[0] + t * b1 - b2


def _zero_factor(a, zeros):
    """prod (a^2 - z^2) with each ``a - z`` formed as ``(a - z_hi) - z_lo`` (exact near z)."""
    out = np.ones_like(a)
    for hi, lo in zeros:
        out = out * (((a - hi) - lo) * (a + hi + lo))
    return out


def _small_big(a, split):
    small = a <= split
    return small, np.where(small, a, split), np.where(small, split, a)


def _hankel(ab, nu):
    """sqrt(2/(pi x)) (P, Q) and the phase chi for x >= 8 (``ab``)."""
    t = 128.0 / (ab * ab) - 1.0
    P = _cheb(T.P0_BIG if nu == 0 else T.P1_BIG, t)
    Q = _cheb(T.Q0_BIG if nu == 0 else T.Q1_BIG, t) / ab
    chi = ab - (_PIO4 if nu == 0 else _3PIO4)
    r = _SQ2OPI / np.sqrt(ab)
    return r * P, r * Q, chi


def _j(a, nu):
    small, as_, ab = _small_big(a, 8.0)
    t = as_ * as_ / 32.0 - 1.0
    if nu == 0:
        js = _zero_factor(as_, T.J0_ZEROS) * _cheb(T.J0_SMALL, t)
    else:
        js = as_ * _zero_factor(as_, T.J1_ZEROS) * _cheb(T.J1_SMALL, t)
    P, Q, chi = _hankel(ab, nu)
    jb = P * np.cos(chi) - Q * np.sin(chi)
    return np.where(small, js, jb)


def np_bessel_j0(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.isnan(x), np.nan, _j(np.abs(x), 0))


def np_bessel_j1(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        r = _j(np.abs(x), 1)
        return np.where(np.isnan(x), np.nan, np.where(np.signbit(x), -r, r))


def _y(x, nu):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        pos = np.where(x > 0, x, 1.0)
        small, xs, xb = _small_big(pos, 8.0)
        t = xs * xs / 32.0 - 1.0
        lx = np.log(xs)
        if nu == 0:
            ys = _TWO_OVER_PI * lx * _j(xs, 0) + _cheb(T.Y0_SMALL, t)
        else:
            ys = _TWO_OVER_PI * (_j(xs, 1) * lx - 1.0 / xs) + xs * _cheb(T.Y1_SMALL, t)
        P, Q, chi = _hankel(xb, nu)
        yb = P * np.sin(chi) + Q * np.cos(chi)
        r = np.where(small, ys, yb)
        r = np.where(x == 0, -np.inf, r)
        return np.where((x < 0) | np.isnan(x), np.nan, r)


def np_bessel_y0(x):
    return _y(x, 0)


def np_bessel_y1(x):
    return _y(x, 1)


def np_bessel_k(x, nu, scaled):
    """K0 / K1 (``nu``), ``scaled``: times exp(x)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        pos = np.where(x > 0, x, 1.0)
        small, xs, xb = _small_big(pos, 1.0)
        t = 2.0 * xs * xs - 1.0
        lh = np.log(0.5 * xs)
        if nu == 0:
            ks = -lh * np_bessel_i(xs, 0, False) + _cheb(T.K0_SMALL, t)
        else:
            ks = 1.0 / xs + lh * np_bessel_i(xs, 1, False) + xs * _cheb(T.K1_SMALL, t)
        if scaled:
            ks = ks * np.exp(xs)
        kb = _cheb(T.K0_BIG if nu == 0 else T.K1_BIG, 2.0 / xb - 1.0) / np.sqrt(xb)
        if not scaled:
            kb = kb * np.exp(-xb)
        r = np.where(small, ks, kb)
        r = np.where(x == 0, np.inf, r)
        return np.where((x < 0) | np.isnan(x), np.nan, r)


def np_airy_ai(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        fin = np.isfinite(x)
        xf = np.where(fin, x, 0.0)
        mid = np.abs(xf) <= 2.0
        r_mid = _cheb(T.AI_MID, np.clip(xf, -2.0, 2.0) * 0.5)
        # x > 2
        xp = np.where(xf > 2.0, xf, 2.0)
        sq = np.sqrt(xp)
        zp = 2.0 * xp * sq / 3.0
        r_pos = np.exp(-zp) / (2.0 * math.sqrt(math.pi) * np.sqrt(sq)) * _cheb(T.AI_POS, 2.0 * T.AI_ZETA2 / zp - 1.0)
        r_pos = np.where(xf > _AIRY_MAX, 0.0, r_pos)
        # x < -2 (zeta and its phase rounded in PyTorch's (Cephes') order)
        xn = np.where(xf < -2.0, xf, -2.0)
        sq = np.sqrt(-xn)
        zn = -2.0 * xn * sq / 3.0
        tz = 2.0 * T.AI_ZETA2 / zn - 1.0
        P = _cheb(T.AI_NEG_P, tz)
        Q = _cheb(T.AI_NEG_Q, tz) / zn
        th = zn + 0.25 * math.pi
        r_neg = (np.sin(th) * P - np.cos(th) * Q) / (math.sqrt(math.pi) * np.sqrt(sq))
        r = np.where(mid, r_mid, np.where(xf > 0, r_pos, r_neg))
        return np.where(fin, r, np.nan)


special_bessel_j0 = _nd_unary("special_bessel_j0", np_bessel_j0, "bessel_j0_cpu")
special_bessel_j1 = _nd_unary("special_bessel_j1", np_bessel_j1, "bessel_j1_cpu")
special_bessel_y0 = _nd_unary("special_bessel_y0", np_bessel_y0, "bessel_y0_cpu")
special_bessel_y1 = _nd_unary("special_bessel_y1", np_bessel_y1, "bessel_y1_cpu")
special_modified_bessel_k0 = _nd_unary("special_modified_bessel_k0", lambda x: np_bessel_k(x, 0, False),
                                       "modified_bessel_k0_cpu")
special_modified_bessel_k1 = _nd_unary("special_modified_bessel_k1", lambda x: np_bessel_k(x, 1, False),
                                       "modified_bessel_k1_cpu")
special_scaled_modified_bessel_k0 = _nd_unary("special_scaled_modified_bessel_k0",
                                              lambda x: np_bessel_k(x, 0, True), "scaled_modified_bessel_k0_cpu")
special_scaled_modified_bessel_k1 = _nd_unary("special_scaled_modified_bessel_k1",
                                              lambda x: np_bessel_k(x, 1, True), "scaled_modified_bessel_k1_cpu")
special_airy_ai = _nd_unary("special_airy_ai", np_airy_ai, "airy_ai_cpu")
