"""Graph inputs that require grad but are not leaves (``a = x * 3``), written in place inside the
compiled graph: captured (no graph break), the joint graph returns the new value and the runtime
copies it into the input with autograd on, so ``a.grad_fn`` leads through the compiled backward
to what produced both the old value and the update. Values and every gradient equal torch's and
eager ember's; in-place on a real leaf that requires grad is still refused with torch's error."""
import numpy as np
import pytest

import ember
from ember import dynamo

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def _run(T, fn, build, arrays, call=None):
    """Leaves from ``arrays`` (float: requiring grad), ``args, watched = build(T, leaves)``, then
    ``call(*args)`` (``fn`` itself by default) and a backward of a loss over the outputs and the
    watched tensors (the written inputs, their bases) as they are after the call. Returns the
    outputs, the watched values after the call, and every leaf's gradient."""
    leaves = [T.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    args, watched = build(T, leaves)
    out = (call or fn)(*args)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum((o * o).sum() for o in outs) + sum(w.sin().sum() for w in watched)
    loss.backward()
    grads = [l.grad for l in leaves if l.requires_grad]
    assert all(g is not None for g in grads)
    return [_np(o) for o in outs], [_np(w) for w in watched], [_np(g) for g in grads]


def _check(fn, build, arrays, backend="aot_eager", fns=None):
    """torch eager == ember eager == ember compiled (values, written inputs, gradients).
    ``fns``: (torch's function, ember's) where they differ (a graph break call)."""
    tfn, efn = fns or (fn, fn)
    want = _run(torch, tfn, build, arrays)
    eager = _run(ember, efn, build, arrays)
    ember.compiler.reset()
    got = _run(ember, efn, build, arrays, call=ember.compile(efn, backend=backend))
    for part, name in enumerate(("output", "written input", "gradient")):
        assert len(want[part]) == len(eager[part]) == len(got[part])
        for k, (w, e, g) in enumerate(zip(want[part], eager[part], got[part])):
            np.testing.assert_allclose(e, w, rtol=1e-5, atol=1e-5, err_msg=f"eager {name} {k}")
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"compiled {name} {k}")
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


def _counts(tfn, efn, build, arrays):
    """(graphs, breaks) of torch._dynamo.explain and of ember.dynamo.explain on the same call."""
    torch._dynamo.reset()
    tx = torch._dynamo.explain(tfn)(*build(torch, [torch.tensor(a, requires_grad=a.dtype.kind == "f")
                                                    for a in arrays])[0])
    torch._dynamo.reset()
    ember.compiler.reset()
    ex = dynamo.explain(efn)(*build(ember, [ember.tensor(a, requires_grad=a.dtype.kind == "f")
                                           for a in arrays])[0])
    return (tx.graph_count, tx.graph_break_count), (ex.graph_count, ex.graph_break_count), ex


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _scaled(T, leaves):
    """a = x * 3 (not a leaf), y: the leaves' second tensor."""
    x, y = leaves[:2]
    a = x * 3
    return [a, y] + leaves[2:], [a]


def add_into(a, y):
    a.add_(y)
    return a * 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_add_into_nonleaf_input(backend):
    rng = np.random.default_rng(10)
    arrays = [_rand(rng, 3, 4), _rand(rng, 3, 4)]
    _check(add_into, _scaled, arrays, backend)
    t, e, _ = _counts(add_into, add_into, _scaled, arrays)
    assert t == e == (1, 0)


def test_written_input_gets_the_write_back_history():
    rng = np.random.default_rng(11)
    x = ember.tensor(_rand(rng, 3, 4), requires_grad=True)
    y = ember.tensor(_rand(rng, 3, 4), requires_grad=True)
    a = x * 3
    ember.compiler.reset()
    out = ember.compile(add_into, backend="aot_eager")(a, y)
    # as torch's: CopyBackwards into the compiled function's backward, then the producer's
    assert type(a.grad_fn).__name__ == "CopyBackwards"
    nexts = {type(n).__name__ for n, _ in a.grad_fn.next_functions if n is not None}
    assert "CompiledFunctionBackward" in nexts, nexts
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"


def index_add_into(a, idx, y):
    a.index_add_(0, idx, y * 2)
    return a.sum(1)


def test_index_add_into_nonleaf_input():
    rng = np.random.default_rng(12)
    arrays = [_rand(rng, 5, 3), _rand(rng, 4, 3), rng.integers(0, 5, 4)]

    def build(T, leaves):
        x, y, idx = leaves
        a = x * 1.5
        return [a, idx, y], [a]
    _check(index_add_into, build, arrays)
    t, e, _ = _counts(index_add_into, index_add_into, build, arrays)
    assert t == e == (1, 0)


def mul_twice(a, y):
    a.mul_(y)
    a.mul_(y)
    return a + 1


def test_mul_twice_into_nonleaf_input():
    """The backward needs the values ``a`` had before each write (saved copies, not ``a``)."""
    rng = np.random.default_rng(13)
    arrays = [_rand(rng, 4, 3), _rand(rng, 4, 3)]
    _check(mul_twice, _scaled, arrays)
    t, e, _ = _counts(mul_twice, mul_twice, _scaled, arrays)
    assert t == e == (1, 0)


def returns_written(a, y):
    a.sub_(y.exp())
    return a


def test_written_input_returned_is_the_input():
    rng = np.random.default_rng(14)
    arrays = [_rand(rng, 2, 5), _rand(rng, 2, 5)]
    _check(returns_written, _scaled, arrays)
    x = ember.tensor(arrays[0], requires_grad=True)
    a = x * 3
    ember.compiler.reset()
    out = ember.compile(returns_written, backend="aot_eager")(a, ember.tensor(arrays[1]))
    assert out is a        # as eagerly and as torch's compiled function


def write_view(v, y):
    v.mul_(y)
    return v.cos()


@pytest.mark.parametrize("step", [1, 2])
def test_write_into_nonleaf_view_input(step):
    """``v`` is a view of a non-leaf base (a contiguous block, or every other column): the write
    reaches the base, whose history is rebased (CopySlices) as eagerly."""
    rng = np.random.default_rng(15 + step)
    arrays = [_rand(rng, 4, 6), _rand(rng, 2, 6 // step)]

    def build(T, leaves):
        x, y = leaves
        base = x * 3
        v = base[1:3, ::step]
        return [v, y], [base, v]
    _check(write_view, build, arrays)
    t, e, _ = _counts(write_view, write_view, build, arrays)
    assert t == e == (1, 0)
    x = ember.tensor(arrays[0], requires_grad=True)
    base = x * 3
    ember.compiler.reset()
    ember.compile(write_view, backend="aot_eager")(base[1:3, ::step], ember.tensor(arrays[1]))
    assert type(base.grad_fn).__name__ == "CopySlices"


def base_and_view(b, v, y):
    v.add_(y)
    return b * 2


def write_base_read_view(b, v, y):
    b.mul_(1.5)
    v.sub_(y)
    return v * b.sum(), b[0]


def _base_and_view_build(T, leaves):
    """Inputs: a non-leaf base, a view of it (rows 1:2), a leaf; the base's producer's leaf."""
    x, y = leaves
    base = x * 3
    return [base, base[1:3], y], [base]


@pytest.mark.parametrize("fn", [base_and_view, write_base_read_view])
def test_write_into_view_of_another_input(fn, caplog):
    """Both the base and a view of it are inputs: the view is made a view of the base's copy in
    the graph (a write through either is seen by both), the base's new value is copied back and
    the view, a view of it, follows (as torch's "synthetic base")."""
    rng = np.random.default_rng(18)
    arrays = [_rand(rng, 4, 3), _rand(rng, 2, 3)]

    build = _base_and_view_build
    with caplog.at_level("WARNING", logger="ember.aot"):
        _check(fn, build, arrays)
    assert not [r for r in caplog.records if "eagerly" in r.getMessage()]      # compiled
    t, e, _ = _counts(fn, fn, build, arrays)
    assert t == e == (1, 0)
    x = ember.tensor(arrays[0], requires_grad=True)
    base = x * 3
    v = base[1:3]
    ember.compiler.reset()
    ember.compile(fn, backend="aot_eager")(base, v, ember.tensor(arrays[1]))
    assert type(base.grad_fn).__name__ == "CopyBackwards"
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"


def _break_fn(gb):
    def f(a, y):
        a.mul_(y)
        gb()
        a.add_(y.sin())
        return a * 2
    return f


def test_write_then_graph_break_then_write():
    """The resume function after the break gets ``a`` (not a leaf any more) as an input and
    writes into it inside its graph: two graphs, one break, as torch."""
    rng = np.random.default_rng(19)
    arrays = [_rand(rng, 3, 3), _rand(rng, 3, 3)]
    tfn, efn = _break_fn(torch._dynamo.graph_break), _break_fn(dynamo.graph_break)
    _check(None, _scaled, arrays, fns=(tfn, efn))
    t, e, ex = _counts(tfn, efn, _scaled, arrays)
    assert t == e == (2, 1), ex.break_reasons
    assert all("leaf Variable" not in r for _, r, _ in ex.break_reasons)
    assert all("mul_" in g.code or "add_" in g.code for g in ex.graphs)


def moe(flat, logits, w1, w2):
    """A top-2 mixture of experts written as in a model: a loop over experts, ``where`` (nonzero:
    a graph break) picks each expert's tokens, ``index_add_`` scatters its output into ``out``,
    which after the first expert requires grad and is not a leaf."""
    topv, topi = logits.topk(2, dim=-1)
    w = topv.softmax(-1)
    out = flat * 0.5
    for e in range(w1.shape[0]):
        tok, slot = (topi == e).nonzero(as_tuple=True)
        h = (flat[tok] @ w1[e]).relu() @ w2[e]
        out.index_add_(0, tok, h * w[tok, slot].unsqueeze(-1))
    return out


def test_moe_loop_captures_index_add_into_nonleaf():
    rng = np.random.default_rng(20)
    n_exp = 3
    arrays = [_rand(rng, 10, 4), _rand(rng, 10, n_exp), _rand(rng, n_exp, 4, 6), _rand(rng, n_exp, 6, 4)]

    def build(T, leaves):
        return leaves, []
    _check(moe, build, arrays)
    ember.compiler.reset()
    ex = dynamo.explain(moe)(*[ember.tensor(a, requires_grad=True) for a in arrays])
    # every break is the nonzero (torch breaks there too, then runs this frame eagerly: "graph
    # break in loop"); every expert's index_add_ is inside a graph (a resume function's)
    assert ex.graph_break_count == n_exp, ex.break_reasons
    for _, reason, src in ex.break_reasons:
        assert "nonzero" in reason and "(topi == e).nonzero" in src, reason
    assert sum("index_add" in g.code for g in ex.graphs) == n_exp


def test_dynamic_sizes():
    """A second size compiles a graph with symbolic sizes (dynamo's ShapeEnv): still captured."""
    rng = np.random.default_rng(21)
    ember.compiler.reset()
    cf = ember.compile(add_into, backend="aot_eager")
    for n in (3, 5, 7):
        arrays = [_rand(rng, n, 2), _rand(rng, n, 2)]
        want = _run(torch, add_into, _scaled, arrays)
        got = _run(ember, add_into, _scaled, arrays, call=cf)
        for w, g in zip(sum(want, []), sum(got, [])):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


def test_leaf_that_requires_grad_is_still_refused():
    rng = np.random.default_rng(22)
    arrays = [_rand(rng, 3, 4), _rand(rng, 3, 4)]
    with pytest.raises(RuntimeError) as te:
        add_into(torch.tensor(arrays[0], requires_grad=True), torch.tensor(arrays[1]))
    ember.compiler.reset()
    with pytest.raises(RuntimeError) as ee:
        ember.compile(add_into, backend="aot_eager")(ember.tensor(arrays[0], requires_grad=True),
                                                     ember.tensor(arrays[1]))
    assert str(ee.value) == str(te.value)
    # a view of such a leaf too (torch's own message for it)
    with pytest.raises(RuntimeError) as te:
        add_into(torch.tensor(arrays[0], requires_grad=True)[1:], torch.tensor(arrays[1][1:]))
    ember.compiler.reset()
    with pytest.raises(RuntimeError) as ee:
        ember.compile(add_into, backend="aot_eager")(ember.tensor(arrays[0], requires_grad=True)[1:],
                                                     ember.tensor(arrays[1][1:]))
    assert str(ee.value) == str(te.value)


def test_fake_twins_keep_leafness():
    from ember.fx.fake_tensor import FakeTensorMode
    rng = np.random.default_rng(23)
    x = ember.tensor(_rand(rng, 3, 4), requires_grad=True)
    a = x * 3
    mode = FakeTensorMode()
    fa, fx_, fv = mode.from_tensor(a), mode.from_tensor(x), mode.from_tensor(x[1:])
    assert not fa.is_leaf and fa.requires_grad
    assert fx_.is_leaf and fx_.requires_grad
    assert mode.from_tensor(a, leaf=True).is_leaf
    with mode:
        fa.add_(1.0)       # traced, as eagerly
        assert not fa.is_leaf
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            fx_.add_(1.0)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fv.add_(1.0)


def test_aot_function_without_dynamo():
    """``aot_function`` on a non-leaf input: the same write-back, no dynamo involved."""
    from ember.aot import aot_function
    from ember.aot.backends import _interpreter_compiler
    rng = np.random.default_rng(24)
    arrays = [_rand(rng, 3, 4), _rand(rng, 3, 4)]
    want = _run(torch, mul_twice, _scaled, arrays)
    x = ember.tensor(arrays[0], requires_grad=True)
    y = ember.tensor(arrays[1], requires_grad=True)
    a = x * 3
    compiled = aot_function(mul_twice, [a, y], fw_compiler=_interpreter_compiler)
    out = compiled(a, y)
    assert type(a.grad_fn).__name__ == "CopyBackwards"
    ((out * out).sum() + a.sin().sum()).backward()
    got = [[_np(out)], [_np(a)], [_np(x.grad), _np(y.grad)]]
    for w, g in zip(sum(want, []), sum(got, [])):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_aot_cache_hit_keeps_the_write_back(monkeypatch, tmp_path):
    """A second compilation served by the aot cache (its joint record: which inputs are copied
    back, which output is the input itself) behaves as the first."""
    import logging
    from ember.aot import cache
    monkeypatch.setenv("EMBER_AOT_CACHE", "1")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_LOGS", raising=False)
    for kind in ("aot_graphs", "aot_joint_graph"):     # (on, they bypass the cache)
        monkeypatch.setattr(logging.getLogger(f"ember.aot.{kind}"), "isEnabledFor", lambda level: False)
    rng = np.random.default_rng(25)
    arrays = [_rand(rng, 4, 3), _rand(rng, 2, 3)]

    build = _base_and_view_build
    want = _run(torch, write_base_read_view, build, arrays)
    hits = cache.stats["hits"]
    for _ in range(2):
        ember.compiler.reset()
        got = _run(ember, write_base_read_view, build, arrays,
                   call=ember.compile(write_base_read_view, backend="aot_eager"))
        for w, g in zip(sum(want, []), sum(got, [])):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert cache.stats["hits"] > hits
