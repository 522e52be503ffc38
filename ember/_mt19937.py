"""PyTorch's CPU random streams: the same numbers as ``torch`` for the same seed.

Why. ``torch.manual_seed(0); torch.randn(3)`` prints ``tensor([ 1.5410, -0.2934, -2.1788])`` in
every PyTorch tutorial, and a model built after ``manual_seed`` starts from the same weights on
every machine. ember's generator is PyTorch's: a Mersenne Twister (mt19937, seeded with the low
32 bits of the seed as ``std::mt19937``/``init_genrand``; numpy's ``MT19937`` bit generator with
its legacy seeding draws the same 32-bit words) and PyTorch's transformations of its words:

* ``uniform`` (``rand``, ``uniform_``): a 32-bit word per value, its low 24 bits scaled to
  [0, 1), then ``x * (to - from) + from`` with one rounding (the fused multiply-add of PyTorch's
  compiled kernel) in float32 (float16/bfloat16: then rounded to the dtype); float64 takes a
  64-bit value (two words, the first the high half) and its low 53 bits. A value that rounds to
  ``to`` becomes ``from``, as PyTorch's.
* ``normal`` (``randn``, ``normal_``): 16 or more values of a contiguous tensor are PyTorch's
  ``normal_fill``: uniforms, then Box-Muller over blocks of 16 (the first 8 give the radii, the
  last 8 the angles; a partial last block is redrawn over the last 16 values; float16/bfloat16
  draw uniforms for the full blocks only and compute in float32); fewer values, or a strided
  tensor, take PyTorch's scalar path: Box-Muller in double per pair, the second value of a pair
  kept in the generator for the next draw (also across calls).
* ``randint``/``random_(from, to)``/``random_(from, None)``: ``word % range + from`` (any dtype,
  Half/BFloat16 by way of float) with a 64-bit value from a range of 2**28 on; ``random_()``: the
  dtype's default range, a 64-bit value for int64/float64 only; ``random_(-2**63, None)``: the
  64-bit value itself. PyTorch's argument checks, float bound adjustments and warnings
  (``random_args``).
* ``randperm(n)``: the swap-based shuffle PyTorch runs for n < 2**32 / 20
  (``swap(r[i], r[i + word % (n - i)])``), the inside-out one of 64-bit words from there on.
* ``bernoulli_(p)`` with a number ``p`` (so dropout's masks): a double uniform below ``p``;
  ``bernoulli(probs)`` is ``rand(...) < probs``, which is PyTorch's draw too.
* ``exponential_(lambd)``: ``-1 / lambd * log1p(-u)`` of a double uniform.
* A tensor that is not contiguous is filled in memory order (PyTorch's iterator walks the dims
  by falling stride), ``normal_`` value by value.

The float transformations run as a small native loop (exact fused multiply-adds and the C
library's ``log1p``/``log``/``cos``/``sin``; the float32 normal fill uses the single-precision
Cephes log and sincos PyTorch's AVX2 kernel uses, with its fused operations); without a C++
compiler numpy computes them and a few values differ from PyTorch's in the last bit.

The other samplers are PyTorch's CPU algorithms over the same stream, taking as many words as
its do (so a ``rand`` after them matches too):

* ``multinomial``: without replacement or for one sample the exponential race (``p / q`` with
  ``q = exponential_(1)``, argmax / the largest first); with replacement the normalised running
  sum and a double uniform per sample (first entry not below it).
* ``cauchy_`` (``median + sigma * tan(pi (u - 1/2))``, the last multiply-add fused),
  ``log_normal_`` (``exp`` of the scalar normal path), ``geometric_`` (``ceil(log u / log1p(-p))``),
  rrelu's slopes (``uniform(lower, upper)`` for each value <= 0, unfused), filled value by value
  in memory order.
* ``poisson`` (transformed rejection with squeeze for rates >= 10, products of uniforms below),
  ``binomial`` (BTRS / inversion by geometric jumps, in float32 steps for float32 tensors),
  ``_standard_gamma`` / ``_sample_dirichlet`` (Marsaglia-Tsang with PyTorch's float constants,
  its double uniforms and scalar-path normals): native loops over a buffer of the stream's
  words, the stream then moved past the words they took. Without a C++ compiler these draw
  from numpy's samplers instead (seeded from the stream: reproducible, not PyTorch's numbers).
  ``_sample_dirichlet`` sums the gammas with numpy: float64 rows of 5 or more categories can
  differ from PyTorch's vectorised sum in the last bit.

Still numpy's (not PyTorch's numbers): integer-dtype ``uniform``/``normal`` fills. On machines whose
PyTorch picks another CPU kernel (no AVX2) PyTorch's own float32 normals differ from these in
the last bit.
"""
from __future__ import annotations

import ctypes
import logging
import math

import numpy as np

from .runtime.native import LazyLibrary

log = logging.getLogger("ember.random")

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
# PyTorch's uniform_real_distribution: the mantissa bits of a draw per dtype
_DIGITS = {np.dtype(np.float32): 24, np.dtype(np.float64): 53, np.dtype(np.float16): 11}
_BF16_DIGITS = 8


class MTStream:
    """The mt19937 state of one generator, with PyTorch's cached second normal values."""

    __slots__ = ("bg", "next_double_normal", "next_float_normal")

    def __init__(self, seed: int):
        self.bg = np.random.MT19937()
        self.bg._legacy_seeding(int(seed) & 0xFFFFFFFF)
        self.next_double_normal = None
        self.next_float_normal = None

    # -- raw words --------------------------------------------------------------------------
    def words(self, n: int) -> np.ndarray:
        """``n`` 32-bit words (as uint64)."""
        return self.bg.random_raw(int(n))

    def words64(self, n: int) -> np.ndarray:
        """``n`` 64-bit values, each from two words (the first one the high half)."""
        w = self.bg.random_raw(2 * int(n)).reshape(-1, 2)
        return (w[:, 0] << _SHIFT32) | w[:, 1]

    # -- state ------------------------------------------------------------------------------
    def state(self) -> dict:
        st = self.bg.state
        return {"key": [int(k) for k in st["state"]["key"]], "pos": int(st["state"]["pos"]),
                "next_double_normal": self.next_double_normal, "next_float_normal": self.next_float_normal}

    def set_state(self, st: dict) -> None:
        self.bg.state = {"bit_generator": "MT19937",
                         "state": {"key": np.asarray(st["key"], dtype=np.uint32), "pos": int(st["pos"])}}
        self.next_double_normal = st.get("next_double_normal")
        self.next_float_normal = st.get("next_float_normal")


def check_random_args(kind: str, a, b) -> None:
    """PyTorch's argument errors for a random fill (raised for empty tensors too, as its)."""
    if kind == "random" and int(a) >= int(b):
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={int(a)} >= to={int(b)}")
    if kind == "exponential" and not a > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={a:g}")
    if kind == "normal" and not b >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {b:g}")
    if kind == "bernoulli" and not 0 <= a <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={a:g}")


# ------------------------------------------------------------------------------ uniform
def _unit(stream: MTStream, n: int, dt: np.dtype) -> np.ndarray:
    """PyTorch's [0, 1) draws: float64 from 64-bit values (53 bits), float32 otherwise (24 bits)."""
    if dt == np.float64:
        return (stream.words64(n) & np.uint64((1 << 53) - 1)).astype(np.float64) * (2.0 ** -53)
    return (stream.words(n) & np.uint64(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)


def uniform(stream: MTStream, n: int, dt: np.dtype, lo: float, hi: float) -> np.ndarray:
    """``n`` values of PyTorch's ``uniform_(lo, hi)`` in float dtype ``dt`` (float16 and bfloat16:
    computed in float32 with float32 bounds, rounded once to the dtype)."""
    dt = np.dtype(dt)
    wide = np.float64 if dt == np.float64 else np.float32
    if lo == 0.0 and hi == 1.0:          # x itself (the fused x * 1 + 0 is exact): no native call
        x = _unit(stream, n, dt)
        return x if dt in (np.float64, np.float32) else _round_below(x.astype(dt), dt, 0.0, 1.0)
    w = stream.words64(n) if wide is np.float64 else stream.words(n)
    w = np.ascontiguousarray(w)
    out = np.empty(n, dtype=wide)
    f_lo, f_hi = wide(lo), wide(hi)
    L = _lib()
    if L is not None:
        fn = L.ember_uniform_f64 if wide is np.float64 else L.ember_uniform_f32
        fn(n, w.ctypes.data, f_lo, f_hi, out.ctypes.data)
    else:       # the fused multiply-add through float64 (float32) or unfused (float64)
        bits = 53 if wide is np.float64 else 24
        x = (w & np.uint64((1 << bits) - 1)).astype(np.float64) * (2.0 ** -bits)
        v = (x * float(f_hi - f_lo) + float(f_lo)).astype(wide)
        out[:] = np.where(v == f_hi, f_lo, v)
    if wide is np.float64 or dt == np.float32:
        return out
    return _round_below(out.astype(dt), dt, lo, hi)


def _round_below(res: np.ndarray, dt: np.dtype, lo: float, hi: float) -> np.ndarray:
    """float16/bfloat16 values rounded from float32: one that rounds to ``hi`` is ``lo``."""
    d_hi, d_lo = np.array(hi, dtype=dt), np.array(lo, dtype=dt)
    res[res == d_hi] = d_lo
    return res


def uniform_double(stream: MTStream, n: int, lo: float, hi: float) -> np.ndarray:
    """``n`` draws of PyTorch's ``uniform_real_distribution<double>(lo, hi)`` as its serial
    kernels use it (``rrelu``'s noise): a 53-bit double ``x``, then ``x * (hi - lo) + lo`` rounded
    twice (those kernels are compiled without fused multiply-adds)."""
    x = _unit(stream, n, np.dtype(np.float64))
    return x * (float(hi) - float(lo)) + float(lo)


def rrelu_noise(stream: MTStream, x: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """PyTorch's ``rrelu`` training noise for ``x`` (any shape, read in C order): a draw of
    ``uniform(lower, upper)`` for each value ``<= 0`` in turn (in the tensor's compute type:
    float for float32/float16/bfloat16, bounds rounded to it first), 1 elsewhere (NaN too)."""
    dt = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    lo, hi = float(dt.type(lower)), float(dt.type(upper))
    with np.errstate(invalid="ignore"):
        neg = np.asarray(x <= 0)
    noise = np.ones(x.shape, dtype=dt)
    k = int(neg.sum())
    if k:
        noise[neg] = uniform_double(stream, k, lo, hi).astype(dt)
    return noise


def bernoulli(stream: MTStream, n: int, p: float) -> np.ndarray:
    """PyTorch's ``bernoulli_(p)`` with a number ``p``: a double uniform below ``p`` (bool)."""
    return _unit(stream, n, np.dtype(np.float64)) < p


def exponential(stream: MTStream, n: int, lambd: float) -> np.ndarray:
    """PyTorch's ``exponential_(lambd)`` (float64; the caller casts): ``-1/lambd * log1p(-u)``."""
    u = np.ascontiguousarray(_unit(stream, n, np.dtype(np.float64)))
    L = _lib()
    if L is None:
        return (-1.0 / lambd) * np.log1p(-u)
    out = np.empty(n, dtype=np.float64)
    L.ember_exponential_f64(n, u.ctypes.data, float(lambd), out.ctypes.data)
    return out


def cauchy(stream: MTStream, n: int, median: float, sigma: float) -> np.ndarray:
    """PyTorch's ``cauchy_(median, sigma)`` (float64; the caller casts): a double uniform ``u`` per
    value, ``median + sigma * tan(pi * (u - 0.5))`` with one rounding for the last multiply-add
    (without a C++ compiler it is rounded twice: a last-bit difference at times)."""
    u = np.ascontiguousarray(_unit(stream, n, np.dtype(np.float64)))
    out = np.empty(n, dtype=np.float64)
    L = _lib()
    if L is None:
        out[:] = [median + sigma * math.tan(math.pi * (x - 0.5)) for x in u.tolist()]
    else:
        L.ember_cauchy_f64(n, u.ctypes.data, float(median), float(sigma), out.ctypes.data)
    return out


def geometric(stream: MTStream, n: int, p: float) -> np.ndarray:
    """PyTorch's ``geometric_(p)`` (float64; the caller casts): ``ceil(log(u) / log1p(-p))`` of a
    double uniform ``u``."""
    u = np.ascontiguousarray(_unit(stream, n, np.dtype(np.float64)))
    out = np.empty(n, dtype=np.float64)
    L = _lib()
    if L is None:
        d = math.log1p(-p)
        with np.errstate(divide="ignore"):
            out[:] = np.ceil(np.log(u) / d)
    else:
        L.ember_geometric_f64(n, u.ctypes.data, float(p), out.ctypes.data)
    return out


def log_normal(stream: MTStream, n: int, mean: float, std: float) -> np.ndarray:
    """PyTorch's ``log_normal_(mean, std)`` (float64; the caller casts): ``exp`` of the scalar
    path's normals (pairs in double, the second value kept for the next draw), whatever the size."""
    z = np.ascontiguousarray(_normal_serial(stream, n, float(mean), float(std)))
    L = _lib()
    if L is None:
        return np.exp(z)
    L.ember_exp_f64(n, z.ctypes.data)
    return z


# ------------------------------------------------------------------------------ normal
_SOURCE = r"""
#include <cstdint>
#include <cmath>
#include <algorithm>
#include <utility>
#include <vector>
typedef int64_t i64;
typedef uint64_t u64;

// uniform_(lo, hi): x * (hi - lo) + lo with one rounding (the fused multiply-add of PyTorch's
// compiled kernel); a value that rounds to hi is lo, as PyTorch's
extern "C" void ember_uniform_f32(i64 n, const u64* w, float lo, float hi, float* out) {
    const float d = hi - lo;
    for (i64 i = 0; i < n; ++i) {
        const float x = static_cast<float>(w[i] & 0xFFFFFFu) * (1.0f / 16777216.0f);
        const float v = std::fma(x, d, lo);
        out[i] = v == hi ? lo : v;
    }
}
extern "C" void ember_uniform_f64(i64 n, const u64* w, double lo, double hi, double* out) {
    const double d = hi - lo;
    for (i64 i = 0; i < n; ++i) {
        const double x = static_cast<double>(w[i] & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
        const double v = std::fma(x, d, lo);
        out[i] = v == hi ? lo : v;
    }
}

// PyTorch's float normal_fill on x86: Box-Muller over blocks of 16 with the single-precision
// Cephes log and sincos its AVX2 kernel uses, written out with the multiply-adds its compiler
// fuses (each std::fma below is one fused operation there; every other step rounds)
static inline float cephes_logf(float x) {
    if (!(x > 0.0f)) return x == 0.0f ? -INFINITY : NAN;
    int32_t bits;
    __builtin_memcpy(&bits, &x, 4);
    if (x < 1.17549435e-38f) { x = 1.17549435e-38f; __builtin_memcpy(&bits, &x, 4); }
    const int32_t expo = (bits >> 23) - 0x7f;
    bits = (bits & ~0x7f800000) | 0x3f000000;
    __builtin_memcpy(&x, &bits, 4);
    float e = static_cast<float>(expo) + 1.0f;
    const bool small = x < 0.707106781186547524f;
    const float keep = small ? x : 0.0f;
    x = x - 1.0f;
    e = e - (small ? 1.0f : 0.0f);
    x = x + keep;
    const float z = x * x;
    float y = 7.0376836292E-2f;
    y = std::fma(y, x, -1.1514610310E-1f);
    y = std::fma(y, x, 1.1676998740E-1f);
    y = std::fma(y, x, -1.2420140846E-1f);
    y = std::fma(y, x, 1.4249322787E-1f);
    y = std::fma(y, x, -1.6668057665E-1f);
    y = std::fma(y, x, 2.0000714765E-1f);
    y = std::fma(y, x, -2.4999993993E-1f);
    y = std::fma(y, x, 3.3333331174E-1f);
    y = y * x;
    y = std::fma(y, z, e * -2.12194440e-4f);
    y = std::fma(z, -0.5f, y);
    x = x + y;
    return std::fma(e, 0.693359375f, x);
}
static inline void cephes_sincosf(float x, float* s, float* c) {
    const bool neg = std::signbit(x);
    x = std::fabs(x);
    float y = x * 1.27323954473516f;
    int32_t j = static_cast<int32_t>(y);
    j = (j + 1) & ~1;
    y = static_cast<float>(j);
    const bool swap_sin = (j & 4) != 0;
    const bool use_sin_poly = (j & 2) == 0;
    x = std::fma(y, -0.78515625f, x);
    x = std::fma(y, -2.4187564849853515625e-4f, x);
    x = std::fma(y, -3.77489497744594108e-8f, x);
    const bool neg_cos = ((~(j - 2)) & 4) != 0;
    const float z = x * x;
    float yc = 2.443315711809948E-005f;
    yc = std::fma(yc, z, -1.388731625493765E-003f);
    yc = std::fma(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = std::fma(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = -1.9515295891E-4f;
    ys = std::fma(ys, z, 8.3321608736E-3f);
    ys = std::fma(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = std::fma(ys, x, x);
    float sv = use_sin_poly ? ys : yc;
    float cv = use_sin_poly ? yc : ys;
    if (neg != swap_sin) sv = -sv;
    if (neg_cos) cv = -cv;
    *s = sv;
    *c = cv;
}
extern "C" void ember_normal_fill_16_f32(i64 blocks, float* d, float mean, float stdv) {
    for (i64 b = 0; b < blocks; ++b, d += 16) {
        for (int j = 0; j < 8; ++j) {
            const float u1 = 1.0f - d[j];
            const float u2 = d[j + 8];
            const float radius = std::sqrt(-2.0f * cephes_logf(u1));
            const float theta = 6.28318530717958647692f * u2;
            float s, c;
            cephes_sincosf(theta, &s, &c);
            d[j] = std::fma(radius * c, stdv, mean);
            d[j + 8] = std::fma(radius * s, stdv, mean);
        }
    }
}
// ... and its double normal_fill: the C library's log/cos/sin, x * std + mean fused
extern "C" void ember_normal_fill_16_f64(i64 blocks, double* d, double mean, double stdv) {
    for (i64 b = 0; b < blocks; ++b, d += 16) {
        for (int j = 0; j < 8; ++j) {
            const double u1 = 1.0 - d[j];
            const double u2 = d[j + 8];
            const double radius = std::sqrt(-2.0 * std::log(u1));
            const double theta = 6.283185307179586 * u2;
            d[j] = std::fma(radius * std::cos(theta), stdv, mean);
            d[j + 8] = std::fma(radius * std::sin(theta), stdv, mean);
        }
    }
}
// the scalar path's pairs: u = (u1, u2) per pair -> r cos(theta), r sin(theta)
extern "C" void ember_normal_pairs_f64(i64 pairs, const double* u, double* cosv, double* sinv) {
    for (i64 i = 0; i < pairs; ++i) {
        const double r = std::sqrt(-2.0 * std::log1p(-u[2 * i + 1]));
        const double theta = 2.0 * 3.14159265358979323846 * u[2 * i];
        cosv[i] = r * std::cos(theta);
        sinv[i] = r * std::sin(theta);
    }
}
// x * std + mean, fused (PyTorch's transformation::normal)
extern "C" void ember_affine_f64(i64 n, double* x, double stdv, double mean) {
    for (i64 i = 0; i < n; ++i) x[i] = std::fma(x[i], stdv, mean);
}
// exponential_(lambd): -1 / lambd * log1p(-u), u a double uniform
extern "C" void ember_exponential_f64(i64 n, const double* u, double lambd, double* out) {
    const double k = -1.0 / lambd;
    for (i64 i = 0; i < n; ++i) out[i] = k * std::log1p(-u[i]);
}
// cauchy_(median, sigma): median + sigma * tan(pi * (u - 1/2)), u a double uniform, the last
// multiply-add fused (as PyTorch's compiled kernel)
extern "C" void ember_cauchy_f64(i64 n, const double* u, double median, double sigma, double* out) {
    for (i64 i = 0; i < n; ++i) out[i] = std::fma(sigma, std::tan(3.14159265358979323846 * (u[i] - 0.5)), median);
}
// log_normal_: exp of the scalar path's normals
extern "C" void ember_exp_f64(i64 n, double* x) {
    for (i64 i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}
// geometric_(p): ceil(log(u) / log1p(-p)), u a double uniform
extern "C" void ember_geometric_f64(i64 n, const double* u, double p, double* out) {
    const double d = std::log1p(-p);
    for (i64 i = 0; i < n; ++i) out[i] = std::ceil(std::log(u[i]) / d);
}
// PyTorch's randperm for n < 2**32 / 20: r[i] <-> r[i + z[i]], z[i] = word % (n - i), in order
extern "C" void ember_randperm_swaps(i64 n, const int64_t* z, int64_t* r) {
    for (i64 i = 0; i < n; ++i) r[i] = i;
    for (i64 i = 0; i + 1 < n; ++i) {
        const i64 k = i + z[i];
        const int64_t t = r[i]; r[i] = r[k]; r[k] = t;
    }
}
// The k largest of each row of keys (rows x cats, row-major), largest first, NaN above all, as
// PyTorch's CPU topk(sorted=True) picks them: (value, index) pairs through the standard library's
// partial_sort when k * 64 <= cats, else nth_element then a sort of the first k - 1 -- so ties
// (multinomial's zero-probability entries) come in the order those algorithms leave them
extern "C" void ember_topk_largest(i64 rows, i64 cats, const double* keys, i64 k, int64_t* out) {
    typedef std::pair<double, int64_t> E;
    std::vector<E> q((size_t)cats);
    auto above = [](const E& x, const E& y) -> bool {
        return (std::isnan(x.first) && !std::isnan(y.first)) || (x.first > y.first);
    };
    for (i64 r = 0; r < rows && k > 0; ++r) {
        for (i64 j = 0; j < cats; ++j) q[j] = E(keys[r * cats + j], j);
        if (k * 64 <= cats) {
            std::partial_sort(q.begin(), q.begin() + k, q.end(), above);
        } else {
            std::nth_element(q.begin(), q.begin() + k - 1, q.end(), above);
            std::sort(q.begin(), q.begin() + k - 1, above);
        }
        for (i64 j = 0; j < k; ++j) out[r * k + j] = q[j].second;
    }
}
// PyTorch's CPU sum of each contiguous row of doubles (its cascade sum over an inner, contiguous
// dim, one thread): rows of at least W values (W: the doubles of a SIMD vector, 4 with AVX2) sum
// W-wide groups -- four interleaved accumulators with up to four cascade levels, the leftover
// groups onto the first, the others onto it -- then the scalar tail from 0 and the W lanes onto
// it; shorter rows are the same scheme with one-value groups
static i64 ember_ceil_log2(i64 x) {
    if (x <= 2) return 1;
    i64 b = 0;
    for (u64 v = (u64)(x - 1); v; v >>= 1) ++b;
    return b;
}
// row_sum over `size` groups of L lanes at g (group i at g + i * L): result in res[0 .. L)
static void ember_row_sum(const double* g, i64 size, i64 L, double* res) {
    const i64 levels = 4, ilp = 4;
    const i64 size_ilp = size / ilp;
    double acc[4][4][8] = {};
    const i64 lp = std::max<i64>(4, ember_ceil_log2(size_ilp) / levels);
    const i64 step = (i64)1 << lp, mask = step - 1;
    i64 i = 0;
    for (; i + step <= size_ilp;) {
        for (i64 j = 0; j < step; ++j, ++i)
            for (i64 k = 0; k < ilp; ++k)
                for (i64 l = 0; l < L; ++l) acc[0][k][l] += g[(i * ilp + k) * L + l];
        for (i64 j = 1; j < levels; ++j) {
            for (i64 k = 0; k < ilp; ++k)
                for (i64 l = 0; l < L; ++l) { acc[j][k][l] += acc[j - 1][k][l]; acc[j - 1][k][l] = 0; }
            if ((i & (mask << (j * lp))) != 0) break;
        }
    }
    for (; i < size_ilp; ++i)
        for (i64 k = 0; k < ilp; ++k)
            for (i64 l = 0; l < L; ++l) acc[0][k][l] += g[(i * ilp + k) * L + l];
    for (i64 j = 1; j < levels; ++j)
        for (i64 k = 0; k < ilp; ++k)
            for (i64 l = 0; l < L; ++l) acc[0][k][l] += acc[j][k][l];
    for (i64 t = size_ilp * ilp; t < size; ++t)
        for (i64 l = 0; l < L; ++l) acc[0][0][l] += g[t * L + l];
    for (i64 k = 1; k < ilp; ++k)
        for (i64 l = 0; l < L; ++l) acc[0][0][l] += acc[0][k][l];
    for (i64 l = 0; l < L; ++l) res[l] = acc[0][0][l];
}
extern "C" void ember_torch_sum_rows_f64(i64 rows, i64 n, const double* x, double* out, i64 W) {
    double lanes[8];
    for (i64 r = 0; r < rows; ++r) {
        const double* row = x + r * n;
        if (n < W) { ember_row_sum(row, n, 1, lanes); out[r] = lanes[0]; continue; }
        const i64 nv = n / W;
        ember_row_sum(row, nv, W, lanes);
        double s = 0;
        for (i64 k = nv * W; k < n; ++k) s += row[k];
        for (i64 l = 0; l < W; ++l) s += lanes[l];
        out[r] = s;
    }
}
// PyTorch's randperm from n >= 2**32 / 20 on: the inside-out shuffle, steps start .. start + k - 1
// (one 64-bit word each): z = w % (i + 1); r[i] = r[z]; r[z] = i
extern "C" void ember_randperm_inside_out(i64 start, i64 k, const u64* w, int64_t* r) {
    for (i64 j = 0; j < k; ++j) {
        const i64 i = start + j;
        const i64 z = (i64)(w[j] % (u64)(i + 1));
        r[i] = r[z];
        r[z] = i;
    }
}
// ---- PyTorch's serial samplers (poisson, _standard_gamma, _sample_dirichlet, binomial) over a
// buffer of the generator's words: each draw takes words in turn; -1 when the buffer ran out
// (the caller retries with a larger one), else the number of words taken
struct EmberWords {
    const u64* w; i64 n; i64 pos; bool out;
    double* cache;          // [has the scalar normal path's kept value, the value]
    double uniform() {      // uniform_real_distribution<double>(0, 1): 53 bits of a 64-bit value
        if (pos + 2 > n) { out = true; pos = n; return 0.5; }
        const u64 v = ((w[pos] & 0xFFFFFFFFull) << 32) | (w[pos + 1] & 0xFFFFFFFFull);
        pos += 2;
        return static_cast<double>(v & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
    }
    double normal() {       // normal_distribution<double>(0, 1): Box-Muller pairs, one kept
        if (cache[0] != 0.0) { cache[0] = 0.0; return cache[1]; }
        const double u1 = uniform();
        const double u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log1p(-u2));
        const double theta = 2.0 * 3.14159265358979323846 * u1;
        if (out) return 0.0;
        cache[0] = 1.0; cache[1] = r * std::sin(theta);
        return r * std::cos(theta);
    }
};

static inline float ember_round16(float x, int mode) {    // to half (1) / bfloat16 (2), nearest even
    if (mode == 0 || !std::isfinite(x)) return x;
    uint32_t b; __builtin_memcpy(&b, &x, 4);
    const int sh = mode == 1 ? 13 : 16;
    if (mode == 1 && std::fabs(x) < 6.103515625e-05f) {     // half subnormals: steps of 2**-24
        return std::nearbyint(x * 16777216.0f) / 16777216.0f;
    }
    b += ((1u << (sh - 1)) - 1) + ((b >> sh) & 1u);
    b &= ~((1u << sh) - 1);
    float r; __builtin_memcpy(&r, &b, 4);
    return r;
}

// sample_gamma<scalar_t, double>: Marsaglia-Tsang, alpha < 1 boosted (its float constants kept)
template <typename S>
static double ember_sample_gamma(S alpha, int mode, EmberWords& g) {
    double scale = 1.0f;
    if (alpha < 1.0f) {
        if (alpha == 0.f) return 0.f;
        scale *= std::pow(1 - g.uniform(), 1.0f / alpha);
        alpha += 1.0f;
        if constexpr (sizeof(S) == 4) alpha = ember_round16(alpha, mode);
    }
    const double d = alpha - 1.0f / 3.0f;
    const double c = 1.0f / std::sqrt(9.0f * d);
    if (!(d > 0)) return NAN;                 // (PyTorch loops forever here)
    for (;;) {
        double x, y;
        do {
            x = g.normal();
            y = 1.0f + c * x;
            if (g.out) return 0.0;
        } while (y <= 0);
        const double v = y * y * y;
        const double u = 1 - g.uniform();
        if (g.out) return 0.0;
        const double xx = x * x;
        if (u < 1.0f - 0.0331f * xx * xx) return scale * d * v;
        if (std::log(u) < 0.5f * xx + d * (1.0f - v + std::log(v))) return scale * d * v;
    }
}

extern "C" i64 ember_gamma_f32(i64 n, const float* a, int mode, double* out, const u64* w, i64 nw, double* cache) {
    EmberWords g{w, nw, 0, false, cache};
    for (i64 i = 0; i < n; ++i) { out[i] = ember_sample_gamma<float>(a[i], mode, g); if (g.out) return -1; }
    return g.pos;
}
extern "C" i64 ember_gamma_f64(i64 n, const double* a, double* out, const u64* w, i64 nw, double* cache) {
    EmberWords g{w, nw, 0, false, cache};
    for (i64 i = 0; i < n; ++i) { out[i] = ember_sample_gamma<double>(a[i], 0, g); if (g.out) return -1; }
    return g.pos;
}

// sample_poisson: transformed rejection with squeeze (Hoermann) for lambda >= 10, else products
// of uniforms
extern "C" i64 ember_poisson(i64 n, const double* lam, double* out, const u64* w, i64 nw, double* cache) {
    EmberWords g{w, nw, 0, false, cache};
    for (i64 i = 0; i < n; ++i) {
        const double lambda = lam[i];
        int64_t res = 0;
        if (lambda >= 10) {
            int64_t k;
            double U, V, a, b, invalpha, vr, us;
            const double slam = std::sqrt(lambda);
            const double loglam = std::log(lambda);
            b = 0.931 + 2.53 * slam;
            a = -0.059 + 0.02483 * b;
            invalpha = 1.1239 + 1.1328 / (b - 3.4);
            vr = 0.9277 - 3.6224 / (b - 2);
            for (;;) {
                U = g.uniform() - 0.5;
                V = g.uniform();
                if (g.out) return -1;
                us = 0.5 - std::fabs(U);
                k = (int64_t)std::floor((2 * a / us + b) * U + lambda + 0.43);
                if ((us >= 0.07) && (V <= vr)) { res = k; break; }
                if ((k < 0) || ((us < 0.013) && (V > us))) continue;
                if ((std::log(V) + std::log(invalpha) - std::log(a / (us * us) + b)) <=
                    (-lambda + k * loglam - std::lgamma((double)k + 1))) { res = k; break; }
            }
        } else if (lambda == 0) {
            res = 0;
        } else {
            const double enlam = std::exp(-lambda);
            int64_t X = 0;
            double prod = 1.0;
            for (;;) {
                const double U = g.uniform();
                if (g.out) return -1;
                prod *= U;
                if (prod > enlam) X += 1; else break;
            }
            res = X;
        }
        out[i] = static_cast<double>(res);
    }
    return g.pos;
}

// sample_binomial<scalar_t, double>: BTRS for count * prob >= 10, else geometric inversion
template <typename S>
static double ember_stirling_tail(S k) {
    static const S kTailValues[] = {0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                                    0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                                    0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                                    0.00833056343336287};
    if (k <= 9) return kTailValues[static_cast<size_t>(k)];
    S kp1sq = (k + 1) * (k + 1);
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1);
}
template <typename S>
static S ember_btrs(S count, S prob, EmberWords& g) {
    S k;
    double U, V, us;
    const double stddev = std::sqrt(count * prob * (1 - prob));
    const double b = 1.15 + 2.53 * stddev;
    const double a = -0.0873 + 0.0248 * b + 0.01 * prob;
    const double c = count * prob + 0.5;
    const double v_r = 0.92 - 4.2 / b;
    const double r = prob / (1 - prob);
    const double alpha = (2.83 + 5.1 / b) * stddev;
    const double m = std::floor((count + 1) * prob);
    for (;;) {
        U = g.uniform() - 0.5;
        V = g.uniform();
        if (g.out) return 0;
        us = 0.5 - std::abs(U);
        k = static_cast<S>(std::floor((2 * a / us + b) * U + c));
        if (k < 0 || k > count) continue;
        if (us >= 0.07 && V <= v_r) return k;
        V = std::log(V * alpha / (a / (us * us) + b));
        double upperbound =
            ((m + 0.5) * std::log((m + 1) / (r * (count - m + 1))) +
             (count + 1) * std::log((count - m + 1) / (count - k + 1)) +
             (k + 0.5) * std::log(r * (count - k + 1) / (k + 1)) +
             ember_stirling_tail<double>(m) + ember_stirling_tail<double>(count - m) -
             ember_stirling_tail<double>(k) - ember_stirling_tail<double>(count - k));
        if (V <= upperbound) return k;
    }
}
template <typename S>
static S ember_binomial_inversion(S count, S prob, EmberWords& g) {
    double U;
    double geom_sum = 0;
    S num_geom = 0;
    double logprob = std::log1p(-prob);
    for (;;) {
        U = g.uniform();
        if (g.out) return 0;
        double geom = std::ceil(std::log(U) / logprob);
        geom_sum += geom;
        if (geom_sum > count) break;
        num_geom = num_geom + 1;
    }
    return num_geom;
}
template <typename S>
static S ember_sample_binomial(S count, S prob, EmberWords& g) {
    if (!std::isfinite(count) || std::isnan(prob)) return static_cast<S>(NAN);   // (PyTorch may loop)
    if (count <= 0.0 || prob <= 0.0) {
        return 0;
    } else if (prob >= 1.0) {
        return count;
    } else if (prob <= 0.5) {
        if (count * prob >= 10.0) return ember_btrs<S>(count, prob, g);
        return ember_binomial_inversion<S>(count, prob, g);
    } else if (prob > 0.5) {
        S qprob = 1.0 - prob;
        if (count * qprob >= 10.0) return count - ember_btrs<S>(count, qprob, g);
        return count - ember_binomial_inversion<S>(count, qprob, g);
    }
    return static_cast<S>(NAN);
}
extern "C" i64 ember_binomial_f32(i64 n, const float* cnt, const float* p, float* out, const u64* w, i64 nw, double* cache) {
    EmberWords g{w, nw, 0, false, cache};
    for (i64 i = 0; i < n; ++i) { out[i] = ember_sample_binomial<float>(cnt[i], p[i], g); if (g.out) return -1; }
    return g.pos;
}
extern "C" i64 ember_binomial_f64(i64 n, const double* cnt, const double* p, double* out, const u64* w, i64 nw, double* cache) {
    EmberWords g{w, nw, 0, false, cache};
    for (i64 i = 0; i < n; ++i) { out[i] = ember_sample_binomial<double>(cnt[i], p[i], g); if (g.out) return -1; }
    return g.pos;
}
"""


def _build():
    from .inductor import codecache
    L = codecache.load(_SOURCE)
    P, I, F, D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_double
    sigs = {"ember_uniform_f32": [I, P, F, F, P], "ember_uniform_f64": [I, P, D, D, P],
            "ember_normal_fill_16_f32": [I, P, F, F], "ember_normal_fill_16_f64": [I, P, D, D],
            "ember_normal_pairs_f64": [I, P, P, P], "ember_affine_f64": [I, P, D, D], "ember_exponential_f64": [I, P, D, P],
            "ember_randperm_swaps": [I, P, P], "ember_randperm_inside_out": [I, I, P, P], "ember_topk_largest": [I, I, P, I, P], "ember_torch_sum_rows_f64": [I, I, P, P, I], "ember_cauchy_f64": [I, P, D, D, P], "ember_exp_f64": [I, P],
            "ember_geometric_f64": [I, P, D, P]}
    sigs_i = {"ember_gamma_f32": [I, P, ctypes.c_int, P, P, I, P], "ember_gamma_f64": [I, P, P, P, I, P],
              "ember_poisson": [I, P, P, P, I, P], "ember_binomial_f32": [I, P, P, P, P, I, P],
              "ember_binomial_f64": [I, P, P, P, P, I, P]}
    for name, argtypes in sigs_i.items():
        f = getattr(L, name)
        f.argtypes = argtypes
        f.restype = I
    for name, argtypes in sigs.items():
        f = getattr(L, name)
        f.argtypes = argtypes
        f.restype = None
    return L


_lib = LazyLibrary(_build, "PyTorch's random transformations as native loops (numpy's arithmetic is used: "
                   "some values differ from PyTorch's in the last bit)", log).get


def _fill16_numpy(d: np.ndarray, mean, stdv) -> None:
    """``normal_fill_16`` over ``d`` (blocks of 16) with numpy's math: the fallback."""
    blk = d.reshape(-1, 16)
    ct = d.dtype
    u1 = (ct.type(1) - blk[:, :8]).astype(ct)
    u2 = blk[:, 8:]
    radius = np.sqrt(ct.type(-2) * np.log(u1)).astype(ct)
    theta = (6.283185307179586 * u2.astype(np.float64)).astype(ct)
    blk[:, :8] = ((radius * np.cos(theta)).astype(np.float64) * float(stdv) + float(mean)).astype(ct)
    blk[:, 8:] = ((radius * np.sin(theta)).astype(np.float64) * float(stdv) + float(mean)).astype(ct)


def _fill16(d: np.ndarray, mean, stdv) -> None:
    L = _lib()
    if L is None or d.dtype not in (np.float32, np.float64):
        _fill16_numpy(d, mean, stdv)
        return
    fn = L.ember_normal_fill_16_f32 if d.dtype == np.float32 else L.ember_normal_fill_16_f64
    fn(d.size // 16, d.ctypes.data, float(mean), float(stdv))


def _normal_fill(stream: MTStream, n: int, dt: np.dtype, mean: float, std: float) -> np.ndarray:
    """PyTorch's ``normal_fill`` (16 or more values of a contiguous tensor): Box-Muller per block
    of 16 uniforms, a partial last block redrawn over the last 16 values. float32/float64 draw a
    uniform for every value first and 16 more for a partial block; float16/bfloat16 draw the full
    blocks' uniforms only, then 16 for the partial one, and compute in float32."""
    work = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    reduced = dt not in (np.float32, np.float64)
    full = n - n % 16
    d = np.ascontiguousarray(uniform(stream, full if reduced else n, work, 0.0, 1.0))
    if reduced:
        d = np.concatenate([d, np.zeros(n - full, dtype=work)]) if n != full else d
    tail = np.ascontiguousarray(uniform(stream, 16, work, 0.0, 1.0)) if n % 16 else None
    m, s = work.type(mean), work.type(std)      # (float32 mean and std for float16/bfloat16 too)
    if full:
        _fill16(d[:full], m, s)
    if tail is not None:
        _fill16(tail, m, s)
        d[n - 16:] = tail
    return d.astype(dt, copy=False)


def _normal_serial(stream: MTStream, n: int, mean: float, std: float) -> np.ndarray:
    """PyTorch's scalar path: ``normal_distribution<double>`` per value, a pair from two double
    uniforms, the second value of a pair kept in the generator for the next draw."""
    out = np.empty(n, dtype=np.float64)
    i = 0
    if n and stream.next_double_normal is not None:
        out[0] = stream.next_double_normal
        stream.next_double_normal = None
        i = 1
    pairs = (n - i + 1) // 2
    if pairs:
        u = np.ascontiguousarray(_unit(stream, 2 * pairs, np.dtype(np.float64)))
        cosv, sinv = np.empty(pairs), np.empty(pairs)
        L = _lib()
        if pairs <= 8:      # a few pairs: Python's math is the C library's, no native call needed
            for k in range(pairs):
                r = math.sqrt(-2.0 * math.log1p(-float(u[2 * k + 1])))
                theta = 2.0 * math.pi * float(u[2 * k])
                cosv[k], sinv[k] = r * math.cos(theta), r * math.sin(theta)
        elif L is not None:
            L.ember_normal_pairs_f64(pairs, u.ctypes.data, cosv.ctypes.data, sinv.ctypes.data)
        else:
            r = np.sqrt(-2.0 * np.log1p(-u[1::2]))
            theta = 2.0 * math.pi * u[0::2]
            cosv, sinv = r * np.cos(theta), r * np.sin(theta)
        inter = np.empty(2 * pairs)
        inter[0::2], inter[1::2] = cosv, sinv
        out[i:] = inter[:n - i]
        if (n - i) % 2:
            stream.next_double_normal = float(sinv[-1])
    if (mean, std) != (0.0, 1.0):
        L = _lib()
        if L is None:
            return out * std + mean
        L.ember_affine_f64(n, out.ctypes.data, float(std), float(mean))
    return out


def normal(stream: MTStream, n: int, dt: np.dtype, mean: float, std: float, contiguous: bool = True) -> np.ndarray:
    """``n`` values of PyTorch's ``normal_(mean, std)`` in float dtype ``dt``."""
    dt = np.dtype(dt)
    if n >= 16 and contiguous:
        return _normal_fill(stream, n, dt, mean, std)
    out = _normal_serial(stream, n, float(mean), float(std))
    if dt.itemsize < 4:                 # PyTorch casts a double to Half/BFloat16 by way of float
        out = out.astype(np.float32)
    return out.astype(dt)


# ------------------------------------------------------------------------------ integers
#: from this range on PyTorch's ``random_(from, to)`` takes a 64-bit value per draw (its
#: ``uniform_int_from_to_distribution`` outside fbcode: ``range >= 1 << 28``)
WIDE_RANGE = 1 << 28


def randint(stream: MTStream, n: int, low: int, high: int, *, default: bool = False) -> np.ndarray:
    """``n`` values of PyTorch's ``random_(low, high)`` as int64 (the caller casts, ``cast_int64``):
    ``word % range + low`` (in 64-bit unsigned arithmetic, wrapped to int64), a 64-bit word when
    the range is at least ``WIDE_RANGE``. ``default``: ``random_()`` with no range, whose kernel
    takes a 64-bit word for int64/float64 only (ranges 2**63, 2**53 + 1), a 32-bit one otherwise
    (int32's 2**31 too). A range of 2**64 (``random_(-2**63, None)``) is the 64-bit word itself."""
    low, high = int(low), int(high)
    rng = high - low
    check_random_args("random", low, high)
    if rng == 1 << 64:
        return stream.words64(n).astype(np.int64)
    wide = rng >= (1 << 32) if default else rng >= WIDE_RANGE
    w = stream.words64(n) if wide else stream.words(n)
    with np.errstate(over="ignore"):
        return (w % np.uint64(rng)).astype(np.int64) + np.int64(low)


def cast_int64(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """PyTorch's ``static_cast`` of int64 draws to dtype ``dt``: Half/BFloat16 by way of float."""
    dt = np.dtype(dt)
    if dt.kind == "f" and dt.itemsize < 4 or dt.name == "bfloat16":
        return v.astype(np.float32).astype(dt)
    return v.astype(dt)


# PyTorch's names of the C++ types in its random_ bounds errors, and the float dtypes' digits
_CPP_TYPE = {"int8": "signed char", "int16": "short int", "int32": "int", "int64": "long int",
             "uint8": "unsigned char", "uint16": "short unsigned int", "uint32": "unsigned int",
             "uint64": "long unsigned int", "bool": "bool", "float16": "c10::Half",
             "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double"}
_FLOAT_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _wrap64(v: int) -> int:
    """``v`` as a C int64 (two's complement wrap)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _through(v: int, name: str) -> int:
    """``static_cast<int64_t>(static_cast<scalar_t>(v))`` for float dtype ``name``."""
    f = np.array(_wrap64(v), dtype=np.int64)
    f = f.astype(np.float64) if name == "float64" else f.astype(np.float32)
    if name in ("float16", "bfloat16"):
        from .types import as_dtype
        with np.errstate(over="ignore"):
            f = f.astype(as_dtype(name).np).astype(np.float32)
    f = float(f)
    return _wrap64(int(f)) if math.isfinite(f) else _INT64_MIN


def _update_from(frm: int, name: str) -> int:
    """PyTorch's ``update_from``: the first int64 above ``frm`` whose cast stays at least ``frm``."""
    up = _through(frm + 1, name)
    if up < frm:
        bits = max(abs(frm + 1).bit_length() - 1, 0)
        frm = up + (1 << (bits - _FLOAT_DIGITS[name] + 1))
    return frm


def _update_to(to: int, name: str) -> int:
    """PyTorch's ``update_to``: the last int64 below ``to`` whose cast stays below ``to``."""
    down = _through(to - 1, name)
    if down >= to:
        bits = max(abs(to - 1).bit_length() - 1, 0)
        to = down - (1 << (bits - _FLOAT_DIGITS[name] + 1))
    return to


def _check_in_range(frm: int, to_inc: int, name: str) -> None:
    """PyTorch's ``check_from_to_in_range``: errors outside the dtype, warnings outside the floats'
    exact integers."""
    if name not in _CPP_TYPE:
        raise RuntimeError("check_random_bounds handles only integral, floating-point and boolean types")
    cpp = _CPP_TYPE[name]
    if name in _FLOAT_DIGITS:
        from .types import as_dtype
        top = float(np.finfo(np.float32).max) if name == "bfloat16" else float(np.finfo(as_dtype(name).np).max)
        lo, hi = -top, top
    elif name == "uint64":
        lo, hi = 0, _INT64_MAX
    elif name == "bool":
        lo, hi = 0, 1
    else:
        info = np.iinfo(np.dtype(name))
        lo, hi = int(info.min), int(info.max)
    for var, what in ((frm, "from"), (to_inc, "to - 1")):
        if not lo <= var <= hi:
            raise RuntimeError(f"{what} is out of bounds for {cpp}")
    if name in _FLOAT_DIGITS:
        import warnings
        d = _FLOAT_DIGITS[name]
        for var, what in ((frm, "from"), (to_inc, "to - 1")):
            if var < -(1 << d) or var > 1 << d:
                warnings.warn(f"{what} is out of bounds [-(2^{d}), 2^{d}]. Due to precision limitations {cpp} can "
                              f"support discrete uniform distribution only within this range. This warning will "
                              f"become an error in version 1.7 release, please fix the code in advance",
                              UserWarning, stacklevel=4)


#: random_() with no range: [0, range) per dtype (PyTorch's ``uniform_int``: [0, 2**digits] for the
#: floats, [0, max] for the integers, the low bit for bool); the unsigned dtypes it refuses
_DEFAULT_RANGE = {"float32": 2 ** 24 + 1, "float64": 2 ** 53 + 1, "float16": 2 ** 11 + 1, "bfloat16": 2 ** 8 + 1,
                  "int64": 2 ** 63, "int32": 2 ** 31, "int16": 2 ** 15, "int8": 2 ** 7, "uint8": 2 ** 8, "bool": 2}
_FULL_RANGE_OK = ("int64", "float64", "float32", "bfloat16")
_NOTHING = ("random", 0, 1)       # (an empty tensor: the op draws nothing, its in-place checks still run)
_FULL_RANGE_REFUSED = ("uint8", "int8", "int16", "int32")   # (its dispatch's other types are not even listed)


def random_args(dtype, args: tuple, kw: dict, numel: int):
    """PyTorch's ``Tensor.random_`` overloads -- ``()``, ``(to)``, ``(from, to)`` with ``to`` None
    for "up to the dtype's largest" -- resolved for ember ``dtype`` into ``(kind, from, to)`` for the
    ``_random`` op (``to`` exclusive; ``kind`` ``"random_default"`` for ``random_()``, whose words
    differ), with PyTorch's errors and warnings, in its order (bounds first, even for an empty
    tensor; the unsupported dtypes only when there is something to fill; an empty tensor: a draw of
    nothing, so that the op still makes its in-place checks)."""
    import operator
    args, kw = tuple(args), dict(kw)

    def bad():
        got = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kw.items()])
        got += ", " if kw and not args else ""            # (torch's own punctuation)
        return TypeError(f"random_() received an invalid combination of arguments - got ({got}), but expected one "
                         f"of:\n * (*, ember.Generator generator = None)\n * (int from, int to, *, ember.Generator "
                         f"generator = None)\n * (int to, *, ember.Generator generator = None)\n")

    def is_int(v):
        try:
            operator.index(v)
            return True
        except TypeError:
            return False
    if len(args) > 2:
        raise TypeError(f"random_() takes 2 positional arguments but {len(args)} were given")
    if set(kw) - {"from", "to"}:
        raise bad()
    has_to = "to" in kw
    if not args and not kw:                                     # random_()
        form = "default"
    elif (len(args) == 1 and not kw) or (not args and list(kw) == ["to"]):   # random_(to)
        form = "to"
        to = args[0] if args else kw["to"]
        if not is_int(to):
            raise bad()
        frm = 0
    else:                                                       # random_(from, to), to None: the dtype's top
        if len(args) + len(kw) != 2 or (args and "from" in kw) or (len(args) < 2 and not has_to):
            raise bad()
        frm = args[0] if args else kw["from"]
        to = args[1] if len(args) > 1 else kw["to"]
        if not is_int(frm) or not (to is None or is_int(to)):
            raise bad()
        form = "from_to"
    name = dtype.name
    if form == "default":                                      # random_()
        if numel == 0:
            return _NOTHING
        if name not in _DEFAULT_RANGE:
            raise NotImplementedError(f"\"random_kernel_cpu\" not implemented for '{dtype.legacy_name}'")
        return "random_default", 0, _DEFAULT_RANGE[name]
    frm = operator.index(frm)
    if to is not None:
        to = operator.index(to)
        if frm >= to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={frm} >= to={to}")
        if name in _FLOAT_DIGITS:
            frm, to = _update_from(frm, name), _update_to(to, name)
            if frm >= to:
                raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, "
                                   f"but got from={frm} >= to={to}")
        _check_in_range(frm, to - 1, name)
        return _NOTHING if numel == 0 else ("random", frm, to)
    if frm == _INT64_MIN:                                      # the full 64-bit range
        if numel == 0:
            return _NOTHING
        if name in _FULL_RANGE_REFUSED:
            raise RuntimeError("random_full_64_bits_range_kernel_cpu handles only int64, double, float and bfloat16")
        if name not in _FULL_RANGE_OK:
            raise NotImplementedError(f"\"random_full_64_bits_range_kernel_cpu\" not implemented for "
                                      f"'{dtype.legacy_name}'")
        return "random", _INT64_MIN, 1 << 63
    if name in _FLOAT_DIGITS:
        to_inc = 1 << _FLOAT_DIGITS[name]
        frm = _update_from(frm, name)
        if not frm < to_inc:
            raise RuntimeError(f"random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted "
                               f"to dtype, but got from={frm} > to_inc={to_inc}")
    elif name == "bool":
        to_inc = 1
    elif name not in _CPP_TYPE:
        raise RuntimeError("random_from_to_impl handles only integral, floating-point and boolean types")
    else:
        to_inc = _wrap64(int(np.iinfo(np.dtype(name)).max))
    _check_in_range(frm, to_inc, name)
    return _NOTHING if numel == 0 else ("random", frm, frm + ((to_inc - frm + 1) & ((1 << 64) - 1)))


def randint_arg_errors(low, high, size, three: bool) -> None:
    """torch's parser errors for ``randint(high, size)`` / ``randint(low, high, size)`` bounds that
    are not ints (``three``: the low, high, size form)."""
    import operator
    bad = []
    for v in ((low, high) if three else (high,)):
        try:
            operator.index(v)
        except TypeError:
            bad.append(v)
    if not bad:
        return
    if not three:
        raise TypeError(f"randint(): argument 'high' (position 1) must be int, not {type(high).__name__}")
    tail = ("Tensor out = None, ember.dtype dtype = None, ember.layout layout = None, ember.device device = None, "
            "bool pin_memory = False, bool requires_grad = False)")
    forms = [f"(int high, tuple of ints size, *, ember.Generator generator, {tail}",
             f"(int high, tuple of ints size, *, {tail}",
             f"(int low, int high, tuple of ints size, *, ember.Generator generator, {tail}",
             f"(int low, int high, tuple of ints size, *, {tail}"]
    got = ", ".join(type(v).__name__ for v in (low, high, size))
    raise TypeError(f"randint() received an invalid combination of arguments - got ({got}), but expected one of:\n"
                    + "".join(f" * {f}\n" for f in forms))


#: from this n on PyTorch's ``randperm`` is the inside-out shuffle of 64-bit words
RANDPERM_MAX = ((1 << 32) - 1) // 20


def randperm(stream: MTStream, n: int) -> np.ndarray:
    """PyTorch's ``randperm(n)`` (int64). For n < ``RANDPERM_MAX`` its swap shuffle
    (``swap(r[i], r[i + word % (n - i)])``, i = 0 .. n - 2); from there on its inside-out
    Fisher-Yates over 64-bit words (``z = word64 % (i + 1); r[i] = r[z]; r[z] = i``), which needs
    the native loop (NotImplementedError without a C++ compiler)."""
    n = int(n)
    L = _lib()
    if n >= RANDPERM_MAX:
        if L is None:
            raise NotImplementedError(f"randperm({n}): PyTorch's inside-out shuffle for n >= {RANDPERM_MAX} "
                                      f"needs ember's native random loops (no C++ compiler was found)")
        r = np.empty(n, dtype=np.int64)
        chunk = 1 << 22
        for start in range(0, n, chunk):
            k = min(chunk, n - start)
            w = np.ascontiguousarray(stream.words64(k))
            L.ember_randperm_inside_out(start, k, w.ctypes.data, r.ctypes.data)
        return r
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    z = (stream.words(n - 1) % (np.uint64(n) - np.arange(n - 1, dtype=np.uint64))).astype(np.int64)
    r = np.empty(n, dtype=np.int64)
    if L is not None:
        L.ember_randperm_swaps(n, z.ctypes.data, r.ctypes.data)
        return r
    r[:] = np.arange(n)
    for i, k in enumerate(z.tolist()):
        j = i + k
        r[i], r[j] = r[j], r[i]
    return r


def randperm_checks(n, dtype) -> None:
    """PyTorch's ``randperm`` errors for ``n`` and ember ``dtype``, in its order: a negative size,
    ``n - 1`` not fitting the dtype, the floats' exact-integer limits, the dtypes it has no kernel for."""
    from .ops.checked_scalar import check_fits
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    check_fits(n - 1 if n > 0 else n, dtype)
    limits = {"float16": ((1 << 11) + 1, "2049", "Half"), "float32": ((1 << 24) + 1, "2^24+1", "Float"),
              "float64": ((1 << 53) + 1, "2^53+1", "Double")}
    if dtype.name in limits and n > limits[dtype.name][0]:
        _, text, what = limits[dtype.name]
        raise RuntimeError(f"n cannot be greater than {text} for {what} type.")
    if dtype.name not in ("uint8", "int8", "int16", "int32", "int64", "float32", "float64", "float16", "bfloat16"):
        raise NotImplementedError(f"\"randperm\" not implemented for '{dtype.legacy_name}'")


# ------------------------------------------------------------------------------ multinomial
def multinomial(stream: MTStream, p: np.ndarray, n_sample: int, replacement: bool) -> np.ndarray:
    """PyTorch's CPU ``multinomial`` of the rows of 2-D float array ``p`` (int64, rows x n_sample).

    Without replacement, or one sample: the exponential race -- ``q = exponential_(1)`` over a
    tensor like ``p`` (its draws in ``p``'s memory order when ``p`` is a transposed dense array),
    ``p / q`` in ``p``'s dtype, then the argmax (one sample) or the ``n_sample`` largest, largest
    first. With replacement: per row, the running sum of the row (float32 for float16/bfloat16,
    the row's dtype otherwise) divided by the total, its last entry set to 1, then per sample a
    double uniform and the first entry not below it. The caller has made PyTorch's checks
    (``multinomial_checks``). The ``n_sample`` largest are PyTorch's topk's picks in its order,
    ties (more samples without replacement than positive entries: the zero-probability picks)
    included: the standard library's partial_sort / nth_element + sort, as its (without a C++
    compiler a stable sort: ties in index order)."""
    rows, cats = p.shape
    if not replacement or n_sample == 1:
        fortran = p.ndim == 2 and not p.flags.c_contiguous and p.flags.f_contiguous
        q = exponential(stream, p.size, 1.0)
        q = (q.astype(np.float32) if p.dtype.itemsize < 4 else q).astype(p.dtype)
        q = q.reshape((cats, rows)).T if fortran else q.reshape((rows, cats))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (p / q).astype(p.dtype)
        if n_sample == 1:
            return np.argmax(r, axis=1).astype(np.int64).reshape(rows, 1)
        key = np.ascontiguousarray(r, dtype=np.float64)
        L = _lib()
        if L is not None:                                  # PyTorch's topk, its order of ties too
            out = np.empty((rows, n_sample), dtype=np.int64)
            L.ember_topk_largest(rows, cats, key.ctypes.data, n_sample, out.ctypes.data)
            return out
        key = np.where(np.isnan(key), np.inf, key)        # PyTorch's topk puts NaN first
        return np.argsort(-key, axis=1, kind="stable")[:, :n_sample].astype(np.int64)
    acc = np.float64 if p.dtype == np.float64 else np.float32
    u = _unit(stream, rows * n_sample, np.dtype(np.float64)).reshape(rows, n_sample)
    out = np.empty((rows, n_sample), dtype=np.int64)
    for i in range(rows):
        cum = np.cumsum(p[i].astype(acc), dtype=acc)
        cum = (cum / cum[-1]).astype(acc)
        cum[-1] = 1
        out[i] = np.searchsorted(cum.astype(np.float64), u[i], side="left")
    return out


def multinomial_checks(p: np.ndarray, n_sample: int, replacement: bool, dtype_name: str, ndim: int):
    """PyTorch's argument errors for ``multinomial`` (before any draw), its message text."""
    if not 1 <= ndim <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if dtype_name not in ("Float", "Double", "Half", "BFloat16"):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {dtype_name}")
    if n_sample <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and n_sample > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if p.shape[-1] > 1 << 24:
        raise RuntimeError("number of categories cannot exceed 2^24")


def multinomial_row_errors(stream: MTStream, p: np.ndarray, n_sample: int, replacement: bool) -> None:
    """PyTorch's checks of the probabilities (2-D ``p``): the race path checks the whole tensor
    first; the cumulative path row by row while it samples (the rows before a bad one have drawn
    their uniforms: drawn here too, so the stream is where PyTorch's is)."""
    if p.size == 0:
        return
    with np.errstate(invalid="ignore"):
        if not replacement or n_sample == 1:
            if not (np.all(p >= 0) and np.all(p < np.inf)):
                raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
            if (p.astype(np.float64).sum(axis=1) == 0).any():
                raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
            return
        neg = ~(p >= 0)                           # (NaN too: it fails PyTorch's ``val >= 0`` first)
        bad = neg | ~np.isfinite(p)
        empty = ~(np.where(bad, 0, p).astype(np.float64).sum(axis=1) > 0)
        row_bad = bad.any(axis=1) | empty
        if not row_bad.any():
            return
        i = int(np.argmax(row_bad))
        if bad[i].any():
            j = int(np.argmax(bad[i]))
            msg = ("invalid multinomial distribution (encountering probability entry < 0)" if neg[i, j] else
                   "invalid multinomial distribution (encountering probability entry = infinity or NaN)")
        else:
            msg = "invalid multinomial distribution (sum of probabilities <= 0)"
        if i:
            stream.words(2 * i * n_sample)        # the rows before the bad one drew their samples
        raise RuntimeError(msg)


# ------------------------------------------------------------------------------ rejection samplers
def _run_sampler(stream: MTStream, call, estimate: int) -> None:
    """Run native sampler ``call(words, nwords, cache)`` over a buffer of the stream's next words
    (its rejection loops take as many as they need), then leave the stream just past the words it
    took, with the scalar normal path's kept value updated, as PyTorch's generator."""
    saved = stream.bg.state
    size = max(int(estimate), 256)
    while True:
        cache = np.array([0.0 if stream.next_double_normal is None else 1.0,
                          stream.next_double_normal or 0.0], dtype=np.float64)
        w = np.ascontiguousarray(stream.words(size))
        took = int(call(w.ctypes.data, size, cache.ctypes.data))
        stream.bg.state = saved
        if took >= 0:
            stream.words(took)
            stream.next_double_normal = float(cache[1]) if cache[0] else None
            return
        size *= 4


def _need_lib(what: str):
    """The native samplers, or None without a C++ compiler (then ``_fallback``: numpy's)."""
    L = _lib()
    if L is None:
        log.debug("%s: no C++ compiler for PyTorch's sampler loop; numpy's sampler draws instead "
                    "(reproducible, not PyTorch's numbers)", what)
    return L


def _fallback(stream: MTStream) -> np.random.Generator:
    """A numpy generator seeded from the stream's next 64-bit value (without a C++ compiler)."""
    return np.random.Generator(np.random.PCG64(int(stream.words64(1)[0])))


def standard_gamma(stream: MTStream, alpha: np.ndarray) -> np.ndarray:
    """PyTorch's ``_standard_gamma`` of float array ``alpha`` (its dtype; values read in C order):
    Marsaglia-Tsang with its double uniforms and scalar-path normals, in the arithmetic of the
    alpha's dtype (float32 constants and all), at least the dtype's smallest normal. Half and
    bfloat16 compute as PyTorch's do, in float with the boosted alpha rounded to the dtype."""
    L = _need_lib("_standard_gamma")
    dt = alpha.dtype
    n = alpha.size
    out = np.empty(n, dtype=np.float64)
    if L is None:
        a = alpha.astype(np.float64).ravel()
        with np.errstate(invalid="ignore"):
            res = _fallback(stream).standard_gamma(np.where(a > 0, a, 1.0))
        res = np.where(a > 0, res, np.where(a == 0, 0.0, np.nan))
    elif dt == np.float64:
        a = np.ascontiguousarray(alpha, dtype=np.float64).ravel()
        _run_sampler(stream, lambda w, nw, c: L.ember_gamma_f64(n, a.ctypes.data, out.ctypes.data, w, nw, c), 8 * n)
        res = out
    else:
        mode = 0 if dt == np.float32 else (1 if dt == np.float16 else 2)
        a = np.ascontiguousarray(alpha.astype(np.float32)).ravel()
        _run_sampler(stream, lambda w, nw, c: L.ember_gamma_f32(n, a.ctypes.data, mode, out.ctypes.data, w, nw, c),
                     8 * n)
        res = out.astype(np.float32)
    with np.errstate(over="ignore"):
        res = res.astype(dt)
    tiny = np.finfo(dt).tiny if dt.kind == "f" and dt.name != "bfloat16" else np.array(2.0 ** -126, dtype=dt)
    return np.where(np.isnan(res), res, np.maximum(res, tiny)).reshape(alpha.shape)


def sample_dirichlet(stream: MTStream, alpha: np.ndarray) -> np.ndarray:
    """PyTorch's ``_sample_dirichlet`` (float32/float64 ``alpha``, last dim the categories): gamma
    draws in double of each alpha (as a double), at least the double's smallest normal, divided
    by their sum along the last dim, then clamped to [smallest normal, the float below 1] of the
    dtype. The sums are added in the order of PyTorch's vectorised sum (``torch_row_sums``)."""
    L = _need_lib("_sample_dirichlet")
    n = alpha.size
    a = np.ascontiguousarray(alpha, dtype=np.float64).ravel()
    out = np.empty(n, dtype=np.float64)
    if L is None:
        out[:] = np.where(a > 0, _fallback(stream).standard_gamma(np.where(a > 0, a, 1.0)), np.nan)
    else:
        _run_sampler(stream, lambda w, nw, c: L.ember_gamma_f64(n, a.ctypes.data, out.ctypes.data, w, nw, c), 8 * n)
    gam = np.maximum(out, np.finfo(np.float64).tiny).reshape(alpha.shape)
    ratio = (gam / torch_row_sums(gam)).astype(alpha.dtype)
    fi = np.finfo(alpha.dtype)
    return np.minimum(np.nextafter(alpha.dtype.type(1), alpha.dtype.type(0)), np.maximum(fi.tiny, ratio))


#: the doubles of one of PyTorch's SIMD vectors (its AVX2 kernels': ``torch.backends.cpu.get_cpu_capability()``)
SUM_LANES = 4


def torch_row_sums(x: np.ndarray) -> np.ndarray:
    """``x.sum(-1, keepdims=True)`` of a float64 array added in the order of PyTorch's CPU sum
    (its cascade over ``SUM_LANES``-wide vectors, one thread), numpy's sum without a C++ compiler.
    (PyTorch splits a single long row, of 32768 values or more, over its threads: another order.)"""
    L = _lib()
    if L is None or x.size == 0:
        return x.sum(-1, keepdims=True)
    a = np.ascontiguousarray(x, dtype=np.float64)
    n = a.shape[-1] if a.ndim else 1
    rows = a.size // max(n, 1)
    out = np.empty(rows, dtype=np.float64)
    L.ember_torch_sum_rows_f64(rows, n, a.ctypes.data, out.ctypes.data, SUM_LANES)
    return out.reshape(a.shape[:-1] + (1,))


def poisson(stream: MTStream, lam: np.ndarray) -> np.ndarray:
    """PyTorch's ``poisson`` of the rates ``lam`` (any float array, read in C order; float64
    counts): for a rate >= 10 the transformed rejection with squeeze (Hoermann 1993), below it
    the product of uniforms until it falls under exp(-rate)."""
    L = _need_lib("poisson")
    n = lam.size
    a = np.ascontiguousarray(lam, dtype=np.float64).ravel()
    out = np.empty(n, dtype=np.float64)
    if L is None:
        return _fallback(stream).poisson(a).astype(np.float64).reshape(lam.shape)
    est = int(2 * n + 2 * np.minimum(a, 10.0).sum()) + 16 if n else 0
    _run_sampler(stream, lambda w, nw, c: L.ember_poisson(n, a.ctypes.data, out.ctypes.data, w, nw, c), 4 * est)
    return out.reshape(lam.shape)


def binomial(stream: MTStream, count: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """PyTorch's ``binomial`` of same-shape float32/float64 ``count`` and ``prob`` (C order; the
    dtype's values): BTRS when count * min(p, 1 - p) >= 10, else the inversion by geometric
    jumps, in the arithmetic of the dtype (float32 steps where PyTorch's are). NaN for a count that
    is not finite or a NaN probability (PyTorch can loop forever there)."""
    L = _need_lib("binomial")
    dt = np.dtype(np.float64) if count.dtype == np.float64 else np.dtype(np.float32)
    c = np.ascontiguousarray(count, dtype=dt).ravel()
    p = np.ascontiguousarray(prob, dtype=dt).ravel()
    n = c.size
    out = np.empty(n, dtype=dt)
    if L is None:
        bad = ~(np.isfinite(c) & ~np.isnan(p))
        cc = np.where(bad | (c < 0), 0, c).astype(np.int64)
        pp = np.clip(np.where(bad, 0.0, p), 0.0, 1.0)
        return np.where(bad, np.nan, _fallback(stream).binomial(cc, pp)).astype(dt).reshape(count.shape)
    fn = L.ember_binomial_f64 if dt == np.float64 else L.ember_binomial_f32
    with np.errstate(invalid="ignore"):
        q = np.minimum(np.where(np.isfinite(c), c, 0) * np.nan_to_num(np.minimum(p, 1 - p)), 10.0)
    est = int(4 * n + 2 * np.maximum(q, 0).sum()) + 16 if n else 0
    _run_sampler(stream, lambda w, nw, cc: fn(n, c.ctypes.data, p.ctypes.data, out.ctypes.data, w, nw, cc), 4 * est)
    return out.reshape(count.shape)
