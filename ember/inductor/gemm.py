"""ember's own float32 matrix product for compiled graphs, next to numpy's BLAS.

Why. Matrix products are most of a compiled model's time: on the benchmark suite's nanoGPT,
ResNet and LSTM steps the matmul and convolution externs are 84-88% of ``EMBER_LOGS=kernel_times``.
numpy's OpenBLAS picks its kernel set by CPU model, unless ``OPENBLAS_CORETYPE`` names one; the
development box (AMD Zen 5, AVX-512) exports ``OPENBLAS_CORETYPE=Haswell``, so there numpy runs
OpenBLAS's AVX2 kernels, half the FMA width the core has. ``gemm_native.cpp`` is a blocked GEMM
with an AVX-512 micro-kernel (packed operands, 12x32 register tile, threads over batch, rows or
columns). Measured side by side on the 2-core box, 2 threads, median of 20, against numpy's
OpenBLAS with the machine's Haswell kernels and with its SkylakeX (AVX-512) kernels, which it
picks on its own when the variable is unset:

    ===============================  ===================  =============  ==============
    product (M x N x K)              ember                numpy Haswell  numpy SkylakeX
    ===============================  ===================  =============  ==============
    1024 x 256 x 1024                1.27 ms, 422 GFLOP/s 2.36 ms, 228   1.48 ms, 364
    1024 x 1024 x 256, B transposed  1.29 ms, 418         2.29 ms, 235   1.45 ms, 371
    32 x 1024 x 256 (an LSTM step)   0.067 ms, 252        0.095 ms, 177  0.081 ms, 208
    64 x [128 x 128 x 64] batched    0.56 ms, 239         0.96 ms, 140   0.60 ms, 223
    ===============================  ===================  =============  ==============

So on this machine most of the gain over eager comes from the variable the machine sets;
without it ember's GEMM is still ahead, by 7-20% on these shapes.

Short products (at most 120 rows: an MLP's batch of 64) pack B one strip at a time, each just
before its micro-kernels; the AVX-512 build asks for every line of the next strip's source while
the current one computes (``NextStrip``). On the Zen 4 box (2 cores) a Linear's 64 x 1024 x 1024
went 0.92 -> 0.84 ms with the weight in cache and 1.23 -> 1.06 ms from memory (the forward after
an optimizer step), and the compiled MLP's inference step 1.05-1.09x (interleaved in one process).
Every micro-tile also asks for its C tile's lines before its FMAs (a weight gradient's 4 MB
output written from memory: 0.88 -> 0.82 ms; compiled MLP training and nanoGPT inference 1.02x).

A short product with B = W^T (a Linear's weight, rows contiguous in k) and a whole number of
16-row halves of strips (8 on AVX2) up to 96 rows is computed as C^T = W @ A^T
(``gemm_part_wt``): W's rows are broadcast from where they lie instead of being transposed into
packed strips (64 x 1024 x 1024 on one thread: 84 GFLOP/s packing B per product, 107 with B
packed beforehand), A^T is packed, and the C^T tiles are transposed into C once their K sums
are done. Same sums in the same order: the same bits as the packed paths (tested). On the Zen 4
box, interleaved with the previous library, median/best GFLOP/s on one thread: 64 x 1024 x 1024
83/87 -> 98/103, 48 x 1024 x 1024 76/81 -> 87/98, 16 x 1024 x 1024 51 -> 84, 32 x 256 x 1024
90/92 -> 103/104; two threads 64 x 1024 x 1024 168/171 -> 197/203. Rows that would leave a padded
strip (56, 100, 120) measured 0.92-0.97x and stay on the packed path. With three different
weights in turn (the MLP's, 12 MB: W comes from memory) the gain was gone until each tile asks
for the next tile's rows ahead (as ``NextStrip`` does for a packed strip): three 64 x 1024 x 1024
products in a chain 2.55 -> 2.32 ms (two threads), 4.93 -> 4.46 ms (one). Compiled MLP inference
1.096x, training 1.016x (interleaved in one process, the two libraries swapped step by step);
LSTM, ResNet and nanoGPT inference 0.99-1.005x (one product each or none takes the path).

AVX2. On a CPU with AVX2 and FMA but no AVX-512 (the 2-core AMD EPYC box: Zen 3, L1d 32 KB,
L2 512 KB per core, L3 32 MB) the source builds its AVX2 variant: a 6 x 16 micro-tile (12 ymm
accumulators, two B vectors, one broadcast), KC = 256 (a B strip is 16 KB of L1), MC = 144 (an A
block is 144 KB of L2), 8 x 8 register transposes to pack transposed views, C's tile prefetched
before the kernel, the next B strip's rows prefetched in short blocks, one thread below 4 MFLOP.
numpy there runs OpenBLAS's Haswell kernels, as tuned as ours: measured interleaved (ABAB, one
process, ``gemm.matmul`` with its Python call against ``numpy.matmul``), GFLOP/s, ember / numpy.
One thread: medians of 30 of the calling thread's CPU time (the box was shared, load 5-8 on its
2 cores: wall times were noise). Two threads: medians of 40 wall times under that load, where
OpenBLAS's spinning threads lose most (its minimums were near ours: 256^3 127 vs 134, 64 x 1024 x
1024 60 vs 62):

    =================================  =============  =============
    product (M x K @ K x N)            one thread     two threads
    =================================  =============  =============
    1024x256 @ 256x768                 65.7 / 59.3    19.2 / 19.6
    1024x256 @ (768x256)^T             72.5 / 71.0    20.1 / 18.9
    1024x256 @ 256x1024                62.9 / 59.9    20.1 / 14.4
    1024x1024 @ 1024x256               66.7 / 67.2    21.9 / 20.2
    1024x1024 @ (256x1024)^T           61.1 / 60.6    19.3 / 20.5
    (1024x256)^T @ 1024x768            63.6 / 68.4    16.6 /  4.9
    (1024x256)^T @ 1024x1024           40.0 / 46.3    15.2 /  6.0
    (1024x1024)^T @ 1024x256           43.6 / 39.2    17.3 / 16.4
    64x1024 @ 1024x1024                36.5 / 52.4     9.1 /  1.7
    64x1024 @ (1024x1024)^T            39.0 / 40.9    12.3 /  2.1
    (64x1024)^T @ 64x1024              46.3 / 44.5    14.4 /  6.2
    32x256 @ 256x1024 (LSTM step)      45.5 / 56.5     2.6 /  0.9
    32x256 @ (1024x256)^T              42.1 / 49.8     2.9 /  0.8
      the same, B packed once          59.5 / 53.9
    32 x [128x64 @ 64x128]             48.8 / 49.2    44.2 /  2.6
    32 x [128x128 @ 128x64]            39.3 / 39.2     7.8 /  0.6
    32 x [128x64 @ (128x64)^T]         40.4 / 37.2    45.5 /  2.5
    128x128 @ 128x64                   25.4 / 44.7    23.6 / 47.8
    256x256 @ 256x256                  58.8 / 66.3    57.1 / 65.5
    =================================  =============  =============

Hence the AVX2 build's rule (:func:`_numpy_is_faster`; ``route_to_numpy = False`` turns it off):
batched products run on ember's GEMM; a single product goes to numpy below 2^21 multiply-adds
(the ctypes call's ~10 us) and, on one thread, with fewer than 512 rows (64 x 1024 x 1024,
the LSTM step, 256^3 lost there); a right operand packed once (:func:`matmul_packed`) stays
on ember's GEMM (1.10x on the LSTM step). The AVX-512 build keeps every product. On two
threads two single products above 2^21 lost in this table, 256^3 (0.87x) and 1024 x 1024 @ W^T
(0.94x), inside this load's noise (a later two-thread run of 256^3 had ember 3.6x ahead), so
the rule does not single them out; measure again on a quiet box before refining it
(the benchmark: interleave ``gemm.matmul`` under ``route_to_numpy = False`` with ``numpy.matmul``).

Eager ember keeps numpy's matmul (its kernels are numpy's, by design), so compiled and eager
products now differ in the last bits (a different summation order); tests compare them with
float32 tolerances.

When. :func:`matmul` runs ember's GEMM when ``config.gemm == "ember"`` (the default), the
library built (at install time by setup.py, ``prebuilt.py``, else here on first use: a C++ compiler, an x86-64 CPU with AVX-512F, or AVX2 and FMA: the code cache
builds with ``-march=native``, and the source refuses to compile on anything else, ARM
included, logged once), all three arrays are float32, the output is C-contiguous, the batch
dims match, the product is big enough for a native call to pay (``config.gemm_min_macs``) and,
on an AVX2 build, the rule above does not pick numpy; anything else goes to ``numpy.matmul``.
``config.gemm = "blas"`` sends every product to numpy (the ablation). The module stays free of sympy: a graph-cache hit rebuilds wrappers that call it.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import Optional

import numpy as np

from .. import _openmp
from .._openmp import num_threads
from . import config

log = logging.getLogger("ember.inductor")

_SOURCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemm_native.cpp")
_F32 = np.dtype(np.float32)
_lock = threading.Lock()
_state = {"tried": False, "fn": None, "why": None, "np": None, "np_packed": None}


def _after_fork_in_child():
    """A fork taken while :func:`build_in_background`'s thread held ``_lock`` would leave the
    child a lock nobody releases (its first product would hang): the child starts afresh and
    builds (or loads from the code cache) itself if it needs to."""
    global _lock
    _lock = threading.Lock()
    if not _state["tried"]:
        _state["building"] = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _load():
    """The native entry point (``ember_sgemm``), built on first use; None where it cannot be."""
    with _lock:
        if _state["tried"]:
            return _state["fn"]
        _state["building"] = True
        try:
            return _build()
        finally:
            # set only now: until then callers that see it unset come here and wait on the lock
            # (a build started by build_in_background), never take numpy's path meanwhile
            _state["tried"] = True


def _build():
    """Compile (or load from the code cache) and bind the library; under ``_lock``."""
    try:
        from . import codecache
        with open(_SOURCE_PATH) as f:
            source = f.read()
        lib = codecache.load_key(codecache.helper_key(source, "gemm"), source)
    except Exception as e:  # noqa: BLE001 - no compiler / neither AVX-512 nor AVX2: numpy's matmul serves
        msg = str(e).strip().splitlines()
        # the compiler's own "error:" line (the source's #error names the missing instructions)
        # rather than the command line that starts the message
        errs = [ln.strip() for ln in msg if "error:" in ln]
        _state["why"] = f"ember's GEMM did not build ({(errs or msg)[0] if msg else type(e).__name__})"
        log.info("inductor: %s; matrix products use numpy's matmul", _state["why"])
        return None
    fn = lib.ember_sgemm
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [i64, i64, i64, i64, ptr, i64, i64, i64, ptr, i64, i64, i64, ptr, ctypes.c_int]
    fn.restype = None
    lib.ember_sgemm_calls.restype = ctypes.c_int64
    lib.ember_sgemm_wt_parts.restype = ctypes.c_int64
    lib.ember_sgemm_pack_b.argtypes = [i64, i64, ptr, i64, i64, ptr, ctypes.c_int]
    lib.ember_sgemm_pack_b.restype = None
    lib.ember_sgemm_packed.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, ptr, ctypes.c_int]
    lib.ember_sgemm_packed.restype = None
    for name in ("nr", "mr", "kc", "isa"):      # the micro-tile, the K slice, 512 or 256 (AVX2)
        getattr(lib, "ember_sgemm_" + name).restype = ctypes.c_int
        _state[name] = int(getattr(lib, "ember_sgemm_" + name)())
    _bind_array_entries(lib)
    _state["fn"], _state["lib"] = fn, lib
    return fn


def _numpy_layout() -> Optional[tuple]:
    """Byte offsets of (data, nd, dimensions, strides) in a numpy array object
    (``PyArrayObject_fields``: right after the object header), checked against numpy's own
    answers on arrays of several ranks and layouts; None where they do not hold."""
    p = ctypes.sizeof(ctypes.c_void_p)
    head = 2 * p if not hasattr(sys, "getobjects") else 4 * p
    offs = (head, head + p, head + 2 * p, head + 3 * p)
    base = np.empty((3, 5, 7), _F32)
    for a in (np.empty(3, _F32), base, base[:, 1:4, ::2].transpose(2, 0, 1), np.empty((2, 5), np.int64)[:, 1:]):
        if ctypes.c_void_p.from_address(id(a) + offs[0]).value != a.ctypes.data or \
                ctypes.c_int.from_address(id(a) + offs[1]).value != a.ndim:
            return None
        dims = ctypes.c_void_p.from_address(id(a) + offs[2]).value
        strides = ctypes.c_void_p.from_address(id(a) + offs[3]).value
        if tuple((ctypes.c_int64 * a.ndim).from_address(dims)) != a.shape or \
                tuple((ctypes.c_int64 * a.ndim).from_address(strides)) != a.strides:
            return None
    return offs


def _bind_array_entries(lib) -> None:
    """The entries that read the numpy arrays in C (``ember_sgemm_np``: ~1 us a call against
    ~13 us for the pointers and strides passed from here); absent where numpy's array layout is
    not the one checked (:func:`matmul` then takes its general path)."""
    _state["np"] = _state["np_packed"] = None
    offs = _numpy_layout() if ctypes.sizeof(ctypes.c_void_p) == 8 else None
    if offs is None:
        log.info("inductor: numpy's array layout is not the expected one; GEMM calls pass pointers")
        return
    i64, obj = ctypes.c_int64, ctypes.py_object
    lib.ember_sgemm_np_layout.argtypes = [i64] * 4
    lib.ember_sgemm_np_layout.restype = None
    lib.ember_sgemm_np_layout(*offs)
    f = lib.ember_sgemm_np
    f.argtypes, f.restype = [obj, obj, obj, ctypes.c_int, i64], ctypes.c_int
    g = lib.ember_sgemm_packed_np
    g.argtypes, g.restype = [obj, obj, obj, i64, i64, ctypes.c_int, i64], ctypes.c_int
    _state["np"], _state["np_packed"] = f, g


def available() -> bool:
    """Whether ember's GEMM built on this machine (builds it on the first call)."""
    return (_state["fn"] if _state["tried"] else _load()) is not None


def build_in_background() -> None:
    """Start building the library now, on a thread, if nothing has tried yet.

    In a fresh code cache the build is a ~4-5 s g++ run (-O3 over the micro-kernel's
    specialisations), which the first product of the first compiled graph used to wait for
    after the graph's own kernels had compiled. The lowering of a float32 product calls this,
    so the build overlaps the rest of the compile (lowering, scheduling, the kernels' g++ on
    the other core). Nothing changes about which GEMM runs: :func:`matmul` calls :func:`_load`,
    which waits on the same lock for the build to finish."""
    if _state["tried"] or _state.get("building") or config.gemm != "ember":
        return
    _state["building"] = True           # (two threads racing here: the second _load waits, harmless)
    threading.Thread(target=_load, name="ember-gemm-build", daemon=True).start()


def calls() -> int:
    """Products ember's GEMM has computed in this process (0 before it was loaded)."""
    lib = _state.get("lib")
    return int(lib.ember_sgemm_calls()) if lib is not None else 0


def weight_rows_parts() -> int:
    """Thread parts of products computed as C^T = W @ A^T (short products with B = W^T, a
    Linear's weight: ``gemm_part_wt`` in ``gemm_native.cpp``) in this process."""
    lib = _state.get("lib")
    return int(lib.ember_sgemm_wt_parts()) if lib is not None else 0


def kernel_info() -> Optional[dict]:
    """The built kernel's shape: ``{"isa": 512 or 256, "mr": rows, "nr": columns of the micro-tile,
    "kc": depth of a packed K slice}`` (AVX-512: 12 x 32, AVX2: 6 x 16); None where it did not build."""
    if not available():
        return None
    return {k: _state[k] for k in ("isa", "mr", "nr", "kc")}


def unavailable_reason() -> Optional[str]:
    """Why :func:`available` is False (None while it is True or untried)."""
    return _state["why"]


_affinity_threads: list = []


def _threads() -> int:
    """:func:`ember._openmp.num_threads`, with the cores this process may run on looked up once
    (``sched_getaffinity`` and the lookups around it were ~9 us a call, as much as a 128 x 128 x 64
    product's third); ``config.threads``, ``OMP_NUM_THREADS`` and a fork are read every call."""
    if config.threads or _openmp._forked[0] or "OMP_NUM_THREADS" in os.environ:
        return num_threads()
    if not _affinity_threads:
        _affinity_threads.append(num_threads())
    return _affinity_threads[0]


def _element_strides(a) -> Optional[tuple]:
    out = []
    for s in a.strides:
        if s % 4:
            return None
        out.append(s // 4)
    return tuple(out)


def matmul(a, b, out):
    """``numpy.matmul(a, b, out)`` for the inductor's ``mm``/``bmm`` externs: ember's GEMM
    where it applies (see the module doc), numpy's matmul otherwise. Returns ``out``."""
    fast = _state.get("np")
    if fast is not None and a.dtype is _F32 and b.dtype is _F32 and out.dtype is _F32 and \
            config.gemm == "ember" and (_state["isa"] == 512 or not route_to_numpy) and \
            not fast(a, b, out, _threads(), config.gemm_min_macs):
        return out                      # (the entry returns 1 for a product it does not take)
    fn = _state["fn"] if _state["tried"] else _load()
    nd = a.ndim
    if fn is None or config.gemm != "ember" or nd != b.ndim or nd not in (2, 3) or a.dtype != _F32 \
            or b.dtype != _F32 or out.dtype != _F32 or not out.flags.c_contiguous:
        return np.matmul(a, b, out)
    sa, sb = _element_strides(a), _element_strides(b)
    if sa is None or sb is None or (nd == 3 and b.shape[0] != a.shape[0]):
        return np.matmul(a, b, out)
    if nd == 2:                       # one product: batch 1, batch strides unused
        sa, sb = (0,) + sa, (0,) + sb
    batch = a.shape[0] if nd == 3 else 1
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if batch * m * n * k < config.gemm_min_macs:
        return np.matmul(a, b, out)
    nt = _threads()
    if route_to_numpy and _state["isa"] == 256 and _numpy_is_faster(batch, m, n, k, nt):
        return np.matmul(a, b, out)
    fn(batch, m, n, k, a.ctypes.data, *sa, b.ctypes.data, *sb, out.ctypes.data, nt)
    return out


# The AVX2 build's measured rule (module doc, second table): where numpy's OpenBLAS was faster on
# the 2-core AVX2 box, its products go there. False: every product that applies runs on ember's
# GEMM (the benchmark's and the edge tests' switch).
route_to_numpy = True
_AVX2_MIN_MACS = 1 << 21       # single products below: the call's fixed cost (~10 us of ctypes) loses
_AVX2_MIN_ROWS_ONE_THREAD = 512  # on one thread, shorter single products lose to OpenBLAS's kernels


def _numpy_is_faster(batch: int, m: int, n: int, k: int, nt: int) -> bool:
    """Whether the AVX2 build's measurements say numpy's matmul beats ember's GEMM on this
    product: batched products never (parity on one thread, well ahead on two); single ones
    below ``_AVX2_MIN_MACS``, and on one thread those with fewer than ``_AVX2_MIN_ROWS_ONE_THREAD``
    rows (short products: 64 x 1024 x 1024 0.70x, an LSTM step 0.81x, 256^3 0.89x)."""
    if batch > 1:
        return False
    if m * n * k < _AVX2_MIN_MACS:
        return True
    return nt == 1 and m < _AVX2_MIN_ROWS_ONE_THREAD


# ------------------------------------------------------------------ a right operand packed once
# An RNN unrolled over T steps multiplies by its recurrent weight T times in one graph (and by
# its transpose T times in the backward). :func:`matmul` packs B into the micro-kernel's layout
# on every call -- for an LSTM step's 32 x 1024 x 256 product that is a third of the call. The
# wrapper (codegen/wrapper.py) packs such a shared operand once per graph call with
# :func:`pack_b` and runs its products with :func:`matmul_packed`.
# The micro-kernel's column strip (gemm_native.cpp: NR; 32 with AVX-512, 16 with AVX2) comes from
# the library (``ember_sgemm_nr``): pack_b pads the packed operand's rows to a multiple of it.


class PackedB:
    """A right operand ``b`` of several products, with its packed copy (None where ember's GEMM
    does not apply: those products go to :func:`matmul` with ``b``)."""
    __slots__ = ("b", "packed")

    def __init__(self, b, packed):
        self.b = b
        self.packed = packed

    @property
    def nbytes(self):                # the profiler's bytes-moved column counts the operand
        return self.b.nbytes


def pack_b(b) -> PackedB:
    """``b`` [K, N] float32 packed for :func:`matmul_packed` (one pass; threads split the strips)."""
    fn = _state["fn"] if _state["tried"] else _load()
    sb = _element_strides(b) if b.ndim == 2 and b.dtype == _F32 else None
    if fn is None or config.gemm != "ember" or sb is None or b.size == 0:
        return PackedB(b, None)
    k, n = b.shape
    nr = _state["nr"]
    npad = (n + nr - 1) // nr * nr
    raw = np.empty(k * npad + 16, _F32)
    packed = raw[(-raw.ctypes.data // 4) % 16:][:k * npad]       # 64-byte aligned
    _state["lib"].ember_sgemm_pack_b(k, n, b.ctypes.data, sb[0], sb[1], packed.ctypes.data, _threads())
    return PackedB(b, packed)


def matmul_packed(a, pb: PackedB, out):
    """``matmul(a, pb.b, out)`` for a 2-d ``a``, reading B from its packed copy."""
    fast = _state.get("np_packed")
    if fast is not None and pb.packed is not None and a.dtype is _F32 and out.dtype is _F32 and \
            not fast(a, pb.packed, out, pb.b.shape[0], pb.b.shape[1], _threads(), config.gemm_min_macs):
        return out
    if pb.packed is None or a.ndim != 2 or a.dtype != _F32 or out.dtype != _F32 or not out.flags.c_contiguous:
        return matmul(a, pb.b, out)
    sa = _element_strides(a)
    m, k = a.shape
    n = pb.b.shape[1]
    if sa is None or m * n * k < config.gemm_min_macs:
        return matmul(a, pb.b, out)
    _state["lib"].ember_sgemm_packed(m, n, k, a.ctypes.data, sa[0], sa[1], pb.packed.ctypes.data,
                                     out.ctypes.data, _threads())
    return out
