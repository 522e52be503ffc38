"""ember.optim.swap_in_optimizer_params_and_state against torch's: the step inside acts on the
swapped-in tensors and state; the live optimizer is untouched afterwards; same errors."""
import copy

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _setup(lib, w0, b0, x):
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(w0))
        model.bias.copy_(lib.tensor(b0))
    opt = lib.optim.Adam(model.parameters(), lr=0.1)
    model(lib.tensor(x)).sum().backward()
    opt.step()
    return model, opt


def _run(lib, seed):
    rng = np.random.RandomState(seed)
    w0, b0, x = rng.randn(2, 3).astype(np.float32), rng.randn(2).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    model, opt = _setup(lib, w0, b0, x)
    live_params = [p.detach().clone() for p in model.parameters()]
    live_exp_avg = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
    osd = opt.state_dict()
    swap_state = {"state": {k: {n: v.clone() for n, v in s.items()} for k, s in osd["state"].items()},
                  "param_groups": copy.deepcopy(osd["param_groups"])}
    swap_state["param_groups"][0]["lr"] = 0.5
    swap = {n: p.detach().clone().requires_grad_(True) for n, p in model.named_parameters()}
    for p in swap.values():
        p.grad = lib.ones_like(p)
    group_params_before = opt.param_groups[0]["params"]
    with lib.optim.swap_in_optimizer_params_and_state(opt, swap, swap_state):
        assert opt.param_groups[0]["lr"] == 0.5
        opt.step()
    assert opt.param_groups[0]["params"] is group_params_before and opt.param_groups[0]["lr"] == 0.1
    for p, before, ea in zip(model.parameters(), live_params, live_exp_avg):
        np.testing.assert_array_equal(p.detach().numpy(), before.numpy())
        np.testing.assert_array_equal(opt.state[p]["exp_avg"].numpy(), ea.numpy())
    return [p.detach().numpy() for p in swap.values()], [s["exp_avg"].numpy() for s in swap_state["state"].values()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_swapped_step_matches_torch(seed):
    (ep, es), (tp, ts) = _run(ember, seed), _run(torch, seed)
    for a, b in zip(ep + es, tp + ts):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _err(lib, make):
    model = lib.nn.Linear(2, 2)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(lib.ones(1, 2)).sum().backward()
    opt.step()
    swap = dict(model.named_parameters())
    try:
        with lib.optim.swap_in_optimizer_params_and_state(opt, swap, make(opt.state_dict())):
            pass
    except RuntimeError as e:
        return str(e)


@pytest.mark.parametrize("make", [
    lambda sd: 5,
    lambda sd: {"state": [], "param_groups": sd["param_groups"]},
    lambda sd: {"state": {0: 1}, "param_groups": sd["param_groups"]},
    lambda sd: {"state": sd["state"], "param_groups": {}},
    lambda sd: {"state": sd["state"], "param_groups": sd["param_groups"] * 2},
    lambda sd: {"state": sd["state"], "param_groups": [dict(sd["param_groups"][0], params=[0])]},
    lambda sd: {"state": sd["state"], "param_groups": [dict(sd["param_groups"][0], extra=1)]},
    lambda sd: {"state": dict(sd["state"], **{"9": {}}), "param_groups": sd["param_groups"]},
])
def test_errors_match_torch(make):
    expected = _err(torch, make)
    assert expected is not None and _err(ember, make) == expected


def test_uninitialised_state_is_refused():
    opt = ember.optim.SGD(ember.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
        with ember.optim.swap_in_optimizer_params_and_state(opt, {}, {}):
            pass
