"""make_fx / export graphs as torch 2.13 records them: node names (placeholders ``x_1``, op calls
after their overload packet: ``max_1``), factories recorded whole (``zeros_like``, ``arange``,
``new_full`` ... with torch's ``device=``/``pin_memory=`` arguments), ``where`` with a number as
``scalar_tensor`` + ``where.self``, ``reshape`` keeping ``-1``, ``var``'s explicit correction,
``contiguous``'s memory format object; the generated code compared line by line with torch's,
and every graph run against eager ember."""
import operator
import runpy

import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx


def _body(gm, prefix):
    """The generated code's statements, torch's module prefix spelled as ember's (torch's code
    for nested inputs flattens them with pytree first, ember's graph takes the flat tensors:
    that line and the ``def`` are left out)."""
    lines = gm.code.replace(prefix, "ember.").strip().splitlines()[1:]
    return "\n".join(ln for ln in lines if "tree_flatten_spec" not in ln).replace(
        "return pytree.tree_unflatten([sub], self._out_spec)", "return sub")


# name -> (function of the framework module, input kinds: a float (3, 4) or "i" an int (3, 4))
CASES = {
    "names_two_inputs": (lambda T: lambda x, y: x + y, "f", "f"),
    "names_max_sum": (lambda T: lambda x: T.max(x, 1)[0] + T.max(x, 0)[0].sum(), "f"),
    "names_nested": (lambda T: lambda xs, y: xs[0] * xs[1] - y, ["f", "f"], "f"),
    "zeros_like": (lambda T: lambda x: T.zeros_like(x) + x, "f"),
    "ones_like_dtype": (lambda T: lambda x: T.ones_like(x, dtype=T.float64) * x, "f"),
    "ones": (lambda T: lambda x: T.ones(3, 4) + x, "f"),
    "zeros_tuple": (lambda T: lambda x: T.zeros((3, 4), dtype=T.float64) + x, "f"),
    "full": (lambda T: lambda x: T.full((3, 4), 2.5) * x, "f"),
    "full_like": (lambda T: lambda x: T.full_like(x, 7) - x, "f"),
    "arange": (lambda T: lambda x: T.arange(4) + x, "f"),
    "arange_start": (lambda T: lambda x: T.arange(1, 5) * x, "f"),
    "arange_step": (lambda T: lambda x: T.arange(0.0, 1.0, 0.25) + x, "f"),
    "new_zeros": (lambda T: lambda x: x.new_zeros(3, 4) + x, "f"),
    "new_full": (lambda T: lambda x: x.new_full((3, 4), 3.0) + x, "f"),
    "eye": (lambda T: lambda x: T.eye(3, 4) + x, "f"),
    "linspace": (lambda T: lambda x: T.linspace(0, 1, 4) * x, "f"),
    "scalar_tensor": (lambda T: lambda x: T.scalar_tensor(2.0) + x, "f"),
    "where_other": (lambda T: lambda x: T.where(x > 0, x, 0.0), "f"),
    "where_self": (lambda T: lambda x: T.where(x > 0, 1.0, x), "f"),
    "where_both": (lambda T: lambda x: T.where(x > 0, 1.0, -1.0), "f"),
    "where_int_to_float": (lambda T: lambda i: T.where(i > 1, i, 0.5), "i"),
    "where_int": (lambda T: lambda i: T.where(i > 1, i, 7), "i"),
    "reshape_minus_one": (lambda T: lambda x: x.reshape(-1), "f"),
    "reshape_infer": (lambda T: lambda x: x.reshape(2, -1).sum(), "f"),
    "reshape_strided_view": (lambda T: lambda x: x[:, :2].reshape(3, 2, -1), "f"),
    "reshape_copy": (lambda T: lambda x: x.t().reshape(-1), "f"),
    "contiguous": (lambda T: lambda x: x.t().contiguous(), "f"),
    "var_dim": (lambda T: lambda x: x.var(1), "f"),
    "var_keepdim": (lambda T: lambda x: T.var(x, 1, keepdim=True), "f"),
    "var_all": (lambda T: lambda x: x.var(), "f"),
    "std_dim": (lambda T: lambda x: x.std(0), "f"),
    "var_unbiased_false": (lambda T: lambda x: x.var(1, unbiased=False), "f"),
    "var_mean_dim": (lambda T: lambda x: T.var_mean(x, 1)[0], "f"),
    "detach": (lambda T: lambda x: x.detach().detach() * 2, "f"),
    "detach_function": (lambda T: lambda x: T.detach(x) + x, "f"),
}


def _make(kind, rng, T):
    if isinstance(kind, list):
        return [_make(k, rng, T) for k in kind]
    if kind == "i":
        return T.from_numpy(rng.integers(0, 4, (3, 4)).astype(np.int64))
    return T.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))


def _as_np(v):
    return np.asarray(v.numpy(), dtype=np.float64)


def test_make_fx_code_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx as tmake
    rng = np.random.default_rng(34)
    diffs = {}
    for name, (fn, *kinds) in CASES.items():
        seed = int(rng.integers(1 << 30))
        targs = [_make(k, np.random.default_rng(seed), torch) for k in kinds]
        eargs = [_make(k, np.random.default_rng(seed), ember) for k in kinds]
        want, got = _body(tmake(fn(torch))(*targs), "torch."), None
        gm = make_fx(fn(ember))(*eargs)
        got = _body(gm, "ember.")
        if want != got:
            diffs[name] = (want, got)
        # the graph runs the function's values on fresh inputs
        fresh = [_make(k, np.random.default_rng(seed + 1), ember) for k in kinds]
        flat = [t for a in fresh for t in (a if isinstance(a, list) else [a])]
        r, e = gm(*flat), fn(ember)(*fresh)
        assert r.dtype == e.dtype, name
        np.testing.assert_allclose(_as_np(r), _as_np(e), rtol=1e-6, err_msg=name)
    assert not diffs, "\n\n".join(f"{k}:\n--- torch\n{w}\n--- ember\n{g}" for k, (w, g) in diffs.items())


@pytest.mark.parametrize("mode", ["fake", "symbolic"])
def test_factories_recorded_whole_in_fake_modes_run_on_new_inputs(mode):
    rng = np.random.default_rng(7)
    fns = [lambda x: ember.zeros_like(x) + x, lambda x: ember.ones(x.shape) * x, lambda x: ember.arange(4) + x,
           lambda x: x.new_full((2,), 3.0).sum() + x, lambda x: ember.where(x > 0, x, 0.0)]
    x = ember.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    for f in fns:
        gm = make_fx(f, tracing_mode=mode)(x)
        names = {n.target.__name__ for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem
                 and hasattr(n.target, "overloadpacket")}
        assert "full.default" not in names or f is fns[3] is None
        y = ember.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
        np.testing.assert_allclose(gm(y).numpy(), f(y).numpy(), rtol=1e-6)
    gm = make_fx(fns[1], tracing_mode="symbolic")(x) if mode == "symbolic" else None
    if gm is not None:
        # the size of ones() is computed from the input in the graph, not baked
        ones = next(n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__name__", "") ==
                    "ones.default")
        assert all(hasattr(s, "op") for s in ones.args[0])
        y = ember.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
        np.testing.assert_allclose(gm(y).numpy(), y.numpy(), rtol=1e-6)


def test_factory_targets_are_overloads_with_schema_and_pickle():
    import pickle
    x = ember.randn(3, 4)
    gm = make_fx(lambda x: ember.arange(1, 5) + ember.zeros_like(x))(x)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert [str(t) for t in targets] == ["aten.arange.start", "aten.zeros_like.default", "aten.add.Tensor"]
    assert targets[0] is ember.ops.aten.arange.start and targets[1] is ember.ops.aten.zeros_like.default
    assert targets[0]._schema.arguments[0].name == "start" and targets[1].name() == "aten::zeros_like"
    assert pickle.loads(pickle.dumps(targets[0])) is targets[0]
    # called with torch's arguments, the overload runs ember's function
    r = ember.ops.aten.zeros_like.default(x, pin_memory=False)
    assert r.shape == x.shape and not r.any()
    np.testing.assert_array_equal(ember.ops.aten.arange.start(1, 5, device=ember.device("cpu"), pin_memory=False)
                                  .numpy(), np.arange(1, 5))
    # a call torch records otherwise (requires_grad, out=) is traced through as before
    gm = make_fx(lambda x: ember.zeros(3, 4, requires_grad=True) + x)(x)
    assert "zeros.default" not in gm.code


def test_export_node_names_match_torch():
    torch = pytest.importorskip("torch")

    def build(T):
        class N(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("b", T.ones(3))

            def forward(self, x):
                y = x.relu() + self.b
                return y.sum(1), y.max(1)[0], T.max(y, 0)[0], T.min(y, 1).values
        return N()

    xa = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    tep = torch.export.export(build(torch), (torch.from_numpy(xa),))
    eep = ember.export.export(build(ember), (ember.from_numpy(xa),))
    names = [n.name for n in eep.graph.nodes]
    assert names == [n.name for n in tep.graph.nodes]
    assert "max_1" in names and "max_2" in names and "min_1" in names and "sum_1" in names
    # the signature follows the renamed nodes
    outs = [s.arg.name for s in eep.graph_signature.output_specs]
    assert outs == [s.arg.name for s in tep.graph_signature.output_specs]
    x = ember.from_numpy(xa)
    for w, g in zip(build(ember)(x), eep.module()(x)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_user_module_named_like_ember_internals(tmp_path):
    # make_fx tells ember's own callers (which keep binding targets) by module name *and* file:
    # user code running under an ``ember.*`` module name still gets the aten graph
    src = tmp_path / "user_model.py"
    src.write_text("import ember\n"
                   "from ember.fx.experimental.proxy_tensor import make_fx\n"
                   "gm = make_fx(lambda x: (x * 2).sum(1))(ember.randn(3, 4))\n")
    for run_name in ("ember.models", "ember.fx.user_passes", "__main__"):
        gm = runpy.run_path(str(src), run_name=run_name)["gm"]
        targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        assert targets == [ember.ops.aten.mul.Tensor, ember.ops.aten.sum.dim_IntList], run_name
        assert [n.name for n in gm.graph.nodes][0] == "x_1"
    # ember's own pipelines still trace with bindings
    from ember.prims.table import decompose
    gm = decompose(lambda x: (x * 2).sum(1))(ember.randn(3, 4))
    assert all(getattr(n.target, "_ember_op", None) is not None for n in gm.graph.nodes if n.op == "call_function")


def test_device_in_generated_code_is_torchs_spelling():
    x = ember.randn(2, 2)
    gm = make_fx(lambda x: ember.ones(2, 2) + x)(x)
    assert "device = device(type='cpu')" in gm.code
    assert gm.code.count("_device_constant") == 0
    np.testing.assert_allclose(gm(x).numpy(), (x + 1).numpy())


def test_export_keeps_linear_as_torch_does():
    torch = pytest.importorskip("torch")

    def build(T):
        class N(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = T.nn.Linear(4, 5)
                self.fc2 = T.nn.Linear(5, 3, bias=False)

            def forward(self, x):
                return self.fc2(self.fc1(x).relu()) * 2
        return N()

    rng = np.random.default_rng(11)
    xa = rng.standard_normal((2, 4)).astype(np.float32)
    tm, em = build(torch), build(ember)
    for (k, tp), (_, ep_) in zip(tm.named_parameters(), em.named_parameters()):
        ep_.data.copy_(ember.from_numpy(tp.detach().numpy().copy()))
    tep = torch.export.export(tm, (torch.from_numpy(xa),))
    eep = ember.export.export(em, (ember.from_numpy(xa),))
    want = str(tep.graph).replace("torch.", "ember.")
    assert str(eep.graph) == want
    x = ember.from_numpy(rng.standard_normal((2, 4)).astype(np.float32))
    np.testing.assert_allclose(eep.module()(x).detach().numpy(), em(x).detach().numpy(), rtol=1e-5)
    # run_decompositions lowers it (t + addmm, as torch's core IR)
    d = eep.run_decompositions()
    assert not any(getattr(n.target, "__name__", "") == "linear.default" for n in d.graph.nodes)
    np.testing.assert_allclose(d.module()(x).detach().numpy(), em(x).detach().numpy(), rtol=1e-5)


def test_structseq_results_are_plain_tuples_as_torch():
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx as tmake
    xa = np.random.default_rng(12).standard_normal((3, 4)).astype(np.float32)
    cases = [lambda T: lambda x: T.max(x, 1), lambda T: lambda x: [T.min(x, 0)], lambda T: lambda x: T.sort(x, 1)]
    for case in cases:
        want = tmake(case(torch))(torch.from_numpy(xa)).code.replace("torch.", "ember.")
        gm = make_fx(case(ember))(ember.from_numpy(xa))
        assert gm.code == want
        y = ember.randn(3, 4)
        got, ref = gm(y), case(ember)(y)
        got, ref = (got[0], ref[0]) if isinstance(got, list) else (got, ref)
        assert type(got) is tuple
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.numpy(), r.numpy())
