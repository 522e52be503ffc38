"""ember.export.export: the exported program equals eager on fresh inputs; signature, state,
printing, module(), run_decompositions and the errors as torch.export's."""
import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import dynamo
from ember.export import ExportedProgram, InputKind, OutputKind, export

from ._models import LinBN, randomize_bn, torch_linbn


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


def test_eval_module_kwargs_nested_outputs():
    m = randomize_bn(LinBN()).eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    assert isinstance(ep, ExportedProgram)
    mm = ep.module()
    for _ in range(3):
        x, y = ember.randn(5, 4), ember.randn(5, 3)
        got, want = mm(x, y=y), m(x, y=y)
        assert set(got) == {"a", "b"} and isinstance(got["a"], tuple) and len(got["a"]) == 2
        _close(got["a"][0], want["a"][0])
        _close(got["a"][1], want["a"][1])
        _close(got["b"], want["b"])


def test_signature_names_and_kinds_match_torch():
    torch = pytest.importorskip("torch")
    from torch.export import export as texport
    m = LinBN().eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    tep = texport(torch_linbn().eval(), (torch.randn(5, 4),), {"y": torch.randn(5, 3)})
    mine = [(s.arg.name, s.kind.name, s.target) for s in ep.graph_signature.input_specs]
    theirs = [(s.arg.name, s.kind.name, s.target) for s in tep.graph_signature.input_specs]
    assert sorted(mine) == sorted(theirs)
    sig = ep.graph_signature
    assert sig.parameters == ["fc.weight", "fc.bias", "bn.weight", "bn.bias"]
    assert sig.buffers == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert sig.user_inputs == ["x", "y"]
    assert len(sig.user_outputs) == 3
    assert [s.kind for s in sig.output_specs] == [OutputKind.USER_OUTPUT] * 3
    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert placeholders == [s.arg.name for s in sig.input_specs]
    assert set(ep.state_dict) == set(m.state_dict())
    assert ep.state_dict["fc.weight"] is m.fc.weight


def test_train_mode_batchnorm_buffer_mutation():
    m = randomize_bn(LinBN()).train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    ep = export(m, (ember.randn(6, 4),), {"y": ember.randn(6, 3)})
    for k, v in m.state_dict().items():           # exporting does not run the module
        _close(v, before[k], 0)
    muts = {s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    assert muts == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert [s.kind for s in ep.graph_signature.output_specs][:3] == [OutputKind.BUFFER_MUTATION] * 3
    mm = ep.module()
    ref = copy.deepcopy(m)
    for _ in range(2):
        x, y = ember.randn(6, 4), ember.randn(6, 3)
        got, want = mm(x, y=y), ref(x, y=y)
        _close(got["b"], want["b"])
        _close(mm.bn.running_mean, ref.bn.running_mean)
        _close(mm.bn.running_var, ref.bn.running_var)
        assert int(mm.bn.num_batches_tracked.item()) == int(ref.bn.num_batches_tracked.item())


def test_constants_nested_inputs_int_specialisation_and_input_mutation():
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = ember.tensor([1.5, 2.0, 3.0])     # a plain tensor attribute: a constant

        def forward(self, xs, d, k, x):
            x.add_(1)
            return (xs[0] * self.scale + d["a"] * k, xs[1], 7)

    mk = lambda: ((ember.randn(2, 3), ember.randn(2, 3)), {"a": ember.randn(2, 3)}, 3, ember.randn(3))  # noqa: E731
    ep = export(A(), mk())
    kinds = {s.arg.name: s.kind for s in ep.graph_signature.input_specs}
    assert kinds == {"c_lifted_tensor_0": InputKind.CONSTANT_TENSOR, "xs_0": InputKind.USER_INPUT,
                     "xs_1": InputKind.USER_INPUT, "d_a": InputKind.USER_INPUT, "x": InputKind.USER_INPUT}
    assert [s.kind for s in ep.graph_signature.output_specs][0] == OutputKind.USER_INPUT_MUTATION
    xs, d, k, x = mk()
    x_ref = x.clone()
    got = ep.module()(xs, d, k, x)
    want = A()(xs, d, k, x_ref)
    _close(got[0], want[0])
    assert got[1] is xs[1] and got[2] == 7
    _close(x, x_ref)                                # the input mutation was written back
    with pytest.raises(AssertionError, match=r"args\[2\] == 3"):
        ep.module()(xs, d, 4, x)
    with pytest.raises(TypeError, match="exported input tree spec"):
        ep.module()(xs, {"b": d["a"]}, 3, x)


def test_shape_and_dtype_checks():
    m = LinBN().eval()
    mm = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)}).module()
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] == 5"):
        mm(ember.randn(6, 4), y=ember.randn(6, 3))
    with pytest.raises(AssertionError, match=r"x.dtype == ember.float32"):
        mm(ember.randn(5, 4).double(), y=ember.randn(5, 3))


def test_call_directly_raises_torch_message():
    ep = export(LinBN(), (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    with pytest.raises(RuntimeError, match=r"Unable to call ExportedProgram directly. You should use "
                                           r"`exported_program.module\(\)` instead."):
        ep(ember.randn(5, 4), y=ember.randn(5, 3))


def test_str_layout():
    ep = export(LinBN().eval(), (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    s = str(ep)
    assert s.startswith("ExportedProgram:\n    class GraphModule(ember.nn.Module):")
    assert 'p_fc_weight: "f32[3, 4]"' in s and 'x: "f32[5, 4]"' in s
    assert "Graph signature:" in s and "p_fc_weight: PARAMETER target='fc.weight'" in s
    assert "b_bn_running_mean: BUFFER target='bn.running_mean' persistent=True" in s
    assert "Range constraints: {}" in s


def test_run_decompositions_to_prims():
    m = randomize_bn(LinBN()).eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    dep = ep.run_decompositions()
    assert dep is not ep and dep.graph_signature.user_inputs == ["x", "y"]
    mods = {getattr(n.target, "__module__", "") for n in dep.graph.nodes if n.op == "call_function"}
    assert all(md.startswith("ember.prims") or md in ("_operator", "operator") for md in mods), mods
    x, y = ember.randn(5, 4), ember.randn(5, 3)
    _close(dep.module()(x, y=y)["b"], m(x, y=y)["b"])


def test_graph_break_is_an_error_naming_line_and_reason():
    class Q(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1
    with pytest.raises(dynamo.Unsupported, match=r"truth value of a tensor.*test_export.py:\d+ in forward"):
        export(Q(), (ember.randn(3),))


def test_cond_under_export():
    class C(nn.Module):
        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))

    class S(nn.Module):
        def forward(self, x):
            return ember.cond(x.shape[0] > 2, lambda a: a.sin(), lambda a: a.cos(), (x,))
    ep = export(C(), (ember.randn(3),))      # one cond node (tests/export/test_cond_export_s34.py)
    conds = [n for n in ep.graph.nodes if n.target is ember.ops.higher_order.cond]
    assert len(conds) == 1
    for x in (ember.rand(3), -ember.rand(3)):
        _close(ep.module()(x), x.sin() if float(x.sum()) > 0 else x.cos())
    ep = export(S(), (ember.randn(3),))
    x = ember.randn(3)
    _close(ep.module()(x), x.sin())


def test_bad_arguments():
    with pytest.raises(ValueError, match="Expected `mod` to be an instance of `ember.nn.Module`"):
        export(lambda x: x, (ember.randn(2),))
    with pytest.raises(ember.export.UserError, match="Expecting `args` to be a tuple"):
        export(LinBN(), [ember.randn(5, 4)])


def test_same_tensor_twice_is_two_inputs():
    class T(nn.Module):
        def forward(self, a, b):
            return a * 2 + b
    x = ember.randn(3)
    ep = export(T(), (x, x))
    a, b = ember.randn(3), ember.randn(3)
    _close(ep.module()(a, b), a * 2 + b)


def test_matches_torch_export_values():
    torch = pytest.importorskip("torch")
    from torch.export import export as texport
    tm = torch_linbn().eval()
    m = LinBN().eval()
    with ember.no_grad():
        for k, v in tm.state_dict().items():
            m.state_dict()[k].copy_(ember.tensor(v.numpy()))
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    tep = texport(tm, (torch.randn(5, 4),), {"y": torch.randn(5, 3)})
    x, y = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    got = ep.module()(ember.tensor(x), y=ember.tensor(y[:, :3]))
    want = tep.module()(torch.tensor(x), y=torch.tensor(y[:, :3]))
    np.testing.assert_allclose(_np(got["b"]), want["b"].detach().numpy(), rtol=1e-5, atol=1e-5)


def test_uncaptured_frame_is_an_error():
    m = nn.Linear(3, 3)
    with ember.compiler.set_stance("force_eager"):
        with pytest.raises(RuntimeError, match="ran without being captured"):
            export(m, (ember.randn(2, 3),))


def test_identity_and_random_ops():
    class I(nn.Module):
        def forward(self, x):
            return x
    x = ember.randn(3)
    ep = export(I(), (ember.randn(3),))
    assert ep.module()(x) is x

    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = nn.Dropout(0.5)

        def forward(self, x):
            return self.d(x) * 2
    dm = Drop().train()
    ep = export(dm, (ember.randn(4, 4),))
    ember.manual_seed(3)
    a = ep.module()(ember.ones(4, 4))
    ember.manual_seed(3)
    b = dm(ember.ones(4, 4))
    _close(a, b, 0)


def test_module_is_differentiable_like_eager():
    m = randomize_bn(LinBN()).eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    mm = ep.module()
    ref = copy.deepcopy(m)
    x, y = ember.randn(5, 4), ember.randn(5, 3)
    mm(x, y=y)["b"].pow(2).sum().backward()
    ref(x, y=y)["b"].pow(2).sum().backward()
    _close(mm.fc.weight.grad, ref.fc.weight.grad)
    _close(mm.bn.bias.grad, ref.bn.bias.grad)
