"""Complex tensors under ember.compile: the graph is captured whole; its complex nodes run with
eager ops (the prim decompositions and inductor are real-valued) while the real segments around
them are compiled (ember.aot.complex_split), and it says so; forward values and gradients equal
eager's. LLaMA's rotary embedding inside a small attention module, and an rfft filter with a
learnable complex weight; graphs that cannot be split run whole with eager ops."""
import logging
import math

import numpy as np
import pytest

import ember
import ember.nn as nn


def _rope(x, freqs_cis):
    xc = ember.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return ember.view_as_real(xc * freqs_cis).flatten(-2)


class RotaryAttention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.dim = dim

    def forward(self, x, freqs):
        freqs_cis = ember.polar(ember.ones_like(freqs), freqs)
        q, k = _rope(self.q(x), freqs_cis), _rope(self.k(x), freqs_cis)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(self.dim)).softmax(-1)
        return self.o(att @ self.v(x))


class SpectralFilter(nn.Module):
    def __init__(self, n=16):
        super().__init__()
        self.w = nn.Parameter(ember.randn(n // 2 + 1, 2))
        self.scale = nn.Parameter(ember.randn(n // 2 + 1, dtype=ember.float32))
        self.n = n

    def forward(self, x):
        spec = ember.fft.rfft(ember.relu(x) * 2)
        w = ember.view_as_complex(self.w) + ember.complex(self.scale, ember.zeros_like(self.scale))
        return ember.fft.irfft(spec * w, n=self.n).tanh()


def _compare(model, inputs, caplog, backend="inductor"):
    ember.compiler.reset()
    params = list(model.parameters())
    eager = model(*inputs)
    g_eager = ember.autograd.grad((eager * eager).sum(), params)
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        compiled = ember.compile(model, backend=backend)
        out = compiled(*inputs)
    g_comp = ember.autograd.grad((out * out).sum(), params)
    np.testing.assert_allclose(np.asarray(out.detach()._data), np.asarray(eager.detach()._data), rtol=1e-6, atol=1e-6)
    for a, b in zip(g_comp, g_eager):
        np.testing.assert_allclose(np.asarray(a._data), np.asarray(b._data), rtol=1e-6, atol=1e-6)
    assert "complex tensors are not compiled" in caplog.text


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_rotary_attention_compiled_matches_eager(caplog, backend):
    ember.manual_seed(0)
    _compare(RotaryAttention(), (ember.randn(2, 5, 8), ember.randn(5, 4)), caplog, backend)


def test_rotary_attention_is_one_graph():
    ember.manual_seed(1)
    m = RotaryAttention()
    ex = ember.dynamo.explain(m)(ember.randn(2, 5, 8), ember.randn(5, 4))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_rfft_filter_compiled_matches_eager(caplog):
    ember.manual_seed(2)
    _compare(SpectralFilter(), (ember.randn(3, 16),), caplog)


def test_complex_input_compiled(caplog):
    def f(z, w):
        return (z * w.conj() + z.exp()).abs().sum() + ember.angle(z).sum()
    ember.manual_seed(3)
    z = ember.randn(4, 3, dtype=ember.complex64, requires_grad=True)
    w = ember.randn(4, 3, dtype=ember.complex64)
    e = f(z, w)
    (ge,) = ember.autograd.grad(e, [z])
    ember.compiler.reset()
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        c = ember.compile(f)(z, w)
    (gc,) = ember.autograd.grad(c, [z])
    assert c.item() == pytest.approx(e.item(), rel=1e-6)
    np.testing.assert_allclose(np.asarray(gc._data), np.asarray(ge._data), rtol=1e-6, atol=1e-6)
    assert "input 0 is a complex tensor" in caplog.text


def test_real_graphs_still_compile(caplog):
    def f(x):
        return (x.sin() * 2).sum()
    ember.compiler.reset()
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        out = ember.compile(f)(ember.randn(8))
    assert "complex" not in caplog.text and out.dtype is ember.float32


def _split_backend(seen):
    """The inductor backend, keeping the dynamo graph (its meta holds the split)."""
    inductor = ember.dynamo.lookup_backend("inductor")

    def backend(gm, example_inputs):
        seen.append(gm)
        return inductor(gm, example_inputs)
    return backend


def test_rotary_attention_real_segments_are_compiled():
    """The projections and the softmax/matmul tail are compiled; only the rotation (polar,
    view_as_complex, the complex mul, view_as_real) runs eagerly -- in one segment, although
    the two rotations are apart in program order."""
    ember.manual_seed(4)
    m, seen = RotaryAttention(), []
    x, f = ember.randn(2, 5, 8), ember.randn(5, 4)
    ember.compiler.reset()
    out = ember.compile(m, backend=_split_backend(seen))(x, f)
    np.testing.assert_allclose(out.detach().numpy(), m(x, f).detach().numpy(), rtol=1e-6, atol=1e-6)
    (gm,) = seen
    kinds = [k for k, _ in gm.meta["complex_split"]]
    assert kinds == ["real", "complex", "real"]
    real_ops = [op for k, ops in gm.meta["complex_split"] if k == "real" for op in ops]
    complex_ops = [op for k, ops in gm.meta["complex_split"] if k == "complex" for op in ops]
    assert sorted(set(complex_ops)) == ["mul", "polar", "view_as_complex", "view_as_real"]
    assert real_ops.count("linear") == 4 and "softmax" in real_ops and "matmul" in real_ops
    assert "split in 3 segments, 2 real ones compiled" in gm.meta["eager_reason"]


def test_split_training_steps_match_eager():
    """Several optimizer steps through a split graph: compiled and eager parameters agree."""
    ember.manual_seed(5)
    ref = RotaryAttention()
    mod = RotaryAttention()
    mod.load_state_dict(ref.state_dict())
    x, f = ember.randn(2, 5, 8), ember.randn(5, 4)
    ember.compiler.reset()
    step = ember.compile(mod)
    opts = [ember.optim.SGD(ref.parameters(), lr=0.1), ember.optim.SGD(mod.parameters(), lr=0.1)]
    for _ in range(3):
        for model, opt in ((ref, opts[0]), (step, opts[1])):
            opt.zero_grad()
            (model(x, f) ** 2).mean().backward()
            opt.step()
    for a, b in zip(ref.parameters(), mod.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_graph_with_inplace_op_runs_whole_eagerly(caplog):
    def f(x, z):
        y = x.exp()
        y.mul_(2)
        return (ember.view_as_real(z * z).sum(-1) + y.sin()).tanh()
    ember.manual_seed(6)
    x, z = ember.randn(4), ember.randn(4, dtype=ember.complex64)
    ember.compiler.reset()
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        out = ember.compile(f)(x, z)
    np.testing.assert_allclose(out.numpy(), f(x, z).numpy(), rtol=1e-6)
    assert "not split: node" in caplog.text and "mutates a tensor" in caplog.text


def test_split_failure_on_first_call_falls_back_to_eager(caplog):
    """A real segment whose compile fails on the first call: the whole graph runs with eager
    ops from then on, and the reason is logged."""
    from ember.aot.complex_split import split_complex

    def f(x, z):
        a = (x.exp() * 3).sin()
        return ember.view_as_real(z * a).sum(-1).cos()
    seen = []
    ember.compiler.reset()
    ember.compile(f, backend=lambda gm, ex: seen.append(gm) or gm.forward)(ember.randn(4),
                                                                          ember.randn(4, dtype=ember.complex64))
    (gm,) = seen

    def broken_compile(sub, example_inputs):
        raise RuntimeError("simulated compile failure")
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        run = split_complex(gm, [], "test", broken_compile, lambda g, why: g.forward)
        x, z = ember.randn(4), ember.randn(4, dtype=ember.complex64)
        (out,) = run(x, z)
        (again,) = run(x, z)
    np.testing.assert_allclose(out.numpy(), f(x, z).numpy(), rtol=1e-6)
    np.testing.assert_allclose(again.numpy(), out.numpy())
    assert "simulated compile failure" in caplog.text


def _counting_inductor(graphs):
    inductor = ember.dynamo.lookup_backend("inductor")

    def backend(gm, example_inputs):
        graphs.append(gm)
        return inductor(gm, example_inputs)
    return backend


@pytest.mark.parametrize("dynamic", [True, None])
def test_split_with_symbolic_sizes_compiles_once_for_every_length(dynamic):
    """A LLaMA-style model called with new sequence lengths: the graph with symbolic sizes is
    split too (the size nodes are recomputed inside each segment that needs them), its real
    segments compiled once with the caller's ShapeEnv; values and gradients equal eager's at
    every length, and no length after the symbolic compile recompiles."""
    ember.manual_seed(8)
    ref, mod = RotaryAttention(), RotaryAttention()
    mod.load_state_dict(ref.state_dict())
    graphs = []
    ember.compiler.reset()
    step = ember.compile(mod, backend=_counting_inductor(graphs), dynamic=dynamic)
    for T in (5, 6, 7, 9, 5):
        x, f = ember.randn(2, T, 8), ember.randn(T, 4)
        out = step(x, f)
        want = ref(x, f)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        g_out = ember.autograd.grad((out ** 2).sum(), list(mod.parameters()))
        g_ref = ember.autograd.grad((want ** 2).sum(), list(ref.parameters()))
        for a, b in zip(g_out, g_ref):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
    symbolic = [g for g in graphs if g.meta.get("dynamic")]
    assert len(symbolic) == 1 and len(graphs) == (1 if dynamic else 2)
    gm = symbolic[0]
    assert [k for k, _ in gm.meta["complex_split"]] == ["real", "complex", "real"]
    assert "2 real ones compiled" in gm.meta["eager_reason"]


def test_symbolic_split_segments_take_tensors_only():
    """Size nodes never cross a cut: each segment graph recomputes the sizes it uses from
    tensor inputs, so every segment's placeholders and outputs are tensors."""
    def f(x, freqs):
        h = (x * 2).relu().tanh()
        B, T, C = h.shape
        z = ember.view_as_complex(h.reshape(B, T, C // 2, 2)) * freqs[:T].view(1, T, C // 2)
        return (ember.view_as_real(z).reshape(B, T, C) * 3).sin().cos()
    freqs = ember.polar(ember.ones(16, 4), ember.randn(16, 4))
    graphs = []
    ember.compiler.reset()
    cf = ember.compile(f, backend=_counting_inductor(graphs), dynamic=True)
    for T in (3, 4, 11):
        x = ember.randn(2, T, 8)
        np.testing.assert_allclose(cf(x, freqs).numpy(), f(x, freqs).numpy(), rtol=1e-5, atol=1e-6)
    (gm,) = graphs
    from ember.fx.experimental.proxy_tensor import sym_size
    run = gm.meta.get("complex_split")
    assert run is not None and [k for k, _ in run] == ["real", "complex", "real"]
