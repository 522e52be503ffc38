"""A warm compile of a graph with tensor constants (nanoGPT's causal mask, positions) finds
inductor's code without building the stored graphs: the constants are stored apart from
the graph (``cache.constants_blob``) and read from the lazy graph (``LazyGraphModule``)."""
import numpy as np
import pytest

import ember
from ember import fx
from ember.aot import aot_autograd, cache
from ember.tensor import _make


def _rand(*shape, seed, requires_grad=False):
    t = _make(np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32))
    return t.requires_grad_(True) if requires_grad else t


def _masked_graph(n):
    """``(x @ w)`` masked by a lower-triangular constant the trace created (as nanoGPT's
    causal mask), then scaled by positions ``arange(n)``: two ``get_attr`` constants."""
    g = fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    mm = g.call_function(ember.matmul, (x, w))
    mask = g.call_function(ember.tril, (g.call_function(ember.ones, (n, n)),))
    pos = g.call_function(ember.arange, (n,))
    masked = g.call_function(ember.mul, (mm, mask))
    g.output(g.call_function(ember.mul, (masked, pos)))
    return fx.GraphModule({}, g)


def _inductor_backend():
    from ember.inductor.dynamic import compile_fx_maybe_symbolic
    return aot_autograd(fw_compiler=compile_fx_maybe_symbolic, bw_compiler=compile_fx_maybe_symbolic)


def _reference(x, w, n):
    w = w.detach().requires_grad_(True)
    out = (x @ w) * ember.tril(ember.ones(n, n)) * ember.arange(n)
    out.backward(_rand(n, n, seed=7))
    return out.detach().numpy(), w.grad.numpy()


@pytest.mark.parametrize("training", [True, False])
def test_warm_hit_reads_constants_without_building_the_graph(fresh_cache, training):
    from ember.fx.lazy_graph_module import LazyGraphModule
    n = 5
    x, w = _rand(n, 4, seed=1), _rand(4, n, seed=2, requires_grad=training)
    runs = []
    for attempt in range(2):
        s0 = dict(cache.stats)
        mod = _inductor_backend()(_masked_graph(n), [x, w])
        w.grad = None
        out = mod(x, w)
        if training:
            out.backward(_rand(n, n, seed=7))
        assert cache.stats["hits" if attempt else "stores"] - s0["hits" if attempt else "stores"] == 1
        runs.append((mod, out.detach().numpy().copy(), None if w.grad is None else w.grad.numpy().copy()))
    mod = runs[1][0]
    compiled = mod._training[1:3] if training else mod._inference[1:]
    assert compiled, "nothing compiled"
    assert any(getattr(cf, "_gm", None) is not None for cf in compiled)
    for cf in compiled:
        assert isinstance(cf._gm, LazyGraphModule) and not cf._gm.materialized, "the graph was built"
    ref_out, ref_grad = _reference(x, w, n)
    for _, out, grad in runs:
        np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-6)
        if training:
            np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-6)


def test_lazy_graph_constants_are_the_graphs_values():
    """The constants a lazy graph hands out equal the built graph's; other names build it."""
    from ember.fx.lazy_graph_module import LazyGraphModule
    gm = _masked_graph(4)
    gm.recompile()
    traced = fx.GraphModule({}, gm.graph)
    const = ember.tensor([1.0, 2.0])
    calls = []
    lazy = LazyGraphModule(lambda: calls.append(1) or traced, "digest",
                           constants=lambda: {"_c0": const})
    assert lazy._c0 is const and not lazy.materialized and not calls
    assert lazy.graph is traced.graph and lazy.materialized and calls == [1]


def test_constants_blob_is_none_without_constants_and_round_trips():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(ember.sin, (x,)))
    assert cache.constants_blob(fx.GraphModule({}, g)) is None
    g = fx.Graph()
    g.output(g.get_attr("c"))
    gm = fx.GraphModule({"c": ember.tensor([[1.5, -2.0]], dtype=ember.bfloat16)}, g)
    import pickle
    back = cache._constants_from(pickle.loads(cache.constants_blob(gm)))
    assert back["c"].dtype == ember.bfloat16 and back["c"].float().tolist() == [[1.5, -2.0]]
