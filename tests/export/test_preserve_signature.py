"""preserve_module_call_signature: the kept ModuleCallSignature is torch's, the exported graph is
unchanged, and unflatten gives a submodule called with its original (args, kwargs) structure."""
import numpy as np
import pytest

import ember
from ember.export import ConstantArgument, TensorArgument, export, unflatten


def _make(lib):
    class Sub(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(4, 4)

        def forward(self, x, y=None, *, scale=2.0):
            return self.l(x) * scale + y, x.sum()

    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = Sub()

        def forward(self, x):
            a, b = self.sub(x, x + 1, scale=3.0)
            return a + b
    return M()


def _args(sig):
    return [(type(a).__name__, a.name, getattr(a, "value", None)) for a in sig]


def _sig(ep, fqn):
    return next(e.signature for e in ep.module_call_graph if e.fqn == fqn)


def test_signature_matches_torch():
    torch = pytest.importorskip("torch")
    ep = export(_make(ember), (ember.randn(2, 4),), preserve_module_call_signature=("sub",))
    tep = torch.export.export(_make(torch), (torch.randn(2, 4),), preserve_module_call_signature=("sub",))
    mine, theirs = _sig(ep, "sub"), _sig(tep, "sub")
    assert _args(mine.inputs) == _args(theirs.inputs) == [("TensorArgument", "x", None),
                                                           ("TensorArgument", "add", None),
                                                           ("ConstantArgument", "", 3.0)]
    assert _args(mine.outputs) == _args(theirs.outputs)
    assert mine.in_spec.num_leaves == theirs.in_spec.num_leaves == 3
    assert mine.out_spec.num_leaves == theirs.out_spec.num_leaves == 2
    assert _sig(ep, "sub.l") is None and _sig(tep, "sub.l") is None


def test_graph_is_the_one_without_the_option():
    m = _make(ember)
    x = ember.randn(2, 4)
    plain = export(m, (x,))
    kept = export(m, (x,), preserve_module_call_signature=("sub",))
    assert [(n.op, n.name, str(n.target)) for n in kept.graph.nodes] == \
        [(n.op, n.name, str(n.target)) for n in plain.graph.nodes]
    assert _sig(plain, "sub") is None


def test_unflattened_submodule_keeps_its_call_signature():
    rng = np.random.default_rng()
    m = _make(ember)
    u = unflatten(export(m, (ember.randn(2, 4),), preserve_module_call_signature=("sub",)))
    assert isinstance(u.sub, ember.export.InterpreterModule)
    for n in (2, 2):
        x = ember.tensor(rng.standard_normal((n, 4)).astype(np.float32))
        y = ember.tensor(rng.standard_normal((n, 4)).astype(np.float32))
        got, want = u.sub(x, y, scale=3.0), m.sub(x, y, scale=3.0)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(u(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_other_call_structures_and_constants_are_refused():
    u = unflatten(export(_make(ember), (ember.randn(2, 4),), preserve_module_call_signature=("sub",)))
    x = ember.randn(2, 4)
    with pytest.raises(TypeError, match="tree spec"):
        u.sub(x, x)                       # scale missing
    with pytest.raises(TypeError, match="tree spec"):
        u.sub(x, y=x, scale=3.0)          # y by keyword
    with pytest.raises(TypeError, match=r"constant 3\.0"):
        u.sub(x, x, scale=4.0)


class _BNSub(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = ember.nn.BatchNorm1d(3)

    def forward(self, d):
        h = self.bn(d["a"]) + d["b"]
        return {"h": h, "pair": [h.relu(), d["a"] * 2]}


class _BNOuter(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _BNSub()
        self.head = ember.nn.Linear(3, 2)

    def forward(self, x):
        out = self.block({"a": x, "b": x.sin()})
        return self.head(out["h"] + out["pair"][0] - out["pair"][1])


def test_nested_structures_and_buffer_updates_in_the_preserved_module():
    import copy
    m = _BNOuter().train()
    ref = copy.deepcopy(m)
    u = unflatten(export(m, (ember.randn(5, 3),), preserve_module_call_signature=("block",)))
    x = ember.randn(5, 3)
    got, want = u.block({"a": x, "b": x.sin()}), ref.block({"a": x, "b": x.sin()})
    assert set(got) == {"h", "pair"} and isinstance(got["pair"], list)
    np.testing.assert_allclose(got["h"].detach().numpy(), want["h"].detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["pair"][1].detach().numpy(), want["pair"][1].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(u.block.bn.running_mean.numpy(), ref.block.bn.running_mean.numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(u(x).detach().numpy(), ref(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_save_load_keeps_the_signature(tmp_path):
    m = _make(ember)
    ep = export(m, (ember.randn(2, 4),), preserve_module_call_signature=("sub",))
    path = tmp_path / "ep.pt2"
    ember.export.save(ep, str(path))
    loaded = ember.export.load(str(path))
    assert _args(_sig(loaded, "sub").inputs) == _args(_sig(ep, "sub").inputs)
    x = ember.randn(2, 4)
    got = unflatten(loaded).sub(x, x + 1, scale=3.0)
    want = m.sub(x, x + 1, scale=3.0)
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_errors_name_the_problem():
    m = _make(ember)
    with pytest.raises(ValueError, match="'nope', which is not a submodule"):
        export(m, (ember.randn(2, 4),), preserve_module_call_signature=("nope",))

    class Twice(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = ember.nn.Linear(4, 4)

        def forward(self, x):
            return self.l(self.l(x))
    with pytest.raises(NotImplementedError, match="'l' is called more than once"):
        export(Twice(), (ember.randn(2, 4),), preserve_module_call_signature=("l",))
    assert TensorArgument("x") != ConstantArgument("", 1)


def test_unflatten_after_run_decompositions_is_refused_naming_it():
    ep = export(_make(ember), (ember.randn(2, 4),), preserve_module_call_signature=("sub",))
    dec = ep.run_decompositions()
    assert _sig(dec, "sub") is None
    with pytest.raises(NotImplementedError, match=r"run_decompositions .*preserve_module_call_signature=\('sub',\)"):
        unflatten(dec)
    x = ember.randn(2, 4)
    np.testing.assert_allclose(dec.module()(x).detach().numpy(), ep.module()(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
