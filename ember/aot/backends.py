"""Compiler backends built on AOT: ``aot_eager`` and the hook for inductor.

A backend is what ``ember.compile(..., backend=...)`` calls with a dynamo FX
graph and its example inputs; it returns a callable on the flat inputs.

* ``aot_eager``: joint graph, functionalization, full decomposition to prims,
  partition; the forward and backward graphs then run node by node in the fx
  ``Interpreter`` (each prim through its numpy reference). The correctness
  reference for inductor.
* ``aot_autograd(fw_compiler=..., bw_compiler=...)``: the same pipeline with
  compilers for the two graphs (inductor plugs in here).

**Dynamo graphs with symbolic sizes** (``gm.meta["dynamic"]``, dynamo's
ShapeEnv in ``gm.meta["shape_env"]``, its fake example values in the
placeholders' ``meta["example_value"]``) are compiled **once**: traced on
those fakes with dynamo's own symbols, and compiled before the backend
returns, so every size guard the trace or the graph compilers add is in
dynamo's ShapeEnv when dynamo builds the entry's guard function (a call that
breaks one recompiles there; see ``joint.py``). The graph compilers then get
fake example inputs with symbolic sizes (and SymInts for sizes the backward
receives). When that is impossible (no ShapeEnv or example values, or the
trace fails on symbolic sizes) the graph is compiled once per concrete input
layout instead, each compilation static, and the reason is logged on
``ember.dynamo.recompiles``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import config
from .joint import AOTUnsupported


def _identity_compiler(gm, example_inputs):
    return gm


def _interpreter_compiler(gm, example_inputs):
    """Run a graph node by node with ``ember.fx.Interpreter`` (the reference executor)."""
    from ..fx.interpreter import Interpreter

    def run(*args):
        return Interpreter(gm).run(*args)
    return run


def _full_decompositions() -> Optional[dict]:
    try:
        from ..prims.table import decomposition_table
    except ImportError as e:       # prims not importable: trace op-level graphs
        raise RuntimeError(f"aot: the prim decompositions are unavailable ({e})") from e
    return decomposition_table()


def aot_autograd(*, fw_compiler: Callable, bw_compiler: Optional[Callable] = None,
                 decompositions: Any = "prims", dynamic: Optional[bool] = None,
                 memory_budget: Optional[float] = None,
                 inference_compiler: Optional[Callable] = None) -> Callable:
    """A backend running the AOT pipeline with the given graph compilers (``inference_compiler``,
    for the graph of a call that needs no gradient, defaults to ``fw_compiler``)."""
    from .runtime import aot_function

    def compile_static(gm, example_inputs):
        # "prims" stays a name: aot resolves it (importing ember.prims, ~50 ms) only when it
        # traces, which a warm compile that hits the aot cache never does
        decomps = decompositions
        dyn = config.dynamic if dynamic is None else dynamic
        return aot_function(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                            decompositions=decomps, dynamic=dyn, memory_budget=memory_budget,
                            inference_compiler=inference_compiler)

    def compile_symbolic(gm, fakes):
        # a real segment of a split complex graph with symbolic sizes: traced on dynamo's fakes
        # (the intermediates' example values) in its ShapeEnv, compiled now (complex_split.py)
        return aot_function(gm, fakes, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                            decompositions=decompositions, dynamic=True, memory_budget=memory_budget,
                            inference_compiler=inference_compiler, shape_env=gm.meta["shape_env"],
                            fake_inputs=fakes).prepare()

    def backend(gm, example_inputs):
        from .subclass import compile_subclass_graph, has_subclass_inputs
        if has_subclass_inputs(example_inputs):
            # wrapper subclasses are flattened at the boundary and compiled for static sizes
            if getattr(gm, "meta", {}).get("dynamic"):
                return _per_shape(lambda g, ins: compile_subclass_graph(g, ins, compile_static), gm,
                                  example_inputs, "tensor-subclass inputs are compiled per shape")
            return compile_subclass_graph(gm, example_inputs, compile_static)
        why = complex_values(gm, example_inputs)
        if why is not None:
            from .complex_split import split_complex
            return split_complex(gm, example_inputs, why, compile_static, _eager_for_complex, compile_symbolic)
        if not getattr(gm, "meta", {}).get("dynamic"):
            return compile_static(gm, example_inputs)
        decomps = decompositions
        fakes, why = _dynamo_fakes(gm, example_inputs)
        if fakes is not None:
            try:
                return aot_function(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                                    decompositions=decomps, dynamic=True, memory_budget=memory_budget,
                                    inference_compiler=inference_compiler, shape_env=gm.meta["shape_env"],
                                    fake_inputs=fakes).prepare()
            except Exception as e:  # noqa: BLE001 - the per-shape path below is always correct
                if config.debug_dynamic:
                    raise
                why = f"tracing with the caller's symbolic sizes failed: {type(e).__name__}: {e}"
        return _per_shape(compile_static, gm, example_inputs, why)
    return backend


def complex_values(gm, example_inputs) -> Optional[str]:
    """Why a dynamo graph must run with eager ops, or None: complex tensors among its inputs or
    the values its nodes compute. The prim decompositions and inductor's loops are real-valued
    (a complex ``abs`` or ``mul`` decomposed to real prims would be a wrong answer), so such a
    graph's complex nodes are not decomposed at all: they run as eager ember ops, with eager
    autograd, and the real parts around them are compiled (``complex_split``)."""
    from ..tensor import Tensor

    def first_complex(v):
        if isinstance(v, Tensor):
            return v if v.dtype.is_complex else None
        if isinstance(v, (list, tuple)):
            for x in v:
                r = first_complex(x)
                if r is not None:
                    return r
        return None

    for i, a in enumerate(example_inputs):
        if first_complex(a) is not None:
            return f"input {i} is a complex tensor ({a.dtype})"
    for n in getattr(getattr(gm, "graph", None), "nodes", ()):
        c = first_complex(n.meta.get("example_value", n.meta.get("val")))
        if c is not None:
            return f"node {n.name} ({getattr(n.target, '__name__', n.target)}) computes a {c.dtype} tensor"
    return None


def _eager_for_complex(gm, why):
    """The dynamo graph's own forward (eager ember ops): see ``complex_values``. Logged on
    ``ember.aot`` and kept on ``gm.meta["eager_reason"]`` for reports."""
    import logging
    reason = f"complex tensors are not compiled: {why}; the graph runs with eager ops"
    logging.getLogger("ember.aot").warning("aot: %s", reason)
    if hasattr(gm, "meta"):
        gm.meta["eager_reason"] = reason
    return gm.forward


def _dynamo_fakes(gm, example_inputs):
    """(dynamo's fake example value per input, None) or (None, why not)."""
    from ..fx.fake_tensor import is_fake
    env = gm.meta.get("shape_env")
    if env is None:
        return None, "the graph carries no ShapeEnv"
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(phs) != len(example_inputs):
        return None, "the graph's placeholders do not match its inputs"
    fakes = [n.meta.get("example_value") for n in phs]
    if not all(is_fake(f) for f in fakes):
        return None, "an input has no fake example value"
    return fakes, None


def _per_shape(compile_one, gm, example_inputs, why):
    """A symbolic graph compiled once per distinct input layout (shapes and strides), each
    compilation static: the fallback when the graph cannot be traced with the caller's sizes
    (its own shape guards would go unchecked if one compilation served other sizes)."""
    import logging
    logging.getLogger("ember.dynamo.recompiles").info(
        "aot: graph with symbolic sizes compiled once per input shape: %s", why)
    from ..tensor import Tensor
    compiled = {}

    def key(inputs):
        return tuple((tuple(t._data.shape), t._data.strides) if isinstance(t, Tensor) else None
                     for t in inputs)

    compiled[key(example_inputs)] = compile_one(gm, list(example_inputs))

    def run(*inputs):
        k = key(inputs)
        fn = compiled.get(k)
        if fn is None:
            fn = compiled[k] = compile_one(gm, list(inputs))
        return fn(*inputs)
    run.per_shape = compiled
    return run


def aot_eager(gm, example_inputs):
    """Backend ``"aot_eager"``: the AOT pipeline, the prim graphs run by the fx Interpreter."""
    return aot_autograd(fw_compiler=_interpreter_compiler)(gm, example_inputs)
