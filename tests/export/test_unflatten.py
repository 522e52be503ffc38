"""ember.export.unflatten: the hierarchy, state names, printing and graphs as torch's; calling the
unflattened module (and its submodules) equals eager, gradients included; module_call_graph."""
import copy
import io

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, FlatArgsAdapter, export, load, save, unflatten


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def _nested(nn_):
    """Sequential inside a module, a submodule with a buffer, a shared Linear called twice."""
    class Sub(nn_.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn_.Linear(4, 4)
            self.register_buffer("buf", ember.ones(4) if nn_ is nn else __import__("torch").ones(4))

        def forward(self, x):
            return self.lin(x) + self.buf

    class Nested(nn_.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn_.Sequential(nn_.Linear(4, 4), nn_.ReLU(), Sub())
            self.shared = nn_.Linear(4, 4)

        def forward(self, x):
            y = self.seq(x)
            y = self.shared(y)
            return self.shared(y) * 2
    return Nested()


def _differing(nn_):
    """A submodule called twice with different graphs (-> ``sub@1``), one never called, a BatchNorm."""
    class Sub(nn_.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn_.Linear(4, 4)

        def forward(self, x, k):
            return self.lin(x) * k

    class Differing(nn_.Module):
        def __init__(self):
            super().__init__()
            self.sub = Sub()
            self.unused = nn_.Linear(2, 2)
            self.bn = nn_.BatchNorm1d(4)

        def forward(self, x):
            y = self.sub(x, 2)
            y = self.sub(y, 3)
            y = y + self.unused.weight.sum()
            return self.bn(y)
    return Differing()


def _aliased(nn_):
    """One Linear registered under two names (``shared`` and ``parent.helper``), called through both."""
    class Parent(nn_.Module):
        def __init__(self, helper):
            super().__init__()
            self.helper = helper

        def forward(self, x):
            return self.helper(x).relu()

    class Aliased(nn_.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn_.Linear(4, 4)
            self.parent = Parent(self.shared)

        def forward(self, x):
            return self.parent(x) + self.shared(x)
    return Aliased()


def _torch_unflat(build, x_shape, train=False):
    torch = pytest.importorskip("torch")
    import warnings
    tm = build(torch.nn)
    tm.train(train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tep = torch.export.export(tm, (torch.randn(*x_shape),))
        return tep, torch.export.unflatten(tep)


@pytest.mark.parametrize("build", [_nested, _differing, _aliased])
def test_hierarchy_names_and_printing_match_torch(build):
    m = build(nn).eval()
    ep = export(m, (ember.randn(3, 4),))
    u = unflatten(ep)
    tep, tu = _torch_unflat(build, (3, 4))
    assert repr(u) == repr(tu)
    assert [e.fqn for e in ep.module_call_graph] == [e.fqn for e in tep.module_call_graph]
    assert ep.module_call_graph[0].signature.forward_arg_names == ["x"]
    assert all(e.signature is None for e in ep.module_call_graph[1:])
    assert [n for n, _ in u.named_parameters()] == [n for n, _ in m.named_parameters()] == \
        [n for n, _ in tu.named_parameters()]
    assert [n for n, _ in u.named_buffers()] == [n for n, _ in m.named_buffers()] == \
        [n for n, _ in tu.named_buffers()]
    assert list(u.state_dict()) == list(tu.state_dict())          # aliases and ``sub@1`` copies included
    assert [(n, type(s).__name__) for n, s in u.named_modules(remove_duplicate=False)] == \
        [(n, type(s).__name__) for n, s in tu.named_modules(remove_duplicate=False)]
    assert type(u).__name__ == "UnflattenedModule" and isinstance(u, ember.export.UnflattenedModule)
    for _ in range(2):
        x = ember.randn(3, 4)
        _close(u(x), m(x))


def test_graphs_call_submodules_like_torch():
    m = _nested(nn).eval()
    u = unflatten(export(m, (ember.randn(3, 4),)))
    _, tu = _torch_unflat(_nested, (3, 4))

    def calls(g):
        return [(n.op, n.target) for n in g.nodes if n.op in ("placeholder", "call_module", "get_attr")]
    assert calls(u.graph) == calls(tu.graph)
    assert calls(u.seq.graph) == calls(tu.seq.graph)
    assert calls(u.seq._modules["2"].graph) == [("placeholder", "relu"), ("call_module", "lin"),
                                               ("get_attr", "buf")]
    # the shared Linear: one module, called twice from the root
    assert [n.target for n in u.graph.nodes if n.op == "call_module"] == ["seq", "shared", "shared"]


def test_calls_equal_eager_with_gradients():
    m = _nested(nn).eval()
    ref = copy.deepcopy(m)
    u = unflatten(export(m, (ember.randn(3, 4),)))
    for _ in range(3):
        x = ember.randn(3, 4)
        _close(u(x), ref(x))
        # a submodule runs alone too
        _close(u.seq(x), ref.seq(x))
        _close(u.shared(x), ref.shared(x))
    x = ember.randn(3, 4)
    u(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for (n, p), (_, q) in zip(u.named_parameters(), ref.named_parameters()):
        assert p.grad is not None, n
        _close(p.grad, q.grad, 1e-4)


def test_train_mode_batchnorm_buffers_written_by_the_owning_module():
    m = _differing(nn).train()
    ref = copy.deepcopy(m)
    u = unflatten(export(m, (ember.randn(5, 4),)))
    for _ in range(2):
        x = ember.randn(5, 4)
        _close(u(x), ref(x))
        _close(u.bn.running_mean, ref.bn.running_mean)
        _close(u.bn.running_var, ref.bn.running_var)
        assert int(u.bn.num_batches_tracked.item()) == int(ref.bn.num_batches_tracked.item())
    y = ember.randn(5, 4)
    _close(u.bn(y), ref.bn(y))           # the submodule alone updates its own buffers
    _close(u.bn.running_mean, ref.bn.running_mean)


def test_dynamic_batch_and_saved_program():
    m = _nested(nn).eval()
    ep = export(m, (ember.randn(3, 4),), dynamic_shapes={"x": {0: Dim("b", min=2, max=16)}})
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    u = unflatten(load(buf))
    assert [e.fqn for e in u.module_call_graph] == [e.fqn for e in ep.module_call_graph]
    for n in (2, 7, 16):
        x = ember.randn(n, 4)
        _close(u(x), m(x))
    with pytest.raises(AssertionError, match="<= 16"):
        u(ember.randn(20, 4))


def test_kwargs_nested_outputs_and_flat_args_adapter():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)

        def forward(self, x, y=None):
            h = self.a(x)
            return {"h": h, "both": (h + y, 7)}
    m = M()
    u = unflatten(export(m, (ember.randn(2, 3),), {"y": ember.randn(2, 3)}))
    x, y = ember.randn(2, 3), ember.randn(2, 3)
    got, want = u(x, y=y), m(x, y=y)
    _close(got["h"], want["h"])
    _close(got["both"][0], want["both"][0])
    assert got["both"][1] == 7

    class DropExtra(FlatArgsAdapter):
        def adapt(self, target_spec, input_spec, input_args, metadata=None, obj=None):
            return input_args[:target_spec.num_leaves]
    ua = unflatten(export(m, (ember.randn(2, 3), ember.randn(2, 3))), flat_args_adapter=DropExtra())
    _close(ua(x, y, ember.randn(2, 3))["h"], want["h"])
    with pytest.raises(TypeError, match="exported input tree spec"):
        unflatten(export(m, (ember.randn(2, 3), ember.randn(2, 3))))(x, y, x)
    with pytest.raises(TypeError, match="expected an ExportedProgram"):
        unflatten(m)


def test_batchnorm_called_twice_in_training():
    """The first call's new statistics feed the second call; the last write lands in ``bn``."""
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.l = nn.Linear(3, 3)

        def forward(self, x):
            return self.bn(self.l(self.bn(x)))
    m = Twice().train()
    ref = copy.deepcopy(m)
    u = unflatten(export(m, (ember.randn(5, 3),)))
    assert [n for n, _ in u.named_children()] == ["bn", "l", "bn@1"]
    for _ in range(2):
        x = ember.randn(5, 3)
        _close(u(x), ref(x))
        _close(u.bn.running_mean, ref.bn.running_mean)
        _close(u.bn.running_var, ref.bn.running_var)
        assert int(u.bn.num_batches_tracked.item()) == int(ref.bn.num_batches_tracked.item())
