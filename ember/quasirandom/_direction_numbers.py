"""The Sobol direction numbers: Joe & Kuo's D(6) table for 21201 dimensions (the one torch uses).

``joe_kuo_6_21201.bin`` (written by ``_make_direction_numbers.py``) holds, per polynomial
degree s = 1..18, the primitive polynomials' middle coefficients and each dimension's s
initial direction numbers, bit-packed (about 350 KB, against 1.8 MB for the text table). From
them :func:`state_from_parts` computes the (dimension, 30) int64 state torch's
``_sobol_engine_initialize_state_`` fills: column k holds v_{k+1} = m_{k+1} * 2^(29 - k), the
direction numbers as 30-bit binary fractions, with the m_k beyond the initial ones from
Bratley & Fox's recurrence

    m_k = 2 a_1 m_{k-1} ^ 4 a_2 m_{k-2} ^ ... ^ 2^(s-1) a_{s-1} m_{k-s+1} ^ 2^s m_{k-s} ^ m_{k-s}.

Dimension 1 is van der Corput's sequence (every m_k = 1).

Why a data file of our own: scipy ships these numbers but is no dependency of ember, and the
numbers are published data (Joe & Kuo, "Constructing Sobol sequences with better
two-dimensional projections", SIAM J. Sci. Comput. 30, 2635-2654, 2008), not derivable.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

MAXBIT = 30
MAXDEG = 18
MAXDIM = 21201
MAGIC = b"ember-sobol-joe-kuo-6\x00"
DATA_FILE = Path(__file__).with_name("joe_kuo_6_21201.bin")


@functools.lru_cache(maxsize=1)
def _groups():
    """[(s, a (c,) int64, m (c, s) int64)] per degree, in dimension order (dimension 2 on)."""
    data = DATA_FILE.read_bytes()
    if not data.startswith(MAGIC):
        raise RuntimeError(f"ember.quasirandom: {DATA_FILE} is not a Sobol direction-number file")
    pos, out = len(MAGIC), []
    while pos < len(data):
        s, c = (int(v) for v in np.frombuffer(data, dtype="<u4", count=2, offset=pos))
        pos += 8
        na = (c * (s - 1) + 7) // 8
        abits = np.unpackbits(np.frombuffer(data, np.uint8, na, pos), count=c * (s - 1)).reshape(c, s - 1)
        pos += na
        L = s * (s - 1) // 2
        nm = (c * L + 7) // 8
        mbits = np.unpackbits(np.frombuffer(data, np.uint8, nm, pos), count=c * L).reshape(c, L)
        pos += nm
        a = (abits.astype(np.int64) << np.arange(s - 2, -1, -1, dtype=np.int64)).sum(axis=1) if s > 1 else \
            np.zeros(c, np.int64)
        m = np.empty((c, s), dtype=np.int64)
        col = 0
        for k in range(1, s + 1):           # m_k: its k - 1 free (top) bits, then the low bit 1
            bits = mbits[:, col:col + k - 1].astype(np.int64)
            col += k - 1
            m[:, k - 1] = ((bits << np.arange(k - 2, -1, -1, dtype=np.int64)).sum(axis=1) << 1 if k > 1 else 0) | 1
        out.append((s, a, m))
    return out


def state_from_parts(dimension):
    """The (dimension, MAXBIT) int64 direction numbers of the first ``dimension`` dimensions."""
    if not 1 <= dimension <= MAXDIM:
        raise ValueError(f"Supported range of dimensionality for SobolEngine is [1, {MAXDIM}]")
    state = np.empty((dimension, MAXBIT), dtype=np.int64)
    state[0] = 1
    d = 1
    for s, a, m0 in _groups():
        if d >= dimension:
            break
        c = min(len(a), dimension - d)
        a, m = a[:c], np.empty((c, MAXBIT), dtype=np.int64)
        m[:, :s] = m0[:c]
        for k in range(s, MAXBIT):              # 0-based column k holds m_{k+1}
            v = m[:, k - s] ^ (m[:, k - s] << s)
            for i in range(1, s):               # a_i (the coefficient of x^(s-i)) times 2^i m_{k+1-i}
                ai = (a >> (s - 1 - i)) & 1
                v ^= (ai * m[:, k - i]) << i
            m[:, k] = v
        state[d:d + c] = m
        d += c
    return state << (MAXBIT - 1 - np.arange(MAXBIT, dtype=np.int64))
