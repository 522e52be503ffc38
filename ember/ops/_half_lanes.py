"""Which elements torch's CPU kernels compute on their scalar path, for the few float16/bfloat16
kernels whose scalar path rounds differently from their vector path.

torch's vectorised CPU loops process whole vectors and leave the rest of a run (the end of a
thread's chunk, or of a row) to a scalar loop. For most ops both compute in float32 and round
once, so where an element falls does not matter. It does for:

- ``rsqrt`` (and bfloat16 ``pow(x, -0.5)``, which is its kernel): the vector path rounds
  ``1 / sqrt(x)`` computed in float32 once; the scalar path rounds ``sqrt(x)`` to the half dtype
  first (c10's half ``sqrt``), then the quotient: a second rounding, an ulp off in ~1 element
  in 4 of the tail.
- ``softmax`` over a dim that is not the last (``_vec_softmax``): the scalar path stores the
  exp in the half dtype before dividing it by the float32 sum.

The split depends on the vector width (torch's AVX512 kernels or not: ``ember.backends.cpu``)
and on the thread count torch splits the work into (ember's ``get_num_threads``, equal to
torch's by default: both the cores this process may run on).
"""
from __future__ import annotations

import functools

import numpy as np

GRAIN_SIZE = 32768          # at::internal::GRAIN_SIZE


@functools.lru_cache(maxsize=None)
def half_vec_len():
    """Elements of a float16/bfloat16 ``at::vec::Vectorized``: 32 with torch's AVX512 kernels,
    else 16 (AVX2 and the 32-byte default)."""
    from ..backends.cpu import get_cpu_capability
    return 32 if get_cpu_capability() == "AVX512" else 16


def _threads():
    from .._settings import get_num_threads
    return max(1, get_num_threads())


# The element blocks of torch 2.13's half elementwise loops, measured against torch on an AVX2
# and an AVX-512 CPU (AMD EPYC, sessions 34 and 38): add/sub's alpha product and rsqrt finish
# each run after whole blocks of 32 elements on both; bfloat16 pow(x, -0.5) after blocks of two
# of its vectors (64 with torch's AVX512 kernels); prod's blocks are 4 x 16 on both.
ELEMENTWISE_BLOCK = 32
PROD_VEC = 16


def elementwise_scalar_lanes(a, step=ELEMENTWISE_BLOCK):
    """A bool array of ``a``'s shape, True where torch's unary ``cpu_kernel_vec`` loop over a
    float16/bfloat16 tensor laid out as ``a`` (a numpy array) takes its scalar path; None when
    ``a`` is not dense (torch's iteration then runs row by row: not modelled, the vector path's
    rounding everywhere).

    The loop walks the elements in memory order (a dense tensor coalesces to one dimension),
    split into ``get_num_threads`` contiguous chunks when there are at least ``GRAIN_SIZE``;
    each chunk runs whole blocks and leaves its last ``len % step`` elements to
    the scalar path (``step``: the block, :data:`ELEMENTWISE_BLOCK` unless the kernel's differs)."""
    n = a.size
    if a.ndim <= 1 or a.flags.c_contiguous:
        perm = None
        mem = a
    else:
        perm = sorted(range(a.ndim), key=lambda i: -abs(a.strides[i]))
        mem = a.transpose(perm)
        if not mem.flags.c_contiguous:
            return None
    if a.ndim == 1 and a.strides[0] != a.itemsize and n > 1:
        return None
    mask = np.zeros(n, dtype=bool)
    nt = _threads()
    if n < GRAIN_SIZE or nt == 1:
        chunks = ((0, n),)
    else:
        nt = min(nt, -(-n // GRAIN_SIZE))
        cs = -(-n // nt)
        chunks = tuple((b, min(n, b + cs)) for b in range(0, n, cs))
    for b, e in chunks:
        mask[e - (e - b) % step:e] = True
    mask = mask.reshape(mem.shape)
    if perm is not None:
        mask = mask.transpose(np.argsort(perm))
    return mask


def half_rsqrt(x, half, step=ELEMENTWISE_BLOCK):
    """rsqrt of the float32 values ``x`` of a ``half`` (numpy dtype) array, in float32, rounded
    by the caller: ``1 / sqrt(x)``, and on the scalar lanes ``1 / round(sqrt(x))``."""
    r = np.sqrt(x)
    out = 1.0 / r
    lanes = elementwise_scalar_lanes(x, step)
    if lanes is not None and lanes.any():
        out = np.where(lanes, 1.0 / r.astype(half).astype(np.float32), out)
    return out


def softmax_scalar_lanes(outer, inner):
    """Which of the ``outer * inner`` lanes of torch's half ``_vec_softmax`` (a softmax over a dim
    that is not the last) take its scalar path: ``at::parallel_for`` (grain 1) splits the lanes
    into ``get_num_threads`` contiguous chunks; a chunk walks its lanes in blocks of one vector
    while a block fits in both the row of ``inner`` lanes and the chunk, and the rest of a row
    (or of the chunk) lane by lane. A bool array (outer, 1, inner)."""
    n = outer * inner
    v = half_vec_len()
    nt = min(_threads(), n)
    cs = -(-n // nt)
    idx = np.arange(n, dtype=np.int64)
    b = idx // cs * cs
    e = np.minimum(b + cs, n)
    row0 = idx // inner * inner
    rs = np.maximum(b, row0)                     # where this lane's run of vector blocks starts
    re = np.minimum(e, row0 + inner)
    blk_end = rs + ((idx - rs) // v + 1) * v
    return (blk_end > re).reshape(outer, 1, inner)
