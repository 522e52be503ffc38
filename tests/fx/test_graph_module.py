"""GraphModule and symbolic_trace over ember.nn modules."""

import copy
import operator

import numpy as np
import pytest

pytest.importorskip("ember.nn.modules.module")

import ember  # noqa: E402
import ember.fx as fx  # noqa: E402
import ember.nn as nn  # noqa: E402
from ember.fx import GraphModule, Tracer  # noqa: E402
from ember.fx.passes import ShapeProp  # noqa: E402




def to_np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "numpy") else t)


def relu(t):
    return ember.relu(t) if hasattr(ember, "relu") else t.clamp(min=0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x) * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(Block(), nn.Linear(4, 3))
        self.scale = nn.Parameter(ember.ones(3))
        self.register_buffer("shift", ember.zeros(3) + 0.5)

    def forward(self, x):
        h = self.layer1(x)
        h = h * self.scale + self.shift
        return h.sum(dim=-1), h


def test_trace_module_structure():
    m = Net()
    gm = fx.symbolic_trace(m)
    gm.graph.lint()
    ops = [(n.op, n.target) for n in gm.graph.nodes]
    assert ("call_module", "layer1.0.linear") in ops  # Block is traced through
    assert ("call_module", "layer1.1") in ops         # Sequential is not a leaf
    assert ("get_attr", "scale") in ops and ("get_attr", "shift") in ops
    names = [n.name for n in gm.graph.nodes]
    assert "layer1_0_linear" in names and "layer1_1" in names
    code = gm.code
    assert "layer1_0_linear = self.layer1.0.linear" not in code
    assert 'getattr(self.layer1, "0").linear(x)' in code
    assert 'getattr(self.layer1, "1")(mul)' in code
    assert isinstance(gm, nn.Module) and isinstance(gm, GraphModule)
    assert type(gm).__name__ == "Net"


def test_graph_module_numerics_and_parameters_shared():
    m = Net()
    gm = fx.symbolic_trace(m)
    x = ember.randn(5, 4)
    for a, b in zip(gm(x), m(x)):
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6)
    params = dict(gm.named_parameters())
    assert params["scale"] is m.scale
    assert params["layer1.0.linear.weight"] is m.layer1[0].linear.weight
    assert "shift" in dict(gm.named_buffers())


def test_recompile_after_edit_and_code_roundtrip():
    m = Net()
    gm = fx.symbolic_trace(m)
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is operator.add:
            with gm.graph.inserting_after(n):
                neg = gm.graph.call_function(operator.neg, (n,))
            n.replace_all_uses_with(neg)
            neg.update_arg(0, n)
    gm.graph.lint()
    gm.recompile()
    assert "neg = -add" in gm.code
    x = ember.randn(2, 4)
    s, h = gm(x)
    s0, h0 = m(x)
    np.testing.assert_allclose(to_np(h), -to_np(h0), rtol=1e-6)
    # exec the generated code by hand: same outputs
    ns = dict(gm.graph.python_code("self").globals)
    exec(gm.code, ns)
    s2, h2 = ns["forward"](gm, x)
    np.testing.assert_allclose(to_np(h2), to_np(h), rtol=1e-6)


def test_leaf_module_override():
    class T(Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Block) or super().is_leaf_module(m, qualname)

    m = Net()
    g = T().trace(m)
    assert ("call_module", "layer1.0") in [(n.op, n.target) for n in g.nodes]
    gm = GraphModule(m, g)
    x = ember.randn(2, 4)
    np.testing.assert_allclose(to_np(gm(x)[1]), to_np(m(x)[1]), rtol=1e-6)


def test_graph_module_from_dict_and_print_readable():
    g = fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    sub = g.call_module("sub.lin", (x,))
    g.output(sub + 0 if False else g.call_function(operator.add, (sub, w)))
    lin = nn.Linear(4, 2)
    gm = GraphModule({"w": ember.ones(2), "sub.lin": lin}, g, class_name="Custom")
    assert gm.sub.lin is lin
    x = ember.randn(3, 4)
    np.testing.assert_allclose(to_np(gm(x)), to_np(lin(x)) + 1, rtol=1e-6)
    text = gm.print_readable(print_output=False)
    assert text.startswith("class Custom(ember.nn.Module):\n    def forward(self, x):\n")
    assert "sub_lin = self.sub.lin(x)" in text
    with pytest.raises(RuntimeError, match="missing"):
        GraphModule({}, g)


def test_deepcopy_and_dce_on_graph_module():
    m = Net()
    gm = fx.symbolic_trace(m)
    gm2 = copy.deepcopy(gm)
    assert gm2.code == gm.code
    assert gm2.scale is not gm.scale
    x = ember.randn(2, 4)
    np.testing.assert_allclose(to_np(gm2(x)[1]), to_np(gm(x)[1]), rtol=1e-6)


def test_transformer_rewrites_and_returns_graph_module():
    m = Net()
    gm = fx.symbolic_trace(m)

    class MulToAdd(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is operator.mul:
                target = operator.add
            return super().call_function(target, args, kwargs)

    new = MulToAdd(gm).transform()
    assert isinstance(new, GraphModule)
    new.graph.lint()
    assert not any(n.target is operator.mul for n in new.graph.nodes)
    x = ember.randn(2, 4)
    lin = m.layer1[0].linear(x)
    expect = (m.layer1[1](lin + 2) + m.scale) + m.shift
    np.testing.assert_allclose(to_np(new(x)[1]), to_np(expect), rtol=1e-6)


def test_shape_prop():
    m = Net()
    gm = fx.symbolic_trace(m)
    ShapeProp(gm).propagate(ember.randn(5, 4))
    metas = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    assert tuple(metas["x"].shape) == (5, 4)
    assert tuple(metas["layer1_1"].shape) == (5, 3)
    assert metas["layer1_1"].requires_grad is True
    out_meta = metas["output"]
    assert tuple(out_meta[0].shape) == (5,) and tuple(out_meta[1].shape) == (5, 3)
    assert "(5, 3)" in fx.passes.to_dot(gm)


def test_trace_error_in_module_forward_names_line():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # BRANCH-IN-FORWARD
                return x
            return -x

    with pytest.raises(fx.TraceError, match="BRANCH-IN-FORWARD"):
        fx.symbolic_trace(Branchy())


def test_tracing_restores_module_patches():
    call = nn.Module.__call__
    ga = nn.Module.__dict__.get("__getattr__")
    with pytest.raises(fx.TraceError):
        class Bad(nn.Module):
            def forward(self, x):
                return bool(x)

        fx.symbolic_trace(Bad())
    assert nn.Module.__call__ is call and nn.Module.__dict__.get("__getattr__") is ga


def test_module_graph_and_code_match_torch_fx():
    torch = pytest.importorskip("torch")
    import torch.fx

    class TBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.linear(x) * 2

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer1 = torch.nn.Sequential(TBlock(), torch.nn.Linear(4, 3))
            self.scale = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("shift", torch.zeros(3) + 0.5)

        def forward(self, x):
            h = self.layer1(x)
            h = h * self.scale + self.shift
            return h.sum(dim=-1), h

    ours = fx.symbolic_trace(Net())
    theirs = torch.fx.symbolic_trace(TNet())
    assert str(ours.graph) == str(theirs.graph)
    assert ours.code == theirs.code
