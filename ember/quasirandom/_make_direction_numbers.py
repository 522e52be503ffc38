"""Developer tool: writes ``joe_kuo_6_21201.bin``, the direction numbers SobolEngine reads.

Run ``python -m ember.quasirandom._make_direction_numbers`` (needs torch, the test oracle:
the initial direction numbers are Joe & Kuo's published ``new-joe-kuo-6.21201`` table, and
torch is where this offline tree has them; nothing at run time imports torch).

What is stored, and why it is small. Joe & Kuo's table gives, per dimension d >= 2, a
primitive polynomial over GF(2) of degree s and the s initial direction numbers m_1..m_s
(m_k odd, m_k < 2^k); every further m_k follows from the polynomial's recurrence, so the
30-column state ``SobolEngine`` uses is computed at run time (``_direction_numbers.py``).
The polynomials are the primitive ones in order of degree, then of value; this tool finds
them itself (a vectorised order test of x modulo each candidate) and checks that the
recurrence over them reproduces torch's whole state before writing. Stored per degree
s = 1..18, bit-packed: the polynomials' s - 1 middle coefficients, and the s - 1 free bits
of each m_k (the top k - 1 bits of the odd m_k: k - 1 bits each, s(s-1)/2 per dimension).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ._direction_numbers import DATA_FILE, MAXBIT, MAXDEG, MAXDIM, MAGIC, state_from_parts


def _prime_factors(n):
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def _mulmod(a, b, poly, s):
    """a * b modulo ``poly`` (degree s) over GF(2), elementwise over int64 arrays."""
    r = np.zeros_like(a)
    top = np.int64(1) << s
    for i in range(s):
        r ^= np.where((b >> i) & 1 == 1, a, 0)
        a = a << 1
        a = np.where(a & top != 0, a ^ poly, a)
    return r


def _powmod_x(e, poly, s):
    """x^e modulo each polynomial of ``poly`` (degree s)."""
    result = np.ones_like(poly)
    base = np.full_like(poly, 2) if s > 1 else poly ^ (np.int64(1) << s)    # x mod (x + 1) = 1
    while e:
        if e & 1:
            result = _mulmod(result, base, poly, s)
        base = _mulmod(base, base, poly, s)
        e >>= 1
    return result


def primitive_polynomials(s):
    """The primitive polynomials of degree s over GF(2), ascending, as ints (bit k = x^k)."""
    cand = (np.int64(1) << s) | 1 | (np.arange(1 << max(s - 1, 0), dtype=np.int64) << 1)
    if s == 1:
        return np.array([0b11], dtype=np.int64)
    order = (1 << s) - 1
    ok = _powmod_x(order, cand, s) == 1
    for q in _prime_factors(order):
        ok &= _powmod_x(order // q, cand, s) != 1
    return cand[ok]


def main(argv=None):
    import torch
    state = torch.zeros(MAXDIM, MAXBIT, dtype=torch.long)
    torch._sobol_engine_initialize_state_(state, MAXDIM)
    want = state.numpy()
    m = want >> (MAXBIT - 1 - np.arange(MAXBIT))          # m_k (column k - 1)
    chunks, degrees, polys, dim = [MAGIC], [], [], 1
    for s in range(1, MAXDEG + 1):
        if dim >= MAXDIM:
            break
        p = primitive_polynomials(s)[:MAXDIM - dim]
        c = len(p)
        a = (p >> 1) & ((1 << (s - 1)) - 1)               # the middle coefficients a_1..a_{s-1}
        init = m[dim:dim + c, :s]
        if ((init & 1) != 1).any():
            raise SystemExit(f"degree {s}: an initial direction number is even")
        abits = ((a[:, None] >> np.arange(s - 2, -1, -1)) & 1).astype(np.uint8)
        mbits = [((init[:, k] >> 1)[:, None] >> np.arange(k - 1, -1, -1)) & 1 for k in range(s)]
        mbits = np.concatenate([b.astype(np.uint8) for b in mbits], axis=1) if s > 1 else np.zeros((c, 0), np.uint8)
        chunks += [np.array([s, c], dtype="<u4").tobytes(), np.packbits(abits.reshape(-1)).tobytes(),
                   np.packbits(mbits.reshape(-1)).tobytes()]
        degrees.append(s)
        polys.append(p)
        dim += c
    data = b"".join(chunks)
    Path(DATA_FILE).write_bytes(data)
    got = state_from_parts(MAXDIM)
    if not np.array_equal(got, want):
        bad = np.argwhere((got != want).any(axis=1))[:5].ravel()
        raise SystemExit(f"the recurrence does not reproduce torch's state (first bad dimensions {bad})")
    print(f"wrote {DATA_FILE} ({len(data)} bytes, {dim} dimensions, degrees {degrees[0]}..{degrees[-1]})")


if __name__ == "__main__":
    main(sys.argv[1:])
