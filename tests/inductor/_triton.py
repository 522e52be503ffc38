"""Shared set-up of the Triton backend tests: import triton in interpreter mode
(without leaking ``TRITON_INTERPRET`` into other tests), trace and run graphs
under the interpreter, compare with the eager prims graph."""
import os
import sys

import numpy as np
import pytest


# EMBER_TRITON_TEST_DEVICE=cuda (on a machine with a GPU and cupy): the Triton tests that go
# through compile_interp run their kernels compiled and launched on the GPU instead of under the
# interpreter, on cuda copies of the inputs, against the same eager prims graph on the CPU.
ON_GPU = os.environ.get("EMBER_TRITON_TEST_DEVICE") == "cuda"


def import_triton_interpreted():
    """``import triton`` with ``TRITON_INTERPRET=1`` set *during the import* only:
    triton's own library functions (``tl.sum``, ``tl.max`` ...) are created as
    interpreter objects at import time; ember's launchers pick the interpreter
    explicitly, so the variable is not needed afterwards and is restored, which
    keeps it out of every other test (and out of the AOT compile subprocess)."""
    if ON_GPU:
        import ember
        if not ember.cuda.is_available():
            pytest.skip("EMBER_TRITON_TEST_DEVICE=cuda needs cupy and a GPU", allow_module_level=True)
        return pytest.importorskip("triton")
    if "triton" not in sys.modules:
        old = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1"
        try:
            triton = pytest.importorskip("triton")
        finally:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old
    else:
        triton = sys.modules["triton"]
    from triton.runtime.interpreter import InterpretedFunction
    import triton.language as tl
    if not isinstance(tl.sum, InterpretedFunction):
        # (a module collected earlier imported triton -- torch's inductor does, from tests/models
        # or tests/seeds when they are collected first: a module-level skip, not a collection error)
        pytest.skip("triton was imported without TRITON_INTERPRET=1 in this process", allow_module_level=True)
    return triton


def compile_interp(fn, *inputs, dynamic=False, decompose=False):
    """(compiled graph, its outputs, the eager prims graph's outputs), flat numpy lists."""
    from ember.fx.experimental.proxy_tensor import make_fx
    if decompose:
        from ember.prims.table import decompose as dec
        gm = dec(fn)(*inputs)
    else:
        gm = make_fx(fn)(*inputs)
    cg, got = compile_and_run(gm, inputs, dynamic=dynamic)
    want = gm(*inputs)
    return cg, got, _flat(want)


def compile_and_run(gm, inputs, dynamic=False):
    """``gm`` compiled to Triton and run once: under the interpreter, or with
    ``EMBER_TRITON_TEST_DEVICE=cuda`` on the GPU (cuda copies of the inputs).
    (compiled graph, its outputs as a flat numpy list)."""
    import ember
    from ember.inductor.codegen.triton_wrapper import compile_graph_triton
    if ON_GPU:
        dev = [a.cuda() if isinstance(a, ember.Tensor) else a for a in inputs]
        cg = compile_graph_triton(gm, dev, mode="cuda", dynamic=dynamic)
        assert cg.fallbacks == [], cg.fallbacks
        got = cg(*dev)
        for t in _flat_tensors(got):
            assert t.device.type == "cuda", t.device
    else:
        cg = compile_graph_triton(gm, list(inputs), mode="interpret", dynamic=dynamic)
        assert cg.fallbacks == [], cg.fallbacks
        got = cg(*inputs)
    return cg, _flat(got)


def _flat_tensors(x):
    import ember
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flat_tensors(v)]
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _flat_tensors(x[k])]
    return [x] if isinstance(x, ember.Tensor) else []


def _flat(x):
    import ember
    if isinstance(x, (list, tuple)):
        return [a for v in x for a in _flat(v)]
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _flat(x[k])]
    return [x.cpu().numpy() if isinstance(x, ember.Tensor) else x]


def run_compiled(cg, *inputs):
    """Call a graph compiled by :func:`compile_and_run` again (other sizes): on the GPU
    with cuda copies of the inputs. Its outputs as a flat numpy list."""
    import ember
    if ON_GPU:
        inputs = [a.cuda() if isinstance(a, ember.Tensor) else a for a in inputs]
    return _flat(cg(*inputs))
