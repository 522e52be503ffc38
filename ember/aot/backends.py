"""Compiler backends built on AOT: ``aot_eager`` and the hook for inductor.

A backend is what ``ember.compile(..., backend=...)`` calls with a dynamo FX
graph and its example inputs; it returns a callable on the flat inputs.

* ``aot_eager``: joint graph, functionalization, full decomposition to prims,
  partition; the forward and backward graphs then run node by node in the fx
  ``Interpreter`` (each prim through its numpy reference). The correctness
  reference for inductor.
* ``aot_autograd(fw_compiler=..., bw_compiler=...)``: the same pipeline with
  compilers for the two graphs (inductor plugs in here).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import config


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
                 memory_budget: Optional[float] = None) -> Callable:
    """A backend running the AOT pipeline with the given graph compilers."""
    from .runtime import aot_function

    def backend(gm, example_inputs):
        decomps = _full_decompositions() if decompositions == "prims" else decompositions
        dyn = config.dynamic if dynamic is None else dynamic
        return aot_function(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                            decompositions=decomps, dynamic=dyn, memory_budget=memory_budget)
    return backend


def aot_eager(gm, example_inputs):
    """Backend ``"aot_eager"``: the AOT pipeline, the prim graphs run by the fx Interpreter."""
    return aot_autograd(fw_compiler=_interpreter_compiler)(gm, example_inputs)
