"""ember.cond / ember.while_loop: eager semantics and checks as torch's, autograd through the
branch taken, and their capture under ember.compile (static predicate inlined, tensor predicate
one cond graph node)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember import dynamo
from ember._higher_order_ops import CondBranchMismatchError

from ._util import CountingBackend


def _np(t):
    return np.asarray(t.detach().numpy())


def test_reachable_names():
    import ember._higher_order_ops as hop
    assert ember.cond is hop.cond and ember.while_loop is hop.while_loop


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_eager_cond_matches_torch(n, seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, 3)).astype(np.float32)
    for pred in (True, False):
        got = ember.cond(ember.tensor(pred), lambda x: x.sin() * 2, lambda x: x.cos() - 1, (ember.tensor(a),))
        want = torch.cond(torch.tensor(pred), lambda x: x.sin() * 2, lambda x: x.cos() - 1, (torch.tensor(a),))
        np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-6, atol=1e-6)


def test_eager_cond_python_bool_and_nested_output():
    x, y = ember.randn(4), ember.randn(4)
    out = ember.cond(False, lambda a, b: {"s": (a + b,)}, lambda a, b: {"s": (a - b,)}, [x, y])
    np.testing.assert_allclose(_np(out["s"][0]), _np(x) - _np(y), rtol=1e-6)


def test_eager_cond_gradients_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal(5).astype(np.float32)
    for pred in (True, False):
        x = ember.tensor(a, requires_grad=True)
        ember.cond(ember.tensor([pred]), lambda t: (t * t).sin(), lambda t: t.exp(), (x,)).sum().backward()
        tx = torch.tensor(a, requires_grad=True)
        torch.cond(torch.tensor([pred]), lambda t: (t * t).sin(), lambda t: t.exp(), (tx,)).sum().backward()
        np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cond_argument_errors_as_torch():
    torch = pytest.importorskip("torch")
    x = ember.randn(3)
    tx = torch.randn(3)
    cases = [((ember.tensor([True, False]),), (torch.tensor([True, False]),), "single-element"),
             (("a",), ("a",), "Expected pred to be bool or tensor")]
    for (ep,), (tp,), msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            ember.cond(ep, lambda t: t, lambda t: t, (x,))
        with pytest.raises(RuntimeError, match=msg):
            torch.cond(tp, lambda t: t, lambda t: t, (tx,))
    with pytest.raises(RuntimeError, match="tuple of possibly nested dict/list/tuple that only consists of tensor"):
        ember.cond(ember.tensor(True), lambda t, k: t, lambda t, k: t, (x, 3))
    with pytest.raises(RuntimeError, match="tuple of possibly nested dict/list/tuple that only consists of tensor"):
        torch.cond(torch.tensor(True), lambda t, k: t, lambda t, k: t, (tx, 3))
    with pytest.raises(RuntimeError, match="callable"):
        ember.cond(True, 3, lambda t: t, (x,))


def test_while_loop_matches_torch():
    torch = pytest.importorskip("torch")
    from torch._higher_order_ops.while_loop import while_loop as twl
    a = np.random.default_rng(1).standard_normal(4).astype(np.float32)
    i, x = ember.while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 1.5 + 1), (ember.tensor(0), ember.tensor(a)))
    ti, tx = twl(lambda i, x: i < 5, lambda i, x: (i + 1, x * 1.5 + 1), (torch.tensor(0), torch.tensor(a)))
    assert int(i.item()) == int(ti) == 5
    np.testing.assert_allclose(_np(x), tx.numpy(), rtol=1e-6)


def test_while_loop_errors():
    i, x = ember.tensor(0), ember.randn(3)
    with pytest.raises(RuntimeError, match="Expect cond_fn and body_fn to be callable"):
        ember.while_loop(3, lambda i, x: (i + 1, x), (i, x))
    with pytest.raises(RuntimeError, match="carried_inputs must be a tuple or list"):
        ember.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x), i)
    with pytest.raises(CondBranchMismatchError, match="different structures"):
        ember.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1,), (i, x))
    with pytest.raises(CondBranchMismatchError, match="dtype"):
        ember.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x.double()), (i, x))
    with pytest.raises(RuntimeError, match="boolean scalar tensor"):
        ember.while_loop(lambda i, x: (i < 3).float(), lambda i, x: (i + 1, x), (i, x))


# ---------------------------------------------------------------------------- compiled
def test_static_predicate_inlines_chosen_branch():
    be = CountingBackend()

    def f(x):
        y = x * 2
        return ember.cond(x.shape[0] > 4, lambda a: a.sin(), lambda a: a.cos(), (y,)) + 1

    cf = ember.compile(f, backend=be, fullgraph=True)
    for n in (6, 3):
        x = ember.randn(n, 3)
        np.testing.assert_allclose(_np(cf(x)), _np(f(x)), rtol=1e-6)
    assert be.frame_count == 2          # one graph per branch (a guard on the size), no break
    targets = [str(nd.target) for g in be.graphs for nd in g.graph.nodes if nd.op in ("call_method", "call_function")]
    assert any("sin" in t for t in targets) and any("cos" in t for t in targets)


def test_tensor_predicate_is_one_graph_with_a_cond_node():
    """A tensor predicate is captured as one ``ember.ops.higher_order.cond`` node (torch's cond HOP):
    no graph break, ``fullgraph=True`` works (tests/dynamo/test_cond_hop_s34.py has the rest)."""
    be = CountingBackend()

    def g(x):
        y = x * 2
        return ember.cond(y.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (y,)) + 1

    cg = ember.compile(g, backend=be)
    n_reasons = len(dynamo.fallback_reasons)
    for sign in (1, -1, 1):
        x = ember.rand(5, 3) * sign
        np.testing.assert_allclose(_np(cg(x)), _np(g(x)), rtol=1e-6)
    assert be.frame_count == 1 and len(dynamo.fallback_reasons) == n_reasons
    assert any(n.target is ember.ops.higher_order.cond for n in be.graphs[0].graph.nodes)
    x = ember.randn(5, 3)
    np.testing.assert_allclose(_np(ember.compile(g, backend="eager", fullgraph=True)(x)), _np(g(x)), rtol=1e-6)


def test_both_signs_of_tensor_predicate_are_exact():
    """No specialisation on the first call's predicate value."""
    def g(x):
        return ember.cond(x.sum() > 0, lambda a: a + 100, lambda a: a - 100, (x,))
    cg = ember.compile(g, backend="eager")
    pos, neg = ember.rand(4) + 1, -ember.rand(4) - 1
    np.testing.assert_allclose(_np(cg(pos)), _np(pos) + 100, rtol=1e-6)
    np.testing.assert_allclose(_np(cg(neg)), _np(neg) - 100, rtol=1e-6)


def test_branch_mismatch_raises_at_compile():
    def h(x):
        return ember.cond(True, lambda a: a.sin(), lambda a: a.sum(), (x,))
    with pytest.raises(CondBranchMismatchError, match="shape"):
        ember.compile(h, backend="eager")(ember.randn(3, 2))

    def k(x):
        return ember.cond(x.shape[0] == 3, lambda a: a.sin(), lambda a: a.double(), (x,))
    with pytest.raises(CondBranchMismatchError, match="dtype"):
        ember.compile(k, backend="eager")(ember.randn(3, 2))
    assert h(ember.randn(3, 2)).shape == (3, 2)      # eager runs only the branch taken


def test_while_loop_compiled_graph_breaks():
    def w(x):
        i = ember.tensor(0)
        return ember.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (i, x))[1] + 1
    cw = ember.compile(w, backend="eager")
    x = ember.randn(4)
    np.testing.assert_allclose(_np(cw(x)), _np(x) * 8 + 1, rtol=1e-6)
    assert any("ember.while_loop" in r for _, r in dynamo.fallback_reasons)


def test_cond_branches_as_module_methods_inline():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(3, 3)

        def t(self, a):
            return self.lin(a).relu()

        def f(self, a):
            return self.lin(a).tanh()

        def forward(self, x):
            return ember.cond(x.shape[1] == 3, self.t, self.f, (x,))
    m = M()
    x = ember.randn(4, 3)
    np.testing.assert_allclose(_np(ember.compile(m, backend="eager", fullgraph=True)(x)), _np(m(x)), rtol=1e-6)


def test_symbolic_size_predicate_is_guarded():
    be = CountingBackend()

    def f(x):
        return ember.cond(x.shape[0] > 4, lambda a: a * 3, lambda a: a - 3, (x,))
    cf = ember.compile(f, backend=be, dynamic=True)
    for n in (6, 7, 2, 3, 9):
        x = ember.randn(n, 11)
        np.testing.assert_allclose(_np(cf(x)), _np(f(x)), rtol=1e-6)
    assert be.frame_count == 2          # one graph per side of the size guard


def test_while_loop_under_export_raises_naming_it():
    class W(ember.nn.Module):
        def forward(self, x):
            return ember.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (ember.tensor(0), x))[1]
    with pytest.raises(dynamo.Unsupported, match="ember.while_loop"):
        ember.export.export(W(), (ember.randn(3),))
