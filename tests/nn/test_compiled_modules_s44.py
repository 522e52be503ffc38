"""Compiled nn modules stay whole graphs and match eager ember (sweep s44).

- ``EmbeddingBag(mode="max")`` on a 2-D input (equal-length bags) is a max over the bag dim,
  not a ``scatter_reduce(amax)`` (which has no prim: the compiled graph ran eagerly).
- ``nn.RNN/LSTM/GRU`` with a new sequence length: ``run_layers`` specializes the length with
  ``int`` (``[None] * seq_len`` on a symbolic size broke the graph and ran the frame eagerly).
"""
import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.dynamo import counters
from ember.inductor import config as inductor_config


@pytest.fixture
def strict_lowering():
    old = inductor_config.debug_lowering
    inductor_config.debug_lowering = True       # a lowering failure raises instead of running eagerly
    ember.dynamo.reset()
    for k in counters:
        counters[k] = 0
    try:
        yield
    finally:
        inductor_config.debug_lowering = old
        ember.dynamo.reset()


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("padding_idx", [None, 2, -8])
def test_embedding_bag_max_2d_compiles_and_matches_eager(strict_lowering, padding_idx):
    ember.manual_seed(0)
    m = nn.EmbeddingBag(10, 4, mode="max", padding_idx=padding_idx)
    mc = copy.deepcopy(m)
    comp = ember.compile(mc)
    # bag 1 is all padding (when padding_idx is 2): zeros, as PyTorch
    x = ember.tensor([[1, 2, 2], [2, 2, 2], [3, 5, 9], [7, 7, 1]])
    ye, yc = m(x), comp(x)
    _close(ye, yc)
    g = ember.randn(*ye.shape)
    ye.backward(g)
    yc.backward(g.clone())
    _close(m.weight.grad, mc.weight.grad)
    if padding_idx is not None:
        assert bool((ye[1] == 0).all())
    assert counters["eager_fallback"] == 0 and counters["graph_breaks"] == 0


def test_embedding_bag_max_2d_values_and_grad():
    """Against a direct per-bag max (ties within a bag: the same row twice gets the whole gradient)."""
    ember.manual_seed(1)
    w = ember.randn(6, 3, requires_grad=True)
    idx = ember.tensor([[0, 0, 4], [5, 1, 2]])
    out = ember.nn.functional.embedding_bag(idx, w, mode="max")
    wn = w.detach().numpy()
    np.testing.assert_array_equal(out.detach().numpy(), wn[idx.numpy()].max(1))
    out.sum().backward()
    expect = np.zeros_like(wn)
    for b in range(2):
        rows = idx.numpy()[b]
        for d in range(3):
            expect[rows[np.argmax(wn[rows, d])], d] += 1.0
    np.testing.assert_allclose(w.grad.numpy(), expect)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_rnn_new_sequence_length_stays_compiled(strict_lowering, kind):
    ember.manual_seed(0)
    m = getattr(nn, kind)(4, 5)
    mc = copy.deepcopy(m)
    comp = ember.compile(mc)
    for L in (6, 9, 4):
        x = ember.randn(L, 2, 4)
        xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ye, yc = m(xe)[0], comp(xc)[0]
        _close(ye, yc)
        g = ember.randn(*ye.shape)
        ye.backward(g)
        yc.backward(g.clone())
        _close(xe.grad, xc.grad)
    for (n, pa), (_, pb) in zip(m.named_parameters(), mc.named_parameters()):
        _close(pa.grad, pb.grad)
    assert counters["eager_fallback"] == 0 and counters["graph_breaks"] == 0


def test_half_precision_norms_compile_with_gradients():
    """LayerNorm / GroupNorm in float16 and bfloat16 with a gradient: their backward took the
    half kernel (numpy on the saved input's array) while aot traced the joint graph on fake
    tensors, and the compile raised AttributeError. Traced, the differentiable formula runs."""
    import numpy as np
    for dt in (ember.bfloat16, ember.float16):
        for mk, shp in ((lambda: ember.nn.LayerNorm(5), (2, 3, 5)), (lambda: ember.nn.GroupNorm(2, 4), (2, 4, 3))):
            ember.dynamo.reset()
            m = mk().to(dt)
            m2 = mk().to(dt)
            m2.load_state_dict(m.state_dict())
            x = ember.randn(*shp).to(dt)
            y1, y2 = m(x), ember.compile(m2)(x)
            y1.float().sum().backward()
            y2.float().sum().backward()
            tol = 2e-2 if dt is ember.bfloat16 else 2e-3
            np.testing.assert_allclose(y2.detach().float().numpy(), y1.detach().float().numpy(), rtol=tol, atol=tol)
            for p1, p2 in zip(m.parameters(), m2.parameters()):
                np.testing.assert_allclose(p2.grad.float().numpy(), p1.grad.float().numpy(), rtol=tol, atol=tol * 4)


def test_triplet_loss_with_a_module_distance_is_one_graph():
    """``TripletMarginWithDistanceLoss(distance_function=<module or lambda>)``: the functional is
    traced through (``ember.nn._functional_traced``), so the user's distance is in the graph;
    recorded as one operator, a module argument broke the graph."""
    from ember import dynamo

    class Dist(nn.Module):
        def forward(self, a, b):
            return (a - b).abs().sum(-1)

    for lf in (nn.TripletMarginWithDistanceLoss(distance_function=Dist()),
               nn.TripletMarginWithDistanceLoss(distance_function=lambda a, b: (a - b).pow(2).sum(-1), swap=True),
               nn.TripletMarginWithDistanceLoss(reduction="none")):
        a, p, n = (ember.randn(4, 6) for _ in range(3))
        dynamo.reset()
        ex = dynamo.explain(lambda a, p, n: lf(a, p, n))(a, p, n)
        assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
        got = ember.compile(lambda a, p, n: lf(a, p, n))(a, p, n)
        np.testing.assert_allclose(got.numpy(), lf(a, p, n).numpy(), rtol=1e-5, atol=1e-6)
