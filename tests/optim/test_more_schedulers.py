"""PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, SequentialLR and
ChainedScheduler against torch.optim.lr_scheduler: the lr (and momentum / beta1) sequences of
several configurations, state dicts and their round trip, errors."""
from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

# torch's own warnings about the order of optimizer.step() and scheduler.step()
pytestmark = [pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step:UserWarning"),
              pytest.mark.filterwarnings("ignore:Seems like `optimizer.step:UserWarning")]


def _base_lrs(n=2):
    """Fresh random base lrs, one per parameter group."""
    return [float(v) for v in np.random.default_rng().uniform(0.05, 0.5, n)]


def _opt(lib, kind, lrs):
    groups = [{"params": [lib.nn.Parameter(lib.ones(1))], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    if kind == "adam":
        return lib.optim.Adam(groups, lr=0.1)
    return lib.optim.SGD(groups, lr=0.1)


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g.get("momentum", 0.0) for g in opt.param_groups]


def _run(lib, make, lrs, epochs=30, kind="plain", steps=None):
    """Step an optimizer and its scheduler ``epochs`` times (``steps``: the arguments of each
    ``sched.step``); the lrs and momenta after each step."""
    opt = _opt(lib, kind, lrs)
    sched = make(lib.optim.lr_scheduler, opt)
    lr_seq, mom_seq = [sched.get_last_lr()], [_momenta(opt)]
    for i in range(epochs):
        opt.step()
        if steps is None:
            sched.step()
        else:
            sched.step(*steps[i])
        lr_seq.append(sched.get_last_lr())
        mom_seq.append(_momenta(opt))
        assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()
    return np.array(lr_seq, dtype=float), np.array(mom_seq, dtype=float), sched, opt


S = "lr_scheduler"
CONFIGS = [
    ("PolynomialLR", lambda s, o: s.PolynomialLR(o, total_iters=7), "plain", 30),
    ("PolynomialLR-power2", lambda s, o: s.PolynomialLR(o, total_iters=12, power=2.0), "plain", 30),
    ("PolynomialLR-power0.5", lambda s, o: s.PolynomialLR(o, total_iters=5, power=0.5), "plain", 30),
    ("WarmRestarts", lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=5), "plain", 30),
    ("WarmRestarts-Tmult", lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01), "plain",
     30),
    ("CyclicLR-triangular", lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4), "sgd",
     30),
    ("CyclicLR-triangular2", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=5,
                                                     mode="triangular2"), "sgd", 30),
    ("CyclicLR-exp_range", lambda s, o: s.CyclicLR(o, [0.01, 0.02], 0.3, step_size_up=5, mode="exp_range",
                                                   gamma=0.9, base_momentum=0.7, max_momentum=0.95), "sgd", 30),
    ("CyclicLR-adam-betas", lambda s, o: s.CyclicLR(o, 0.001, 0.01, step_size_up=4, mode="triangular2"), "adam",
     30),
    ("CyclicLR-no-momentum", lambda s, o: s.CyclicLR(o, 0.001, 0.01, step_size_up=2, cycle_momentum=False),
     "plain", 30),
    ("CyclicLR-scale_fn-cycle", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                        scale_fn=lambda x: 1 / (1 + x)), "sgd", 30),
    ("CyclicLR-scale_fn-iterations", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_mode="iterations",
                                                             scale_fn=lambda x: 0.97 ** x), "adam", 30),
    ("OneCycleLR-cos", lambda s, o: s.OneCycleLR(o, max_lr=[0.5, 1.0], total_steps=30), "sgd", 30),
    ("OneCycleLR-linear", lambda s, o: s.OneCycleLR(o, 0.3, epochs=5, steps_per_epoch=6, anneal_strategy="linear",
                                                    pct_start=0.4, div_factor=10.0, final_div_factor=100.0),
     "sgd", 30),
    ("OneCycleLR-three-phase", lambda s, o: s.OneCycleLR(o, 0.3, total_steps=31, three_phase=True,
                                                         base_momentum=0.8, max_momentum=0.9), "adam", 30),
    ("OneCycleLR-no-momentum", lambda s, o: s.OneCycleLR(o, 0.3, total_steps=30, cycle_momentum=False,
                                                         anneal_strategy="linear"), "plain", 30),
    ("SequentialLR-warmup-exp", lambda s, o: s.SequentialLR(
        o, [s.LinearLR(o, start_factor=0.1, total_iters=5), s.ExponentialLR(o, gamma=0.9)], milestones=[5]),
     "plain", 30),
    ("SequentialLR-three", lambda s, o: s.SequentialLR(
        o, [s.ConstantLR(o, factor=0.5, total_iters=2), s.CosineAnnealingLR(o, T_max=6, eta_min=0.001),
            s.MultiplicativeLR(o, lambda e: 0.95)], milestones=[3, 10]), "plain", 30),
    ("SequentialLR-poly-step", lambda s, o: s.SequentialLR(
        o, [s.PolynomialLR(o, total_iters=4, power=2.0), s.StepLR(o, step_size=3, gamma=0.5)], milestones=[6]),
     "plain", 30),
    # a chain first (a chain after a milestone cannot start: it has no get_lr, in torch neither)
    ("SequentialLR-nested-chain", lambda s, o: s.SequentialLR(
        o, [s.ChainedScheduler([s.ExponentialLR(o, gamma=0.9), s.StepLR(o, step_size=4, gamma=0.5)]),
            s.LinearLR(o, start_factor=0.25, total_iters=4)], milestones=[6]), "plain", 30),
    ("ChainedScheduler", lambda s, o: s.ChainedScheduler([s.ConstantLR(o, factor=0.2, total_iters=4),
                                                          s.ExponentialLR(o, gamma=0.9)]), "plain", 30),
    ("ChainedScheduler-three", lambda s, o: s.ChainedScheduler(
        [s.LinearLR(o, start_factor=0.5, total_iters=6), s.MultiStepLR(o, milestones=[3, 8], gamma=0.5),
         s.PolynomialLR(o, total_iters=20)], optimizer=o), "sgd", 30),
]


@needs_torch
@pytest.mark.parametrize("name,make,kind,epochs", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_lr_sequence_matches_torch(name, make, kind, epochs):
    lrs = _base_lrs()
    le, me, se, oe = _run(ember, make, lrs, epochs, kind)
    lt, mt, st, ot = _run(torch, make, lrs, epochs, kind)
    np.testing.assert_allclose(le, lt, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(me, mt, rtol=1e-13, atol=1e-15)
    de, dt = se.state_dict(), st.state_dict()
    assert sorted(de) == sorted(dt)
    for key in ("last_epoch", "_step_count", "base_lrs", "T_cur", "T_i", "total_steps", "_milestones"):
        if key in dt:
            np.testing.assert_allclose(de[key], dt[key], rtol=1e-13)
    ge = [{k: v for k, v in g.items() if k != "params"} for g in oe.param_groups]
    gt = [{k: v for k, v in g.items() if k != "params"} for g in ot.param_groups]
    assert [sorted(g) for g in ge] == [sorted(g) for g in gt]


def _round_trip(make, kind, lrs, epochs, split):
    """``split`` steps, both state dicts saved, a fresh optimizer and scheduler loaded, the rest."""
    full, mfull, _, _ = _run(ember, make, lrs, epochs, kind)
    opt = _opt(ember, kind, lrs)
    sched = make(ember.optim.lr_scheduler, opt)
    for _ in range(split):
        opt.step()
        sched.step()
    sd_o, sd_s = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    opt2 = _opt(ember, kind, [0.77] * len(lrs))
    sched2 = make(ember.optim.lr_scheduler, opt2)
    opt2.load_state_dict(sd_o)
    sched2.load_state_dict(sd_s)
    got, mom = [], []
    for _ in range(epochs - split):
        opt2.step()
        sched2.step()
        got.append(sched2.get_last_lr())
        mom.append(_momenta(opt2))
    np.testing.assert_allclose(np.array(got), full[split + 1:], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.array(mom), mfull[split + 1:], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name,make,kind,epochs", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_state_dict_round_trip(name, make, kind, epochs):
    _round_trip(make, kind, _base_lrs(), epochs, split=int(np.random.default_rng().integers(3, 20)))


def test_cyclic_lr_state_dict_keeps_callable_object_state():
    class Scale:
        def __init__(self):
            self.k = 0.5

        def __call__(self, x):
            return self.k ** x

    opt = _opt(ember, "sgd", [0.1])
    fn = Scale()
    sched = ember.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=2, scale_fn=fn)
    sd = sched.state_dict()
    assert sd["_scale_fn_custom"] == {"k": 0.5} and "_scale_fn_ref" not in sd
    fn2 = Scale()
    fn2.k = 0.1
    sched2 = ember.optim.lr_scheduler.CyclicLR(_opt(ember, "sgd", [0.1]), 0.01, 0.1, step_size_up=2, scale_fn=fn2)
    sched2.load_state_dict(sd)
    assert fn2.k == 0.5
    lam = ember.optim.lr_scheduler.CyclicLR(_opt(ember, "sgd", [0.1]), 0.01, 0.1, scale_fn=lambda x: 1.0)
    assert lam.state_dict()["_scale_fn_custom"] is None


# ---------------------------------------------------------------------- warm restarts, epoch argument
def _warm_restarts_fractional(lib, lrs, t0, t_mult, iters, epochs):
    opt = _opt(lib, "plain", lrs)
    sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=t0, T_mult=t_mult, eta_min=0.001)
    out = []
    for epoch in range(epochs):
        for i in range(iters):
            opt.step()
            sched.step(epoch + i / iters)
            out.append(sched.get_last_lr() + [sched.T_cur, sched.T_i, sched.last_epoch])
    return np.array(out, dtype=float), sched


@needs_torch
@pytest.mark.parametrize("t0,t_mult", [(3, 1), (2, 2), (1, 3)])
def test_warm_restarts_fractional_epochs_match_torch(t0, t_mult):
    lrs = _base_lrs()
    iters = int(np.random.default_rng().integers(3, 8))
    e, se = _warm_restarts_fractional(ember, lrs, t0, t_mult, iters, 12)
    t, st = _warm_restarts_fractional(torch, lrs, t0, t_mult, iters, 12)
    np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-14)
    assert se._step_count == st._step_count


@needs_torch
def test_warm_restarts_explicit_epochs_match_torch():
    """Jumps forwards and back with step(epoch); then plain steps continue from there."""
    lrs = _base_lrs()
    rng = np.random.default_rng()
    epochs = [float(v) for v in rng.uniform(0, 40, 10)] + [int(v) for v in rng.integers(0, 40, 5)]
    out = {}
    for lib in (ember, torch):
        opt = _opt(lib, "plain", lrs)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2)
        seq = []
        for ep in epochs:
            sched.step(ep)
            seq.append(sched.get_last_lr() + [sched.T_cur, sched.T_i])
        for _ in range(10):
            sched.step()
            seq.append(sched.get_last_lr() + [sched.T_cur, sched.T_i])
        out[lib.__name__] = np.array(seq, dtype=float)
    np.testing.assert_allclose(out["ember"], out["torch"], rtol=1e-12, atol=1e-14)


@needs_torch
def test_closed_form_step_epoch_matches_torch():
    """step(epoch) uses the closed form where there is one (PolynomialLR)."""
    lrs = _base_lrs()
    epochs = [int(v) for v in np.random.default_rng().integers(0, 15, 12)]
    out = {}
    for lib in (ember, torch):
        opt = _opt(lib, "plain", lrs)
        sched = lib.optim.lr_scheduler.PolynomialLR(opt, total_iters=10, power=1.5)
        seq = []
        with pytest.warns(UserWarning, match="epoch parameter"):
            for ep in epochs:
                sched.step(ep)
                seq.append(sched.get_last_lr())
        out[lib.__name__] = np.array(seq)
    np.testing.assert_allclose(out["ember"], out["torch"], rtol=1e-13)


@needs_torch
@pytest.mark.parametrize("name,make", [
    ("ExponentialLR", lambda s, o, e: s.ExponentialLR(o, gamma=0.8, last_epoch=e)),
    ("PolynomialLR", lambda s, o, e: s.PolynomialLR(o, total_iters=10, last_epoch=e)),
    ("LinearLR", lambda s, o, e: s.LinearLR(o, start_factor=0.3, total_iters=8, last_epoch=e)),
    ("MultiplicativeLR", lambda s, o, e: s.MultiplicativeLR(o, lambda k: 0.9, last_epoch=e)),
    ("CosineAnnealingLR", lambda s, o, e: s.CosineAnnealingLR(o, T_max=9, last_epoch=e)),
    ("OneCycleLR", lambda s, o, e: s.OneCycleLR(o, 0.4, total_steps=20, last_epoch=e)),
    ("CyclicLR", lambda s, o, e: s.CyclicLR(o, 0.01, 0.1, step_size_up=3, last_epoch=e)),
])
def test_resuming_with_last_epoch_matches_torch(name, make):
    """A scheduler constructed with ``last_epoch`` (resuming): its constructor's step does not
    move the lr a step ahead (PyTorch's ``_is_initial``)."""
    lrs = _base_lrs()
    out = {}
    for lib in (ember, torch):
        opt = _opt(lib, "sgd", lrs)
        first = make(lib.optim.lr_scheduler, opt, -1)
        for _ in range(4):
            opt.step()
            first.step()
        sched = make(lib.optim.lr_scheduler, opt, 4)
        seq = [sched.get_last_lr()]
        for _ in range(8):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        out[lib.__name__] = np.array(seq)
    np.testing.assert_allclose(out["ember"], out["torch"], rtol=1e-13)


# ---------------------------------------------------------------------- errors
def test_errors():
    s = ember.optim.lr_scheduler
    opt = _opt(ember, "plain", [0.1])
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        s.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1, but got 1.5"):
        s.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        s.CosineAnnealingWarmRestarts(opt, T_0=2).step(-1)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        s.CyclicLR(opt, 0.01, 0.1, mode="sawtooth", cycle_momentum=False)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        s.CyclicLR(ember.optim.Adagrad([ember.nn.Parameter(ember.ones(1))]), 0.01, 0.1)
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        s.CyclicLR(opt, 0.01, [0.1, 0.2], cycle_momentum=False)
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        s.OneCycleLR(opt, 0.1)
    with pytest.raises(ValueError, match="Expected positive integer total_steps, but got 0"):
        s.OneCycleLR(opt, 0.1, total_steps=0)
    with pytest.raises(ValueError, match="Expected float between 0 and 1 pct_start, but got 1.5"):
        s.OneCycleLR(opt, 0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        s.OneCycleLR(opt, 0.1, total_steps=10, anneal_strategy="exp")
    opt = _opt(ember, "sgd", [0.1])
    sched = s.OneCycleLR(opt, 0.1, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        sched.step()
    opt = _opt(ember, "plain", [0.1])
    other = _opt(ember, "plain", [0.1])
    with pytest.raises(ValueError, match="expects at least one scheduler"):
        s.SequentialLR(opt, [], milestones=[])
    with pytest.raises(ValueError, match="number of milestones to be equal to 2"):
        s.SequentialLR(opt, [s.StepLR(opt, 2), s.StepLR(opt, 3)], milestones=[2, 4])
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optimizer"):
        s.SequentialLR(opt, [s.StepLR(opt, 2), s.StepLR(other, 3)], milestones=[2])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        s.ChainedScheduler([s.StepLR(opt, 2), s.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="expects at least one scheduler to be chained"):
        s.ChainedScheduler([])


def test_chained_and_sequential_last_lr_and_base():
    s = ember.optim.lr_scheduler
    opt = _opt(ember, "plain", [0.1])
    chain = s.ChainedScheduler([s.ExponentialLR(opt, gamma=0.5), s.StepLR(opt, step_size=2, gamma=0.1)])
    assert isinstance(chain, s.LRScheduler) and chain.optimizer is opt
    chain.step()
    chain.step()
    assert math.isclose(chain.get_last_lr()[0], 0.1 * 0.25 * 0.1)
    seq = s.SequentialLR(opt, [s.ConstantLR(opt, factor=0.5, total_iters=2)], milestones=[])
    assert math.isclose(seq.get_last_lr()[0], 0.05)   # the lr restarts from initial_lr


# ---------------------------------------------------------------------- swa_utils
SWALR_CONFIGS = [dict(swa_lr=0.05, anneal_epochs=5, anneal_strategy="cos"),
                 dict(swa_lr=[0.02, 0.3], anneal_epochs=3, anneal_strategy="linear"),
                 dict(swa_lr=0.01, anneal_epochs=0),
                 dict(swa_lr=0.2, anneal_epochs=1, anneal_strategy="cos")]


@needs_torch
@pytest.mark.parametrize("kwargs", SWALR_CONFIGS, ids=[str(c) for c in SWALR_CONFIGS])
def test_swalr_matches_torch(kwargs):
    """SWALR after 6 epochs of a cosine schedule (the usual SWA recipe), and its state dict."""
    lrs = _base_lrs()
    out = {}
    for lib in (ember, torch):
        opt = _opt(lib, "sgd", lrs)
        first = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        seq = []
        for _ in range(6):
            opt.step()
            first.step()
            seq.append(first.get_last_lr())
        swa = lib.optim.swa_utils.SWALR(opt, **kwargs)
        seq.append(swa.get_last_lr())
        for _ in range(12):
            opt.step()
            swa.step()
            seq.append(swa.get_last_lr())
        out[lib.__name__] = (np.array(seq), swa.state_dict())
    np.testing.assert_allclose(out["ember"][0], out["torch"][0], rtol=1e-13, atol=1e-15)
    assert sorted(out["ember"][1]) == sorted(out["torch"][1])
    # round trip: a fresh SWALR loading the state dict continues the same
    opt = _opt(ember, "sgd", lrs)
    swa = ember.optim.swa_utils.SWALR(opt, **kwargs)
    for _ in range(4):
        swa.step()
    sd = copy.deepcopy(swa.state_dict())
    nxt = [swa.step() or swa.get_last_lr() for _ in range(3)]
    swa2 = ember.optim.swa_utils.SWALR(opt, **kwargs)
    swa2.load_state_dict(sd)
    assert swa2.anneal_func is swa2._cosine_anneal or kwargs.get("anneal_strategy") == "linear"
    for g, lr in zip(opt.param_groups, sd["_last_lr"]):
        g["lr"] = lr
    np.testing.assert_allclose([swa2.step() or swa2.get_last_lr() for _ in range(3)], nxt, rtol=1e-13)


def _bn_model(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.BatchNorm1d(6), lib.nn.ReLU(), lib.nn.Linear(6, 2)).double()


def _copy_into_torch(em, tm):
    with torch.no_grad():
        for (_, pe), (_, pt) in zip(list(em.named_parameters()) + list(em.named_buffers()),
                                    list(tm.named_parameters()) + list(tm.named_buffers())):
            pt.copy_(torch.from_numpy(np.array(pe.detach().numpy(), copy=True)))


AVG_CASES = ["swa", "swa-use_buffers", "ema-multi", "ema-avg_fn", "swa-multi", "ema-multi-use_buffers"]


def _avg_kwargs(lib, case):
    su = lib.optim.swa_utils
    return {"swa": {}, "swa-use_buffers": {"use_buffers": True},
            "ema-multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.9)},
            "ema-avg_fn": {"avg_fn": su.get_ema_avg_fn(0.8)},
            "swa-multi": {"multi_avg_fn": su.get_swa_multi_avg_fn()},
            "ema-multi-use_buffers": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.7), "use_buffers": True}}[case]


@needs_torch
@pytest.mark.parametrize("case", AVG_CASES)
def test_averaged_model_and_update_bn_match_torch(case):
    rng = np.random.default_rng()
    xs = [rng.standard_normal((8, 4)) for _ in range(5)]
    em = _bn_model(ember)
    tm = _bn_model(torch)
    _copy_into_torch(em, tm)
    results = {}
    for lib, model in ((ember, em), (torch, tm)):
        avg = lib.optim.swa_utils.AveragedModel(model, **_avg_kwargs(lib, case))
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        for x in xs:
            opt.zero_grad()
            (model(lib.tensor(x)) ** 2).mean().backward()
            opt.step()
            avg.update_parameters(model)
        before = [t.detach().numpy().copy() for t in itertools.chain(avg.parameters(), avg.buffers())]
        lib.optim.swa_utils.update_bn([lib.tensor(x) for x in xs], avg)
        after = [t.detach().numpy().copy() for t in itertools.chain(avg.parameters(), avg.buffers())]
        avg.eval()
        out = avg(lib.tensor(xs[0])).detach().numpy()
        results[lib.__name__] = (before, after, out, int(avg.n_averaged), sorted(avg.state_dict()))
    e, t = results["ember"], results["torch"]
    assert len(e[0]) == len(t[0]) and e[3] == t[3] == 5 and e[4] == t[4]
    for a, b in zip(e[0] + e[1], t[0] + t[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e[2], t[2], rtol=1e-10, atol=1e-12)


def test_averaged_model_basics():
    su = ember.optim.swa_utils
    model = ember.nn.Linear(3, 2)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        su.AveragedModel(model, avg_fn=su.get_swa_avg_fn(), multi_avg_fn=su.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="Invalid decay value 1.5"):
        su.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        su.SWALR(_opt(ember, "sgd", [0.1]), swa_lr=0.1, anneal_epochs=-1)
    avg = su.AveragedModel(model)
    ws = []
    for _ in range(3):
        with ember.no_grad():
            model.weight.copy_(ember.tensor(np.random.default_rng().standard_normal((2, 3)), dtype=ember.float32))
        ws.append(model.weight.detach().numpy().copy())
        avg.update_parameters(model)
    np.testing.assert_allclose(avg.module.weight.detach().numpy(), np.mean(ws, axis=0), rtol=1e-5, atol=1e-6)
    assert avg.module is not model and int(avg.n_averaged) == 3 and "n_averaged" in avg.state_dict()
    su.update_bn([ember.ones(2, 3)], model)   # no batch norm: nothing to do
