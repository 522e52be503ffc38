"""Native loops for eager ops whose numpy formulation costs many calls or a full sort: erfinv,
topk and max pooling (with indices).

Why. ``erfinv``'s numpy formulation is a first guess plus Halley steps, ~40 numpy calls however
small the array (~50 us for 8x8, 35x PyTorch) and as many full-size temporaries on large ones
(~40 ms for 256K float32 elements, 80x PyTorch). ``topk`` sorted the whole row (a stable
argsort, twice flipped) to keep k of it: 6.5 ms for (64, 1000), k=5, 40x PyTorch.
``max_pool_with_indices`` built window views, NaN masks, argmaxes and an unravelled index:
~50 us at 8x8, 3x PyTorch at (64, 64, 32, 32). Here each is one loop over the data, compiled by
the inductor's code cache (same compiler and strict IEEE flags) on first use.

What they compute:

* erfinv: not the numpy formulation's steps but the branch-free series of ``_erfinv_cpp``
  (shared with the inductor's C++ code), which g++ vectorises: float32 results are the float32
  rounding of a ~7e-11-accurate double (correctly rounded but for rare ties: 0 ulp from
  PyTorch's on every tested value), float64 within 3 ulp of the exact value (the numpy
  formulation and PyTorch: ~1 ulp). Special values as PyTorch: +-0 -> +-0, +-1 -> +-inf,
  NaN outside [-1, 1]. Every size runs here; threads above ``_PARALLEL_MIN`` elements.
* topk: the order of a stable sort -- NaN the largest, equal values (-0.0 == 0.0 included) in
  index order -- found by ``nth_element`` and a sort of the k chosen, not a full sort; the
  values and indices are those of ``reduction._topk``.
* max pooling: NaN is the maximum (the first NaN of a window wins), ties go to the first
  position in window order; only positions inside the input are candidates (as the numpy form
  and the compiled decomposition); a window with none (dilation over a small input) gives -inf,
  the lowest integer for integer inputs, and index -1, which the backward skips.

When. numpy arrays of the supported dtypes, once the library is built; otherwise (no C++
compiler, a cupy or fake array, an unsupported dtype) the callers' numpy paths run. These are
kernels of registered ops, so autograd, dispatch modes and the compiler see the same ops as
before -- only the numpy arithmetic inside a kernel changed.
"""
from __future__ import annotations

import ctypes
import logging
import math

import numpy as np

from ..runtime.native import LazyLibrary
from . import _erfinv_cpp

log = logging.getLogger("ember.ops")

# numpy dtype -> the C++ type name the templates are instantiated for
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.int64): "int64_t",
           np.dtype(np.int32): "int32_t", np.dtype(np.int16): "int16_t", np.dtype(np.int8): "int8_t",
           np.dtype(np.uint8): "uint8_t"}
_SUFFIX = {"float": "f32", "double": "f64", "int64_t": "i64", "int32_t": "i32", "int16_t": "i16",
           "int8_t": "i8", "uint8_t": "u8"}

_PARALLEL_MIN = 65536     # elements below which the loops run on the calling thread only

_SOURCE = r"""
#include <cstdint>
#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>
#include <omp.h>
typedef int64_t i64;
@ERFINV_CPP@

template <typename T> static inline bool is_nan(T v) { return false; }
template <> inline bool is_nan<float>(float v) { return std::isnan(v); }
template <> inline bool is_nan<double>(double v) { return std::isnan(v); }

// ---- erfinv: the branch-free series of _erfinv_cpp.py, one vectorised loop
template <typename T, bool F64>
static void erfinv_loop(i64 n, const T* __restrict x, T* __restrict out, int threads) {
    #pragma omp parallel for simd schedule(static) num_threads(threads) if(parallel: n > PARALLEL_MIN)
    for (i64 i = 0; i < n; ++i) out[i] = static_cast<T>(ember_erfinv_d<F64>(static_cast<double>(x[i])));
}
extern "C" void ember_erfinv_f32(i64 n, const float* x, float* out, int threads) {
    erfinv_loop<float, false>(n, x, out, threads);
}
extern "C" void ember_erfinv_f64(i64 n, const double* x, double* out, int threads) {
    erfinv_loop<double, true>(n, x, out, threads);
}

// ---- topk: the first k of a stable sort (NaN largest), per lane (outer, n, inner) of any strides
template <typename T>
static inline bool better(T u, T v, int largest) {    // u strictly before v in the sort (values only)
    const bool un = is_nan(u), vn = is_nan(v);
    if (un != vn) return largest ? un : vn;            // NaN: first when largest, last otherwise
    if (un) return false;
    return largest ? u > v : u < v;
}

template <typename T>
static void topk(const T* x, const i64* g, T* vals, i64* idx) {
    const i64 outer = g[0], n = g[1], inner = g[2], so = g[3], sn = g[4], si = g[5], k = g[6];
    const int largest = (int)g[7], threads = (int)g[8];
    const i64 lanes = outer * inner;
    const bool small_k = k <= 16 && k * 8 <= n;
    #pragma omp parallel num_threads(threads) if(lanes * n > PARALLEL_MIN && lanes > 1)
    {
        std::vector<T> buf(small_k ? k : n);
        std::vector<i64> ix(small_k ? k : n);
        #pragma omp for schedule(static)
        for (i64 lane = 0; lane < lanes; ++lane) {
            const i64 o = lane / inner, i = lane % inner;
            const T* src = x + o * so + i * si;
            T* vo = vals + o * k * inner + i;
            i64* io = idx + o * k * inner + i;
            if (small_k) {
                // one pass keeping the k best in order; a later equal value never passes an earlier
                // one (index order among equals, as a stable sort)
                i64 filled = 0;
                for (i64 j = 0; j < n; ++j) {
                    const T v = src[j * sn];
                    if (filled == k && !better(v, buf[k - 1], largest)) continue;
                    i64 pos = filled < k ? filled++ : k - 1;
                    while (pos > 0 && better(v, buf[pos - 1], largest)) {
                        buf[pos] = buf[pos - 1];
                        ix[pos] = ix[pos - 1];
                        --pos;
                    }
                    buf[pos] = v;
                    ix[pos] = j;
                }
                for (i64 j = 0; j < k; ++j) { vo[j * inner] = buf[j]; io[j * inner] = ix[j]; }
                continue;
            }
            for (i64 j = 0; j < n; ++j) { buf[j] = src[j * sn]; ix[j] = j; }
            const T* b = buf.data();
            auto before = [b, largest](i64 p, i64 q) {
                if (better(b[p], b[q], largest)) return true;
                if (better(b[q], b[p], largest)) return false;
                return p < q;                              // equal: index order (a stable sort's)
            };
            if (k < n) std::nth_element(ix.begin(), ix.begin() + k, ix.end(), before);
            std::sort(ix.begin(), ix.begin() + k, before);
            for (i64 j = 0; j < k; ++j) { vo[j * inner] = b[ix[j]]; io[j * inner] = ix[j]; }
        }
    }
}

// ---- max pooling with indices over (N, C, D, H, W) of any strides (1-d / 2-d: leading sizes 1)
// the taps [t0, t1) of a window starting at `start` (step `dil`, `k` taps) inside [0, size)
static inline void valid_taps(i64 start, i64 dil, i64 k, i64 size, i64& t0, i64& t1) {
    t0 = start >= 0 ? 0 : (-start + dil - 1) / dil;
    const i64 last = size - 1 - start;                   // the largest offset inside
    t1 = last < 0 ? 0 : std::min(k, last / dil + 1);
    if (t1 < t0) t1 = t0;
}

// g: N C D H W | oD oH oW | kD kH kW | sD sH sW | pD pH pW | dD dH dW | strides N C D H W | threads
template <typename T>
static void max_pool(const T* x, const i64* g, T* out, i64* idx) {
    const i64 N = g[0], C = g[1], D = g[2], H = g[3], W = g[4];
    const i64 oD = g[5], oH = g[6], oW = g[7];
    const i64 kD = g[8], kH = g[9], kW = g[10], sD = g[11], sH = g[12], sW = g[13];
    const i64 pD = g[14], pH = g[15], pW = g[16], dD = g[17], dH = g[18], dW = g[19];
    const i64 xN = g[20], xC = g[21], xD = g[22], xH = g[23], xW = g[24];
    const int threads = (int)g[25];
    const i64 planes = N * C, per = oD * oH * oW;
    const i64 work = planes * per * kD * kH * kW;
    #pragma omp parallel for schedule(static) num_threads(threads) if(work > PARALLEL_MIN && planes > 1)
    for (i64 pl = 0; pl < planes; ++pl) {
        const T* xp = x + (pl / C) * xN + (pl % C) * xC;
        T* op = out + pl * per;
        i64* ip = idx + pl * per;
        for (i64 od = 0; od < oD; ++od) {
            i64 a0, a1;
            valid_taps(od * sD - pD, dD, kD, D, a0, a1);
            for (i64 oh = 0; oh < oH; ++oh) {
                i64 b0, b1;
                valid_taps(oh * sH - pH, dH, kH, H, b0, b1);
                for (i64 ow = 0; ow < oW; ++ow) {
                    i64 c0, c1;
                    const i64 w0 = ow * sW - pW;
                    valid_taps(w0, dW, kW, W, c0, c1);
                    if (a1 <= a0 || b1 <= b0 || c1 <= c0) {
                        // a window entirely in padding (dilation can skip the input): the max of
                        // nothing, -inf (the lowest integer) as PyTorch; index -1, no gradient
                        op[(od * oH + oh) * oW + ow] = std::numeric_limits<T>::has_infinity
                            ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
                        ip[(od * oH + oh) * oW + ow] = -1;
                        continue;
                    }
                    // the first position inside the input starts; a later one replaces it when
                    // greater or NaN (!(v <= best)); a NaN ends the window (the first NaN wins)
                    i64 id = od * sD - pD + a0 * dD, ih = oh * sH - pH + b0 * dH, iw = w0 + c0 * dW;
                    T best = xp[id * xD + ih * xH + iw * xW];
                    i64 bi = (id * H + ih) * W + iw;
                    if (is_nan(best)) goto done;
                    for (i64 a = a0; a < a1; ++a) {
                        id = od * sD - pD + a * dD;
                        for (i64 b = b0; b < b1; ++b) {
                            ih = oh * sH - pH + b * dH;
                            const T* row = xp + id * xD + ih * xH;
                            for (i64 c = c0; c < c1; ++c) {
                                iw = w0 + c * dW;
                                const T v = row[iw * xW];
                                if (!(v <= best)) {
                                    best = v;
                                    bi = (id * H + ih) * W + iw;
                                    if (is_nan(v)) goto done;
                                }
                            }
                        }
                    }
                done:
                    const i64 o = (od * oH + oh) * oW + ow;
                    op[o] = best;
                    ip[o] = bi;
                }
            }
        }
    }
}

#define INSTANTIATE(T, SFX) \
extern "C" void ember_topk_##SFX(const T* x, const i64* g, T* v, i64* i) { topk<T>(x, g, v, i); } \
extern "C" void ember_max_pool_##SFX(const T* x, const i64* g, T* v, i64* i) { max_pool<T>(x, g, v, i); }
INSTANTIATE(float, f32)
INSTANTIATE(double, f64)
INSTANTIATE(int64_t, i64)
INSTANTIATE(int32_t, i32)
INSTANTIATE(int16_t, i16)
INSTANTIATE(int8_t, i8)
INSTANTIATE(uint8_t, u8)
"""


def _source() -> str:
    return (_SOURCE.replace("@ERFINV_CPP@", _erfinv_cpp.SOURCE)
            .replace("PARALLEL_MIN", str(_PARALLEL_MIN)))


def _build():
    from ..inductor import codecache
    L = codecache.load(_source())
    P = ctypes.c_void_p
    fns = {}
    for np_dt, sfx in ((np.dtype(np.float32), "f32"), (np.dtype(np.float64), "f64")):
        f = getattr(L, f"ember_erfinv_{sfx}")
        f.argtypes = [ctypes.c_int64, P, P, ctypes.c_int]
        f.restype = None
        fns["erfinv", np_dt] = f
    for np_dt, cname in _CTYPES.items():
        sfx = _SUFFIX[cname]
        for kind in ("topk", "max_pool"):
            fn = getattr(L, f"ember_{kind}_{sfx}")
            fn.argtypes = [P, P, P, P]
            fn.restype = None
            fns[kind, np_dt] = fn
    return L, fns


lib = LazyLibrary(_build, "native erfinv/topk/max pooling (the numpy formulations are used)", log).get


_addressof = ctypes.addressof
_c_char_from_buffer = ctypes.c_char.from_buffer


def _ptr(a) -> int:
    """The address of numpy array ``a``'s first element: through the buffer protocol for a
    writable row-major array (~1 us, a third of ``a.ctypes.data``'s cost, which builds a helper
    object each call), else (read-only, strided or empty arrays) ``a.ctypes.data``."""
    try:
        return _addressof(_c_char_from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _threads(n: int) -> int:
    if n > _PARALLEL_MIN:
        from .._openmp import num_threads
        return num_threads()
    return 1


def erfinv(x):
    """erfinv of a float32 or float64 numpy array, in its dtype, laid out as the numpy formulation's
    result (``pointwise._erfinv``; the op's meta); None when the library is unavailable or ``x``
    is not such an array (the numpy formulation runs then)."""
    if type(x) is not np.ndarray:
        return None
    got = lib()
    if got is None:
        return None
    fn = got[1].get(("erfinv", x.dtype))
    if fn is None:
        return None
    if x.flags.c_contiguous:
        out = np.empty(x.shape, x.dtype)
        if out.size:
            fn(x.size, _ptr(x), _ptr(out), _threads(x.size))
        return out
    # the numpy formulation's layout: a ufunc's output over the float64 view of ``x`` -- for
    # float32 a 'K'-order copy (empty_like's layout), for float64 ``x`` itself (a ufunc's result
    # for a sliced permuted input is not always empty_like's)
    out = np.empty_like(x) if x.dtype == np.float32 else np.positive(x)
    if out.flags.f_contiguous and x.flags.f_contiguous:
        fn(x.size, _ptr(x), _ptr(out), _threads(x.size))
        return out
    xc = np.asarray(x, order="C")
    res = np.empty(x.shape, x.dtype)
    fn(xc.size, _ptr(xc), _ptr(res), _threads(xc.size))
    out[...] = res
    return out


def topk(a, k: int, d: int, largest: bool):
    """(values, int64 indices) of the first ``k`` of a stable sort of ``a`` along axis ``d``
    (descending when ``largest``; NaN the largest), C-contiguous with ``k`` at ``d``; None when
    the native path does not cover ``a``."""
    if type(a) is not np.ndarray or a.ndim == 0:
        return None
    got = lib()
    if got is None:
        return None
    fn = got[1].get(("topk", a.dtype))
    if fn is None:
        return None
    shape = a.shape
    n = shape[d]
    outer = math.prod(shape[:d])
    inner = math.prod(shape[d + 1:])
    out_shape = shape[:d] + (k,) + shape[d + 1:]
    vals = np.empty(out_shape, a.dtype)
    idx = np.empty(out_shape, np.int64)
    if vals.size == 0:
        return vals, idx
    isz = a.itemsize
    st = a.strides
    # the dims before (after) ``d`` run as one flattened dim of one stride: right when they are
    # row-major dense among themselves; otherwise (rare) a contiguous copy is searched instead
    so = _collapsed_stride(shape[:d], st[:d])
    si = _collapsed_stride(shape[d + 1:], st[d + 1:])
    if so is None or si is None:
        a = np.ascontiguousarray(a)
        st = a.strides
        so, si = _collapsed_stride(shape[:d], st[:d]), _collapsed_stride(shape[d + 1:], st[d + 1:])
    small = a.size <= _PARALLEL_MIN
    if small:
        key = ("topk", shape, st, isz, d, k, largest)
        hit = _GEO.get(key)
        if hit is not None:
            fn(_ptr(a), hit[1], _ptr(vals), _ptr(idx))
            return vals, idx
    geo = np.array([outer, n, inner, so // isz, st[d] // isz, si // isz, k, 1 if largest else 0,
                    _threads(a.size)], dtype=np.int64)
    gp = _ptr(geo)
    if small:
        _remember(key, geo, gp)
    fn(_ptr(a), gp, _ptr(vals), _ptr(idx))
    return vals, idx


_GEO = {}       # geometry arrays (with their addresses) of single-threaded calls, by their inputs


def _remember(key, geo, address):
    """Keep ``geo`` for calls with the same ``key`` (read only: the loops never write it; a
    single-threaded call's geometry depends on its key alone -- the thread count is 1)."""
    if len(_GEO) >= 512:
        _GEO.clear()
    _GEO[key] = (geo, address)


def _collapsed_stride(shape, strides):
    """The stride of ``shape``'s dims seen as one flattened dim (row-major), or None when they do
    not flatten to a single stride. Empty: 0 (a single position)."""
    st = None
    expect = None
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if st is None:
            st, expect = s, s * n
        elif s != expect:
            return None
        else:
            expect = s * n
    return 0 if st is None else st


_ONES = {n: (1,) * (3 - n) for n in (1, 2, 3)}      # leading sizes of a 1-d / 2-d pooling as 3-d
_ZEROS = {n: (0,) * (3 - n) for n in (1, 2, 3)}


def max_pool(x, k, s, p, d, out):
    """(values, int64 flat spatial indices) of max pooling ``x`` (N, C, *S; 1 to 3 spatial dims,
    any strides) into C-contiguous (N, C, *out); None when the native path does not cover ``x``."""
    if type(x) is not np.ndarray:
        return None
    got = lib()
    if got is None:
        return None
    fn = got[1].get(("max_pool", x.dtype))
    nd = len(k)
    if fn is None or not 1 <= nd <= 3:
        return None
    shape = x.shape
    isz = x.itemsize
    oshape = shape[:2] + tuple(out)
    vals = np.empty(oshape, x.dtype)
    idx = np.empty(oshape, np.int64)
    if not vals.size:
        return vals, idx
    small = x.size <= _PARALLEL_MIN
    if small:
        key = ("max_pool", shape, x.strides, isz, tuple(k), tuple(s), tuple(p), tuple(d), tuple(out))
        hit = _GEO.get(key)
        if hit is not None:
            fn(_ptr(x), hit[1], _ptr(vals), _ptr(idx))
            return vals, idx
    one, zero = _ONES[nd], _ZEROS[nd]
    xs = [t // isz for t in x.strides]
    # (one list display: this call is most of a small pooling's fixed cost)
    geo = np.array([*shape[:2], *one, *shape[2:], *one, *out, *one, *k, *one, *s, *zero, *p, *one, *d,
                    *xs[:2], *zero, *xs[2:], _threads(x.size)], dtype=np.int64)
    gp = _ptr(geo)
    if small:
        _remember(key, geo, gp)
    fn(_ptr(x), gp, _ptr(vals), _ptr(idx))
    return vals, idx
