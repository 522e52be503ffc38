"""SIMD loops in strips: ember's AVX-512 ``exp`` inlined, and double sums added up in float partials.

Why exp. A softmax row is compute-bound on exp (1000x16000 on the 2-vCPU box: ~15 cycles per 16
elements in glibc's vector ``expf`` plus ember's tiny-result wrapper, ~29 vector ops). On
AVX-512 the whole of exp is 12 instructions: clamp (``vmaxps``/``vminps``), ``x * log2 e``
rounded (``vrndscaleps``), a two-constant reduction and a degree-6 polynomial (FMAs), and
``vscalefps`` for p * 2^n, which rounds subnormal results once and overflows to inf by itself.
Checked exhaustively over all 2^32 floats: at most 0.91 ulp from exp, NaN in NaN out,
exp(-inf) = 0, exp(inf) = inf (``tests/inductor/test_vector_exp.py`` re-checks 2^22 of them).

GCC's vectoriser can only *call* such a routine (a vector-ABI clone, ``_ZGVeN16v_ember_expf``):
every zmm register is caller-saved, so a reduction's accumulator is spilled and reloaded around
each call and becomes a store-forwarding chain -- measured 0.24 ns per element, against 0.12 with
the routine inlined. So ``strip_loops`` rewrites each SIMD loop that calls ``ember_expf``: in
strips (``config.strip_loops``, 1024 elements), a first loop computes the exp arguments into a local array, the routine
runs over the array inlined (``ember_exp_block``), and the original body runs with the exp lines
reading the array (GCC drops what is only needed for the argument). Softmax's exp pass: 0.31 ->
0.16 ns per element, L1-resident, one thread (strips of 256: 0.17).

Why partial sums. A float32 sum accumulates in double (``cpp._acc_type``: a float accumulator per
SIMD lane loses ~n/16 eps), which costs two conversions and two adds per 16 elements (~0.08 ns per
element: a layer_norm row pass is that and a load). In strips, each strip's float partial sum
(16 lanes of 64 values, then a tree of 16) is added into the double: error ~70 eps of the strip
at worst (the random-walk typical: ~10), not n/16 eps, at float cost: a centred sum of squares
went 0.058 -> 0.026 ns per element (L1-resident; strips of 256: 0.035). Loops that call exp,
and loops with such a sum that run longer than one strip, are stripped.

tanh is staged the same way (``ember_tanh_block``: an odd polynomial below 0.75, 1 - 2/(exp(2|x|)+1)
above, on ``ember_exp8`` with AVX2+FMA, on 16 lanes with ``ember_exp16`` on AVX-512 CPUs: the same
results): GELU(tanh)'s forward and backward kernels in nanoGPT are bound by it. Its unstaged call stays libmvec's ``tanhf``.

Only kernels walking at least ``config.strip_min_work`` elements per call are stripped (in
``KernelGen._finish``): a stripped loop is three loops for g++ to compile, and at the benchmark
suite's sizes it gained nothing measurable while an LSTM training graph's cold compile took
0.5-0.8 s longer (AVX-512); loops that call exp or tanh are staged from ``config.strip_exp_min_work``.

On AVX2+FMA CPUs (no AVX-512) the same polynomial runs on 8 lanes (``ember_exp8``: the scaling
by 2^n an integer add to the exponent field where the result is normal, else in two
exact-then-one-rounding steps instead of ``vscalefps``, so its results equal ``ember_exp16``'s
bit for bit; x <= -104, a masked score, gives 0 without the subnormal products that cost a
microcode assist each). Measured on the AVX2 EPYC (2 vCPUs): glibc's AVX2 ``expf`` with
the tiny-result wrapper costs ~0.46 ns per element, one thread, L1-resident; nanoGPT's causal
softmax kernel (8x4x128x128) spent ~75% of its 0.9 ms in it. Without either
(``__AVX512F__``/``__AVX2__`` undefined) ``ember_expf`` is the libmvec-based function and
``ember_exp_block`` a loop of it, so staged code compiles everywhere; ember stages exp only
where the host has AVX-512 or AVX2+FMA and the flags say ``-march=native``
(``exp_staging_enabled``).
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

from .. import config

VEXP_HELPERS = r'''
#if defined(__AVX2__) && defined(__FMA__)
// ember_exp16's routine (below) on 8 lanes for AVX2+FMA CPUs (no vscalefps), every result equal to
// ember_exp16's bit for bit. n = round(x log2 e) by one FMA onto 1.5 * 2^23 (EMBER_EXP_SHIFT: the
// sum's low mantissa bits are then n, rounded to nearest even), so p * 2^n can be p's exponent
// field plus n -- exact while the result is a normal float, which for every lane with x in
// [-86.5, 87.9] it is. Lanes with x <= -104 (-inf: a causal softmax's masked half) give 0, as
// the clamped routine does: computing them made subnormal products, each a microcode assist,
// ~4x the cost per vector. Any other lane (a subnormal or overflowing result, NaN) sends the
// vector to ember_exp8_clamped: x clamped to [-104, 89], then p * 2^n as (p * 2^(n>>1)) *
// 2^(n - (n>>1)) -- both factors normal floats built from their exponent bits, the first product
// exact (p is in [0.7, 1.42]), the second rounding once, subnormal results included. NaN times
// anything is NaN there, whatever the integer conversion made of n. On the AVX2 EPYC, one
// thread, in L1: 0.31 ns per element against 0.38 for the clamped routine alone (its
// vroundps/vcvtps2dq and two multiplies), 0.30 against 1.2 for all -inf.
// Checked over all 2^32 floats: at most 0.909 ulp from exp (as the mul-and-round version was).
#define EMBER_EXP_SHIFT 12582912.0f
#define EMBER_EXP_POLY8(r) \
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0.001381461275741458f), r, _mm256_set1_ps(0.008368710055947304f)); \
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.04166838899254799f)); \
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.1666652113199234f)); \
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.4999999403953552f)); \
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f)); \
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
// (t, n, r and p of x, shared by the two paths)
#define EMBER_EXP_REDUCE8(x) \
    const __m256 shift = _mm256_set1_ps(EMBER_EXP_SHIFT); \
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shift); \
    const __m256 n = _mm256_sub_ps(t, shift); \
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x); \
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r); \
    EMBER_EXP_POLY8(r)
// p * 2^n by the exponent field: exact for a normal result
#define EMBER_EXP_SCALE8 \
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(t), 23)))
static __attribute__((noinline)) __m256 ember_exp8_clamped(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    EMBER_EXP_REDUCE8(x)
    const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(shift));
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
static inline __m256 ember_exp8(__m256 x) {
    const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LE_OQ);
    const __m256 normal = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-86.5f), _CMP_GE_OQ),
                                        _mm256_cmp_ps(x, _mm256_set1_ps(87.9f), _CMP_LE_OQ));
    if (__builtin_expect(_mm256_movemask_ps(_mm256_or_ps(zero, normal)) != 0xFF, 0))
        return ember_exp8_clamped(x);
    EMBER_EXP_REDUCE8(x)
    return _mm256_andnot_ps(zero, EMBER_EXP_SCALE8);
}
// exp of v in [0, 20] (tanh's e^(2|x|), clamped): every result normal, so no range test. A NaN v
// gives garbage here; ember_tanh8 selects its other branch for NaN.
static inline __m256 ember_exp8_pos(__m256 v) {
    EMBER_EXP_REDUCE8(v)
    return EMBER_EXP_SCALE8;
}
#endif
#if defined(__AVX512F__)
// exp of 16 floats: x clamped to [-104, 89] (max/min return their second operand when one
// is NaN, so NaN passes), x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts), e^r by a
// degree-6 polynomial, p * 2^n by vscalefps (one rounding, subnormals and overflow included).
static inline __m512 ember_exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    // n = round(x log2 e) by one FMA onto 1.5 * 2^23, as ember_exp8 does (the same n, so the same bits)
    const __m512 shift = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shift), shift);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.001381461275741458f), r, _mm512_set1_ps(0.008368710055947304f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.04166838899254799f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.1666652113199234f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.4999999403953552f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
// ember_expf for loops GCC vectorises itself: vector-ABI clones for each ISA letter it may pick
// (SSE b, AVX c, AVX2 d, AVX-512 e), all through ember_exp16, and the scalar symbol (remainder
// iterations) as an assembler alias -- a C definition would make GCC generate clones of its own
extern "C" {
#pragma omp declare simd notinbranch
__attribute__((visibility("hidden"))) float ember_expf(float);
__attribute__((visibility("hidden"), used)) float ember_expf_scalar(float x) {
    return _mm512_cvtss_f32(ember_exp16(_mm512_set1_ps(x)));
}
__attribute__((visibility("hidden"))) __m512 _ZGVeN16v_ember_expf(__m512 x) { return ember_exp16(x); }
__attribute__((visibility("hidden"))) __m256 _ZGVdN8v_ember_expf(__m256 x) {
    return _mm512_castps512_ps256(ember_exp16(_mm512_castps256_ps512(x)));
}
__attribute__((visibility("hidden"))) __m256 _ZGVcN8v_ember_expf(__m256 x) {
    return _mm512_castps512_ps256(ember_exp16(_mm512_castps256_ps512(x)));
}
__attribute__((visibility("hidden"))) __m128 _ZGVbN4v_ember_expf(__m128 x) {
    return _mm512_castps512_ps128(ember_exp16(_mm512_castps128_ps512(x)));
}
}
__asm__(".globl ember_expf\n\t.hidden ember_expf\n\t.set ember_expf, ember_expf_scalar");
// exp in place over a staged strip (n <= a few hundred), inlined: the tail is one masked vector
static inline void ember_exp_block(float* t, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(t + i, ember_exp16(_mm512_loadu_ps(t + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(t + i, m, ember_exp16(_mm512_maskz_loadu_ps(m, t + i)));
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
extern "C" {
#pragma omp declare simd notinbranch
__attribute__((visibility("hidden"))) float ember_expf(float);
__attribute__((visibility("hidden"), used)) float ember_expf_scalar(float x) {
    return _mm256_cvtss_f32(ember_exp8(_mm256_set1_ps(x)));
}
__attribute__((visibility("hidden"))) __m256 _ZGVdN8v_ember_expf(__m256 x) { return ember_exp8(x); }
__attribute__((visibility("hidden"))) __m256 _ZGVcN8v_ember_expf(__m256 x) { return ember_exp8(x); }
__attribute__((visibility("hidden"))) __m128 _ZGVbN4v_ember_expf(__m128 x) {
    return _mm256_castps256_ps128(ember_exp8(_mm256_castps128_ps256(x)));
}
}
__asm__(".globl ember_expf\n\t.hidden ember_expf\n\t.set ember_expf, ember_expf_scalar");
// exp in place over a staged strip, inlined: the tail is one masked vector
static inline void ember_exp_block(float* t, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(t + i, ember_exp8(_mm256_loadu_ps(t + i)));
    if (i < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(t + i, m, ember_exp8(_mm256_maskload_ps(t + i, m)));
    }
}
#else
// exp without libmvec's scalar fallback for tiny results. glibc's vector expf hands every lane
// whose result is denormal or zero (x < ln FLT_MIN: softmax's masked -inf scores, half of a
// causal attention matrix) to scalar expf, one call per lane -- measured, nanoGPT's softmax
// kernel spent 68% of its time in expf. Such lanes are computed in range instead: the input
// clamped (every x below the clamp gives 0 anyway) and shifted, the result scaled back, so a
// vector needs one expf call. Error there: half a denormal ulp plus expf's and e^-25's relative
// error times the value (about 2 denormal ulps near FLT_MIN; tested).
static inline float ember_expf(float x) {
    const bool tiny = x < -87.33654f;                           // below ln(FLT_MIN); false for NaN
    const float lo = x > -104.0f ? x : -104.0f;                 // (a max; x is no NaN where used)
    const float e = expf(ember_sel(tiny, lo + 25.0f, x));
    return e * ember_sel(tiny, 1.38879439e-11f, 1.0f);           // e^-25, or exactly 1
}
static inline void ember_exp_block(float* t, int64_t n) {     // (vectorised by -O3 through libmvec)
    for (int64_t i = 0; i < n; ++i) t[i] = ember_expf(t[i]);
}
#endif
// tanh. Called in a loop it is libmvec's vector tanhf (ember's routine through the vector ABI,
// constants re-broadcast per call, measured no faster); in staged strips (cpp_strips) ember's
// 8-lane routine runs inlined: ~40 instructions per 8 values against ~65 plus the call.
static inline float ember_tanhf(float x) { return tanhf(x); }
#if defined(__AVX512F__)
// ember_tanh8's steps (below) on 16 lanes with ember_exp16 (whose results equal ember_exp8's bit
// for bit; the division is IEEE), so the results are ember_tanh8's too. Measured on the AVX-512
// EPYC (Zen 4, 512-bit ops in two halves): 0.54 ns per element against 0.83 on 8 lanes.
static inline __m512 ember_tanh16(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 ax = _mm512_andnot_ps(sign, x);
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.0017369433771818876f), z, _mm512_set1_ps(-0.007657268084585667f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.02145204320549965f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-0.05389272794127464f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(0.1333269476890564f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-0.33333316445350647f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), ax, ax);
    const __m512 e = ember_exp16(_mm512_min_ps(_mm512_set1_ps(20.0f), _mm512_add_ps(ax, ax)));
    const __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    const __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.75f), _CMP_NGE_UQ), big, small);
    return _mm512_or_ps(r, _mm512_and_ps(x, sign));
}
static inline void ember_tanh_block(float* t, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(t + i, ember_tanh16(_mm512_loadu_ps(t + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(t + i, m, ember_tanh16(_mm512_maskz_loadu_ps(m, t + i)));
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
// tanh of 8 floats (AVX2+FMA), on |x| with x's sign put back (tanh is odd; -0 stays -0):
// |x| < 0.75 by |x| + |x|^3 P(x^2) (degree 5 in x^2, fitted for relative error; 0.79 ulp in
// float32), otherwise 1 - 2 / (exp(2|x|) + 1) (t <= 0.37 there, so exp's ~1 ulp error is under
// half an ulp of the result). 2|x| is clamped to 20, which gives exactly 1 for every |x| >= 10
// (as any |x| above 9.01 does), so exp's argument is in [0, 20] and ember_exp8_pos needs no range
// test: 0.70 ns per element against 0.91 through the general ember_exp8 (AVX2 EPYC, one thread,
// in L1), the same bits. A NaN x takes the polynomial branch (the unordered "not >= 0.75"), so
// NaN stays NaN. Checked over every float against double tanh: at most 1.06 ulp (glibc's
// tanhf, which unstaged loops call: within 2).
static inline __m256 ember_tanh8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0.0017369433771818876f), z, _mm256_set1_ps(-0.007657268084585667f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.02145204320549965f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.05389272794127464f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.1333269476890564f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.33333316445350647f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
    const __m256 e = ember_exp8_pos(_mm256_min_ps(_mm256_set1_ps(20.0f), _mm256_add_ps(ax, ax)));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.75f), _CMP_NGE_UQ));
    return _mm256_or_ps(r, _mm256_and_ps(x, sign));
}
static inline void ember_tanh_block(float* t, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(t + i, ember_tanh8(_mm256_loadu_ps(t + i)));
    if (i < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(t + i, m, ember_tanh8(_mm256_maskload_ps(t + i, m)));
    }
}
#else
static inline void ember_tanh_block(float* t, int64_t n) {     // (vectorised through libmvec)
    for (int64_t i = 0; i < n; ++i) t[i] = tanhf(t[i]);
}
#endif
'''

_host_avx512: List[bool] = []


def exp_staging_enabled() -> bool:
    """Whether ``strip_loops`` stages exp: loops are stripped, and the kernels are built for
    this host (``-march=native``) and this host has AVX-512F, or AVX2 and FMA (``ember_exp8``)."""
    if not (config.strip_loops and config.simd) or "-march=native" not in config.cpp_flags:
        return False
    if not _host_avx512:
        ok = False
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = line.split()
                        ok = "avx512f" in flags or ("avx2" in flags and "fma" in flags)
                        break
        except OSError:
            pass
        _host_avx512.append(ok)
    return _host_avx512[0]


_FOR = re.compile(r"^(\s*)for \(int64_t (\w+) = (.+); \2 < (.+); \+\+\2\) \{$")
_DEF = re.compile(r"^\s*(?:const )?([\w:<>]+) ([A-Za-z_]\w*) = (.*);$")
_EXP = re.compile(r"^(\s*)float (tmp\d+) = ember_(exp|tanh)f\((tmp\d+)\);$")
_STORE = re.compile(r"^\s*([A-Za-z_]\w*)\[.*\] = .*;$")
_ASSIGN = re.compile(r"^\s*(tmp\d+) (?:[-+*/|&^]?=) (.*);$")
_SUM = re.compile(r"^(\s*)(tmp\d+) = \2 \+ (tmp\d+);$")
_TOKEN = re.compile(r"[A-Za-z_]\w*")
_REDUCTION = re.compile(r"reduction\([^)]*\)")


def strip_loops(lines: List[str], stage_exp: bool, exp_only: bool = False) -> List[str]:
    """The kernel body ``lines`` with its SIMD loops stripped (module docstring): those calling
    ``ember_expf`` when ``stage_exp``, and those adding floats into a double sum (unless
    ``exp_only``: then only loops that call exp). Only flat loops of the form ember's generator
    writes are touched: a pragma with ``simd``, one ``for`` over one variable, straight-line
    statements, the closing brace."""
    if not (config.strip_loops and config.simd):
        return lines
    out: List[str] = []
    i = 0
    n = len(lines)
    while i < n:
        ln = lines[i]
        st = ln.strip()
        if st.startswith("#pragma omp") and "simd" in st.split() and "collapse" not in st and i + 1 < n:
            m = _FOR.match(lines[i + 1])
            if m:
                ind = m.group(1)
                j = i + 2
                while j < n and lines[j] != ind + "}":
                    j += 1
                if j < n:
                    staged = _strip_loop(st, m, lines[i + 2:j], lines[:i], stage_exp, exp_only)
                    if staged is not None:
                        out.extend(staged)
                        i = j + 1
                        continue
        out.append(ln)
        i += 1
    return out


def _strip_loop(pragma: str, m, body: List[str], before: List[str], stage_exp: bool,
                exp_only: bool = False) -> Optional[List[str]]:
    ind, v, lo, hi = m.group(1), m.group(2), m.group(3), m.group(4)
    if any(("{" in b or "}" in b or b.strip().startswith("#") or not b.rstrip().endswith(";"))
           and not b.strip().startswith("//") for b in body):
        return None
    defs: Dict[str, int] = {}
    for k, b in enumerate(body):
        d = _DEF.match(b)
        if d:
            defs[d.group(2)] = k
    stored = {s.group(1) for s in map(_STORE.match, body) if s}
    assigned = {a.group(1) for a in map(_ASSIGN.match, body) if a and a.group(1) not in defs}
    exps = []           # (line index, result name, argument name, cone line indices, function)
    for k, b in enumerate(body):
        e = _EXP.match(b) if stage_exp else None
        if not e:
            continue
        cone = _cone(e.group(4), defs, body)
        if any(_EXP.match(body[c]) for c in cone):
            continue     # the argument needs another exp: this one stays a call
        toks = {t for c in cone for t in _TOKEN.findall(body[c])} | {e.group(4)}
        if toks & (stored | assigned):
            continue     # the argument reads what this body writes: not before the writes
        exps.append((k, e.group(2), e.group(4), cone, e.group(3)))
    # a double sum of float values: one float partial per strip, added into the double after it
    partial = _float_partials(pragma, body, before)
    S = config.strip_loops
    if exp_only and not exps:
        return None
    if not exps and (not partial or (lo.isdigit() and hi.isdigit() and int(hi) - int(lo) <= S)):
        return None
    vs, vt = f"{v}s", f"{v}t"
    out: List[str] = []
    if pragma.startswith("#pragma omp parallel"):
        out.append(ind + pragma.replace(" simd", "", 1))
    out.append(f"{ind}for (int64_t {vs} = {lo}; {vs} < {hi}; {vs} += {S}) {{")
    i2, i3 = ind + "    ", ind + "        "
    out.append(f"{i2}const int64_t {vt} = std::min<int64_t>({vs} + {S}, {hi});")
    if exps:
        for _, res, *_ in exps:
            out.append(f"{i2}alignas(64) float {res}_s[{S}];")
        out.append(f"{i2}#pragma omp simd")
        out.append(f"{i2}for (int64_t {v} = {vs}; {v} < {vt}; ++{v}) {{")
        for c in sorted(set().union(*(cone for _, _, _, cone, _ in exps))):
            out.append("    " + body[c])
        for _, res, arg, *_ in exps:
            out.append(f"{i3}{res}_s[{v} - {vs}] = {arg};")
        out.append(f"{i2}}}")
        for _, res, _, _, fn in exps:
            out.append(f"{i2}ember_{fn}_block({res}_s, {vt} - {vs});")
    inner = []
    for c in _REDUCTION.findall(pragma):
        for acc, p in partial.items():
            c = c.replace(f"+:{acc})", f"+:{p})")
        inner.append(c)
    for acc, p in partial.items():
        out.append(f"{i2}float {p} = 0.0f;")
    out.append(f"{i2}#pragma omp simd" + (" " + " ".join(inner) if inner else ""))
    out.append(f"{i2}for (int64_t {v} = {vs}; {v} < {vt}; ++{v}) {{")
    staged = {k: res for k, res, *_ in exps}
    for k, b in enumerate(body):
        if k in staged:
            out.append(f"{i3}float {staged[k]} = {staged[k]}_s[{v} - {vs}];")
            continue
        s = _SUM.match(b)
        if s and s.group(2) in partial:
            p = partial[s.group(2)]
            out.append(f"{i3}{p} = {p} + {s.group(3)};")
            continue
        out.append("    " + b)
    out.append(f"{i2}}}")
    for acc, p in partial.items():
        out.append(f"{i2}{acc} = {acc} + static_cast<double>({p});")
    out.append(f"{ind}}}")
    return out


def _float_partials(pragma: str, body: List[str], before: List[str]) -> Dict[str, str]:
    """The double sums of ``body`` that can add float values into a float partial first: each
    accumulator declared ``double`` before the loop, updated once, by a float temporary of the
    body, and named in the pragma's ``+`` reduction. Accumulator -> partial's name."""
    defs = {d.group(2): k for k, d in ((k, _DEF.match(b)) for k, b in enumerate(body)) if d}
    clauses = " ".join(_REDUCTION.findall(pragma)).replace(" ", "")
    partial = {}
    for b in body:
        s = _SUM.match(b)
        if s and _declared(before, s.group(2), "double") and s.group(3) in defs \
                and sum(s.group(2) in _TOKEN.findall(x) for x in body) == 1 \
                and _DEF.match(body[defs[s.group(3)]]).group(1) == "float" \
                and f"+:{s.group(2)})" in clauses:
            partial[s.group(2)] = f"{s.group(2)}_p"
    return partial


_COLLAPSE = re.compile(r" collapse\((\d+)\)")
# an inner extent this small leaves the simd loop too short to gain from its float partials
_MIN_PARTIAL_EXTENT = 64


def collapsed_partial_sums(lines: List[str]) -> List[str]:
    """Double sums in ``#pragma omp simd collapse(k)`` reduction nests (a batch norm's per-channel
    sums over N, H and W) with float partials per iteration of the outermost loop.

    Why. A float32 sum accumulates in double (``cpp._acc_type``); in a collapsed nest every
    element pays a conversion and a double add per sum -- batch norm's backward runs four sums in
    one loop (``_sibling_sums``), ~2.4x slower than float adds (32 channels of 32x32x32: 0.20 ->
    0.083 ms on two threads, AVX-512). ``strip_loops`` skips collapsed nests. Here the outermost
    loop is taken out of the collapse: its inner nest, a compile-time extent of 64 to
    ``config.strip_loops`` elements, sums into float partials (16 SIMD lanes: ~extent/16 + 4 eps
    worst case, as a strip's), added into the doubles after it. Not for parallel pragmas (the
    outer loop's iterations would lose their threads); the nest keeps its loops, so g++'s work is
    the same (unlike strips, done at every kernel size)."""
    if not (config.strip_loops and config.simd):
        return lines
    out: List[str] = []
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        st = ln.strip()
        m = _COLLAPSE.search(st)
        if m and st.startswith("#pragma omp simd") and "reduction(+:" in st and int(m.group(1)) >= 2:
            rewritten = _collapsed_partials(lines, i, int(m.group(1)))
            if rewritten is not None:
                new, i = rewritten
                out.extend(new)
                continue
        out.append(ln)
        i += 1
    return out


def _collapsed_partials(lines: List[str], i: int, k: int):
    """(rewritten lines, index after the nest) for the collapse(k) pragma at ``lines[i]``, or None."""
    fors = [_FOR.match(lines[i + 1 + d]) if i + 1 + d < len(lines) else None for d in range(k)]
    if not all(fors):
        return None
    ind = fors[0].group(1)
    if any(f.group(1) != ind + "    " * d for d, f in enumerate(fors)):
        return None
    extent = 1
    for f in fors[1:]:
        lo, hi = f.group(3), f.group(4)
        if not (lo.isdigit() and hi.isdigit()):
            return None
        extent *= int(hi) - int(lo)
    if not _MIN_PARTIAL_EXTENT <= extent <= config.strip_loops:
        return None
    start = i + 1 + k
    close = [ind + "    " * d + "}" for d in reversed(range(k))]
    j = start
    while j < len(lines) and lines[j] != close[0]:
        j += 1
    if lines[j:j + k] != close:
        return None
    body = lines[start:j]
    if any(("{" in b or "}" in b or b.strip().startswith("#") or not b.rstrip().endswith(";"))
           and not b.strip().startswith("//") for b in body):
        return None
    pragma = lines[i].strip()
    partial = _float_partials(pragma, body, lines[:i])
    if not partial:
        return None
    inner = _COLLAPSE.sub(f" collapse({k - 1})" if k > 2 else "", pragma)
    for acc, p in partial.items():
        inner = inner.replace(f"+:{acc})", f"+:{p})")
    i2 = ind + "    "
    out = [lines[i + 1]]
    out += [f"{i2}float {p} = 0.0f;" for p in partial.values()]
    out.append(i2 + inner)
    out += lines[i + 2:start]
    for b in body:
        s = _SUM.match(b)
        out.append(f"{s.group(1)}{partial[s.group(2)]} = {partial[s.group(2)]} + {s.group(3)};"
                   if s and s.group(2) in partial else b)
    out += close[:-1]
    out += [f"{i2}{acc} = {acc} + static_cast<double>({p});" for acc, p in partial.items()]
    out.append(close[-1])
    return out, j + k


def _cone(name: str, defs: Dict[str, int], body: List[str]) -> Set[int]:
    """Indices of the body's definitions ``name`` depends on (itself included)."""
    cone: Set[int] = set()
    todo = [name]
    while todo:
        t = todo.pop()
        k = defs.get(t)
        if k is None:
            continue          # defined before the loop (hoisted), or not a temporary
        if k in cone:
            continue
        cone.add(k)
        todo.extend(_TOKEN.findall(_DEF.match(body[k]).group(3)))
    return cone


def _declared(before: List[str], name: str, typ: str) -> bool:
    pat = re.compile(rf"^\s*{typ} {name} = ")
    return any(pat.match(b) for b in reversed(before))
