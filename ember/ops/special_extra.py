"""The rest of ``torch.special``: the incomplete gamma functions (``igamma`` / ``igammac``, as
``special.gammainc`` / ``gammaincc``), ``polygamma``, the Hurwitz ``zeta``, ``i0`` / ``i0e`` / ``i1`` /
``i1e``, ``erfcx``, ``log_ndtr``, the modified Bessel functions ``I0`` / ``I1``,
``spherical_bessel_j0`` and the orthogonal polynomials (Chebyshev T/U/V/W and their shifted
forms, Hermite H/He, Laguerre L, Legendre P).

Why kernels and not composites: the incomplete gamma series / continued fraction and the zeta
sum run a data-dependent number of terms, and the polynomial recurrences a data-dependent
number of steps (the degree is a tensor), which no fixed graph of prims expresses. So these are
numpy kernels evaluated in float64 (float32 and the half types are computed in float64 and
rounded), kept whole by the compiler (extern in ``ember.prims.coverage``; ``EXTERN`` below).
Their derivatives are PyTorch's formulas written in ember ops (differentiable again):

* ``igamma(a, x)``/``igammac``: ``+-exp((a-1) log x - x - lgamma(a))`` w.r.t. ``x``; w.r.t. ``a``
  PyTorch has none and raises, so does ember;
* ``polygamma(n, x)`` -> ``polygamma(n + 1, x)``; ``zeta(x, q)`` -> ``-x zeta(x + 1, q)`` w.r.t. ``q``
  (none w.r.t. ``x``, as PyTorch);
* ``i0' = i1``, ``i0e' = i1e - sgn(x) i0e``, ``i1' = i0 - i1/x``, ``i1e' = i0e - i1e (sgn x + 1/x)`` (1/2 at 0),
  ``erfcx' = 2 x erfcx - 2/sqrt(pi)``, ``log_ndtr' = exp(-x^2/2 - log_ndtr) / sqrt(2 pi)``.

The Bessel functions and polynomials have no derivative in PyTorch (their results do not require
grad); they are tagged nondifferentiable here too.

Algorithms (written for ember; the Chebyshev coefficient tables are Cephes' public-domain data):

* P(a, x) by its power series where x < a + 1 (or x <= 1), Q(a, x) by the Legendre continued
  fraction (modified Lentz) past that, and for small ``a`` with x <= 1.1 Q by
  ``-expm1(a log x - lgamma(1 + a)) - x^a / Gamma(a) sum_{n>=1} (-x)^n / (n! (a + n))``, which keeps
  Q accurate where it is close to 1. The prefactor ``x^a e^-x / Gamma(a)`` is computed from
  Stirling's series with ``log1p`` near the peak for large ``a`` (error ~eps |x - a| in the
  exponent instead of ~eps a log a);
* digamma/trigamma: the recurrence up to 10, the asymptotic series, the reflection formula below
  1/2; polygamma n >= 2 as ``(-1)^(n+1) n! zeta(n + 1, x)`` (PyTorch's edge values follow);
* zeta(s, q): the direct sum until the terms are negligible or ``q + k`` passes 9, then the
  Euler-Maclaurin tail with 12 Bernoulli terms;
* erfcx: ``exp(x^2) erfc(x)`` below 3, Laplace's continued fraction above (evaluated backward),
  ``2 exp(x^2) - erfcx(-x)`` for negative x;
* log_ndtr: ``log(erfcx(-x/sqrt2)/2) - x^2/2`` below -1, ``log1p(-erfc(x/sqrt2)/2)`` above;
* polynomials: the three-term recurrences up to the (truncated) degree, with PyTorch's closed forms
  at |x| = 1 and its trigonometric forms for |x| < 1 at large degree (Chebyshev).
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta as _M
from . import api
from .registry import defop

_EPS = 1.1102230246251565e-16
_TINY = 1e-300
_MAXIT = 20_000_000   # the series / fraction need ~9 sqrt(a) terms near x = a
_HALF = (_t.float16, _t.bfloat16)

# ops kept whole by the compiler -> why (merged into ember.prims.coverage.EXTERN)
EXTERN = {}


def _extern(name, why):
    EXTERN[name] = why


def _host(a):
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _not_impl(kernel, dt):
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt.legacy_name}\'')


def _dt_of(x):
    if isinstance(x, Tensor):
        return x.dtype
    return _t.from_numpy_dtype(np.asarray(x).dtype)


def _promote(args):
    """PyTorch's promotion over tensors (metas) or backend arrays (kernels) and Python numbers."""
    if any(isinstance(a, Tensor) for a in args):
        return _M.result_dtype(*args)
    dims, zero, scalars = [], [], []
    for a in args:
        if isinstance(a, (bool, int, float, complex)):
            scalars.append(a)
        else:
            a = _host(a)
            (dims if a.ndim else zero).append(_t.from_numpy_dtype(a.dtype))
    return _t.result_type_from(dims, zero, scalars)


def _result_dt(kernel, args, halves=True):
    """PyTorch's promotion over the arguments, integer/bool -> the default float dtype; complex (and
    the half types where PyTorch has no kernel for them) raise naming the kernel."""
    dt = _promote(args)
    if dt.is_complex or (not halves and dt in _HALF):
        raise _not_impl(kernel, dt)
    return dt if dt.is_floating_point else _t.get_default_dtype()


def _f64(x):
    return _host(x).astype(np.float64)


def _finish(xp, r, dt):
    return xp.asarray(np.asarray(r).astype(dt.np, order="C"))   # (ascontiguousarray would make 0-d 1-d)


def _bshape(*args):
    shapes = [tuple(a.shape) for a in args if not isinstance(a, (bool, int, float, complex))]
    return _M.broadcast_shapes(*shapes) if len(shapes) > 1 else (shapes[0] if shapes else ())


# ======================================================================== numeric cores (float64)
_LG = np.frompyfunc(lambda v: math.lgamma(v) if (math.isfinite(v) and not (v <= 0 and v == int(v)))
                    else math.inf, 1, 1)


def _lgamma(x):
    return np.asarray(_LG(np.asarray(x, np.float64)), dtype=np.float64)


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _erfc(x):
    return np.asarray(_ERFC(np.asarray(x, np.float64)), dtype=np.float64)


# B_2j / (2j)!, j = 1..12
_BERN = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
         -174611 / 330, 854513 / 138, -236364091 / 2730)
_BERN_F = tuple(b / math.factorial(2 * j + 2) for j, b in enumerate(_BERN))


def np_zeta(s, q):
    """Hurwitz zeta ``sum_k (q + k)^-s`` with PyTorch's domain: inf at s = 1 and at q a non-positive
    integer, NaN for s < 1 and for q <= 0 with s not an integer."""
    s, q = np.broadcast_arrays(np.asarray(s, np.float64), np.asarray(q, np.float64))
    shape = s.shape
    s, q = s.ravel(), q.ravel()
    out = np.full(s.shape, np.nan)
    with np.errstate(all="ignore"):
        # PyTorch's order of tests (so zeta(nan, 0) is inf, as there)
        rem = (s != 1) & ~(s < 1)
        pole = (s == 1) | (rem & (q <= 0) & (q == np.floor(q)))
        bad = ~rem | ((q <= 0) & (q != np.floor(q)) & (s != np.floor(s))) | np.isnan(s) | np.isnan(q)
        out[pole] = np.inf
        idx = np.flatnonzero(~pole & ~bad)
        ss, qq = s[idx], q[idx]
        tot = np.power(qq, -ss)
        a = qq.copy()
        b = tot.copy()
        done = np.zeros(idx.size, bool)
        i = 0
        act = np.arange(idx.size)
        while act.size:
            i += 1
            a[act] += 1.0
            b[act] = np.power(a[act], -ss[act])
            tot[act] += b[act]
            conv = np.abs(b[act]) < _EPS * np.abs(tot[act])
            done[act[conv]] = True
            keep = ~conv & ((i < 9) | (a[act] <= 9.0))
            act = act[keep]
        # the Euler-Maclaurin tail at w = a for the elements that did not converge directly
        t = np.flatnonzero(~done)
        if t.size:
            w, st, bt = a[t], ss[t], b[t]
            tt = tot[t] + bt * w / (st - 1.0) - 0.5 * bt
            fac = np.ones_like(w)       # s (s+1) ... (s+2j-2)
            pw = bt / w                 # w^(-s-2j+1)
            live = np.ones(t.size, bool)
            for j, c in enumerate(_BERN_F):
                fac = fac * (st + 2 * j) * (1.0 if j == 0 else (st + 2 * j - 1))
                if j > 0:
                    pw = pw / (w * w)
                term = c * fac * pw
                tt = np.where(live, tt + term, tt)
                live &= ~(np.abs(term) < _EPS * np.abs(tt))
            tot[t] = tt
        out[idx] = tot
    return out.reshape(shape)


_PSI_ASYMPT = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


def _shift_up(y, f, lim=10.0):
    """(y + k, sum_{j<k} f(y + j)) with y + k >= lim (y >= 1/2 elementwise)."""
    acc = np.zeros_like(y)
    for _ in range(int(lim) + 1):
        small = y < lim
        if not small.any():
            break
        acc += np.where(small, f(y), 0.0)
        y = np.where(small, y + 1.0, y)
    return y, acc


def np_digamma(x):
    """psi(x): -inf at +0, +inf at -0, NaN at the negative integers and -inf."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        zero = x == 0
        negint = (x < 0) & (x == np.floor(x))
        xs = np.where(zero | negint | ~np.isfinite(x), 1.0, x)
        refl = xs < 0.5
        y = np.where(refl, 1.0 - xs, xs)
        w, shift = _shift_up(y, lambda v: 1.0 / v)
        w2 = 1.0 / (w * w)
        ser = np.zeros_like(w)
        for c in reversed(_PSI_ASYMPT):
            ser = (ser + c) * w2
        psi = np.log(w) - 0.5 / w - ser - shift
        r = xs - np.round(xs)
        psi = np.where(refl, psi - math.pi / np.tan(math.pi * r), psi)
        psi = np.where(zero, -1.0 / x, np.where(negint, np.nan, psi))
        psi = np.where(np.isposinf(x), np.inf, np.where(np.isneginf(x) | np.isnan(x), np.nan, psi))
    return psi


# B_2k for the trigamma asymptotic series 1/y + 1/(2y^2) + sum B_2k / y^(2k+1)
_TRI_ASYMPT = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)


def np_trigamma(x):
    """psi'(x), with the reflection ``pi^2 / sin^2(pi x) - psi'(1 - x)`` below 1/2 (so, as in
    PyTorch, a huge finite value at the negative integers and inf at 0)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        refl = x < 0.5
        y = np.where(refl, 1.0 - x, x)
        y = np.where(np.isnan(y), 1.0, y)
        w, shift = _shift_up(y, lambda v: 1.0 / (v * v))
        iw = 1.0 / w
        iw2 = iw * iw
        ser = np.zeros_like(w)
        for c in reversed(_TRI_ASYMPT):
            ser = (ser + c) * iw2
        tri = shift + iw + 0.5 * iw2 + ser * iw
        tri = np.where(np.isinf(w), 0.0, tri)
        s = np.sin(math.pi * x)
        tri = np.where(refl, math.pi ** 2 / (s * s) - tri, tri)
        tri = np.where(np.isnan(x) | np.isneginf(x), np.nan, tri)
    return tri


def np_polygamma(n, x):
    if n == 0:
        return np_digamma(x)
    if n == 1:
        return np_trigamma(x)
    with np.errstate(all="ignore"):
        return (1.0 if n % 2 else -1.0) * float(math.factorial(n)) * np_zeta(float(n + 1), x)


_ZETA_INT = np_zeta(np.arange(2.0, 64.0), 1.0)   # zeta(k), k = 2..63
_EULER = 0.57721566490153286061


def _lgamma1p(a):
    """lgamma(1 + a), accurate for small |a| (Taylor series -gamma a + sum (-1)^k zeta(k) a^k / k)."""
    a = np.asarray(a, np.float64)
    small = np.abs(a) < 0.5
    out = _lgamma(1.0 + a)
    if small.any():
        z = a[small]
        acc = np.zeros_like(z)
        for k in range(63, 1, -1):
            acc = acc * z + (-1.0) ** k * _ZETA_INT[k - 2] / k
        out[small] = (acc * z - _EULER) * z
    return out


def _stirling_corr(a):
    ia = 1.0 / a
    ia2 = ia * ia
    return ia * (1 / 12 - ia2 * (1 / 360 - ia2 * (1 / 1260 - ia2 * (1 / 1680 - ia2 / 1188))))


def _log_gamma_fac(a, x):
    """log(x^a e^-x / Gamma(a)) for a, x > 0."""
    direct = a * np.log(x) - x - _lgamma(a)
    near = (a >= 10.0) & (x > 0.1 * a) & (x < 10.0 * a)
    if near.any():
        aa, xx = a[near], x[near]
        t = (xx - aa) / aa
        direct[near] = aa * (np.log1p(t) - t) + 0.5 * np.log(aa / (2 * math.pi)) - _stirling_corr(aa)
    return direct


def _p_series(a, x):
    """P(a, x) = x^a e^-x / Gamma(a+1) sum_n x^n / ((a+1)...(a+n))."""
    s = np.ones_like(x)
    term = np.ones_like(x)
    idx = np.arange(x.size)
    n = 0
    while idx.size and n < _MAXIT:
        n += 1
        term[idx] *= x[idx] / (a[idx] + n)
        s[idx] += term[idx]
        idx = idx[term[idx] > _EPS * s[idx]]
    return np.exp(_log_gamma_fac(a, x)) * s / a


def _q_cf(a, x):
    """Q(a, x) = x^a e^-x / Gamma(a) / (x + 1 - a - 1(1-a)/(x + 3 - a - 2(2-a)/(x + 5 - a - ...)))."""
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / _TINY)
    d = 1.0 / np.where(np.abs(b) < _TINY, _TINY, b)
    h = d.copy()
    idx = np.arange(x.size)
    k = 0
    while idx.size and k < _MAXIT:
        k += 1
        an = -k * (k - a[idx])
        b[idx] += 2.0
        dd = an * d[idx] + b[idx]
        dd = np.where(np.abs(dd) < _TINY, _TINY, dd)
        cc = b[idx] + an / c[idx]
        cc = np.where(np.abs(cc) < _TINY, _TINY, cc)
        d[idx] = 1.0 / dd
        c[idx] = cc
        delta = cc * d[idx]
        h[idx] *= delta
        idx = idx[np.abs(delta - 1.0) > _EPS]
    return np.exp(_log_gamma_fac(a, x)) * h


def _q_small_a(a, x):
    """Q(a, x) for x <= 1.1 where a is small: 1 - x^a/Gamma(a+1) - x^a/Gamma(a) sum_{n>=1} (-x)^n/(n!(a+n))."""
    s = np.zeros_like(x)
    term = np.ones_like(x)        # (-x)^n / n!
    idx = np.arange(x.size)
    n = 0
    while idx.size and n < _MAXIT:
        n += 1
        term[idx] *= -x[idx] / n
        add = term[idx] / (a[idx] + n)
        s[idx] += add
        idx = idx[np.abs(add) > _EPS * np.abs(s[idx])]
    lx = np.log(x)
    return -np.expm1(a * lx - _lgamma1p(a)) - np.exp(a * lx - _lgamma(a)) * s


def np_igamma(a, x, upper):
    """The regularised incomplete gamma P(a, x) (``upper`` False) or Q(a, x), with PyTorch's
    values at the domain edges (NaN for a or x < 0, the limits at a = 0, x = 0 and infinities)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.full(a.shape, np.nan)
    lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)   # values of (Q, P) limits: at x=0 and x=inf
    with np.errstate(all="ignore"):
        neg = (x < 0) | (a < 0)
        a0 = ~neg & (a == 0)
        out[a0 & (x > 0)] = 0.0 if upper else 1.0
        rest = ~neg & ~a0
        x0 = rest & (x == 0)
        out[x0] = lo
        rest &= ~x0
        ainf = rest & np.isinf(a)
        out[ainf & ~np.isinf(x)] = 1.0 if upper else 0.0
        rest &= ~ainf
        xinf = rest & np.isinf(x)
        out[xinf] = hi
        rest &= ~xinf & ~np.isnan(a) & ~np.isnan(x)
        idx = np.flatnonzero(rest)
        if idx.size:
            aa, xx = a[idx], x[idx]
            res = np.empty(idx.size)
            cf = (xx > 1.1) & (xx >= aa)
            small_x = xx <= 1.1
            ps_for_q = np.where(xx <= 0.5, -0.4 / np.log(xx) < aa, xx * 1.1 < aa)
            qsa = small_x & ~ps_for_q
            if upper:
                ps = ~cf & ~qsa
            else:
                ps = ~((xx > 1.0) & (xx > aa))
                cf &= ~ps
                qsa &= ~ps
            if ps.any():
                p = _p_series(aa[ps], xx[ps])
                res[ps] = 1.0 - p if upper else p
            if cf.any():
                q = _q_cf(aa[cf], xx[cf])
                res[cf] = q if upper else 1.0 - q
            if qsa.any():
                q = _q_small_a(aa[qsa], xx[qsa])
                res[qsa] = q if upper else 1.0 - q
            out[idx] = res
    return out.reshape(shape)


def _chbevl(x, coefs):
    b0 = np.full_like(x, coefs[0])
    b1 = np.zeros_like(x)
    b2 = b1
    for c in coefs[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


from .more_pointwise import _I0A, _I0B  # noqa: E402  (Cephes' i0 tables, shared)

_I1A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
        -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
        3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
        -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
        9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
        -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
        4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
        -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
        2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
        -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
        -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
        -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
        4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
        -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
        3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
        -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
        -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
        7.78576235018280120474E-1)


def np_bessel_i(x, order, scaled):
    """I0 / I1 (``order``), ``scaled`` = times exp(-|x|): Cephes' Chebyshev expansions of the
    scaled functions on [0, 8] and (8, inf)."""
    x = np.asarray(x, np.float64)
    z = np.abs(x)
    A, B = (_I0A, _I0B) if order == 0 else (_I1A, _I1B)
    with np.errstate(all="ignore"):
        small = z <= 8.0
        zs = np.where(small, z, 0.0)
        zl = np.where(small, 8.0, z)
        ra = _chbevl(zs * 0.5 - 2.0, A)
        rb = _chbevl(32.0 / zl - 2.0, B)
        if order == 1:
            ra = ra * zs
        if scaled:
            r = np.where(small, ra, rb / np.sqrt(zl))
        else:
            r = np.where(small, np.exp(zs) * ra, np.exp(zl) * rb / np.sqrt(zl))
        if order == 1:
            r = np.where(x < 0, -r, r)
        return np.where(np.isnan(x), np.nan, r)


def _single_exp_overflow(r, x, dt):
    """PyTorch's unscaled I0 / I1 (and modified_bessel_i0 / i1) in float32 (bfloat16 / float16 compute
    in float32) multiply ``exp(|x|)`` in float32: from |x| > log(FLT_MAX) = 88.7228 that is inf, and so is
    the result (signed as I1), although I0(x) stays finite up to ~91.9. Same here, before rounding."""
    if dt not in (_t.float32, _t.bfloat16, _t.float16):
        return r
    with np.errstate(over="ignore"):
        over = np.isinf(np.exp(np.abs(x).astype(np.float32)))
    return np.where(over & ~np.isnan(r), np.copysign(np.inf, r), r)   # (NaN at +-inf stays, as PyTorch)


_CF_TERMS = 120
_ERFCX_SPLIT = 3.0


def _erfcx_pos(x):
    """erfcx for x >= 0."""
    out = np.empty_like(x)
    small = x < _ERFCX_SPLIT
    xs = x[small]
    out[small] = np.exp(xs * xs) * _erfc(xs)
    xl = x[~small]
    with np.errstate(all="ignore"):
        t = xl.copy()
        for k in range(_CF_TERMS, 0, -1):
            t = xl + (0.5 * k) / t
        out[~small] = 1.0 / (math.sqrt(math.pi) * t)
    return out


def np_erfcx(x):
    """exp(x^2) erfc(x)."""
    x = np.asarray(x, np.float64)
    shape = x.shape
    x = x.ravel()
    out = np.full(x.shape, np.nan)
    ok = ~np.isnan(x)
    xv = x[ok]
    with np.errstate(all="ignore"):
        r = _erfcx_pos(np.abs(xv))
        r = np.where(xv < 0, 2.0 * np.exp(xv * xv) - r, r)
    out[ok] = r
    return out.reshape(shape)


def np_log_ndtr(x):
    """log of the standard normal CDF."""
    x = np.asarray(x, np.float64)
    shape = x.shape
    x = x.ravel()
    out = np.full(x.shape, np.nan)
    t = x / math.sqrt(2.0)
    with np.errstate(all="ignore"):
        lo = x < -1.0
        tl = t[lo]
        out[lo] = np.log(np_erfcx(-tl) / 2.0) - tl * tl
        hi = x >= -1.0
        out[hi] = np.log1p(-_erfc(t[hi]) / 2.0)
    return out.reshape(shape)


def np_spherical_j0(x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        x2 = x * x
        small = np.abs(x) < 0.5
        # sin(x)/x = sum (-x^2)^k / (2k+1)!, 9 terms exact to eps for |x| < 1/2
        ser = np.zeros_like(x)
        for k in range(9, -1, -1):
            ser = ser * (-x2) + 1.0 / math.factorial(2 * k + 1)
        r = np.where(small, ser, np.sin(x) / np.where(small, 1.0, x))
        return np.where(np.isinf(x), 0.0, r)


# ---------------------------------------------------------------------- orthogonal polynomials
def _degree(n):
    """PyTorch truncates the degree to an integer (NaN counts as negative: the result is 0)."""
    n = np.asarray(n, np.float64)
    with np.errstate(all="ignore"):
        return np.where(np.isfinite(n), np.trunc(n), np.where(n > 0, 2.0 ** 62, -1.0)).astype(np.int64)


def _recurrence(x, n, p0, p1, step):
    """p_n by p_{k+1} = step(k, x, p_k, p_{k-1}) from p0, p1; elementwise degree n >= 0."""
    out = np.where(n == 0, p0, p1)
    if (n >= 2).any():
        p, q = p0 * np.ones_like(x), p1 * np.ones_like(x)
        idx = np.flatnonzero(n >= 2)
        xs, ns, p, q = x[idx], n[idx], p[idx], q[idx]
        k = 1
        while idx.size:
            r = step(k, xs, q, p)
            k += 1
            fin = ns == k
            out[idx[fin]] = r[fin]
            # the rest keep going; NaN stays NaN, so stop there (inf does not: inf - inf is NaN later)
            stop = fin | np.isnan(r)
            out[idx[stop & ~fin]] = r[stop & ~fin]
            keep = ~stop
            idx, xs, ns, p, q = idx[keep], xs[keep], ns[keep], q[keep], r[keep]
    return out


def np_polynomial(kind, x, n):
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), _degree(n))
    shape = x.shape
    x, n = x.ravel().copy(), n.ravel().copy()
    nf = n.astype(np.float64)
    one = np.ones_like(x)
    with np.errstate(all="ignore"):
        if kind in ("t", "u", "v", "w"):
            p1 = {"t": x, "u": 2 * x, "v": 2 * x - 1, "w": 2 * x + 1}[kind]
            out = _recurrence(x, n, one, p1, lambda k, x_, q, p: 2 * x_ * q - p)
            unit = np.abs(x) == 1
            even = n % 2 == 0
            pos = x > 0
            th = np.arccos(np.clip(x, -1, 1))
            if kind == "t":
                at1 = np.where(pos | even, 1.0, -1.0)
                trig = np.cos(nf * th)
                big = 6
            elif kind == "u":
                at1 = np.where(pos | even, nf + 1, -(nf + 1))
                st = np.sin(th)
                trig = np.where(st != 0, np.sin((nf + 1) * th) / st, (nf + 1) * np.cos((nf + 1) * th) / x)
                big = 8
            elif kind == "v":
                at1 = np.where(pos, 1.0, np.where(even, 2 * nf + 1, -(2 * nf + 1)))
                trig = np.where(np.sin(th / 2) != 1, np.cos((nf + 0.5) * th) / np.cos(th / 2),
                                np.where(even, 2 * nf + 1, -(2 * nf + 1)))
                big = 8
            else:
                at1 = np.where(pos, 2 * nf + 1, np.where(even, 1.0, -1.0))
                trig = np.where(np.cos(th / 2) != 1, np.sin((nf + 0.5) * th) / np.sin(th / 2),
                                np.where(pos, 2 * nf + 1, np.where(even, 1.0, -1.0)))
                big = 8
            out = np.where((n > big) & (np.abs(x) < 1), trig, out)
            out = np.where(unit, at1, out)
        elif kind == "h":
            out = _recurrence(x, n, one, 2 * x, lambda k, x_, q, p: 2 * x_ * q - 2 * k * p)
        elif kind == "he":
            out = _recurrence(x, n, one, x, lambda k, x_, q, p: x_ * q - k * p)
        elif kind == "l":
            out = _recurrence(x, n, one, 1 - x, lambda k, x_, q, p: ((2 * k + 1 - x_) * q - k * p) / (k + 1))
            out = np.where(x == 0, 1.0, out)
        elif kind == "p":
            out = _recurrence(x, n, one, x, lambda k, x_, q, p: ((2 * k + 1) * x_ * q - k * p) / (k + 1))
            out = np.where(np.abs(x) == 1, np.where((x > 0) | (n % 2 == 0), 1.0, -1.0), out)
        else:
            raise ValueError(kind)
        out = np.where(n < 0, 0.0, out)
    return out.reshape(shape)


# ======================================================================== the ops
def _unary_meta(kernel, halves=True):
    def meta(a):
        return _M.out(tuple(a.shape), _result_dt(kernel, (a,), halves))
    return meta


def _binary_meta(kernel, halves=True, ints=True):
    def meta(a, b):
        dt = _promote((a, b))
        if not ints and not dt.is_floating_point and not dt.is_complex:
            raise _not_impl(kernel, dt)
        return _M.out(_bshape(a, b), _result_dt(kernel, (a, b), halves))
    return meta


# ---- igamma / igammac
def _igamma_kernel(name, upper):
    def kernel(xp, a, x):
        _binary_meta(f"{name}_cpu", ints=False)(a, x)   # PyTorch's dtype/shape errors (no integer kernel)
        dt = _result_dt(f"{name}_cpu", (a, x))
        return _finish(xp, np_igamma(_f64(a), _f64(x), upper), dt)
    kernel.__name__ = name
    return kernel


igamma = defop("igamma(Tensor self, Tensor other) -> Tensor", tags=("pointwise",), inplace=True)(
    _igamma_kernel("igamma", False))
igamma.meta = _binary_meta("igamma_cpu", ints=False)
igammac = defop("igammac(Tensor self, Tensor other) -> Tensor", tags=("pointwise",), inplace=True)(
    _igamma_kernel("igammac", True))
igammac.meta = _binary_meta("igammac_cpu", ints=False)


def _igamma_bw(name, sign):
    def bw(ctx, g):
        from ._helpers import grad_for
        a, x = ctx.args
        if ctx.needs_input_grad[0]:
            raise RuntimeError(f"the derivative for '{name}: input' is not implemented.")
        gx = None
        if ctx.needs_input_grad[1]:
            d = api.exp((a - 1) * api.log(x) - x - api.lgamma(a))
            gx = grad_for(g * d if sign > 0 else -(g * d), x)
        return None, gx
    return bw


igamma.derivative(_igamma_bw("igamma", 1))
igammac.derivative(_igamma_bw("igammac", -1))
_extern("igamma", "regularised incomplete gamma: series / continued fraction iterated to convergence "
        "(ember.ops.special_extra); no prim")
_extern("igammac", "regularised incomplete gamma: series / continued fraction iterated to convergence "
        "(ember.ops.special_extra); no prim")


# ---- polygamma
def _check_n(n):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")


@defop("polygamma(int n, Tensor self) -> Tensor", tags=("pointwise",), method=False, save=("self",))
def polygamma(xp, n, a):
    _check_n(n)
    dt = _result_dt("polygamma", (a,))
    return _finish(xp, np_polygamma(int(n), _f64(a)), dt)


@polygamma.meta_fn
def _polygamma_meta(n, a):
    _check_n(n)
    return _M.out(tuple(a.shape), _result_dt("polygamma", (a,)))


@polygamma.derivative
def _polygamma_bw(ctx, g):
    n, a = ctx.args
    return (g * polygamma.binding(n + 1, a),)


_extern("polygamma", "the digamma / trigamma series and a Hurwitz zeta sum iterated to convergence "
        "(ember.ops.special_extra); no prim")


def _tensor_polygamma(self, n):
    return polygamma.binding(n, self)


def _tensor_polygamma_(self, n):
    from .more_pointwise import _inplace
    return _inplace("polygamma", lambda s, n_: polygamma.binding(n_, s))(self, n)


Tensor.polygamma = _tensor_polygamma
Tensor.polygamma_ = _tensor_polygamma_


# ---- zeta
@defop("special_zeta(Tensor self, Tensor other) -> Tensor", tags=("pointwise",), method=False, function=False)
def special_zeta(xp, s, q):
    dt = _result_dt("zeta", (s, q), halves=False)
    return _finish(xp, np_zeta(_f64(s), _f64(q)), dt)


special_zeta.meta = _binary_meta("zeta", halves=False)


@special_zeta.derivative
def _zeta_bw(ctx, g):
    from ._helpers import grad_for
    s, q = ctx.args
    if ctx.needs_input_grad[0]:
        raise RuntimeError("the derivative for 'zeta' is not implemented.")
    return None, grad_for(g * -s * special_zeta.binding(s + 1.0, q), q) if ctx.needs_input_grad[1] else None


_extern("special_zeta", "Hurwitz zeta: a direct sum iterated to convergence, then Euler-Maclaurin "
        "(ember.ops.special_extra); no prim")


def zeta(input, other):
    """Hurwitz zeta ``sum_k (other + k)^-input``; a Python number on either side is a 0-dim tensor."""
    if not isinstance(input, Tensor):
        input = api.scalar_tensor(input, dtype=other.dtype if other.dtype.is_floating_point
                                  else _t.get_default_dtype())
    if not isinstance(other, Tensor):
        other = api.scalar_tensor(other, dtype=input.dtype if input.dtype.is_floating_point
                                  else _t.get_default_dtype())
    return special_zeta.binding(input, other)


# ---- i0e, i1, i1e, erfcx, log_ndtr
def _unary(name, fn, grad_fn_name, halves=True, save_result=True, f32_exp=False):
    def kernel(xp, a):
        dt = _result_dt(f"{name[8:] if name.startswith('special_') else name}_cpu", (a,), halves)
        x = _f64(a)
        r = fn(x)
        return _finish(xp, _single_exp_overflow(r, x, dt) if f32_exp else r, dt)
    kernel.__name__ = name
    op = defop(f"{name}(Tensor self) -> Tensor", tags=("pointwise",), method=False, function=False,
               grad_fn_name=grad_fn_name, save_result=save_result)(kernel)
    op.meta = _unary_meta(f"{name[8:] if name.startswith('special_') else name}_cpu", halves)
    return op


special_i0e = _unary("special_i0e", lambda x: np_bessel_i(x, 0, True), "SpecialI0EBackward0")
special_i1 = _unary("special_i1", lambda x: np_bessel_i(x, 1, False), "SpecialI1Backward0", f32_exp=True)
special_i1e = _unary("special_i1e", lambda x: np_bessel_i(x, 1, True), "SpecialI1EBackward0")
special_erfcx = _unary("special_erfcx", np_erfcx, "SpecialErfcxBackward0", halves=False)
special_log_ndtr = _unary("special_log_ndtr", np_log_ndtr, "SpecialLogNdtrBackward0", halves=False)


def _i0_kernel(xp, a):
    """I0 in float64 (Cephes' Chebyshev expansions, as ``np_bessel_i``), rounded to the result dtype."""
    dt = _result_dt("i0_vml_cpu", (a,))           # (raise on complex before converting)
    x = _f64(a)
    return _finish(xp, _single_exp_overflow(np_bessel_i(x, 0, False), x, dt), dt)


# ``torch.i0`` / ``Tensor.i0`` / ``i0_`` (and ``special.i0``). A kernel with PyTorch's derivative rather
# than a composite: autograd through the Chebyshev recurrence gave slopes of the wrong sign near 0
# (the fit's error differentiated) and NaN from |x| = 710 (exp overflowing times a vanishing term).
i0 = defop("i0(Tensor self) -> Tensor", tags=("pointwise",), inplace=True, grad_fn_name="I0Backward0",
           save_result=False)(_i0_kernel)
i0.meta = _unary_meta("i0_vml_cpu")


@i0.derivative
def _i0_bw(ctx, g):
    """I0' = I1 (PyTorch's ``grad * special_i1(self)``, NaN at +-inf as its i1 there)."""
    x, = ctx.args
    return (g * special_i1.binding(x),)


@special_i0e.derivative
def _i0e_bw(ctx, g):
    x, = ctx.args
    return (g * (special_i1e.binding(x) - api.sign(x) * ctx.result),)


def _not_tiny(x):
    """Where PyTorch's i1/i1e gradients use their formula: |x| above the dtype's epsilon. Below
    it (and at NaN, which is not above) they take the limit 1/2: i1(x) / x would be 0/0 at 0,
    and 1 / x overflows for a denormal x (i1e' was -inf at 1e-310)."""
    return api.abs(x) > float(np.finfo(x.dtype.np).eps)


@special_i1.derivative
def _i1_bw(ctx, g):
    x, = ctx.args
    ok = _not_tiny(x)
    d = api.i0(x) - ctx.result / api.where(ok, x, api.ones_like(x))
    return (g * api.where(ok, d, api.full_like(d, 0.5)),)


@special_i1e.derivative
def _i1e_bw(ctx, g):
    x, = ctx.args
    ok = _not_tiny(x)
    d = special_i0e.binding(x) - ctx.result * (api.sign(x) + 1.0 / api.where(ok, x, api.ones_like(x)))
    return (g * api.where(ok, d, api.full_like(d, 0.5)),)


@special_erfcx.derivative
def _erfcx_bw(ctx, g):
    x, = ctx.args
    return (g * (2.0 * x * ctx.result - 2.0 / math.sqrt(math.pi)),)


@special_log_ndtr.derivative
def _log_ndtr_bw(ctx, g):
    x, = ctx.args
    return (g / math.sqrt(2 * math.pi) * api.exp(-(ctx.result + x * x / 2)),)


for _n, _why in (("i0", "Cephes' Chebyshev expansions of I0"),
                 ("special_i0e", "Cephes' Chebyshev expansion of exp(-|x|) I0"),
                 ("special_i1", "Cephes' Chebyshev expansion of I1"),
                 ("special_i1e", "Cephes' Chebyshev expansion of exp(-|x|) I1"),
                 ("special_erfcx", "exp(x^2) erfc(x) / Laplace's continued fraction, per region"),
                 ("special_log_ndtr", "log of the normal CDF through erfc / erfcx, per region")):
    _extern(_n, f"{_why} (numpy kernel, ember.ops.special_extra); no prim")


# ---- nondifferentiable: modified Bessel I0/I1, spherical j0, polynomials
def _nd_unary(name, fn, kname, f32_exp=False):
    def kernel(xp, a):
        dt = _result_dt(kname, (a,), halves=False)    # (raise on complex before converting)
        x = _f64(a)
        r = fn(x)
        return _finish(xp, _single_exp_overflow(r, x, dt) if f32_exp else r, dt)
    kernel.__name__ = name
    op = defop(f"{name}(Tensor self) -> Tensor", tags=("pointwise", "nondifferentiable"), method=False,
               function=False)(kernel)
    op.meta = _unary_meta(kname, halves=False)
    _extern(name, "a numpy special-function kernel (ember.ops.special_extra); no prim")
    return op


special_modified_bessel_i0 = _nd_unary("special_modified_bessel_i0", lambda x: np_bessel_i(x, 0, False),
                                       "modified_bessel_i0_cpu", f32_exp=True)
special_modified_bessel_i1 = _nd_unary("special_modified_bessel_i1", lambda x: np_bessel_i(x, 1, False),
                                       "modified_bessel_i1_cpu", f32_exp=True)
special_spherical_bessel_j0 = _nd_unary("special_spherical_bessel_j0", np_spherical_j0, "spherical_bessel_j0_cpu")

_POLY = {"chebyshev_polynomial_t": "t", "chebyshev_polynomial_u": "u", "chebyshev_polynomial_v": "v",
         "chebyshev_polynomial_w": "w", "hermite_polynomial_h": "h", "hermite_polynomial_he": "he",
         "laguerre_polynomial_l": "l", "legendre_polynomial_p": "p"}
POLY_OPS = {}


def _make_poly(pub, kind, shifted):
    name = "special_" + ("shifted_" if shifted else "") + pub
    kname = ("shifted_" if shifted else "") + pub + "_cpu"

    def kernel(xp, x, n):
        dt = _result_dt(kname, (x, n), halves=False)
        xv = _f64(x)
        if shifted:
            xv = xv + xv - 1.0
        return _finish(xp, np_polynomial(kind, xv, _f64(n)), dt)
    kernel.__name__ = name
    op = defop(f"{name}(Tensor|Scalar x, Tensor|Scalar n) -> Tensor", tags=("pointwise", "nondifferentiable"),
               method=False, function=False)(kernel)
    op.meta = _binary_meta(kname, halves=False)
    _extern(name, "a polynomial recurrence to a per-element degree (ember.ops.special_extra); no prim")

    def public(input, n, *, out=None):
        if out is not None:
            raise NotImplementedError(f"special.{name[8:]}: out= is not supported")
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"{name[8:]}(): expected a Tensor for input or n")
        return op.binding(input, n)
    public.__name__ = name[8:]
    public.__doc__ = f"PyTorch's ``torch.special.{name[8:]}(input, n)`` (degree ``n`` truncated to an integer)."
    POLY_OPS[name[8:]] = public
    return op


for _pub, _kind in _POLY.items():
    _make_poly(_pub, _kind, False)
    if _pub.startswith("chebyshev"):
        _make_poly(_pub, _kind, True)


# ---- mvlgamma (torch.mvlgamma / Tensor.mvlgamma(_)): special.multigammaln
def mvlgamma(input, p):
    """The multivariate log-gamma of dimension ``p`` (``special.multigammaln``)."""
    from .. import special
    return special.multigammaln(input, p)


def _mvlgamma_(self, p):
    from .more_pointwise import _inplace
    return _inplace("mvlgamma", mvlgamma)(self, p)


api.mvlgamma = mvlgamma
Tensor.mvlgamma = mvlgamma
Tensor.mvlgamma_ = _mvlgamma_
