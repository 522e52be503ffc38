"""Optimizers given tensor hyper-parameters (``lr=ember.tensor(0.01)``, ``betas=(tensor, tensor)``,
as PyTorch allows, e.g. so an LR scheduler's changes reach a compiled step without recompiling).

Adam/AdamW and RMSprop passed a tensor ``lr`` (and Adam/NAdam/RAdam a tensor ``1 - beta2``) as
``addcdiv_``/``addcmul_``'s ``value``, which takes only a number: eager steps raised
AttributeError ('Tensor' object has no attribute 'astype')."""
import numpy as np
import pytest

import ember
from ember import dynamo

CASES = [
    ("Adam", {"lr": "t"}),
    ("Adam", {"lr": "t", "amsgrad": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": "t"}),
    ("RMSprop", {"lr": "t"}),
    ("RMSprop", {"lr": "t", "momentum": 0.9, "centered": True}),
    ("Adam", {"betas": "t"}),
    ("AdamW", {"betas": "t", "amsgrad": True}),
    ("NAdam", {"betas": "t"}),
    ("RAdam", {"betas": "t"}),
]


def _kwargs(kw, lib):
    out = dict(kw)
    if out.get("lr") == "t":
        out["lr"] = lib.tensor(0.01)
    if out.get("betas") == "t":
        out["betas"] = (lib.tensor(0.9), lib.tensor(0.99))
    return out


def _floats(kw):
    out = dict(kw)
    if out.get("lr") == "t":
        out["lr"] = 0.01
    if out.get("betas") == "t":
        out["betas"] = (0.9, 0.99)
    return out


def _run(lib, name, kw, w0, grads):
    p = lib.nn.Parameter(lib.tensor(w0.copy()))
    opt = getattr(lib.optim, name)([p], **kw)
    for g in grads:
        p.grad = lib.tensor(g.copy())
        opt.step()
    return p.detach().numpy()


def _data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((4, 3)).astype(np.float32),
            [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(6)])


@pytest.mark.parametrize("name,kw", CASES)
def test_tensor_hparams_step_like_floats(name, kw):
    w0, grads = _data()
    got = _run(ember, name, _kwargs(kw, ember), w0, grads)
    want = _run(ember, name, _floats(kw), w0, grads)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,kw", CASES)
def test_tensor_hparams_match_torch(name, kw):
    torch = pytest.importorskip("torch")
    w0, grads = _data()
    got = _run(ember, name, _kwargs(kw, ember), w0, grads)
    want = _run(torch, name, _kwargs(kw, torch), w0, grads)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name,kw", [CASES[0], CASES[3], CASES[6], CASES[8]])
def test_compiled_step_with_tensor_hparams_is_one_graph_and_matches_eager(name, kw):
    w0, grads = _data()
    want = _run(ember, name, _kwargs(kw, ember), w0, grads)
    p = ember.nn.Parameter(ember.tensor(w0.copy()))
    opt = getattr(ember.optim, name)([p], **_kwargs(kw, ember))
    dynamo.reset()

    def step():
        opt.step()

    compiled = ember.compile(step, backend="aot_eager")
    for g in grads:
        p.grad = ember.tensor(g.copy())
        compiled()
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6, atol=1e-7)
    p.grad = ember.tensor(grads[0].copy())
    e = dynamo.explain(step)()
    assert (e.graph_count, e.graph_break_count) == (1, 0)
