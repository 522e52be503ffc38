"""``ember.quasirandom``: torch.quasirandom's :class:`SobolEngine`.

A Sobol sequence in up to 21201 dimensions with Joe & Kuo's D(6) direction numbers
(``_direction_numbers.py``), the ones torch uses: unscrambled draws equal torch's exactly.

Points are made in Gray-code order, as torch: point k + 1 is point k with the direction
numbers of the lowest zero bit of k XOR-ed in (``_points``), so a whole draw is one
cumulative XOR over the gathered columns.

Scrambling is Owen's linear matrix scrambling plus a random digital shift, as torch does it:
each dimension's generator matrix is multiplied (over GF(2)) by a random lower-triangular
matrix with a unit diagonal, so each output digit mixes in the more significant ones, and
the points are XOR-ed with a random 30-bit shift. The randomness comes from ember's
generator (numpy's PCG64), not torch's Mersenne Twister, so a scrambled engine with a given
seed is deterministic but does not reproduce torch's numbers; it keeps what scrambling is
for: every 2^m points remain a (t, m, s)-net (each 1-D projection of the first 2^m points
has one point in each interval [k/2^m, (k+1)/2^m)).
"""
from __future__ import annotations

import numbers

import numpy as np

from ._direction_numbers import MAXBIT, MAXDIM, state_from_parts

__all__ = ["SobolEngine"]

_SCALE = 2.0 ** -MAXBIT
_SCRAMBLE_CHUNK = 1024      # dimensions whose scrambling matrices are drawn at once (memory)


def _ember():
    import ember
    return ember


def _lowest_zero_bits(start, n):
    """For k = start .. start + n - 1, the position of k's lowest zero bit (Gray-code order)."""
    k = np.arange(start, start + n, dtype=np.int64)
    low = ~k & (k + 1)                      # the lowest zero bit of k, as a power of two
    return np.log2(low.astype(np.float64)).astype(np.int64)


def _check_count(n, start, dimension):
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"_sobol_engine_draw(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}, {dimension}]")
    if start + n > 1 << MAXBIT:
        raise ValueError(f"ember.quasirandom.SobolEngine: a Sobol sequence with {MAXBIT}-bit direction numbers has "
                         f"2**{MAXBIT} points; asked for point {start + n}")
    return n


class SobolEngine:
    r"""An engine for (scrambled) Sobol sequences, as ``torch.quasirandom.SobolEngine``.

    Args:
        dimension (int): the dimensionality of the sequence, 1 to 21201.
        scramble (bool): draw scrambled points (linear matrix scrambling + digital shift).
        seed (int, optional): the seed of the scrambling's generator; without one the
            global generator (``ember.manual_seed``) is used.
    """

    MAXBIT = MAXBIT
    MAXDIM = MAXDIM

    def __init__(self, dimension, scramble=False, seed=None):
        if not isinstance(dimension, numbers.Integral) or isinstance(dimension, bool):
            raise TypeError(f"SobolEngine(): argument 'dimension' must be int, not {type(dimension).__name__}")
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError("Supported range of dimensionality "
                             f"for SobolEngine is [1, {self.MAXDIM}]")
        E = _ember()
        self.seed = seed
        self.scramble = scramble
        self.dimension = int(dimension)
        state = state_from_parts(self.dimension)
        if not self.scramble:
            shift = np.zeros(self.dimension, dtype=np.int64)
        else:
            state, shift = self._scrambled(state)
        self.sobolstate = E.from_numpy(state)
        self.shift = E.from_numpy(shift)
        self.quasi = self.shift.clone()
        self._first_point = (self.quasi / 2 ** self.MAXBIT).reshape(1, -1)
        self.num_generated = 0

    # ------------------------------------------------------------------ drawing
    def _points(self, n, start):
        """The next ``n`` states after ``self.quasi`` (Gray-code indices start, start+1, ...),
        as an (n, dimension) int64 array; ``self.quasi`` becomes the last."""
        q = self.quasi.numpy()
        if n == 0:
            return np.empty((0, self.dimension), dtype=np.int64)
        cols = self.sobolstate.numpy()[:, _lowest_zero_bits(start, n)].T
        pts = np.bitwise_xor.accumulate(cols, axis=0)
        pts ^= q
        self.quasi = _ember().from_numpy(pts[-1].copy())
        return pts

    def _draw(self, n, start, dtype):
        n = _check_count(n, start, self.dimension)
        if dtype not in (_ember().float32, _ember().float64):
            raise NotImplementedError(f"\"_sobol_engine_draw\" not implemented for '{dtype.legacy_name}'")
        pts = self._points(n, start)
        # torch converts the 30-bit integers to the dtype, then scales by 2^-30 (exact)
        res = pts.astype(dtype.np) * dtype.np.type(_SCALE)
        return _ember().from_numpy(res)

    def draw(self, n=1, out=None, dtype=None):
        r"""The next ``n`` points of the sequence, an ``(n, dimension)`` tensor of ``dtype``
        (default: the default dtype); written into ``out`` (resized) when given."""
        E = _ember()
        if dtype is None:
            dtype = E.get_default_dtype()
        if self.num_generated == 0:
            if n == 1:
                result = self._first_point.to(dtype)
            else:
                result = self._draw(n - 1, self.num_generated, dtype)
                result = E.cat((self._first_point.to(dtype), result), dim=-2)
        else:
            result = self._draw(n, self.num_generated - 1, dtype)
        self.num_generated += n
        if out is not None:
            out.resize_as_(result).copy_(result)
            return out
        return result

    def draw_base2(self, m, out=None, dtype=None):
        r"""The next ``2**m`` points; the points drawn so far plus these must number a power of 2
        (the balance properties of Sobol points hold for such prefixes)."""
        n = 2 ** m
        total_n = self.num_generated + n
        if not (total_n & (total_n - 1) == 0):
            raise ValueError("The balance properties of Sobol' points require "
                             f"n to be a power of 2. {self.num_generated} points have been "
                             f"previously generated, then: n={self.num_generated}+2**{m}={total_n}. "
                             "If you still want to do this, please use "
                             "'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self):
        r"""Back to the first point."""
        self.quasi.copy_(self.shift)
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        r"""Skip ``n`` points (as drawing them): only the parity of how often each direction
        number is XOR-ed in matters, so this costs one pass over the skipped indices."""
        if self.num_generated == 0:
            self._skip(n - 1, 0)
        else:
            self._skip(n, self.num_generated - 1)
        self.num_generated += n
        return self

    def _skip(self, n, start):
        if n <= 0:                  # (torch's loop runs no step either)
            return
        n = _check_count(n, start, self.dimension)
        odd = np.bincount(_lowest_zero_bits(start, n), minlength=MAXBIT) & 1
        cols = self.sobolstate.numpy()[:, odd.astype(bool)]
        q = self.quasi.numpy() ^ np.bitwise_xor.reduce(cols, axis=1) if cols.shape[1] else self.quasi.numpy().copy()
        self.quasi = _ember().from_numpy(np.ascontiguousarray(q))

    # ------------------------------------------------------------------ scrambling
    def _scrambled(self, state):
        """(scrambled direction numbers, digital shift): the random bits from ember's generator."""
        E = _ember()
        g = None
        if self.seed is not None:
            g = E.Generator()
            g.manual_seed(self.seed)
        d = self.dimension
        shift_bits = E.randint(2, (d, MAXBIT), generator=g).numpy()
        shift = (shift_bits << np.arange(MAXBIT, dtype=np.int64)).sum(axis=1)
        out = np.empty_like(state)
        digits = MAXBIT - 1 - np.arange(MAXBIT, dtype=np.int64)      # digit i (0: the 1/2 digit) is bit 29 - i
        for lo in range(0, d, _SCRAMBLE_CHUNK):
            hi = min(d, lo + _SCRAMBLE_CHUNK)
            ltm = np.tril(E.randint(2, (hi - lo, MAXBIT, MAXBIT), generator=g).numpy())
            ltm[:, np.arange(MAXBIT), np.arange(MAXBIT)] = 1
            bits = (state[lo:hi, :, None] >> digits) & 1                # (dims, column j, digit k)
            # new digit i of column j: XOR over k <= i of ltm[i, k] * digit k (exact in float32)
            new = np.matmul(ltm.astype(np.float32), bits.transpose(0, 2, 1).astype(np.float32))
            new = new.astype(np.int64) & 1                              # (dims, digit i, column j)
            out[lo:hi] = (new << digits[None, :, None]).sum(axis=1)
        return out, shift

    def __repr__(self):
        fmt_string = [f"dimension={self.dimension}"]
        if self.scramble:
            fmt_string += ["scramble=True"]
        if self.seed is not None:
            fmt_string += [f"seed={self.seed}"]
        return self.__class__.__name__ + "(" + ", ".join(fmt_string) + ")"
