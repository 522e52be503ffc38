"""erf/erfc, lgamma and digamma of float64 arrays in native code, for eager calls (erf, erfc, gelu,
ndtr, lgamma, digamma ...).

Why. numpy has no erf; ember's numpy formulation (a Chebyshev fit evaluated by Clenshaw's
recurrence, ``pointwise._erf_erfc``) costs a few dozen numpy calls however small the array:
~60 us for an 8x8 ``F.gelu``, 20x PyTorch's. The C library's ``erf``/``erfc`` (correctly
rounded to within an ulp in double precision) in one loop is a microsecond plus the call, and
no slower on large arrays (OpenMP-parallel above 64K elements). ``lgamma``/``digamma`` are
composites (ember ops, which the compiler decomposes and fuses); eagerly, with no autograd or
mode to see their inner ops, they take :func:`special_eager` instead of ~40 op calls.

When. numpy arrays only (cupy has its own kernels), once the library is built -- on the first
call, by the inductor's code cache; without a C++ compiler :func:`lib` is None (logged once)
and the numpy formulation runs.
"""
from __future__ import annotations

import ctypes
import logging

import numpy as np

from ..runtime.native import LazyLibrary

log = logging.getLogger("ember.ops")

_SOURCE = r"""
#include <cstdint>
#include <cmath>
#include <omp.h>
typedef int64_t i64;

static double digamma(double x0) {
    // the composite's formula (more_pointwise.digamma), term for term: reflection below 1/2,
    // ten recurrence steps, then the asymptotic series at w = y + 10
    if (x0 == 0) return -1.0 / x0;
    if (x0 < 0 && x0 == std::floor(x0)) return NAN;
    const double x = x0;
    const bool reflect = x < 0.5;
    const double y = reflect ? 1.0 - x : x;
    double shift = 1.0 / y;
    for (int k = 1; k < 10; ++k) shift = shift + 1.0 / (y + (double)k);
    const double w = y + 10.0;
    const double w2 = 1.0 / (w * w);
    static const double c[7] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12};
    double series = 0.0;
    for (int k = 6; k >= 0; --k) series = (series + c[k]) * w2;
    double psi = std::log(w) - 0.5 / w - series - shift;
    if (reflect) psi = psi - M_PI / std::tan(M_PI * (x - std::nearbyint(x)));
    return psi;
}

extern "C" void ember_lgamma_digamma_f64(i64 n, const double* __restrict x, double* __restrict out, int which,
                                         int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if(n > 65536)
    for (i64 i = 0; i < n; ++i) out[i] = which ? digamma(x[i]) : std::lgamma(x[i]);
}

extern "C" void ember_erf_erfc_f64(i64 n, const double* __restrict x, double* __restrict e,
                                   double* __restrict ec, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if(n > 65536)
    for (i64 i = 0; i < n; ++i) {
        double v = x[i];
        e[i] = std::erf(v);
        ec[i] = std::erfc(v);
    }
}
"""


def _build():
    from ..inductor import codecache
    L = codecache.load(_SOURCE)
    f = L.ember_erf_erfc_f64
    f.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    f.restype = None
    g = L.ember_lgamma_digamma_f64
    g.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    g.restype = None
    return L


lib = LazyLibrary(_build, "the native erf (the numpy formulation is used)", log).get


def erf_erfc(x: np.ndarray):
    """(erf(x), erfc(x)) of a float64 numpy array, laid out as numpy's ufuncs lay out theirs (the
    input's memory order: meta functions promise it), or None when the library is unavailable."""
    L = lib()
    if L is None:
        return None
    xa = np.asarray(x, dtype=np.float64)
    xc = np.asarray(xa, order="C")     # (ascontiguousarray would make a 0-d array 1-d)
    n = xc.size
    both = np.empty((2,) + xc.shape)    # one allocation, one address to look up (~1 us each)
    if n > 65536:       # the loop's parallel threshold: below it, no thread count to look up
        from .._openmp import num_threads
        threads = num_threads()
    else:
        threads = 1
    out = both.ctypes.data
    L.ember_erf_erfc_f64(n, xc.ctypes.data, out, out + 8 * n, threads)
    e, ec = both[0, ...], both[1, ...]       # views (for a 0-d x too)
    if xc is not xa and not xa.flags.c_contiguous:
        e, ec = _like(xa, e), _like(xa, ec)
    return e, ec


def _like(a, values):
    out = np.empty_like(a)
    out[...] = values
    return out


def _threads(n):
    if n > 65536:
        from .._openmp import num_threads
        return num_threads()
    return 1


def special_eager(which: str, t, out_dtype):
    """``lgamma(t)`` / ``digamma(t)`` as a fresh tensor of ``out_dtype``, or None when the composite
    must run instead: autograd or a dispatch mode would have to see its ops, the data is not a
    numpy array (fake, meta, cupy, a wrapper subclass), or the library is unavailable."""
    from .._state import STATE
    if type(t._data) is not np.ndarray or STATE.modes or (t._requires_grad and STATE.grad_enabled):
        return None
    L = lib()
    if L is None:
        return None
    from ..tensor import _make
    xa = np.asarray(t._data, dtype=np.float64)
    xc = np.asarray(xa, order="C")
    res = np.empty(xc.shape)
    L.ember_lgamma_digamma_f64(xc.size, xc.ctypes.data, res.ctypes.data, 1 if which == "digamma" else 0,
                               _threads(xc.size))
    if xc is not xa and not xa.flags.c_contiguous:
        res = _like(xa, res)
    return _make(res.astype(out_dtype.np, copy=False), t.device, out_dtype)
