"""Small torch names, against torch 2.13: OutOfMemoryError / AcceleratorError, GradScaler,
is_distributed, Tensor.dim_order / const_data_ptr / module_load, utils.swap_tensors,
nn.utils.convert_conv{2,3}d_weight_memory_format, nn.parallel's replicate / scatter / gather /
parallel_apply on CPU devices, func.functionalize and func.replace_all_batch_norm_modules_."""
import weakref

import numpy as np
import pytest

import ember
from oracle import assert_same_error


def _torch():
    return pytest.importorskip("torch")


# ---------------------------------------------------------------------- top-level names
def test_exception_classes_and_aliases():
    torch = _torch()
    for name in ("OutOfMemoryError", "AcceleratorError"):
        e, t = getattr(ember, name), getattr(torch, name)
        assert [c.__name__ for c in e.__mro__] == [c.__name__ for c in t.__mro__]
        with pytest.raises(RuntimeError, match="boom"):
            raise e("boom")
    assert ember.GradScaler is ember.amp.GradScaler


def test_is_distributed_matches_torch():
    torch = _torch()
    assert ember.is_distributed(ember.randn(3)) is torch.is_distributed(torch.randn(3)) is False
    assert_same_error(lambda: ember.is_distributed(3), lambda: torch.is_distributed(3))


# ---------------------------------------------------------------------- Tensor methods
def test_dim_order_matches_torch_on_random_layouts():
    torch = _torch()
    rng = np.random.default_rng(0)
    checks = 0
    for _ in range(150):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 4, nd))
        perm = tuple(int(p) for p in rng.permutation(nd))
        base = rng.standard_normal(shape)
        e, t = ember.tensor(base).permute(*perm), torch.tensor(base).permute(*perm)
        if rng.random() < 0.3:
            d = int(rng.integers(0, nd))
            e = e.unsqueeze(d).expand(*e.shape[:d], 3, *e.shape[d:])
            t = t.unsqueeze(d).expand(*t.shape[:d], 3, *t.shape[d:])
        if t.ndim == 4 and rng.random() < 0.4:
            e, t = e.contiguous(memory_format=ember.channels_last), t.contiguous(memory_format=torch.channels_last)
        assert tuple(e.stride()) == tuple(t.stride())
        for amb in (False, True, ["contiguous_format"], ["contiguous_format", "channels_last"]):
            ea = [getattr(ember, f) for f in amb] if isinstance(amb, list) else amb
            ta = [getattr(torch, f) for f in amb] if isinstance(amb, list) else amb
            try:
                want = t.dim_order(ambiguity_check=ta)
            except RuntimeError as exc:
                with pytest.raises(RuntimeError) as ours:
                    e.dim_order(ambiguity_check=ea)
                assert str(ours.value) == str(exc)
                continue
            assert e.dim_order(ambiguity_check=ea) == want
            checks += 1
    assert checks > 200
    assert_same_error(lambda: ember.ones(2, 2).dim_order(ambiguity_check=3),
                      lambda: torch.ones(2, 2).dim_order(ambiguity_check=3))
    assert ember.ones(2, 3, 4, 5).contiguous(memory_format=ember.channels_last).dim_order() == (0, 2, 3, 1)


def test_const_data_ptr():
    t = ember.randn(4, 3)
    assert t.const_data_ptr() == t.data_ptr() and t[1:].const_data_ptr() == t[1:].data_ptr()


def test_module_load_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    for assign in (False, True):
        e_self, e_other = ember.tensor(a), ember.tensor(b, requires_grad=True)
        t_self, t_other = torch.tensor(a), torch.tensor(b, requires_grad=True)
        er, tr = e_self.module_load(e_other, assign=assign), t_self.module_load(t_other, assign=assign)
        np.testing.assert_array_equal(er.numpy(), tr.numpy())
        assert er.requires_grad == tr.requires_grad and er.is_leaf == tr.is_leaf
        np.testing.assert_array_equal(e_self.detach().numpy(), t_self.detach().numpy())   # copied in unless assign
        assert e_self.requires_grad == t_self.requires_grad
        assert (er.data_ptr() == e_self.data_ptr()) == (tr.data_ptr() == t_self.data_ptr())
    assert_same_error(lambda: ember.nn.Parameter(ember.ones(3)).module_load(ember.zeros(3)),
                      lambda: torch.nn.Parameter(torch.ones(3)).module_load(torch.zeros(3)))


# ---------------------------------------------------------------------- swap_tensors
def test_swap_tensors_matches_torch():
    torch = _torch()
    for m in (ember, torch):
        a, b = m.arange(3.0), m.zeros(2, 2)
        a.tag = "a"
        m.utils.swap_tensors(a, b)
        assert tuple(a.shape) == (2, 2) and a.sum().item() == 0 and b.tolist() == [0.0, 1.0, 2.0]
        assert b.tag == "a" and not hasattr(a, "tag")
        p, c = m.nn.Parameter(m.ones(2)), m.zeros(3)
        m.utils.swap_tensors(p, c)
        assert type(p) is m.Tensor and type(c) is m.nn.Parameter and c.requires_grad and not p.requires_grad
        x = m.ones(2)
        ref = weakref.ref(x)  # noqa: F841 - keeps the weakref alive
        with pytest.raises(RuntimeError, match="Cannot swap t1 because it has weakref associated with it"):
            m.utils.swap_tensors(x, m.ones(1))
        with pytest.raises(RuntimeError, match="Cannot swap t2 because it has weakref associated with it"):
            m.utils.swap_tensors(m.ones(1), x)


def test_swap_tensors_poisons_a_recorded_leaf_like_torch():
    torch = _torch()
    msgs = []
    for m in (ember, torch):
        leaf = m.ones(2, requires_grad=True)
        y = (leaf * 3).sum()
        m.utils.swap_tensors(leaf, m.zeros(2, requires_grad=True))
        with pytest.raises(RuntimeError) as exc:
            y.backward()
        msgs.append(str(exc.value))
        (leaf * 2).sum().backward()        # a graph recorded after the swap works
        assert leaf.grad.tolist() == [2.0, 2.0]
    assert msgs[0] == msgs[1] and "poisoned by swap_tensors" in msgs[0]


# ---------------------------------------------------------------------- conv weight memory format
@pytest.mark.parametrize("dims", [2, 3])
def test_convert_conv_weight_memory_format_matches_torch(dims):
    torch = _torch()
    fmt = "channels_last" if dims == 2 else "channels_last_3d"
    mods = []
    for m in (ember, torch):
        conv, tconv = getattr(m.nn, f"Conv{dims}d"), getattr(m.nn, f"ConvTranspose{dims}d")
        net = m.nn.Sequential(conv(3, 4, 3), m.nn.Sequential(tconv(4, 2, 2)), m.nn.ReLU(),
                              getattr(m.nn, f"Conv{5 - dims}d")(2, 2, 1))
        mods.append(net)
    with torch.no_grad():
        for pe, pt in zip(mods[0].parameters(), mods[1].parameters()):
            pt.copy_(torch.from_numpy(pe.detach().numpy().copy()))
    params_before = list(mods[0].parameters())
    out_e = getattr(ember.nn.utils, f"convert_conv{dims}d_weight_memory_format")(mods[0], getattr(ember, fmt))
    out_t = getattr(torch.nn.utils, f"convert_conv{dims}d_weight_memory_format")(mods[1], getattr(torch, fmt))
    assert out_e is mods[0] and out_t is mods[1]
    assert all(a is b for a, b in zip(params_before, mods[0].parameters()))
    for pe, pt in zip(mods[0].parameters(), mods[1].parameters()):
        assert tuple(pe.stride()) == tuple(pt.stride())
        np.testing.assert_array_equal(pe.detach().numpy(), pt.detach().numpy())


# ---------------------------------------------------------------------- nn.parallel on CPU
def test_scatter_gather_round_trip():
    P = ember.nn.parallel
    x = ember.randn(7, 3)
    parts = P.scatter((x, {"k": x, "n": 4}, [x]), [-1, "cpu", ember.device("cpu")])
    assert len(parts) == 3 and [p[0].shape[0] for p in parts] == [3, 3, 1]
    assert all(p[1]["n"] == 4 for p in parts)
    back = P.gather(parts, "cpu")
    np.testing.assert_array_equal(back[0].numpy(), x.numpy())
    np.testing.assert_array_equal(back[1]["k"].numpy(), x.numpy())
    np.testing.assert_array_equal(back[2][0].numpy(), x.numpy())
    cols = P.scatter(x, [-1, -1], dim=1)
    np.testing.assert_array_equal(P.gather(cols, -1, dim=1).numpy(), x.numpy())
    args, kw = P.scatter_kwargs((x,), {"s": x}, [-1, -1])
    assert len(args) == len(kw) == 2 and tuple(kw[1]["s"].shape) == (3, 3)
    with pytest.raises(NotImplementedError, match="CPU devices only"):
        P.scatter(x, [0, 1])


def test_replicate_parallel_apply_gather_equals_one_run():
    P = ember.nn.parallel
    net = ember.nn.Sequential(ember.nn.Linear(4, 5), ember.nn.Tanh(), ember.nn.Linear(5, 2))
    x = ember.randn(6, 4)
    ref = net(x)
    ref.pow(2).sum().backward()
    want = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    reps = P.replicate(net, [-1, -1, -1])
    assert len(reps) == 3 and reps[0] is not net and reps[0][0] is not net[0]
    assert all(a is b for a, b in zip(reps[1].parameters(), net.parameters()))
    out = P.gather(P.parallel_apply(reps, P.scatter(x, [-1, -1, -1])), -1)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    out.pow(2).sum().backward()
    for p, g in zip(net.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-5, atol=1e-6)
    detached = P.replicate(net, [-1], detach=True)[0]
    assert not any(p.requires_grad for p in detached.parameters())


def test_parallel_apply_reraises_with_replica():
    P = ember.nn.parallel

    class Boom(ember.nn.Module):
        def forward(self, x):
            raise ValueError("bad input")
    with pytest.raises(ValueError, match="Caught ValueError in replica 1 on device cpu"):
        P.parallel_apply([ember.nn.Identity(), Boom()], [ember.ones(1), ember.ones(1)])
    with pytest.raises(AssertionError, match="number of modules 2 is not equal to the number of inputs 1"):
        P.parallel_apply([ember.nn.Identity(), Boom()], [ember.ones(1)])


# ---------------------------------------------------------------------- func
FUNCS = {
    "inplace_and_view": lambda m: (lambda x, y: (x.add_(1), x.view(-1).mul_(2), y.__setitem__(0, 5.0),
                                                 (x.view(-1), x.sum()))[-1]),
    "no_mutation": lambda m: (lambda x, y: x.sin() + y.sum()),
    "mutate_second_only": lambda m: (lambda x, y: (y.mul_(x.sum()), y * 2)[-1]),
    "clone_then_mutate": lambda m: (lambda x, y: x.clone().add_(y.sum())),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_functionalize_matches_torch(name, remove):
    torch = _torch()
    rng = np.random.default_rng(abs(hash((name, remove))) % 2 ** 32)
    a, b = rng.standard_normal((2, 2)), rng.standard_normal(3)
    results = []
    for m in (ember, torch):
        x, y = m.tensor(a), m.tensor(b)
        out = m.func.functionalize(FUNCS[name](m), remove=remove)(x, y)
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            assert o.data_ptr() not in (x.data_ptr(), y.data_ptr())
        results.append([o.numpy().copy() for o in outs] + [x.numpy().copy(), y.numpy().copy()])
    for e, t in zip(*results):
        np.testing.assert_allclose(e, t, rtol=1e-12)


def test_functionalize_gradients_and_errors():
    torch = _torch()
    rng = np.random.default_rng(4)
    a = rng.standard_normal(4)
    grads = []
    for m in (ember, torch):
        x = m.tensor(a, requires_grad=True)
        out = m.func.functionalize(lambda t: t.mul(2).add_(1).sin())(x)
        out.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
    assert_same_error(lambda: ember.func.functionalize(lambda x: x, remove="views"),
                      lambda: torch.func.functionalize(lambda x: x, remove="views"))


def test_replace_all_batch_norm_modules_matches_torch():
    torch = _torch()
    states = []
    for m in (ember, torch):
        net = m.nn.Sequential(m.nn.BatchNorm2d(3), m.nn.Sequential(m.nn.BatchNorm1d(2, track_running_stats=False)),
                              m.nn.Linear(2, 2))
        assert m.func.replace_all_batch_norm_modules_(net) is net
        states.append([(bn.running_mean, bn.running_var, bn.num_batches_tracked, bn.track_running_stats)
                       for bn in (net[0], net[1][0])] + [sorted(net.state_dict())])
        net.train()
        assert tuple(net[0](m.ones(2, 3, 2, 2)).shape) == (2, 3, 2, 2)
    assert states[0] == states[1]
