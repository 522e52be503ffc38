"""Complex tensors under ember.compile: the graph is captured whole, runs with eager ops
(the prim decompositions and inductor are real-valued) and says so; forward values and
gradients equal eager's. LLaMA's rotary embedding inside a small attention module, and an
rfft filter with a learnable complex weight."""
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
