"""Reparameterised gamma and Dirichlet sampling: ``_standard_gamma``, ``_sample_dirichlet`` and
their implicit gradients ``_standard_gamma_grad`` / ``_dirichlet_grad`` (the ops
``torch.distributions`` builds ``Gamma``/``Beta``/``Dirichlet.rsample`` on).

The draws are PyTorch's (its CPU Marsaglia-Tsang sampler over ember's Mersenne Twister,
``ember._mt19937.standard_gamma``/``sample_dirichlet``: the same numbers for the same seed);
the ops are kept whole (extern in ``ember.prims.coverage``), so a compiled graph draws fresh
numbers at every call.

Implicit reparameterisation: a draw ``x`` with CDF ``F(x; a)`` moves with the parameter at a
fixed quantile, ``dx/da = -(dF/da) / (dF/dx)``. PyTorch evaluates that with fitted
approximations (accurate to ~1e-3); here it is computed to float64 accuracy instead, from the
series and continued fraction of the regularised incomplete gamma / beta functions carried
with forward-mode derivatives w.r.t. the parameter. The two agree to PyTorch's approximation
error (tests/nn/test_distributions_families.py checks it against ``torch._standard_gamma_grad``
and ``torch._dirichlet_grad``).
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from . import _meta
from .creation import _gen
from .registry import defop

_TINY = 1e-300
_EPS = 4e-16
_MAXIT = 1_000_000

_PSI_ASYMPT = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


def _host(a):
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _digamma_pos(x):
    """digamma for x > 0 in float64 (recurrence up to 10, then the asymptotic series)."""
    y = np.array(x, dtype=np.float64, copy=True)
    shift = np.zeros_like(y)
    for _ in range(10):
        small = y < 10.0
        shift += np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    w2 = 1.0 / (y * y)
    s = np.zeros_like(y)
    for c in reversed(_PSI_ASYMPT):
        s = (s + c) * w2
    return np.log(y) - 0.5 / y - s - shift


def _nz(v):
    return np.where(np.abs(v) < _TINY, _TINY, v)


def _gamma_grad_series(a, x):
    """x < a + 1: P(a, x) = x^a e^-x / Gamma(a+1) * S, S = sum_n x^n / ((a+1)...(a+n));
    returns dx/da = -(x/a) (S (log x - psi(a+1)) + dS/da)."""
    term, dterm = np.ones_like(x), np.zeros_like(x)
    S, dS = term.copy(), dterm.copy()
    idx = np.arange(x.size)
    n = 0
    while idx.size and n < _MAXIT:
        n += 1
        aa, xx = a[idx], x[idx]
        r = xx / (aa + n)
        dterm_i = dterm[idx] * r - term[idx] * r / (aa + n)
        term_i = term[idx] * r
        S[idx] += term_i
        dS[idx] += dterm_i
        term[idx], dterm[idx] = term_i, dterm_i
        keep = (term_i > _EPS * S[idx]) | (np.abs(dterm_i) > _EPS * np.abs(dS[idx]))
        idx = idx[keep]
    return -(x / a) * (S * (np.log(x) - _digamma_pos(a + 1.0)) + dS)


def _gamma_grad_cf(a, x):
    """x >= a + 1: Q(a, x) = x^a e^-x / Gamma(a) * h with the continued fraction
    h = 1/(b0 + a1/(b1 + a2/(b2 + ...))), b_k = x + 2k + 1 - a, a_k = -k (k - a) (modified Lentz,
    with d/da carried along); returns dx/da = x h (log x - psi(a)) + x dh/da."""
    b = x + 1.0 - a
    c, dc = np.full_like(x, 1.0 / _TINY), np.zeros_like(x)
    d = 1.0 / _nz(b)
    dd = d * d                        # d(1/b)/da with db/da = -1
    h, dh = d.copy(), dd.copy()
    idx = np.arange(x.size)
    k = 0
    while idx.size and k < _MAXIT:
        k += 1
        aa = a[idx]
        an, dan = -k * (k - aa), float(k)
        bk = x[idx] + (2 * k + 1) - aa                # db/da = -1
        di, ddi, ci, dci = d[idx], dd[idx], c[idx], dc[idx]
        den = _nz(an * di + bk)
        dden = dan * di + an * ddi - 1.0
        di, ddi = 1.0 / den, -dden / (den * den)
        r = an / ci
        cn = _nz(bk + r)
        dci = -1.0 + dan / ci - r * (dci / ci)
        ci = cn
        delta, ddelta = ci * di, dci * di + ci * ddi
        hi, dhi = h[idx] * delta, dh[idx] * delta + h[idx] * ddelta
        conv = (np.abs(delta - 1.0) <= _EPS) & (np.abs(dhi - dh[idx]) <= _EPS * np.abs(dhi))
        d[idx], dd[idx], c[idx], dc[idx], h[idx], dh[idx] = di, ddi, ci, dci, hi, dhi
        idx = idx[~conv]
    return x * h * (np.log(x) - _digamma_pos(a)) + x * dh


def np_standard_gamma_grad(alpha, x):
    """``dx/dalpha`` of ``x ~ Gamma(alpha, 1)`` at a fixed quantile (float64 arrays)."""
    a, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel().copy(), x.ravel().copy()
    out = np.zeros_like(x)
    ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    lower = ok & (x < a + 1.0)
    upper = ok & ~lower
    if lower.any():
        out[lower] = _gamma_grad_series(a[lower], x[lower])
    if upper.any():
        out[upper] = _gamma_grad_cf(a[upper], x[upper])
    out[~ok] = np.nan
    out[ok & (x <= 0)] = 0.0
    return out.reshape(shape)


def np_beta_grad(x, a, b):
    """``dx/da`` of ``x ~ Beta(a, b)`` at a fixed quantile with ``b`` held (float64 arrays).

    I_x(p, q) = x^p (1-x)^q / (p B(p, q)) * h with the continued fraction of the incomplete beta
    function (modified Lentz, d/dp and d/dq carried along); for x past the mean the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) keeps it converging quickly."""
    x, a, b = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, a, b)))
    shape = x.shape
    x, a, b = x.ravel(), a.ravel(), b.ravel()
    sym = x >= (a + 1.0) / (a + b + 2.0)
    p, q, y = np.where(sym, b, a), np.where(sym, a, b), np.where(sym, 1.0 - x, x)
    sp = np.where(sym, 0.0, 1.0)     # the derivative is w.r.t. p (direct) or q (symmetric)
    sq = 1.0 - sp
    y = np.clip(y, _TINY, 1.0)
    qab = p + q
    d0 = 1.0 - qab * y / (p + 1.0)
    dd0 = -y * ((sp + sq) * (p + 1.0) - qab * sp) / (p + 1.0) ** 2
    d0 = _nz(d0)
    d, dd = 1.0 / d0, -dd0 / (d0 * d0)
    c, dc = np.ones_like(y), np.zeros_like(y)
    h, dh = d.copy(), dd.copy()

    def step(aa, daa, c, dc, d, dd):
        den = _nz(1.0 + aa * d)
        dden = daa * d + aa * dd
        d, dd = 1.0 / den, -dden / (den * den)
        r = aa / c
        cn = _nz(1.0 + r)
        dc = daa / c - r * (dc / c)
        return cn, dc, d, dd

    idx = np.arange(y.size)
    m = 0
    while idx.size and m < _MAXIT:
        m += 1
        pi, qi, yi, spi, sqi = p[idx], q[idx], y[idx], sp[idx], sq[idx]
        ci, dci, di, ddi, hi, dhi = c[idx], dc[idx], d[idx], dd[idx], h[idx], dh[idx]
        dh_prev = dhi
        u, v = pi + (2 * m - 1), pi + 2 * m
        aa = m * (qi - m) * yi / (u * v)
        daa = m * yi * sqi / (u * v) - aa * (spi / u + spi / v)
        ci, dci, di, ddi = step(aa, daa, ci, dci, di, ddi)
        delta, ddelta = di * ci, ddi * ci + di * dci
        hi, dhi = hi * delta, dhi * delta + hi * ddelta
        u, v = pi + 2 * m, pi + (2 * m + 1)
        aa = -(pi + m) * (pi + qi + m) * yi / (u * v)
        daa = aa * (spi / (pi + m) + (spi + sqi) / (pi + qi + m) - spi / u - spi / v)
        ci, dci, di, ddi = step(aa, daa, ci, dci, di, ddi)
        delta, ddelta = di * ci, ddi * ci + di * dci
        hi, dhi = hi * delta, dhi * delta + hi * ddelta
        conv = (np.abs(delta - 1.0) <= _EPS) & (np.abs(dhi - dh_prev) <= _EPS * np.abs(dhi))
        c[idx], dc[idx], d[idx], dd[idx], h[idx], dh[idx] = ci, dci, di, ddi, hi, dhi
        idx = idx[~conv]
    psi_pq = _digamma_pos(p + q)
    dlog = (sp * (np.log(y) - 1.0 / p - _digamma_pos(p) + psi_pq)
            + sq * (np.log1p(-y) - _digamma_pos(q) + psi_pq))
    g = y * (1.0 - y) / p * (h * dlog + dh)
    return np.where(sym, g, -g).reshape(shape)


# ---------------------------------------------------------------------- the ops
@defop("_standard_gamma_grad(Tensor self, Tensor output) -> Tensor", method=False, function=False,
       tags=("nondifferentiable",), save=())
def _standard_gamma_grad_op(xp, alpha, x):
    out = np_standard_gamma_grad(_host(alpha), _host(x))
    return xp.asarray(out.astype(alpha.dtype))


@_standard_gamma_grad_op.meta_fn
def _standard_gamma_grad_meta(alpha, x):
    return _meta.out(tuple(np.broadcast_shapes(tuple(alpha.shape), tuple(x.shape))), alpha.dtype)


@defop("_standard_gamma(Tensor self, Generator? generator=None) -> Tensor", method=False, function=False,
       tags=("random", "nondeterministic"), save=("self",), save_result=True)
def _standard_gamma_op(xp, alpha, generator=None):
    from .. import _mt19937 as _mt
    a = _host(alpha)
    if a.dtype.kind != "f" or a.dtype.itemsize < 4:
        raise NotImplementedError(f'"gamma_cpu" not implemented for \'{_t.from_numpy_dtype(a.dtype).legacy_name}\'')
    return xp.asarray(_mt.standard_gamma(_gen(generator)._mt, np.ascontiguousarray(a)))


@_standard_gamma_op.meta_fn
def _standard_gamma_meta(alpha, generator=None):
    return _meta.out(tuple(alpha.shape), alpha.dtype)


@_standard_gamma_op.derivative
def _standard_gamma_bw(ctx, g):
    alpha = ctx.args[0]
    return (g * _standard_gamma_grad_op.binding(alpha, ctx.result),)


@defop("_dirichlet_grad(Tensor x, Tensor alpha, Tensor total) -> Tensor", method=False, function=False,
       tags=("nondifferentiable",), save=())
def _dirichlet_grad_op(xp, x, alpha, total):
    """PyTorch's ``_dirichlet_grad``: for the Beta(alpha, total - alpha) marginal of a Dirichlet
    draw, ``(dx/dalpha at fixed beta) / (1 - x)`` (the form its Dirichlet backward uses)."""
    xh, ah, th = (_host(v).astype(np.float64) for v in (x, alpha, total))
    g = np_beta_grad(xh, ah, th - ah) / (1.0 - np.broadcast_to(xh, np.broadcast_shapes(xh.shape, ah.shape, th.shape)))
    return xp.asarray(g.astype(x.dtype))


@_dirichlet_grad_op.meta_fn
def _dirichlet_grad_meta(x, alpha, total):
    return _meta.out(tuple(np.broadcast_shapes(tuple(x.shape), tuple(alpha.shape), tuple(total.shape))), x.dtype)


@defop("_sample_dirichlet(Tensor self, Generator? generator=None) -> Tensor", method=False, function=False,
       tags=("random", "nondeterministic"), save=("self",), save_result=True)
def _sample_dirichlet_op(xp, alpha, generator=None):
    from .. import _mt19937 as _mt
    a = _host(alpha)
    if a.dtype.kind != "f" or a.dtype.itemsize < 4:
        raise NotImplementedError(f'"dirichlet" not implemented for \'{_t.from_numpy_dtype(a.dtype).legacy_name}\'')
    # (kept inside (0, 1) as torch does: the Beta-marginal gradient divides by 1 - x)
    return xp.asarray(_mt.sample_dirichlet(_gen(generator)._mt, np.ascontiguousarray(a)))


@_sample_dirichlet_op.meta_fn
def _sample_dirichlet_meta(alpha, generator=None):
    return _meta.out(tuple(alpha.shape), alpha.dtype)


@_sample_dirichlet_op.derivative
def _sample_dirichlet_bw(ctx, g):
    alpha, x = ctx.args[0], ctx.result
    total = alpha.sum(-1, keepdim=True).expand_as(alpha)
    dg = _dirichlet_grad_op.binding(x, alpha, total)
    return (dg * (g - (x * g).sum(-1, keepdim=True)),)


def standard_gamma(alpha, generator=None):
    """Gamma(alpha, 1) draws, differentiable w.r.t. ``alpha`` (implicit reparameterisation)."""
    return _standard_gamma_op.binding(alpha, generator)


def sample_dirichlet(alpha, generator=None):
    """Dirichlet(alpha) draws along the last dim, differentiable w.r.t. ``alpha``."""
    return _sample_dirichlet_op.binding(alpha, generator)


def standard_gamma_grad(alpha, x):
    return _standard_gamma_grad_op.binding(alpha, x)


def dirichlet_grad(x, alpha, total):
    return _dirichlet_grad_op.binding(x, alpha, total)

