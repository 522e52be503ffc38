"""Printed graphs and generated code compared with torch.fx itself, on
programs that only use Python operators/methods (so the same function can be
traced by both)."""

import math
import operator

import pytest

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402

from ._helpers import compile_graph, trace_fn  # noqa: E402


def seed(x):
    return x * 2 + 3


def arith(x, y):
    a = x * 2 + 3
    b = a @ y
    c = -b
    d = ~c
    e = abs(d)
    g = a // 2
    h = a ** 2
    i = a % 3
    j = a < b
    k = a == b
    m = a.relu()
    p = x.size(0)
    q = m.clamp(min=0.0, max=math.inf)
    return (c, d, e, g, h, i, j, k, p, q)


def indexing(x):
    a = x[:, 1:3, ..., None]
    b = x[0]
    s = x.shape[0]
    t = x.T
    return {"a": a, "b": (b, -b), "s": s, "t": t, "n": None, "str": "hi"}


def reflected(x, y):
    return 3 + x, 2 - x, 2 * y, 1 / y, 2 ** x, x / y, x.sum(dim=-1, keepdim=True)


def unused_values(x, y):
    a = x + 1
    b = a * y
    _ = b - 1  # dead, but still in the trace
    return a


def kwargs_and_defaults(x, y=3, scale=2.0):
    return x.mul(scale).add(y, alpha=2)


def unpack(pair):
    a, b = pair
    return b, a


def annotated(x: float, n: int = 2) -> float:
    return x * n


PROGRAMS = [annotated, seed, arith, indexing, reflected, unused_values, kwargs_and_defaults, unpack]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_graph_print_identical_to_torch(fn):
    ours = trace_fn(fn)
    theirs = torch.fx.symbolic_trace(fn)
    assert str(ours) == str(theirs.graph)


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_code_identical_to_torch(fn):
    ours = trace_fn(fn)
    theirs = torch.fx.symbolic_trace(fn)
    assert ours.python_code().src == theirs.code


@pytest.mark.parametrize("fn", [seed, reflected, kwargs_and_defaults, unused_values], ids=lambda f: f.__name__)
def test_numerics_match_torch_graphmodule(fn):
    torch.manual_seed(0)
    x = torch.randn(3, 3)
    y = torch.randn(3, 3)
    n = fn.__code__.co_argcount
    args = (x, y)[:n] if fn is not kwargs_and_defaults else (x,)
    ours = compile_graph(trace_fn(fn))(*args)
    theirs = torch.fx.symbolic_trace(fn)(*args)
    for a, b in zip(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,)):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
        else:
            assert a == b


def test_graph_built_by_hand_matches_torch():
    ours_mod = pytest.importorskip("ember.fx")
    og, tg = ours_mod.Graph(), torch.fx.Graph()
    for g in (og, tg):
        x = g.placeholder("x")
        y = g.placeholder("y", default_value=3)
        w = g.get_attr("layer1.0.weight")
        c = g.call_module("layer1.0.conv", (x,), {"k": y})
        m = g.call_method("view", (c, -1, 1))
        s = g.call_function(operator.getitem, (m, slice(None, 2)))
        g.output([s, w])
    assert str(og) == str(tg)
    assert og.python_code().src == tg.python_code("self").src
