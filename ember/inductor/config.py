"""Knobs of the CPU inductor (module attributes; change them before compiling).

``EMBER_LOGS`` (a comma list read at import and by :func:`configure_logging`)
turns on the ``ember.inductor`` loggers: ``output_code`` (the generated C++
and Python wrapper), ``schedule`` (the kernels and their nodes), ``fusion``
(every fusion decision with its reason); ``kernel_times`` sets
``profile_kernels`` (a per-kernel time table printed at exit, see ``profiler.py``).
"""
from __future__ import annotations

import logging
import os

# fusion ------------------------------------------------------------------------
fusion = True              # loop fusion in the scheduler (inlining still happens)
cat_extern_min_inputs = 8  # a cat of more pieces than this copies piece by piece (numpy concatenate)
batch_matmuls = True       # independent matmuls sharing a right operand become one (fx_passes.py)
flatten_pointwise = True   # a pointwise group walking every buffer linearly is one 1-d loop
split_div_mod = True       # ... one whose indices divide a loop variable loops over the divided dims
reshape_to_fuse = True     # a consumer of other sizes over the same elements joins its producer's loop
combo_kernels = True       # consecutive independent kernels share one parallel region (codegen/combo.py)
cse_across_stages = True   # a fused loop body's pointwise stages share loads and values (codegen/cpp.py _stage)
combo_max_kernels = 64     # ... at most this many per region
inline_max_ops = 8         # a multi-use pointwise value is recomputed per use below this
output_views = True        # outputs that are views of buffers are returned as numpy views
output_eager_layout = True  # a computed output is written in the (permuted) order eager gives it
transposed_products = True  # a matmul used only transposed is computed as b.T @ a.T
realize_all = False        # write out every pointwise value (debugging / ablation)
reuse_buffers_across_calls = True  # static-size intermediates live in a pool reused by later
                           # calls (never outputs or saved values; see codegen/wrapper.py)

# codegen -----------------------------------------------------------------------
threads = None             # OpenMP threads; None = OpenMP's default (all cores)
simd = True                # '#pragma omp simd' and the simd math declarations
parallel = True            # '#pragma omp parallel for'
parallel_min_work = 32768  # elements below which a loop runs on one thread
stage_major_block = 256    # pointwise kernels of many stages over many buffers run stage by stage (0: off)
stage_major_min_streams = 48  # ... over blocks of this many elements, from this many buffers
parallel_expensive_op_weight = 2  # ... each exp/tanh/erf/log/division in an element's value
                           # counting as this many more elements (a loop nest of a kernel's stages)
dynamic_schedule_min_work = 2048  # outer iterations with inner loops this heavy are dealt out
dynamic_chunks_per_thread = 16    # ... in chunks, this many per thread ('schedule(dynamic, c)';
                                  # 0: static halves). See KernelGen._schedule
# rows of big buffers (at least this many bytes; 0: off) in loop nests with inner loops: a
# float32 output row is staged in a local array and streamed out with non-temporal stores,
# and a stage computing transcendentals over a row an earlier stage already read prefetches
# the next row's (see KernelGen._stream_plan)
stream_min_bytes = 16 << 20
# ... a pointwise stage streaming its row computes it in strips of this many elements, each
# streamed out from L1 (0: the whole row is staged, then copied out)
stream_strip = 1024
# ... and flat (one-dimensional) pointwise loops stream such float32 outputs too, in strips of
# ``stream_strip`` elements (or 1024) staged in L1 (see codegen/cpp_stream.py)
stream_flat = True
# SIMD loops run in strips of this many elements (0: off): on AVX-512 hosts a loop calling float32
# exp stages the arguments of a strip in a local array and runs ember's inlined vector exp over it
# (off: GCC calls the same routine through its vector ABI); a double sum of float32 values adds a
# float partial per strip. See codegen/cpp_strips.py
strip_loops = 1024
# ... only in kernels walking at least this many elements per call: stripped loops took g++ longer
# (an LSTM training graph's cold compile: +0.5-0.8 s of 7 s) and gained nothing measurable at the
# suite's sizes; a 1000x16000 softmax gained ~10%
strip_min_work = 1 << 22
# ... but loops that call exp (or tanh) are staged from this size (exp inlined: nanoGPT's causal softmax
# kernel, 2^19 elements, went from 5.7M to 4.0M instructions a call on AVX2, counted with
# valgrind; glibc's vector expf behind the tiny-result wrapper: 6.2M). Loops with only a double
# sum keep ``strip_min_work``.
strip_exp_min_work = 1 << 18
local_buffers = True       # kernel-private intermediates live in per-iteration local arrays
local_buffer_max = 16384   # ... up to this many elements per outer iteration (stack use)
outer_reduction = True     # interchange loops of reductions over outer dims (see KernelGen)
outer_reduction_block = 256  # outputs accumulated together by an interchanged reduction
outer_row_stages = True    # pointwise siblings of a column reduction run in its row loop (scheduler.row_stage)
# ... split over chunks of whole rows, each into its own partial row, combined after (see
# KernelGen._outer_split_chunks): a 4096 x 4096 column sum 3.7 -> ~13 GB/s on the 2-core box
outer_reduction_split = True
outer_reduction_split_min_work = 1 << 21     # elements reduced per call below which the block loop stays
outer_reduction_split_idle_min_work = 1 << 19  # ... or this many, when its column blocks are fewer than the threads
outer_reduction_split_chunks_per_thread = 4  # chunks per thread (dynamic schedule: uneven vCPUs)
outer_reduction_split_bytes = 256 << 10      # all chunks' partial rows, on the stack, at most
merge_reduction_loops = True  # a reduction shares the loop of the pointwise stage before it
merge_sibling_reductions = True  # consecutive sums over the same ranges share one loop (codegen/cpp.py _sibling_sums)
split_loops = True         # a loop over pieces where cat/pad clamps and comparisons are constant
split_loops_max = 6        # ... at most this many split points
transpose_tile_out_factor = 4  # output-tile transposes run this many tiles along the inputs' rows
transpose_tile = 16        # last outer loop tiled by this when an inner loop reads transposed (0: off)
# OpenMP idle threads sleep instead of spinning (set before libgomp loads, unless the
# user set it). On a small shared machine spinning workers steal the cores the master
# thread needs: measured on this 2-core box under load, a softmax kernel took 25 ms
# per call with the default policy and 0.5 ms with "passive".
omp_wait_policy = "passive"
cxx = os.environ.get("CXX", "g++")
cpp_flags = ["-O3", "-march=native", "-fopenmp", "-fwrapv", "-fno-math-errno", "-ffp-contract=off",
             "-fno-trapping-math", "-shared", "-fPIC"]
# why these: -fwrapv makes signed overflow wrap (the prims' integer semantics);
# -fno-math-errno lets sqrt vectorise and is value-neutral (errno is not IEEE);
# -ffp-contract=off: g++ would otherwise fuse a*b+c into one FMA (one rounding
# instead of two), 1 ulp away from eager numpy; with it an optimizer step compiled
# by the inductor is bit-identical to the eager step;
# -fno-trapping-math: floating-point operations may be evaluated speculatively (nothing
# here traps on FP exceptions; values are unchanged). Without it g++ 12 keeps a branch in
# ``acc += m ? g : 0`` with a double accumulator (a ReLU/BatchNorm backward sum) and runs
# that loop scalar: 25x slower;
# no -ffast-math: results stay IEEE (NaN/inf, signed zeros, no reassociation
# outside the reductions that ask for it).
cpp_libs = ["-lmvec", "-lm"]
# compile the standard headers once into a GCC precompiled header every kernel loads
# (codecache._pch_flags: ~7x less g++ time per small kernel, identical code); EMBER_PCH=0 turns it off
precompiled_header = os.environ.get("EMBER_PCH", "1") != "0"
# use the fixed native helpers (GEMM, BLAS-threads callback, precompiled header) that setup.py
# built into ember/_C/prebuilt at install time, under the code cache's own keys (prebuilt.py);
# EMBER_PREBUILT=0 makes a fresh code cache build them itself (the ablation, and the cache's tests)
prebuilt = os.environ.get("EMBER_PREBUILT", "1") != "0"

# matrix products: "ember" runs ember's GEMM (gemm.py: AVX-512 or AVX2+FMA) where it builds and applies,
# "blas" numpy's matmul (OpenBLAS) for every product -- the ablation
gemm = os.environ.get("EMBER_GEMM", "ember")
gemm_min_macs = 1 << 15    # smaller products go to numpy: the native call's fixed cost would dominate
# 3x3 stride-1 float32 convolutions (forward and input gradient) by Winograd F(2x2, 3x3): 2.25x
# fewer multiply-adds, a few more roundings (ops/_conv_winograd.py; eager keeps the direct kernels)
conv_winograd = os.environ.get("EMBER_CONV_WINOGRAD", "1") != "0"

# compilation -------------------------------------------------------------------
compile_threads = os.cpu_count() or 1   # g++ processes per graph (1: one translation unit)
kernels_per_unit = 8       # a graph is split only when each unit gets at least this many kernels
triton_precompile = True   # cuda: a graph's Triton kernels x autotuning configs are compiled up front in
                           # parallel worker processes (runtime/triton_driver.precompile); False: each
                           # launcher compiles its configs itself, serially, on first use

# debugging -----------------------------------------------------------------------
# random numbers as eager draws them (torch._inductor.config.fallback_random): the random ops stay
# whole and run their eager kernels in program order, so ``ember.manual_seed(s)`` gives the same
# dropout masks and ``rand`` values compiled as eagerly (for tests and debugging; the default draws
# them in the kernels from Philox: same distribution, another stream, fused)
fallback_random = False
debug_lowering = False     # raise instead of falling back when a lowering fails
profile_kernels = False    # time every kernel call of graphs compiled from now on (profiler.py)

LOG_NAMES = ("output_code", "schedule", "fusion")


def configure_logging(spec=None):
    """Enable the loggers named in ``spec`` (default ``$EMBER_LOGS``)."""
    spec = os.environ.get("EMBER_LOGS", "") if spec is None else spec
    names = {s.strip() for s in spec.split(",") if s.strip()}
    if "kernel_times" in names:
        global profile_kernels
        profile_kernels = True
    for n in LOG_NAMES:
        lg = logging.getLogger(f"ember.inductor.{n}")
        if n in names or "all" in names:
            lg.setLevel(logging.DEBUG)
            if not lg.handlers:
                h = logging.StreamHandler()
                h.setFormatter(logging.Formatter("[ember.inductor.%(name)s] %(message)s".replace(
                    "%(name)s", n)))
                h._ember = True
                lg.addHandler(h)
        elif any(getattr(h, "_ember", False) for h in lg.handlers):
            # turned on by an earlier call: turn it off again (a log left at DEBUG
            # silently disables the graph cache, which skips schedule/fusion logging)
            lg.setLevel(logging.NOTSET)
            for h in [h for h in lg.handlers if getattr(h, "_ember", False)]:
                lg.removeHandler(h)
    return names


configure_logging()


# ---------------------------------------------------------------------- per-compile options
def _option_names():
    """The knobs ``ember.compile(options=...)`` may set: this module's plain settings."""
    import types as _types
    return {k: v for k, v in globals().items()
            if not k.startswith("_") and k.islower() and k not in ("os", "logging", "LOG_NAMES")
            and not isinstance(v, (_types.ModuleType, _types.FunctionType, type))}


def checked_options(options: dict) -> dict:
    """``options`` with names normalised (``-`` -> ``_``), each checked to be a knob of this
    module with a value of its type (torch's errors: an unknown name or a wrong type is a
    RuntimeError naming it). Knobs whose default is None take any value."""
    known = _option_names()
    out = {}
    for key, val in options.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise RuntimeError(f"Unexpected optimization option {key}, known options are {sorted(known)}")
        cur = known[name]
        if cur is not None and not (isinstance(val, type(cur)) or (type(cur) is float and type(val) is int)):
            raise RuntimeError(f"Unexpected type of attr {key}, got {type(val).__name__} should be "
                               f"{type(cur).__name__}")
        out[name] = val
    return out


class patch:
    """``with patch({"simd": False}):`` -- set knobs for a block and restore them after (also
    a decorator). Used by ``ember.compile(options=...)``; tests and ablations use it too."""

    def __init__(self, changes: dict = None, **kw):
        self.changes = checked_options({**(changes or {}), **kw})
        self._saved = []

    def __enter__(self):
        g = globals()
        self._saved.append({k: g[k] for k in self.changes})
        g.update(self.changes)
        return self

    def __exit__(self, *exc):
        globals().update(self._saved.pop())
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self:
                return fn(*a, **k)
        return wrapper
