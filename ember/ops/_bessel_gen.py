"""Generator of the Chebyshev tables in ``ember.ops._bessel_tables`` (not imported at run time).

Regenerate with ``python -m ember.ops._bessel_gen > ember/ops/_bessel_tables.py``. Everything
is computed here from first principles in 100-digit ``decimal`` arithmetic (no scipy / mpmath):

* J0/J1/Y0/Y1/I0/I1/K0/K1 by their ascending series (A&S 9.1.10-11, 9.6.10-11) for moderate x
  and by Hankel's asymptotic expansions (A&S 9.2.5-10, 9.7.2) for large x, where the smallest term
  is below 1e-26;
* Ai/Bi by the Maclaurin series (A&S 10.4.2-3; Ai(0), Ai'(0) from Gamma(1/3) by Stirling's series)
  and the asymptotic expansions (A&S 10.4.59-60) for large |x|;
* each smooth factor (see ``FITS``) is interpolated at 64 Chebyshev nodes and its Chebyshev
  coefficients are cut where they drop below 1e-19 of the largest.

Why tables and not the series at run time: the ascending series cancel catastrophically
(terms ~e^x for results ~1 or ~e^-x), and the asymptotic series diverge at moderate x; a
Chebyshev expansion of the smooth factor left after removing the log / zeros / exp / oscillation
evaluates in float64 to a few ulps with ~20-40 multiply-adds.
"""
from __future__ import annotations

import decimal
from decimal import Decimal as D
from fractions import Fraction

CTX = decimal.Context(prec=100)
# (every computation runs under ``decimal.localcontext(CTX)``; callers of the functions below do
# the same, so importing this module leaves the thread's decimal context alone)
EPS = D(10) ** -95
ASY_EPS = D(10) ** -24   # the asymptotic series are used where their smallest term is < 1e-26


def _pi():
    # Machin: pi = 16 atan(1/5) - 4 atan(1/239)
    def atan_inv(n):
        x = D(1) / n
        x2 = x * x
        s, t, k = D(0), x, 0
        while abs(t) > EPS:
            s += t / (2 * k + 1) if k % 2 == 0 else -t / (2 * k + 1)
            t *= x2
            k += 1
        return s
    return 16 * atan_inv(5) - 4 * atan_inv(239)


with decimal.localcontext(CTX):
    PI = _pi()


def _bernoulli(n):
    """B_0..B_n (Akiyama-Tanigawa), B_1 = +1/2 convention (only even ones are used)."""
    out = []
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    return out


with decimal.localcontext(CTX):
    BERN = _bernoulli(60)


def _euler_gamma():
    n = 1000
    h = sum(D(1) / k for k in range(1, n + 1))
    g = h - D(n).ln() - D(1) / (2 * n)
    for k in range(1, 25):
        b = BERN[2 * k]
        g += D(b.numerator) / D(b.denominator) / (2 * k) / D(n) ** (2 * k)
    return g


with decimal.localcontext(CTX):
    GAMMA_E = _euler_gamma()


def lgamma(z):
    """log Gamma(z), z > 0, by Stirling's series at z + 40."""
    shift = 40
    w = z + shift
    s = (w - D("0.5")) * w.ln() - w + (2 * PI).ln() / 2
    for k in range(1, 28):
        b = BERN[2 * k]
        s += D(b.numerator) / D(b.denominator) / (2 * k * (2 * k - 1)) / w ** (2 * k - 1)
    p = D(1)
    for j in range(shift):
        p *= z + j
    return s - p.ln()


def cos_sin(x):
    n = (x / (2 * PI)).to_integral_value()
    r = x - n * 2 * PI
    c, s, t, k = D(0), D(0), D(1), 0
    while abs(t) > EPS or k < 4:
        if k % 4 == 0:
            c += t
        elif k % 4 == 1:
            s += t
        elif k % 4 == 2:
            c -= t
        else:
            s -= t
        k += 1
        t = t * r / k
    return c, s


def _series(x, nu, sign, log_coef):
    """sum_k sign^k (x^2/4)^k / (k! (k+nu)!) * (x/2)^nu and the companion sum with psi weights."""
    q = x * x / 4
    term = (x / 2) ** nu
    for j in range(1, nu + 1):
        term /= j
    s0, s1 = D(0), D(0)
    # psi(k+1) + psi(k+nu+1) without the -2 gamma
    h1 = D(0)
    h2 = sum((D(1) / j for j in range(1, nu + 1)), D(0))
    k = 0
    while True:
        s0 += term
        s1 += term * (h1 + h2)
        k += 1
        h1 += D(1) / k
        h2 += D(1) / (k + nu)
        term = term * q * sign / (k * (k + nu))
        if abs(term) * (1 + h1 + h2) < EPS * abs(s0) and k > 5:
            break
    return s0, s1


def bessel_jy_series(x, nu):
    j, s1 = _series(x, nu, -1, True)
    # sum (psi(k+1)+psi(k+nu+1)) (-x^2/4)^k/... = s1 - 2 gamma j
    psi_sum = s1 - 2 * GAMMA_E * j
    y = 2 / PI * (x / 2).ln() * j - psi_sum / PI
    if nu == 1:
        y -= 2 / (PI * x)
    return j, y


def bessel_ik_series(x, nu):
    i, s1 = _series(x, nu, 1, True)
    psi_sum = s1 - 2 * GAMMA_E * i
    if nu == 0:
        k = -(x / 2).ln() * i + psi_sum / 2
    else:
        k = 1 / x + (x / 2).ln() * i - psi_sum / 2
    return i, k


def _hankel_a(nu, kmax):
    mu = 4 * nu * nu
    a = [D(1)]
    for k in range(1, kmax):
        a.append(a[-1] * (mu - (2 * k - 1) ** 2) / (k * 8))
    return a


def hankel_pq(x, nu):
    a = _hankel_a(nu, 120)
    p, q = D(0), D(0)
    last = None
    for k in range(120):
        t = a[k] / x ** k
        if abs(t) < ASY_EPS or (last is not None and abs(t) > abs(last)):
            break
        if k % 2 == 0:
            p += t if (k // 2) % 2 == 0 else -t
        else:
            q += t if (k // 2) % 2 == 0 else -t
        last = t
    return p, q


def bessel_pq(x, nu):
    """P, Q with J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = ... (P sin chi + Q cos chi)."""
    if x >= 30:
        return hankel_pq(x, nu)
    j, y = bessel_jy_series(x, nu)
    c, s = cos_sin(x - (2 * nu + 1) * PI / 4)
    r = (PI * x / 2).sqrt()
    return r * (j * c + y * s), r * (y * c - j * s)


def k_scaled(x, nu):
    """exp(x) sqrt(x) K_nu(x)."""
    if x >= 30:
        a = _hankel_a(nu, 120)
        s = D(0)
        for k in range(120):
            t = a[k] / x ** k
            if abs(t) < ASY_EPS:
                break
            s += t
        return (PI / 2).sqrt() * s
    _, k = bessel_ik_series(x, nu)
    return x.exp() * x.sqrt() * k


# ---- Airy
with decimal.localcontext(CTX):
    C1 = (-(D(2) / 3 * D(3).ln()) - lgamma(D(2) / 3)).exp()    # Ai(0) = 3^(-2/3) / Gamma(2/3)
    C2 = (-(D(1) / 3 * D(3).ln()) - lgamma(D(1) / 3)).exp()    # -Ai'(0) = 3^(-1/3) / Gamma(1/3)


def airy_series(x):
    x3 = x * x * x
    f, g = D(0), D(0)
    tf, tg = D(1), x
    k = 0
    while True:
        f += tf
        g += tg
        tf = tf * x3 / ((3 * k + 2) * (3 * k + 3))
        tg = tg * x3 / ((3 * k + 3) * (3 * k + 4))
        k += 1
        if abs(tf) + abs(tg) < EPS * (abs(f) + abs(g)) and k > 3:
            break
    return C1 * f - C2 * g, D(3).sqrt() * (C1 * f + C2 * g)


def _airy_u(kmax):
    u = [D(1)]
    for k in range(1, kmax):
        # u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!)
        num = D(1)
        for m in range(2 * k + 1, 6 * k, 2):
            num *= m
        den = D(216) ** k
        for m in range(1, k + 1):
            den *= m
        u.append(num / den)
    return u


with decimal.localcontext(CTX):
    _AU = _airy_u(80)


def airy_pos_factor(z):
    """F with Ai(x) = exp(-zeta) / (2 sqrt(pi) x^(1/4)) F, zeta = 2/3 x^(3/2)."""
    if z >= 30:
        s = D(0)
        for k, u in enumerate(_AU):
            t = u / z ** k
            if abs(t) < ASY_EPS:
                break
            s += t if k % 2 == 0 else -t
        return s
    x = (D(3) * z / 2) ** (D(2) / 3)
    ai, _ = airy_series(x)
    return ai * z.exp() * 2 * PI.sqrt() * x.sqrt().sqrt()


def airy_neg_pq(z):
    """P, Q with Ai(-x) = x^(-1/4) / sqrt(pi) (sin(th) P - cos(th) Q), th = zeta + pi/4."""
    if z >= 30:
        p, q = D(0), D(0)
        for k, u in enumerate(_AU):
            t = u / z ** k
            if abs(t) < ASY_EPS:
                break
            sg = 1 if (k // 2) % 2 == 0 else -1
            if k % 2 == 0:
                p += sg * t
            else:
                q += sg * t
        return p, q
    x = (D(3) * z / 2) ** (D(2) / 3)
    ai, bi = airy_series(-x)
    c, s = cos_sin(z + PI / 4)
    r = PI.sqrt() * x.sqrt().sqrt()
    # Ai = r^-1 (s P - c Q), Bi = r^-1 (c P + s Q)
    return r * (ai * s + bi * c), r * (bi * s - ai * c)


# ---- fitting
def newton_zero(f, x0):
    x = D(x0)
    for _ in range(60):
        h = D(10) ** -40
        fx = f(x)
        d = (f(x + h) - f(x - h)) / (2 * h)
        step = fx / d
        x -= step
        if abs(step) < D(10) ** -60:
            break
    return x


def chebfit(f, n=64):
    """Chebyshev coefficients c_k (f(t) = c_0/2 + sum c_k T_k(t)) on [-1, 1]."""
    cs = [cos_sin(PI * m / (2 * n))[0] for m in range(4 * n)]
    vals = [f(cs[2 * j + 1]) for j in range(n)]          # t_j = cos(pi (j + 1/2) / n)
    out = []
    for k in range(n):
        acc = D(0)
        for j in range(n):
            acc += vals[j] * cs[(k * (2 * j + 1)) % (4 * n)]
        out.append(2 * acc / n)
    big = max(abs(c) for c in out)
    while abs(out[-1]) < big * D(10) ** -19:
        out.pop()
    return out


def _split(z):
    hi = float(z)
    lo = float(z - D(hi))
    return hi, lo


def build():
    tables = {}
    j0 = lambda x: bessel_jy_series(x, 0)[0]  # noqa: E731
    j1 = lambda x: bessel_jy_series(x, 1)[0]  # noqa: E731
    z0 = [newton_zero(j0, a) for a in ("2.404825557695773", "5.520078110286311")]
    z1 = [newton_zero(j1, a) for a in ("3.831705970207512", "7.015586669815619")]
    tables["J0_ZEROS"] = [_split(z) for z in z0]
    tables["J1_ZEROS"] = [_split(z) for z in z1]

    def x_of(t):            # t in [-1, 1] -> x in [0, 8] with x^2 = 32 (t + 1)
        return (32 * (t + 1)).sqrt()

    def j0_r(t):
        x = x_of(t)
        return j0(x) / ((x * x - z0[0] ** 2) * (x * x - z0[1] ** 2))

    def j1_r(t):
        x = x_of(t)
        return j1(x) / (x * (x * x - z1[0] ** 2) * (x * x - z1[1] ** 2))

    def y0_s(t):
        x = x_of(t)
        j, y = bessel_jy_series(x, 0)
        return y - 2 / PI * x.ln() * j

    def y1_s(t):
        x = x_of(t)
        j, y = bessel_jy_series(x, 1)
        return (y - 2 / PI * (j * x.ln() - 1 / x)) / x

    tables["J0_SMALL"] = chebfit(j0_r)
    tables["J1_SMALL"] = chebfit(j1_r)
    tables["Y0_SMALL"] = chebfit(y0_s)
    tables["Y1_SMALL"] = chebfit(y1_s)

    def x_big(t):           # t in [-1, 1] -> x in [8, inf) with 64 / x^2 = (t + 1) / 2
        return 8 / ((t + 1) / 2).sqrt()

    for nu in (0, 1):
        tables[f"P{nu}_BIG"] = chebfit(lambda t: bessel_pq(x_big(t), nu)[0])
        tables[f"Q{nu}_BIG"] = chebfit(lambda t: bessel_pq(x_big(t), nu)[1] * x_big(t))

    def x_k_small(t):       # x in [0, 1], x^2 = (t + 1) / 2
        return ((t + 1) / 2).sqrt()

    def k0_a(t):
        x = x_k_small(t)
        i, k = bessel_ik_series(x, 0)
        return k + (x / 2).ln() * i

    def k1_a(t):
        x = x_k_small(t)
        i, k = bessel_ik_series(x, 1)
        return (k - 1 / x - (x / 2).ln() * i) / x

    tables["K0_SMALL"] = chebfit(k0_a)
    tables["K1_SMALL"] = chebfit(k1_a)

    def x_k_big(t):         # x in [1, inf), 2 / x = t + 1
        return 2 / (t + 1)

    tables["K0_BIG"] = chebfit(lambda t: k_scaled(x_k_big(t), 0))
    tables["K1_BIG"] = chebfit(lambda t: k_scaled(x_k_big(t), 1))

    tables["AI_MID"] = chebfit(lambda t: airy_series(2 * t)[0])     # x in [-2, 2]
    z2 = D(2) / 3 * D(2) ** D("1.5")                             # zeta(2)

    def z_of(t):            # zeta in [zeta(2), inf), zeta(2) / zeta = (t + 1) / 2
        return z2 * 2 / (t + 1)

    tables["AI_POS"] = chebfit(lambda t: airy_pos_factor(z_of(t)))
    tables["AI_NEG_P"] = chebfit(lambda t: airy_neg_pq(z_of(t))[0])
    tables["AI_NEG_Q"] = chebfit(lambda t: airy_neg_pq(z_of(t))[1] * z_of(t))
    tables["AI_ZETA2"] = float(z2)
    return tables


def main():
    with decimal.localcontext(CTX):
        t = build()
    print('"""Chebyshev coefficient tables for ``ember.ops.special_bessel``, generated by')
    print('``python -m ember.ops._bessel_gen`` (100-digit decimal arithmetic; see there). Do not edit."""')
    for k, v in t.items():
        if isinstance(v, float):
            print(f"{k} = {v!r}")
        elif isinstance(v[0], tuple):
            print(f"{k} = {tuple(v)!r}")
        else:
            print(f"{k} = (")
            for c in v:
                print(f"    {float(c)!r},")
            print(")")


if __name__ == "__main__":
    main()
