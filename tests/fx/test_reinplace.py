"""ember.fx.passes.reinplace against torch.fx.passes.reinplace on the same
program traced by each framework's make_fx."""

import importlib

import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx as emake
from ember.fx.passes.reinplace import reinplace


torch = pytest.importorskip("torch")
from torch.fx.experimental.proxy_tensor import make_fx as tmake  # noqa: E402


def _program(T):
    def fn(x, y):
        a = x.clone()
        b = a.add(1)
        c = b.mul(2)
        d = T.relu(c)
        e = d + y          # y is a graph input: fine as the *other* operand
        g = x.mul(3)       # x is a graph input: never written
        h = e.sin()        # e is read later (sum): no
        k = h * h          # self passed twice: no
        bb = y.expand(3, 3).clone()
        m = bb.add(1)      # bb is returned? no, but its value m is
        v = m.view(9)
        w = m.sub(v.view(3, 3))   # m's memory is read later through v: no
        return k, g, e.sum(), w

    return fn


def _summary(gm, prefix):
    # torch's make_fx names inputs x_1, y_1; ember's x, y: name them by position
    inputs = {n: f"in{i}" for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    rows = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        base = str(n.target).split(".")[-2]  # aten.add_.Tensor -> add_ (both frameworks' targets)
        rows.append((n.name, base, [inputs.get(a, a.name) for a in n.args if hasattr(a, "name")]))
    return rows


@pytest.mark.parametrize("seed", range(3))
def test_reinplace_matches_torch(seed):
    rng = np.random.default_rng(seed)
    xa, ya = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    out = []
    for T, mk in ((torch, tmake), (ember, emake)):
        x, y = T.tensor(xa), T.tensor(ya)
        gm = mk(_program(T))(x, y)
        ref = [r.clone() for r in gm(x, y)]
        importlib.import_module(f"{T.__name__}.fx.passes.reinplace").reinplace(gm, x, y)
        gm.graph.lint()
        got = gm(x, y)
        for r, g in zip(ref, got):
            np.testing.assert_allclose(np.asarray(g.numpy()), np.asarray(r.numpy()), rtol=1e-6)
        np.testing.assert_array_equal(x.numpy(), xa)  # inputs untouched
        np.testing.assert_array_equal(y.numpy(), ya)
        out.append(_summary(gm, T.__name__))
    t, e = out
    # ember's make_fx spells a few ops differently (expand/view arguments) but the
    # decisions -- which node became in-place and what it writes -- must agree
    assert [(n, b, a) for n, b, a in e] == [(n, b, a) for n, b, a in t]


def test_reinplace_rejects_non_graph_module():
    with pytest.raises(TypeError, match="must be a GraphModule"):
        reinplace(lambda x: x)


def test_reinplace_keeps_returned_temporaries():
    def fn(x):
        a = x.clone()
        return a, a.add(1)

    x = ember.randn(4)
    gm = emake(fn)(x)
    reinplace(gm, x)
    assert [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"] == ["clone.default", "add.Tensor"]
    a, b = gm(x)
    np.testing.assert_allclose(b.numpy(), a.numpy() + 1)
