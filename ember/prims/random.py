"""Counter-based random prims: Philox 4x32-10 (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC'11), vectorised in numpy.

Why counter-based: the value of element ``i`` is a pure function of
``(seed, offset, i)``, so a compiled kernel (any backend, any thread order)
reproduces the eager reference bit for bit, and ``rng_seed`` makes each call
of a compiled graph draw fresh numbers.

The stream, exactly (so other backends can implement it):

* key ``k = (seed mod 2**32, (seed >> 32) mod 2**32)`` (``seed`` as uint64);
* element ``i`` of the row-major output (``philox_rand``) reads block
  ``b = offset + i // 4``, lane ``i % 4``: the 32-bit word
  ``philox4x32_10(counter=(b mod 2**32, b >> 32, 0, 0), key=k)[i % 4]``;
* ``philox_randn`` element ``i`` reads block ``b = offset + i // 2`` and the
  lane pair ``(2 (i % 2), 2 (i % 2) + 1)``: words ``u1, u2`` give
  ``sqrt(-2 log((u1 + 1) / 2**32)) * cos(2 pi u2 / 2**32)`` (Box–Muller in
  float64, rounded once to ``dtype``);
* a uniform word ``u`` becomes ``(u >> (32 - p)) * 2**-p`` with ``p`` the
  dtype's significand bits (24 float32, 11 float16, 8 bfloat16, 32 float64),
  which is exact and strictly below 1.

``offset`` counts blocks: a caller drawing several tensors from one seed
advances it by ``ceil(numel / 4)`` (``rand``) or ``ceil(numel / 2)``
(``randn``) between them.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..ops import _meta
from ._defprim import as_int_list, defprim, dtype_of, fail, fmt_shape, is_scalar

__all__ = ["philox", "philox_rand", "philox_randn", "rng_seed"]

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint32(0x9E3779B9)
_W1 = np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def philox(counter, key, rounds=10):
    """Philox 4x32 over arrays: ``counter`` a tuple of 4 uint32 arrays (broadcastable),
    ``key`` a tuple of 2 uint32 values/arrays; returns the 4 uint32 output words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint32) for c in counter)
    k0, k1 = (np.asarray(k, dtype=np.uint32) for k in key)
    with np.errstate(over="ignore"):
        for r in range(rounds):
            if r:
                k0 = (k0 + _W0).astype(np.uint32)
                k1 = (k1 + _W1).astype(np.uint32)
            p0 = _M0 * c0.astype(np.uint64)
            p1 = _M1 * c2.astype(np.uint64)
            hi0, lo0 = (p0 >> _S32).astype(np.uint32), (p0 & _LO).astype(np.uint32)
            hi1, lo1 = (p1 >> _S32).astype(np.uint32), (p1 & _LO).astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


_BITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 32}


def _key(seed):
    s = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    return np.uint32(s & 0xFFFFFFFF), np.uint32(s >> 32)


def _blocks(offset, n):
    b = np.arange(n, dtype=np.uint64) + np.uint64(int(offset) & 0xFFFF_FFFF_FFFF_FFFF)
    return (b & _LO).astype(np.uint32), (b >> _S32).astype(np.uint32)


def _uniform_words(n, seed, offset):
    nb = (n + 3) // 4
    lo, hi = _blocks(offset, nb)
    z = np.zeros(nb, dtype=np.uint32)
    words = philox((lo, hi, z, z), _key(seed))
    return np.stack(words, axis=1).reshape(-1)[:n]


def _check(prim):
    def check(shape, seed, offset, dtype, device=None):
        shape = as_int_list(prim, "shape", shape)
        for s in shape:
            if isinstance(s, int) and s < 0:
                fail(prim, f"argument 'shape' has a negative size: {fmt_shape(shape)}")
        for n, v in (("seed", seed), ("offset", offset)):
            if is_scalar(v) or dtype_of(v) is not _t.int64 or v.ndim != 0:
                fail(prim, f"argument '{n}' must be a 0-d int64 tensor")
        if _t.as_dtype(dtype).name not in _BITS:
            fail(prim, f"argument 'dtype' must be a floating dtype, got {_t.as_dtype(dtype).name}")
    return check


def _meta_rand(shape, seed, offset, dtype, device=None):
    return _meta.out(tuple(shape), _t.as_dtype(dtype))


@defprim("philox_rand(SymInt[] shape, Tensor seed, Tensor offset, ScalarType dtype, Device? device=None) -> Tensor",
         check=_check("philox_rand"), meta=_meta_rand, tags=("random",))
def philox_rand(xp, shape, seed, offset, dtype, device=None):
    """Uniform numbers in [0, 1) of ``shape`` and floating ``dtype`` from the Philox stream
    ``(seed, offset)`` (0-d int64 tensors); see the module docstring for the exact bits."""
    dt = _t.as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    u = _uniform_words(n, int(seed), int(offset))
    p = _BITS[dt.name]
    v = (u >> np.uint32(32 - p)).astype(np.float64) * (2.0 ** -p)
    return xp.asarray(v.astype(dt.np).reshape(shape))


@defprim("philox_randn(SymInt[] shape, Tensor seed, Tensor offset, ScalarType dtype, Device? device=None) -> Tensor",
         check=_check("philox_randn"), meta=_meta_rand, tags=("random",))
def philox_randn(xp, shape, seed, offset, dtype, device=None):
    """Standard normal numbers of ``shape`` and floating ``dtype`` from the Philox stream
    ``(seed, offset)`` by Box–Muller (module docstring)."""
    dt = _t.as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    nb = (n + 1) // 2
    lo, hi = _blocks(offset, nb)
    z = np.zeros(nb, dtype=np.uint32)
    w = philox((lo, hi, z, z), _key(int(seed)))
    u1 = np.stack((w[0], w[2]), axis=1).reshape(-1)[:n].astype(np.float64)
    u2 = np.stack((w[1], w[3]), axis=1).reshape(-1)[:n].astype(np.float64)
    r = np.sqrt(-2.0 * np.log((u1 + 1.0) * 2.0 ** -32)) * np.cos((2.0 * np.pi * 2.0 ** -32) * u2)
    return xp.asarray(r.astype(dt.np).reshape(shape))


@defprim("rng_seed(Device? device=None) -> Tensor", meta=lambda device=None: _meta.out((), _t.int64),
         tags=("random", "nondeterministic"))
def rng_seed(xp, device=None):
    """A fresh 0-d int64 seed in [0, 2**63) drawn from ember's global generator, so a
    compiled graph that starts from it gives new numbers on each call, and
    ``ember.manual_seed`` makes the sequence reproducible."""
    from ..random import default_generator
    return xp.asarray(np.int64(default_generator._np.integers(0, 2 ** 63 - 1, dtype=np.int64)))
