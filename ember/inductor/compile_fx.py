"""``compile_fx(gm, example_inputs) -> callable``: the CPU inductor entry point.

lower (``graph.py``) -> schedule/fuse (``scheduler.py``) -> C++ + Python
wrapper (``codegen/``) -> compile and load (``codecache.py``).

The compiled code is specialised to the example inputs' shapes, dtypes and
strides (``dynamic=True``: sizes become symbols, contiguous inputs only). A
call with other strides compiles another variant; other shapes or dtypes
(without ``dynamic``) are an error, since the FX graph itself bakes them in.
If lowering or the C++ build fails, the graph runs eagerly and the reason is
logged (never a crash, never a wrong answer).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import _openmp
from ..fx.lazy_graph_module import LazyGraphModule
from ..tensor import Tensor, _make
from . import codecache, config, fx_graph_cache
from ..runtime import code_cache as _code_cache

log = logging.getLogger("ember.inductor")
log_code = logging.getLogger("ember.inductor.output_code")


# The compiler proper (graph.py, scheduler.py, codegen/: all built on sympy) is imported when
# a graph is compiled, not with this module: a graph-cache hit never needs it, and importing
# sympy alone takes longer than a warm compile may.
def _graph():
    from . import graph
    return graph


class GuardError(RuntimeError):
    """A compiled graph was called with inputs that break its assumptions."""

    def __init__(self, what, dim):
        super().__init__(f"inductor: input {what} (dim {dim}) violates a size guard of the compiled graph")


class CompiledGraph:
    """One compiled variant: the generated wrapper plus the loaded library."""

    def __init__(self, graph: GraphLowering, source: str, wrapper_src: str, call, n_kernels: int):
        self.graph = graph
        self.source = source
        self.wrapper_src = wrapper_src
        self._call = call
        self.n_kernels = n_kernels
        self.graph_digest = None    # fx_graph_cache's digest of the graph (None: not cacheable)
        self.fallbacks = list(graph.fallbacks)
        self._input_pos = {n: i for i, n in enumerate(graph.input_names)}
        self._consts = [graph.constants[n]._data for n in graph.input_names if n in graph.constants]
        self._n_user = len(graph.input_names) - len(graph.constants)
        kinds = []
        inplace = getattr(graph, "inplace", None) or {}
        for o in graph.outputs:
            if isinstance(o, tuple) and o[0] == "input":
                kinds.append(("input", self._input_pos[o[1]]))
            elif isinstance(o, tuple) and o[0] == "view":
                kinds.append(("buf", None))
            elif isinstance(o, tuple) and o[0] == "const":
                kinds.append(("const", o[1]))
            elif getattr(o, "name", None) in inplace and inplace[o.name] in self._input_pos:
                # computed into the input it is the new value of: the input tensor is the
                # output (an optimizer step returns a few hundred of these; no wrapper each)
                kinds.append(("input", self._input_pos[inplace[o.name]]))
            else:
                kinds.append(("buf", None))
        self._kinds = kinds
        self._plain = all(k[0] == "buf" for k in kinds)
        self._spec = spec = graph.out_spec
        self._single = self._plain and spec[0] == "leaf"
        # the common output structures rebuilt without walking the spec
        if spec[0] == "leaf":
            self._rebuild = lambda outs: outs[0]
        elif spec[0] == "seq" and spec[1] in (tuple, list) and all(s[0] == "leaf" for s in spec[2]):
            self._rebuild = spec[1]
        else:
            unflatten = _graph().unflatten
            self._rebuild = lambda outs: unflatten(spec, iter(outs))

    def __call__(self, tensors, arrays=None):
        if arrays is None:
            arrays = [t._data for t in tensors]
        if self._consts:
            arrays = arrays + self._consts
        res = self._call(arrays)
        if self._plain:
            if self._single:
                return _make(res[0])
            return self._rebuild([_make(a) for a in res])
        else:
            outs = []
            for a, (kind, v) in zip(res, self._kinds):
                if kind == "buf":
                    outs.append(_make(a))
                elif kind == "input":
                    outs.append(tensors[v] if v < len(tensors) else self.graph.constants[
                        self.graph.input_names[v]])
                else:
                    outs.append(v)
        return self._rebuild(outs)


def _ensure_meta(gm, example_inputs):
    """Fallbacks need each node's output shape/dtype: fill ``tensor_meta`` by an
    eager run when the tracer did not record it."""
    missing = any(n.op == "call_function" and "tensor_meta" not in n.meta and
                  getattr(n.target, "_ember_op", None) is not None for n in gm.graph.nodes)
    if missing:
        import contextlib
        from ..autograd import no_grad
        from ..fx.fake_tensor import FakeTensorMode, is_fake
        from ..fx.passes.shape_prop import ShapeProp
        # fake example inputs (symbolic sizes, dynamic=True) run the ops' meta functions: an
        # extern kernel (sort) run on them would ask a fake for its data
        fake = FakeTensorMode() if any(is_fake(t) for t in example_inputs) else contextlib.nullcontext()
        with no_grad(), fake:     # (a training graph's prims record no backward: shapes only)
            ShapeProp(gm).propagate(*example_inputs)


def compile_graph(gm, example_inputs, dynamic=False) -> CompiledGraph:
    if any(getattr(getattr(t, "device", None), "type", None) == "cuda" for t in example_inputs):
        # cuda inputs: Triton kernels on cupy's current stream, same calling convention
        from .codegen.triton_wrapper import compile_graph_triton
        return compile_graph_triton(gm, example_inputs, mode="cuda", dynamic=dynamic).as_variant()
    _openmp.check_wait_policy(log)   # once per process: a libgomp loaded before ember spins
    # None: bypassed/uncacheable. A LazyGraphModule with a digest hint is looked up unbuilt
    digest = fx_graph_cache.digest_for(gm, example_inputs, dynamic)
    if digest is not None:
        hit = fx_graph_cache.lookup(fx_graph_cache.key_from_digest(digest), gm)
        if hit is not None and fx_graph_cache.replay_shape_env_guards(hit, example_inputs):
            hit.graph_digest = digest
            return hit
    if isinstance(gm, LazyGraphModule):
        # a miss on the hint (its entry was deleted, or another compiler config): build the
        # graph and key it from its own nodes, as any other graph
        gm = gm.materialize()
        _ensure_meta(gm, example_inputs)
        digest = fx_graph_cache.digest_for(gm, example_inputs, dynamic)
    cache_key = fx_graph_cache.key_from_digest(digest) if digest is not None else None
    from .codegen import combo, cpp
    from .codegen.wrapper import WrapperGen
    from .graph import GraphLowering
    from .scheduler import FusedGroup, Scheduler
    from .virtualized import set_graph
    if not dynamic:
        from .fx_passes import batch_matmuls
        gm = batch_matmuls(gm)
    graph = GraphLowering(gm, example_inputs, dynamic=dynamic).run()
    with set_graph(graph):
        sched = Scheduler(graph, stage_major=True, row_stages=True)
        size_syms = sorted(graph.sizevars.var_to_val, key=lambda s: int(s.name[1:]))
        ksrc, names, params, checks, prof = {}, {}, {}, set(), {}
        local_all = set()
        for gi, grp in enumerate(sched.groups):
            if isinstance(grp, FusedGroup):
                kname = f"kernel{gi}"
                kg = cpp.KernelGen(kname, grp, graph, size_syms, sched.local_buffers(gi))
                ksrc[gi] = kg.generate()
                names[gi] = kname
                params[gi] = kg.params
                prof[gi] = (kg.kind, kg.origins)
                if kg.uses_index_check:
                    checks.add(gi)
                local_all |= kg.local
        # consecutive independent kernels share one parallel region (codegen/combo.py)
        sched.groups, ksrc, names, params, prof, checks = combo.combine(
            sched.groups, ksrc, names, params, prof, checks, getattr(graph, "inplace", None) or {})
        kernels = [ksrc[gi] for gi in names]
        # one translation unit per graph; a graph with many kernels is split into
        # several compiled in parallel (g++ processes) to cut the cold compile time
        nparts = 1
        if config.compile_threads > 1 and len(kernels) >= 2 * config.kernels_per_unit:
            nparts = min(config.compile_threads, len(kernels) // config.kernels_per_unit)
        chunks = [kernels[i::nparts] for i in range(nparts)]
        sources = [cpp.generate_source(c) for c in chunks if c]
        source = "\n// ---- next translation unit ----\n".join(sources)
        libs = codecache.load_many(sources) if kernels else []
        lib = {}
        for part, l_ in zip(range(nparts), libs):
            for gi in list(names)[part::nparts]:
                lib[names[gi]] = l_
        wg = WrapperGen(graph, sched.groups, names, params, size_syms, checks, local_all,
                        persistent=config.reuse_buffers_across_calls)
        wrapper_src = wg.generate(lib)
    if log_code.isEnabledFor(logging.DEBUG):
        log_code.debug("generated C++:\n%s\nwrapper:\n%s", source if kernels else "(none)", wrapper_src)
    glb = dict(wg.globals)
    glb["_GuardError"] = GuardError
    glb["_libs"] = libs  # keep the libraries alive with the wrapper
    exec(_code_cache.compile_source(wrapper_src, "<ember.inductor wrapper>"), glb)   # (stored for a warm hit)
    if config.profile_kernels:
        _instrument(glb, sched, names, prof)
    compiled = CompiledGraph(graph, source, wrapper_src, glb["call"], len(kernels))
    compiled.graph_digest = digest
    if cache_key is not None:
        fx_graph_cache.save(cache_key, gm, graph, compiled, sources, libs, wg.globals)
    return compiled


def _instrument(glb, sched, names, prof):
    """Wrap the wrapper's kernel callables with the per-kernel timer (profiler.py)."""
    from . import profiler
    info = {}
    for gi, grp in enumerate(sched.groups):
        if gi in names:
            kind, origins = prof[gi]
            info[f"_{names[gi]}"] = (names[gi], kind, origins, False)
        else:
            k = grp.node.kernel
            info[f"_extern_{k.name}"] = (k.name, k.kind, sorted(getattr(k, "origins", ())),
                                         not getattr(k, "out_arg", False))
    profiler.instrument(glb, info)


def _intern_key(key):
    """``key`` with equal per-input layouts sharing one tuple. Each call compares a fresh key
    with the last one; the last one's tuples were allocated a call ago, and a call that streamed
    more than the caches (an optimizer step over 280 MB) left them all in memory: one miss per
    tuple -- 175 us of the benchmark's AdamW step for 160 inputs. Shared, the comparison reads
    a handful of distinct tuples, cached after their first use."""
    seen = {}
    return tuple([seen.setdefault(k, k) for k in key])


def _key(arrays):
    return tuple([(a.shape, a.strides, a.dtype) for a in arrays])


class CompiledFunction:
    """What :func:`compile_fx` returns: call it with the flat input tensors."""

    def __init__(self, gm, example_inputs, dynamic=False):
        self._gm = gm                # a GraphModule, or a LazyGraphModule built on first read
        self.dynamic = dynamic
        self.variants: Dict[Any, Any] = {}
        self._last_key = None
        self._last = None
        self.eager_reason = None
        self._compile(list(example_inputs))

    @property
    def gm(self):
        """The graph (built now if it came lazily from the aot cache and was not yet needed)."""
        gm = self._gm
        if isinstance(gm, LazyGraphModule):
            gm = self._gm = gm.materialize()
        return gm

    @property
    def graph_digest(self):
        """fx_graph_cache's digest of the graph as first compiled (None: not cacheable or failed):
        what the aot cache stores to find the compiled graph again without rebuilding it."""
        first = next(iter(self.variants.values()), None)
        return getattr(first, "graph_digest", None)

    def _compile(self, inputs):
        # fake example inputs (symbolic sizes from aot/dynamo): compiled for the contiguous
        # arrays of any size that the caller passes
        fake = self.dynamic and any(type(a._data).__name__ == "FakeArray" for a in inputs)
        key = tuple([(a._data.ndim, a._data.dtype, True) for a in inputs]) if fake else self._vkey(inputs)
        try:
            gm = self._gm
            # a lazy graph's digest hint describes it with the example inputs it came with: the
            # first compile only. compile_graph builds the graph if the hint misses
            if not (isinstance(gm, LazyGraphModule) and gm.graph_digest_hint is not None
                    and not self.dynamic and not self.variants):
                gm = self.gm
                _ensure_meta(gm, inputs)
            try:
                if self.dynamic and not fake:   # (a symbolic trace's concrete sizes are guarded by its owner)
                    _graph().check_no_baked_sizes(self.gm)
                v = compile_graph(gm, inputs, dynamic=self.dynamic)
            except _graph().DynamicShapeError as e:   # (evaluated only when something is raised)
                if self.variants:
                    # a new layout of a graph already compiled for every size: this layout runs
                    # eagerly (below); the compiled variants keep serving every size
                    raise
                log.warning("inductor: %s; compiling for the example shapes instead", e)
                self.dynamic = False
                key = self._vkey(inputs)
                v = compile_graph(self.gm, inputs, dynamic=False)
        except Exception as e:  # noqa: BLE001 - any failure runs the graph eagerly
            if config.debug_lowering:
                raise
            reason = f"{type(e).__name__}: {e}"
            log.warning("inductor: compiling the graph failed, running it eagerly: %s", reason)
            self.eager_reason = reason
            v = None
        if isinstance(self._gm, LazyGraphModule) and self._gm.materialized:
            self._gm = self._gm.materialize()       # (built on an inductor miss: hold the graph itself)
        self.variants[key] = v
        self._last_key, self._last = _intern_key(key), v
        return v

    def _vkey(self, tensors, arrays=None):
        if arrays is None:
            arrays = [t._data for t in tensors]
        if self.dynamic:
            return tuple([(a.ndim, a.dtype, a.flags.c_contiguous) for a in arrays])
        return _key(arrays)

    @property
    def compiled(self):
        return self._last

    def __call__(self, *tensors):
        arrays = [t._data for t in tensors]
        # the variant key, inlined (this runs on every call): layouts for static graphs
        if self.dynamic:
            key = tuple([(a.ndim, a.dtype, a.flags.c_contiguous) for a in arrays])
        else:
            key = tuple([(a.shape, a.strides, a.dtype) for a in arrays])
        if key == self._last_key:
            v = self._last
        else:
            if key not in self.variants:
                first = next(iter(self.variants))
                if not self.dynamic and [k[0] for k in first] != [k[0] for k in key]:
                    raise GuardError("shape", "-")
                # (the key it stores under may differ from ``key``: a dynamic graph that can only
                # compile for these shapes is stored under their static key, or as None if that
                # fails too -- then it runs eagerly, as any failed compile does)
                v = self._compile(list(tensors))
            else:
                v = self.variants[key]
                self._last_key, self._last = _intern_key(key), v
        if v is None:
            return self.gm(*tensors)
        return v(tensors, arrays)


def compile_fx(gm, example_inputs, dynamic: bool = False):
    """Compile an FX graph of prims for the CPU; see the module docstring."""
    return CompiledFunction(gm, example_inputs, dynamic=dynamic)
