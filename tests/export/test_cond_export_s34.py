"""ember.export of a data-dependent ``ember.cond``: one ``ember.ops.higher_order.cond`` node with
``true_graph_0`` / ``false_graph_0`` submodules, as torch.export's graph (torch's structure compared
where torch is installed; values against eager everywhere)."""
import os

import numpy as np
import pytest

import ember
from ember import nn
from ember._higher_order_ops import CondBranchMismatchError

COND = ember.ops.higher_order.cond


def _np(t):
    return np.asarray(t.detach().numpy())


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.randn(4))
        self.register_buffer("b", ember.randn(4))

    def forward(self, x):
        def t(x):
            return (x * self.w).sin()

        def f(x):
            return x.cos() + self.b
        return ember.cond(x.sum() > 0, t, f, (x,))


def _conds(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is COND]


def _pos_neg(n=4):
    return ember.rand(n) + 0.1, -ember.rand(n) - 0.1


def test_one_cond_node_with_branch_submodules_and_lifted_state():
    m = M()
    ep = ember.export.export(m, (ember.randn(4),))
    (node,) = _conds(ep.graph_module)
    assert [a.target for a in node.args[1:3]] == ["true_graph_0", "false_graph_0"]
    # closures over the parameter and the buffer lifted as operands (placeholders p_w, b_b)
    assert [a.name for a in node.args[3]] == ["x", "p_w", "b_b"]
    tg, fg = ep.graph_module.true_graph_0, ep.graph_module.false_graph_0
    for sub in (tg, fg):
        assert [n.name for n in sub.graph.nodes if n.op == "placeholder"] == ["x", "p_w", "b_b"]
        targets = [n.target for n in sub.graph.nodes if n.op == "call_function"]
        assert targets and all(str(t).startswith("aten.") or "aten" in repr(t) for t in targets), targets
    assert "ember.ops.aten.mul.Tensor(x, p_w)" in tg.code
    text = str(ep)
    assert "cond = ember.ops.higher_order.cond(gt, true_graph_0, false_graph_0, (x, p_w, b_b))" in text
    assert "class true_graph_0(ember.nn.Module):" in text and "class false_graph_0(ember.nn.Module):" in text
    assert "ember.ops.higher_order.cond" in ep.graph_module.code
    for x in _pos_neg():
        np.testing.assert_allclose(_np(ep.module()(x)), _np(m(x)), rtol=1e-6, atol=1e-6)


def test_structure_matches_torch():
    torch = pytest.importorskip("torch")

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4))

        def forward(self, x):
            def t(x):
                return (x * self.w).sin()

            def f(x):
                return x.cos() + 1
            return torch.cond(x.sum() > 0, t, f, (x,))

    class E(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(4))

        def forward(self, x):
            def t(x):
                return (x * self.w).sin()

            def f(x):
                return x.cos() + 1
            return ember.cond(x.sum() > 0, t, f, (x,))

    def shape(gm, is_cond):
        nodes = []
        for n in gm.graph.nodes:
            tgt = n.target
            if n.op == "call_function":
                tgt = "cond" if is_cond(tgt) else str(tgt).split(".")[-2] if "aten" in str(tgt) else str(tgt)
            nodes.append((n.op, n.name, tgt if n.op != "output" else None))
        return nodes
    tep = torch.export.export(T(), (torch.randn(4),))
    eep = ember.export.export(E(), (ember.randn(4),))
    t_is = lambda t: t is torch.ops.higher_order.cond  # noqa: E731
    assert shape(eep.graph_module, lambda t: t is COND) == shape(tep.graph_module, t_is)
    for name in ("true_graph_0", "false_graph_0"):
        assert shape(getattr(eep.graph_module, name), lambda t: t is COND) == \
            shape(getattr(tep.graph_module, name), t_is)


def test_run_decompositions_keeps_cond_and_decomposes_branches():
    m = M()
    ep = ember.export.export(m, (ember.randn(4),)).run_decompositions()
    (node,) = _conds(ep.graph_module)
    sub = ep.graph_module.true_graph_0
    assert any(n.op == "call_function" for n in sub.graph.nodes)
    for x in _pos_neg():
        np.testing.assert_allclose(_np(ep.module()(x)), _np(m(x)), rtol=1e-5, atol=1e-6)


def test_save_load_round_trip(tmp_path):
    m = M()
    ep = ember.export.export(m, (ember.randn(4),))
    p = os.path.join(tmp_path, "cond.pt2")
    ember.export.save(ep, p)
    ep2 = ember.export.load(p)
    assert len(_conds(ep2.graph_module)) == 1
    assert str(ep2) == str(ep)
    for x in _pos_neg():
        np.testing.assert_allclose(_np(ep2.module()(x)), _np(m(x)), rtol=1e-6, atol=1e-6)


def test_tuple_outputs_no_operands_and_closure_over_a_frame_tensor():
    class P(nn.Module):
        def forward(self, x, y):
            z = y * 3

            def t():
                return (z + 1, {"a": z.sum()})

            def f():
                return (z - 1, {"a": z.mean()})
            out = ember.cond(x.sum() > 0, t, f, ())
            return out[0] * 2, out[1]["a"]
    m = P()
    ep = ember.export.export(m, (ember.randn(3), ember.randn(3)))
    (node,) = _conds(ep.graph_module)
    assert len(node.args[3]) == 1            # z, lifted
    y = ember.randn(3)
    for x in _pos_neg(3):
        got, want = ep.module()(x, y), m(x, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-6)


def test_nested_cond_exports_nested_nodes():
    class N(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(4))

        def forward(self, x):
            def inner_t(a):
                return a * 10 + self.w       # a parameter read two levels down: lifted at both

            def inner_f(a):
                return a / 10

            def t(a):
                return ember.cond(a.max() > 0.5, inner_t, inner_f, (a,))

            def f(a):
                return a - 100
            return ember.cond(x.sum() > 0, t, f, (x,))
    m = N()
    ep = ember.export.export(m, (ember.rand(4),))
    assert len(_conds(ep.graph_module)) == 1
    assert len(_conds(ep.graph_module.true_graph_0)) == 1
    assert not [n for n in ep.graph_module.true_graph_0.graph.nodes if n.op == "get_attr"
                and not n.target.startswith(("true_graph", "false_graph"))]
    assert "class true_graph_0" in str(ep).split("class true_graph_0", 1)[1]   # printed nested, twice
    (node,) = _conds(ep.graph_module)
    assert [a.name for a in node.args[3]] == ["x", "p_w"]
    for x in (ember.rand(4) * 0.4, ember.rand(4) + 0.6, -ember.rand(4) - 0.1):
        np.testing.assert_allclose(_np(ep.module()(x)), _np(m(x)), rtol=1e-6, atol=1e-6)


def test_branch_mismatch_raises():
    class B(nn.Module):
        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.sum(), (x,))
    with pytest.raises(CondBranchMismatchError, match="shape"):
        ember.export.export(B(), (ember.randn(3, 2),))


def test_dynamic_batch_dim():
    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda a: self.lin(a), lambda a: a.relu(), (x,))
    m = D()
    ep = ember.export.export(m, (ember.rand(3, 2),), dynamic_shapes={"x": {0: ember.export.Dim("b")}})
    assert len(_conds(ep.graph_module)) == 1
    for n in (4, 7):
        for x in _pos_neg(n * 2):
            x = x.reshape(n, 2)
            np.testing.assert_allclose(_np(ep.module()(x)), _np(m(x)), rtol=1e-6, atol=1e-6)


def test_branch_writing_into_its_operand_is_refused():
    from ember._higher_order_ops.cond_op import UnsupportedAliasMutationException

    class W(nn.Module):
        def forward(self, x):
            def t(a):
                a.add_(1)
                return a * 2
            return ember.cond(x.sum() > 0, t, lambda a: a * 3, (x,))
    with pytest.raises(UnsupportedAliasMutationException, match="might be modifying the input"):
        ember.export.export(W(), (ember.rand(3),))


def test_unflatten_runs_the_cond_in_root_and_child_scopes():
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = M()

        def forward(self, x):
            return self.inner(x) + 1
    for m in (M(), Outer()):
        u = ember.export.unflatten(ember.export.export(m, (ember.randn(4),)))
        for x in _pos_neg():
            np.testing.assert_allclose(_np(u(x)), _np(m(x)), rtol=1e-6, atol=1e-6)
