"""Batch norm with a float16/bfloat16 input and float32 parameters and running buffers (what
autocast runs): torch's mixed-type kernel keeps the statistics in float32 -- the saved mean and
rstd, the running-stat update and the backward's arithmetic -- and returns the input's dtype."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _run(ns, dt, training, x, g, w):
    xx = ns.tensor(x).to(getattr(ns, dt)).requires_grad_()
    ww = ns.tensor(w).requires_grad_()
    bb = ns.zeros(w.shape[0], requires_grad=True)
    rm = ns.zeros(w.shape[0]) + 0.1
    rv = ns.ones(w.shape[0]) * 1.5
    o = ns.nn.functional.batch_norm(xx, rm, rv, ww, bb, training)
    o.backward(ns.tensor(g).to(getattr(ns, dt)))
    stats = ns.native_batch_norm(xx.detach(), ww.detach(), bb.detach(), rm.clone(), rv.clone(), training, 0.1, 1e-5)
    return o, xx.grad, ww.grad, bb.grad, rm, rv, stats


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_mixed_type_batch_norm_matches_torch(dt, training):
    r = np.random.default_rng(3)
    x = r.standard_normal((6, 16, 3)).astype(np.float32)
    g = r.standard_normal((6, 16, 3)).astype(np.float32)
    w = r.standard_normal(16).astype(np.float32)
    t = _run(torch, dt, training, x, g, w)
    e = _run(ember, dt, training, x, g, w)
    names = ["out", "x.grad", "w.grad", "b.grad", "running_mean", "running_var"]
    for name, a, b in zip(names, t[:6], e[:6]):
        assert str(b.dtype).split(".")[-1] == str(a.dtype).split(".")[-1], name
        # the half outputs may sit one float16 ulp apart (torch folds w * rstd first); the
        # float32 statistics and parameter gradients agree to float32 rounding
        tol = 2e-3 if name in ("out", "x.grad") else 1e-6
        np.testing.assert_allclose(b.detach().float().numpy(), a.detach().float().numpy(), rtol=tol,
                                   atol=2e-6, err_msg=name)
    assert e[6][1].dtype == ember.float32 and e[6][2].dtype == ember.float32
    if training:
        np.testing.assert_allclose(e[6][1].numpy(), t[6][1].numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_mixed_type_batch_norm_compiled_matches_eager(backend):
    r = np.random.default_rng(4)
    x = ember.tensor(r.standard_normal((5, 6, 4)).astype(np.float32)).bfloat16()

    def make():
        ember.manual_seed(0)
        return ember.nn.BatchNorm1d(6)

    m1, m2 = make(), make()
    cm = ember.compile(m2, backend=backend)
    for _ in range(2):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        o1, o2 = m1(a), cm(b)
        assert o2.dtype == ember.bfloat16
        np.testing.assert_array_equal(o2.detach().float().numpy(), o1.detach().float().numpy())
        (o1.float() ** 2).sum().backward()
        (o2.float() ** 2).sum().backward()
        # (the inductor's float32 reductions may sum in another order: a bfloat16 ulp apart)
        np.testing.assert_allclose(b.grad.float().numpy(), a.grad.float().numpy(), rtol=2e-2, atol=1e-5)
        assert m2.weight.grad.dtype == ember.float32
        np.testing.assert_allclose(m2.weight.grad.numpy(), m1.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m2.running_mean.numpy(), m1.running_mean.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m2.running_var.numpy(), m1.running_var.numpy(), rtol=1e-6, atol=1e-7)
