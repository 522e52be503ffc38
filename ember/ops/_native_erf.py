"""erf and erfc of float64 arrays in native code, for the eager kernels (erf, erfc, gelu, ndtr ...).

Why. numpy has no erf; ember's numpy formulation (a Chebyshev fit evaluated by Clenshaw's
recurrence, ``pointwise._erf_erfc``) costs a few dozen numpy calls however small the array:
~60 us for an 8x8 ``F.gelu``, 20x PyTorch's. The C library's ``erf``/``erfc`` (correctly
rounded to within an ulp in double precision) in one loop is a microsecond plus the call, and
no slower on large arrays (OpenMP-parallel above 64K elements).

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
