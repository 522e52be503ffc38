"""Constructs model code uses around its tensors that used to break the graph: a function
decorated with ``@ember.no_grad()`` / ``@ember.enable_grad()`` called from compiled code,
``with contextlib.nullcontext():`` (the AMP-or-not idiom), and ``getattr(module, name,
default)`` / ``hasattr`` for an attribute the module does not have."""
import contextlib

import numpy as np

import ember
import ember.nn as nn
from ember import dynamo

from ._util import assert_same

RNG = np.random.default_rng()


def _x(*shape, grad=False):
    return ember.tensor(RNG.standard_normal(shape), dtype=ember.float32, requires_grad=grad)


@ember.no_grad()
def _ema_target(x):
    return x * 0.5 + 1


@ember.enable_grad()
def _with_grad(x):
    return x * 3


def _uses_decorated(x):
    t = _ema_target(x)                     # no graph: a constant for the gradient
    with ember.no_grad():
        u = _with_grad(x)                  # grad mode back on inside the decorated function
    return (x * t).sum(), t.requires_grad, u.requires_grad


def test_grad_mode_decorated_functions_are_traced_in_their_mode():
    r = dynamo.explain(_uses_decorated)(_x(4, grad=True))
    assert r.graph_count == 1 and r.graph_break_count == 0
    cf = ember.compile(_uses_decorated)
    x = _x(4, grad=True)
    got, want = cf(x), _uses_decorated(x)
    assert got[1:] == want[1:] == (False, True)
    got[0].backward()
    g = x.grad.numpy().copy()
    x.grad = None
    want[0].backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-6)
    assert ember.is_grad_enabled()


def _maybe_ctx(x, use_null=True):
    ctx = contextlib.nullcontext() if use_null else ember.no_grad()
    with ctx:
        y = x * 2
    with contextlib.nullcontext(x) as same:
        z = same + 1
    return y + z


def test_nullcontext_blocks_are_traced_through():
    r = dynamo.explain(_maybe_ctx)(_x(3))
    assert r.graph_count == 1 and r.graph_break_count == 0
    x = _x(3, grad=True)
    assert_same(_maybe_ctx(x), ember.compile(_maybe_ctx)(x))


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        scale = getattr(self, "scale", 2.0)
        if hasattr(self, "extra"):
            x = x + self.extra
        return self.lin(x) * scale


def test_getattr_default_and_hasattr_on_modules():
    m = _Block()
    r = dynamo.explain(m)(_x(2, 4))
    assert r.graph_count == 1 and r.graph_break_count == 0
    cm = ember.compile(m)
    x = _x(2, 4)
    assert_same(m(x), cm(x))
    m.scale = 5.0                              # guarded: the attribute appearing is seen
    m.register_buffer("extra", _x(4))
    assert_same(m(x), cm(x))


def test_tensor_type_string_and_is_signed_fold():
    def f(x):
        if x.type().endswith("FloatTensor") and x.is_signed():
            return x * 2
        return x - 1

    for x in (_x(3), _x(3).double()):
        r = dynamo.explain(f)(x)
        assert r.graph_break_count == 0
        assert_same(f(x), ember.compile(f)(x))
