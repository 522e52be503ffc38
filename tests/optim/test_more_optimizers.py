"""Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD and LBFGS against torch.optim: parameter
trajectories (float64, tight) over option combinations, state dicts and their round trip, LBFGS
with and without its line search, errors, and a step captured by ember.compile."""
from __future__ import annotations

import copy
import io
import itertools

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

NAMES = ["Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]


def _data():
    """Fresh random parameters and inputs (never zeros)."""
    rng = np.random.default_rng()
    return rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((6, 4))


def _loss(w, b, x):
    return ((x @ w.t() + b).tanh() ** 2).sum() + (w ** 4).sum() * 0.01


def _make(lib, name, kwargs, data, groups=False):
    w0, b0, _ = data
    w = lib.nn.Parameter(lib.tensor(w0.copy()))
    b = lib.nn.Parameter(lib.tensor(b0.copy()))
    params = [{"params": [w]}, {"params": [b], "lr": 0.03}] if groups else [w, b]
    return w, b, getattr(lib.optim, name)(params, **kwargs)


def _steps(lib, w, b, opt, data, steps, closure=False):
    x = lib.tensor(data[2])
    traj = []

    def loss_fn():
        opt.zero_grad()
        loss = _loss(w, b, x)
        loss.backward()
        return loss

    for _ in range(steps):
        if closure:
            opt.step(loss_fn)
        else:
            loss_fn()
            opt.step()
        traj.append(np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()]))
    return np.array(traj)


def _trajectory(lib, name, kwargs, data, steps=6, **kw):
    w, b, opt = _make(lib, name, kwargs, data, groups=kw.pop("groups", False))
    return _steps(lib, w, b, opt, data, steps, **kw), opt


def _combos(**options):
    keys = list(options)
    for values in itertools.product(*(options[k] for k in keys)):
        yield dict(zip(keys, values))


CASES = (
    [("Adagrad", c) for c in _combos(lr=[0.1], lr_decay=[0.0, 0.05], weight_decay=[0.0, 0.1],
                                     initial_accumulator_value=[0.0, 0.3], maximize=[False, True])]
    + [("Adadelta", c) for c in _combos(lr=[1.0, 0.5], rho=[0.9, 0.5], weight_decay=[0.0, 0.1],
                                        maximize=[False, True])]
    + [("Adamax", c) for c in _combos(lr=[0.05], betas=[(0.9, 0.999), (0.7, 0.8)], weight_decay=[0.0, 0.1],
                                      maximize=[False, True])]
    + [("NAdam", c) for c in _combos(lr=[0.05], betas=[(0.9, 0.999), (0.8, 0.9)], weight_decay=[0.0, 0.1],
                                     momentum_decay=[4e-3, 0.1], decoupled_weight_decay=[False, True],
                                     maximize=[False, True])
       if c["weight_decay"] or not c["decoupled_weight_decay"]]
    # betas[1] = 0.5: rho_t > 5 from the 2nd step (the rectified update); 0.999: never within the steps
    + [("RAdam", c) for c in _combos(lr=[0.05], betas=[(0.9, 0.999), (0.8, 0.5)], weight_decay=[0.0, 0.1],
                                     decoupled_weight_decay=[False, True], maximize=[False, True])
       if c["weight_decay"] or not c["decoupled_weight_decay"]]
    + [("Rprop", c) for c in _combos(lr=[0.05], etas=[(0.5, 1.2), (0.3, 1.5)], step_sizes=[(1e-6, 50), (0.01, 0.08)],
                                     maximize=[False, True])]
    # t0 = 2: the averaging (mu != 1) starts within the steps
    + [("ASGD", c) for c in _combos(lr=[0.05], lambd=[1e-4, 0.1], alpha=[0.75], t0=[1e6, 2.0],
                                    weight_decay=[0.0, 0.1], maximize=[False, True])]
)


def _ids(cases):
    return [f"{n}-{'-'.join(f'{k}={v}' for k, v in c.items())}" for n, c in cases]


def _assert_state_close(se, st):
    assert list(se["state"]) == list(st["state"])
    for k in se["state"]:
        assert list(se["state"][k]) == list(st["state"][k])
        for key, v in se["state"][k].items():
            tv = st["state"][k][key]
            if isinstance(tv, torch.Tensor):
                assert str(v.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
                np.testing.assert_allclose(np.asarray(v.tolist()), np.asarray(tv.tolist()), rtol=1e-10, atol=1e-12)
            else:
                assert v == tv, key


@needs_torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=_ids(CASES))
def test_trajectory_matches_torch(name, kwargs):
    data = _data()
    te, oe = _trajectory(ember, name, kwargs, data)
    tt, ot = _trajectory(torch, name, kwargs, data)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)
    assert repr(oe) == repr(ot)
    se, st = oe.state_dict(), ot.state_dict()
    assert se["param_groups"] == st["param_groups"]
    _assert_state_close(se, st)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_defaults_param_groups_and_closure(name):
    """Default hyper-parameters, two groups (the second with its own lr), steps through a closure."""
    data = _data()
    te, oe = _trajectory(ember, name, {}, data, groups=True, closure=True)
    tt, ot = _trajectory(torch, name, {}, data, groups=True, closure=True)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)
    assert oe.state_dict()["param_groups"] == ot.state_dict()["param_groups"]
    assert oe.defaults == ot.defaults


RESUME = [("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
          ("Adadelta", dict(weight_decay=0.01)), ("Adamax", dict(lr=0.05)),
          ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
          ("RAdam", dict(lr=0.05, betas=(0.8, 0.5))), ("Rprop", dict(lr=0.05)),
          ("ASGD", dict(lr=0.05, t0=2.0, lambd=0.01))]


def _resumed(lib, name, kwargs, data):
    """3 steps, the state dict saved (lib.save) and loaded into a fresh optimizer, 3 more steps."""
    w, b, opt = _make(lib, name, kwargs, data)
    first = _steps(lib, w, b, opt, data, 3)
    buf = io.BytesIO()
    lib.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2 = getattr(lib.optim, name)([w, b], **kwargs)
    opt2.load_state_dict(lib.load(buf))
    return np.concatenate([first, _steps(lib, w, b, opt2, data, 3)]), opt2


@needs_torch
@pytest.mark.parametrize("name,kwargs", RESUME, ids=[r[0] for r in RESUME])
def test_state_dict_round_trip(name, kwargs):
    """Stop after 3 steps, save the state dict, load it into a fresh optimizer, continue: the
    same trajectory as torch doing the same. Loading casts floating-point state to the
    parameters' dtype (torch's policy; only "step" is kept), so NAdam's float32 mu_product and
    ASGD's float32 eta and mu become float64 here: for them the resumed run is not bit-identical
    to an uninterrupted one, in torch as in ember; for the others it is."""
    data = _data()
    te, oe = _resumed(ember, name, kwargs, data)
    tt, ot = _resumed(torch, name, kwargs, data)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)
    _assert_state_close(oe.state_dict(), ot.state_dict())
    if name not in ("NAdam", "ASGD"):
        full, _ = _trajectory(torch, name, kwargs, data, steps=6)
        np.testing.assert_allclose(te, full, rtol=1e-10, atol=1e-12)
    # a torch state dict (tensors converted) loads into an ember optimizer and continues the same
    _, _, ot = _make(torch, name, kwargs, data)
    _steps(torch, *ot.param_groups[0]["params"], ot, data, 2)
    _, _, ot2 = _make(torch, name, kwargs, data)
    sd = ot.state_dict()
    conv = {"state": {k: {kk: (ember.tensor(vv.numpy().copy()) if isinstance(vv, torch.Tensor) else vv)
                          for kk, vv in v.items()} for k, v in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}
    w, b, oe3 = _make(ember, name, kwargs, data)
    oe3.load_state_dict(conv)
    ot2.load_state_dict(copy.deepcopy(sd))
    np.testing.assert_allclose(_steps(ember, w, b, oe3, data, 2),
                               _steps(torch, *ot2.param_groups[0]["params"], ot2, data, 2), rtol=1e-10, atol=1e-12)
    assert oe3.state_dict()["param_groups"] == ot2.state_dict()["param_groups"]


def test_float32_trajectories_close():
    """float32 parameters: the same formulas, close to torch (where it is installed) and finite."""
    data = _data()
    for name in NAMES:
        def run(lib):
            w = lib.nn.Parameter(lib.tensor(data[0].astype(np.float32)))
            opt = getattr(lib.optim, name)([w], lr=0.01)
            for _ in range(5):
                opt.zero_grad()
                (w.sin() ** 2).sum().backward()
                opt.step()
            return w.detach().numpy()
        got = run(ember)
        assert got.dtype == np.float32 and np.isfinite(got).all()
        if torch is not None:
            np.testing.assert_allclose(got, run(torch), rtol=1e-5, atol=1e-6, err_msg=name)


# ---------------------------------------------------------------------- LBFGS
def _rosenbrock(lib, xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def _lbfgs_run(lib, kwargs, start, problem, outer=4):
    if problem == "rosenbrock":
        p = lib.nn.Parameter(lib.tensor(start[:2].copy()))
        params = [p]

        def f():
            return _rosenbrock(lib, p)
    else:   # a random convex quadratic over two parameters (a vector and a matrix)
        rng_a, rng_b = problem
        p = lib.nn.Parameter(lib.tensor(start[:3].copy()))
        q = lib.nn.Parameter(lib.tensor(start[3:7].reshape(2, 2).copy()))
        params = [p, q]
        a, bvec = lib.tensor(rng_a), lib.tensor(rng_b)

        def f():
            z = lib.cat([p, q.reshape(-1)])
            return 0.5 * (z @ (a @ z)) - bvec @ z + (z ** 4).sum() * 0.01

    opt = lib.optim.LBFGS(params, **kwargs)

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss

    traj, losses = [], []
    for _ in range(outer):
        losses.append(float(opt.step(closure).detach()))
        traj.append(np.concatenate([t.detach().numpy().ravel() for t in params]))
    return np.array(traj), np.array(losses), opt


LBFGS_CASES = list(_combos(line_search_fn=[None, "strong_wolfe"], history_size=[100, 2],
                           problem=["rosenbrock", "quadratic"]))
LBFGS_CASES += [dict(line_search_fn=None, lr=0.1, max_iter=5, problem="rosenbrock"),
                dict(line_search_fn="strong_wolfe", max_iter=7, max_eval=9, tolerance_change=1e-5,
                     problem="quadratic")]


@needs_torch
@pytest.mark.parametrize("case", LBFGS_CASES, ids=[str(c) for c in LBFGS_CASES])
def test_lbfgs_matches_torch(case):
    case = dict(case)
    problem = case.pop("problem")
    rng = np.random.default_rng()
    start = rng.uniform(-1.5, 1.5, 7)
    if problem == "quadratic":
        m = rng.standard_normal((7, 7))
        problem = (m @ m.T + 0.5 * np.eye(7), rng.standard_normal(7))
    lr_default = {"lr": 1} if "lr" not in case and case["line_search_fn"] else {}
    kwargs = {**lr_default, **case}
    if case["line_search_fn"] is None and "lr" not in case:
        kwargs["lr"] = 0.2 if isinstance(problem, str) else 0.5
        kwargs.setdefault("max_iter", 8)
    te, le, oe = _lbfgs_run(ember, kwargs, start, problem)
    tt, lt, ot = _lbfgs_run(torch, kwargs, start, problem)
    # float64 on both sides; the line search's branches amplify last-bit differences of the
    # two libraries' reductions over the steps (a 1e-9 bound failed once by 2e-9)
    np.testing.assert_allclose(le, lt, rtol=1e-7, atol=1e-11)
    np.testing.assert_allclose(te, tt, rtol=1e-6, atol=1e-9)
    se, st = oe.state_dict(), ot.state_dict()
    assert se["param_groups"] == st["param_groups"]
    s_e, s_t = se["state"][0], st["state"][0]
    assert sorted(s_e) == sorted(s_t)
    assert s_e["func_evals"] == s_t["func_evals"] and s_e["n_iter"] == s_t["n_iter"]
    assert len(s_e["old_dirs"]) == len(s_t["old_dirs"])


@needs_torch
def test_lbfgs_converges_and_resumes_from_state_dict():
    rng = np.random.default_rng()
    start = rng.uniform(-1.2, 1.2, 7)
    kwargs = dict(line_search_fn="strong_wolfe", history_size=5, max_iter=6)
    full, _, _ = _lbfgs_run(torch, kwargs, start, "rosenbrock", outer=6)
    p = ember.nn.Parameter(ember.tensor(start[:2].copy()))
    opt = ember.optim.LBFGS([p], **kwargs)

    def closure(o):
        def c():
            o.zero_grad()
            loss = _rosenbrock(ember, p)
            loss.backward()
            return loss
        return c

    for _ in range(3):
        opt.step(closure(opt))
    buf = io.BytesIO()
    ember.save(opt.state_dict(), buf)
    buf.seek(0)
    opt2 = ember.optim.LBFGS([p], **kwargs)
    opt2.load_state_dict(ember.load(buf))
    for _ in range(3):
        opt2.step(closure(opt2))
    np.testing.assert_allclose(p.detach().numpy(), full[-1], rtol=1e-8, atol=1e-10)
    # 96 more iterations with the line search reach the minimum (1, 1)
    for _ in range(10):
        opt2.step(closure(opt2))
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 1.0], atol=1e-3)


def test_lbfgs_errors_and_hooks():
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    q = ember.nn.Parameter(ember.tensor([1.0]))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ember.optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        ember.optim.LBFGS([{"params": [p]}, {"params": [q]}])
    opt = ember.optim.LBFGS([p], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    opt = ember.optim.LBFGS([p], max_iter=3)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    loss = opt.step(closure)
    assert calls == ["pre", "post"] and float(loss) == 5.0
    assert opt.defaults["max_eval"] == 3 and ember.optim.LBFGS([q]).defaults["max_eval"] == 25


# ---------------------------------------------------------------------- errors
def test_constructor_validation():
    p = ember.nn.Parameter(ember.ones(2))
    for name in NAMES:
        with pytest.raises(ValueError, match="Invalid learning rate: -1"):
            getattr(ember.optim, name)([p], lr=-1)
        with pytest.raises(RuntimeError, match="differentiable"):
            getattr(ember.optim, name)([p], differentiable=True)
        if name != "Rprop":
            with pytest.raises(ValueError, match="Invalid weight_decay value: -0.1"):
                getattr(ember.optim, name)([p], weight_decay=-0.1)
    with pytest.raises(RuntimeError, match="fused"):
        ember.optim.Adagrad([p], fused=True)
    checks = [("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value: -1"),
              ("Adagrad", dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
              ("Adagrad", dict(eps=-1), "Invalid epsilon value: -1"),
              ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
              ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
              ("NAdam", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
              ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
              ("RAdam", dict(eps=-1), "Invalid epsilon value: -1"),
              ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2")]
    for name, kwargs, msg in checks:
        with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(".", r"\.")):
            getattr(ember.optim, name)([p], **kwargs)
        if torch is not None:   # the same message as torch's
            with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(".", r"\.")):
                getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kwargs)


def test_adagrad_state_exists_before_the_first_step():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.Adagrad([p], initial_accumulator_value=0.25)
    assert float(opt.state[p]["step"]) == 0.0 and opt.state[p]["sum"].tolist() == [0.25, 0.25]
    assert opt.state[p]["step"].dtype is ember.float32


# ---------------------------------------------------------------------- ember.compile
class _Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture
def _fresh_dynamo():
    from ember import dynamo
    dynamo.reset()
    yield dynamo
    dynamo.reset()


COMPILED = {
    "Adagrad": dict(lr=0.05, lr_decay=0.01, weight_decay=0.01),
    "NAdam": dict(lr=0.01, weight_decay=0.01, decoupled_weight_decay=True),
    "RAdam": dict(lr=0.01, betas=(0.9, 0.7)),   # rho_t crosses 5 at the 3rd step
    "Adamax": dict(lr=0.01, maximize=True),
    "ASGD": dict(lr=0.01, t0=2.0),
}


COMPILE_CASES = [(n, "counting") for n in sorted(COMPILED)] + [(n, "inductor") for n in ("Adagrad", "NAdam", "RAdam")]


@pytest.mark.parametrize("name,backend", COMPILE_CASES, ids=[f"{n}-{b}" for n, b in COMPILE_CASES])
def test_compiled_step_matches_eager(name, backend, _fresh_dynamo):
    """``def step(): opt.step()`` under ember.compile: the step is captured (no graph break, no
    eager fallback) and the float32 parameters and state equal an eager optimizer's exactly
    (the traced step computes its step-dependent scalars as float64 0-d tensors, with the eager
    formulas, instead of reading the step count with .item())."""
    dynamo = _fresh_dynamo
    ember.manual_seed(int(np.random.default_rng().integers(1 << 30)))
    model = ember.nn.Sequential(ember.nn.Linear(5, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    ref = copy.deepcopy(model)
    opt = getattr(ember.optim, name)(model.parameters(), **COMPILED[name])
    opt_ref = getattr(ember.optim, name)(ref.parameters(), **COMPILED[name])

    def step():
        opt.step()

    cnt = _Counting()
    cstep = ember.compile(step, backend=cnt if backend == "counting" else backend)
    for _ in range(5):
        x = ember.randn(4, 5)
        for m in (model, ref):
            m.zero_grad()
            (m(x) ** 2).mean().backward()
        cstep()
        opt_ref.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    sa, sb = opt.state_dict(), opt_ref.state_dict()
    for k in sa["state"]:
        for key, v in sa["state"][k].items():
            np.testing.assert_array_equal(v.numpy(), sb["state"][k][key].numpy(), err_msg=key)
    assert dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons
    if backend == "counting":
        assert 1 <= len(cnt.graphs) <= 2   # state initialisation, then one steady-state graph
        ops = [n for n in cnt.graphs[-1].graph.nodes if n.op in ("call_function", "call_method")]
        assert len(ops) > 4 * len(list(model.parameters()))   # every parameter's update is in the graph
    else:
        assert 1 <= dynamo.counters["compiled"] <= 2
