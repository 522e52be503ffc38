"""aten OpOverloads as the node targets of the graphs users see (make_fx, ember.export): the
overload torch picks and its arguments in torch's form, compared with torch's own graphs; every
consumer of such a graph (running it, run_decompositions, unflatten, save/load, onnx, compile,
reinplace) still works; ember's internal make_fx users keep their bindings."""
import operator
import os

import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.ops import aten
from ember.ops._aten_convert import to_aten, to_binding


def _canon(gm, mod_prefix):
    """(overload name, args, kwargs) of each call, nodes by position (placeholder names differ:
    torch's make_fx calls them x_1)."""
    idx = {n: f"%{i}" for i, n in enumerate(gm.graph.nodes)}

    def r(a):
        if isinstance(a, (list, tuple)):
            return type(a)(r(x) for x in a)
        if isinstance(a, dict):
            return {k: r(v) for k, v in a.items()}
        if hasattr(a, "op") and a in idx:
            return idx[a]
        return a
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        t = n.target
        name = "getitem" if t is operator.getitem else t.__name__
        out.append((name, str(r(n.args)).replace(mod_prefix, ""), str(r(n.kwargs)).replace(mod_prefix, "")))
    return out


A, B, M, I = (3, 4), (3, 4), (4, 5), "i"

# name -> (function of the framework module, input kinds)
CASES = {
    "mul_add_sum": (lambda T: lambda x: (x * 2 + 1).sum(0), A),
    "sum": (lambda T: lambda x: x.sum(), A),
    "sum_keepdim": (lambda T: lambda x: x.sum(1, keepdim=True), A),
    "sum_dtype": (lambda T: lambda x: x.sum(dtype=T.float64), A),
    "mean": (lambda T: lambda x: x.mean(), A),
    "mean_dim": (lambda T: lambda x: x.mean(-1), A),
    "add": (lambda T: lambda x, y: x + y, A, B),
    "add_alpha": (lambda T: lambda x, y: T.add(x, y, alpha=2), A, B),
    "sub": (lambda T: lambda x, y: x - y, A, B),
    "rsub": (lambda T: lambda x: 1 - x, A),
    "div": (lambda T: lambda x, y: x / y, A, B),
    "div_scalar": (lambda T: lambda x: x / 3, A),
    "div_mode": (lambda T: lambda x, y: T.div(x, y, rounding_mode="floor"), A, B),
    "pow_scalar": (lambda T: lambda x: x ** 2, A),
    "pow_tensor": (lambda T: lambda x, y: x.abs() ** y, A, B),
    "eq_scalar": (lambda T: lambda x: x == 0, A),
    "eq_tensor": (lambda T: lambda x, y: x == y, A, B),
    "gt_scalar": (lambda T: lambda x: x > 0.5, A),
    "lt_tensor": (lambda T: lambda x, y: x < y, A, B),
    "where": (lambda T: lambda x, y: T.where(x > 0, x, y), A, B),
    "clamp": (lambda T: lambda x: x.clamp(-0.5, 0.5), A),
    "clamp_min": (lambda T: lambda x: x.clamp(min=0.0), A),
    "relu": (lambda T: lambda x: T.relu(x), A),
    "sigmoid": (lambda T: lambda x: T.sigmoid(x), A),
    "tanh": (lambda T: lambda x: T.tanh(x), A),
    "exp_log": (lambda T: lambda x: T.log(T.exp(x)), A),
    "neg_abs": (lambda T: lambda x: -x.abs(), A),
    "sqrt_rsqrt": (lambda T: lambda x: x.abs().sqrt() + x.abs().rsqrt(), A),
    "matmul": (lambda T: lambda x, m: x @ m, A, M),
    "mm": (lambda T: lambda x, m: T.mm(x, m), A, M),
    "bmm": (lambda T: lambda x: T.bmm(x.reshape(1, 3, 4), x.reshape(1, 4, 3)), A),
    "addmm": (lambda T: lambda x, m: T.addmm(m[0], x, m), A, M),
    "t": (lambda T: lambda x: x.t(), A),
    "transpose": (lambda T: lambda x: x.transpose(0, 1), A),
    "permute": (lambda T: lambda x: x.permute(1, 0), A),
    "view": (lambda T: lambda x: x.view(2, 6), A),
    "flatten": (lambda T: lambda x: x.flatten(), A),
    "unsqueeze": (lambda T: lambda x: x.unsqueeze(1), A),
    "squeeze_dim": (lambda T: lambda x: x.unsqueeze(1).squeeze(1), A),
    "squeeze_all": (lambda T: lambda x: x.unsqueeze(1).squeeze(), A),
    "expand": (lambda T: lambda x: x[:, :1].expand(3, 4), A),
    "cat": (lambda T: lambda x, y: T.cat([x, y], 1), A, B),
    "cat0": (lambda T: lambda x, y: T.cat([x, y]), A, B),
    "stack": (lambda T: lambda x, y: T.stack([x, y]), A, B),
    "softmax": (lambda T: lambda x: T.softmax(x, -1), A),
    "log_softmax": (lambda T: lambda x: T.log_softmax(x, 1), A),
    "amax": (lambda T: lambda x: T.amax(x, 1), A),
    "max_dim": (lambda T: lambda x: T.max(x, 1)[0], A),
    "max": (lambda T: lambda x: T.max(x), A),
    "maximum": (lambda T: lambda x, y: T.maximum(x, y), A, B),
    "min_dim": (lambda T: lambda x: x.min(0).values, A),
    "argmax": (lambda T: lambda x: T.argmax(x, 1), A),
    "std": (lambda T: lambda x: x.std(), A),
    "select": (lambda T: lambda x: x[1], A),
    "slice": (lambda T: lambda x: x[:, 1:3], A),
    "index_select": (lambda T: lambda x, i: T.index_select(x, 1, i[0]), A, I),
    "gather": (lambda T: lambda x, i: T.gather(x, 1, i), A, I),
    "clone": (lambda T: lambda x: x.clone(), A),
    "to_dtype": (lambda T: lambda x: x.to(T.float64), A),
    "cumsum": (lambda T: lambda x: T.cumsum(x, 1), A),
    "mul_": (lambda T: lambda x: x.clone().mul_(2), A),
    "add_": (lambda T: lambda x, y: x.clone().add_(y), A, B),
    "split": (lambda T: lambda x: x.split(2, 1)[0], A),
    "chunk": (lambda T: lambda x: x.chunk(2, 1)[1], A),
    "gelu": (lambda T: lambda x: T.nn.functional.gelu(x), A),
    "gelu_tanh": (lambda T: lambda x: T.nn.functional.gelu(x, approximate="tanh"), A),
    "silu": (lambda T: lambda x: T.nn.functional.silu(x), A),
    "linear": (lambda T: lambda x, m: T.nn.functional.linear(x, m.t()), A, M),
    "layer_norm": (lambda T: lambda x: T.nn.functional.layer_norm(x, (4,)), A),
    "masked_fill": (lambda T: lambda x: x.masked_fill(x > 0, 0.5), A),
    "norm": (lambda T: lambda x: x.norm(), A),
    "any": (lambda T: lambda x: (x > 0).any(), A),
    "all_dim": (lambda T: lambda x: (x > 0).all(1), A),
    "prod_dim": (lambda T: lambda x: x.prod(1), A),
    "minimum": (lambda T: lambda x, y: T.minimum(x, y), A, B),
    "sort": (lambda T: lambda x: T.sort(x, 1)[0], A),
    "topk": (lambda T: lambda x: T.topk(x, 2)[0], A),
    "embedding": (lambda T: lambda x, i: T.nn.functional.embedding(i, x), A, I),
    "logsumexp": (lambda T: lambda x: T.logsumexp(x, 1), A),
    "bitwise_and": (lambda T: lambda i: i & 1, I),
    "floor_divide": (lambda T: lambda x: x // 2, A),
    "remainder": (lambda T: lambda x: x % 2, A),
    "tril": (lambda T: lambda x: T.tril(x), A),
}


def _inputs(kinds, rng):
    out = []
    for k in kinds:
        if k == "i":
            out.append(rng.integers(0, 3, (3, 4)).astype(np.int64))
        else:
            out.append(rng.standard_normal(k).astype(np.float32))
    return out


def test_make_fx_targets_and_args_match_torch():
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx as tmake
    rng = np.random.default_rng(33)
    diffs = {}
    for name, (fn, *kinds) in CASES.items():
        arrs = _inputs(kinds, rng)
        tg = tmake(fn(torch))(*[torch.from_numpy(a.copy()) for a in arrs])
        eg = make_fx(fn(ember))(*[ember.from_numpy(a.copy()) for a in arrs])
        want, got = _canon(tg, "torch."), _canon(eg, "ember.")
        if want != got:
            diffs[name] = (want, got)
        # the converted graph runs the same values as eager ember
        ein = [ember.from_numpy(a.copy()) for a in arrs]
        r, e = eg(*ein), fn(ember)(*[ember.from_numpy(a.copy()) for a in arrs])
        np.testing.assert_allclose(np.asarray(r.numpy(), dtype=np.float64), np.asarray(e.numpy(), dtype=np.float64),
                                   rtol=1e-6, err_msg=name)
    assert not diffs, diffs


def test_make_fx_targets_are_overloads_with_tags_and_code():
    x = ember.randn(3, 4)
    gm = make_fx(lambda x: (x * 2 + 1).sum(0))(x)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[0] is aten.mul.Tensor and targets[1] is aten.add.Tensor and targets[2] is aten.sum.dim_IntList
    assert targets[0] in {aten.mul.Tensor, aten.mm.default}
    assert ember.Tag.pointwise in targets[0].tags and ember.Tag.pointwise not in targets[2].tags
    assert "ember.ops.aten.sum.dim_IntList(add, [0])" in gm.code
    assert "call_function[target=ember.ops.aten.mul.Tensor](args = (%x_1, 2)" in str(gm.graph)
    y = ember.randn(3, 4)
    np.testing.assert_allclose(gm(y).numpy(), ((y * 2 + 1).sum(0)).numpy(), rtol=1e-6)


def test_symbolic_make_fx_keeps_size_nodes():
    x = ember.randn(3, 4)
    gm = make_fx(lambda x: x.view(x.shape[0] * 4).relu(), tracing_mode="symbolic")(x)
    view = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is aten.view.default)
    assert hasattr(view.args[1][0], "op")       # the size is a graph value, not a baked number
    y = ember.randn(5, 4)
    np.testing.assert_allclose(gm(y).numpy(), y.view(20).relu().numpy())


def test_converter_round_trip_runs_the_binding():
    rng = np.random.default_rng(1)
    x = ember.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    cases = [(ember.sum, (x, 1), {}), (ember.sum, (x,), {}), (ember.add, (x, 2.5), {"alpha": 3}),
             (ember.div, (x, x), {"rounding_mode": "trunc"}), (ember.amax, (x, 1), {}),
             (ember.clamp, (x, -0.1), {}), (ember.ops.aten.max_dim.default.op.binding, (x, 0), {})]
    for b, a, kw in cases:
        ov, ta, tkw = to_aten(b, a, kw)
        want = b(*a, **kw)
        got = ov(*ta, **tkw)
        back = to_binding(ov, ta, tkw)
        assert back[0] is b
        again = back[0](*back[1], **back[2])
        for w, g in ((want, got), (want, again)):
            w, g = (w[0], g[0]) if isinstance(w, tuple) else (w, g)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
    ov, ta, tkw = to_aten(ember.sum, (x, 1), {})
    assert ov is aten.sum.dim_IntList and ta == (x, [1]) and tkw == {}
    ov, ta, tkw = to_aten(ember.add, (x, 2.5), {"alpha": 3})
    assert ov is aten.add.Tensor and ta == (x, 2.5) and tkw == {"alpha": 3}
    assert to_aten(ember.ops.aten.max_dim.default.op.binding, (x, 0), {})[0] is aten.max.dim
    assert to_aten(operator.add, (1, 2), {}) is None       # no op binding: stays


def test_internal_make_fx_users_keep_bindings():
    from ember.prims.table import decompose
    x = ember.randn(3, 4)
    gm = decompose(lambda x: ember.relu(x).sum(1))(x)        # ember's own pipeline: prims bindings
    assert all(getattr(n.target, "_ember_op", None) is not None
               for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem)
    f = ember.compile(lambda x: (x * 2).sin().sum(1))
    y = ember.randn(3, 4)
    np.testing.assert_allclose(f(y).numpy(), (y * 2).sin().sum(1).numpy(), rtol=1e-5)


def test_reinplace_on_aten_graph():
    from ember.fx.passes.reinplace import reinplace
    x = ember.randn(4)
    gm = make_fx(lambda x: x.clone().add(1).mul(2))(x)
    reinplace(gm, x)
    names = [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
    assert names == ["clone.default", "add_.Tensor", "mul_.Tensor"]
    np.testing.assert_allclose(gm(x).numpy(), ((x + 1) * 2).numpy(), rtol=1e-6)


class _Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(4, 3)
        self.register_buffer("b", ember.randn(3))

    def forward(self, x):
        y = ember.relu(self.fc(x)) + self.b
        return y.sum(1), y.max(1)[0]


def test_export_targets_and_consumers(tmp_path):
    m = _Net()
    x = ember.randn(2, 4)
    ep = ember.export.export(m, (x,))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    assert aten.sum.dim_IntList in targets and aten.max.dim in targets and aten.relu.default in targets
    assert all(isinstance(t, type(aten.add.Tensor)) for t in targets)
    text = str(ep)
    assert "ember.ops.aten.sum.dim_IntList(add, [1])" in text and "ember.ops.aten.max.dim(add, 1)" in text
    assert "ember.ops.aten.sum.dim_IntList(add, [1])" in ep.graph_module.code
    want = m(x)
    for got in (ep.module()(x), ember.export.unflatten(ep)(x), ember.compile(ep.module())(x)):
        for w, g in zip(want, got):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5)
    d = ep.run_decompositions()
    for w, g in zip(want, d.module()(x)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5)
    f = os.path.join(tmp_path, "net.pt2")
    ember.export.save(ep, f)
    ep2 = ember.export.load(f)
    assert [n.target for n in ep2.graph.nodes if n.op == "call_function"][:3] == \
        [n.target for n in ep.graph.nodes if n.op == "call_function"][:3]
    for w, g in zip(want, ep2.module()(x)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5)


def test_export_targets_match_torch_export():
    torch = pytest.importorskip("torch")

    def build(T):
        class N(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = T.nn.Linear(3, 3)

            def forward(self, x, y):
                z = T.cat([x, y], 1).softmax(-1) * 2
                # torch's training IR keeps composites whole: softmax.int, log_softmax.int
                return z.mean(0, keepdim=True) - y.sum(), z[:, 1:3].transpose(0, 1), (x * 2).log_softmax(1)
        return N()

    rng = np.random.default_rng(5)
    xa, ya = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    tep = torch.export.export(build(torch), (torch.from_numpy(xa), torch.from_numpy(ya)))
    eep = ember.export.export(build(ember), (ember.from_numpy(xa), ember.from_numpy(ya)))
    assert _canon(eep.graph_module, "ember.") == _canon(tep.graph_module, "torch.")


def test_onnx_export_of_aten_program():
    import importlib.util
    spec = importlib.util.find_spec("onnx")
    # (tests/ is on sys.path: its onnx directory passes for a namespace package called "onnx")
    if spec is None or spec.origin in (None, "namespace"):
        pytest.skip("the onnx package is not installed")
    m = _Net()
    x = ember.randn(2, 4)
    prog = ember.onnx.export(m, (x,), dynamo=True)
    ops = [n.op_type for n in prog.model_proto.graph.node]
    assert "ReduceSum" in ops and "Relu" in ops
