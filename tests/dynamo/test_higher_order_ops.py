"""ember._higher_order_ops beyond cond/while_loop (test_cond.py): scan, associative_scan, map and
the call-through HOPs. Eagerly: values, shapes, gradients and error messages against torch's
HOPs on random data (pytree inputs, reverse, dims). Under ember.compile: one graph, no break,
values and gradients equal to eager; ember.export of a model using them."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember._higher_order_ops as hop
from ember.utils._pytree import tree_flatten, tree_leaves

from ._util import CountingBackend


def _np(t):
    return np.asarray(t.detach().numpy())


def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", message=".*prototype.*")
    return torch


def _pair(torch, a, grad=False):
    """The same float64 data as an ember tensor and a torch tensor."""
    return ember.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _close(got, want, tol=1e-9):
    gl, wl = tree_leaves(got), tree_leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(_np(g), w.detach().numpy(), rtol=tol, atol=tol)


def _explain(fn, *args):
    r = ember.dynamo.explain(fn)(*args)
    return r.graph_count, r.graph_break_count, [b[1] for b in r.break_reasons]


def test_reachable_names():
    torch = pytest.importorskip("torch")
    from ember._higher_order_ops import cond, while_loop   # noqa: F401 - the old import keeps working
    for name in ("scan", "associative_scan", "map", "invoke_subgraph", "hints_wrapper",
                 "tag_activation_checkpoint", "run_const_graph", "foreach_map", "out_dtype", "print",
                 "flex_attention", "cond", "while_loop"):
        assert callable(getattr(torch._higher_order_ops, name)) and callable(getattr(hop, name)), name
    # torch's submodules: importable by the same paths; ``wrap`` is the module, as in torch
    from ember._higher_order_ops.associative_scan import associative_scan
    from ember._higher_order_ops.map import map as map_
    from ember._higher_order_ops.scan import scan
    from ember._higher_order_ops.wrap import tag_activation_checkpoint, wrap
    assert (scan, associative_scan, map_) == (hop.scan, hop.associative_scan, hop.map)
    assert hop.wrap.wrap is wrap and hop.tag_activation_checkpoint is tag_activation_checkpoint
    assert not callable(hop.wrap) and not callable(torch._higher_order_ops.wrap)


# ---- scan ----------------------------------------------------------------------------------

def test_scan_matches_torch_values_and_grads():
    """torch compiles every scan call (slow): three random cases here, covering dims, reverse and
    pytrees; many shapes against the Python loop below."""
    for n, dim, reverse, seed in ((4, 0, False, 1), (3, -1, True, 2), (1, -2, True, 3)):
        _scan_case_vs_torch(n, dim, reverse, seed)
    _scan_pytree_case_vs_torch()
    torch = _torch()
    from torch._higher_order_ops import scan as tscan
    with pytest.raises(Exception, match="Expected init and carry to have same metadata but found:\npair\\[0\\] "
                                        "differ in 'dtype: "):
        tscan(lambda c, x: (c.double(), x.clone()), torch.zeros(3), torch.randn(4, 3))


def _scan_case_vs_torch(n, dim, reverse, seed):
    torch = _torch()
    from torch._higher_order_ops import scan as tscan
    rng = np.random.default_rng(seed)
    shape = (n, 3) if dim in (0, -2) else (3, n)
    xa, ha = rng.standard_normal(shape), rng.standard_normal(3)

    def body(lib):
        def f(c, x):
            nxt = (c * 0.7 + x).tanh()
            return nxt, (c * x).sin() + 1.0
        return f

    ex, tx = _pair(torch, xa, True)
    eh, th = _pair(torch, ha, True)
    got = hop.scan(body(ember), eh, ex, dim=dim, reverse=reverse)
    want = tscan(body(torch), th, tx, dim=dim, reverse=reverse)
    _close(got, want)
    (got[0].sum() + (got[1] * got[1]).sum()).backward()
    (want[0].sum() + (want[1] * want[1]).sum()).backward()
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_np(eh.grad), th.grad.numpy(), rtol=1e-9, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(), reverse=st.booleans(),
       seed=st.integers(0, 2**16))
def test_scan_matches_python_loop(shape, data, reverse, seed):
    """Many shapes/dims against the loop scan is defined as (cheap; torch is checked above)."""
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    d = dim % len(shape)
    carry_shape = shape[:d] + shape[d + 1:]
    h = rng.standard_normal(carry_shape)
    c, ys = hop.scan(lambda c, t: (c * 0.9 + t * t, c - t), ember.tensor(h), ember.tensor(x), dim=dim,
                     reverse=reverse)
    ref_c, ref_y = h, [None] * shape[d]
    for i in (range(shape[d] - 1, -1, -1) if reverse else range(shape[d])):
        t = np.take(x, i, axis=d)
        ref_c, ref_y[i] = ref_c * 0.9 + t * t, ref_c - t
    np.testing.assert_allclose(_np(c), ref_c, rtol=1e-12)
    np.testing.assert_allclose(_np(ys), np.stack(ref_y, d), rtol=1e-12)


def _scan_pytree_case_vs_torch():
    torch = _torch()
    from torch._higher_order_ops import scan as tscan
    rng = np.random.default_rng(7)
    u, v, h = rng.standard_normal((4, 2)), rng.standard_normal((4, 2)), rng.standard_normal(2)

    def f(c, xs):
        nh = (c["h"] + xs[0]).tanh() * c["s"][0]
        return {"h": nh, "s": (c["s"][0] * 1.0 + 0.1,)}, {"y": nh * xs[1], "z": (xs[0].sum() + c["h"].sum(),)}

    got = hop.scan(f, {"h": ember.tensor(h), "s": (ember.tensor(1.5, dtype=ember.float64),)},
                   (ember.tensor(u), ember.tensor(v)), reverse=True)
    want = tscan(f, {"h": torch.tensor(h), "s": (torch.tensor(1.5, dtype=torch.float64),)},
                 (torch.tensor(u), torch.tensor(v)), reverse=True)
    assert isinstance(got[0], dict) and isinstance(got[1]["z"], tuple)
    _close(got, want)


def test_scan_argument_errors_as_torch():
    torch = _torch()
    from torch._higher_order_ops import scan as tscan
    ok = lambda c, x: (c + x, (c * x).clone())          # noqa: E731
    x, tx = ember.randn(4, 3), torch.randn(4, 3)
    cases = [  # (ember args, torch args, kwargs, error type, message)
        ((ok, 3, x), (ok, 3, tx), {}, RuntimeError, "All init leaves must be a Tensor but got 3"),
        ((ok, ember.zeros(3), ember.randn(0, 3)), (ok, torch.zeros(3), torch.randn(0, 3)), {}, RuntimeError,
         "All xs leaves must at least have 'dim' number of dimensions and scan dimension > 0"),
        ((ok, ember.zeros(3), x), (ok, torch.zeros(3), tx), {"dim": 2}, IndexError,
         r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
        ((ok, ember.zeros(3), x), (ok, torch.zeros(3), tx), {"dim": 1.0}, RuntimeError,
         "Dim must be an int, but got <class 'float'>"),
        ((ok, ember.zeros(3), x), (ok, torch.zeros(3), tx), {"reverse": 1}, RuntimeError,
         "Reverse must be a bool, but got <class 'int'>"),
        ((ok, (), x), (ok, (), tx), {}, RuntimeError, r"scan\(\) operator requires init leaves."),
        ((3, ember.zeros(3), x), (3, torch.zeros(3), tx), {}, RuntimeError, "Combine_fn must be a callable"),
    ]
    for eargs, targs, kw, typ, msg in cases:
        with pytest.raises(typ, match=msg):
            hop.scan(*eargs, **kw)
        with pytest.raises(typ, match=msg):
            tscan(*targs, **kw)
    # carry metadata: torch raises (from its compiled trace) with the same first line
    for bad, why in ((lambda c, x: (c.sum(), x.clone()), "shape"), (lambda c, x: (c.double(), x.clone()), "dtype")):
        with pytest.raises(RuntimeError, match=f"Expected init and carry to have same metadata but found:\npair\\[0\\] "
                                               f"differ in '{why}: "):
            hop.scan(bad, ember.zeros(3), x)
    # (torch's own message for this case is checked in test_scan_matches_torch_values_and_grads)
    with pytest.raises(RuntimeError, match=r"combine_fn must return a tuple \(next_carry, y\)"):
        hop.scan(lambda c, x: c + 1, ember.zeros(3), x)
    # no xs leaves: init and [] back, as torch
    init = ember.zeros(2)
    c, ys = hop.scan(ok, init, [])
    assert c is init and ys == []


def test_input_mutation_in_body_raises_as_torch():
    x, h = ember.randn(4, 3), ember.zeros(3)
    keep = _np(x).copy()

    def mutates_slice(c, t):
        t.add_(1)
        return c + t, c * t
    with pytest.raises(RuntimeError, match="mutated its input.*do not support input mutation"):
        hop.scan(mutates_slice, h, x)
    with pytest.raises(RuntimeError, match="do not support input mutation"):
        hop.scan(lambda c, t: (c.mul_(2), c * t), h, x)
    with pytest.raises(RuntimeError, match="do not support input mutation"):
        hop.map(lambda t: t.add_(1), x)
    with pytest.raises(RuntimeError, match="do not support input mutation"):
        hop.associative_scan(lambda p, q: p.add_(q), x, 0, combine_mode="generic")
    np.testing.assert_array_equal(_np(x)[1:], keep[1:])      # only the first step ran

    def compiled(x, h):        # compiled: the trace sees the mutation and the call runs eagerly
        return hop.scan(mutates_slice, h, x)
    x = ember.randn(4, 3)
    keep = _np(x).copy()
    with pytest.raises(RuntimeError, match="do not support input mutation"):
        ember.compile(compiled, backend="aot_eager")(x, h)
    np.testing.assert_array_equal(_np(x)[1:], keep[1:])


# ---- associative_scan ----------------------------------------------------------------------

@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 9), dim=st.integers(0, 2), reverse=st.booleans(), seed=st.integers(0, 2**16))
def test_associative_scan_both_modes_match_torch(n, dim, reverse, seed):
    torch = _torch()
    from torch._higher_order_ops import associative_scan as tas
    rng = np.random.default_rng(seed)
    shape = [2, 3, 2]
    shape[dim] = n
    a, b = rng.uniform(0.5, 1.5, shape), rng.standard_normal(shape)

    def linrec(p, q):       # (a1, b1) then (a2, b2): x -> a2 (a1 x + b1) + b2, associative
        return p[0] * q[0], q[0] * p[1] + q[1]

    (ea, ta), (eb, tb) = _pair(torch, a, True), _pair(torch, b, True)
    want = tas(linrec, (ta, tb), dim, reverse=reverse, combine_mode="generic")
    got = hop.associative_scan(linrec, (ea, eb), dim, reverse=reverse, combine_mode="generic")
    _close(got, want, 1e-9)
    # the pointwise (blocked, CUDA-only) algorithm, run directly on CPU data
    from ember._higher_order_ops._scan import _blocked_scan
    leaves, spec = tree_flatten((ember.tensor(a), ember.tensor(b)))
    if reverse:
        leaves = [t.flip([dim]) for t in leaves]
    blocked = _blocked_scan(linrec, leaves, spec, dim, n)
    if reverse:
        blocked = [t.flip([dim]) for t in blocked]
    _close(tuple(blocked), want, 1e-9)
    got[1].sum().backward()
    want[1].sum().backward()
    # n == 1: the output is b itself and a gets no gradient (None in both, or zeros in torch)
    ga = _np(ea.grad) if ea.grad is not None else np.zeros(shape)
    np.testing.assert_allclose(ga, ta.grad.numpy() if ta.grad is not None else np.zeros(shape), atol=1e-9)
    np.testing.assert_allclose(_np(eb.grad), tb.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_associative_scan_generic_body_with_matmul_matches_torch():
    torch = _torch()
    from torch._higher_order_ops import associative_scan as tas
    m = np.random.default_rng(3).standard_normal((5, 2, 2)) * 0.7
    got = hop.associative_scan(lambda p, q: p @ q, ember.tensor(m), 0, reverse=True, combine_mode="generic")
    want = tas(lambda p, q: p @ q, torch.tensor(m), 0, reverse=True, combine_mode="generic")
    _close(got, want)


def test_associative_scan_argument_errors_as_torch():
    torch = _torch()
    from torch._higher_order_ops import associative_scan as tas
    add = lambda p, q: p + q         # noqa: E731
    x, tx = ember.randn(3, 2), torch.randn(3, 2)
    cases = [((3, x, 0), (3, tx, 0), {}, ValueError, "Combine_fn must be a callable"),
             ((add, x, 0.5), (add, tx, 0.5), {}, ValueError, "Dim must be an int"),
             ((add, x, 0), (add, tx, 0), {"reverse": 0}, RuntimeError, "Reverse must be a bool"),
             ((add, x, 0), (add, tx, 0), {"combine_mode": "x"}, ValueError,
              "Combine_mode must either 'pointwise' or 'generic', but got x"),
             ((add, [x, 3], 0), (add, [tx, 3], 0), {"combine_mode": "generic"}, ValueError,
              "xs leaves must be a Tensor"),
             ((add, ember.randn(0, 2), 0), (add, torch.randn(0, 2), 0), {"combine_mode": "generic"}, ValueError,
              "scan dimension > 0"),
             ((add, x, 0), (add, tx, 0), {}, ValueError,
              "For combine_mode='pointwise', all input tensors need to be on CUDA or XPU")]
    for eargs, targs, kw, typ, msg in cases:
        with pytest.raises(typ, match=msg):
            hop.associative_scan(*eargs, **kw)
        with pytest.raises(typ, match=msg):
            tas(*targs, **kw)
    with pytest.raises(ValueError, match="Expected at least 1 xs leaf"):   # torch: an IndexError
        hop.associative_scan(add, [], 0, combine_mode="generic")
    with pytest.raises(RuntimeError, match="must match its input in shape and dtype"):
        hop.associative_scan(lambda p, q: (p + q).sum(), x, 0, combine_mode="generic")


# ---- map -----------------------------------------------------------------------------------

@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_map_matches_torch_values_and_grads(n, seed):
    torch = _torch()
    from torch._higher_order_ops import map as tmap
    rng = np.random.default_rng(seed)
    xa, ya, wa = rng.standard_normal((n, 3)), rng.standard_normal((n, 2)), rng.standard_normal(3)

    def f(xs, w):
        return {"a": (xs["x"] * w).sin(), "b": (xs["y"].sum() * w.sum(),)}

    (ex, tx), (ew, tw) = _pair(torch, xa, True), _pair(torch, wa, True)
    got = hop.map(f, {"x": ex, "y": ember.tensor(ya)}, ew)
    want = tmap(f, {"x": tx, "y": torch.tensor(ya)}, tw)
    _close(got, want)
    (got["a"].sum() + got["b"][0].sum()).backward()
    (want["a"].sum() + want["b"][0].sum()).backward()
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_np(ew.grad), tw.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_map_errors_as_torch():
    torch = _torch()
    from torch._higher_order_ops import map as tmap
    with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs cannot be 0."):
        hop.map(lambda t: t, ember.randn(0, 2))
    with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs cannot be 0."):
        tmap(lambda t: t, torch.randn(0, 2))
    with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs must be consistent"):
        hop.map(lambda t: t[0], [ember.randn(3), ember.randn(2)])
    with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs must be consistent"):
        tmap(lambda t: t[0], [torch.randn(3), torch.randn(2)])
    with pytest.raises(RuntimeError, match="Mapped xs can only consist of tensors"):
        hop.map(lambda t: t, [ember.randn(3), 2])


# ---- call-through HOPs ---------------------------------------------------------------------

def test_call_through_hops_match_torch():
    torch = _torch()
    th = torch._higher_order_ops
    a = np.random.default_rng(5).standard_normal((3, 4))
    (ex, tx) = _pair(torch, a)
    _close(hop.wrap.wrap(lambda t, s: t * s, ex, s=2.0), th.wrap.wrap(lambda t, s: t * s, tx, s=2.0))
    _close(hop.hints_wrapper(lambda t: t.cos(), (ex,), {}, {"k": 1}),
           th.hints_wrapper(lambda t: t.cos(), (tx,), {}, {"k": 1}))
    _close(hop.invoke_subgraph(lambda t, u: t @ u.T, "sub", ex, ex),
           torch.compiler.nested_compile_region(lambda t, u: t @ u.T)(tx, tx))
    _close(hop.foreach_map(lambda p, q, r: p * q + r, [ex, ex * 2], [ex, ex], 1.5),
           th.foreach_map(lambda p, q, r: p * q + r, [tx, tx * 2], [tx, tx], 1.5))
    for lib, t in ((hop, ex), (th, tx)):
        for bad, msg in ((((t,), {"x": t}, {}), "kwargs except for hints are not supported"),
                         (((t,), {}, {"k": [1]}), "hints must be a dict containing int, float, bool or str value"),
                         (((t,), {}, {1: 1}), "hints key must be a str, got 1."),
                         (((t, "s"), {}, {}), "args must be a tuple of tensors, ints, floats, or bools")):
            with pytest.raises(RuntimeError, match=msg):
                lib.hints_wrapper(lambda *a: a[0], *bad)
    with pytest.raises(AssertionError, match="identifier must be None or a string"):
        hop.invoke_subgraph(lambda t: t, 3, ex)


def test_run_const_graph_and_foreach_map_without_lists():
    gm = ember.fx.symbolic_trace(lambda a, b: a * b + 1)
    x, y = ember.randn(3), ember.randn(3)
    np.testing.assert_allclose(_np(hop.run_const_graph(gm, (x, y))), _np(x * y + 1), rtol=1e-6)
    np.testing.assert_allclose(_np(hop.foreach_map(lambda a, b: a - b, x, y)), _np(x - y))
    with pytest.raises(ValueError, match="list operands must have the same length"):
        hop.foreach_map(lambda a, b: a - b, [x, y], [x])


def test_tag_activation_checkpoint_gradients():
    a = np.random.default_rng(2).standard_normal(5)
    x1, x2 = ember.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    hop.tag_activation_checkpoint(lambda t: t.sin().exp(), x1).sum().backward()
    x2.sin().exp().sum().backward()
    np.testing.assert_allclose(_np(x1.grad), _np(x2.grad), rtol=1e-12)


def test_out_dtype_matches_torch():
    torch = _torch()
    from ember.ops import aten
    from torch._higher_order_ops import out_dtype as tod
    rng = np.random.default_rng(11)
    a, b = rng.integers(-128, 127, (3, 5), dtype=np.int8), rng.integers(-128, 127, (5, 2), dtype=np.int8)
    got = hop.out_dtype(aten.mm.default, ember.int32, ember.tensor(a), ember.tensor(b))
    want = tod(torch.ops.aten.mm.default, torch.int32, torch.tensor(a), torch.tensor(b))
    assert got.dtype == ember.int32
    np.testing.assert_array_equal(_np(got), want.numpy())     # accumulates in int32: no int8 wrap-around
    with pytest.raises(ValueError, match="out_dtype's first argument must be an OpOverload"):
        hop.out_dtype(ember.mm, ember.int32, ember.tensor(a), ember.tensor(b))
    with pytest.raises(ValueError, match="out_dtype's first argument must be an OpOverload"):
        tod(torch.mm, torch.int32, torch.tensor(a), torch.tensor(b))
    with pytest.raises(ValueError, match="out_dtype only allows the following operators"):
        hop.out_dtype(aten.add.default, ember.int32, ember.tensor(a), ember.tensor(a))


def test_print_formats_like_torch(capsys):
    torch = _torch()
    hop.print("v={} k={k}", 3, k="z")
    torch._higher_order_ops.print("v={} k={k}", 3, k="z")
    out = capsys.readouterr().out.splitlines()
    assert out == ["v=3 k=z", "v=3 k=z"]
    with pytest.raises(AssertionError, match="format_str must be a string"):
        hop.print(3)


def test_flex_attention_hop_matches_torch():
    torch = _torch()
    from torch._higher_order_ops import flex_attention as thop
    from torch.nn.attention.flex_attention import create_block_mask as tcbm
    from ember.nn.attention.flex_attention import create_block_mask as ecbm
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 2, 128, 8)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal(128).astype(np.float32)

    def causal(b, h, i, j):
        return i >= j

    def mod(s, b, h, i, j, bb):
        return s + bb[j]
    want = thop(torch.tensor(q), torch.tensor(k), torch.tensor(v), mod, tcbm(causal, 1, 2, 128, 128, device="cpu")
                .as_tuple(), 0.3, {}, (torch.tensor(bias),), ())
    got = hop.flex_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v), mod,
                             ecbm(causal, 1, 2, 128, 128, device="cpu").as_tuple(), 0.3, {}, (ember.tensor(bias),), ())
    assert len(got) == 3
    for g, w in zip(got, want):       # out, lse and max scores (base-2 logs, as torch's HOP)
        np.testing.assert_allclose(_np(g), w.numpy(), rtol=1e-5, atol=1e-5)


# ---- under ember.compile -------------------------------------------------------------------

def _scan_model(x, h):
    c, ys = hop.scan(lambda c, t: ({"h": (c["h"] * 0.5 + t).tanh()}, {"y": (c["h"] * t).sin()}), {"h": h}, x,
                     dim=1, reverse=True)
    return c["h"], ys["y"]


def _ascan_model(a, b):      # the pointwise mode's blocked algorithm (CUDA-only through the public API)
    from ember._higher_order_ops._scan import _blocked_scan
    return _blocked_scan(lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1]), [a, b], _PAIR_SPEC, 1, a.shape[1])[1]


_PAIR_SPEC = tree_flatten((0, 0))[1]


def _ascan_generic_model(a, b):
    return hop.associative_scan(lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1]), (a, b), 0, reverse=True,
                                combine_mode="generic")[1]


def _map_model(a, b):
    return hop.map(lambda t, w: (t * w).cumsum(0), a, b[0])


def _wrappers_model(a, b):
    from ember.ops import aten
    return (hop.wrap.wrap(lambda t: t.sin(), a) + hop.invoke_subgraph(lambda t, u: t * u, None, a, b)
            + hop.hints_wrapper(lambda t: t.cos(), (b,), {}, {"h": 1})
            + hop.tag_activation_checkpoint(lambda t: t.exp(), a)
            + hop.foreach_map(lambda t, u: t - u, [a], [b])[0]
            + hop.out_dtype(aten.mm.default, ember.float64, a, b.T)[:, :1].to(ember.float32))


@pytest.mark.parametrize("model, backend", [(m, "aot_eager") for m in (_scan_model, _ascan_model, _ascan_generic_model,
                                                                         _map_model, _wrappers_model)]
                         + [(_scan_model, "inductor")])
def test_compiled_equals_eager_one_graph(model, backend):
    rng = np.random.default_rng(abs(hash(model.__name__)) % 2**16)
    a, b = rng.uniform(0.5, 1.5, (4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    args = (a, b) if model is not _scan_model else (b, a[:, 0])
    graphs, breaks, reasons = _explain(model, *[ember.tensor(t) for t in args])
    assert (graphs, breaks) == (1, 0), reasons
    e_in = [ember.tensor(t, requires_grad=True) for t in args]
    c_in = [ember.tensor(t, requires_grad=True) for t in args]
    want = model(*e_in)
    got = ember.compile(model, backend=backend)(*c_in)
    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        np.testing.assert_allclose(_np(g), _np(w), rtol=2e-5, atol=2e-5)
    sum((t * t).sum() for t in tree_leaves(want)).backward()
    sum((t * t).sum() for t in tree_leaves(got)).backward()
    for g, w in zip(c_in, e_in):
        np.testing.assert_allclose(_np(g.grad), _np(w.grad), rtol=1e-4, atol=1e-4)


def test_compiled_scan_recompiles_per_length_with_dynamic_shapes():
    be = CountingBackend()

    def f(x):
        return hop.scan(lambda c, t: (c + t, c * t), ember.zeros(x.shape[1]), x)[1]
    cf = ember.compile(f, backend=be, dynamic=True)
    for n in (3, 5, 3):
        x = ember.randn(n, 2)
        np.testing.assert_allclose(_np(cf(x)), _np(f(x)), rtol=1e-6, atol=1e-6)
    assert be.frame_count == 2       # a guard on the scanned length: 3 and 5, then 3 is cached


def test_untraceable_body_falls_back_with_reason_naming_the_hop():
    def f(x):
        return hop.map(lambda t: t * float(t.sum().item() > 0), x)     # .item(): data-dependent
    x = ember.randn(3, 2)
    graphs, breaks, reasons = _explain(f, x)
    assert breaks >= 1 and any("ember._higher_order_ops.map" in r for r in reasons), reasons
    np.testing.assert_allclose(_np(ember.compile(f, backend="aot_eager")(x)), _np(f(x)), rtol=1e-6)


def test_long_loop_breaks_instead_of_unrolling_but_export_unrolls(monkeypatch):
    import ember._higher_order_ops._scan as impl
    monkeypatch.setattr(impl, "MAX_UNROLLED_STEPS", 4)

    def f(x, h):
        c, y = hop.scan(lambda c, t: ((c * 0.5 + t).tanh(), c * t), h, x)
        return c * 2, y
    x, h = ember.randn(6, 3), ember.randn(3)
    graphs, breaks, reasons = _explain(f, x, h)
    assert breaks == 1 and "6 steps exceed MAX_UNROLLED_STEPS=4" in reasons[0], reasons
    for g, w in zip(ember.compile(f, backend="aot_eager")(x, h), f(x, h)):
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-6)

    class M(ember.nn.Module):
        def forward(self, x):
            return hop.map(lambda t: t * 2, x)
    ep = ember.export.export(M(), (x,))        # export needs one graph: unrolled whatever the length
    np.testing.assert_allclose(_np(ep.module()(x)), _np(x) * 2, rtol=1e-6)


def test_flex_attention_hop_compiles_in_one_graph():
    from ember.nn.attention.flex_attention import create_block_mask
    bm = create_block_mask(lambda b, h, i, j: i >= j, 1, 1, 128, 128, device="cpu")

    def f(q, k, v):
        return hop.flex_attention(q, k, v, lambda s, b, h, i, j: s * 0.5, bm.as_tuple(), 0.25, {})[0]
    q, k, v = (ember.randn(1, 1, 128, 4) for _ in range(3))
    assert _explain(f, q, k, v)[:2] == (1, 0)
    np.testing.assert_allclose(_np(ember.compile(f, backend="aot_eager")(q, k, v)), _np(f(q, k, v)),
                               rtol=1e-5, atol=1e-5)


def test_export_of_model_using_scan_map_associative_scan():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(3, 3)

        def forward(self, x):
            c, ys = hop.scan(lambda c, t: (self.lin(c).tanh() + t, c.clone()), ember.zeros(3), x)
            return ys.sum(0) + hop.map(lambda t: t * 2, x).sum(0) + \
                hop.associative_scan(lambda p, q: p + q, x, 0, combine_mode="generic")[-1] + c
    m = M()
    x = ember.randn(4, 3)
    ep = ember.export.export(m, (x,))
    x2 = ember.randn(4, 3)
    np.testing.assert_allclose(_np(ep.module()(x2)), _np(m(x2)), rtol=1e-5, atol=1e-5)


def test_export_over_a_dynamic_scanned_dim_raises_naming_the_op():
    class M(ember.nn.Module):
        def forward(self, x):
            return hop.scan(lambda c, t: (c + t, c * t), ember.zeros(x.shape[1]), x)[1]
    with pytest.raises(Exception, match="ember._higher_order_ops.scan: cannot export a scan over a dynamic dimension"):
        ember.export.export(M(), (ember.randn(4, 3),), dynamic_shapes={"x": {0: ember.export.Dim("n")}})
