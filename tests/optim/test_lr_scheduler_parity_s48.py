"""lr schedulers against torch.optim.lr_scheduler (session 48): the step-order warnings, the
resume KeyError, a tensor lr filled in place (not replaced by a float), and a compiled step
reading a scheduled tensor lr without a graph break or a recompile."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _sched(lib):
    return lib.optim.lr_scheduler


def _opt(lib, lr=0.1):
    ps = [lib.nn.Parameter(lib.tensor([1.0, 2.0])), lib.nn.Parameter(lib.tensor([3.0]))]
    return getattr(lib.optim, "SGD")([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.2}], lr=lr, momentum=0.9)


MAKERS = {
    "StepLR": lambda lib, o: _sched(lib).StepLR(o, 2),
    "CyclicLR": lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=2),
    "OneCycleLR": lambda lib, o: _sched(lib).OneCycleLR(o, 0.5, total_steps=10),
    "SequentialLR": lambda lib, o: _sched(lib).SequentialLR(
        o, [_sched(lib).LinearLR(o, 0.1, total_iters=2), _sched(lib).ExponentialLR(o, 0.9)], milestones=[2]),
    "ChainedScheduler": lambda lib, o: _sched(lib).ChainedScheduler(
        [_sched(lib).ConstantLR(o, 0.5, total_iters=2), _sched(lib).ExponentialLR(o, 0.9)]),
    "CosineAnnealingWarmRestarts": lambda lib, o: _sched(lib).CosineAnnealingWarmRestarts(o, 2),
}


def _warnings(lib, make, order):
    opt = _opt(lib)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sched = make(lib, opt)
        if order == "overridden":
            opt.step = lambda closure=None: None   # replaced after the scheduler was made
        for _ in range(4):
            if order == "right":
                opt.step()
            sched.step()
            if order == "wrong":
                opt.step()
    return [str(w.message) for w in rec]


@pytest.mark.parametrize("order", ["right", "wrong", "overridden"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_step_order_warnings_as_torch(name, order):
    """``scheduler.step()`` before any ``optimizer.step()`` skips the schedule's first value:
    PyTorch warns at the scheduler's first step (once per scheduler in a chain or sequence);
    ember gave no warning."""
    assert _warnings(ember, MAKERS[name], order) == _warnings(torch, MAKERS[name], order)


def test_resume_without_initial_lr_is_torchs_key_error():
    msgs = []
    for lib in (ember, torch):
        with pytest.raises(KeyError) as info:
            _sched(lib).StepLR(_opt(lib), 3, last_epoch=4)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


TENSOR_LR = {
    "ExponentialLR": lambda lib, o: _sched(lib).ExponentialLR(o, 0.7),
    "CosineAnnealingLR": lambda lib, o: _sched(lib).CosineAnnealingLR(o, 4, eta_min=0.001),
    "CyclicLR": lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=2, cycle_momentum=False),
    "OneCycleLR": lambda lib, o: _sched(lib).OneCycleLR(o, 0.1, total_steps=10, cycle_momentum=False),
    "SequentialLR": lambda lib, o: _sched(lib).SequentialLR(
        o, [_sched(lib).ConstantLR(o, 0.5, total_iters=2), _sched(lib).ExponentialLR(o, 0.9)], [2]),
    "WarmRestarts": lambda lib, o: _sched(lib).CosineAnnealingWarmRestarts(o, 2),
    "ReduceLROnPlateau": lambda lib, o: _sched(lib).ReduceLROnPlateau(o, patience=0, factor=0.5),
}


def _tensor_lr_run(lib, make):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64))
    lr = lib.tensor(0.1, dtype=lib.float64)
    opt = lib.optim.SGD([p], lr=lr, momentum=0.5)
    sched = make(lib, opt)
    out = []
    for _ in range(6):
        opt.zero_grad()
        (p ** 2).sum().backward()
        opt.step()
        if isinstance(sched, _sched(lib).ReduceLROnPlateau):
            sched.step(1.0)
        else:
            sched.step()
        last = sched.get_last_lr()
        out.append((opt.param_groups[0]["lr"] is lr, [type(v).__name__ for v in last], float(last[0]),
                    float(opt.param_groups[0]["lr"])))
    return out, p.detach().numpy(), type(opt.param_groups[0].get("initial_lr", lr)).__name__


@pytest.mark.parametrize("name", list(TENSOR_LR))
def test_tensor_lr_is_filled_in_place_as_torch(name):
    """PyTorch's schedulers fill a tensor lr in place (the optimizer, and a compiled step, keep
    reading the same tensor) and hand out clones from get_last_lr(); ember replaced it with a
    Python float after the first step."""
    (oe, pe, ie), (ot, pt, it) = _tensor_lr_run(ember, TENSOR_LR[name]), _tensor_lr_run(torch, TENSOR_LR[name])
    assert [o[:2] for o in oe] == [o[:2] for o in ot]
    assert ie == it
    np.testing.assert_allclose([o[2:] for o in oe], [o[2:] for o in ot], rtol=1e-12)
    np.testing.assert_allclose(pe, pt, rtol=1e-12)


@pytest.mark.parametrize("name,kw", [("SGD", dict(momentum=0.9)), ("RMSprop", dict(momentum=0.5)),
                                     ("Adadelta", dict()), ("Adam", dict()), ("Adagrad", dict()),
                                     ("ASGD", dict(t0=2.0)), ("Rprop", dict())])
def test_compiled_step_reads_the_scheduled_tensor_lr(name, kw):
    """A compiled ``opt.step()`` with ``lr=ember.tensor(...)`` changed by a scheduler between
    steps: the step uses the new lr (no stale constant), without a graph break (SGD, RMSprop
    with momentum and Adadelta read ``-lr`` with ``.item()`` as ``add_``'s alpha; ASGD's and
    Rprop's state creation read it too) and without recompiling for each new value."""
    from ember import dynamo
    dynamo.reset()
    ember.manual_seed(int(np.random.default_rng().integers(1 << 30)))
    model = ember.nn.Linear(4, 3)
    ref = copy.deepcopy(model)
    opt = getattr(ember.optim, name)(model.parameters(), lr=ember.tensor(0.05), **kw)
    opt_ref = getattr(ember.optim, name)(ref.parameters(), lr=ember.tensor(0.05), **kw)
    scheds = [ember.optim.lr_scheduler.ExponentialLR(o, 0.5) for o in (opt, opt_ref)]

    @ember.compile
    def step():
        opt.step()

    for _ in range(5):
        x = ember.randn(5, 4)
        for m in (model, ref):
            m.zero_grad()
            (m(x) ** 2).mean().backward()
        step()
        opt_ref.step()
        for s in scheds:
            s.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.05 * 0.5 ** 5)
    assert dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["compiled"] <= 2   # state initialisation, then one steady-state graph


def _custom_optimizer_warnings(lib, order):
    class PlainSGD(lib.optim.Optimizer):
        """A user's optimizer with its own step (no call to a library step)."""

        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            with lib.no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is not None:
                            p.add_(p.grad, alpha=-group["lr"])

    p = lib.nn.Parameter(lib.ones(2))
    opt = PlainSGD([p])
    sched = _sched(lib).StepLR(opt, 1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            p.grad = lib.ones(2)
            if order == "right":
                opt.step()
            sched.step()
            if order == "wrong":
                opt.step()
    return [str(w.message) for w in rec], p.detach().numpy().tolist()


@pytest.mark.parametrize("order", ["right", "wrong"])
def test_step_order_warning_for_a_users_optimizer_class(order):
    """A user's Optimizer subclass defining its own step: the scheduler sees its steps too."""
    assert _custom_optimizer_warnings(ember, order) == _custom_optimizer_warnings(torch, order)
