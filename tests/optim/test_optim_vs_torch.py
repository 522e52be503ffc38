"""Optimizers and lr schedulers against torch.optim: parameter trajectories (float64, tight) for
every option combination, state_dicts, schedulers' lr sequences."""
from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytestmark = needs_torch

RNG = np.random.default_rng(7)
W0 = RNG.standard_normal((3, 4))
B0 = RNG.standard_normal(3)
X = RNG.standard_normal((6, 4))


def _trajectory(lib, opt_name, kwargs, steps=8, closure=False, groups=False):
    w = lib.nn.Parameter(lib.tensor(W0.copy()))
    b = lib.nn.Parameter(lib.tensor(B0.copy()))
    params = [{"params": [w]}, {"params": [b], "lr": 0.05}] if groups else [w, b]
    opt = getattr(lib.optim, opt_name)(params, **kwargs)
    x = lib.tensor(X)
    traj = []

    def loss_fn():
        opt.zero_grad()
        loss = ((x @ w.t() + b).tanh() ** 2).sum() + (w ** 4).sum() * 0.01
        loss.backward()
        return loss

    for _ in range(steps):
        if closure:
            opt.step(loss_fn)
        else:
            loss_fn()
            opt.step()
        traj.append(np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()]))
    return np.array(traj), opt


def _combos(**options):
    keys = list(options)
    for values in itertools.product(*(options[k] for k in keys)):
        yield dict(zip(keys, values))


CASES = (
    [("SGD", c) for c in _combos(lr=[0.05], momentum=[0.0, 0.9], dampening=[0.0, 0.3], weight_decay=[0.0, 0.1],
                                 nesterov=[False, True], maximize=[False, True])
     if not (c["nesterov"] and (c["momentum"] == 0 or c["dampening"] != 0))]
    + [("Adam", c) for c in _combos(lr=[0.05], betas=[(0.9, 0.999), (0.8, 0.9)], weight_decay=[0.0, 0.1],
                                    amsgrad=[False, True], maximize=[False, True])]
    + [("AdamW", c) for c in _combos(lr=[0.05], weight_decay=[0.0, 0.1, 1e-2], amsgrad=[False, True],
                                     maximize=[False, True])]
    + [("RMSprop", c) for c in _combos(lr=[0.01], alpha=[0.99, 0.9], weight_decay=[0.0, 0.1],
                                       momentum=[0.0, 0.9], centered=[False, True], maximize=[False, True])]
)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in c.items())}"
                                                    for n, c in CASES])
def test_trajectory_matches_torch(name, kwargs):
    te, oe = _trajectory(ember, name, kwargs)
    tt, ot = _trajectory(torch, name, kwargs)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)
    assert repr(oe) == repr(ot)
    se, st = oe.state_dict(), ot.state_dict()
    assert se["param_groups"] == st["param_groups"]
    assert list(se["state"]) == list(st["state"])
    for k in se["state"]:
        assert list(se["state"][k]) == list(st["state"][k])
        for key in se["state"][k]:
            np.testing.assert_allclose(np.asarray(se["state"][k][key].tolist()),
                                       np.asarray(st["state"][k][key].tolist()), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_closure_and_param_groups(name):
    kwargs = {"lr": 0.02, "momentum": 0.5} if name != "Adam" else {"lr": 0.02}
    te, _ = _trajectory(ember, name, kwargs, closure=True, groups=True)
    tt, _ = _trajectory(torch, name, kwargs, closure=True, groups=True)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)


def test_float32_trajectory_close():
    def run(lib):
        w = lib.nn.Parameter(lib.tensor(W0.astype(np.float32)))
        opt = lib.optim.AdamW([w], lr=0.01)
        for _ in range(10):
            opt.zero_grad()
            (w.sin() ** 2).sum().backward()
            opt.step()
        return w.detach().numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.05, momentum=0.9)), ("Adam", dict(lr=0.05, amsgrad=True)),
                                         ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True))])
def test_state_dict_resume(name, kwargs):
    """Stop after 4 steps, save/load the optimizer (through ember.save), continue: same trajectory."""
    full, _ = _trajectory(ember, name, kwargs, steps=8)
    w = ember.nn.Parameter(ember.tensor(W0.copy()))
    b = ember.nn.Parameter(ember.tensor(B0.copy()))
    x = ember.tensor(X)

    def step(opt):
        opt.zero_grad()
        (((x @ w.t() + b).tanh() ** 2).sum() + (w ** 4).sum() * 0.01).backward()
        opt.step()

    opt = getattr(ember.optim, name)([w, b], **kwargs)
    for _ in range(4):
        step(opt)
    buf = io.BytesIO()
    ember.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2 = getattr(ember.optim, name)([w, b], **kwargs)
    opt2.load_state_dict(ember.load(buf))
    for _ in range(4):
        step(opt2)
    got = np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()])
    np.testing.assert_allclose(got, full[-1], rtol=1e-12)


def test_optimizer_errors_and_api():
    p = ember.nn.Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        ember.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        ember.optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        ember.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        ember.optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        ember.optim.SGD([p * 2], lr=0.1)
    with pytest.raises(RuntimeError, match="fused"):
        ember.optim.SGD([p], lr=0.1, fused=True)
    opt = ember.optim.SGD([p], lr=0.1)
    q = ember.nn.Parameter(ember.ones(3))
    opt.add_param_group({"params": q, "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [q]})
    (p.sum() + q.sum()).backward()
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    opt.step()
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(p.tolist() + q.tolist(), [0.9, 0.9, 0.5, 0.5, 0.5], rtol=1e-6)
    opt.zero_grad()
    assert p.grad is None
    opt2 = ember.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt2.load_state_dict(opt.state_dict())


# ---------------------------------------------------------------------- schedulers
def _lrs(lib, make_sched, epochs=25, groups=2):
    params = [{"params": [lib.nn.Parameter(lib.zeros(1))], "lr": 0.1 * (i + 1)} for i in range(groups)]
    opt = lib.optim.SGD(params, lr=0.1)
    sched = make_sched(lib.optim.lr_scheduler, opt)
    out = []
    for _ in range(epochs):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out, sched


SCHEDULERS = [
    ("StepLR", lambda s, o: s.StepLR(o, step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", lambda s, o: s.CosineAnnealingLR(o, T_max=7, eta_min=0.001)),
    ("CosineAnnealingLR-restart", lambda s, o: s.CosineAnnealingLR(o, T_max=4)),
    ("LambdaLR", lambda s, o: s.LambdaLR(o, lambda e: 0.95 ** e)),
    ("LambdaLR-per-group", lambda s, o: s.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: min(1.0, (e + 1) / 5)])),
    ("MultiStepLR", lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", lambda s, o: s.ExponentialLR(o, gamma=0.9)),
    ("LinearLR", lambda s, o: s.LinearLR(o, start_factor=0.2, total_iters=6)),
    ("ConstantLR", lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=4)),
    ("MultiplicativeLR", lambda s, o: s.MultiplicativeLR(o, lambda e: 0.9)),
]


@pytest.mark.parametrize("name,make", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_scheduler_lr_sequence_matches_torch(name, make):
    le, se = _lrs(ember, make)
    lt, st = _lrs(torch, make)
    np.testing.assert_allclose(np.array(le), np.array(lt), rtol=1e-12, atol=1e-15)
    de, dt = se.state_dict(), st.state_dict()
    for key in ("last_epoch", "base_lrs", "_step_count", "_last_lr"):
        np.testing.assert_allclose(de[key], dt[key], rtol=1e-12)
    assert de["last_epoch"] == dt["last_epoch"] and de["base_lrs"] == dt["base_lrs"]


def test_scheduler_state_dict_resume():
    full, _ = _lrs(ember, lambda s, o: s.CosineAnnealingLR(o, T_max=10), epochs=12)
    p = ember.nn.Parameter(ember.zeros(1))
    opt = ember.optim.SGD([{"params": [p], "lr": 0.1}, {"params": [ember.nn.Parameter(ember.zeros(1))], "lr": 0.2}])
    sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(5):
        opt.step()
        sched.step()
    sd_o, sd_s = opt.state_dict(), sched.state_dict()
    opt2 = ember.optim.SGD([{"params": [p], "lr": 0.1}, {"params": [ember.nn.Parameter(ember.zeros(1))], "lr": 0.2}])
    opt2.load_state_dict(sd_o)
    sched2 = ember.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    sched2.load_state_dict(sd_s)
    out = []
    for _ in range(7):
        opt2.step()
        sched2.step()
        out.append(sched2.get_last_lr())
    np.testing.assert_allclose(np.array(out), np.array(full[5:]), rtol=1e-12)


def test_reduce_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85]
    out = {}
    for lib in (ember, torch):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=1.0)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2, factor=0.5, cooldown=1)
        seq = []
        for m in metrics:
            s.step(m)
            seq.append(opt.param_groups[0]["lr"])
        out[lib.__name__] = seq
    assert out["ember"] == out["torch"]
    assert math.isclose(out["ember"][-1], 0.25)
