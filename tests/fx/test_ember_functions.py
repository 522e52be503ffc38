"""Tracing real ember functions through the ``__ember_function__`` protocol,
checked against direct calls and against torch.fx on the same program."""

import numpy as np
import pytest

import ember

import ember.fx as fx  # noqa: E402

from ._helpers import compile_graph  # noqa: E402


def program(ns):
    def f(x, y):
        a = ns.add(ns.mul(x, 2), y, alpha=3)
        b = a.sum(dim=1)
        c = ns.exp(b) * 2 + y.sum()
        d = ns.sub(x, y).mean()
        return c, d, x.view(3, 2), ns.transpose(y, 0, 1)

    return f


def to_np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "numpy") else t)


def test_traced_ember_program_matches_eager():
    f = program(ember)
    g = fx.Tracer().trace(f)
    g.lint()
    ember.manual_seed(0)
    x, y = ember.randn(2, 3), ember.randn(2, 3)
    for a, b in zip(compile_graph(g)(x, y), f(x, y)):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6)
    ours = fx.Interpreter(type("R", (), {})(), graph=g).run(x, y)
    for a, b in zip(ours, f(x, y)):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6)


def test_ember_targets_print_by_public_name():
    g = fx.Tracer().trace(program(ember))
    targets = [str(n.format_node()) for n in g.nodes if n.op == "call_function"]
    assert any("target=ember.add](args = (%mul, %y), kwargs = {alpha: 3})" in t for t in targets)
    assert any("target=ember.mul](args = (%x, 2)" in t for t in targets)
    src = g.python_code().src
    assert "add = ember.add(mul, y, alpha = 3)" in src
    assert "sum_1 = add.sum(dim = 1)" in src


def test_graph_and_code_match_torch_fx():
    torch = pytest.importorskip("torch")
    import torch.fx

    ours = fx.Tracer().trace(program(ember))
    theirs = torch.fx.symbolic_trace(program(torch))
    assert str(ours) == str(theirs.graph).replace("torch.", "ember.")
    assert ours.python_code().src == theirs.code.replace("torch.", "ember.")


def test_tensor_method_with_proxy_argument():
    # a real tensor's method called with a Proxy goes through the override
    # protocol of the *argument*
    const = ember.ones(2, 3)
    holder = type("R", (), {})()
    tracer = fx.Tracer()

    def f(x):
        return const.add(x)

    g = tracer.trace(f)
    g.lint()
    ops = [(n.op, n.target) for n in g.nodes]
    assert ("get_attr", "_tensor_constant0") in ops
    x = ember.randn(2, 3)
    out = compile_graph(g, tracer.root)(x)
    np.testing.assert_allclose(to_np(out), to_np(const.add(x)))
    del holder


def test_inplace_ember_op_is_impure():
    def f(x):
        y = x * 1
        y.add_(1)
        return y

    g = fx.Tracer().trace(f)
    assert g.eliminate_dead_code() is False
    x = ember.zeros(2)
    np.testing.assert_allclose(to_np(compile_graph(g)(x)), [1.0, 1.0])


def test_shape_prop_on_ember_tensors():
    from ember.fx.passes import ShapeProp, TensorMetadata, to_dot

    g = fx.Tracer().trace(program(ember))
    x, y = ember.randn(2, 3), ember.randn(2, 3, requires_grad=True)
    ShapeProp(type("R", (), {})(), graph=g).propagate(x, y)
    meta = {n.name: n.meta.get("tensor_meta") for n in g.nodes}
    assert isinstance(meta["x"], TensorMetadata)
    assert meta["x"].shape == (2, 3) and meta["x"].dtype == ember.float32
    assert meta["x"].stride == (3, 1) and meta["x"].requires_grad is False
    assert meta["add"].requires_grad is True
    assert meta["sum_1"].shape == (2,)
    assert meta["transpose"].shape == (3, 2) and meta["transpose"].stride == (1, 3)
    assert meta["output"][1].shape == ()
    assert "(2, 3)" in to_dot(g)
