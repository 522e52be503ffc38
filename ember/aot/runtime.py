"""The runtime wrapper: compiled forward and backward graphs plugged into eager autograd.

``aot_function(fn, example_inputs, fw_compiler, bw_compiler)`` returns a
callable taking the flat input tensors. Called with grad mode on and an input
that requires grad, it runs the compiled forward inside a custom autograd
``Function`` named ``CompiledFunction``: its outputs have ``grad_fn`` =
``CompiledFunctionBackward``, whose backward runs the compiled backward graph on
the saved values and the incoming gradients. Otherwise it runs an inference
graph (forward only, traced on first use).

Mutated inputs (BatchNorm running stats, ``x.add_(...)``, ``x[i] = v``) come
back from the forward graph as new values and are written into the caller's
tensors after each call, in place, so eager semantics hold. An input whose write needs autograd
(one that does not require grad written with values that do, or a non-leaf that requires grad,
``a = x * 3; a.add_(y)``) gets its new value as a differentiable output instead, copied into it
with grad mode on (``_rebase_mutated``): ``a.grad_fn`` is then a CopyBackwards leading into the
compiled backward, as torch's compiled function leaves it.

Double backward (``create_graph=True``) is not compiled: the backward then
re-runs the original function eagerly on the saved inputs and differentiates
it with the autograd engine (logged), which is correct and differentiable.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, List, Optional, Sequence

from .._state import STATE
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor
from .joint import AOTUnsupported, JointGraph, trace_joint, view_fits
from .partition import partition

log = logging.getLogger("ember.aot")


def _logs() -> set:
    return {s.strip() for s in os.environ.get("EMBER_LOGS", "").split(",") if s.strip()}


def _emit(kind: str, title: str, text) -> None:
    """Log ``text`` (or what the callable ``text`` returns: a graph's code is generated only
    when logged) on ``ember.aot.<kind>``; ``EMBER_LOGS=<kind>`` turns it on, to stderr.

    Like dynamo's artifacts (``ember/dynamo/logs.py``): the loggers always
    exist, so tests and users can also attach their own handlers."""
    lg = logging.getLogger(f"ember.aot.{kind}")
    wanted = kind in _logs() or bool(_logs() & {"all", "aot"})
    if wanted:
        lg.setLevel(logging.INFO)
        if not any(getattr(h, "_ember", False) for h in lg.handlers):
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter(f"[ember {kind}] %(message)s"))
            h._ember = True
            lg.addHandler(h)
    if lg.isEnabledFor(logging.INFO):
        lg.info("===== %s =====\n%s", title, text() if callable(text) else text)


class AOTModule:
    """A function compiled into forward/backward graphs (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], example_inputs: Sequence[Tensor], *,
                 fw_compiler: Callable, bw_compiler: Callable, decompositions: Optional[dict] = None,
                 dynamic: bool = False, memory_budget: Optional[float] = None,
                 inference_compiler: Optional[Callable] = None, shape_env=None, fake_inputs=None):
        self.fn = fn
        # dynamo's ShapeEnv and example values: trace with its symbols (see ``prepare``)
        self.shape_env = shape_env
        self.fake_inputs = list(fake_inputs) if fake_inputs is not None else None
        self._frozen = False
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler
        self.inference_compiler = inference_compiler or fw_compiler
        # a table, None, or "prims" (ember's own table, resolved on the first trace: see
        # ``_decomposition_table``)
        if isinstance(decompositions, str) and decompositions != "prims":
            raise ValueError(f"aot: decompositions={decompositions!r}: expected a table, None or 'prims'")
        self.decompositions = decompositions
        self.dynamic = dynamic
        self.memory_budget = memory_budget
        self.example_inputs = list(example_inputs)
        self._training = None       # (joint, fw, bw, n_saved, tensor mask, FunctionClass)
        self._inference = None      # (joint, compiled forward)
        self.report = None
        self.timings = {}
        self._eager_reason = None   # set when the graph cannot be traced: it then runs eagerly
        self._enables_grad = None   # whether the graph turns grad mode on (see _turns_grad_on)
        self._logged_enable_grad = False

    # -- compilation -------------------------------------------------------------------
    def _decomposition_table(self):
        """The table to trace with. ``"prims"`` names ember's own, imported here rather than
        when the backend is called: the aot cache keys it by name, so a warm compile that
        hits never imports ``ember.prims`` (~50 ms of a 0.3 s budget)."""
        if isinstance(self.decompositions, str):
            from .backends import _full_decompositions
            self.decompositions = _full_decompositions()
        return self.decompositions

    def _compile_training(self):
        from . import cache
        ck = cache.key_for(self, training=True)
        hit = cache.lookup(ck, "training", self.shape_env) if ck is not None else None
        sym = self.shape_env is not None
        n_guards = len(self.shape_env.guards) if sym else 0
        if hit is not None:
            if hit["kind"] == "no_grad_outputs":
                self._training = False
                return
            joint, fw_gm, bw_gm, bw_examples = hit["joint"], hit["fw"], hit["bw"], hit["bw_examples"]
            self.report = hit["report"]
            is_tensor, n_saved = hit["is_tensor"], hit["n_saved"]
        else:
            t0 = time.perf_counter()
            joint = trace_joint(self.fn, self.example_inputs, decompositions=self._decomposition_table(),
                                dynamic=self.dynamic, inference=False, shape_env=self.shape_env,
                                fake_inputs=self.fake_inputs)
            self.timings["aot_trace_joint"] = time.perf_counter() - t0
            if joint.inference:
                if ck is not None:
                    cache.save(ck, "no_grad_outputs", symbolic=sym, shape_env_guards=self._trace_guards(n_guards))
                self._training = False
                return
            _merge_repeats(joint.gm)
            joint.grad_tangents = _grad_tangents(joint)
            joint.double_backward = _double_backward_plan(joint)
            _emit("aot_joint_graph", "aot joint graph", lambda: joint.gm.code)
            t0 = time.perf_counter()
            fw_gm, bw_gm, saved, report = partition(joint, self.memory_budget)
            for n in bw_gm.graph.nodes:      # (inductor: gradients' layout is not the user's to see)
                if n.op == "output":
                    n.meta["gradients"] = True
            self.timings["aot_partition"] = time.perf_counter() - t0
            self.report = report
            _emit("aot_graphs", "aot forward graph", lambda: fw_gm.code)
            _emit("aot_graphs", "aot backward graph", lambda: bw_gm.code)
            _emit("aot_graphs", "aot partition", lambda: str(report))
            saved_vals = [s.meta.get("val", s.meta.get("sym_val")) for s in saved]
            tangent_vals = [n.meta.get("val") for n in joint.gm.graph.nodes
                            if n.op == "placeholder"][joint.num_primals:]
            bw_examples = saved_vals + tangent_vals
            is_tensor = [s.meta.get("val") is not None or "tensor_meta" in s.meta for s in saved]
            n_saved = len(saved)
            # the graphs as stored are taken before the compilers see them; the entry is
            # written after, with the compiled graphs' digests (see cache.lookup)
            blobs = (cache.graph_blob(fw_gm, sym), cache.graph_blob(bw_gm, sym),
                     cache.constants_blob(fw_gm), cache.constants_blob(bw_gm)) if ck is not None else None
            trace_guards = self._trace_guards(n_guards)      # (before the graph compilers add theirs)
        fw_examples = self._examples()
        t0 = time.perf_counter()
        fw = self.fw_compiler(_graph_for(self.fw_compiler, fw_gm), fw_examples)
        bw = self.bw_compiler(_graph_for(self.bw_compiler, bw_gm), bw_examples)
        self.timings["aot_compile"] = time.perf_counter() - t0
        if hit is None and ck is not None:
            cache.save(ck, "training", symbolic=sym, joint=joint, fw=blobs[0], bw=blobs[1], bw_examples=bw_examples,
                       fw_consts=blobs[2], bw_consts=blobs[3],
                       is_tensor=is_tensor, n_saved=n_saved, report=report,
                       digests={"fw": _digest(fw), "bw": _digest(bw)}, shape_env_guards=trace_guards)
        self._training = (joint, fw, bw, n_saved, is_tensor, _make_function_class(self, joint))
        self._no_grad_path = _inputs_without_gradient(joint, bw_gm)

    def _compile_inference(self):
        from . import cache
        ck = cache.key_for(self, training=False)
        hit = cache.lookup(ck, "inference", self.shape_env) if ck is not None else None
        sym = self.shape_env is not None
        n_guards = len(self.shape_env.guards) if sym else 0
        if hit is not None:
            self._inference = (hit["joint"], self.inference_compiler(
                _graph_for(self.inference_compiler, hit["fw"]), self._examples()))
            return
        t0 = time.perf_counter()
        joint = trace_joint(self.fn, self.example_inputs, decompositions=self._decomposition_table(),
                            dynamic=self.dynamic, inference=True, shape_env=self.shape_env,
                            fake_inputs=self.fake_inputs)
        self.timings["aot_trace_inference"] = time.perf_counter() - t0
        _merge_repeats(joint.gm)
        _emit("aot_graphs", "aot inference graph", lambda: joint.gm.code)
        fw_gm = _flatten_inference(joint)
        # output position -> input position of each mutated input's new value: a compiler may
        # write it straight into the input (inductor does where safe), then _write_back skips it
        n = joint.num_outputs
        fw_gm.meta["input_mutations"] = {n + k: i for k, i in enumerate(joint.mutated_inputs)}
        blob = cache.graph_blob(fw_gm, sym) if ck is not None else None   # (before the compiler sees it)
        consts = cache.constants_blob(fw_gm) if ck is not None else None
        trace_guards = self._trace_guards(n_guards)
        compiled = self.inference_compiler(fw_gm, self._examples())
        if ck is not None:
            cache.save(ck, "inference", symbolic=sym, joint=joint, fw=blob, fw_consts=consts,
                       digests={"fw": _digest(compiled)},
                       shape_env_guards=trace_guards)
        self._inference = (joint, compiled)

    def _trace_guards(self, n_before: int) -> list:
        """The size guards the trace (and partition) added to dynamo's ShapeEnv: the aot cache
        stores them with the graphs, and a hit replays them (``cache.replay_shape_env_guards``)."""
        return list(self.shape_env.guards[n_before:]) if self.shape_env is not None else []

    def _examples(self):
        """What the forward compiler gets: dynamo's symbolic fakes when tracing with its ShapeEnv."""
        return self.fake_inputs if self.shape_env is not None else self.example_inputs

    def prepare(self):
        """Compile now, for the mode the example inputs will be called in (dynamo guards grad mode
        and requires_grad, so an entry is always called in one mode).

        With a caller's ShapeEnv this must happen before the caller compiles its guards: every
        size guard the trace and the graph compilers add goes into that ShapeEnv. Afterwards the
        ShapeEnv is *frozen*: a call in the other mode is not compiled (its guards would go
        unchecked) but runs the original function eagerly, logged. A trace that fails here
        raises: the backend then compiles per shape (where a failing trace runs eagerly)."""
        training = STATE.grad_enabled and any(isinstance(t, Tensor) and t.requires_grad
                                              for t in self.example_inputs)
        # (the cache key's body, made once for both modes: see cache.key_lines; not with a
        # ShapeEnv, whose guards a cache hit of the first mode adds to)
        self._key_body_memo = {} if self.shape_env is None else None
        try:
            if training:
                self._compile_training()
            if not training or self._training is False:
                self._compile_inference()
        finally:
            self._key_body_memo = None
        self._frozen = self.shape_env is not None
        return self

    def _compiled(self, compile_fn) -> bool:
        """Run ``compile_fn``; a graph the trace cannot express (an ``AOTUnsupported`` op, a
        functionalization case that is not implemented) runs eagerly from then on, logged:
        never a crash, never a wrong answer."""
        from ..runtime.gc_pause import gc_paused
        try:
            with gc_paused():
                compile_fn()
            return True
        except (NotImplementedError, AOTUnsupported) as e:
            self._eager_reason = f"{type(e).__name__}: {e}"
            log.warning("aot: this graph cannot be compiled, running it eagerly: %s", self._eager_reason)
            return False

    def _unprepared(self, inputs):
        log.info("aot: a call in a grad mode the graph was not compiled for, after the caller's size "
                 "guards were fixed: running the original function eagerly")
        return self.fn(*inputs)

    def _turns_grad_on(self) -> bool:
        """Whether the graph switches grad mode on (``with enable_grad():`` in the traced code)."""
        on = self._enables_grad
        if on is None:
            graph = getattr(self.fn, "graph", None)
            on = self._enables_grad = graph is not None and any(
                n.op == "call_function" and getattr(n.target, "__name__", "") == "_set_grad_enabled"
                and n.args and n.args[0] is True for n in graph.nodes)
        return on

    def _eager_enable_grad(self, inputs):
        """Called with grad mode off, a graph that turns it on for some of its ops: its outputs
        there need grad_fns of the caller's autograd graph. The inference graph has none and the
        training trace assumes grad mode on at entry, so the graph runs eagerly (logged once)."""
        if not self._logged_enable_grad:
            self._logged_enable_grad = True
            log.info("aot: a graph that turns grad mode on, called under no_grad with inputs that "
                     "require grad, runs eagerly")
        return self.fn(*inputs)

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *inputs: Tensor) -> Any:
        if self._eager_reason is not None:
            return self.fn(*inputs)
        training = STATE.grad_enabled and any(isinstance(t, Tensor) and t.requires_grad for t in inputs)
        if not STATE.grad_enabled and self._turns_grad_on() and \
                any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
            return self._eager_enable_grad(inputs)
        if training:
            if self._training is None:
                if self._frozen:
                    return self._unprepared(inputs)
                # (a graph with no gradient to compute compiles for inference right after: the
                # two share the cache key's body, see cache.key_lines)
                self._key_body_memo = {} if self.shape_env is None else None
                try:
                    ok = self._compiled(self._compile_training)
                    if ok and self._training is False and self._inference is None:
                        ok = self._compiled(self._compile_inference)
                finally:
                    self._key_body_memo = None
                if not ok:
                    return self.fn(*inputs)
            if self._training is not False:
                joint, fw, bw, n_saved, is_tensor, cls = self._training
                if getattr(self, "_no_grad_path", None):
                    # inputs that require grad but get no gradient (used only through .detach(),
                    # e.g. a loss read with .item()): passed detached, so the backward does not
                    # run into their graph (freed already, after the loss's own backward)
                    inputs = tuple(t.detach() if i in self._no_grad_path and isinstance(t, Tensor) else t
                                   for i, t in enumerate(inputs))
                outs = cls.apply(*inputs)
                outs = outs if isinstance(outs, tuple) else (outs,)
                if joint.mutated_grad_inputs:
                    outs = _rebase_mutated(joint, inputs, outs)
                outs = _realias(joint, inputs, outs)
                return outs if joint.output_is_tuple else outs[0]
        if self._inference is None:
            if self._frozen:
                return self._unprepared(inputs)
            if not self._compiled(self._compile_inference):
                return self.fn(*inputs)
        joint, fw = self._inference
        # grad mode off for the call: a plain flag flip (a no_grad() context object costs more
        # than the rest of a small graph's call)
        prev = STATE.grad_enabled
        if prev:
            STATE.grad_enabled = False
            try:
                res = fw(*inputs)
            finally:
                STATE.grad_enabled = prev
        else:
            res = fw(*inputs)
        n = joint.num_outputs
        if joint.mutated_inputs:
            res = _detach_from_mutated(res, n, inputs, joint.mutated_inputs)
            _write_back(inputs, joint.mutated_inputs, res[n:n + len(joint.mutated_inputs)])
        if not joint.output_is_tuple and not joint.aliased_outputs:
            return res[0]
        outs = tuple(res[:n])
        outs = _realias(joint, inputs, outs)
        return outs if joint.output_is_tuple else outs[0]


def _inputs_without_gradient(joint: JointGraph, bw_gm) -> frozenset:
    """Primal positions that require grad but whose gradient the backward graph leaves None.

    Read off the graph only when it is built: an aot cache hit's graphs stay unbuilt (inductor
    finds its code by digest), and such an input then keeps its edge, as before."""
    if getattr(bw_gm, "materialized", True) is False:
        return frozenset()
    try:
        out = next(n for n in bw_gm.graph.nodes if n.op == "output")
        grads = out.args[0]
    except (AttributeError, StopIteration, IndexError):
        return frozenset()
    if len(grads) != len(joint.grad_inputs):
        return frozenset()
    return frozenset(pos for pos, g in zip(joint.grad_inputs, grads) if g is None)


def _joint_layout(joint: JointGraph):
    """(nodes, placeholders, forward outputs, gradient outputs) of the joint graph, or None when
    its output is not laid out as ``((outs...), (grads...))``."""
    try:
        nodes = list(joint.gm.graph.nodes)
        phs = [n for n in nodes if n.op == "placeholder"]
        (fwd_outs, grads), _ = next(n for n in nodes if n.op == "output").args[0]
    except (AttributeError, StopIteration, TypeError, ValueError):
        return None
    return nodes, phs, fwd_outs, grads


def _grad_tangents(joint: JointGraph) -> Optional[List[tuple]]:
    """For each gradient output of the joint graph (``grad_inputs`` order), the indices of the
    tangents it is computed from; None when the graph's output is not laid out as expected."""
    layout = _joint_layout(joint)
    if layout is None:
        return None
    nodes, phs, _, grads = layout
    tangents = phs[joint.num_primals:]
    if len(grads) != len(joint.grad_inputs) or len(tangents) != len(joint.diff_outputs):
        return None
    deps = _reaching(nodes, {t: 1 << k for k, t in enumerate(tangents)})
    return [tuple(k for k in range(len(tangents)) if deps.get(g, 0) >> k & 1) for g in grads]


def _reaching(nodes, seeds: dict) -> dict:
    """node -> bit set of the ``seeds`` (placeholder -> bit) whose values it is computed from."""
    deps = dict(seeds)
    for n in nodes:
        if n.op != "placeholder":
            m = 0
            for a in n.all_input_nodes:
                m |= deps.get(a, 0)
            if m:
                deps[n] = m
    return deps


def _double_backward_plan(joint: JointGraph) -> Optional[tuple]:
    """``JointGraph.double_backward``: whether re-running the function eagerly reproduces the
    call the backward belongs to. Not when the graph draws random numbers (the re-run draws
    others: its gradients would be for another dropout mask) or when a differentiable output or
    a gradient reads the value an input had before the graph wrote it in place (the re-run
    reads the updated one). An input written but not read that way (running stats) is given to
    the re-run as a copy, so the write is not repeated on the caller's tensor."""
    layout = _joint_layout(joint)
    if layout is None:
        return None
    nodes, phs, fwd_outs, grads = layout
    for n in nodes:
        op = getattr(n.target, "_ember_op", None) if n.op == "call_function" else None
        if op is not None and "random" in getattr(op, "tags", ()):
            return ("the graph draws random numbers (dropout, rand, ...): the eager re-run would draw "
                    "others", ())
    mutated = sorted(set(joint.mutated_inputs) | set(joint.mutated_grad_inputs))
    deps = _reaching(nodes, {phs[p]: 1 << k for k, p in enumerate(mutated) if p < len(phs)})
    read = 0
    for r in [fwd_outs[i] for i in joint.diff_outputs] + list(grads):
        read |= deps.get(r, 0)
    for k, p in enumerate(mutated):
        if read >> k & 1:
            return (f"input {p} is written in place and the outputs depend on the value it had before "
                    "the call: the eager re-run would start from the updated one", ())
    return (None, tuple(mutated))


def _flatten_inference(joint: JointGraph):
    """The inference graph returns ((outs...), (mutated...)): make it one flat tuple."""
    from ..fx.graph_module import GraphModule
    g = joint.gm.graph
    out = next(n for n in g.nodes if n.op == "output")
    outs, mutated = out.args[0]
    out.args = (tuple(outs) + tuple(mutated),)
    return GraphModule(joint.gm, g, class_name="InferenceGraph")


def _realias(joint: JointGraph, inputs, outs):
    """Outputs that are views of inputs eagerly become views of the real inputs again.

    The graph computed their values functionally; regenerating them with
    ``as_strided`` on the input (after any write-back) gives the same values
    *and* the aliasing: a later in-place write through the output reaches the
    input, and the output's grad_fn is the view's, so gradients flow to the
    input through eager autograd."""
    if not joint.aliased_outputs:
        return outs
    from ..ops import api
    outs = list(outs)
    for k, (kind, i, size, stride, off) in sorted(joint.aliased_outputs.items(),
                                                  key=lambda e: e[1][0] not in ("input", "self",
                                                                                 "input_nograd")):
        # ("*_nograd": an alias that does not require grad eagerly, ``x.detach()``; see
        # joint._alias_autograd)
        nograd = kind.endswith("_nograd")
        if nograd:
            kind = kind[:-len("_nograd")]
        if kind == "self":
            outs[k] = inputs[i]
            continue
        src = inputs[i] if kind == "input" else outs[i]
        if kind == "output" and (not src.is_contiguous() or src.storage_offset() != 0
                                 or not view_fits(size, stride, off, src.numel())):
            continue        # the compiled output is not the plain buffer the trace saw: keep values only
        if kind == "input" and any(st == 0 and n > 1 for n, st in zip(src.shape, src.stride())):
            # an input whose elements share memory (expanded): as_strided's backward would
            # sum the gradients of the shared elements into each of them; keep the values
            # (and the compiled backward's gradients). Writing into such a view is refused
            # eagerly anyway.
            continue
        offset = src.storage_offset() + off if kind == "input" else off
        make = api.as_strided
        if kind == "input" and not src.is_contiguous() and src._base is None:
            # a non-contiguous input that owns its memory (channels_last, a permuted result
            # passed across a graph break): the public as_strided refuses it (its offsets are
            # relative to a base); over dense memory starting at its first element the view's
            # offsets are those of the memory itself, so it is built directly. Otherwise the
            # output keeps its values only (it raised)
            if not _dense_from_start(src) or not view_fits(size, stride, off, src.numel()):
                continue
            make = _owner_view
        if nograd or not STATE.grad_enabled or not src.requires_grad:
            with no_grad():
                outs[k] = make(src, size, stride, offset)
        else:
            outs[k] = make(src, size, stride, offset)
    return tuple(outs)


def _dense_from_start(t) -> bool:
    """``t``'s elements are exactly the memory ``[0, numel)`` from its first element: non-negative
    strides that, sorted, are the contiguous strides of the sizes in that order."""
    if t.storage_offset() != 0:
        return False
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1)
    expect = 1
    for st, n in dims:
        if st != expect:
            return False
        expect *= n
    return True


def _owner_view(src, size, stride, offset):
    """``as_strided`` of ``src``, a non-contiguous tensor owning dense memory from its first
    element (``_dense_from_start``): the op below the public entry point's refusal."""
    from ..ops.shape import _as_strided_rel
    return _as_strided_rel.binding(src, tuple(size), tuple(stride), offset - src.storage_offset(),
                                   src_stride=tuple(src.stride()))


def _rebase_mutated(joint: JointGraph, inputs, outs):
    """Inputs that did not require grad, written in place with values that do, and non-leaf
    inputs that require grad, written in place: the graph's last outputs are their new values
    (outputs of the compiled function, so differentiable); copied into the inputs with grad mode
    on, the inputs' grad_fn leads into the compiled backward, as an eager in-place op's would.
    (For the former the forward wrote the values already and this records autograd; the latter
    were not written by the forward, which worked on copies of them.)"""
    k = len(joint.mutated_grad_inputs)
    for i, v in zip(joint.mutated_grad_inputs, outs[len(outs) - k:]):
        inputs[i].copy_(v)
    return outs[:len(outs) - k]


def _detach_from_mutated(res, n, inputs, positions):
    """Outputs the compiled graph returned as a mutated input's own array (inductor lowers
    ``clone(x)`` of an input to ``x`` itself) hold the input's *old* value: copied before the
    write-back overwrites it."""
    arrays = [inputs[i]._data for i in positions]
    if not any(isinstance(o, Tensor) and any(o._data is a for a in arrays) for o in res[:n]):
        return res
    res = list(res)
    for k in range(n):
        o = res[k]
        if isinstance(o, Tensor) and any(o._data is a for a in arrays):
            res[k] = o.clone()
    return res


def _write_back(inputs, positions, values):
    if not positions:
        return
    with no_grad():
        for i, v in zip(positions, values):
            if v._data is inputs[i]._data:
                continue   # the compiled graph already wrote it in place
            inputs[i].copy_(v)


def _unhooked(bw, saved, tangents):
    """``bw(*saved, *tangents)`` with dynamo's frame hook off. A backward runs from the autograd
    engine, possibly at a graph break of a compiled frame (``loss.backward()`` in a compiled
    training step) while the hook is on: the hook would then trace the compiled backward's own
    wrapper as user code (it crashed with an IndexError in the traced wrapper's pool logic)."""
    ef = sys.modules.get("ember._C._eval_frame")      # not loaded: no hook can be on
    if ef is None:
        return bw(*saved, *tangents)
    prev = ef.set_eval_frame(None)
    try:
        return bw(*saved, *tangents)
    finally:
        ef.set_eval_frame(prev)


def _memory_owner(a):
    """The array that owns ``a``'s memory (numpy and cupy point a view's ``base`` at it)."""
    b = a.base
    return a if b is None else b


def _share_versions(saved, inputs, outs):
    """Saved values that are an input's or an output's memory get its version counter.

    The compiled graph returns each value as a new tensor, so a saved ``exp(x)`` that is also
    the output ``y`` had a counter of its own: ``y.mul_(2)`` after the forward went unnoticed
    and the backward read the doubled values (eager raises "modified by an inplace operation").
    A saved tensor that *is* an output's array becomes that output (saved as an output, like
    eager's); one that is a view of it, or of an input, shares the counter."""
    owners = {}
    for t in inputs:
        if isinstance(t, Tensor):
            owners[id(_memory_owner(t._data))] = t
    for t in outs:
        if isinstance(t, Tensor):
            owners[id(_memory_owner(t._data))] = t
    out = None
    for i, s in enumerate(saved):
        if not isinstance(s, Tensor):
            continue
        t = owners.get(id(_memory_owner(s._data)))
        if t is None or t is s:
            continue
        if s._data is t._data and s.dtype == t.dtype:
            if out is None:
                out = list(saved)
            out[i] = t
            continue
        vc = t._vc
        if vc is None:
            vc = t._vc = [0]
        s._vc = vc
    return saved if out is None else tuple(out)


def _make_function_class(aot: AOTModule, joint: JointGraph):
    n_out = joint.num_outputs
    n_mut = len(joint.mutated_inputs)
    diff = set(joint.diff_outputs)

    nondiff_idx = [i for i in range(n_out) if i not in diff]
    all_diff = list(joint.diff_outputs) == list(range(n_out))
    # outputs the loss does not use get no gradient (None) from the engine: a gradient computed
    # only from such outputs' tangents stays None, as eagerly the engine never reaches the inputs
    # only they lead to (``out, aux = model(x); out.sum().backward()``: aux's weights keep
    # grad None; zeros would make the optimizer step them: weight decay, momentum, Adam state).
    # With one tangent the engine does not call the backward at all when it gets no gradient
    only_from = None
    if joint.grad_tangents is not None and len(joint.diff_outputs) > 1:
        only_from = [frozenset(ts) for ts in joint.grad_tangents]

    def forward(ctx, *inputs):
        _, fw, bw, n_saved, is_tensor, _cls = aot._training
        res = fw(*inputs)
        outs = tuple(res[:n_out])
        if n_mut:
            _write_back(inputs, joint.mutated_inputs, res[n_out:n_out + n_mut])
        saved = _share_versions(res[n_out + n_mut:], inputs, outs)
        layout = [isinstance(s, Tensor) for s in saved]
        if all(layout) and all(is_tensor):
            # the common case: every saved value is a tensor (no per-value checks needed)
            ctx.to_save = tuple(saved)
            ctx.saved_layout = None
        else:
            tensors = [s for s, t in zip(saved, is_tensor) if t and isinstance(s, Tensor)]
            ctx.save_for_backward(*tensors)
            ctx.saved_layout = layout
            ctx.saved_other = [s for s in saved if not isinstance(s, Tensor)]
        ctx.inputs = inputs
        if n_out > 1 and len({id(o) for o in outs}) != n_out:
            # one tensor returned at several positions (the graph returns ``y`` for ``(y,
            # y.detach())`` or ``(y, Id.apply(y))``, a custom Function returning its input): each
            # position gets its own tensor, else they would share one grad_fn slot (marking one
            # non-differentiable detached the other; gradients of both went to one tangent)
            outs = _split_shared(outs)
        if nondiff_idx:
            ctx.mark_non_differentiable(*[outs[i] for i in nondiff_idx])
        if only_from is not None:
            ctx.set_materialize_grads(False)      # (backward fills the missing ones in itself)
        return outs if len(outs) != 1 else outs[0]

    def backward(ctx, *grads):
        _, fw, bw, n_saved, is_tensor, _cls = aot._training
        unused = None
        if only_from is not None:
            unused = frozenset(k for k, i in enumerate(joint.diff_outputs) if grads[i] is None)
            if unused:
                from ..ops import api
                grads = tuple(g if g is not None or i not in diff else
                              api.zeros(shape, dtype=dtype, device=dev)
                              for i, (g, (shape, dtype, dev)) in enumerate(zip(grads, ctx._out_meta)))
        if STATE.grad_enabled:
            return _eager_double_backward(aot, joint, ctx, grads, unused)
        if ctx.saved_layout is None:
            saved = ctx.saved_tensors
        else:
            tensors = iter(ctx.saved_tensors)
            others = iter(ctx.saved_other)
            saved = [next(tensors) if t else next(others) for t in ctx.saved_layout]
        tangents = grads if all_diff else [grads[i] for i in joint.diff_outputs]
        res = _unhooked(bw, saved, tangents)
        out = [None] * joint.num_primals
        if unused:
            res = [None if only_from[j] and only_from[j] <= unused else g for j, g in enumerate(res)]
        for pos, g in zip(joint.grad_inputs, res):
            out[pos] = g
        return tuple(out)

    return type("CompiledFunction", (Function,), {"forward": staticmethod(forward),
                                                  "backward": staticmethod(backward)})


def _split_shared(outs):
    seen = set()
    outs = list(outs)
    for k, o in enumerate(outs):
        if isinstance(o, Tensor):
            if id(o) in seen:
                outs[k] = o.detach()    # (the same memory, a tensor of its own)
            seen.add(id(o))
    return tuple(outs)


def _eager_double_backward(aot: AOTModule, joint: JointGraph, ctx, grads, unused=None):
    """create_graph=True: differentiate the original function eagerly (differentiable grads).
    ``unused``: tangent indices whose output got no gradient (left out, as eagerly)."""
    log.info("aot: create_graph=True backward runs the original function eagerly (compiled backward "
             "graphs are not differentiable)")
    from ..autograd import grad as _grad
    inputs = ctx.inputs
    plan = joint.double_backward
    if plan is not None:
        why, copies = plan
        if why is not None:
            raise RuntimeError(f"ember.compile: a create_graph=True backward (higher-order gradients) "
                               f"through this compiled graph is not supported: {why}. Run the function "
                               f"eagerly for it (ember.compiler.disable)")
        if copies:
            inputs = list(inputs)
            for p in copies:
                if isinstance(inputs[p], Tensor):
                    inputs[p] = inputs[p].detach().clone()
    with enable_grad():
        # with the frame hook off: at a graph break of a compiled frame (ember.autograd.grad(...,
        # create_graph=True) in a compiled function) the hook compiled aot.fn again, whose
        # backward came back here: infinite recursion
        outs = _unhooked(aot.fn, inputs, ())
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        used = [i for k, i in enumerate(joint.diff_outputs) if not unused or k not in unused]
        # an input with no path to the gradients was passed detached (``_no_grad_path``: e.g.
        # parameters a resumed graph only forwards, ``ember.autograd.grad(loss, params,
        # create_graph=True)`` after a graph break): it gets None, as from the compiled backward
        wrt_pos = [i for i in joint.grad_inputs if isinstance(inputs[i], Tensor) and inputs[i].requires_grad]
        used = [i for i in used if isinstance(outs[i], Tensor) and outs[i].requires_grad]
        out = [None] * joint.num_primals
        if not used or not wrt_pos:
            return tuple(out)
        res = _grad([outs[i] for i in used], [inputs[i] for i in wrt_pos], grad_outputs=[grads[i] for i in used],
                    create_graph=True, allow_unused=True)
    for pos, g in zip(wrt_pos, res):
        out[pos] = g
    return tuple(out)


def _merge_repeats(gm) -> None:
    """Common-subexpression elimination on a traced graph before it is partitioned and compiled
    (``aot.config.cse``; export and ``trace_joint`` keep the program as traced). Random and
    in-place nodes are impure and never merged; the outputs stay distinct values (the caller
    gets them as separate tensors and may write one in place)."""
    from . import config
    if config.cse:
        from ..fx.passes.cse import eliminate_common_subexpressions
        eliminate_common_subexpressions(gm, distinct_outputs=True)


def _graph_for(compiler, gm):
    """What ``compiler`` gets: a LazyGraphModule from the aot cache as it is when the compiler
    says it takes one (inductor: it finds its compiled code by the graph's digest), else built."""
    if getattr(compiler, "accepts_lazy_graph", False):
        return gm
    from ..fx.lazy_graph_module import materialize
    return materialize(gm)


def _digest(compiled):
    """The compiled graph's ``fx_graph_cache`` digest (inductor's CompiledFunction), or None."""
    d = getattr(compiled, "graph_digest", None)
    return d if isinstance(d, str) else None


def aot_function(fn, example_inputs, *, fw_compiler, bw_compiler=None, decompositions=None,
                 dynamic=False, memory_budget=None, inference_compiler=None, shape_env=None,
                 fake_inputs=None) -> AOTModule:
    return AOTModule(fn, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler or fw_compiler,
                     decompositions=decompositions, dynamic=dynamic, memory_budget=memory_budget,
                     inference_compiler=inference_compiler, shape_env=shape_env, fake_inputs=fake_inputs)
