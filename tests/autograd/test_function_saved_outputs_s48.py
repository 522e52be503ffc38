"""Session 48: a custom Function that saves an input and an output (in that order) must unpack
the output as output 0 of its node (not as output <its index in the saved tuple>), so double
backward works (it raised IndexError in the engine)."""
import numpy as np
import pytest

import ember


def _make(lib):
    class Exp2(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, scale):
            r = (a * scale).exp()
            ctx.save_for_backward(a, r)
            return r

        @staticmethod
        def backward(ctx, g):
            a, r = ctx.saved_tensors
            return g * r * (1 + 0 * a) * 2.0, None
    return Exp2


@pytest.mark.parametrize("seed", [0, 1])
def test_double_backward_with_saved_input_and_output(seed):
    torch = pytest.importorskip("torch")
    x = np.random.RandomState(seed).standard_normal((3, 4))
    hs = []
    for lib in (torch, ember):
        a = lib.tensor(x, requires_grad=True)
        y = _make(lib).apply(a, 2.0)
        g, = lib.autograd.grad((y * y).sum(), a, create_graph=True)
        h, = lib.autograd.grad(g.sum(), a)
        hs.append((g.detach().numpy(), h.detach().numpy()))
    np.testing.assert_allclose(hs[1][0], hs[0][0], rtol=1e-12)
    np.testing.assert_allclose(hs[1][1], hs[0][1], rtol=1e-12)
