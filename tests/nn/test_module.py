"""Module semantics (registration, traversal, state_dict, hooks, modes, dtype moves), init and nn.utils."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import ember
import ember.nn as nn
from oracle import needs_torch, torch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.seq = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))
        self.scale = nn.Parameter(ember.ones(2))
        self.register_buffer("steps", ember.zeros(1))
        self.register_buffer("cache", ember.zeros(2), persistent=False)

    def forward(self, x):
        return self.seq(self.fc(x)) * self.scale


def test_registration_and_traversal():
    m = Net()
    assert [k for k, _ in m.named_parameters()] == ["scale", "fc.weight", "fc.bias", "seq.1.weight", "seq.1.bias"]
    assert [k for k, _ in m.named_buffers()] == ["steps", "cache"]
    assert list(m.state_dict()) == ["scale", "steps", "fc.weight", "fc.bias", "seq.1.weight", "seq.1.bias"]
    assert [k for k, _ in m.named_modules()] == ["", "fc", "seq", "seq.0", "seq.1"]
    assert [k for k, _ in m.named_children()] == ["fc", "seq"]
    assert [k for k, _ in m.named_parameters(prefix="net", recurse=False)] == ["net.scale"]
    assert m.get_submodule("seq.1") is m.seq[1]
    assert m.get_parameter("seq.1.bias") is m.seq[1].bias
    assert m.get_buffer("steps") is m.steps
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        m.get_submodule("seq.nope")
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'zzz'"):
        m.zzz
    # reassigning / deleting
    m.fc = nn.Linear(3, 4, bias=False)
    assert "fc.bias" not in dict(m.named_parameters())
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'scale'"):
        m.scale = 3
    m.scale = None
    assert "scale" not in dict(m.named_parameters())
    del m.seq
    assert "seq" not in dict(m.named_children())
    assert "fc" in dir(m) and "steps" in dir(m)


def test_shared_parameters_deduplicated():
    lin = nn.Linear(2, 2)
    m = nn.Sequential(lin, lin)
    assert len(list(m.parameters())) == 2
    assert len(list(m.named_parameters(remove_duplicate=False))) == 4
    assert list(m.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_register_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer"):
        m.register_buffer("a", [1])
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor"):
        m.register_parameter("w", _nonleaf_param())
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        m(1)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def _nonleaf_param():
    p = nn.Parameter(ember.ones(2))
    p._grad_fn = object()  # a Parameter that claims a history
    return p


def test_state_dict_round_trip_and_strict_errors():
    a, b = Net(), Net()
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == [] and repr(res) == "<All keys matched successfully>"
    np.testing.assert_array_equal(b.fc.weight.detach().numpy(), a.fc.weight.detach().numpy())
    sd = a.state_dict()
    del sd["fc.bias"]
    sd["extra"] = ember.zeros(1)
    with pytest.raises(RuntimeError) as ei:
        b.load_state_dict(sd)
    assert str(ei.value) == ('Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.bias". '
                             '\n\tUnexpected key(s) in state_dict: "extra". ')
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc.bias"] and res.unexpected_keys == ["extra"]
    sd = a.state_dict()
    sd["fc.weight"] = ember.zeros(5, 3)
    with pytest.raises(RuntimeError, match="size mismatch for fc.weight: copying a param with shape"):
        b.load_state_dict(sd)
    # values are copies (detached), keep_vars keeps the Parameters
    assert not a.state_dict()["fc.weight"].requires_grad
    assert a.state_dict(keep_vars=True)["fc.weight"] is a.fc.weight
    # load copies in place: Parameter objects survive
    w = b.fc.weight
    b.load_state_dict(a.state_dict())
    assert b.fc.weight is w
    # assign=True swaps them
    b.load_state_dict(a.state_dict(), assign=True)
    assert isinstance(b.fc.weight, nn.Parameter) and b.fc.weight.requires_grad


@needs_torch
def test_load_torch_state_dict_error_text_matches_torch():
    tm = torch.nn.Linear(2, 3)
    em = nn.Linear(2, 3)
    sd_t = {"weight": torch.zeros(3, 2), "junk": torch.zeros(1)}
    sd_e = {"weight": ember.zeros(3, 2), "junk": ember.zeros(1)}
    with pytest.raises(RuntimeError) as et:
        tm.load_state_dict(sd_t)
    with pytest.raises(RuntimeError) as ee:
        em.load_state_dict(sd_e)
    assert str(ee.value) == str(et.value)


def test_forward_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    out = m(ember.ones(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(m.bias.detach().numpy() + 1, (3, 2)),
                               rtol=1e-6)
    assert calls == [ember.Size([3, 2])]
    h1.remove()
    h2.remove()
    m(ember.ones(1, 2))
    assert len(calls) == 1
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
    np.testing.assert_allclose(m(ember.ones(1, 2)).detach().numpy(), m.forward(ember.full((1, 2), 2.0)).detach().numpy())


@needs_torch
def test_full_backward_hook_matches_torch():
    got = {}
    for lib in (ember, torch):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2).double()
        m.load_state_dict({"weight": lib.tensor([[1.0, 2, 3], [4, 5, 6]], dtype=lib.float64),
                           "bias": lib.tensor([0.5, -0.5], dtype=lib.float64)})
        seen = []
        m.register_full_backward_pre_hook(lambda mod, go: seen.append(("pre", go[0].sum().item())))
        m.register_full_backward_hook(lambda mod, gi, go: seen.append(
            ("hook", gi[0].sum().item(), go[0].sum().item())) or (gi[0] * 10,))
        x = lib.tensor([[1.0, -1, 2], [0.5, 0.5, 0.5]], dtype=lib.float64, requires_grad=True)
        (m(x) * lib.tensor([[1.0, 2], [3, 4]], dtype=lib.float64)).sum().backward()
        got[lib.__name__] = (seen, x.grad.numpy().tolist(), m.weight.grad.numpy().tolist())
    assert got["ember"] == got["torch"]


def test_backward_hook_without_input_grad():
    m = nn.Linear(2, 2)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].shape)))
    m(ember.ones(1, 2)).sum().backward()
    assert seen == [((None,), ember.Size([1, 2]))]


def test_train_eval_apply_requires_grad_zero_grad():
    m = Net()
    assert m.training and m.seq[0].training
    m.eval()
    assert not m.training and not m.seq[1].training
    m.train()
    assert m.fc.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("yes")
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Net"]
    m(ember.ones(2, 3)).sum().backward()
    assert m.fc.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert np.all(m.fc.weight.grad.numpy() == 0)
    m.zero_grad()
    assert m.fc.weight.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_dtype_moves_keep_parameter_identity():
    m = Net()
    w = m.fc.weight
    m.double()
    assert m.fc.weight is w and w.dtype is ember.float64 and m.steps.dtype is ember.float64
    m.to(ember.float32)
    assert w.dtype is ember.float32
    m.half()
    assert w.dtype is ember.float16
    m.to("cpu", dtype=ember.float32)
    assert m.fc.weight.dtype is ember.float32
    with pytest.raises(TypeError, match="floating point"):
        m.to(ember.int64)
    bn = nn.BatchNorm1d(3).double()
    assert bn.num_batches_tracked.dtype is ember.int64


def test_deepcopy_and_compile_error():
    m = Net()
    m2 = copy.deepcopy(m)
    assert m2.fc.weight is not m.fc.weight
    np.testing.assert_array_equal(m2.fc.weight.detach().numpy(), m.fc.weight.detach().numpy())
    assert isinstance(m2.fc.weight, nn.Parameter)
    try:
        m.compile()
    except RuntimeError as e:
        assert "compile" in str(e)


def test_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[-1], nn.Linear) and isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
    s.append(nn.Sigmoid())
    assert len(s) == 4 and list(s._modules) == ["0", "1", "2", "3"]
    del s[1]
    assert list(s._modules) == ["0", "1", "2"] and isinstance(s[1], nn.Linear)
    s.insert(1, nn.Tanh())
    assert isinstance(s[1], nn.Tanh) and len(s) == 4
    assert [type(x).__name__ for x in s] == ["Linear", "Tanh", "Linear", "Sigmoid"]
    from collections import OrderedDict
    s2 = nn.Sequential(OrderedDict([("a", nn.Linear(1, 1)), ("b", nn.ReLU())]))
    assert list(s2._modules) == ["a", "b"] and s2.a is s2[0]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml += [nn.ReLU()]
    ml.append(nn.Tanh())
    assert len(ml) == 3 and isinstance(ml[-1], nn.Tanh) and len(ml[:2]) == 2
    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
    assert list(md.keys()) == ["b", "a"] and "a" in md and len(md) == 2
    pl = nn.ParameterList([ember.ones(2), nn.Parameter(ember.zeros(3))])
    assert all(isinstance(p, nn.Parameter) for p in pl) and len(list(pl.parameters())) == 2
    pd = nn.ParameterDict({"w": ember.ones(2)})
    assert isinstance(pd["w"], nn.Parameter) and list(pd.keys()) == ["w"]


@needs_torch
def test_container_reprs_match_torch():
    def build(nn_):
        return nn_.Sequential(nn_.Linear(2, 3), nn_.ModuleList([nn_.ReLU(), nn_.ReLU(), nn_.Tanh()]),
                              nn_.ModuleDict({"a": nn_.Linear(1, 1)}), nn_.Sequential())
    assert repr(build(nn)) == repr(build(torch.nn))


# ---------------------------------------------------------------------- init
def test_init_distributions():
    ember.manual_seed(0)
    w = ember.empty(400, 300)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    bound = 1 / math.sqrt(300)
    a = w.numpy()
    assert a.min() >= -bound and a.max() <= bound and abs(a.std() - bound / math.sqrt(3)) < 0.01 * bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 400)) < 0.02 * math.sqrt(2 / 400)
    nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain("tanh"))
    b = 5 / 3 * math.sqrt(6 / 700)
    assert abs(w.numpy()).max() <= b and abs(w.numpy().std() - b / math.sqrt(3)) < 0.02 * b
    nn.init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 700)) < 0.02 * math.sqrt(2 / 700)
    nn.init.trunc_normal_(w, std=0.5, a=-0.6, b=0.6)
    assert abs(w.numpy()).max() <= 0.6 and abs(w.numpy().mean()) < 0.01
    nn.init.orthogonal_(w, gain=2)
    q = w.numpy().astype(np.float64)
    np.testing.assert_allclose(q.T @ q, 4 * np.eye(300), atol=1e-4)
    nn.init.constant_(w, 0.25)
    assert np.all(w.numpy() == 0.25)
    nn.init.eye_(w)
    assert np.array_equal(w.numpy(), np.eye(400, 300))
    c = ember.empty(4, 2, 3, 3)
    nn.init.dirac_(c, groups=2)
    assert c.numpy().sum() == 4 and c.numpy()[0, 0, 1, 1] == 1
    assert nn.init._calculate_fan_in_and_fan_out(c) == (18, 36)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(ember.empty(3))
    g = ember.Generator().manual_seed(3)
    x1 = nn.init.normal_(ember.empty(5), generator=g).numpy().copy()
    g.manual_seed(3)
    assert np.array_equal(nn.init.normal_(ember.empty(5), generator=g).numpy(), x1)
    # init does not record autograd
    p = nn.Parameter(ember.empty(3, 3))
    nn.init.kaiming_uniform_(p)
    assert p.grad_fn is None and p.requires_grad


@needs_torch
def test_calculate_gain_matches_torch():
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                      ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert nn.init.calculate_gain(nl, param) == torch.nn.init.calculate_gain(nl, param)


def test_default_layer_init_scale():
    ember.manual_seed(1)
    lin = nn.Linear(256, 512)
    bound = 1 / math.sqrt(256)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert abs(w).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert abs(b).max() <= bound
    conv = nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    assert abs(conv.weight.detach().numpy()).max() <= bound
    emb = nn.Embedding(1000, 64)
    assert abs(emb.weight.detach().numpy().std() - 1) < 0.02
    lstm = nn.LSTM(8, 32)
    assert all(abs(p.detach().numpy()).max() <= 1 / math.sqrt(32) for p in lstm.parameters())


# ---------------------------------------------------------------------- nn.utils
@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_matches_torch(norm_type):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s) for s in [(3, 4), (5,), (2, 2, 2)]]
    pe = [nn.Parameter(ember.zeros(*g.shape, dtype=ember.float64)) for g in grads]
    pt = [torch.nn.Parameter(torch.zeros(*g.shape, dtype=torch.float64)) for g in grads]
    for p, q, g in zip(pe, pt, grads):
        p.grad = ember.tensor(g)
        q.grad = torch.tensor(g)
    ne = nn.utils.clip_grad_norm_(pe, 1.5, norm_type=norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, 1.5, norm_type=norm_type)
    np.testing.assert_allclose(ne.item(), nt.item(), rtol=1e-12)
    for p, q in zip(pe, pt):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_value_and_vector_conversion():
    p = nn.Parameter(ember.zeros(4))
    p.grad = ember.tensor([-3.0, -0.5, 0.5, 3.0])
    nn.utils.clip_grad_value_([p], 1.0)
    assert p.grad.tolist() == [-1.0, -0.5, 0.5, 1.0]
    m = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(m.parameters())
    assert tuple(v.shape) == (8,)
    nn.utils.vector_to_parameters(ember.arange(8.0), m.parameters())
    assert m.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and m.bias.tolist() == [6.0, 7.0]


def test_unsupported_features_raise_clearly():
    # EmbeddingBag(sparse=True) is supported (tests/nn/test_layer_checks_s48.py); max
    # mode can't have them, as torch
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        nn.EmbeddingBag(3, 2, sparse=True, mode="max")(ember.tensor([[0, 1]]))
    padded = nn.utils.rnn.pad_sequence([ember.ones(2, 3), ember.ones(4, 3)], batch_first=True)
    assert tuple(padded.shape) == (2, 4, 3) and padded[0, 2:].abs().sum().item() == 0

