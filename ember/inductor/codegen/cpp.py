"""C++/OpenMP code generation for the CPU.

One C++ source per graph: a prelude (half-precision conversions, integer
helpers with the prims' semantics, ``#pragma omp declare simd`` declarations
of the libm functions so GCC calls glibc's vector math library ``libmvec``
for them -- vectorised ``expf``/``tanhf``/``erff``/``logf`` under strict IEEE
flags, no ``-ffast-math``), then one ``extern "C"`` function per fused group.

Loop structure of a group (see ``scheduler.py``): the outer loops over ``P``
carry ``#pragma omp parallel for collapse(k) if(work > threshold)``; each
stage's inner loop carries ``#pragma omp simd`` (with a ``reduction`` clause
for reductions). A group with no inner loops puts ``simd`` on its innermost
outer loop instead. float16/bfloat16 are loaded into float, computed in
float and rounded once when stored.
"""
from __future__ import annotations

import itertools
import math
import os
import re
from typing import Dict, List

import numpy as np
import sympy

from ... import types as _t
from ...ops import _erfinv_cpp
from .. import config, ir
from .cpp_stream import stream_flat_stores
from .cpp_strips import VEXP_HELPERS, collapsed_partial_sums, exp_staging_enabled, strip_loops
from ..ir import index_vars
from ..sizevars import FloorDiv, ModularIndexing, cexpr, contiguous_strides, product, simplify_index, sympify
from ..virtualized import set_ops_handler

# bool tensors are stored as bytes (numpy's layout) and read as ``byte != 0``: the loops g++ 12
# vectorises from loads typed ``bool`` ran 4.4x slower (nanoGPT's masked softmax kernel, the
# same loops with the byte load; tests/inductor/test_bool_bytes.py), and a byte other than 0/1
# (a uint8 buffer viewed as bool) read as bool is undefined, where numpy reads it as True
STORAGE = {
    _t.bool_: "uint8_t", _t.uint8: "uint8_t", _t.int8: "int8_t", _t.int16: "int16_t", _t.int32: "int32_t",
    _t.int64: "int64_t", _t.float16: "_Float16", _t.bfloat16: "uint16_t", _t.float32: "float",
    _t.float64: "double",
}
COMPUTE = dict(STORAGE)
COMPUTE[_t.bool_] = "bool"
COMPUTE[_t.float16] = "float"
COMPUTE[_t.bfloat16] = "float"

# libm functions with vector variants in glibc's libmvec (2.35+), by prim name
MVEC = ("exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh "
        "atanh erf erfc").split()
MVEC2 = ("pow", "atan2")
# a per-element call of a math routine in a loop body (libmvec's, or ember's wrappers of it)
_PER_ELEMENT_MATH = re.compile(r"\b(?:ember_)?(?:" + "|".join(MVEC + list(MVEC2)) + r")f?(?:_fp)?\(")

PRELUDE = r'''
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <type_traits>

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

// n floats from a cache-resident staging row to dst with non-temporal stores: a big output
// row goes to memory without first being read into cache (no read-for-ownership: a third
// less traffic than a store loop) and without evicting the inputs. ember_stream_fence makes
// the stores visible to other threads in order with later stores: once per row, after its
// last strip (a fence per strip made a 1000x16000 softmax 1.5x slower with 4 KB strips, 2.2x with 1 KB).
static inline void ember_stream_part(float* dst, const float* src, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 63); ++i) dst[i] = src[i];
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
    for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31); ++i) dst[i] = src[i];
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
    for (; i < n; ++i) dst[i] = src[i];
}
static inline void ember_stream_fence() {
#if defined(__AVX512F__) || defined(__AVX__)
    _mm_sfence();
#endif
}
static inline void ember_stream_f32(float* dst, const float* src, int64_t n) {
    ember_stream_part(dst, src, n);
    ember_stream_fence();
}

// the data pointer of a numpy array object: PyArrayObject_fields.data follows PyObject_HEAD
#define EMBER_DATA(o) (*reinterpret_cast<void**>(reinterpret_cast<char*>(o) + EMBER_DATA_OFFSET))

// where(c, a, b) for floating values as a bitwise blend (vectorises where ?: does not)
static inline float ember_sel(bool c, float a, float b) {
    uint32_t ia, ib; std::memcpy(&ia, &a, 4); std::memcpy(&ib, &b, 4);
    const uint32_t m = -(uint32_t)c; const uint32_t r = (ia & m) | (ib & ~m);
    float f; std::memcpy(&f, &r, 4); return f;
}
static inline double ember_sel(bool c, double a, double b) {
    uint64_t ia, ib; std::memcpy(&ia, &a, 8); std::memcpy(&ib, &b, 8);
    const uint64_t m = -(uint64_t)c; const uint64_t r = (ia & m) | (ib & ~m);
    double f; std::memcpy(&f, &r, 8); return f;
}
static inline float ember_bf16_to_f32(uint16_t v) {
    uint32_t u = ((uint32_t)v) << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t ember_f32_to_bf16(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                            // round to nearest even
    return (uint16_t)(u >> 16);
}
static inline float ember_bf16_round(float f) { return ember_bf16_to_f32(ember_f32_to_bf16(f)); }
static inline float ember_f16_round(float f) { return (float)(_Float16)f; }

// a kernel's run-time error, read and cleared by the wrapper after the call (ember_take_index_error):
// 1 an index out of range (IndexError, as the eager prim), 2 an integer division by zero
// (RuntimeError "ZeroDivisionError", as eager and PyTorch); the result computed there is 0
static int ember_index_error = 0;
static inline void ember_flag_error(int code) { __atomic_store_n(&ember_index_error, code, __ATOMIC_RELAXED); }
static inline void ember_flag_index_error() { ember_flag_error(1); }
template <typename T> static inline T ember_div_trunc(T a, T b) {
    if (b == 0) { ember_flag_error(2); return 0; }
    if (std::is_signed<T>::value && b == (T)-1) return (T)(-a);
    return (T)(a / b);
}
template <typename T> static inline T ember_floordiv_int(T a, T b) {
    if (b == 0) { ember_flag_error(2); return 0; }
    if (std::is_signed<T>::value && b == (T)-1) return (T)(-a);
    T q = (T)(a / b), r = (T)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> static inline T ember_remainder_int(T a, T b) {
    if (b == 0) { ember_flag_error(2); return 0; }
    if (std::is_signed<T>::value && b == (T)-1) return 0;
    T r = (T)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> static inline T ember_fmod_int(T a, T b) {
    if (b == 0) { ember_flag_error(2); return 0; }
    if (std::is_signed<T>::value && b == (T)-1) return 0;
    return (T)(a % b);
}
// C pow. GCC's vectoriser turns pow(x, 0.5) with a constant exponent into sqrt(x), so that in
// vectorised lanes (-inf) ** 0.5 was NaN and (-0.0) ** 0.5 was -0.0 (the scalar tail: +inf,
// +0.0): those lanes are set to C's values (a no-op where pow ran)
static inline float ember_pow_fp(float a, float b) {
    const float r = powf(a, b), inf = std::numeric_limits<float>::infinity();
    return ember_sel(b == 0.5f && (a == 0 || a == -inf), ember_sel(a == 0, 0.0f, inf), r);
}
static inline double ember_pow_fp(double a, double b) {
    const double r = pow(a, b), inf = std::numeric_limits<double>::infinity();
    return ember_sel(b == 0.5 && (a == 0 || a == -inf), ember_sel(a == 0, 0.0, inf), r);
}
template <typename T> static inline T ember_pow_int(T base, T exp) {
    typedef typename std::make_unsigned<T>::type U;
    U result = 1, b = (U)base;
    uint64_t e = (uint64_t)exp;
    if (exp < 0) return 0;
    while (e) { if (e & 1) result = (U)(result * b); b = (U)(b * b); e >>= 1; }
    return (T)result;
}
template <typename T> static inline T ember_shl(T a, T b) {
    typedef typename std::make_unsigned<T>::type U;
    const int bits = sizeof(T) * 8;
    if (b < 0 || (int64_t)b >= bits) return 0;
    return (T)((U)a << b);
}
template <typename T> static inline T ember_shr(T a, T b) {
    const int bits = sizeof(T) * 8;
    if (b < 0 || (int64_t)b >= bits) return a < 0 ? (T)-1 : (T)0;
    return (T)(a >> b);
}
template <typename T> static inline T ember_floordiv_fp(T a, T b) {
    // PyTorch's div_floor: floor(a / b) from fmod so that it is exact
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    T fl;
    if (div != 0) { fl = std::floor(div); if (div - fl > (T)0.5) fl += 1; }
    else fl = std::copysign((T)0, a / b);
    return fl;
}
template <typename T> static inline T ember_remainder_fp(T a, T b) {
    T m = std::fmod(a, b);          // a zero keeps fmod's sign (the dividend's), as PyTorch
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
}
// (0 < x) - (x < 0), as PyTorch: NaN and -0.0 give +0
template <typename T> static inline T ember_sign_fp(T x) {
    return static_cast<T>((x > 0) - (x < 0));
}
// NaN-propagating maximum/minimum (a NaN wins, the first if both) as bitwise blends: the ?:
// chain was left as branches in reduction loops (a ReLU summed by a pooling: one
// mispredicted branch per element, scalar code), the blends vectorise
template <typename T> static inline T ember_max_fp(T a, T b) {
    return ember_sel(a > b || a != a, a, b);     // b when b alone is NaN: a > b is false
}
template <typename T> static inline T ember_min_fp(T a, T b) {
    return ember_sel(a < b || a != a, a, b);
}
@ERFINV_CPP@
static inline double ember_lgamma(double x) { int s; return lgamma_r(x, &s); }

extern "C" int ember_take_index_error() {
    return __atomic_exchange_n(&ember_index_error, 0, __ATOMIC_RELAXED);
}

// Philox 4x32-10, the stream of ember.prims.philox_rand / philox_randn (bit-exact)
static inline void ember_philox4x32(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3,
                                    uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
        const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
        c1 = static_cast<uint32_t>(p1); c3 = static_cast<uint32_t>(p0); c0 = n0; c2 = n2;
    }
}
static inline double ember_philox_uniform(int64_t seed, int64_t offset, int64_t i, int bits) {
    const uint64_t s = static_cast<uint64_t>(seed);
    const uint64_t b = static_cast<uint64_t>(offset) + static_cast<uint64_t>(i >> 2);
    uint32_t c0 = static_cast<uint32_t>(b), c1 = static_cast<uint32_t>(b >> 32), c2 = 0, c3 = 0;
    ember_philox4x32(c0, c1, c2, c3, static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
    const int lane = static_cast<int>(i & 3);
    const uint32_t u = lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
    return static_cast<double>(bits >= 32 ? u : (u >> (32 - bits))) * std::ldexp(1.0, -bits);
}
static inline double ember_philox_normal(int64_t seed, int64_t offset, int64_t i) {
    const uint64_t s = static_cast<uint64_t>(seed);
    const uint64_t b = static_cast<uint64_t>(offset) + static_cast<uint64_t>(i >> 1);
    uint32_t c0 = static_cast<uint32_t>(b), c1 = static_cast<uint32_t>(b >> 32), c2 = 0, c3 = 0;
    ember_philox4x32(c0, c1, c2, c3, static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
    const bool hi = (i & 1) != 0;
    const double u1 = static_cast<double>(hi ? c2 : c0), u2 = static_cast<double>(hi ? c3 : c1);
    const double two_pi_2m32 = 2.0 * 3.141592653589793 * 2.3283064365386963e-10;
    return std::sqrt(-2.0 * std::log((u1 + 1.0) * 2.3283064365386963e-10)) * std::cos(two_pi_2m32 * u2);
}
'''
# erfinv: the eager native loop's branch-free series (ops/_erfinv_cpp.py), so compiled and eager
# erfinv give the same bits (float compute: the float32 variant; double: the float64 one)
PRELUDE = PRELUDE.replace("@ERFINV_CPP@", _erfinv_cpp.SOURCE)


def simd_declarations() -> str:
    lines = ['extern "C" {']
    for f in MVEC:
        lines.append(f"#pragma omp declare simd notinbranch\nfloat {f}f(float);")
        lines.append(f"#pragma omp declare simd notinbranch\ndouble {f}(double);")
    for f in MVEC2:
        lines.append(f"#pragma omp declare simd notinbranch\nfloat {f}f(float, float);")
        lines.append(f"#pragma omp declare simd notinbranch\ndouble {f}(double, double);")
    lines.append("}")
    return "\n".join(lines)



def _has_indirect(idx) -> bool:
    """The index uses a data-dependent position (``indirect<k>``, ir.indirect_indexing)."""
    return any(str(v).startswith("indirect") for v in getattr(idx, "free_symbols", ()))

class CppVar:
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name = name
        self.dtype = dtype

    def __str__(self):
        return self.name


def c_literal(value, dtype) -> str:
    ct = COMPUTE[dtype]
    if dtype is _t.bool_:
        return "true" if value else "false"
    if dtype.category == 1:
        v = int(value)
        return f"static_cast<{ct}>({v}LL)" if abs(v) >= 2 ** 31 else f"static_cast<{ct}>({v})"
    v = float(value)
    if math.isnan(v):
        return f"std::numeric_limits<{ct}>::quiet_NaN()"
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}std::numeric_limits<{ct}>::infinity()"
    r = repr(v)
    if "e" not in r and "." not in r and "inf" not in r:
        r += ".0"
    return f"{r}f" if ct == "float" else r


_IDENT = re.compile(r"[A-Za-z_]\w*")
_TMP = re.compile(r"tmp\d+")
_LOOPISH = re.compile(r"[a-z]+\d+")


class CppOps:
    """The ops handler that writes C++ statements into ``self.lines``."""

    def __init__(self, kernel, lines: List[str], indent: str, hoist=None, ranges=None, written_inside=()):
        self.kernel = kernel
        self.written_inside = frozenset(written_inside)   # buffers whose loads never hoist
        # loop variable -> (lo, hi): index expressions are simplified over these
        # (sizevars.simplify_index) before they are printed
        self.ranges = dict(ranges or {})
        for v, r in getattr(kernel, "overrides", {}).items():
            if v in self.ranges:
                self.ranges[v] = r
        self._sizes = {v: hi for v, (lo, hi) in self.ranges.items()}
        self.lines = lines
        self.indent = indent
        self.cse: Dict[str, CppVar] = {}
        self._hoisted = set()   # names of the values computed before the loop
        # (lines, indent, inner variable names): loads that do not depend on the inner
        # loop's variables go before it. Besides saving work, this matters for
        # vectorisation: inside an OpenMP-outlined region GCC loses the pointers'
        # __restrict__ and will not vectorise a loop that re-reads memory it may alias
        self.hoist = hoist

    def _emit(self, expr: str, dtype, hoistable=False) -> CppVar:
        v = self.cse.get(expr)
        if v is not None and v.dtype is dtype:
            return v
        name = self.kernel.new_tmp()
        if not hoistable and self.hoist is not None:
            hoistable = self._of_hoisted(expr, dtype)
        if hoistable and self.hoist is not None:
            hl, hind, _ = self.hoist
            hl.append(f"{hind}const {COMPUTE[dtype]} {name} = {expr};")
            self._hoisted.add(name)
        else:
            self.lines.append(f"{self.indent}{COMPUTE[dtype]} {name} = {expr};")
        v = CppVar(name, dtype)
        self.cse[expr] = v
        return v

    def _of_hoisted(self, expr: str, dtype) -> bool:
        """Whether ``expr`` is pure arithmetic over values already hoisted before the loop (loads
        of 0-d/invariant inputs, constants): then it is computed once there too. An optimizer's
        bias corrections (``pow`` of a step tensor) otherwise run once per element."""
        if "[" in expr or "philox" in expr or "flag" in expr:
            return False
        if dtype.category < 2 and ("/" in expr or "%" in expr or "div" in expr):
            return False   # integer division: never evaluate it where the loop would not run
        for tok in _IDENT.findall(expr):
            if _TMP.fullmatch(tok):
                if tok not in self._hoisted:
                    return False
            elif _LOOPISH.fullmatch(tok):
                return False   # loop variables, buffers, size symbols
        return True

    def _invariant(self, index) -> bool:
        if self.hoist is None:
            return False
        inner = self.hoist[2]
        for s in sympify(index).free_symbols:
            if s.name in inner or not (s.name[0] in "xs" and s.name[1:].isdigit()):
                return False
        return True

    # -- memory & constants ---------------------------------------------------
    def simplify(self, index):
        return simplify_index(index, self.ranges, self._sizes) if self.ranges else index

    def load(self, name, index):
        dtype = self.kernel.buffer_dtype(name)
        self.kernel.note_read(name)
        index = self.kernel.local_index(name, self.simplify(index))
        ref = self.kernel.tiles.get((name, index)) or f"{name}[{cexpr(index)}]"
        if dtype is _t.float16:
            ref = f"static_cast<float>({ref})"
        elif dtype is _t.bfloat16:
            ref = f"ember_bf16_to_f32({ref})"
        elif dtype is _t.bool_:
            ref = f"({ref} != 0)"             # a byte (see STORAGE)
        # a buffer written inside the loops the hoist goes before (a stage of the same loop
        # nest; a kernel-local buffer has index 0 there) holds no value yet at that point
        return self._emit(ref, dtype, hoistable=name not in self.written_inside and self._invariant(index))

    def constant(self, value, dtype):
        return self._emit(c_literal(value, dtype), dtype, hoistable=self.hoist is not None)

    def index_expr(self, expr, dtype):
        expr = self.simplify(expr)
        if expr is sympy.true or expr is sympy.false:
            # decided by the loop ranges: a literal, which ``where`` folds
            return CppVar("true" if expr is sympy.true else "false", _t.bool_) if dtype is _t.bool_ \
                else self._emit(f"static_cast<{COMPUTE[dtype]}>({int(bool(expr))})", dtype)
        e = cexpr(expr)
        if dtype is _t.bool_:
            return self._emit(f"static_cast<bool>({e})", dtype)
        return self._emit(f"static_cast<{COMPUTE[dtype]}>({e})", dtype)

    def indirect_indexing(self, x, size, wrap_negative=False):
        """A data-dependent index. Out of range (after wrapping negatives where the
        prim does) it raises the kernel's error flag -- the wrapper turns that into
        an IndexError like the eager prim -- and reads/writes element 0 instead of
        stray memory."""
        self.kernel.uses_index_check = True
        v = self._emit(f"static_cast<int64_t>({x})", _t.int64)
        s = cexpr(size)
        if wrap_negative:
            v = self._emit(f"{v} < 0 ? {v} + ({s}) : {v}", _t.int64)
        bad = self._emit(f"static_cast<uint64_t>({v}) >= static_cast<uint64_t>({s})", _t.bool_)
        runs = self._inner_loops_run() if bad.name in self._hoisted else None
        if runs is not None:
            # an index invariant in the inner loop (an embedding row, read across the row) is
            # checked once before it, where that loop runs at all (a 0-element view reads no
            # element and raises nothing): a call left in the simd loop made GCC's vector code
            # of nanoGPT's embedding + layer-norm kernel 8x slower
            lines, ind = self.hoist[0], self.hoist[1]
            if runs is False:
                return sympy.Symbol(self._emit(f"{bad} ? 0 : {v}", _t.int64).name, integer=True)
            check = f"{ind}if ({bad}{runs}) ember_flag_index_error();"
        else:
            check = f"{self.indent}if ({bad}) ember_flag_index_error();"
            lines = self.lines
        if check not in lines[-8:]:        # (a second gather through the same index: checked once)
            lines.append(check)
        w = self._emit(f"{bad} ? 0 : {v}", _t.int64)
        return sympy.Symbol(w.name, integer=True)

    def _inner_loops_run(self):
        """Before the hoisted-over inner loops: "" when they surely run, " && (n > 0)..." when
        that depends on symbolic sizes, False when they never run, None when unknown (a loop
        variable without a range)."""
        inner = self.hoist[2]
        spans = {str(v): sympify(hi) - sympify(lo) for v, (lo, hi) in self.ranges.items()}
        conds = []
        for name in inner:
            span = spans.get(name)
            if span is None:
                return None
            if span.is_number:
                if span <= 0:
                    return False
            else:
                conds.append(f" && ({cexpr(span)}) > 0")
        return "".join(conds)

    def philox(self, seed, offset, index, dtype, normal):
        fn = "ember_philox_normal" if normal else "ember_philox_uniform"
        bits = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 32}[dtype.name]
        e = f"{fn}({seed}, {offset}, {index})" if normal else f"{fn}({seed}, {offset}, {index}, {bits})"
        return self.to_dtype(self._emit(e, _t.float64), dtype) if dtype is not _t.float64 else self._emit(e, dtype)

    def to_dtype(self, x, dtype):
        src = x.dtype
        if dtype is src:
            return x
        if dtype is _t.bool_:
            return self._emit(f"({x} != 0)", dtype)
        if dtype is _t.float16:     # float64 too through float: PyTorch's double rounding
            return self._emit(f"ember_f16_round(static_cast<float>({x}))", dtype)
        if dtype is _t.bfloat16:
            return self._emit(f"ember_bf16_round(static_cast<float>({x}))", dtype)
        return self._emit(f"static_cast<{COMPUTE[dtype]}>({x})", dtype)

    def where(self, c, a, b):
        if str(c) in ("true", "false"):
            return a if str(c) == "true" else b
        ct = COMPUTE.get(a.dtype)
        if ct in ("float", "double") and COMPUTE.get(getattr(b, "dtype", None)) == ct and \
                str(c) not in self._hoisted:     # (a loop-invariant condition: ?: folds away)
            # a bitwise blend, not ``?:``: g++ turns ``acc += m ? g : 0`` inside a collapsed
            # ``omp simd`` reduction into control flow and runs the loop scalar (a ReLU
            # backward's masked sum: 17x slower); same bits either way
            return self._emit(f"ember_sel({c}, {a}, {b})", a.dtype)
        return self._emit(f"{c} ? {a} : {b}", a.dtype)

    # -- unary ---------------------------------------------------------------------
    def _fn(self, name, x):
        ct = COMPUTE[x.dtype]
        return f"{name}f({x})" if ct == "float" else f"{name}({x})"

    def _unary(self, op, x):
        dt = x.dtype
        fp = dt.category == 2
        ct = COMPUTE[dt]
        if op == "exp" and fp:
            return self._emit(self._fn("ember_exp", x), dt)
        if op == "tanh" and ct == "float":
            return self._emit(f"ember_tanhf({x})", dt)     # (staged in strips: cpp_strips)
        if op in MVEC and fp:
            return self._emit(self._fn(op, x), dt)
        if op == "abs":
            return self._emit(f"std::fabs({x})" if fp else f"({x} < 0 ? static_cast<{ct}>(-{x}) : {x})", dt)
        if op == "neg":
            return self._emit(f"-{x}", dt)
        if op == "sign":
            if dt is _t.bool_:
                return x
            return self._emit(f"ember_sign_fp({x})" if fp else f"static_cast<{ct}>(({x} > 0) - ({x} < 0))", dt)
        if op == "sqrt":
            return self._emit(f"std::sqrt({x})", dt)
        if op == "rsqrt":
            return self._emit(f"static_cast<{ct}>(1) / std::sqrt({x})", dt)
        if op == "reciprocal":
            return self._emit(f"static_cast<{ct}>(1) / {x}", dt)
        if op in ("floor", "ceil", "trunc", "round"):
            if not fp:
                return x
            fn = "nearbyint" if op == "round" else op
            return self._emit(f"std::{fn}({x})", dt)
        if op == "erfinv":
            f64 = "true" if ct == "double" else "false"
            return self._emit(f"static_cast<{ct}>(ember_erfinv_d<{f64}>(static_cast<double>({x})))", dt)
        if op == "lgamma":
            return self._emit(f"static_cast<{ct}>(ember_lgamma(static_cast<double>({x})))", dt)
        if op == "bitwise_not":
            return self._emit(f"!{x}" if dt is _t.bool_ else f"static_cast<{ct}>(~{x})", dt)
        if op == "isnan":
            return self._emit(f"({x} != {x})" if fp else "false", _t.bool_)
        if op == "isinf":
            return self._emit(f"std::isinf({x})" if fp else "false", _t.bool_)
        if op == "isfinite":
            return self._emit(f"std::isfinite({x})" if fp else "true", _t.bool_)
        if op == "signbit":
            if fp:
                return self._emit(f"std::signbit({x})", _t.bool_)
            return self._emit("false" if dt is _t.bool_ or dt is _t.uint8 else f"({x} < 0)", _t.bool_)
        if op == "logical_not":
            return self._emit(f"({x} == 0)", _t.bool_)
        if op in MVEC:
            raise NotImplementedError(f"inductor: {op} of {dt} (floating tensors only)")
        raise NotImplementedError(f"inductor C++: unary op {op}")

    # -- binary ------------------------------------------------------------------
    def _binary(self, op, a, b):
        dt = a.dtype
        fp = dt.category == 2
        ct = COMPUTE[dt]
        isbool = dt is _t.bool_
        simple = {"sub": "-", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
        if op == "add":
            return self._emit(f"{a} || {b}" if isbool else f"{a} + {b}", dt)
        if op == "mul":
            return self._emit(f"{a} && {b}" if isbool else f"{a} * {b}", dt)
        if op in simple:
            return self._emit(f"{a} {simple[op]} {b}", dt)
        if op in ("div", "floor_divide", "remainder", "fmod") and not fp:
            self.kernel.uses_index_check = True     # (a zero divisor sets the kernel's error flag)
        if op == "div":
            return self._emit(f"{a} / {b}" if fp else f"ember_div_trunc<{ct}>({a}, {b})", dt)
        if op == "floor_divide":
            return self._emit(f"ember_floordiv_fp<{ct}>({a}, {b})" if fp else f"ember_floordiv_int<{ct}>({a}, {b})", dt)
        if op == "remainder":
            return self._emit(f"ember_remainder_fp<{ct}>({a}, {b})" if fp else f"ember_remainder_int<{ct}>({a}, {b})", dt)
        if op == "fmod":
            return self._emit(f"std::fmod({a}, {b})" if fp else f"ember_fmod_int<{ct}>({a}, {b})", dt)
        if op == "pow":
            return self._emit(f"ember_pow_fp({a}, {b})" if fp else f"ember_pow_int<{ct}>({a}, {b})", dt)
        if op == "atan2":
            return self._emit(f"{'atan2f' if ct == 'float' else 'atan2'}({a}, {b})", dt)
        if op == "maximum":
            if isbool:
                return self._emit(f"{a} || {b}", dt)
            return self._emit(f"ember_max_fp<{ct}>({a}, {b})" if fp else f"({a} > {b} ? {a} : {b})", dt)
        if op == "minimum":
            if isbool:
                return self._emit(f"{a} && {b}", dt)
            return self._emit(f"ember_min_fp<{ct}>({a}, {b})" if fp else f"({a} < {b} ? {a} : {b})", dt)
        if op == "copysign":
            return self._emit(f"std::copysign({a}, {b})", dt)
        if op == "shift_left":
            return self._emit(f"ember_shl<{ct}>({a}, {b})", dt)
        if op == "shift_right":
            return self._emit(f"ember_shr<{ct}>({a}, {b})", dt)
        cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
        if op in cmp:
            return self._emit(f"{a} {cmp[op]} {b}", _t.bool_)
        if op == "logical_and":
            return self._emit(f"({a} != 0) && ({b} != 0)", _t.bool_)
        if op == "logical_or":
            return self._emit(f"({a} != 0) || ({b} != 0)", _t.bool_)
        if op == "logical_xor":
            return self._emit(f"({a} != 0) != ({b} != 0)", _t.bool_)
        raise NotImplementedError(f"inductor C++: binary op {op}")

    def __getattr__(self, name):
        if name in ir.UNARY_OPS or name in ir.UNARY_BOOL_OPS:
            return lambda x: self._unary(name, x)
        if name in ir.BINARY_OPS or name in ir.BINARY_BOOL_OPS:
            return lambda a, b: self._binary(name, a, b)
        raise AttributeError(name)


def _acc_type(rtype, ct):
    """The accumulator of a sum: float32 values add up in double. Each SIMD lane adds its
    share sequentially, so a float accumulator loses ~n/lanes * eps of the running sum: the
    mean of 60k values in [-2, 2] came out 1.7e-4 relative off (numpy's pairwise float32 sum:
    1e-7), enough to flip comparisons against it. Double costs a conversion per element;
    sums are memory-bound."""
    return "double" if rtype == "sum" and ct == "float" else ct


# reductions an interchanged (column) loop may split over chunks of rows, and how two chunks'
# partials combine (a C expression of the two; the accumulator's start value: _split_init)
_SPLIT_COMBINE = {
    "sum": "{a} + {b}",
    "prod": "{a} * {b}",
    "amax": "({b} > {a} ? {b} : {a})",
    "amin": "({b} < {a} ? {b} : {a})",
    "any": "{a} | {b}",
    "all": "{a} & {b}",
}
_CTYPE_BYTES = {"double": 8, "float": 4, "int64_t": 8, "int32_t": 4, "int": 4, "int16_t": 2, "int8_t": 1,
                "uint8_t": 1, "bool": 1}


def _split_init(rtype, typ, fp_minmax) -> str:
    """The identity an accumulator of reduction ``rtype`` (C type ``typ``) starts from."""
    if rtype in ("sum", "prod"):
        return f"static_cast<{typ}>({'0' if rtype == 'sum' else '1'})"
    if rtype in ("amax", "amin"):
        if fp_minmax:
            return f"{'-' if rtype == 'amax' else ''}std::numeric_limits<{typ}>::infinity()"
        return f"std::numeric_limits<{typ}>::{'lowest' if rtype == 'amax' else 'max'}()"
    return "0" if rtype == "any" else "1"


def _outer_update(rtype, acc, nan, v) -> List[str]:
    """C statements folding value ``v`` into accumulator ``acc`` (``nan``: its NaN flag, for a
    floating max/min: comparisons drop NaN, the flag remembers one was seen)."""
    if rtype in ("sum", "prod"):
        return [f"{acc} = {acc} {'+' if rtype == 'sum' else '*'} {v};"]
    if rtype in ("amax", "amin"):
        cmp = ">" if rtype == "amax" else "<"
        out = [f"{acc} = {v} {cmp} {acc} ? {v} : {acc};"]
        if nan:
            out.append(f"{nan} |= static_cast<int>({v} != {v});")
        return out
    return [f"{acc} {'|' if rtype == 'any' else '&'}= static_cast<int>({v} != 0);"]


class KernelGen:
    """Writes one fused group as one C++ function."""

    def __init__(self, name: str, group, graph, size_syms, local=()):
        self.name = name
        # buffers written and read only inside this kernel: arrays local to one
        # outer iteration (the inner extent only), never allocated in memory by the
        # wrapper -- softmax's exp values stay in L1 instead of a round trip to RAM
        self.local = set(local)
        self.group = group
        self.graph = graph
        self.size_syms = size_syms
        self._tmp = itertools.count()
        self.uses_index_check = False
        self.reads = set()
        self.writes = [n.name for n in group.nodes]
        self.kind = "cpp"
        self.tiles = {}      # (buffer, index) -> local tile element (transposed reads)
        self.overrides = {}  # loop variable -> (lo, hi): one piece of a split loop
        self._row_pending = []  # row stages not yet emitted (scheduler.row_stage)
        self.store_redirect = {}  # buffer -> where its stores go instead (an output tile)
        self.stream = {}     # node -> (staging array, base index, numel): rows streamed out
        self._staged = set()  # the streamed nodes of the stage being written (stores go to the row)
        self.prefetch = {}   # node -> (buffer, index of the next outer iteration, guard)
        # the row-loop plan of the stage being written ({"prefetch": ..., "strip": ...}); then
        # ("open", var, plan, the stream entry it replaced) while its inner loop's blocks are
        # emitted, "closed" after (one blocked loop per stage)
        self._blocked = None
        # the FX nodes this kernel computes (profiler table, comment in the source)
        self.origins = sorted(set().union(*(getattr(n.data, "origins", ()) for n in group.nodes)), key=_natural)
        flat = _flattened(group, self.local) if config.flatten_pointwise else None
        if flat is None and config.split_div_mod:
            flat = _split_div_mod(group, self.local)
        if flat is not None:
            self.group = flat

    def new_tmp(self):
        return f"tmp{next(self._tmp)}"

    def _work_hint(self) -> int:
        """Elements the kernel's biggest stage walks per call (outer iterations times its inner
        loops), at the size hints."""
        g, hint = self.group, self.graph.sizevars.size_hint
        per = max((hint(product(n.inner(g.p))) for n in g.nodes), default=1)
        return hint(product(g.outer_sizes)) * per

    def buffer_dtype(self, name):
        return self.graph.buffers_by_name[name].get_dtype()

    def note_read(self, name):
        self.reads.add(name)

    def local_index(self, name, index):
        if name not in self.local:
            return index
        xs = index_vars("x", self.group.p)
        return sympy.expand(sympify(index).subs({x: 0 for x in xs}))

    def _declare_locals(self, body, ind):
        for n in self.group.nodes:
            if n.name in self.local:
                numel = sympy.Integer(1) if n.is_reduction else product(n.inner(self.group.p))
                body.append(f"{ind}{STORAGE[n.buf.get_dtype()]} {n.name}[{cexpr(numel)}];")

    # -- loops -------------------------------------------------------------
    def _for(self, var, size, indent):
        lo, hi = self.overrides.get(var, (0, size))
        return f"{indent}for (int64_t {var} = {cexpr(lo)}; {var} < {cexpr(hi)}; ++{var})"

    def _par_if(self, work):
        thr = config.parallel_min_work
        w = sympify(work)
        if w.is_number:
            return None if int(w) >= thr else False
        return f"if(({cexpr(w)}) >= {thr})"

    def _parallel_pragma(self, work, extra=""):
        if not config.parallel:
            return None
        cond = self._par_if(work)
        if cond is False:
            return None
        prag = "#pragma omp parallel for" + (f" {extra}" if extra else "")
        if config.threads:
            prag += f" num_threads({int(config.threads)})"
        if cond:
            prag += f" {cond}"
        return prag

    def _schedule(self, outer, iteration_work):
        """``schedule(dynamic, c)`` for a parallel nest whose iterations carry inner loops of
        real work (a softmax row, a layer-norm row), else None (OpenMP's static halves).

        Why: the cores of this kind of machine do not run at one speed. On the 2-vCPU
        VM one vCPU was for minutes at a time ~45% slower than the other (per-thread cycle
        counters around a 1000x16000 softmax: 13M vs 19.5M cycles), and with static halves
        the fast thread waits for the slow one; in chunks of 1/16th of a thread's share the
        fast thread takes more of them (7.1 -> 5.7 ms). A chunk costs one atomic increment."""
        per = config.dynamic_chunks_per_thread
        if not per or not config.parallel:
            return None
        w = sympify(iteration_work)
        hint = self.graph.sizevars.size_hint(w) if not w.is_number else int(w)
        if hint < config.dynamic_schedule_min_work:
            return None
        o = sympify(outer)
        threads = int(config.threads or os.cpu_count() or 1)
        if threads < 2:
            return None
        if not o.is_number:
            return f"schedule(dynamic, std::max<int64_t>(1, ({cexpr(o)}) / {threads * per}))"
        if int(o) < 2 * threads:
            return None
        return f"schedule(dynamic, {max(1, -(-int(o) // (threads * per)))})"

    def _outer_reduction_ok(self) -> bool:
        """Reductions over outer dims (``sum(x[N, C], 0)``): the reduced index walks
        with a large stride while the output's innermost index is unit-stride. Then the
        loops are interchanged: a block of outputs is accumulated in a small array,
        the reduction loop outside and the unit-stride SIMD loop inside."""
        g = self.group
        p = g.p
        if p == 0 or not config.outer_reduction:
            return False
        reds = [n for n in g.nodes if n.is_reduction]
        if not reds or any(n.data.reduction_type in ("argmax", "argmin") for n in reds):
            return False
        if any(not n.is_reduction and n.inner(p) and n.flat_write is None for n in g.nodes):
            return False
        R = reds[0].rranges
        if any(not _same(n.rranges, R) for n in reds):
            return False
        xl = index_vars("x", p)[-1]
        rvars = index_vars("r", len(R))
        unit_x = False
        for n in reds:
            for _, idx in n.reads(p):
                if idx.coeff(xl) == 1:
                    unit_x = True
                # a read contiguous along a reduced index wants the reduction innermost -- unless
                # it does not move with the SIMD index (a per-row statistic, ``mean[r0]`` in a
                # layer-norm weight gradient): then it is one broadcast value per reduced step
                if not idx.has(xl):
                    continue
                if any(idx.coeff(r) == 1 for r in rvars):
                    return False
        return unit_x

    def generate(self) -> str:
        g = self.group
        p = g.p
        xs = index_vars("x", p)
        body: List[str] = []
        self.kind = "cpp red" if any(n.is_reduction for n in g.nodes) else "cpp pw"
        if len(g.nodes) == 1 and g.nodes[0].is_scan:
            self.local = set()
            self.kind = "cpp scan"
            return self._finish(self._generate_scan(g.nodes[0]))
        if len(g.nodes) == 1 and g.nodes[0].is_scatter:
            self.local = set()
            self.kind = "cpp scatter"
            return self._finish(self._generate_scatter(g.nodes[0]))
        if self._outer_reduction_ok():
            self.local = set()
            self.kind = "cpp outer-red"
            return self._finish(self._generate_outer_reduction(self._outer_split_chunks()))
        if p == 0:
            self.local = set()
            body = []
            for n in g.nodes:
                self._stage(n, p, xs, body, "    ", parallel_inner=True)
            return self._finish(body)
        seg = self._segments()
        if seg is None:
            return self._finish(self._nest())
        var, points = seg
        body = []
        for lo, hi in zip(points[:-1], points[1:]):
            self.overrides = {var: (sympy.Integer(lo), sympy.Integer(hi))}
            body.append(f"    // {var} in [{lo}, {hi})")
            body += self._nest()
        self.overrides = {}
        return self._finish(body)

    def _nest(self) -> List[str]:
        """The loop nest of the group (outer loops, stages)."""
        g = self.group
        p = g.p
        P = g.outer_sizes
        xs = index_vars("x", p)
        body: List[str] = []
        has_inner = any(n.inner(p) for n in g.nodes)
        inner_work = max((product(n.inner(p)) for n in g.nodes), key=lambda e: self.graph.sizevars.size_hint(e),
                         default=sympy.Integer(1))
        # every stage runs over the nest: an LSTM backward's 32-step cell-state recurrence is
        # 100 stages over 8192 elements, too much work for one thread though each is small;
        # and an exp, tanh or division weighs as config.parallel_expensive_op_weight stages (an
        # LSTM cell's two outputs over 32 x 256 values take 13 of them: on one thread it ran
        # 0.085 ms a step of the compiled inference, on two 0.03)
        stages = len(g.nodes) + config.parallel_expensive_op_weight * sum(n.expensive_ops for n in g.nodes)
        total_work = product(P) * inner_work * stages
        if not has_inner:
            # all stages are one element per iteration: simd on the innermost outer loop
            ind = "    "
            prag = self._parallel_pragma(total_work, f"collapse({p - 1})" if p > 2 else "")
            loops = []
            if p == 1:
                if prag:
                    loops.append(ind + prag.replace("parallel for", "parallel for simd" if config.simd else "parallel for"))
                elif config.simd:
                    loops.append(ind + "#pragma omp simd")
                loops.append(self._for(xs[0], P[0], ind) + " {")
            else:
                if prag:
                    loops.append(ind + prag)
                trs = self._transposed_reads(p - 1)
                if trs and self._output_tile_ok(trs):
                    return body + self._generate_transposed(trs, prag, out_tile=True)
                if trs:
                    return body + self._generate_transposed(trs, prag)
                for i in range(p - 1):
                    loops.append(self._for(xs[i], P[i], ind + "    " * i) + " {")
                if config.simd:
                    loops.append(ind + "    " * (p - 1) + "#pragma omp simd")
                loops.append(self._for(xs[p - 1], P[p - 1], ind + "    " * (p - 1)) + " {")
            pre_loops = len(body)
            body.extend(loops)
            inner_ind = ind + "    " * p
            self._declare_locals(body, inner_ind)
            # values that do not depend on the loop variables (0-d input loads, constants and
            # arithmetic over them) are computed once before the loops
            hoisted: List[str] = []
            outer_hoist = (hoisted, ind, {x.name for x in xs})
            shared = ({}, set()) if config.cse_across_stages else None
            for n in g.nodes:
                self._stage(n, p, xs, body, inner_ind, outer_hoist=outer_hoist, shared=shared)
            for i in reversed(range(p)):
                body.append(ind + "    " * i + "}")
            body[pre_loops:pre_loops] = hoisted
        else:
            ind = "    "
            clauses = [f"collapse({p})" if p > 1 else "", self._schedule(product(P), inner_work * len(g.nodes))]
            prag = self._parallel_pragma(total_work, " ".join(c for c in clauses if c))
            if prag:
                body.append(ind + prag)
            tile = self._transpose_tile()
            for i in range(p - 1 if tile else p):
                body.append(self._for(xs[i], P[i], ind + "    " * i) + " {")
            if tile:
                body += self._tile_loops(xs[p - 1], P[p - 1], tile, ind + "    " * (p - 1))
            depth = p + 1 if tile else p
            inner_ind = ind + "    " * depth
            self._declare_locals(body, inner_ind)
            nodes = list(g.nodes)
            if not tile:
                self._stream_plan(nodes, p, xs)
            i = 0
            while i < len(nodes):
                n = nodes[i]
                run = self._sibling_sums(nodes, i)
                if len(run) > 1:
                    self._sibling_sums_stage(run, p, xs, body, inner_ind)
                    i += len(run)
                elif i + 1 < len(nodes) and self._merge_ok(n, nodes[i + 1]):
                    self._streamed_stage(nodes[i + 1], p, xs, body, inner_ind, pre=n)
                    i += 2
                else:
                    self._streamed_stage(n, p, xs, body, inner_ind)
                    i += 1
            self.stream, self.prefetch = {}, {}
            for i in reversed(range(depth)):
                body.append(ind + "    " * i + "}")
        return body

    def _big(self, name) -> bool:
        """Whether buffer ``name`` holds at least ``config.stream_min_bytes`` (by size hint)."""
        buf = self.graph.buffers_by_name.get(name)
        if buf is None or not config.stream_min_bytes:
            return False
        hint = self.graph.sizevars.size_hint
        return hint(product(buf.get_size())) * buf.get_dtype().itemsize >= config.stream_min_bytes

    def _big_f32(self, name) -> bool:
        return self._big(name) and self.buffer_dtype(name) is _t.float32

    def _stream_plan(self, nodes, p, xs):
        """Which stages of a nest with inner loops stream their rows (``self.stream``) and
        which prefetch the next outer iteration's row of an input (``self.prefetch``); only
        for buffers of at least ``config.stream_min_bytes`` (far bigger than the caches).

        Why (a 1000x16000 softmax, 2 cores, per-thread cycle counters): the row's max pass
        waits on memory, the exp-and-sum pass computes on the row in L2 with memory idle,
        the divide pass writes the output, each line read in first. Streaming the output
        rows (no read-for-ownership) and fetching the next row during the exp pass, one
        line per 16 elements, took a C model of the kernel from 4.6-5.3 to 4.0-4.2 ms, and
        the compiled softmax from 4.9-5.0 to 4.55-4.75 ms (in one process, interleaved;
        the model's output was not fresh memory, the compiled one's is). Fetching the
        whole row at once did nothing (the requests are dropped); prefetching in a pass
        that writes memory slowed it. So: only a stage computing transcendentals or writing
        nothing big (a reduction, a kernel-local buffer) prefetches, only a row some earlier
        stage has read (this stage then reads it from cache), and only the first such stage."""
        thr = config.stream_min_bytes
        if not thr or p == 0:
            return
        big = self._big

        def row(idx, rs, R):
            """(base, numel) when ``idx`` walks one contiguous row over ``rs``."""
            if not all(sympify(n).is_Integer for n in R):
                return None
            base = sympy.expand(idx.subs({r: 0 for r in rs}))
            lin = sum((r * st for r, st in zip(rs, contiguous_strides(R))), sympy.Integer(0))
            if sympy.expand(idx - base - lin) != 0 or base.free_symbols & set(rs):
                return None
            return base, int(product(R))

        written = {n.name for n in nodes}
        # (a buffer another stage reads is not streamed: its loads would find the row unwritten)
        read_here = {b for n in nodes for b, _ in n.reads(p)}
        seen_rows, fetched = set(), set()
        for n in nodes:
            R = n.inner(p)
            rs = index_vars("r", len(R))
            if (not n.is_reduction and R and n.name not in self.local and n.name not in read_here
                    and n.buf.get_dtype() is _t.float32 and big(n.name)):
                rw = row(n.write_index(p), rs, R)
                # (rows of at least 4 KB: the fence after each row costs tens of cycles)
                if rw is not None and 1024 <= rw[1] <= config.local_buffer_max:
                    self.stream[n.name] = (f"{n.name}_row", rw[0], rw[1])
            reads = [(b, i) for b, i in n.reads(p) if b not in written and b not in self.local]
            if len(R) == 1 and sympify(R[0]).is_Integer:
                # compute-bound over a cached row: transcendentals, or nothing big written (a
                # 1000x16000 layer_norm's centred sum of squares prefetching: 4.04-4.12 -> 3.82-3.88
                # ms in a C model of the kernel, in one process)
                heavy = bool(_OpNames.of(n, p) & _TRANSCENDENTAL) or n.is_reduction or n.name in self.local
                for b, idx in reads:
                    if heavy and (b, idx) in seen_rows and n.name not in self.prefetch and big(b) \
                            and (b, idx) not in fetched:
                        fetched.add((b, idx))
                        xl = xs[-1]
                        nxt = sympy.expand(idx.subs(xl, xl + 1))
                        self.prefetch[n.name] = (b, nxt, f"{xl} + 1 < {cexpr(self.group.outer_sizes[-1])}",
                                                 max(1, 64 // self.buffer_dtype(b).itemsize))
            for b, idx in reads:
                if row(idx, rs, R) is not None:
                    seen_rows.add((b, idx))

    def _streamed_stage(self, node, p, xs, lines, ind, pre=None):
        """``_stage`` with the plan of ``_stream_plan``: stores to a staging row, then
        streaming copies; the inner loop in blocks, each prefetching its share of the next row.

        A pointwise stage streaming its own row (``config.stream_strip`` > 0) runs in strips
        that end on the output's 64-byte lines: each strip is computed into an L1-resident
        array and streamed out at once, one fence after the row. Why (the 1000x16000 softmax's
        divide pass in a C model of the kernel, interleaved in one process): 3.29 -> 2.83 ms
        against staging the whole 64 KB row (in L2) and streaming it in one copy."""
        streamed = [n for n in ((pre, node) if pre is not None else (node,)) if n.name in self.stream]
        pf = self.prefetch.get(node.name) or (self.prefetch.get(pre.name) if pre is not None else None)
        plan = {"prefetch": pf, "strip": None}
        S = config.stream_strip
        if S and pre is None and streamed == [node] and not node.is_reduction and len(node.inner(p)) == 1:
            arr, base, numel = self.stream[node.name]
            plan["strip"] = (node.name, arr, base, min(S, numel))
            streamed = []
        else:
            for n in streamed:
                arr, _, numel = self.stream[n.name]
                lines.append(f"{ind}alignas(64) float {arr}[{numel}];")
        for n in ((pre, node) if pre is not None else (node,)):
            if n.name in self.stream:
                self._staged.add(n.name)
        self._blocked = plan if (pf or plan["strip"]) else None
        try:
            self._stage(node, p, xs, lines, ind, pre=pre)
        finally:
            self._blocked = None
            self._staged.clear()
        for n in streamed:
            arr, base, numel = self.stream[n.name]
            lines.append(f"{ind}ember_stream_f32(&{n.name}[{cexpr(base)}], {arr}, {numel});")

    def _segments(self):
        """Loop splitting: ``(var, [0, b1, ..., n])`` when the group's index
        expressions hold clamps or comparisons (``Max``/``Min``/``<``, from cat, pad,
        where over an index) that are constant on pieces of one outer variable's range;
        each piece gets its own loop nest, where the simplifier resolves them (a cat
        becomes plain affine loads of one input per piece instead of every input
        loaded at a clamped index and selected). None when there is nothing to split."""
        g = self.group
        p = g.p
        P = g.outer_sizes
        xs = index_vars("x", p)
        if not config.split_loops or any(not sympify(n).is_Integer for n in P):
            return None
        rng = _ranges(xs, P)
        exprs = []
        for n in g.nodes:
            rec = _ExprRecorder()
            qs = index_vars("r", len(n.inner(p)))
            r2 = dict(rng)
            r2.update(_ranges(qs, n.inner(p)))
            with set_ops_handler(rec):
                if n.is_reduction:
                    n.data.inner_fn(xs, qs)
                else:
                    n.data.inner_fn(xs + qs)
            exprs += [simplify_index(e, r2, {v: hi for v, (lo, hi) in r2.items()})
                      for e in rec.exprs + [i for _, i in rec.reads]]
        for k in reversed(range(p)):
            v, N = xs[k], int(P[k])
            required, flexible = set(), []
            for e in exprs:
                for sub in sympy.preorder_traversal(e):
                    if isinstance(sub, (sympy.Max, sympy.Min)):
                        for a_, b_ in itertools.combinations(sub.args, 2):
                            z = _linear_zero(a_ - b_, v)
                            if z is None:
                                z = _split_zero(a_ - b_, v, rng)
                            if z is not None:
                                flexible.append((z, z + 1))
                    elif isinstance(sub, sympy.core.relational.Relational):
                        z = _linear_zero(sub.lhs - sub.rhs, v)
                        if z is not None:
                            t = next((c for c in (z, z + 1)
                                      if bool(sub.subs(v, c)) != bool(sub.subs(v, c - 1))), None)
                            if t is not None:
                                required.add(t)
                        else:
                            z = _split_zero(sub.lhs - sub.rhs, v, rng)
                            if z is not None and _flips_at(sub, v, z, rng):
                                required.add(z)
            pts = {t for t in required if 0 < t < N}
            for a_, b_ in flexible:
                if not ({a_, b_} & pts):
                    if 0 < b_ < N:
                        pts.add(b_)
                    elif 0 < a_ < N:
                        pts.add(a_)
            if pts and len(pts) <= config.split_loops_max:
                return v, [0] + sorted(pts) + [N]
        return None

    def _tile_loops(self, var, size, tile, ind):
        """``var`` in tiles of ``tile``: the tile loop (parallelised / collapsed with the
        loops above it) and the loop within one tile."""
        lo, hi = self.overrides.get(var, (0, size))
        n, lo = cexpr(hi), cexpr(lo)
        return [f"{ind}for (int64_t {var}t = {lo}; {var}t < {n}; {var}t += {tile}) {{",
                f"{ind}    for (int64_t {var} = {var}t; {var} < std::min<int64_t>({var}t + {tile}, {n}); ++{var}) {{"]

    def _transpose_tile(self) -> int:
        """Tile size for the last outer loop when a stage's inner loop reads a buffer
        transposed (unit stride in the last outer variable, a large stride in the
        innermost inner variable): untiled, every element of such a read is a cache
        miss (and a TLB miss at 4 KB strides); tiled, a cache line fetched for one
        outer iteration is used by the next ``tile - 1``. 0 = no tiling."""
        g = self.group
        p = g.p
        T = config.transpose_tile
        if not T or p == 0 or not self.graph.sizevars.size_hint(g.outer_sizes[-1]) > T:
            return 0
        xl = index_vars("x", p)[-1]
        for n in g.nodes:
            q = n.inner(p)
            if q and self._transposed_in(n, xl, index_vars("r", len(q))[-1]):
                return int(T)
        return 0

    @staticmethod
    def _is_transposed(idx, a, b):
        """Unit stride in ``a``, a large (or symbolic) stride in ``b``. ``a`` may appear as
        ``a % m`` and ``a // m`` for an ``m`` that the tiles along ``a`` divide (a flattened
        ``B*T`` row index reading a ``[B, H, hd, T]`` buffer): inside one tile those are
        ``a - const`` and a constant."""
        tile = int(config.transpose_tile) * int(config.transpose_tile_out_factor)

        def within_tile(e):
            if isinstance(e, ModularIndexing) and e.args[0] == a and e.args[1] == 1 \
                    and e.args[2].is_Integer and int(e.args[2]) % tile == 0:
                return a
            if isinstance(e, FloorDiv) and e.args[0] == a and e.args[1].is_Integer \
                    and int(e.args[1]) % tile == 0:
                return sympy.Integer(0)
            return None
        if idx.has(ModularIndexing, FloorDiv):
            idx = sympy.expand(idx.replace(lambda e: within_tile(e) is not None, within_tile))
        if idx.coeff(a) != 1:
            return False
        c = idx.coeff(b)
        if c.has(b) or c.has(a):
            return False
        return (c.is_Integer and abs(int(c)) >= 8) or (not c.is_number and c != 0)

    def _reads_here(self, n) -> list:
        """``n.reads(p)``, simplified over this loop nest's ranges: a split loop's piece
        (``self.overrides``) resolves the clamps and divisions of a cat, as the loads will."""
        p = self.group.p
        if not self.overrides:
            return n.reads(p)
        xs, rs = n.vars(p)
        rec = ir.extract_reads(n.data.inner_fn, xs, rs) if n.is_reduction else ir.extract_reads(n.data.inner_fn, xs + rs)
        rng = {v: self.overrides.get(v, (sympy.Integer(0), m))
               for v, m in zip(xs + rs, list(n.outer(p)) + list(n.inner(p)))}
        sizes = {v: hi for v, (_, hi) in rng.items()}
        return [(name, simplify_index(i, rng, sizes)) for name, i in rec.reads]

    def _transposed_in(self, n, a, b):
        # (a read at a data-dependent index -- index_select, gather -- is not tiled: the tile is
        # filled before the body computes that index, and its symbol is the extractor's
        # placeholder, undeclared there: a g++ error, found by the fuzzer, seed 1534)
        return [(name, idx) for name, idx in self._reads_here(n)
                if not _has_indirect(idx) and self._is_transposed(idx, a, b)]

    def _transposed_reads(self, last) -> list:
        """Reads of a group without inner loops (SIMD loop over ``x{last}``) that are
        unit-stride in ``x{last-1}`` instead: a transpose. GCC does not vectorise such a
        strided load on this target (no gathers in its AMD cost model), which leaves
        the whole loop scalar -- transcendental calls included (a GELU over a
        transposed 1024x1024 input: 16 ms instead of 0.25 ms)."""
        g = self.group
        if not config.transpose_tile or not config.simd or last < 1 or any(n.is_reduction for n in g.nodes):
            return []
        xs = index_vars("x", g.p)
        hint = self.graph.sizevars.size_hint
        if hint(g.outer_sizes[last]) < 2 * config.transpose_tile or hint(g.outer_sizes[last - 1]) < 2:
            return []
        out = []
        for n in g.nodes:
            for r in self._transposed_in(n, xs[last - 1], xs[last]):
                if r not in out and r[0] not in self.local and r[0] not in {m.name for m in g.nodes}:
                    out.append(r)
        return out

    def _output_tile_ok(self, trs) -> bool:
        """Transpose the one output instead of the inputs: a single pointwise node whose
        reads are all transposed (or constant along the swapped SIMD loop), e.g. the sum of the
        32 per-step weight gradients of an unrolled LSTM, each a transposed matmul
        output: then the loop runs along the inputs' unit stride and only the result
        goes through a local tile."""
        g = self.group
        if len(g.nodes) != 1 or len(trs) < 2 or self.local:
            return False
        n = g.nodes[0]
        a = index_vars("x", g.p)[-2]    # the SIMD loop of the swapped loops
        return all((name, idx) in trs or not idx.has(a) for name, idx in self._reads_here(n))

    def _generate_transposed(self, trs, prag, out_tile=False) -> List[str]:
        """Tiles of ``T x T`` over the last two loops: each transposed read is first
        copied into a local ``T x T`` array (its source rows read contiguously), then
        the stages run with a contiguous SIMD loop over the tile, loading the local
        copy. Everything else in the body is unchanged (same expressions, same order
        of operations: the results are bit-identical)."""
        g = self.group
        p = g.p
        P = g.outer_sizes
        xs = index_vars("x", p)
        T = int(config.transpose_tile)
        a, b = xs[p - 2], xs[p - 1]
        body: List[str] = []
        ind = "    "
        if prag:
            body.append(ind + prag)
        for i in range(p - 2):
            body.append(self._for(xs[i], P[i], ind + "    " * i) + " {")
        ind1 = ind + "    " * (p - 2)
        (la, ha), (lb, hb) = (self.overrides.get(v, (0, n)) for v, n in ((a, P[p - 2]), (b, P[p - 1])))
        na, nb = cexpr(ha), cexpr(hb)
        # the output-tile variant walks the inputs' rows: a longer run along them (TA)
        # keeps the DRAM streams of many inputs sequential
        TA = T * config.transpose_tile_out_factor if out_tile else T
        body.append(f"{ind1}for (int64_t {a}t = {cexpr(la)}; {a}t < {na}; {a}t += {TA}) {{")
        ind2 = ind1 + "    "
        body.append(f"{ind2}for (int64_t {b}t = {cexpr(lb)}; {b}t < {nb}; {b}t += {T}) {{")
        ind3 = ind2 + "    "
        body.append(f"{ind3}const int64_t {a}n = std::min<int64_t>({TA}, {na} - {a}t);")
        body.append(f"{ind3}const int64_t {b}n = std::min<int64_t>({T}, {nb} - {b}t);")
        self.tiles = {}
        if out_tile:
            # loops swapped: the SIMD loop runs along the inputs' unit stride, results go
            # to a local tile, which is then stored row by row
            node = g.nodes[0]
            st = STORAGE[node.buf.get_dtype()]
            body.append(f"{ind3}{st} ot[{TA * T}];")
            body.append(f"{ind3}for (int64_t {b}j = 0; {b}j < {b}n; ++{b}j) {{")
            body.append(f"{ind3}    const int64_t {b} = {b}t + {b}j;")
            body.append(f"{ind3}    #pragma omp simd")
            body.append(f"{ind3}    for (int64_t {a}i = 0; {a}i < {a}n; ++{a}i) {{")
            body.append(f"{ind3}        const int64_t {a} = {a}t + {a}i;")
            self.store_redirect = {node.name: f"ot[{b}j * {TA} + {a}i]"}
            self._stage(node, p, xs, body, ind3 + "        ")
            self.store_redirect = {}
            body.append(f"{ind3}    }}")
            body.append(f"{ind3}}}")
            body.append(f"{ind3}for (int64_t {a}i = 0; {a}i < {a}n; ++{a}i) {{")
            body.append(f"{ind3}    const int64_t {a} = {a}t + {a}i;")
            body.append(f"{ind3}    #pragma omp simd")
            body.append(f"{ind3}    for (int64_t {b}j = 0; {b}j < {b}n; ++{b}j) {{")
            body.append(f"{ind3}        const int64_t {b} = {b}t + {b}j;")
            body.append(f"{ind3}        {node.name}[{cexpr(node.write_index(p))}] = ot[{b}j * {TA} + {a}i];")
            body.append(f"{ind3}    }}")
            body.append(f"{ind3}}}")
            body.append(f"{ind2}}}")
            body.append(f"{ind1}}}")
            for i in reversed(range(p - 2)):
                body.append(ind + "    " * i + "}")
            return body
        rng = {v: self.overrides.get(v, r) for v, r in _ranges(xs, P).items()}
        for k, (name, idx) in enumerate(trs):
            loc = f"tr{k}"
            st = STORAGE[self.buffer_dtype(name)]
            self.note_read(name)
            body.append(f"{ind3}{st} {loc}[{T * T}];")
            body.append(f"{ind3}for (int64_t {b}j = 0; {b}j < {b}n; ++{b}j) {{")
            body.append(f"{ind3}    const int64_t {b} = {b}t + {b}j;")
            body.append(f"{ind3}    #pragma omp simd")
            body.append(f"{ind3}    for (int64_t {a}i = 0; {a}i < {a}n; ++{a}i) {{")
            body.append(f"{ind3}        const int64_t {a} = {a}t + {a}i;")
            body.append(f"{ind3}        {loc}[{a}i * {T} + {b}j] = {name}[{cexpr(simplify_index(idx, rng))}];")
            body.append(f"{ind3}    }}")
            body.append(f"{ind3}}}")
            self.tiles[(name, idx)] = f"{loc}[{a}i * {T} + {b}j]"
        body.append(f"{ind3}for (int64_t {a}i = 0; {a}i < {a}n; ++{a}i) {{")
        ind4 = ind3 + "    "
        body.append(f"{ind4}const int64_t {a} = {a}t + {a}i;")
        body.append(f"{ind4}#pragma omp simd")
        body.append(f"{ind4}for (int64_t {b}j = 0; {b}j < {b}n; ++{b}j) {{")
        ind5 = ind4 + "    "
        body.append(f"{ind5}const int64_t {b} = {b}t + {b}j;")
        self._declare_locals(body, ind5)
        for n in g.nodes:
            self._stage(n, p, xs, body, ind5)
        body.append(f"{ind4}}}")
        body.append(f"{ind3}}}")
        body.append(f"{ind2}}}")
        body.append(f"{ind1}}}")
        for i in reversed(range(p - 2)):
            body.append(ind + "    " * i + "}")
        self.tiles = {}
        return body

    def _finish(self, body):
        """Buffers arrive as the numpy array objects themselves (ctypes ``py_object``:
        no per-call pointer extraction in Python, which costs microseconds per
        argument); the data pointer is read from the array struct (``EMBER_DATA``)."""
        params, unpack = [], []
        self.writes = [w for w in self.writes if w not in self.local]
        reads = sorted(self.reads - set(self.writes) - self.local, key=_natural)
        # an input this kernel overwrites in place (Scheduler.inplace_outputs) is read through a
        # pointer derived from the output's: two __restrict__ names for one array would let the
        # compiler move a read of the old value past the write
        inplace = {i: b for b, i in (getattr(self.graph, "inplace", None) or {}).items() if b in self.writes}
        aliased = []
        for nm in reads:
            params.append(f"void* {nm}_obj")
            st = STORAGE[self.buffer_dtype(nm)]
            if nm in inplace:
                aliased.append(f"    const {st}* {nm} = {inplace[nm]};")
                continue
            unpack.append(f"    const {st}* __restrict__ {nm} = static_cast<const {st}*>(EMBER_DATA({nm}_obj));")
        for nm in self.writes:
            params.append(f"void* {nm}_obj")
            st = STORAGE[self.buffer_dtype(nm)]
            unpack.append(f"    {st}* __restrict__ {nm} = static_cast<{st}*>(EMBER_DATA({nm}_obj));")
        unpack += aliased
        for s in self.size_syms:
            params.append(f"const int64_t {s.name}")
        self.params = reads + self.writes
        head = f'extern "C" void {self.name}({", ".join(params)})'
        body = collapsed_partial_sums(body)
        work = self._work_hint()
        if work >= config.strip_min_work:
            body = strip_loops(body, exp_staging_enabled())
        elif work >= config.strip_exp_min_work and exp_staging_enabled():
            body = strip_loops(body, True, exp_only=True)
        if config.stream_flat and config.stream_min_bytes:
            inplace_outs = set(inplace.values())
            big = [nm for nm in self.writes if nm not in inplace_outs and self._big_f32(nm)]
            body = stream_flat_stores(body, big, config.stream_strip or 1024, _PER_ELEMENT_MATH)
        return head + "\n{\n" + "\n".join(unpack + body) + "\n}\n"

    # -- scan ---------------------------------------------------------------
    def _generate_scan(self, node) -> List[str]:
        d = node.data
        size = d.size
        dim = d.dim
        n = len(size)
        ct = COMPUTE[d.dtype]
        xs = index_vars("x", n)
        outer, inner = list(range(dim)), list(range(dim + 1, n))
        inner_numel = product([size[i] for i in inner])
        if not (inner_numel.is_Integer and int(inner_numel) <= config.local_buffer_max):
            return self._generate_scan_in_output(node, xs, outer, inner)
        body: List[str] = []
        ind = "    "
        work = product(size)
        prag = self._parallel_pragma(work, f"collapse({len(outer)})" if len(outer) > 1 else "")
        if prag and outer:
            body.append(ind + prag)
        for k, i in enumerate(outer):
            body.append(self._for(xs[i], size[i], ind + "    " * k) + " {")
        ind1 = ind + "    " * len(outer)
        acc = self.new_tmp()
        init = "0" if d.op == "sum" else "1"
        body.append(f"{ind1}{ct} {acc}[{cexpr(inner_numel)}];")
        body.append(f"{ind1}for (int64_t j = 0; j < {cexpr(inner_numel)}; ++j) {acc}[j] = {init};")
        body.append(self._for(xs[dim], size[dim], ind1) + " {")
        ind2 = ind1 + "    "
        v, ind3 = self._scan_step(d, xs, inner, ind2, body)
        j = cexpr(sum((xs[i] * s for i, s in zip(inner, contiguous_strides([size[i] for i in inner]))),
                      sympy.Integer(0)))
        op = "+" if d.op == "sum" else "*"
        body.append(f"{ind3}{acc}[{j}] = static_cast<{ct}>({acc}[{j}] {op} {v});")
        self._store(node, node.write_index(n), f"{acc}[{j}]", ind3, body)
        self._close(len(inner), ind2, body)
        body.append(ind1 + "}")
        self._close(len(outer), ind, body)
        return body

    def _scan_step(self, d, xs, inner, ind, body):
        """One step of a scan: the SIMD loops over the dims after the scan dim, opened at
        ``ind``, and the scanned value computed inside. Returns (value, the body's indent)."""
        if inner and config.simd:
            body.append(ind + "#pragma omp simd" + (f" collapse({len(inner)})" if len(inner) > 1 else ""))
        for k, i in enumerate(inner):
            body.append(self._for(xs[i], d.size[i], ind + "    " * k) + " {")
        ind_in = ind + "    " * len(inner)
        h = CppOps(self, body, ind_in, ranges=_ranges(xs, d.size))
        with set_ops_handler(h):
            v = d.inner_fn(xs)
        return v, ind_in

    def _generate_scan_in_output(self, node, xs, outer, inner) -> List[str]:
        """A scan whose extent after the scan dim is symbolic or too large for a local
        accumulator row (``x.cumsum(0)`` of a ``[s0, s1]`` input): the running value is the
        output's previous row, read back from the output (still in cache), ``out[k] = out[k-1]
        op v[k]``. The same additions in the same order as the local row. Needs the output in
        the compute dtype (no float16 round trip between steps) and not written over an input
        (whose later rows a body could still read)."""
        d = node.data
        size, dim, n = d.size, d.dim, len(d.size)
        ct = COMPUTE[d.dtype]
        if node.buf.get_dtype() is not d.dtype or STORAGE[d.dtype] != ct:
            raise NotImplementedError(f"scan in {d.dtype.name} with a large or symbolic extent after the scan dim")
        if node.name in (getattr(self.graph, "inplace", None) or {}):
            raise NotImplementedError("scan written over its input with a large or symbolic extent after the scan dim")
        body: List[str] = []
        ind = "    "
        prag = self._parallel_pragma(product(size), f"collapse({len(outer)})" if len(outer) > 1 else "")
        if prag and outer:
            body.append(ind + prag)
        for k, i in enumerate(outer):
            body.append(self._for(xs[i], size[i], ind + "    " * k) + " {")
        ind1 = ind + "    " * len(outer)
        body.append(self._for(xs[dim], size[dim], ind1) + " {")
        ind2 = ind1 + "    "
        # the previous row (row 0 at the first step, where it is not used: no index below 0)
        kp = sympy.Symbol(f"{xs[dim]}p", integer=True, nonnegative=True)
        body.append(f"{ind2}const int64_t {kp} = {xs[dim]} > 0 ? {xs[dim]} - 1 : 0;")
        v, ind3 = self._scan_step(d, xs, inner, ind2, body)
        here = node.write_index(n)
        prev = sympy.expand(sympify(here).subs(xs[dim], kp))
        init = "0" if d.op == "sum" else "1"
        op = "+" if d.op == "sum" else "*"
        run = self.new_tmp()
        body.append(f"{ind3}const {ct} {run} = {xs[dim]} == 0 ? static_cast<{ct}>({init}) "
                    f": {node.name}[{cexpr(self.local_index(node.name, prev))}];")
        self._store(node, here, f"static_cast<{ct}>({run} {op} {v})", ind3, body)
        self._close(len(inner), ind2, body)
        body.append(ind1 + "}")
        self._close(len(outer), ind, body)
        return body

    # -- scatter ------------------------------------------------------------
    def _generate_scatter(self, node) -> List[str]:
        d = node.data
        body: List[str] = []
        ind = "    "
        n = len(d.size)
        xs = index_vars("x", n)
        # 1. the copy of the input, parallel and vectorised
        body.append(f"{ind}// copy of the scattered-into input")
        prag = self._parallel_pragma(product(d.size), f"collapse({n - 1})" if n > 2 else "")
        if prag and n >= 2:
            body.append(ind + prag)
        for i in range(n):
            if i == n - 1 and config.simd:
                if prag and n == 1:
                    body.append(ind + "    " * i + prag.replace("parallel for", "parallel for simd"))
                else:
                    body.append(ind + "    " * i + "#pragma omp simd")
            body.append(self._for(xs[i], d.size[i], ind + "    " * i) + " {")
        bi = ind + "    " * n
        h = CppOps(self, body, bi, ranges=_ranges(xs, d.size))
        with set_ops_handler(h):
            v = d.inner_fn(xs)
        self._store(node, node.write_index(n), v, bi, body)
        self._close(n, ind, body)
        # 2. the scatter, sequential in index order
        m = len(d.iter_size)
        ys = index_vars("y", m)
        body.append(f"{ind}// scatter{'-' + d.mode if d.mode else ''}")
        for i in range(m):
            body.append(self._for(ys[i], d.iter_size[i], ind + "    " * i) + " {")
        bi = ind + "    " * m
        h = CppOps(self, body, bi, ranges=_ranges(ys, d.iter_size))
        with set_ops_handler(h):
            tgt = d.target_fn(ys)
            val = d.value_fn(ys)
        widx = sum((t * s for t, s, sz in zip(tgt, contiguous_strides(d.size), d.size) if sz != 1),
                   sympy.Integer(0))
        if d.mode == "add":
            dt = node.buf.get_dtype()
            cur = h.load(node.name, widx)
            val = h.add(cur, val) if dt is not _t.bool_ else h.add(cur, val)
        elif d.mode in ("amax", "amin"):    # NaN-propagating, like the reference's np.maximum.at
            cur = h.load(node.name, widx)
            val = h.maximum(cur, val) if d.mode == "amax" else h.minimum(cur, val)
        self._store(node, widx, val, bi, body)
        self._close(m, ind, body)
        return body

    # -- interchanged (outer) reductions --------------------------------------
    def _outer_split_chunks(self) -> int:
        """Chunks of the reduced rows for a split column reduction, or 0 for the block loop.

        Why. The block loop gives each thread blocks of ``outer_reduction_block`` columns and
        walks every row for each: a thread reads 1 KB of each row, then jumps a row ahead, which
        the hardware prefetchers follow badly -- a column sum of a 4096 x 4096 float32 matrix ran
        at 3.7 GB/s against 13.9 for the row sum on the 2-core AVX2 box -- and with fewer column
        blocks than threads (a 16384 x 256 bias gradient: one block) a thread idles. Split, each
        chunk walks its own run of whole rows (contiguous memory) into a private row of partial
        results, then the chunks' partials are combined per column. The chunk count is fixed when
        compiling (never the runtime thread count), so a result does not depend on the threads
        that ran it. One output dim, static columns, sum/prod/max/min/any/all (var's two passes stay
        in the block loop), no reduction reading what the group writes, and all partial rows on
        the stack within ``outer_reduction_split_bytes``."""
        g = self.group
        if not config.outer_reduction_split or not config.parallel or g.p != 1:
            return 0
        reds = [n for n in g.nodes if n.is_reduction]
        if any(n.data.reduction_type not in _SPLIT_COMBINE for n in reds):
            return 0
        W = sympify(g.outer_sizes[0])
        if not W.is_number or int(W) < 1:
            return 0
        written = {n.name for n in g.nodes}
        if any(name in written for n in reds for name, _ in n.reads(g.p)):
            return 0
        hint = self.graph.sizevars.size_hint
        rows = hint(product(reds[0].rranges))
        threads = int(config.threads or os.cpu_count() or 1)
        blocks = -(-int(W) // config.outer_reduction_block)
        # below the size where the block loop's pattern costs (cache-resident inputs), split only
        # when the column blocks leave threads idle and the work pays for a parallel region of
        # its own (a small block-loop kernel shares one with its neighbours: codegen/combo.py);
        # row stages (scheduler.row_stage) count their element-wise traffic as work too
        stages = 1 + sum(n.flat_write is not None for n in g.nodes)
        if int(W) * rows * stages < config.outer_reduction_split_min_work and \
                (blocks >= threads or int(W) * rows < config.outer_reduction_split_idle_min_work):
            return 0
        per_chunk = 0
        for n in reds:
            ct = COMPUTE[n.data.src_dtype]
            rtype = n.data.reduction_type
            per_chunk += int(W) * (_CTYPE_BYTES[_acc_type(rtype, ct) if rtype in ("sum", "prod", "amax", "amin")
                                                else "int"]
                                   + (4 if rtype in ("amax", "amin") and n.data.src_dtype.category == 2 else 0))
        chunks = min(config.outer_reduction_split_chunks_per_thread * threads, rows // 16,
                     config.outer_reduction_split_bytes // max(per_chunk, 1))
        return chunks if chunks >= 2 else 0

    def _generate_outer_reduction(self, chunks: int = 0) -> List[str]:
        g = self.group
        p = g.p
        P = g.outer_sizes
        xs = index_vars("x", p)
        B = config.outer_reduction_block
        body: List[str] = []
        ind = "    "
        last = cexpr(P[-1])
        nblk = f"(({last}) + {B - 1}) / {B}"
        work = product(P) * product(next(n for n in g.nodes if n.is_reduction).rranges)
        # row stages (scheduler.row_stage): emitted once, in the split chunks' loop over whole
        # rows; the column blocks' loop would walk them 1 KB of a row at a time (measured slower
        # than a loop of their own: 256 x 512, 34 -> 50 us), so without the split they run first,
        # as a loop over their elements in memory order (they read nothing the group writes)
        self._row_pending = [n for n in g.nodes if n.flat_write is not None]
        if self._row_pending and not chunks:
            self._row_stage_loop(body)
        partials = self._split_partials(chunks, body) if chunks else {}
        if chunks:
            work = product(P) * chunks      # the combining pass
        prag = self._parallel_pragma(work, f"collapse({p})" if p > 1 else "")
        if prag:
            body.append(ind + prag)
        for i in range(p - 1):
            body.append(self._for(xs[i], P[i], ind + "    " * i) + " {")
        bi = ind + "    " * (p - 1)
        body.append(f"{bi}for (int64_t xblk = 0; xblk < {nblk}; ++xblk) {{")
        ind1 = bi + "    "
        body.append(f"{ind1}const int64_t xb = xblk * {B};")
        body.append(f"{ind1}const int64_t xn = std::min<int64_t>({B}, ({last}) - xb);")
        simd = "#pragma omp simd" if config.simd else None
        xl = xs[-1].name

        def xi_loop(lines, ind_, emit):
            if simd:
                lines.append(ind_ + simd)
            lines.append(f"{ind_}for (int64_t xi = 0; xi < xn; ++xi) {{")
            lines.append(f"{ind_}    const int64_t {xl} = xb + xi;")
            emit(ind_ + "    ")
            lines.append(ind_ + "}")

        for n in g.nodes:
            if n.flat_write is not None:
                body.append(f"{ind1}// {n!r}: a row stage, computed with the rows above")
                continue
            body.append(f"{ind1}// {n!r}")
            body.append(ind1 + "{")
            ind2 = ind1 + "    "
            if not n.is_reduction:
                def emit(ii, n=n):
                    h = CppOps(self, body, ii, ranges=_ranges(xs, P))
                    with set_ops_handler(h):
                        v = n.data.inner_fn(xs)
                    self._store(n, n.write_index(p), v, ii, body)
                xi_loop(body, ind2, emit)
            else:
                self._outer_reduction_stage(n, p, xs, body, ind2, xi_loop, B, partials.get(n.name))
            body.append(ind1 + "}")
        body.append(bi + "}")
        for i in reversed(range(p - 1)):
            body.append(ind + "    " * i + "}")
        return body

    def _split_partials(self, chunks, body) -> dict:
        """The first pass of a split column reduction (see :meth:`_outer_split_chunks`): every
        chunk of rows accumulates each reduction into its own row of a partial array on the
        stack. Returns reduction node name -> (chunks, partial array, NaN-flag array or None) for
        the combining pass, which :meth:`_outer_reduction_stage` writes."""
        g = self.group
        W = cexpr(g.outer_sizes[0])
        xs = index_vars("x", 1)
        simd = "#pragma omp simd" if config.simd else None
        reds = [n for n in g.nodes if n.is_reduction]
        R = reds[0].rranges
        rs = index_vars("r", len(R))
        rows = cexpr(product(R))
        out, ind = {}, "    "
        body.append(f"{ind}// split over the reduced rows: {chunks} chunks of partial results, combined below")
        for n in reds:
            rtype, ct = n.data.reduction_type, COMPUTE[n.data.src_dtype]
            fp = n.data.src_dtype.category == 2
            typ = _acc_type(rtype, ct) if rtype in ("sum", "prod", "amax", "amin") else "int"
            part = self.new_tmp()
            body.append(f"{ind}alignas(64) {typ} {part}[{chunks} * {W}];")
            nan = None
            if rtype in ("amax", "amin") and fp:
                nan = self.new_tmp()
                body.append(f"{ind}alignas(64) int {nan}[{chunks} * {W}];")
            out[n.name] = (chunks, part, nan)
        body.append(f"{ind}#pragma omp parallel for schedule(dynamic, 1)"
                    + (f" num_threads({int(config.threads)})" if config.threads else ""))
        body.append(f"{ind}for (int64_t chunk = 0; chunk < {chunks}; ++chunk) {{")
        i1 = ind + "    "
        body.append(f"{i1}const int64_t rlo = chunk * ({rows}) / {chunks}, rhi = (chunk + 1) * ({rows}) / {chunks};")
        xl = xs[0].name

        def x_loop(ind_, emit):
            if simd:
                body.append(ind_ + simd)
            body.append(f"{ind_}for (int64_t {xl} = 0; {xl} < {W}; ++{xl}) {{")
            emit(ind_ + "    ")
            body.append(ind_ + "}")

        for n in reds:
            _, part, nan = out[n.name]
            typ = _acc_type(n.data.reduction_type, COMPUTE[n.data.src_dtype])
            value = _split_init(n.data.reduction_type, typ, nan is not None)
            x_loop(i1, lambda ii, part=part, nan=nan, value=value: body.extend(
                [f"{ii}{part}[chunk * {W} + {xl}] = {value};"] + ([f"{ii}{nan}[chunk * {W} + {xl}] = 0;"] if nan else [])))
        body.append(f"{i1}for (int64_t rf = rlo; rf < rhi; ++rf) {{")
        i2 = i1 + "    "
        stride = sympy.Integer(1)
        decl = []
        for r, size in reversed(list(zip(rs, R))):
            expr = f"(rf / {cexpr(stride)})" if stride != 1 else "rf"
            decl.append(f"{i2}const int64_t {r} = {expr}" + (f" % {cexpr(size)};" if r is not rs[0] else ";"))
            stride = stride * size
        body.extend(reversed(decl))
        for n in reds:
            _, part, nan = out[n.name]
            red = n.data

            def emit(ii, n=n, part=part, nan=nan, red=red):
                h = CppOps(self, body, ii, ranges=_ranges(xs + rs, [g.outer_sizes[0]] + list(R)))
                with set_ops_handler(h):
                    v = red.inner_fn(xs, rs)
                acc = f"{part}[chunk * {W} + {xl}]"
                flag = f"{nan}[chunk * {W} + {xl}]" if nan else None
                body.extend(ii + ln for ln in _outer_update(red.reduction_type, acc, flag, v))
            x_loop(i2, emit)
        if self._row_pending:
            x_loop(i2, lambda ii: self._row_stages(xs, rs, [g.outer_sizes[0]] + list(R), ii, body))
        body.append(i1 + "}")
        body.append(ind + "}")
        return out

    def _row_stage_loop(self, body):
        """The pending row stages as one loop nest over their elements, the variable of the
        largest stride outermost (parallel) and of stride 1 innermost (SIMD): memory order."""
        g = self.group
        xs = index_vars("x", g.p)
        red = next(n for n in g.nodes if n.is_reduction)
        rs = index_vars("r", len(red.rranges))
        vars_, sizes = list(xs) + list(rs), list(g.outer_sizes) + list(red.rranges)
        a = sympy.expand(self._row_pending[0].flat_write)
        # (a size-1 dim outermost, whatever its coefficient: the SIMD loop is the unit-stride one)
        order = sorted(range(len(vars_)), key=lambda i: (sizes[i] != 1, -int(a.coeff(vars_[i]))))
        ind = "    "
        body.append(f"{ind}// the row stages in memory order (the column blocks below hold the reductions)")
        prag = self._parallel_pragma(product(sizes))
        for k, i in enumerate(order):
            if prag and sizes[i] != 1:          # the first loop of more than one iteration
                body.append(ind + prag)
                prag = None
            if k == len(order) - 1 and config.simd:
                body.append(ind + "#pragma omp simd")
            body.append(self._for(vars_[i], sizes[i], ind) + " {")
            ind += "    "
        self._row_stages(xs, rs, sizes, ind, body)
        for _ in order:
            ind = ind[:-4]
            body.append(ind + "}")

    def _row_stages(self, xs, rs, sizes, ind, lines):
        """The pending row stages (scheduler.row_stage) at element ``(xs, rs)`` of the interchanged
        loops, computed and stored; then none is pending."""
        for n in self._row_pending:
            lines.append(f"{ind}// {n!r}: row stage written at {cexpr(n.flat_write)}")
            h = CppOps(self, lines, ind, ranges=_ranges(list(xs) + list(rs), sizes))
            with set_ops_handler(h):
                v = n.data.inner_fn(list(xs) + list(rs))
            self._store(n, n.flat_write, v, ind, lines)
        self._row_pending = []

    def _outer_reduction_stage(self, node, p, xs, lines, ind, xi_loop, B, split=None):
        """One reduction of the interchanged loop: a block of ``B`` accumulators over the
        reduced loops, then the stores. ``split`` (chunks, partial array, NaN flags): the rows
        were reduced by :meth:`_split_partials`; the accumulators combine the chunks' partials."""
        red = node.data
        rtype = red.reduction_type
        src = red.src_dtype
        ct = COMPUTE[src]
        fp = src.category == 2
        R = red.reduction_ranges
        rs = index_vars("r", len(R))
        widx = node.write_index(p)

        def rloop(update):
            inner = ind
            for i, (r, n) in enumerate(zip(rs, R)):
                lines.append(self._for(r, n, inner) + " {")
                inner = inner + "    "

            def emit(ii):
                h = CppOps(self, lines, ii, ranges=_ranges(xs + rs, list(self.group.outer_sizes) + list(R)))
                with set_ops_handler(h):
                    v = red.inner_fn(xs, rs)
                for ln in update(v):
                    lines.append(ii + ln)
            xi_loop(lines, inner, emit)
            self._close(len(rs), ind, lines)

        def init(name, typ, value):
            lines.append(f"{ind}{typ} {name}[{B}];")
            xi_loop(lines, ind, lambda ii: lines.append(f"{ii}{name}[xi] = {value};"))

        def store(expr_fn):
            xi_loop(lines, ind, lambda ii: self._store(node, widx, expr_fn(), ii, lines))

        if rtype == "var":
            n = product(R)
            init(acc := self.new_tmp(), ct, "0")
            rloop(lambda v: [f"{acc}[xi] = {acc}[xi] + {v};"])
            mean = self.new_tmp()
            lines.append(f"{ind}{ct} {mean}[{B}];")
            xi_loop(lines, ind, lambda ii: lines.append(
                f"{ii}{mean}[xi] = {acc}[xi] / static_cast<{ct}>({cexpr(n)});"))
            m2 = self.new_tmp()
            init(m2, ct, "0")

            def upd(v):
                d = self.new_tmp()
                return [f"{ct} {d} = {v} - {mean}[xi];", f"{m2}[xi] = {m2}[xi] + {d} * {d};"]
            rloop(upd)
            corr = float(red.correction)
            denom = f"static_cast<{ct}>(std::max<double>(static_cast<double>({cexpr(n)}) - {corr!r}, 0.0))"
            store(lambda: f"{m2}[xi] / {denom}")
            return
        if rtype not in _SPLIT_COMBINE:  # pragma: no cover - excluded by _outer_reduction_ok
            raise NotImplementedError(rtype)
        typ = _acc_type(rtype, ct) if rtype in ("sum", "prod", "amax", "amin") else "int"
        has_nan = rtype in ("amax", "amin") and fp
        acc = self.new_tmp()
        nan = self.new_tmp() if has_nan else None
        if split is None:
            init(acc, typ, _split_init(rtype, typ, has_nan))
            if nan:
                init(nan, "int", "0")
            rloop(lambda v: _outer_update(rtype, f"{acc}[xi]", f"{nan}[xi]" if nan else None, v))
        else:
            chunks, part, pnan = split
            W, xl = cexpr(self.group.outer_sizes[0]), xs[-1].name
            for name, typ_, arr, op in ((acc, typ, part, _SPLIT_COMBINE[rtype]), (nan, "int", pnan, "{a} | {b}")):
                if name is None:
                    continue
                lines.append(f"{ind}{typ_} {name}[{B}];")
                xi_loop(lines, ind, lambda ii, name=name, arr=arr: lines.append(f"{ii}{name}[xi] = {arr}[{xl}];"))
                lines.append(f"{ind}for (int64_t chunk = 1; chunk < {chunks}; ++chunk) {{")
                xi_loop(lines, ind + "    ", lambda ii, name=name, arr=arr, op=op: lines.append(
                    f"{ii}{name}[xi] = " + op.format(a=f"{name}[xi]", b=f"{arr}[chunk * {W} + {xl}]") + ";"))
                lines.append(f"{ind}}}")
        if has_nan:
            store(lambda: f"({nan}[xi] ? std::numeric_limits<{ct}>::quiet_NaN() : {acc}[xi])")
        elif rtype in ("any", "all"):
            store(lambda: f"({acc}[xi] != 0)")
        else:
            store(lambda: f"{acc}[xi]")

    # -- stages ------------------------------------------------------------
    def _store(self, node, index, val, ind, lines):
        dt = node.buf.get_dtype()
        v = str(val)
        if dt is _t.float16:
            v = f"static_cast<_Float16>({v})"
        elif dt is _t.bfloat16:
            v = f"ember_f32_to_bf16({v})"
        elif dt is _t.bool_:
            v = f"static_cast<uint8_t>(static_cast<bool>({v}))"
        target = self.store_redirect.get(node.name)
        if node.name in self._staged:
            arr, base, _ = self.stream[node.name]
            target = f"{arr}[{cexpr(sympy.expand(sympify(index) - base))}]"
        elif target is None:
            target = f"{node.name}[{cexpr(self.local_index(node.name, index))}]"
        lines.append(f"{ind}{target} = {v};")

    def _inner_loops(self, vars_, sizes, ind, lines, pragma):
        plan = self._blocked
        if isinstance(plan, dict) and len(vars_) == 1:
            v, n = vars_[0], cexpr(sizes[0])
            vb, ve = f"{v}b", f"{v}e"
            if plan["strip"] is not None:
                name, arr, base, S = plan["strip"]
                lines.append(f"{ind}float* const {name}_dst = &{name}[{cexpr(base)}];")
                lines.append(f"{ind}// strips end on the output's 64-byte lines: the first at the first line, "
                             f"then every {S} elements")
                lines.append(f"{ind}const int64_t {v}h = std::min<int64_t>({n}, "
                             f"((64 - (reinterpret_cast<uintptr_t>({name}_dst) & 63)) & 63) / 4);")
                lines.append(f"{ind}for (int64_t {vb} = 0, {ve}; {vb} < {n}; {vb} = {ve}) {{")
                lines.append(f"{ind}    {ve} = {vb} == 0 && {v}h ? {v}h : std::min<int64_t>({vb} + {S}, {n});")
            else:
                B = 16 * plan["prefetch"][3]
                lines.append(f"{ind}for (int64_t {vb} = 0; {vb} < {n}; {vb} += {B}) {{")
                lines.append(f"{ind}    const int64_t {ve} = std::min<int64_t>({vb} + {B}, {n});")
            if plan["prefetch"] is not None:
                buf, nxt, guard, per_line = plan["prefetch"]
                lines.append(f"{ind}    if ({guard}) for (int64_t {v}p = {vb}; {v}p < {ve}; {v}p += {per_line}) "
                             f"__builtin_prefetch(&{buf}[{cexpr(nxt.subs(v, sympy.Symbol(f'{v}p', integer=True)))}], 0, 1);")
            saved = None
            if plan["strip"] is not None:
                name, arr, base, S = plan["strip"]
                lines.append(f"{ind}    alignas(64) float {arr}[{S}];")
                saved = self.stream[name]
                self.stream[name] = (arr, base + sympy.Symbol(vb, integer=True), S)
            self.overrides[v] = (sympy.Symbol(vb, integer=True), sympy.Symbol(ve, integer=True))
            self._blocked = ("open", v, plan, saved)
            try:
                return self._inner_loops(vars_, sizes, ind + "    ", lines, pragma)
            finally:
                del self.overrides[v]
        if pragma and len(vars_) > 1:
            pragma = pragma + f" collapse({len(vars_)})"
        if pragma:
            lines.append(ind + pragma)
        for i, (v, s) in enumerate(zip(vars_, sizes)):
            lines.append(self._for(v, s, ind + "    " * i) + " {")
        return ind + "    " * len(vars_)

    def _close(self, n, ind, lines):
        if isinstance(self._blocked, tuple) and n == 1:
            _, v, plan, saved = self._blocked
            lines.append(ind + "    }")
            if plan["strip"] is not None:
                name, arr, base, S = plan["strip"]
                lines.append(f"{ind}    ember_stream_part({name}_dst + {v}b, {arr}, {v}e - {v}b);")
                self.stream[name] = saved
            lines.append(ind + "}")
            if plan["strip"] is not None:
                lines.append(f"{ind}ember_stream_fence();")
            self._blocked = "closed"
            return
        for i in reversed(range(n)):
            lines.append(ind + "    " * i + "}")

    def _merge_ok(self, a, b) -> bool:
        """A pointwise stage and the reduction after it over the same inner ranges run
        as one loop (the reduction reading the value just stored): softmax's exp and
        sum, layer_norm's centring and sum of squares -- one pass over the row less.
        Only where the reduction's loop is vectorised with a reduction clause (not the
        sequential argmax/argmin, not the two-pass var)."""
        p = self.group.p
        return (config.merge_reduction_loops and not a.is_reduction and b.is_reduction
                and b.data.reduction_type in ("sum", "prod", "amax", "amin", "any", "all")
                and bool(a.inner(p)) and _same(a.inner(p), b.rranges))

    def _sibling_sums(self, nodes, i) -> list:
        """The run of sum reductions starting at ``nodes[i]`` that share one loop
        (``_sibling_sums_stage``): the same reduction ranges, none reading another's result,
        none streamed or prefetching (``_stream_plan``). Why: batch norm's backward sums the
        output gradient and its products with the normalised input per channel -- four sums
        over the same 32 x 16 x 16 values for one norm, eight where two norms share the
        gradient (a residual block's), each its own loop reading the gradient again."""
        if not config.merge_sibling_reductions:
            return []
        first = nodes[i]

        def ok(n):
            return (n.is_reduction and n.data.reduction_type == "sum" and n.name not in self.stream
                    and n.name not in self.prefetch)
        if not ok(first):
            return []
        R = first.data.reduction_ranges
        if not R:
            return []
        p = self.group.p

        def heavy(n):
            # (a loop calling exp/tanh may be staged in strips with float partial sums, see
            # cpp_strips.strip_loops; a plain sum merged into it would lose its double accumulator)
            return bool(_OpNames.of(n, p) & _TRANSCENDENTAL)
        kind = heavy(first)
        run, names = [first], {first.name}
        for n in nodes[i + 1:]:
            if not ok(n) or not _same(n.data.reduction_ranges, R) or heavy(n) != kind or \
                    any(b in names for b, _ in n.reads(p)):
                break
            run.append(n)
            names.add(n.name)
        return run

    def _sibling_sums_stage(self, run, p, xs, lines, ind):
        """The sum reductions of ``run`` in one loop nest, an accumulator each (a reduction
        clause each: the arithmetic of a loop of its own, though the vectoriser may split off
        another tail, so a double sum can differ in its last ulps), their loads and shared
        subexpressions computed once per element."""
        for n in run:
            lines.append(f"{ind}// {n!r}")
        lines.append(f"{ind}// ({len(run)} sums over the same ranges: one loop)")
        lines.append(ind + "{")
        ind2 = ind + "    "
        R = run[0].data.reduction_ranges
        rs = index_vars("r", len(R))
        accs = []
        for n in run:
            at = _acc_type("sum", COMPUTE[n.data.src_dtype])
            a = self.new_tmp()
            lines.append(f"{ind2}{at} {a} = static_cast<{at}>(0);")
            accs.append(a)
        clause = " ".join(f"reduction(+:{a})" for a in accs)
        pre = len(lines)
        bi = self._inner_loops(rs, R, ind2, lines, f"#pragma omp simd {clause}" if config.simd else None)
        hoisted: List[str] = []
        h = CppOps(self, lines, bi, (hoisted, ind2, {r.name for r in rs}),
                   ranges=_ranges(xs + rs, list(self.group.outer_sizes) + list(R)))
        with set_ops_handler(h):
            vals = [n.data.inner_fn(xs, rs) for n in run]
        for a, v in zip(accs, vals):
            lines.append(f"{bi}{a} = {a} + {v};")
        self._close(len(rs), ind2, lines)
        lines[pre:pre] = hoisted
        for n, a in zip(run, accs):
            self._store(n, n.write_index(p), a, ind2, lines)
        lines.append(ind + "}")

    def _stage(self, node, p, xs, lines, ind, parallel_inner=False, outer_hoist=None, pre=None,
               shared=None):
        """One node of the group inside the loops over ``xs``. ``shared``: (cse, hoisted) of
        the stages before it in the same loop body: a pointwise stage with no loops of its own
        reuses their loads and values and declares its own at the loop-body level (no block of
        its own). Why: GCC loses ``__restrict__`` inside OpenMP-outlined loops, so it neither
        merges a reload of an input across the previous stage's store nor the value computed
        twice: AdamW's update read the gradient three times and computed ``v`` twice per
        element (in-place AdamW: the old values are the ones the graph means, too)."""
        lines.append(f"{ind}// {node!r}" + (f" (in the loop of {pre.name})" if pre is not None else ""))
        flat = shared is not None and not node.is_reduction and not node.inner(p)
        if flat:
            h = CppOps(self, lines, ind, outer_hoist, ranges=_ranges(xs, list(self.group.outer_sizes)),
                       written_inside={n.name for n in self.group.nodes} if outer_hoist else ())
            h.cse, h._hoisted = shared
            with set_ops_handler(h):
                val = node.data.inner_fn(xs)
            self._store(node, node.write_index(p), val, ind, lines)
            dt = node.buf.get_dtype()
            if (isinstance(val, CppVar) and val.dtype is dt and dt not in (_t.float16, _t.bfloat16, _t.bool_)
                    and node.name not in self.store_redirect and node.name not in self.local):
                # a later stage's load of what this one stored is the stored value itself
                shared[0][f"{node.name}[{cexpr(node.write_index(p))}]"] = val
            return
        lines.append(ind + "{")
        ind2 = ind + "    "
        if node.is_reduction:
            self._reduction_stage(node, p, xs, lines, ind2, parallel_inner, pre=pre)
        else:
            Q = node.inner(p)
            rs = index_vars("r", len(Q))
            pragma = None
            if Q:
                pragma = "#pragma omp simd" if config.simd else None
                if parallel_inner:
                    par = self._parallel_pragma(product(Q))
                    if par:
                        pragma = par.replace("parallel for", "parallel for simd" if config.simd else "parallel for")
            pre = len(lines)
            body_ind = self._inner_loops(rs, Q, ind2, lines, pragma)
            hoisted: List[str] = []
            # (the outer hoist goes before the loop nest every stage of the group writes in)
            h = CppOps(self, lines, body_ind, (hoisted, ind2, {r.name for r in rs}) if Q else outer_hoist,
                       ranges=_ranges(xs + rs, list(self.group.outer_sizes) + list(Q)),
                       written_inside={n.name for n in self.group.nodes} if not Q and outer_hoist else ())
            with set_ops_handler(h):
                val = node.data.inner_fn(xs + rs)
            self._store(node, node.write_index(p), val, body_ind, lines)
            self._close(len(Q), ind2, lines)
            lines[pre:pre] = hoisted
        lines.append(ind + "}")

    def _reduction_stage(self, node, p, xs, lines, ind, parallel_inner, pre=None):
        red = node.data
        rtype = red.reduction_type
        src = red.src_dtype
        ct = COMPUTE[src]
        fp = src.category == 2
        R = red.reduction_ranges
        rs = index_vars("r", len(R))
        widx = node.write_index(p)
        pre_node = pre

        def pragma_for(clause):
            base = "#pragma omp simd" if config.simd else None
            if parallel_inner:
                par = self._parallel_pragma(product(R), clause)
                if par:
                    return par.replace("parallel for", "parallel for simd" if config.simd else "parallel for")
            if base and clause:
                return base + " " + clause
            return base

        def body(acc_lines_fn, clause, acc_decls):
            for d in acc_decls:
                lines.append(ind + d)
            pre = len(lines)
            bi = self._inner_loops(rs, R, ind, lines, pragma_for(clause))
            hoisted: List[str] = []
            h = CppOps(self, lines, bi, (hoisted, ind, {r.name for r in rs}),
                       ranges=_ranges(xs + rs, list(self.group.outer_sizes) + list(R)),
                       written_inside=(pre_node.name,) if pre_node is not None else ())
            with set_ops_handler(h):
                if pre_node is not None:   # the merged pointwise stage, stored first
                    self._store(pre_node, pre_node.write_index(p), pre_node.data.inner_fn(xs + rs), bi, lines)
                v = red.inner_fn(xs, rs)
            for ln in acc_lines_fn(v):
                lines.append(bi + ln)
            self._close(len(rs), ind, lines)
            lines[pre:pre] = hoisted

        acc_name = self.new_tmp()
        if rtype in ("sum", "prod"):
            init = "0" if rtype == "sum" else "1"
            op = "+" if rtype == "sum" else "*"
            at = _acc_type(rtype, ct)
            body(lambda v: [f"{acc_name} = {acc_name} {op} {v};"], f"reduction({op}:{acc_name})",
                 [f"{at} {acc_name} = static_cast<{at}>({init});"])
            self._store(node, widx, acc_name, ind, lines)
        elif rtype in ("amax", "amin"):
            cmp, red_op = (">", "max") if rtype == "amax" else ("<", "min")
            if fp:
                init = f"{'-' if rtype == 'amax' else ''}std::numeric_limits<{ct}>::infinity()"
            else:
                init = f"std::numeric_limits<{ct}>::{'lowest' if rtype == 'amax' else 'max'}()"
            nan = self.new_tmp()
            decls = [f"{ct} {acc_name} = {init};"]
            clause = f"reduction({red_op}:{acc_name})"
            if fp:
                decls.append(f"int {nan} = 0;  // int, not bool: a bool reduction blocks vectorisation")
                clause += f" reduction(|:{nan})"

            def upd(v):
                out = [f"{acc_name} = {v} {cmp} {acc_name} ? {v} : {acc_name};"]
                if fp:
                    out.append(f"{nan} |= static_cast<int>({v} != {v});")
                return out
            body(upd, clause, decls)
            res = f"({nan} ? std::numeric_limits<{ct}>::quiet_NaN() : {acc_name})" if fp else acc_name
            self._store(node, widx, res, ind, lines)
        elif rtype in ("any", "all"):
            op = "|" if rtype == "any" else "&"
            body(lambda v: [f"{acc_name} {op}= static_cast<int>({v} != 0);"], f"reduction({op}:{acc_name})",
                 [f"int {acc_name} = {'0' if rtype == 'any' else '1'};"])
            self._store(node, widx, f"({acc_name} != 0)", ind, lines)
        elif rtype in ("argmax", "argmin"):
            cmp = ">" if rtype == "argmax" else "<"
            idx_name, first = self.new_tmp(), self.new_tmp()
            decls = [f"{ct} {acc_name} = 0;", f"int64_t {idx_name} = 0;", f"bool {first} = true;"]
            rflat = cexpr(sum((r * s for r, s in zip(rs, contiguous_strides(R))), sympy.Integer(0)))
            nanchk = (lambda v: f" || ({v} != {v})") if fp else (lambda v: "")
            stop = f"!({acc_name} != {acc_name}) && " if fp else ""

            def upd(v):
                return [f"if ({first} || ({stop}({v} {cmp} {acc_name}{nanchk(v)}))) "
                        f"{{ {acc_name} = {v}; {idx_name} = {rflat}; {first} = false; }}"]
            # sequential: first-occurrence semantics need the scan order
            for d in decls:
                lines.append(ind + d)
            bi = self._inner_loops(rs, R, ind, lines, None)
            h = CppOps(self, lines, bi, ranges=_ranges(xs + rs, list(self.group.outer_sizes) + list(R)))
            with set_ops_handler(h):
                v = red.inner_fn(xs, rs)
            for ln in upd(v):
                lines.append(bi + ln)
            self._close(len(rs), ind, lines)
            self._store(node, widx, idx_name, ind, lines)
        elif rtype == "var":
            n = product(R)
            at = _acc_type("sum", ct)
            body(lambda v: [f"{acc_name} = {acc_name} + {v};"], f"reduction(+:{acc_name})",
                 [f"{at} {acc_name} = 0;"])
            mean = self.new_tmp()
            lines.append(f"{ind}const {ct} {mean} = {acc_name} / static_cast<{ct}>({cexpr(n)});")
            m2 = self.new_tmp()

            def upd(v):
                d = self.new_tmp()
                return [f"{ct} {d} = {v} - {mean};", f"{m2} = {m2} + {d} * {d};"]
            body(upd, f"reduction(+:{m2})", [f"{at} {m2} = 0;"])
            corr = float(red.correction)
            denom = f"static_cast<{ct}>(std::max<double>(static_cast<double>({cexpr(n)}) - {corr!r}, 0.0))"
            self._store(node, widx, f"{m2} / {denom}", ind, lines)
        else:  # pragma: no cover - Reduction validates its type
            raise NotImplementedError(rtype)


_TRANSCENDENTAL = set(ir.UNARY_OPS) - {"abs", "neg", "sign", "floor", "ceil", "round", "trunc", "bitwise_not",
                                       "sqrt", "rsqrt", "reciprocal"} | {"pow", "atan2"}


class _OpNames(ir.ReadRecorder):
    """Records the names of the ops a body calls."""

    @classmethod
    def of(cls, node, p) -> set:
        ops = cls()
        xs, rs = index_vars("x", p), index_vars("r", len(node.inner(p)))
        with set_ops_handler(ops):
            if node.is_reduction:
                node.data.inner_fn(xs, rs)
            else:
                node.data.inner_fn(xs + rs)
        return ops.names

    def __init__(self):
        super().__init__()
        self.names = set()

    def __getattr__(self, name):
        if not name.startswith("__"):
            self.names.add(name)
        return super().__getattr__(name)


def _flattened(group, local):
    """A pointwise group whose every access walks its dims as one linear range (contiguous
    buffers read and written in the same order, as an optimizer's update over a 500x500
    parameter), as a 1-d group of the same nodes: one ``parallel for simd`` loop over all
    elements instead of rows of 500 with a masked vector tail each. None when it does not
    apply."""
    from ..scheduler import FusedGroup, has_div_mod
    nodes = group.nodes
    if type(group) is not FusedGroup or not nodes or any(
            n.is_reduction or n.is_scatter or n.name in local for n in nodes):
        return None
    S = nodes[0].size
    if len(S) < 2 or any(n.size != S for n in nodes) or not all(getattr(d, "is_Integer", False) for d in S):
        return None
    if group.p != len(S):       # the scheduler's blocks run stage by stage (_stage_major_blocks)
        return None
    xs = index_vars("x", len(S))
    for n in nodes:
        ops = _OpNames()
        with set_ops_handler(ops):
            n.data.inner_fn(xs)
        if "philox" in ops.names:
            # random numbers match eager bit for bit only where short rows stay scalar: a
            # vectorised Box-Muller calls libmvec's cos/log, ulps away from libm's
            return None
        idxs = [i for _, i in n.reads(len(S))] + [n.write_index(len(S))]
        for idx in idxs:
            idx = sympy.expand(idx)
            cs = [idx.coeff(x) for x in xs]
            rest = sympy.expand(idx - sum(c * x for c, x in zip(cs, xs)))
            if any(c.free_symbols for c in cs) or rest.free_symbols & set(xs):
                return None
            if any(sympy.expand(cs[i] - cs[i + 1] * S[i + 1]) != 0 for i in range(len(S) - 1)):
                return None
    flat = [n.reindexed([product(S)]) for n in nodes]
    if any(has_div_mod(f, 1) for f in flat):     # every index must simplify back to a linear one
        return None
    return FusedGroup(flat, 1)


from ..scheduler import _ReindexedData  # noqa: E402 -- the split below is one of its reindexings


def _split_div_mod(group, local):
    """A pointwise group whose indices divide a loop variable (``x2 // 64``, ``x2 % 64``: a
    permuted view read into a merged dim, as attention's heads gathered back into one row), as
    the same group over that dim split at the divisors (768 -> [12, 64]), so every index is
    affine again: the inner loop walks 64 contiguous elements instead of computing a
    division and a modulo per element and reading through a gather. nanoGPT's backward
    merges q/k/v gradients this way (4 such kernels a step, at 2-3 GB/s before). None when it
    does not apply (divisors that do not chain, indices that keep a division)."""
    from ..scheduler import FusedGroup
    from ..sizevars import FloorDiv, ModularIndexing
    nodes = group.nodes
    if type(group) is not FusedGroup or not nodes or any(
            n.is_reduction or n.is_scatter or n.is_scan or n.name in local for n in nodes):
        return None
    S = nodes[0].size
    if any(n.size != S for n in nodes) or group.p != len(S) or \
            not all(getattr(d, "is_Integer", False) for d in S) or any(int(d) == 0 for d in S):
        return None       # (an empty loop: nothing to split, and its views divide by zero sizes)
    xs = index_vars("x", len(S))
    cuts = {x: set() for x in xs}
    for n in nodes:
        for idx in [i for _, i in n.reads(len(S))] + [n.write_index(len(S))]:
            for sub in sympy.preorder_traversal(sympify(idx)):
                if isinstance(sub, FloorDiv) and sub.args[1].is_Integer:
                    ks = (int(sub.args[1]),)
                elif isinstance(sub, ModularIndexing) and sub.args[1].is_Integer and sub.args[2].is_Integer:
                    ks = (int(sub.args[1]), int(sub.args[1] * sub.args[2]))
                else:
                    continue
                x = _shifted_var(sub.args[0], ks[0])
                if x is None or x not in cuts:
                    return None
                cuts[x].update(ks)
    new_size, parts = [], []        # parts: per old dim, the new dims it is made of
    for x, n in zip(xs, S):
        ks = sorted(k for k in cuts[x] if 1 < k < int(n))
        if not ks or any(b % a for a, b in zip(ks, ks[1:] + [int(n)])):
            if ks:
                return None
            parts.append([len(new_size)])
            new_size.append(n)
            continue
        bounds = [int(n)] + ks[::-1]
        dims = [sympy.Integer(a // b) for a, b in zip(bounds, bounds[1:])] + [sympy.Integer(ks[0])]
        parts.append(list(range(len(new_size), len(new_size) + len(dims))))
        new_size += dims
    if len(new_size) == len(S):
        return None
    # (a cat's pieces still clamp the divided variable, ``FloorDiv(Max(0, x2 - 256), 64)``: the
    # loop split resolves those, ``_segments`` on the divided dims)
    return FusedGroup([_split_node(n, new_size, parts) for n in nodes], len(new_size))


class _SplitData(_ReindexedData):
    """A pointwise body over dims split at divisors: old index ``x2`` is ``64*y2 + y3`` (the
    new dims of each old one combined with their strides) -- small expressions, where the
    generic ``SchedNode.reindexed`` (flat position, then divisions) gave the simplifier
    nanoGPT-sized work (its training graph's codegen took seconds longer)."""

    def __init__(self, data, old_size, new_size, parts):
        super().__init__(data, old_size, new_size)
        self._parts = parts

    def inner_fn(self, ys):
        old = []
        for dims in self._parts:
            e, stride = sympy.Integer(0), sympy.Integer(1)
            for j in reversed(dims):
                e, stride = e + ys[j] * stride, stride * self._new[j]
            old.append(e)
        return self._data.inner_fn(old)


def _split_node(node, new_size, parts):
    r = node.reindexed(new_size)
    r.data = _SplitData(node.data, node.size, new_size, parts)
    return r


def _shifted_var(e, k):
    """The loop variable ``x`` when ``e`` is ``x`` shifted by multiples of ``k`` under clamps
    (``x``, ``x - 256``, ``Max(0, Min(255, x - 256))`` for k = 64), else None."""
    if isinstance(e, (sympy.Max, sympy.Min)):
        xs = {_shifted_var(a, k) if a.free_symbols else "const" for a in e.args}
        xs.discard("const")
        return xs.pop() if len(xs) == 1 and None not in xs and all(
            not a.free_symbols and a.is_Integer for a in e.args if not a.free_symbols) else None
    e = sympy.expand(e)
    if len(e.free_symbols) != 1:
        return None
    x = next(iter(e.free_symbols))
    rest = sympy.expand(e - x)
    return x if e.coeff(x) == 1 and rest.is_Integer and int(rest) % k == 0 else None


class _ExprRecorder(ir.ReadRecorder):
    """Records loads and ``index_expr`` expressions of a body (loop splitting)."""

    def __init__(self):
        super().__init__()
        self.exprs = []

    def index_expr(self, expr, dtype):
        self.exprs.append(sympify(expr))
        return ir._VAL


def _linear_zero(d, v):
    """The integer ``v0`` where ``d`` (linear in ``v`` with a unit coefficient, no
    other variable) is 0, else None."""
    d = sympy.expand(d)
    if d.free_symbols != {v}:
        return None
    c = d.coeff(v)
    if c not in (1, -1):
        return None
    k = sympy.expand(d - c * v)
    if not k.is_Integer:
        return None
    return int(-k * c)


def _split_zero(d, v, rng):
    """For ``d = c*v + K + r`` (``r`` over the other loop variables, in [0, |c|) on ``rng``; ``K``
    a multiple of ``c``: a dim split at a divisor, ``64*x2 + x3 - 256``), the ``v`` where ``d``
    changes sign, ``-K / c`` (4 there), else None."""
    from ..sizevars import index_bounds
    d = sympy.expand(d)
    c = d.coeff(v)
    if not c.is_Integer or c == 0:
        return None
    rest = sympy.expand(d - c * v)
    if v in rest.free_symbols:
        return None
    K = rest.as_coeff_Add()[0] if rest.is_Add else (rest if rest.is_Integer else sympy.Integer(0))
    r = sympy.expand(rest - K)
    if not K.is_Integer or not r.free_symbols:
        return None
    b = index_bounds(r, rng)
    if b is None or b[0] < 0 or b[1] >= abs(int(c)) or int(K) % int(c):
        return None
    return -int(K) // int(c)


def _flips_at(rel, v, t, rng):
    """Whether relation ``rel`` is constant over the other variables' ranges for ``v = t - 1``
    and for ``v = t``, with different values (a split point that resolves it on both sides)."""
    from ..sizevars import index_bounds
    d = sympy.expand(rel.lhs - rel.rhs)
    vals = []
    for at in (t - 1, t):
        b = index_bounds(sympy.expand(d.subs(v, at)), rng)
        if b is None:
            return False
        got = {bool(type(rel)(sympy.Integer(x), 0)) for x in b}
        if len(got) != 1:
            return False
        vals.append(got.pop())
    return vals[0] != vals[1]


def _ranges(vars_, sizes):
    return {v: (sympy.Integer(0), sympify(n)) for v, n in zip(vars_, sizes)}


def _same(a, b):
    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


def _natural(name):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def data_offset() -> int:
    """Offset of the data pointer in a numpy array object, checked against numpy's
    own answer (it is ``sizeof(PyObject)``, public ABI of ``PyArrayObject_fields``)."""
    import ctypes
    import sys
    off = 2 * ctypes.sizeof(ctypes.c_void_p) if not hasattr(sys, "getobjects") else 4 * ctypes.sizeof(ctypes.c_void_p)
    for a in (np.empty(3, np.float32), np.empty((2, 5), np.int64)[:, 1:]):
        if ctypes.c_void_p.from_address(id(a) + off).value != a.ctypes.data:
            raise RuntimeError("inductor: unexpected numpy array layout (data pointer not found)")
    return off


# double exp without libmvec's scalar fallback for tiny results (float32: cpp_strips). glibc's vector
# exp hands every lane whose result is denormal or zero to scalar exp, one call per lane (softmax's
# masked -inf scores); such lanes are computed in range instead: the input clamped (every x below
# the clamp gives 0 anyway) and shifted, the result scaled back. Error: half a denormal ulp (the
# one rounding onto the denormal grid) plus exp's and e^-50's relative error times the value
# (about 2 denormal ulps near DBL_MIN).
EXP_HELPERS = r'''
static inline double ember_exp(double x) {
    const bool tiny = x < -708.3964185322641;                   // below ln(DBL_MIN)
    const double lo = x > -750.0 ? x : -750.0;
    const double e = exp(ember_sel(tiny, lo + 50.0, x));
    return e * ember_sel(tiny, 1.9287498479639178e-22, 1.0);    // e^-50
}
'''


def generate_source(kernels: List[str]) -> str:
    parts = [f"#define EMBER_DATA_OFFSET {data_offset()}", PRELUDE]
    if config.simd:
        parts.append(simd_declarations())
    parts.append(VEXP_HELPERS)
    parts.append(EXP_HELPERS)
    parts.extend(kernels)
    return "\n".join(parts)
