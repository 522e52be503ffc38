"""gelu(approximate="tanh") under ember.compile with gradients: the forward's tanh and the one its
derivative needs are the same expression (torch's product order, ``kappa * (x * x * x)``, in the
eager kernel, its derivative and the decomposition), so the training graph computes it once."""
import importlib

import numpy as np

import ember


def _sources_of(fn):
    compile_fx = importlib.import_module("ember.inductor.compile_fx")
    sources = []
    orig = compile_fx.CompiledGraph.__init__

    def spy(self, graph, source, wrapper_src, *a, **kw):
        sources.append(source)
        orig(self, graph, source, wrapper_src, *a, **kw)

    compile_fx.CompiledGraph.__init__ = spy
    try:
        fn()
    finally:
        compile_fx.CompiledGraph.__init__ = orig
    return sources


def _kernels(src):
    return src[src.index('extern "C" void kernel'):]


def test_training_graph_computes_gelu_tanh_once():
    rng = np.random.default_rng()
    xn = (rng.standard_normal((64, 96)) * 3).astype(np.float32)
    gn = rng.standard_normal((64, 96)).astype(np.float32)
    f = ember.compile(lambda t: ember.nn.functional.gelu(t, approximate="tanh"))
    x = ember.tensor(xn, requires_grad=True)
    out = []

    def run():
        y = f(x)
        y.backward(ember.tensor(gn))
        out.append(y)

    sources = _sources_of(run)
    calls = sum(_kernels(s).count("tanhf(") for s in sources)
    assert calls == 1, [_kernels(s) for s in sources]
    xe = ember.tensor(xn, requires_grad=True)
    ye = ember.nn.functional.gelu(xe, approximate="tanh")
    ye.backward(ember.tensor(gn))
    np.testing.assert_allclose(out[0].detach().numpy(), ye.detach().numpy(), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-5)   # (its terms cancel)


def test_gelu_tanh_gradient_against_float64_formula():
    """The derivative written in torch's order is still the derivative (float64 reference)."""
    rng = np.random.default_rng()
    xn = rng.standard_normal(5000) * 4
    x = ember.tensor(xn, requires_grad=True)
    ember.nn.functional.gelu(x, approximate="tanh").sum().backward()
    k, c = np.sqrt(2 / np.pi), 0.044715
    t = np.tanh(k * (xn + c * xn ** 3))
    want = 0.5 * (1 + t) + 0.5 * xn * (1 - t * t) * k * (1 + 3 * c * xn ** 2)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-14)
