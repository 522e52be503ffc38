"""A data-dependent ``ember.cond`` under ember.compile: ONE graph holding an
``ember.ops.higher_order.cond`` node (torch's cond HOP), no graph break, no guard on the
predicate's value; aot traces it (forward and backward cond nodes), inductor runs it as an extern
call of the chosen compiled branch. Values against eager (and torch where installed)."""
import logging

import numpy as np
import pytest

import ember
from ember import dynamo
from ember._higher_order_ops import CondBranchMismatchError
from ember.dynamo import convert_frame

from ._util import CountingBackend

COND = ember.ops.higher_order.cond


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _signs(*shape):
    return ember.rand(*shape) + 0.1, -ember.rand(*shape) - 0.1


def f_two(x, y):
    z = x * 2
    out = ember.cond(z.sum() > 0, lambda a, b: (a.sin() + b, a * b), lambda a, b: (a.cos() - b, a + b), (z, y))
    return out[0] + out[1]


def test_one_graph_no_break_and_node_structure():
    ember.compiler.reset()
    ex = dynamo.explain(f_two)(ember.randn(4), ember.randn(4))
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    be = CountingBackend()
    cf = ember.compile(f_two, backend=be, fullgraph=True)
    y = ember.randn(4)
    for x in _signs(4) + _signs(4):
        _close(cf(x, y), f_two(x, y))
    assert be.frame_count == 1            # the predicate flipped: no recompile
    gm = be.graphs[0]
    (node,) = [n for n in gm.graph.nodes if n.target is COND]
    assert [a.target for a in node.args[1:3]] == ["cond_true_0", "cond_false_0"]
    assert len(node.args[3]) == 2
    assert "ember.ops.higher_order.cond(" in gm.code
    for sub in (gm.cond_true_0, gm.cond_false_0):
        assert isinstance(sub, ember.fx.GraphModule)
        assert len([n for n in sub.graph.nodes if n.op == "placeholder"]) == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inference_backends_both_predicates_one_compile(backend, caplog):
    ember.compiler.reset()
    before = dict(convert_frame.counters)
    cf = ember.compile(f_two, backend=backend, fullgraph=True)
    y = ember.randn(3, 4)
    with caplog.at_level(logging.WARNING):
        for x in _signs(3, 4) + _signs(3, 4):
            _close(cf(x, y), f_two(x, y))
    assert convert_frame.counters["compiled"] - before["compiled"] == 1
    assert convert_frame.counters["recompiles"] == before["recompiles"]
    # inductor compiled the graph (the cond is an extern call), it did not give up and run it eagerly
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]


def test_dynamic_sizes_inductor_compiles_the_cond(caplog):
    ember.compiler.reset()

    def d(x):
        return ember.cond(x.sum() > 0, lambda a: a.sin() * a.shape[0], lambda a: a, (x,)) + 1
    cd = ember.compile(d, backend="inductor", dynamic=True, fullgraph=True)
    before = convert_frame.counters["compiled"]
    with caplog.at_level(logging.WARNING):
        for n in (3, 5):
            for x in _signs(n, 2):
                _close(cd(x), d(x))
    assert convert_frame.counters["compiled"] - before == 1
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)
        self.scale = ember.nn.Parameter(ember.randn(4))

    def forward(self, x):
        def t(a):
            return self.lin(a).tanh() * self.scale

        def f(a):
            return a * self.scale + 1
        return ember.cond(x.mean() > 0, t, f, (x,)).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_gradients_through_cond_match_eager(backend):
    ember.compiler.reset()
    net = Net()
    cnet = ember.compile(net, backend=backend, fullgraph=True)
    for x in _signs(3, 4):
        x = x.requires_grad_()
        net.zero_grad()
        want = net(x)
        want.backward()
        wg = [x.grad.clone()] + [p.grad.clone() if p.grad is not None else ember.zeros_like(p)
                                 for p in net.parameters()]
        x.grad = None
        net.zero_grad()
        got = cnet(x)
        got.backward()
        gg = [x.grad] + [p.grad if p.grad is not None else ember.zeros_like(p) for p in net.parameters()]
        _close(got, want)
        for a, b in zip(gg, wg):
            _close(a, b)


def test_training_gradients_match_torch():
    torch = pytest.importorskip("torch")
    ember.compiler.reset()

    def ef(x, w):
        return ember.cond(x.sum() > 0, lambda a, b: (a * b).sin(), lambda a, b: a.cos() * b, (x, w)).sum()

    def tf(x, w):       # (torch.cond runs through torch.compile even eagerly: slow; the same branches)
        return ((x * w).sin() if bool(x.sum() > 0) else x.cos() * w).sum()
    cf = ember.compile(ef, backend="aot_eager", fullgraph=True)
    rng = np.random.default_rng(0)
    for sign in (1, -1):
        xa = (np.abs(rng.standard_normal(5)) * sign).astype(np.float32)
        wa = rng.standard_normal(5).astype(np.float32)
        ex, ew = ember.tensor(xa, requires_grad=True), ember.tensor(wa, requires_grad=True)
        tx, tw = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
        cf(ex, ew).backward()
        tf(tx, tw).backward()
        np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(ew.grad), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


LIN = ember.nn.Linear(3, 3)


def g_global(x):
    return ember.cond(x.sum() > 0, lambda a: LIN(a), lambda a: a * 2, (x,)).sum()


def test_global_module_parameters_are_lifted_and_get_gradients():
    ember.compiler.reset()
    be = CountingBackend()
    cg = ember.compile(g_global, backend=be, fullgraph=True)
    x = ember.rand(2, 3) + 0.1
    LIN.zero_grad()
    g_global(x).backward()
    want = LIN.weight.grad.clone()
    LIN.zero_grad()
    cg(x).backward()
    _close(LIN.weight.grad, want)
    (node,) = [n for n in be.graphs[0].graph.nodes if n.target is COND]
    assert len(node.args[3]) == 3        # x, LIN.weight, LIN.bias


def test_nested_cond_no_operands_and_pytree_outputs():
    ember.compiler.reset()

    def h(x, y):
        def inner_t(a):
            return a * 10

        def inner_f(a):
            return a / 10

        def t():
            return {"v": ember.cond(x.max() > 0.5, inner_t, inner_f, (x,)), "s": (y + 1,)}

        def f():
            return {"v": x - 100, "s": (y - 1,)}
        out = ember.cond(x.sum() > 0, t, f, ())
        return out["v"] + out["s"][0]
    be = CountingBackend()
    ch = ember.compile(h, backend=be, fullgraph=True)
    ci = ember.compile(h, backend="inductor", fullgraph=True)
    y = ember.randn(4)
    for x in (ember.rand(4) * 0.4, ember.rand(4) + 0.6, -ember.rand(4) - 0.1):
        _close(ch(x, y), h(x, y))
        _close(ci(x, y), h(x, y))
    assert be.frame_count == 1
    gm = be.graphs[0]
    assert len([n for n in gm.cond_true_0.graph.nodes if n.target is COND]) == 1


def test_branch_mismatch_is_torchs_error_type():
    def bad(x):
        return ember.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.sum(), (x,))
    with pytest.raises(CondBranchMismatchError, match="shape") as info:
        ember.compile(bad, backend="eager")(ember.randn(3, 2))
    assert isinstance(info.value, RuntimeError)       # torch raises a RuntimeError subclass too

    def bad_structure(x):
        return ember.cond(x.sum() > 0, lambda a: (a, a), lambda a: a, (x,))
    with pytest.raises(CondBranchMismatchError, match="structure"):
        ember.compile(bad_structure, backend="eager", fullgraph=True)(ember.randn(3))


def test_python_and_size_predicates_still_inline():
    be = CountingBackend()

    def s(x):
        return ember.cond(x.shape[0] > 2, lambda a: a.sin(), lambda a: a.cos(), (x,)) + \
            ember.cond(True, lambda a: a * 2, lambda a: a * 3, (x,))
    x = ember.randn(4)
    _close(ember.compile(s, backend=be)(x), s(x))
    assert not [n for n in be.graphs[0].graph.nodes if n.target is COND]


def test_make_fx_of_user_cond_records_the_node():
    from ember.fx.experimental.proxy_tensor import make_fx

    def u(x):
        return ember.cond(x.sum() > 0, lambda a: a.exp(), lambda a: a.neg(), (x,))
    gm = make_fx(u, tracing_mode="fake")(ember.randn(3))
    assert len([n for n in gm.graph.nodes if n.target is COND]) == 1
    for x in _signs(3):
        _close(gm(x), u(x))
    # that graph module compiled: the node called directly is captured again, one graph
    ember.compiler.reset()
    be = CountingBackend()
    cgm = ember.compile(gm, backend=be, fullgraph=True)
    for x in _signs(3):
        _close(cgm(x), u(x))
    assert be.frame_count == 1


def test_untraceable_branch_breaks_with_reason_and_stays_exact():
    def v(x):
        def t(a):
            return a * 2 if float(a.sum()) > 1 else a * 3     # .item()-like read inside the branch
        return ember.cond(x.sum() > 0, t, lambda a: a - 1, (x,))
    cv = ember.compile(v, backend="eager")
    n = len(dynamo.fallback_reasons)
    for x in _signs(4):
        _close(cv(x), v(x))
    assert any("ember.cond: true_fn could not be traced" in r for _, r in dynamo.fallback_reasons[n:])


class NestedNet(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)

    def forward(self, x):
        def t(a):
            return ember.cond(a.max() > 0.5, lambda b: self.lin(b), lambda b: b * 2, (a,))
        return ember.cond(x.sum() > 0, t, lambda a: a - 1, (x,)).sum()


def test_nested_cond_closure_parameters_are_lifted_and_get_gradients():
    ember.compiler.reset()
    net = NestedNet()
    be = CountingBackend()
    ember.compile(net, backend=be, fullgraph=True)(ember.rand(2, 4))
    (node,) = [n for n in be.graphs[0].graph.nodes if n.target is COND]
    assert len(node.args[3]) == 3          # x and lin's two parameters, lifted through both levels
    cnet = ember.compile(net, backend="aot_eager", fullgraph=True)
    for x in (ember.rand(2, 4) + 0.5, ember.rand(2, 4) * 0.2, -ember.rand(2, 4)):
        x.requires_grad_()
        net.zero_grad()
        net(x).backward()
        want = [x.grad.clone(), net.lin.weight.grad if net.lin.weight.grad is not None else ember.zeros(4, 4)]
        want[1] = want[1].clone()
        x.grad = None
        net.zero_grad()
        cnet(x).backward()
        got = [x.grad, net.lin.weight.grad if net.lin.weight.grad is not None else ember.zeros(4, 4)]
        for a, b in zip(got, want):
            _close(a, b)
