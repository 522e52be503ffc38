"""Inductor on graphs traced with a caller's ShapeEnv (fake example inputs with SymInt sizes).

``compile_fx(gm, fakes, dynamic=True)`` compiles once: sizes are the caller's symbols, passed
to the kernels as arguments read off the input arrays' shapes; guards lowering needs are added to
the caller's ShapeEnv. ``ember.inductor.dynamic`` adapts size inputs/outputs and non-contiguous
inputs. Every result is compared with the graph run eagerly on the same real inputs."""
import logging
import sys

import numpy as np
import pytest
import sympy

import ember
from ember import dynamo
from ember import prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.fx.experimental.symbolic_shapes import ShapeEnv, SymInt
from ember.fx.fake_tensor import FakeTensorMode
from ember.inductor import compile_fx
from ember.inductor.dynamic import compile_fx_symbolic

from ember.tensor import _make

from ._helpers import assert_same, rand


@pytest.fixture(autouse=True)
def _strict(monkeypatch):
    monkeypatch.setattr(ember.inductor.config, "debug_lowering", True)


def _count(monkeypatch):
    import ember.inductor.compile_fx  # noqa: F401
    cfx = sys.modules["ember.inductor.compile_fx"]
    n = [0]
    orig = cfx.compile_graph

    def counting(*a, **k):
        n[0] += 1
        return orig(*a, **k)
    monkeypatch.setattr(cfx, "compile_graph", counting)
    return n


def _symbolic(fn, *examples, dims=None):
    """(graph traced on fakes with symbolic sizes, the fakes, the ShapeEnv)."""
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    fakes = [mode.from_tensor(x, symbolic=True, source=f"a{i}",
                              dynamic_dims=None if dims is None else dims[i]) for i, x in enumerate(examples)]
    with mode:
        gm = make_fx(fn, tracing_mode="symbolic")(*fakes)
    return gm, fakes, env


def test_one_compilation_serves_every_size(monkeypatch):
    n = _count(monkeypatch)

    def fn(x, w):
        h = P.mm(x, w)
        e = P.exp(P.sub(h, P.broadcast_in_dim(P.amax(h, [1]), list(h.shape), [0])))
        return P.div(e, P.broadcast_in_dim(P.sum(e, [1]), list(h.shape), [0])), P.var(x, [0], 1.0)

    gm, fakes, env = _symbolic(fn, rand(5, 7), rand(7, 3), dims=[[0], []])
    cf = compile_fx(gm, fakes, dynamic=True)
    assert cf.compiled is not None and "const int64_t s0" in cf.compiled.source
    for m in (5, 9, 2, 31):
        x, w = rand(m, 7), rand(7, 3)
        for g, e in zip(cf(x, w), gm(x, w)):
            assert_same(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    assert n[0] == 1 and len(cf.variants) == 1
    assert env.guards == []     # nothing needed: no guard, no specialisation


def test_size_nodes_lower_to_the_callers_symbols():
    """sym_size / operator nodes (a view to (s0*s1, 4), a slice to s0 // 2) become sympy over the
    caller's symbols; a guard lowering needs (two sizes equal) goes to the caller's ShapeEnv."""
    def fn(x, y):
        a = P.reshape(x, [x.shape[0] * x.shape[1], x.shape[2]])
        b = P.slice(y, [0, 0], [y.shape[0] // 2, y.shape[1]])
        return P.mul(a, a), P.add(b, b)

    gm, fakes, env = _symbolic(fn, rand(3, 5, 4), rand(8, 4), dims=[[0, 1], [0]])
    cf = compile_fx(gm, fakes, dynamic=True)
    assert cf.compiled is not None
    syms = set(cf.compiled.graph.sizevars.var_to_val)
    assert {str(s) for s in syms} == {str(s) for s in env.var_to_val}
    for (a, b, c) in ((3, 5, 10), (6, 7, 13), (2, 2, 4)):
        x, y = rand(a, b, 4), rand(c, 4)
        for g, e in zip(cf(x, y), gm(x, y)):
            assert_same(g.numpy(), e.numpy(), rtol=1e-6)


def test_lowering_guard_is_added_to_the_shape_env():
    """Two inputs with independent symbols added pointwise: lowering needs s0 == s1, which the
    caller (not the compiled wrapper) must check."""
    env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(env)
    x, y = rand(6, 3), rand(6, 3)
    fx_, fy = mode.from_tensor(x, symbolic=True, source="x"), mode.from_tensor(y, symbolic=True, source="y")
    with mode:
        g = make_fx(lambda a, b: P.mul(P.exp(a), P.exp(b)), tracing_mode="symbolic")(fx_, fy)
    n_before = len(env.guards)
    cf = compile_fx(g, [fx_, fy], dynamic=True)
    assert cf.compiled is not None
    added = env.guards[n_before:]
    assert added, "lowering relied on equal sizes without a guard"
    assert all(isinstance(e, sympy.Basic) for e in added)
    assert env.evaluate_guards({"x.size()[0]": 6, "x.size()[1]": 3, "y.size()[0]": 6, "y.size()[1]": 3})
    assert not env.evaluate_guards({"x.size()[0]": 6, "x.size()[1]": 3, "y.size()[0]": 7, "y.size()[1]": 3})
    assert "_GuardError('size'" not in cf.compiled.wrapper_src
    a, b = rand(9, 4), rand(9, 4)
    assert_same(cf(a, b).numpy(), g(a, b).numpy(), rtol=1e-6)


def test_size_inputs_outputs_and_non_contiguous_inputs(monkeypatch):
    """What the backward of a symbolic graph looks like: sizes arrive as SymInt inputs (one carried
    by a tensor dimension, one not), sizes are returned, and an input may be non-contiguous."""
    n = _count(monkeypatch)
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    x = mode.from_tensor(rand(4, 6), symbolic=True, source="x")
    s0, s1 = x.shape
    k = env.create_symbol(9, "k")          # a size no tensor input carries
    # (make_fx bakes scalar arguments: the graph is built by hand, as the partitioner builds it)
    from ember.fx import Graph
    from ember.fx.graph_module import GraphModule
    from ember.fx.experimental.proxy_tensor import sym_size
    import operator
    g = Graph()
    t, a, b = g.placeholder("t"), g.placeholder("a"), g.placeholder("b")
    a.meta["sym_val"], b.meta["sym_val"] = s0, k
    n1 = g.call_function(sym_size, (t, 1))
    shape = g.call_function(operator.mul, (a, n1))
    flat = g.call_function(P.reshape, (t, [shape]))
    out = g.call_function(P.mul, (flat, 2.0))
    from ember.fx.passes.shape_prop import extract_tensor_metadata
    with mode:      # the metadata a tracer records
        fflat = P.reshape(x, [s0 * s1])
        flat.meta["tensor_meta"] = extract_tensor_metadata(fflat)
        out.meta["tensor_meta"] = extract_tensor_metadata(P.mul(fflat, 2.0))
    ab = g.call_function(operator.mul, (a, b))
    ab.meta["sym_val"] = s0 * k
    g.output((out, ab, b))
    gm = GraphModule({}, g)
    c = compile_fx_symbolic(gm, [x, s0, k])
    assert getattr(c, "eager_reason", None) is None
    for (r, cols, kk) in ((4, 6, 9), (7, 3, 11), (5, 8, 2)):
        arr = rand(cols, r).numpy().T          # non-contiguous (a transposed view)
        tt = _make(arr)
        assert not tt._data.flags.c_contiguous
        res = c(tt, r, kk)
        assert_same(res[0].numpy(), (arr.reshape(-1) * 2.0).astype(np.float32), rtol=1e-6)
        assert res[1:] == (r * kk, kk)
    assert n[0] == 1


def test_size_over_unreadable_symbols_runs_in_the_interpreter(caplog):
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    x = mode.from_tensor(rand(4, 6), symbolic=True, source="x")
    s0, s1 = x.shape
    from ember.fx import Graph
    from ember.fx.graph_module import GraphModule
    import operator
    g = Graph()
    t, a = g.placeholder("t"), g.placeholder("a")
    g.output((g.call_function(P.mul, (t, 2.0)),))
    gm = GraphModule({}, g)
    prod = s0 * s1        # only the product is passed: s0 and s1 cannot be read back from it
    fake_y = ember.fx.fake_tensor.make_fake(ember._fake.FakeArray((prod,), np.float32), ember.device("cpu"))
    with caplog.at_level(logging.WARNING, logger="ember.inductor"):
        c = compile_fx_symbolic(gm, [fake_y, prod])
    assert "no input carries" in c.eager_reason
    z = rand(24)
    assert_same(c(z, 24)[0].numpy(), (z.numpy() * 2.0), rtol=1e-6)
    assert any("fx Interpreter" in r.getMessage() for r in caplog.records)


def test_nanogpt_inductor_dynamic_true(monkeypatch):
    """The transformer compiled once with dynamic=True serves 4 batch/sequence sizes: forward and
    gradients as eager."""
    import copy
    import os
    from ember import dynamo
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from benchmarks import models
    n = _count(monkeypatch)
    monkeypatch.setattr(ember.aot.config, "debug_dynamic", True)
    dynamo.reset()
    try:
        ember.manual_seed(0)
        case = models.nanogpt(ember, 0.1)
        model, ref = case.model, copy.deepcopy(case.model)
        cm = ember.compile(model, backend="inductor", dynamic=True)
        for b, t in ((2, 5), (3, 7), (4, 9), (5, 13)):
            idx = ember.randint(0, 512, (b, t))
            out = cm(idx)
            case.loss(out, idx).backward()
            want = ref(idx)
            case.loss(want, idx).backward()
            np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=2e-4, atol=2e-5)
            for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-3, atol=3e-5, err_msg=name)
                p.grad = q.grad = None
            assert dynamo.convert_frame.counters["compiled"] == 1
            assert n[0] == 2
    finally:
        dynamo.reset()


def test_reshape_chain_indexes_affinely_with_symbolic_sizes():
    """(s0*s1, 256) -> (s0, s1, 256) -> (s0*s1, 256): the digits of the split and of the flatten
    join again, so the kernel reads ``256*x0 + x1`` (no per-element division or modulo)."""
    from ember.inductor.sizevars import FloorDiv, ModularIndexing, loop_var, simplify_index, size_symbol
    s0, s1 = size_symbol("s0"), size_symbol("s1")
    x0, x1 = loop_var("x", 0), loop_var("x", 1)
    f = 256 * x0 + x1
    e = x1 + 256 * ModularIndexing(256 * s1 * FloorDiv(f, 256 * s1) + x1 + 256 * ModularIndexing(f, 256, s1),
                                   256, s0 * s1)
    assert simplify_index(e, {x1: (0, 256)}, {x0: s0 * s1, x1: 256}) == f
    # and in generated code: a 3-d pointwise between two matmuls' 2-d views
    def fn(a, w):
        h = P.reshape(P.mm(a, w), [a.shape[0] // 4, 4, 8])
        return P.mm(P.reshape(P.tanh(h), [a.shape[0], 8]), w)

    gm, fakes, env = _symbolic(fn, rand(12, 8), rand(8, 8), dims=[[0], []])
    cf = compile_fx(gm, fakes, dynamic=True)
    assert cf.compiled is not None
    body = cf.compiled.source[cf.compiled.source.index("tanh"):]
    assert "tanhf(" in body or "tanh(" in body
    assert " / " not in body.split("\n")[0]
    for m in (12, 20, 36):
        a, w = rand(m, 8), rand(8, 8)
        assert_same(cf(a, w).numpy(), gm(a, w).numpy(), rtol=1e-5, atol=1e-6)


def test_sort_and_topk_compile_with_symbolic_sizes(monkeypatch):
    """sort and topk (extern calls of their numpy references) have output layouts in the
    caller's symbols: one compilation serves every size. Before, their layouts came from the
    traced metadata (concrete sizes only) and the graph ran eagerly with ``dynamic=True`` --
    and so did median, kthvalue, mode and argsort, which are built on sort."""
    n = _count(monkeypatch)

    def fn(x):
        v, i = P.sort(x, 1, False, True)
        tv, ti = P.topk(x, 2, 1, True, True)
        return P.mul(v, 2.0), i, tv, ti

    gm, fakes, env = _symbolic(fn, rand(5, 7), dims=[[0, 1]])
    cf = compile_fx(gm, fakes, dynamic=True)
    assert cf.compiled is not None
    for m, k in ((5, 7), (9, 4), (2, 3)):
        x = rand(m, k)
        for g, e in zip(cf(x), gm(x)):
            assert_same(g.numpy(), e.numpy())
    assert n[0] == 1 and len(cf.variants) == 1


def test_order_statistics_compile_dynamic_end_to_end(caplog, monkeypatch):
    n = _count(monkeypatch)
    fns = {"median": lambda x: x.median(1).values + 1, "topk": lambda x: x.topk(2, dim=1).values.sum(1),
           "argsort": lambda x: x.argsort(0) + 1}
    with caplog.at_level(logging.WARNING, logger="ember"):
        for name, fn in fns.items():
            ember.dynamo.reset()
            f = ember.compile(fn, dynamic=True)
            for m in (5, 7, 9):
                x = ember.randn(m, m + 1)
                np.testing.assert_array_equal(f(x).numpy(), fn(x).numpy(), err_msg=name)
    assert "running it eagerly" not in caplog.text
    assert n[0] == len(fns)         # one compilation per function serves the three sizes
    ember.dynamo.reset()


def _compiles_dynamic_like_eager(fn, shapes, monkeypatch, rtol=1e-5, atol=1e-6, loss=None):
    """``ember.compile(fn, dynamic=True)`` over ``shapes``: value and input gradient as eager's,
    one symbolic compilation (a failed trace raises: ``debug_dynamic``; no size specialised, so
    no recompilation), and no graph run in the fx Interpreter or eagerly (logged on
    ``ember.inductor``). ``loss``: applied to the compiled function's outputs outside it."""
    from ember.aot import config as aot_config
    monkeypatch.setattr(aot_config, "debug_dynamic", True)
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger = logging.getLogger("ember.inductor")
    logger.addHandler(handler)
    try:
        dynamo.reset()
        cf = ember.compile(fn, dynamic=True)
        for shape in shapes:
            data = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
            res = []
            for f in (fn, cf):
                x = _make(data.copy()).requires_grad_(True)
                out = f(x)
                if loss is not None:     # (outside the compiled function: its gradients are the backward's inputs)
                    out = loss(out)
                out.backward()
                res.append((out.detach().numpy(), x.grad.numpy()))
            for a, b in zip(*res):
                np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)
    finally:
        logger.removeHandler(handler)
    msgs = [r.getMessage() for r in records]
    assert not [m for m in msgs if "Interpreter" in m or "eagerly" in m], msgs
    assert dynamo.convert_frame.counters["compiled"] == 1, dynamo.convert_frame.counters


def test_means_and_variances_over_a_dynamic_dim_keep_it_symbolic(monkeypatch):
    """A mean (or var_mean's mean) divided by float(n) and var's backward scale 2 / (n - 1)
    made the size a Python float: a guard Eq(s0, 6) and one compilation per size. The count
    is now an operand computed in the graph."""
    cases = [lambda x: x.mean(0).pow(2).sum(), lambda x: x.mean(),
             lambda x: x.var(0).sum() + x.std(1).sum(),
             lambda x: sum(t.pow(2).sum() for t in ember.var_mean(x, 0))]
    for fn in cases:
        _compiles_dynamic_like_eager(fn, ((6, 5), (9, 7), (12, 4)), monkeypatch)


def test_slice_by_a_floor_division_of_the_size_compiles_once(monkeypatch):
    """x[: n // 2]'s backward normalised its slice with slice.indices, which makes the sizes
    ints (a guard Eq(s0, 6), a compilation per size). One compilation now, backward included."""
    _compiles_dynamic_like_eager(lambda x: x[: x.shape[0] // 2].pow(2).sum(), ((6, 3), (9, 3), (12, 3)),
                                 monkeypatch)
    _compiles_dynamic_like_eager(lambda x: (x[: x.shape[0] // 2] * 2).sum(), ((6, 3), (9, 3), (12, 3)),
                                 monkeypatch)


def test_sizes_with_floor_divisions_of_the_callers_symbols_compile(monkeypatch):
    """dynamo's ShapeEnv writes a // 2 as sympy's floor(a/2): such a size (a max pool's output,
    its backward's index) printed as C was floor((1.0/2.0)*s1), a double used as an array index,
    and the backward graph did not compile (it ran eagerly). Sizes from the caller are taken
    into inductor's integer FloorDiv/ModularIndexing."""
    def pool(x):
        return ember.nn.functional.max_pool2d(x.exp(), 2).pow(2).sum()
    monkeypatch.setenv("EMBER_FX_GRAPH_CACHE", "0")
    _compiles_dynamic_like_eager(pool, ((1, 6, 8), (1, 10, 12), (1, 4, 6)), monkeypatch)


def test_backward_whose_inputs_hold_a_symbol_only_in_an_affine_size(monkeypatch):
    """A convolution's backward under dynamic=True receives the output gradient, s0 - s3 + 1
    wide, but no tensor s0 wide: s0 is read back from that dimension. Before, the graph ran in
    the fx Interpreter ("uses s0, which no input carries")."""
    w = _make(np.random.default_rng(0).standard_normal((2, 1, 3, 3)).astype(np.float32))

    def conv(x):
        return ember.nn.functional.conv2d(x[None, None], w).pow(2).sum()
    _compiles_dynamic_like_eager(conv, ((6, 8), (10, 12), (7, 9)), monkeypatch, rtol=1e-4, atol=1e-5)


def test_as_strided_of_an_input_with_symbolic_strides_lowers(monkeypatch):
    """x.unfold under dynamic=True is an as_strided of the input, whose eager strides (the FX
    node's meta) are the caller's SymInts: compared with the buffer's sympy strides as SymInt
    objects they never matched, and the graph ran eagerly."""
    # (and its backward's storage positions keep the sizes and strides symbolic: int() of them
    # specialised the sizes, Eq(s0 - 1, 5) ..., one compilation per size)
    _compiles_dynamic_like_eager(lambda x: x.unfold(0, 2, 1).pow(2).sum(), ((6, 8), (10, 12), (7, 9)),
                                 monkeypatch, atol=1e-5)


def test_narrow_backward_compiles_under_dynamic_shapes(monkeypatch):
    """x.narrow(1, 1, 3) under dynamic=True: narrow's own check guards ``4 <= s1``, which then
    decides its slice's ``min(4, s1)`` (the width is 3, not ``Min(4, s1) - 1``), and the
    backward's pad gets the size ``s1 - 4`` as an input, from which s1 is read back. Before,
    the backward ran in the fx Interpreter."""
    _compiles_dynamic_like_eager(lambda x: x.narrow(1, 1, 3).pow(2).sum(), ((6, 8), (10, 12), (7, 9)),
                                 monkeypatch)


def test_a_guarded_relation_is_decided_without_a_new_guard():
    env = ShapeEnv()
    s = env.create_symbol(8, "x.size()[0]")
    assert env._wrap_bool((s >= 4).expr) is not True       # open before the guard
    assert bool(s >= 4) and len(env.guards) == 1
    assert (s >= 4) is True and (s < 4) is False and len(env.guards) == 1


def test_symbol_read_back_from_the_sum_of_two_dimensions(monkeypatch):
    """x.chunk(2) of an odd, dynamic dim: the backward gets the two pieces' gradients,
    floor((s0+1)/2) and s0 - floor((s0+1)/2) wide, neither linear in s0 (it ran in the fx
    Interpreter: "uses s0, which no input carries"); s0 is read back from their sum.
    (An even size is another graph -- chunk guards the piece count -- whose two pieces are
    both floor((s0+1)/2) wide: its backward still runs in the fx Interpreter.)"""
    def fn(x):
        a, b = x.chunk(2, 0)
        return a * 2, b * 3
    _compiles_dynamic_like_eager(fn, ((7, 3), (9, 3), (11, 3)), monkeypatch,
                                 loss=lambda out: out[0].pow(2).sum() + out[1].sum())


def test_strided_input_to_a_graph_compiled_on_fakes_runs_eagerly(monkeypatch, caplog):
    """``compile_fx(gm, fakes, dynamic=True)`` compiles for contiguous inputs (the backend's
    ``compile_fx_symbolic`` copies others first). Called directly with a transposed input, its
    recompile for that layout cannot work (the graph reads sizes with ``sym_size``), so the graph
    runs eagerly with the reason logged. It raised KeyError: the failed variant was stored under
    the static key while the call looked it up under the dynamic one."""
    monkeypatch.setattr(ember.inductor.config, "debug_lowering", False)

    def fn(x, r):
        return (P.mul(P.exp(x), P.broadcast_in_dim(r, list(x.shape), [1])),)

    gm, fakes, _ = _symbolic(fn, rand(5, 7), rand(7), dims=[[0], []])
    cf = compile_fx(gm, fakes, dynamic=True)
    assert cf.compiled is not None
    xt, r = _make(rand(7, 4).numpy().T), rand(7)
    with caplog.at_level(logging.WARNING, logger="ember.inductor"):
        got = cf(xt, r)
    assert_same(got[0].numpy(), gm(xt, r)[0].numpy())
    assert any("running it eagerly" in r.getMessage() for r in caplog.records)
    x = rand(9, 7)                   # contiguous inputs still run the compiled code
    assert_same(cf(x, r)[0].numpy(), gm(x, r)[0].numpy(), rtol=1e-6)
