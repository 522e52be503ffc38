"""Adafactor and Muon against torch.optim: parameter trajectories from identical parameters
and gradients (float64 for Adafactor, tight; Muon's Newton-Schulz iteration runs in bfloat16 in
both, so its updates agree to bfloat16 rounding), state-dict layout and round trip, and the
errors torch raises."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

pytest.importorskip("torch")


def _data(shapes):
    rng = np.random.default_rng()
    return [rng.standard_normal(s) for s in shapes], rng


def _run(lib, name, kwargs, inits, grads_seq, dtype="float64"):
    """``steps`` of the optimizer with the given gradients; returns the parameter trajectory
    (concatenated) and the optimizer."""
    ps = [lib.nn.Parameter(lib.tensor(x.astype(dtype))) for x in inits]
    opt = getattr(lib.optim, name)(ps, **kwargs)
    traj = []
    for grads in grads_seq:
        for p, g in zip(ps, grads):
            p.grad = lib.tensor(g.astype(dtype))
        opt.step()
        traj.append(np.concatenate([p.detach().numpy().ravel() for p in ps]))
    return np.array(traj), opt, ps


def _compare_state(se, st, rtol, atol):
    """Same keys, same nesting, same values (tensors compared as arrays)."""
    assert se.keys() == st.keys()
    assert se["param_groups"] == [
        {k: v for k, v in g.items()} for g in st["param_groups"]] or \
        [sorted(g) for g in se["param_groups"]] == [sorted(g) for g in st["param_groups"]]
    for ge, gt in zip(se["param_groups"], st["param_groups"]):
        assert sorted(ge) == sorted(gt)
        for k in gt:
            if k != "params":
                assert ge[k] == gt[k], k
        assert ge["params"] == gt["params"]
    assert sorted(se["state"]) == sorted(st["state"])
    for i in st["state"]:
        a, b = se["state"][i], st["state"][i]
        assert sorted(a) == sorted(b)
        for k in b:
            assert tuple(a[k].shape) == tuple(b[k].shape), k
            assert a[k].dtype.name == str(b[k].dtype).replace("torch.", ""), k
            np.testing.assert_allclose(a[k].numpy().astype(np.float64), b[k].float().numpy().astype(np.float64)
                                       if b[k].dtype == torch.bfloat16 else b[k].numpy(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------- Adafactor
ADAFACTOR_OPTS = [
    {},
    {"lr": 0.05, "weight_decay": 0.1},
    {"maximize": True, "eps": (1e-20, 1e-3), "d": 2.0},
    {"beta2_decay": -0.5, "lr": 0.3},
]


@needs_torch
@pytest.mark.parametrize("kwargs", ADAFACTOR_OPTS)
def test_adafactor_matches_torch(kwargs):
    shapes = [(3, 4), (5,), (2, 3, 4), ()]
    inits, rng = _data(shapes)
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    te, oe, _ = _run(ember, "Adafactor", kwargs, inits, grads)
    tt, ot, _ = _run(torch, "Adafactor", kwargs, inits, grads)
    np.testing.assert_allclose(te, tt, rtol=1e-12, atol=1e-12)
    _compare_state(oe.state_dict(), ot.state_dict(), 1e-12, 1e-12)


@needs_torch
def test_adafactor_float32_and_state_dict_round_trip():
    shapes = [(4, 3), (3,)]
    inits, rng = _data(shapes)
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(6)]
    te, _, _ = _run(ember, "Adafactor", {}, inits, grads, "float32")
    tt, _, _ = _run(torch, "Adafactor", {}, inits, grads, "float32")
    np.testing.assert_allclose(te, tt, rtol=1e-5, atol=1e-6)
    # three steps, save, a fresh optimizer loads the state and takes the other three
    _, oe, pe = _run(ember, "Adafactor", {"lr": 0.05}, inits, grads[:3])
    sd = copy.deepcopy(oe.state_dict())
    opt2 = ember.optim.Adafactor(pe, lr=0.05)
    opt2.load_state_dict(sd)
    for grads_t in grads[3:]:
        for p, g in zip(pe, grads_t):
            p.grad = ember.tensor(g)
        opt2.step()
    full, _, _ = _run(torch, "Adafactor", {"lr": 0.05}, inits, grads)
    np.testing.assert_allclose(np.concatenate([p.detach().numpy().ravel() for p in pe]), full[-1], rtol=1e-12,
                               atol=1e-12)
    assert opt2.state_dict()["state"][0]["step"].item() == 6.0


@needs_torch
def test_adafactor_errors():
    p = [ember.nn.Parameter(ember.randn(2, 2))]
    tp = [torch.nn.Parameter(torch.randn(2, 2))]
    for kw in [{"lr": -1.0}, {"beta2_decay": 0.5}, {"eps": (-1.0, 1e-3)}, {"eps": (None, -1.0)}, {"d": 0.5},
               {"weight_decay": -0.1}, {"lr": torch.tensor([0.1, 0.2])}]:
        with pytest.raises(ValueError) as te:
            torch.optim.Adafactor(tp, **kw)
        ekw = {k: (ember.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        with pytest.raises(ValueError) as ee:
            ember.optim.Adafactor(p, **ekw)
        assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- Muon
MUON_OPTS = [
    {},
    {"lr": 0.02, "nesterov": False, "weight_decay": 0.0},
    {"lr": 0.01, "adjust_lr_fn": "match_rms_adamw", "momentum": 0.9},
    {"lr": 0.01, "adjust_lr_fn": "original", "ns_steps": 3, "ns_coefficients": (2.0, -1.5, 0.5)},
]


@needs_torch
@pytest.mark.parametrize("kwargs", MUON_OPTS)
def test_muon_matches_torch(kwargs):
    shapes = [(6, 4), (3, 8), (5, 5)]
    inits, rng = _data(shapes)
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(5)]
    te, oe, _ = _run(ember, "Muon", kwargs, inits, grads)
    tt, ot, _ = _run(torch, "Muon", kwargs, inits, grads)
    # the orthogonalised update is bfloat16 in both: agreement to a few bfloat16 ulps of lr * O
    lr = kwargs.get("lr", 1e-3) * (0.2 * math.sqrt(8) if kwargs.get("adjust_lr_fn") == "match_rms_adamw"
                                   else math.sqrt(6 / 4))
    np.testing.assert_allclose(te, tt, rtol=0, atol=lr * 0.02)
    _compare_state(oe.state_dict(), ot.state_dict(), 1e-12, 1e-12)   # the momentum buffers are exact


@needs_torch
def test_newton_schulz_matches_torch_and_orthogonalises():
    from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns

    from ember.optim.muon import _zeropower_via_newtonschulz as ember_ns
    g = np.random.default_rng().standard_normal((8, 5))
    oe = ember_ns(ember.tensor(g), (3.4445, -4.7750, 2.0315), 5, 1e-7)
    ot = torch_ns(torch.tensor(g), (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert oe.dtype is ember.bfloat16 and tuple(oe.shape) == (8, 5)
    np.testing.assert_allclose(oe.float().numpy(), ot.float().numpy(), rtol=0, atol=0.03)
    s = np.linalg.svd(oe.float().numpy(), compute_uv=False)
    assert s.min() > 0.4 and s.max() < 1.6          # singular values pushed towards 1


@needs_torch
def test_muon_errors():
    with pytest.raises(ValueError) as te:
        torch.optim.Muon([torch.nn.Parameter(torch.randn(3))])
    with pytest.raises(ValueError) as ee:
        ember.optim.Muon([ember.nn.Parameter(ember.randn(3))])
    assert str(ee.value).replace("ember.", "torch.") == str(te.value)
    w, tw = ember.nn.Parameter(ember.randn(2, 2)), torch.nn.Parameter(torch.randn(2, 2))
    for kw in [{"lr": -1.0}, {"momentum": -0.5}, {"weight_decay": -1.0}, {"adjust_lr_fn": "foo"}]:
        with pytest.raises(ValueError) as te:
            torch.optim.Muon([tw], **kw)
        with pytest.raises(ValueError) as ee:
            ember.optim.Muon([w], **kw)
        assert str(ee.value) == str(te.value)
    for kw, msg in [({"ns_steps": 100}, "less than 100"), ({"ns_coefficients": (1.0, 2.0)}, "exactly 3")]:
        opt = ember.optim.Muon([w], **kw)
        w.grad = ember.randn(2, 2)
        with pytest.raises(ValueError, match=msg):
            opt.step()


@needs_torch
@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_complex_parameters_rejected_as_torch(name):
    z = np.ones((2, 2)) + 1j * np.random.default_rng().standard_normal((2, 2))
    msgs = []
    for lib in (ember, torch):
        p = lib.nn.Parameter(lib.tensor(z))
        p.grad = lib.tensor(z)
        with pytest.raises(RuntimeError) as e:
            getattr(lib.optim, name)([p]).step()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] == f"{name} does not support complex parameters"
