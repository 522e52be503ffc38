"""autograd.Function.apply with keyword arguments, as torch binds them: by name onto forward's
positional parameters, no gaps, passed positionally; keyword-only and unknown names refused with
torch's messages. Eager and compiled."""
import numpy as np
import pytest

import ember


def _script(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor=2.0, bias=None, *, shift=0.0):
            ctx.factor = factor
            out = x * factor
            return out if bias is None else out + bias

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None, g

    x = lib.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = lib.tensor([0.25, 0.5, 1.0], requires_grad=True)
    out = [Scale.apply(x, factor=3.0).tolist(), Scale.apply(x, factor=2.0, bias=b).tolist(),
           Scale.apply(x=x, factor=-1.0).tolist()]
    Scale.apply(x, 4.0, bias=b).sum().backward()
    out += [x.grad.tolist(), b.grad.tolist()]
    for call in (lambda: Scale.apply(x, shift=1.0), lambda: Scale.apply(x, nope=1.0),
                 lambda: Scale.apply(x, 2.0, factor=3.0), lambda: Scale.apply(x, bias=b),
                 lambda: Scale.apply(factor=3.0)):
        try:
            call()
            out.append("no error")
        except TypeError as e:          # torch's messages (a default does not fill a gap)
            out.append(str(e))
    return out


def test_apply_kwargs_match_torch():
    torch = pytest.importorskip("torch")
    assert _script(ember) == _script(torch)


def test_apply_kwargs_compiled():
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor=2.0):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    def f(x):
        return Scale.apply(x, factor=3.0).sum()
    x = ember.randn(4, requires_grad=True)
    y = ember.compile(f)(x)
    y.backward()
    np.testing.assert_allclose(y.item(), (x.detach().sum() * 3).item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 3.0))
