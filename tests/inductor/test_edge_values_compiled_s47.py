"""Edge values through ``ember.compile`` (session 47): the compiled result equals eager's (and
PyTorch's) where they differed.

* float16/bfloat16 mul / div / floor and trunc division with an integer (or float32) tensor
  operand: the kernel casts it to the half dtype first (TensorIterator), except a one-element
  second operand, read unrounded; the compiled graph multiplied by the unrounded integer;
* float32 var / std / var_mean / std_mean accumulate in float64 (torch's CPU Welford, eager):
  a row of values near 1e37 gave inf;
* nextafter / gcd / lcm (eager kernels kept whole) under ``dynamic=True``: no layout for their
  extern call with symbolic sizes, so the graph ran eagerly.
"""
import math

import numpy as np
import pytest

import ember


def _bits(t):
    """A float tensor's values as a list where NaN == NaN and -0.0 != 0.0."""
    t = t.detach()
    if t.dtype.is_floating_point and t.dtype.itemsize == 2:
        t = t.float()
    return [("nan" if math.isnan(v) else (v, math.copysign(1, v))) if isinstance(v, float) else v
            for v in np.asarray(t.numpy()).ravel().tolist()]


def _compiled(fn, dynamic=False):
    ember.dynamo.reset()
    return ember.compile(fn, backend="inductor", dynamic=dynamic)


def _torch_twin(torch, t):
    """``t`` as a torch tensor (0-d stays 0-d: ``np.ascontiguousarray`` would make it 1-d)."""
    if t.dtype.itemsize == 2:
        return torch.from_numpy(np.array(t.float().numpy())).to(getattr(torch, t.dtype.name))
    return torch.from_numpy(np.array(t.numpy()))


def _half_and_ints(dt, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(24) * 4).astype(np.float32)
    a[:4] = [1.5, -0.5, 3.0, 0.25]
    ints = rng.integers(-200000, 200000, 24)
    ints[:4] = [2049, 4097, 65519, 100001]        # not representable in float16 / bfloat16
    ints[ints == 0] = 7
    return ember.tensor(a).to(getattr(ember, dt)), ember.tensor(ints)


_MUL_DIV = {
    "mul": lambda m, a, b: a * b,
    "rmul": lambda m, a, b: b * a,
    "div": lambda m, a, b: a / b,
    "rdiv": lambda m, a, b: b / a,
    "floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "rfloor": lambda m, a, b: m.floor_divide(b, a),
    "trunc": lambda m, a, b: m.div(b, a, rounding_mode="trunc"),
    "trunc2": lambda m, a, b: m.div(a * 64, b, rounding_mode="trunc"),
    "floor2": lambda m, a, b: m.div(a * 64, b, rounding_mode="floor"),
}


_OTHERS = ("int64", "int32", "float32", "int64_0d", "float64_0d")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_compiled_half_mul_div_rounds_the_other_operand(dt):
    torch = pytest.importorskip("torch")
    a, ints = _half_and_ints(dt, 1)
    bs = (ints, ints.to(ember.int32), ints.float() + 0.3, ember.tensor(2049), ember.tensor(4097.3, dtype=ember.float64))
    ops = sorted(_MUL_DIV)
    # (one graph for every operand kind and op: a compile each made the test slow)
    got = _compiled(lambda a, *bs: tuple(_MUL_DIV[op](ember, a, b) for b in bs for op in ops))(a, *bs)
    ta = _torch_twin(torch, a)
    cases = [(other, b, op) for other, b in zip(_OTHERS, bs) for op in ops]
    for (other, b, op), g in zip(cases, got):
        want = _MUL_DIV[op](torch, ta, _torch_twin(torch, b))
        assert str(g.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (other, op)
        assert _bits(g) == _bits(_MUL_DIV[op](ember, a, b)), (other, op)
        assert _bits(g) == [("nan" if math.isnan(v) else (v, math.copysign(1, v)))
                            for v in want.float().numpy().ravel().tolist()], (other, op)


def test_compiled_half_times_int_tensor_example():
    # 100001 is float16 inf: 0.25 * inf, not 0.25 * 100001 (25000)
    a = ember.tensor([1.5, 0.25], dtype=ember.float16)
    b = ember.tensor([2049, 100001])
    got = _compiled(lambda a, b: a * b)(a, b)
    assert got.float().tolist() == [3072.0, math.inf]


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_compiled_float32_var_std_of_huge_values_stay_finite(dim):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = ember.tensor((rng.standard_normal((40, 70)) * 3e37 + 5e37).astype(np.float32))
    kw = {} if dim is None else {"dim": dim}
    fns = ("std", "std_mean", "var_mean")
    f = lambda x: tuple(getattr(ember, fn)(x, **kw) for fn in fns)      # noqa: E731
    for fn, e, c in zip(fns, f(x), _compiled(f)(x)):
        e, c = (e if isinstance(e, tuple) else (e,)), (c if isinstance(c, tuple) else (c,))
        for g, w in zip(c, e):
            assert _bits(g) == _bits(w), fn
        std_or_var = c[0].numpy()
        if fn == "var_mean":
            assert np.isinf(std_or_var).all()                 # past float32's range, as torch
        else:
            assert np.isfinite(std_or_var).all()
        if fn != "std" and dim is not None:               # (torch's 1-d full std: its mean overflows)
            t = getattr(torch, fn)(torch.from_numpy(x.numpy()), **kw)
            np.testing.assert_array_equal(c[1].numpy(), t[1].numpy())
            np.testing.assert_array_equal(std_or_var, t[0].numpy())


def test_compiled_float32_var_matches_eager_bit_for_bit():
    # the float64 moments: the float32 two-pass variance was an ulp off eager on ~5% of rows
    x = ember.tensor((np.random.default_rng(4).standard_normal((300, 500)) * 3 + 1).astype(np.float32))
    for f in (lambda x: ember.var(x, dim=1), lambda x: ember.std(x, dim=0, correction=0),
              lambda x: ember.var_mean(x, dim=1, keepdim=True)):
        got, want = _compiled(f)(x), f(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert _bits(g) == _bits(w)


def _gcd_args(n, k):
    rng = np.random.default_rng(10 + k)
    a = rng.integers(-10 ** 6, 10 ** 6, (n, 3)) * 6
    b = rng.integers(-10 ** 4, 10 ** 4, (3,)) * 4
    a[0, :] = [0, 2 ** 40, -(2 ** 62)]
    return ember.tensor(a), ember.tensor(b)


@pytest.mark.parametrize("op", ["gcd", "lcm"])
def test_gcd_lcm_compile_under_dynamic_shapes(strict_dynamic, op):
    f = lambda a, b: getattr(ember, op)(a, b) + 1       # noqa: E731
    c = _compiled(f, dynamic=True)
    for k, n in enumerate((5, 9, 17)):
        a, b = _gcd_args(n, k)
        got = c(a, b)
        assert tuple(got.shape) == (n, 3)
        assert got.tolist() == f(a, b).tolist()
    assert ember.dynamo.counters["recompiles"] == 0


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_nextafter_compiles_under_dynamic_shapes(strict_dynamic, dt):
    d = getattr(ember, dt)
    f = lambda a, b: ember.nextafter(a, b) * 1      # noqa: E731
    c = _compiled(f, dynamic=True)
    for k, n in enumerate((6, 11)):
        rng = np.random.default_rng(20 + k)
        a = rng.standard_normal((n, 4)).astype(np.float32)
        a[0] = [0.0, -0.0, math.inf, math.nan]
        b = rng.standard_normal((n, 4)).astype(np.float32)
        b[0] = [-0.0, 1.0, 0.0, 1.0]
        a, b = ember.tensor(a).to(d), ember.tensor(b).to(d)
        assert _bits(c(a, b)) == _bits(f(a, b))
    assert ember.dynamo.counters["recompiles"] == 0


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_float32_cumsum_cumprod_accumulate_in_float64(dynamic):
    # torch's CPU scan accumulates float32 in double, each output rounded once (as eager); a
    # float32 running sum was an ulp off in most rows
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    v = (rng.standard_normal((5, 60)) * 100).astype(np.float32)
    v[0, :3] = -0.0
    x = ember.tensor(v)
    f = lambda x: (ember.cumsum(x, dim=1), ember.cumsum(x, dim=0), ember.cumprod(x / 100, dim=1))  # noqa: E731
    got = _compiled(f, dynamic=dynamic)(x)
    t = torch.from_numpy(v)
    want = (torch.cumsum(t, 1), torch.cumsum(t, 0), torch.cumprod(t / 100, 1))
    for g, e, w in zip(got, f(x), want):
        assert _bits(g) == _bits(e)
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_compiled_float32_cumsum_gradient_matches_eager():
    # cumsum's backward is a reverse cumsum of the incoming gradient, accumulated the same way
    rng = np.random.default_rng(7)
    x = ember.tensor((rng.standard_normal((4, 50)) * 10).astype(np.float32), requires_grad=True)
    g = ember.tensor(rng.standard_normal((4, 50)).astype(np.float32) * 100)
    gc = ember.autograd.grad((_compiled(lambda x: ember.cumsum(x, dim=1))(x) * g).sum(), [x])[0]
    ge = ember.autograd.grad((ember.cumsum(x, dim=1) * g).sum(), [x])[0]
    assert _bits(gc) == _bits(ge)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_compiled_half_division_by_a_0d_tensor_takes_the_scalar_path(dt):
    # a 0-dim divisor is TensorIterator's scalar: trunc / floor of the float32 quotient (not the
    # quotient rounded to the half dtype first, the two-tensor kernel's way), even after the
    # decomposition broadcasts it
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    a = ember.tensor(rng.uniform(1000, 60000, 64).astype(np.float32) * rng.choice([-1, 1], 64)).to(getattr(ember, dt))
    b = ember.tensor(3.3)
    f = lambda a, b: (ember.div(a, b, rounding_mode="trunc"), ember.div(a, b, rounding_mode="floor"),  # noqa: E731
                      ember.floor_divide(a, b))
    got = _compiled(f)(a, b)
    ta, tb = _torch_twin(torch, a), torch.tensor(3.3)
    want = (torch.div(ta, tb, rounding_mode="trunc"), torch.div(ta, tb, rounding_mode="floor"),
            torch.floor_divide(ta, tb))
    for g, e, w in zip(got, f(a, b), want):
        assert _bits(g) == _bits(e)
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_cumsum_prim_reference_starts_at_positive_zero(dt):
    # the prim's numpy reference (aot_eager, and a graph inductor runs eagerly: a float16 scan
    # with symbolic sizes) summed a -0.0 prefix to -0.0; eager, PyTorch and the C++ scan give +0.0
    x = ember.tensor([[-0.0, 1.5, -0.0], [-0.0, -0.0, 2.0]]).to(getattr(ember, dt))
    f = lambda x: (ember.cumsum(x, dim=0), ember.cumsum(x, dim=1))      # noqa: E731
    ember.dynamo.reset()
    got = ember.compile(f, backend="aot_eager")(x)
    for g, e in zip(got, f(x)):
        assert _bits(g) == _bits(e)
    assert _bits(got[1])[:2] == [(0.0, 1.0), (1.5, 1.0)]
