"""Half-precision matrix products: the eager kernels (and torch) multiply float16/bfloat16 in
float32 and add addmm's ``self`` before the one rounding; the decompositions do the same, so
compiled code (aot_eager and the inductor, which has no half GEMM) matches eager bit for bit."""
import numpy as np
import pytest

import ember
from ember import dynamo

torch = pytest.importorskip("torch")

FUNCS = {
    "addmm": lambda s, a, b: ember.addmm(s, a, b),
    "addmm_scaled": lambda s, a, b: ember.addmm(s, a, b, alpha=0.5, beta=2),
    "baddbmm": lambda s, a, b: ember.baddbmm(s, a[None], b[None]),
    "mm": lambda s, a, b: a @ b,
    "mv": lambda s, a, b: a @ b[:, 0],
    "dot": lambda s, a, b: a[0] @ b[:, 0],
    "linear": lambda s, a, b: ember.nn.functional.linear(a, b.t(), s),
}


def _data(dt):
    r = np.random.default_rng(7)
    s = (r.standard_normal(8) * 3).astype(np.float32)
    a = r.standard_normal((16, 64)).astype(np.float32)
    b = r.standard_normal((64, 8)).astype(np.float32)
    return [ember.tensor(v).to(dt) for v in (s, a, b)]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_eager_addmm_rounds_once_like_torch(dt):
    s, a, b = _data(getattr(ember, dt))
    ts, ta, tb = (torch.tensor(v.float().numpy()).to(getattr(torch, dt)) for v in (s, a, b))
    for alpha, beta in ((1, 1), (0.5, 2)):
        e = ember.addmm(s, a, b, alpha=alpha, beta=beta)
        t = torch.addmm(ts, ta, tb, alpha=alpha, beta=beta)
        assert e.dtype == getattr(ember, dt)
        np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())
        e = ember.baddbmm(s, a[None], b[None], alpha=alpha, beta=beta)
        t = torch.baddbmm(ts, ta[None], tb[None], alpha=alpha, beta=beta)
        np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_compiled_half_products_match_eager(dt, backend):
    args = _data(getattr(ember, dt))
    for name, f in FUNCS.items():
        dynamo.reset()
        eager = f(*args)
        got = ember.compile(f, backend=backend, fullgraph=True)(*args)
        assert got.dtype == eager.dtype, name
        np.testing.assert_array_equal(got.float().numpy(), eager.float().numpy(), err_msg=name)


def test_bfloat16_linear_compiles_without_fallback(caplog):
    s, a, b = _data(ember.bfloat16)
    lin = ember.nn.Linear(64, 8).to(ember.bfloat16)
    cm = ember.compile(lin)
    with caplog.at_level("WARNING"):
        out = cm(a)
    assert not [r for r in caplog.records if "running it eagerly" in r.getMessage()]
    np.testing.assert_array_equal(out.float().detach().numpy(), lin(a).float().detach().numpy())
