"""The native fused Adam/AdamW step (``optim/_fused_native.py``) against the op-by-op step
(``fused=False``): the same numbers bit for bit, float32 and float64, every option, several
steps, tensors spanning several of the kernel's chunks; the cases it must decline."""
import itertools

import numpy as np
import pytest

import ember
from ember.optim import _fused_native

pytestmark = pytest.mark.skipif(_fused_native.lib() is None, reason="no C++ compiler for the native step")

SHAPES = [(3, 5), (70000,), (1,), (130, 257)]     # 70000 and 33410 elements span several chunks


def _run(opt_name, dtype, kwargs, fused, steps=4, seed=0):
    rng = np.random.default_rng(seed)
    params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(dtype))) for s in SHAPES]
    opt = getattr(ember.optim, opt_name)(params, fused=fused, **kwargs)
    for _ in range(steps):
        for p in params:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(dtype) * rng.uniform(0.01, 10))
        opt.step()
    state = [{k: v.numpy().copy() for k, v in opt.state[p].items()} for p in params]
    return [p.detach().numpy().copy() for p in params], state


COMBOS = [dict(zip(("weight_decay", "amsgrad", "maximize", "betas"), c)) for c in itertools.product(
    [0.0, 0.1], [False, True], [False, True], [(0.9, 0.999), (0.3, 0.5), (0.7, 0.9)])]


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", COMBOS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_fused_step_is_bitwise_the_op_by_op_step(opt_name, dtype, kwargs):
    # betas[0] = 0.3: the lerp weight 1 - beta1 >= 0.5 takes lerp's other branch
    got_p, got_s = _run(opt_name, dtype, dict(lr=0.03, eps=1e-6, **kwargs), fused=None)
    want_p, want_s = _run(opt_name, dtype, dict(lr=0.03, eps=1e-6, **kwargs), fused=False)
    for g, w in zip(got_p, want_p):
        np.testing.assert_array_equal(g, w)
    for gs, ws in zip(got_s, want_s):
        assert gs.keys() == ws.keys()
        for k in gs:
            np.testing.assert_array_equal(gs[k], ws[k])


def test_fused_step_is_taken_by_default_and_counts_steps(monkeypatch):
    calls = []
    real = _fused_native.adam_step
    monkeypatch.setattr(_fused_native, "adam_step", lambda *a: (calls.append(1), real(*a))[1])
    p = ember.nn.Parameter(ember.randn(4, 4))
    opt = ember.optim.AdamW([p], lr=0.1)
    for _ in range(3):
        p.grad = ember.randn(4, 4)
        opt.step()
    assert len(calls) == 3 and float(opt.state[p]["step"]) == 3.0


def test_declines_what_it_cannot_take():
    p = ember.nn.Parameter(ember.randn(4, 6))
    p.grad = ember.randn(6, 4).t()                    # a transposed gradient
    assert "non-contiguous" in _fused_native.why_not(([p], [p.grad]))
    before = p.detach().numpy().copy()
    ember.optim.Adam([p], lr=0.1).step()              # fused=None: the op-by-op step runs
    assert not np.array_equal(p.detach().numpy(), before)
    with pytest.raises(RuntimeError, match="fused=True.*non-contiguous"):
        ember.optim.Adam([p], lr=0.1, fused=True).step()
    h = ember.nn.Parameter(ember.randn(3).to(ember.float16))
    h.grad = ember.randn(3).to(ember.float16)
    assert "float16" in _fused_native.why_not(([h], [h.grad]))
    ember.optim.AdamW([h], lr=0.1).step()             # float16 runs op by op
