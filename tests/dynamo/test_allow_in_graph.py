"""``ember.compiler.allow_in_graph`` (one ``call_function`` node per call, body not traced by
dynamo, traced through by aot) and ``disallow_in_graph`` (graph break at every call)."""
import numpy as np
import pytest

import ember
import ember._dynamo as edynamo
from ember import dynamo
from ember.dynamo.variables import allowed as _allowed

from ._util import CountingBackend, random_tensor

RNG = np.random.default_rng(8)


def _x(*shape, rg=False):
    t = random_tensor(RNG, *(shape or (3, 4)))
    return t.requires_grad_(True) if rg else t


CALLS = []


def fused(a, b, scale):
    CALLS.append(1)            # runs while tracing (fake tensors) and at run time, never traced by dynamo
    return (a * scale + b).relu(), [a - b, (b * 2,)]


def other(a, b, scale):
    return (a * scale - b).relu(), [a + b, (b * 3,)]


@pytest.fixture(autouse=True)
def _registry():
    ember.compiler.allow_in_graph(fused)
    yield
    for f in (fused, other, ember.sub, ember.relu):
        _allowed._ALLOWED.pop(id(f), None)
        _allowed._DISALLOWED.pop(id(f), None)


def model(x, y):
    out, (d, (e,)) = fused(x.sin(), y, 3.0)
    return out + d * e


def _call_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is fused]


def test_one_node_in_dynamo_graph():
    cnt = CountingBackend()
    cf = ember.compile(model, backend=cnt)
    x, y = _x(), _x()
    np.testing.assert_allclose(cf(x, y).numpy(), model(x, y).numpy(), rtol=1e-6)
    assert cnt.frame_count == 1
    (gm,) = cnt.graphs
    nodes = _call_nodes(gm)
    assert len(nodes) == 1 and nodes[0].args[2] == 3.0         # non-tensor argument baked in
    # the body's ops are not in dynamo's graph
    assert not any(getattr(n.target, "__name__", "") == "relu" for n in gm.graph.nodes)
    ex = dynamo.explain(model)(x, y)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_values_and_gradients_match_eager(backend):
    cf = ember.compile(model, backend=backend)
    for _ in range(2):
        x, y = _x(rg=True), _x(rg=True)
        xe, ye = x.detach().clone().requires_grad_(True), y.detach().clone().requires_grad_(True)
        out = cf(x, y)
        ref = model(xe, ye)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
        w = _x()
        (out * w).sum().backward()
        (ref * w).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.grad.numpy(), ye.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")

    def tfused(a, b, scale):
        return (a * scale + b).relu(), [a - b, (b * 2,)]

    def tmodel(x, y):
        out, (d, (e,)) = tfused(x.sin(), y, 3.0)
        return out + d * e

    xn, yn = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)
    x, y = ember.tensor(xn).requires_grad_(True), ember.tensor(yn).requires_grad_(True)
    tx, ty = torch.tensor(xn, requires_grad=True), torch.tensor(yn, requires_grad=True)
    ember.compile(model, backend="aot_eager")(x, y).sum().backward()
    tmodel(tx, ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_guards_identity_and_baked_constants():
    cnt = CountingBackend()

    def g(x, s):
        return fused(x, x, s)[0]

    cf = ember.compile(g, backend=cnt)
    x = _x()
    np.testing.assert_allclose(cf(x, 2.0).numpy(), g(x, 2.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(cf(_x(), 2.0).numpy().shape, (3, 4))
    assert cnt.frame_count == 1
    np.testing.assert_allclose(cf(x, 5.0).numpy(), g(x, 5.0).numpy(), rtol=1e-6)   # constant changed
    assert cnt.frame_count == 2


def test_global_rebinding_recompiles():
    global fused
    cnt = CountingBackend()
    cf = ember.compile(model, backend=cnt)
    x, y = _x(), _x()
    cf(x, y)
    saved = fused
    try:
        fused = other                     # a plain function now: traced through, recompiled
        np.testing.assert_allclose(cf(x, y).numpy(), model(x, y).numpy(), rtol=1e-6)
        assert cnt.frame_count == 2
        assert not any(n.target is other for n in cnt.graphs[1].graph.nodes)
    finally:
        fused = saved


def test_body_not_traced_by_dynamo():
    def weird(a):
        # code dynamo would break on (a set of tensors' ids), fine when run as a function
        seen = {id(a)}
        return a * len(seen)

    ember.compiler.allow_in_graph(weird)
    try:
        def f(x):
            return weird(x) + 1
        x = _x()
        ex = dynamo.explain(f)(x)
        assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
        np.testing.assert_allclose(ember.compile(f, backend="aot_eager")(x).numpy(), f(x).numpy())
    finally:
        _allowed._ALLOWED.pop(id(weird), None)


def test_non_tensor_result_breaks_with_reason():
    def shape_of(a):
        return a.shape[0]

    ember.compiler.allow_in_graph(shape_of)
    try:
        def f(x):
            return x * shape_of(x)
        x = _x()
        ex = dynamo.explain(f)(x)
        assert ex.graph_break_count >= 1
        assert any("must return a tensor" in str(r) for r in ex.break_reasons), ex.break_reasons
        np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), f(x).numpy())
    finally:
        _allowed._ALLOWED.pop(id(shape_of), None)


def test_non_constant_argument_breaks_with_reason():
    class Cfg:
        scale = 2.0

    def scaled(a, cfg):
        return a * cfg.scale

    ember.compiler.allow_in_graph(scaled)
    try:
        cfg = Cfg()

        def f(x):
            return scaled(x, cfg) + 1
        x = _x()
        ex = dynamo.explain(f)(x)
        assert ex.graph_break_count >= 1
        assert any("allow_in_graph" in str(r) for r in ex.break_reasons), ex.break_reasons
        np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), f(x).numpy())
    finally:
        _allowed._ALLOWED.pop(id(scaled), None)


def test_disallow_in_graph_breaks_at_op_calls():
    def f(x, y):
        a = x * 2
        b = ember.sub(a, y)
        return b.relu() + 1

    x, y = _x(), _x()
    ex = dynamo.explain(f)(x, y)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)
    edynamo.disallow_in_graph(ember.sub)
    ex = dynamo.explain(f)(x, y)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex.break_reasons
    assert any("disallow_in_graph" in str(r) for r in ex.break_reasons)
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for _ in range(2):
        x, y = _x(), _x()
        np.testing.assert_allclose(cf(x, y).numpy(), f(x, y).numpy(), rtol=1e-6)
    assert cnt.frame_count == 2
    assert not any(n.target is ember.sub for g in cnt.graphs for n in g.graph.nodes)
    # allowing it again lifts the ban
    edynamo.allow_in_graph(ember.sub)
    ex = dynamo.explain(f)(x, y)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)


def test_names_and_argument_checks():
    assert ember.compiler.allow_in_graph is edynamo.allow_in_graph
    assert ember.compiler.disallow_in_graph is edynamo.disallow_in_graph
    assert edynamo.allow_in_graph([fused]) == [fused]
    with pytest.raises(TypeError, match="'fn'"):
        ember.compiler.allow_in_graph(3)
    with pytest.raises(TypeError, match="'fn'"):
        ember.compiler.disallow_in_graph("relu")
    with pytest.raises(TypeError, match="class"):
        ember.compiler.allow_in_graph(ember.nn.Linear)


def test_argument_returned_unchanged_is_the_same_tensor():
    def pick(a, b):
        return a, b * 2

    ember.compiler.allow_in_graph(pick)
    try:
        def f(x, y):
            p, q = pick(x, y)
            return p, q + 1

        for backend in ("eager", "aot_eager"):
            dynamo.reset()
            x, y = _x(), _x()
            p, q = ember.compile(f, backend=backend)(x, y)
            assert p is x                       # as eager: the same object
            np.testing.assert_allclose(q.numpy(), (y * 2 + 1).numpy(), rtol=1e-6)
    finally:
        _allowed._ALLOWED.pop(id(pick), None)


def test_function_reading_tensor_data_breaks_with_reason():
    def data_dependent(a):
        return a * float(a.sum())             # needs the data: not possible on fake tensors

    ember.compiler.allow_in_graph(data_dependent)
    try:
        def f(x):
            return data_dependent(x) + 1
        x = _x()
        ex = dynamo.explain(f)(x)
        assert ex.graph_break_count >= 1
        assert any("cannot run on fake tensors" in str(r) for r in ex.break_reasons), ex.break_reasons
        np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), f(x).numpy(), rtol=1e-6)
    finally:
        _allowed._ALLOWED.pop(id(data_dependent), None)
