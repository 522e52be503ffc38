"""Edge values of eager kernels against PyTorch (session 46, round 2): float32 var/std near the
float32 range, lgamma/digamma gradients at their poles, and the rounding of operands promoted to
a half type in mul / div / floor_divide."""
import math

import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


# ---------------------------------------------------------------- var / std in float64 moments
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_float32_var_std_near_range_is_finite_like_torch(name):
    torch = _torch()
    vals = [1e38, -1e38, 3e38, 0.5, -2.5e38, 7.0]
    got = getattr(ember, name)(ember.tensor(vals))
    want = getattr(torch, name)(torch.tensor(vals))
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == ember.float32
        assert g.item() == w.item()
    assert math.isfinite(got[0].item()) == name.startswith("std")   # the variance itself overflows


def test_float32_var_dim_near_range_matches_torch():
    torch = _torch()
    rows = [[1e38, -1e38, 3e38, 0.5], [2e19, -3e19, 1e19, 4e19], [1.5, -2.25, 3.125, 0.75]]
    for kw in ({"dim": 1}, {"dim": 1, "correction": 0}, {"dim": 1, "keepdim": True}):
        got = ember.std(ember.tensor(rows), **kw)
        want = torch.std(torch.tensor(rows), **kw)
        assert got.tolist() == want.tolist()


# ---------------------------------------------------------------- lgamma / digamma at the poles
def _grads(T, x, dtype):
    t = T.tensor(x, dtype=dtype, requires_grad=True)
    gl = T.autograd.grad(T.lgamma(t).sum(), [t])[0]
    t = T.tensor(x, dtype=dtype, requires_grad=True)
    gd = T.autograd.grad(T.digamma(t).sum(), [t])[0]
    return gl.tolist(), gd.tolist()


def _same(a, b):
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def test_lgamma_digamma_grad_at_poles_match_torch():
    """lgamma' = digamma and digamma' = polygamma(1, .) at 0, -0 and the negative integers
    (where() used to give 0 there)."""
    torch = _torch()
    x = [0.0, -0.0, -1.0, -3.0, -7.0, -1e6]
    el, ed = _grads(ember, x, ember.float64)
    tl, td = _grads(torch, x, torch.float64)
    assert _same(el, tl), (el, tl)
    assert _same(ed, td), (ed, td)
    assert el[0] == -math.inf and el[1] == math.inf and all(math.isnan(v) for v in el[2:])
    assert all(math.isfinite(v) and v > 1e20 for v in ed[2:])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lgamma_digamma_grad_off_poles_unchanged(dtype):
    """Off the poles the gradients stay finite and close to torch's (no 0 * inf leaking in)."""
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    x = ((torch.rand(64, generator=g, dtype=torch.float64) - 0.5) * 20).tolist()
    el, ed = _grads(ember, x, getattr(ember, dtype))
    tl, td = _grads(torch, x, getattr(torch, dtype))
    tol = 1e-9 if dtype == "float64" else 1e-4
    for e, t in ((el, tl), (ed, td)):
        for a, b in zip(e, t):
            assert math.isfinite(a)
            assert abs(a - b) <= tol * max(1.0, abs(b))


@pytest.mark.parametrize("op", ["lgamma", "digamma"])
def test_lgamma_digamma_grad_at_poles_compiled_matches_eager(op):
    def f(x):
        return getattr(ember, op)(x * 1.0)

    cf = ember.compile(f, backend="inductor")
    vals = [0.0, -0.0, -1.0, -3.0, 2.5, -2.5]
    out = []
    for fn in (f, cf):
        x = ember.tensor(vals, dtype=ember.float64, requires_grad=True)
        out.append(ember.autograd.grad(fn(x).sum(), [x])[0].tolist())
    assert _same(out[0], out[1]), out


# ---------------------------------------------------------------- int operands promoted to half
def _cases(T, dt):
    h = T.tensor([3.0, 7.0], dtype=dt)
    a = T.tensor([6156.0, 6156.0], dtype=dt)
    big = T.tensor(2 ** 63 - 1)
    return {
        "fd_int0d_first": T.floor_divide(T.tensor(2051), h),
        "fd_int1d_first": T.floor_divide(T.tensor([2051, 2051]), h),
        "fd_int64max": T.floor_divide(big, h),
        "fd_int1d_second": T.floor_divide(a, T.tensor([2053, 2053])),
        "fd_int0d_second": T.floor_divide(a, T.tensor(2053)),
        "fd_size1_second": T.floor_divide(a, T.tensor([2053])),
        "fd_pyint_second": T.floor_divide(a, 2053),
        "trunc_int1d_second": T.div(a, T.tensor([2053, 2053]), rounding_mode="trunc"),
        "floor_int0d_first": T.div(T.tensor(2051), h, rounding_mode="floor"),
        "div_int1d_second": T.div(a, T.tensor([2053, 2053])),
        "div_int0d_second": T.div(a, T.tensor(2053)),
        "div_f32_0d_first": T.div(T.tensor(2051.0), h),
        "mul_int1d_second": T.mul(h, T.tensor([2051, 2051])),
        "mul_int0d_first": T.mul(T.tensor(2051), h),
        "mul_int0d_second": T.mul(h, T.tensor(2051)),
        "mul_pyint": T.mul(h, 2051),
    }


def test_half_int_operand_rounding_float16_matches_torch():
    """torch's CPU TensorIterator casts an int64 operand to float16 before mul/div/floor_divide
    unless it is the one-element second operand (read unrounded by the kernel's scalar path)."""
    torch = _torch()
    got = {k: v.tolist() for k, v in _cases(ember, ember.float16).items()}
    want = {k: v.tolist() for k, v in _cases(torch, torch.float16).items()}
    for k in want:
        assert _same(got[k], want[k]), (k, got[k], want[k])
    assert all(math.isnan(v) for v in got["fd_int64max"])


def test_half_int_operand_rounding_bfloat16_mul_div():
    torch = _torch()
    for T, dt in ((ember, ember.bfloat16), (torch, torch.bfloat16)):
        h = T.tensor([3.0, 7.0], dtype=dt)
        r = (T.mul(T.tensor(259), h).tolist(), T.mul(h, T.tensor([259, 259])).tolist(),
             T.mul(h, T.tensor(259)).tolist(), T.div(T.tensor([259, 259]), h).tolist(),
             T.floor_divide(T.tensor(2 ** 63 - 1), h).tolist())
        if T is ember:
            got = r
        else:
            want = r
    for g, w in zip(got, want):
        assert _same(g, w), (got, want)
