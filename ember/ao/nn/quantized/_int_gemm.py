"""Exact integer matrix products on numpy's float BLAS.

A quantized linear layer needs ``sum_k a[i, k] * w[j, k]`` over small integers, exactly (int32
accumulation, as fbgemm). numpy has no fast integer GEMM, but float32 SGEMM is exact on
integers as long as every partial sum stays below 2**24 in magnitude (float32 has a 24-bit
significand; the order BLAS adds in does not matter when no sum ever rounds). With
``|a| <= A`` and ``|w| <= W`` every partial sum over ``n`` terms is at most ``n * A * W``, so
the reduction dimension is cut into blocks of ``n = 2**24 // (A * W)`` (1024 for int8 x int8
operands, whose products are at most 2**14) and the exact block results are added in float64
(exact to 2**53), then returned as int64.
"""
from __future__ import annotations

import numpy as np

_EXACT_F32 = 2 ** 24


def exact_int_matmul(a, w_t):
    """``a @ w_t`` for integer-valued arrays ``a`` (M, K) and ``w_t`` (K, N), exactly, as int64."""
    a = np.asarray(a)
    w_t = np.asarray(w_t)
    m, k = a.shape
    n = w_t.shape[1]
    if k == 0 or m == 0 or n == 0:
        return np.zeros((m, n), np.int64)
    amax = int(np.abs(a).max())
    wmax = int(np.abs(w_t).max())
    if amax == 0 or wmax == 0:
        return np.zeros((m, n), np.int64)
    block = max(1, _EXACT_F32 // (amax * wmax))
    af = a.astype(np.float32)
    wf = w_t.astype(np.float32)
    if block >= k:
        return (af @ wf).astype(np.int64)
    acc = np.zeros((m, n), np.float64)
    for s in range(0, k, block):
        acc += af[:, s:s + block] @ wf[s:s + block]
    return acc.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# fbgemm's int8 kernels per instruction set
#
# fbgemm multiplies the stored uint8 activations by the stored int8 weights (zero points are
# corrected afterwards with row / column sums).  With AVX-512 VNNI it uses ``vpdpbusd``, which
# adds four u8 x s8 products straight into int32: exact, what ``exact_int_matmul`` computes.
# Without VNNI (AVX2, or AVX-512 without VNNI) it uses ``vpmaddubsw``: the products of each
# adjacent pair along the reduction axis (k = 2j, 2j + 1) are added with int16 *saturation*
# before being widened and summed in int32, so large activations times large weights clip.  The
# pairs follow fbgemm's packing order: the input features for Linear, the channels-last im2col
# order (kernel taps outer, input channels of the group inner) for convolutions -- depthwise and
# groupwise ones included (verified against torch's x86 engine on an AVX2 CPU).  On a VNNI CPU
# torch's x86 engine runs its convolutions on oneDNN, also exact.
# ---------------------------------------------------------------------------------------------

def _cpu_flags():
    """Lower-case CPU feature flags: /proc/cpuinfo where it exists, else numpy's runtime detection."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
    except ImportError:                                                  # numpy < 2
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as feats
        except ImportError:
            return frozenset()
    names = {"AVX2": "avx2", "AVX512BW": "avx512bw", "AVX512VNNI": "avx512_vnni"}
    return frozenset(v for k, v in names.items() if feats.get(k))


_SATURATES = None


def int8_gemm_saturates():
    """Whether fbgemm's u8 x s8 GEMM on this CPU saturates pairs of products to int16: an x86
    CPU with AVX2 (or AVX-512) but without AVX-512 VNNI, as fbgemm's own dispatch decides."""
    global _SATURATES
    if _SATURATES is None:
        flags = _cpu_flags()
        _SATURATES = "avx512_vnni" not in flags and ("avx2" in flags or "avx512bw" in flags)
    return _SATURATES


_I16_MIN, _I16_MAX = -(2 ** 15), 2 ** 15 - 1
_CHUNK = 2 ** 22


def saturation_correction(a_raw, w_raw):
    """int64 (M, N): what fbgemm's int16 saturation of the pairwise sums
    ``a[m, 2j] * w[n, 2j] + a[m, 2j + 1] * w[n, 2j + 1]`` adds to the exact ``a_raw @ w_raw.T``,
    for the *stored* uint8 activations ``a_raw`` (M, K) and int8 weights ``w_raw`` (N, K), the
    reduction axis in fbgemm's packing order (an odd K is padded with a zero column)."""
    a = np.asarray(a_raw, np.int32)
    w = np.asarray(w_raw, np.int32)
    m, k = a.shape
    n = w.shape[0]
    out = np.zeros((m, n), np.int64)
    if m == 0 or n == 0 or k < 2:
        return out
    if k % 2:
        a = np.concatenate([a, np.zeros((m, 1), np.int32)], axis=1)
        w = np.concatenate([w, np.zeros((n, 1), np.int32)], axis=1)
    a0, a1, w0, w1 = a[:, 0::2], a[:, 1::2], w[:, 0::2], w[:, 1::2]
    # only the pairs whose largest possible |sum| exceeds int16 can saturate
    amax0, amax1 = np.abs(a0).max(0), np.abs(a1).max(0)
    wmax0, wmax1 = np.abs(w0).max(0), np.abs(w1).max(0)
    live = np.flatnonzero(amax0 * wmax0 + amax1 * wmax1 > _I16_MAX)
    if live.size == 0:
        return out
    a0, a1, w0, w1 = a0[:, live], a1[:, live], w0[:, live], w1[:, live]
    rows = max(1, _CHUNK // (n * live.size))
    for s in range(0, m, rows):
        p = a0[s:s + rows, None, :] * w0[None] + a1[s:s + rows, None, :] * w1[None]
        out[s:s + rows] = (np.clip(p, _I16_MIN, _I16_MAX) - p).sum(-1)
    return out
