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
