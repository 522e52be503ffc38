"""A native fused Adam/AdamW update for eager steps: every parameter of a group in one pass.

Why. Eager Adam in numpy is ten single-threaded passes over each parameter and its state
(``mul_``, ``lerp_``, ``mul_``, ``addcmul_``, ``sqrt``, ``div``, ``add_``, ``addcdiv_``), each
reading and writing whole arrays and allocating temporaries: at the benchmark sizes it was
~2x PyTorch's own per-tensor step. Here one OpenMP-parallel, vectorised loop reads ``p``,
``g``, ``m``, ``v`` once and writes ``p``, ``m``, ``v`` once.

Same numbers. The loop performs exactly the element-wise operations of the op-by-op step
(``optim/adam.py``, PyTorch's ``_single_tensor_adam``), in the same order, in the tensor's
dtype, with the Python-float hyper-parameters rounded to that dtype first as the ops do; the
inductor's strict flags (``-ffp-contract=off``, no fast-math) keep each operation correctly
rounded, so the fused and op-by-op steps agree bit for bit (tested).

When. ``Adam``/``AdamW`` with ``fused=None`` (the default) or ``True`` use it for a group whose
parameters, gradients and state are C-contiguous float32 or float64 numpy arrays of one dtype,
outside ``ember.compile`` (there the traced ops are compiled and fused by the inductor anyway).
Otherwise the op-by-op step runs (``fused=True`` then raises, naming what is missing). Without a
C++ compiler :func:`lib` returns None (logged once) and the op-by-op step runs.
"""
from __future__ import annotations

import ctypes
import logging

import numpy as np

from ..runtime.native import LazyLibrary

log = logging.getLogger("ember.optim")

_SOURCE = r"""
#include <cstdint>
#include <cmath>
#include <omp.h>
typedef int64_t i64;

// flags: 1 decoupled weight decay (AdamW), 2 coupled (Adam's grad += wd * p), 4 amsgrad, 8 maximize
// s: [decay_or_wd, w1 (1 - beta1), beta2, 1 - beta2, bc2_sqrt, eps, -step_size] per tensor (7 each)
// ptr: [p, g, m, v, vmax] per tensor (vmax may be null)
template <class T, int DECAY, bool AMS, bool MAXIMIZE>
static void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                      T* __restrict vmax, i64 lo, i64 hi, const double* s) {
    // one specialisation per option set: no branch in the loop, which gcc vectorises
    const T dec = (T)s[0], w = (T)s[1], one_m_w = (T)1 - w, b2 = (T)s[2], omb2 = (T)s[3];
    const T bc2s = (T)s[4], eps = (T)s[5], nstep = (T)s[6];
    const bool small_w = std::fabs(w) < (T)0.5;
    #pragma omp simd
    for (i64 i = lo; i < hi; ++i) {
        T gi = MAXIMIZE ? -g[i] : g[i];
        T pi = p[i];
        if (DECAY == 1) pi = pi * dec;          // AdamW: p *= 1 - lr * wd
        if (DECAY == 2) gi = gi + dec * pi;     // Adam: g += wd * p
        T mi = m[i];
        T d = gi - mi;
        mi = small_w ? mi + w * d : gi - d * one_m_w;
        T vi = v[i] * b2;
        vi = vi + omb2 * (gi * gi);
        T vd = vi;
        if (AMS) {   // maximum(), NaN-propagating
            T mx = vmax[i];
            mx = (mx != mx) ? mx : ((vi != vi) ? vi : (mx > vi ? mx : vi));
            vmax[i] = mx;
            vd = mx;
        }
        T denom = std::sqrt(vd) / bc2s + eps;
        p[i] = pi + nstep * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

template <class T, int DECAY, bool AMS>
static void adam_chunk2(bool maximize, T* p, const T* g, T* m, T* v, T* vmax, i64 lo, i64 hi, const double* s) {
    if (maximize) adam_loop<T, DECAY, AMS, true>(p, g, m, v, vmax, lo, hi, s);
    else adam_loop<T, DECAY, AMS, false>(p, g, m, v, vmax, lo, hi, s);
}

template <class T>
static void adam_chunk(T* p, const T* g, T* m, T* v, T* vmax, i64 lo, i64 hi, const double* s, int flags) {
    const int decay = (flags & 1) ? 1 : ((flags & 2) ? 2 : 0);
    const bool ams = flags & 4, maximize = flags & 8;
    if (decay == 0) { if (ams) adam_chunk2<T, 0, true>(maximize, p, g, m, v, vmax, lo, hi, s); else adam_chunk2<T, 0, false>(maximize, p, g, m, v, vmax, lo, hi, s); }
    else if (decay == 1) { if (ams) adam_chunk2<T, 1, true>(maximize, p, g, m, v, vmax, lo, hi, s); else adam_chunk2<T, 1, false>(maximize, p, g, m, v, vmax, lo, hi, s); }
    else { if (ams) adam_chunk2<T, 2, true>(maximize, p, g, m, v, vmax, lo, hi, s); else adam_chunk2<T, 2, false>(maximize, p, g, m, v, vmax, lo, hi, s); }
}

template <class T>
static void adam(i64 n, void** ptr, const i64* numel, const double* s, int flags, int threads) {
    // one parallel region for the whole group: chunks of every tensor share the threads
    const i64 CH = 1 << 14;
    i64 total = 0;
    for (i64 t = 0; t < n; ++t) total += (numel[t] + CH - 1) / CH;
    #pragma omp parallel for schedule(static) num_threads(threads) if(total > 1)
    for (i64 c = 0; c < total; ++c) {
        i64 t = 0, k = c;
        for (;; ++t) { i64 nc = (numel[t] + CH - 1) / CH; if (k < nc) break; k -= nc; }
        i64 lo = k * CH, hi = lo + CH < numel[t] ? lo + CH : numel[t];
        void** q = ptr + 5 * t;
        adam_chunk<T>((T*)q[0], (const T*)q[1], (T*)q[2], (T*)q[3], (T*)q[4], lo, hi, s + 7 * t, flags);
    }
}

extern "C" {
void ember_adam_f32(i64 n, void** ptr, const i64* numel, const double* s, int flags, int threads) {
    adam<float>(n, ptr, numel, s, flags, threads);
}
void ember_adam_f64(i64 n, void** ptr, const i64* numel, const double* s, int flags, int threads) {
    adam<double>(n, ptr, numel, s, flags, threads);
}
}
"""

_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def _build():
    from ..inductor import codecache
    L = codecache.load(_SOURCE)
    for sfx in ("f32", "f64"):
        f = getattr(L, f"ember_adam_{sfx}")
        f.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        f.restype = None
    return L


# the compiled library, or None when it cannot be built (logged once): the op-by-op step runs
lib = LazyLibrary(_build, "the fused native Adam step (the op-by-op step is used)", log).get


def why_not(tensor_lists) -> str:
    """Why the fused step cannot take these parallel lists of tensors ('' when it can)."""
    dt = None
    for ts in tensor_lists:
        for t in ts:
            a = t._data
            if type(a) is not np.ndarray:
                return "a tensor is not on the CPU"
            if dt is None:
                dt = a.dtype
                if dt not in _DTYPES:
                    return f"dtype {t.dtype} (the fused step is float32/float64)"
            elif a.dtype != dt:
                return "parameters, gradients and state of mixed dtypes"
            if not a.flags.c_contiguous or not a.flags.writeable:
                return "a non-contiguous or read-only parameter, gradient or state tensor"
    sizes = [[t._data.size for t in ts] for ts in tensor_lists if ts]
    if any(s != sizes[0] for s in sizes):
        return "a gradient or state tensor whose size differs from its parameter's"
    if lib() is None:
        return "the native library could not be built (no C++ compiler?)"
    return ""


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_sqs, scalars, flags: int) -> None:
    """One fused update. ``scalars``: per parameter the 7 doubles of the C++ ``s`` layout;
    ``flags``: the C++ flag bits. The caller checked :func:`why_not`."""
    from .._openmp import num_threads
    n = len(params)
    ptr = np.empty(5 * n, dtype=np.uintp)
    for i in range(n):
        ptr[5 * i] = params[i]._data.ctypes.data
        ptr[5 * i + 1] = grads[i]._data.ctypes.data
        ptr[5 * i + 2] = exp_avgs[i]._data.ctypes.data
        ptr[5 * i + 3] = exp_avg_sqs[i]._data.ctypes.data
        ptr[5 * i + 4] = max_sqs[i]._data.ctypes.data if max_sqs else 0
    numel = np.array([p._data.size for p in params], dtype=np.int64)
    s = np.ascontiguousarray(scalars, dtype=np.float64)
    fn = getattr(lib(), "ember_adam_" + _DTYPES[params[0]._data.dtype])
    fn(n, ptr.ctypes.data, numel.ctypes.data, s.ctypes.data, flags, num_threads())
