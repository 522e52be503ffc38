"""ember.autocast (cpu) op dtypes and ember.amp.GradScaler against torch (session 48).

autocast: PyTorch's CPU float32 list holds the linear algebra and FFT ops, trace, polar,
view_as_complex and the 3-d poolings, and not dist / renorm / cumprod (float32 on CUDA only);
its "promote" policy casts cat / stack / index_copy inputs to the widest floating dtype.
GradScaler: PyTorch's assertions (update/step before scale, an optimizer without gradients,
new_scale checks, pickling mid-iteration), growth that would overflow float32, sparse gradients."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _mats():
    rng = np.random.default_rng()
    s = np.eye(4) * 3 + 0.1 * rng.standard_normal((4, 4))
    a = rng.standard_normal((4, 4))
    v = rng.standard_normal((4, 3))
    x5 = rng.standard_normal((1, 2, 4, 4, 4))
    x4 = rng.standard_normal((2, 3, 6, 6))
    return (s + s.T) / 2, a, v, x5, x4


OPS = {
    "dist": lambda l, t, m: l.dist(t(m[1]), t(m[0])),
    "renorm": lambda l, t, m: t(m[1]).renorm(2, 0, 1.0),
    "cumprod": lambda l, t, m: t(m[1]).cumprod(0),
    "trace": lambda l, t, m: l.trace(t(m[1])),
    "polar": lambda l, t, m: l.polar(t(m[0]).abs(), t(m[1])),
    "view_as_complex": lambda l, t, m: l.view_as_complex(t(m[2][:, :2].copy())),
    "inv": lambda l, t, m: l.linalg.inv(t(m[0])),
    "cholesky": lambda l, t, m: l.linalg.cholesky(t(m[0])),
    "qr": lambda l, t, m: l.linalg.qr(t(m[1]))[0],
    "svd": lambda l, t, m: l.linalg.svd(t(m[1]))[1],
    "eigh": lambda l, t, m: l.linalg.eigh(t(m[0]))[0],
    "eig": lambda l, t, m: l.linalg.eig(t(m[1]))[0],
    "solve": lambda l, t, m: l.linalg.solve(t(m[0]), t(m[2])),
    "cholesky_solve": lambda l, t, m: l.cholesky_solve(t(m[2]), t(np.linalg.cholesky(m[0]))),
    "geqrf": lambda l, t, m: l.geqrf(t(m[1]))[0],
    "avg_pool3d": lambda l, t, m: l.nn.functional.avg_pool3d(t(m[3]), 2),
    "max_pool3d": lambda l, t, m: l.nn.functional.max_pool3d(t(m[3]), 2),
    "avg_pool2d": lambda l, t, m: l.nn.functional.avg_pool2d(t(m[4]), 2),
    "max_pool2d": lambda l, t, m: l.nn.functional.max_pool2d(t(m[4]), 2),
    "index_copy": lambda l, t, m: l.tensor(m[1]).float().index_copy(0, l.tensor([0, 2]), t(m[1][:2])),
    "cat": lambda l, t, m: l.cat([t(m[1]), l.tensor(m[1]).float()]),
    "stack": lambda l, t, m: l.stack([l.tensor(m[1]).float(), t(m[1])]),
    "cat_same": lambda l, t, m: l.cat([t(m[1]), t(m[0])]),
    "matmul": lambda l, t, m: t(m[1]) @ l.tensor(m[0]).float(),
}


def _dtype_or_error(lib, fn, dt, mats):
    def t(a):
        return lib.tensor(a).to(getattr(lib, dt))
    try:
        with lib.autocast("cpu", dtype=getattr(lib, dt)):
            return str(fn(lib, t, mats).dtype).split(".")[-1]
    except RuntimeError:
        return "error"


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", list(OPS))
def test_cpu_autocast_output_dtype_as_torch(name, dt):
    mats = _mats()
    assert _dtype_or_error(ember, OPS[name], dt, mats) == _dtype_or_error(torch, OPS[name], dt, mats)


def test_autocast_float32_results_are_the_float32_op():
    """The float32-listed ops compute in float32 from the low-precision inputs (values as the
    float32 op of the cast inputs, not a bfloat16 computation)."""
    s = _mats()[0]
    xb = ember.tensor(s).to(ember.bfloat16)
    with ember.autocast("cpu"):
        r = ember.linalg.inv(xb)
    expected = np.linalg.inv(xb.float().numpy().astype(np.float64))
    np.testing.assert_allclose(r.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_promote_of_float16_with_bfloat16_raises_as_torch():
    msgs = []
    for lib in (ember, torch):
        a = lib.ones(2, 2)
        with pytest.raises(RuntimeError) as info:
            with lib.autocast("cpu"):
                lib.cat([a.half(), a.bfloat16()])
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def _scaler_errors(lib, case):
    sc = lib.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    w = lib.nn.Parameter(lib.randn(3))
    opt = lib.optim.SGD([w], lr=0.01)
    try:
        if case == "update_before_scale":
            sc.update()
        elif case == "step_before_scale":
            w.grad = lib.randn(3)
            sc.step(opt)
        elif case == "unscale_before_scale":
            sc.unscale_(opt)
        elif case == "no_grads":
            sc.scale(w.sum())
            sc.step(opt)
        elif case == "update_no_grads":
            sc.scale(w.sum())
            sc.unscale_(opt)
            sc.update()
        elif case == "new_scale_numel":
            sc.scale(w.sum())
            sc.update(lib.tensor([2.0, 3.0]))
        elif case == "new_scale_grad":
            sc.scale(w.sum())
            sc.update(lib.tensor(2.0).requires_grad_())
        elif case == "growth_factor":
            lib.amp.GradScaler("cpu", growth_factor=1.0)
        elif case == "backoff_factor":
            lib.amp.GradScaler("cpu", backoff_factor=1.0)
        elif case == "pickle_mid_iteration":
            sc.scale(w.sum()).backward()
            sc.unscale_(opt)
            pickle.dumps(sc)
        return "no error"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("case", ["update_before_scale", "step_before_scale", "unscale_before_scale", "no_grads",
                                  "update_no_grads", "new_scale_numel", "new_scale_grad", "growth_factor",
                                  "backoff_factor", "pickle_mid_iteration"])
def test_grad_scaler_errors_as_torch(case):
    assert _scaler_errors(ember, case) == _scaler_errors(torch, case)


def _scaler_run(lib, w0, xs, **kw):
    sc = lib.amp.GradScaler("cpu", **kw)
    w = lib.nn.Parameter(lib.tensor(w0))
    opt = lib.optim.SGD([w], lr=0.01)
    out = []
    for i, x in enumerate(xs):
        opt.zero_grad()
        sc.scale(((lib.tensor(x) * w).sum() * (float("inf") if i % 4 == 1 else 1.0))).backward()
        sc.step(opt)
        sc.update()
        out.append((sc.get_scale(), sc.state_dict()["_growth_tracker"]))
    return out, w.detach().numpy()


def test_grad_scaler_scale_sequence_as_torch():
    """Backoff and growth with factors that are not powers of two (the products are formed in
    double and rounded once to float32, as PyTorch's kernel), and a growth that would overflow
    float32 leaving the scale as it is (ember grew it to inf)."""
    rng = np.random.default_rng()
    w0 = rng.standard_normal(3).astype(np.float32)
    xs = [rng.standard_normal(3).astype(np.float32) for _ in range(9)]
    for kw in (dict(init_scale=1000.1, growth_interval=1, growth_factor=1.3, backoff_factor=0.3),
               dict(init_scale=3e38, growth_interval=1, growth_factor=2.0)):
        (se, we), (st, wt) = _scaler_run(ember, w0, xs, **kw), _scaler_run(torch, w0, xs, **kw)
        assert se == st
        # (PyTorch's CPU add_ with alpha fuses the multiply-add: the float32 steps agree to an ulp)
        np.testing.assert_allclose(we, wt, rtol=1e-6, atol=1e-7)


def test_grad_scaler_unscales_sparse_gradients():
    got = []
    for lib in (ember, torch):
        sc = lib.amp.GradScaler("cpu", init_scale=8.0)
        emb = lib.nn.Embedding(5, 2, sparse=True)
        opt = lib.optim.SGD(emb.parameters(), lr=0.1)
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(np.arange(10.0).reshape(5, 2)))
        sc.scale(emb(lib.tensor([1, 2, 2])).pow(2).sum()).backward()
        sc.unscale_(opt)
        g = emb.weight.grad
        got.append((g.is_sparse, g.to_dense().numpy().tolist()))
        sc.step(opt)
        sc.update()
        got.append(sc.get_scale())
    assert got[:2] == got[2:]
