"""Pointwise edge cases against PyTorch (session 47): relu's signed zero in float16, a Python
number as the first operand of add/sub/mul/div/floor_divide/remainder, the checked conversion of
clamp bounds and pow exponents into float16/bfloat16/integer dtypes, and bool clamp / pow.
Each case also runs under ``ember.compile`` and must give eager's result or error."""
import zlib

import numpy as np
import pytest

import ember


def _outcome(fn, *args):
    """(dtype name, values with signed zeros) or (exception type, message)."""
    try:
        r = fn(*args)
    except Exception as e:      # noqa: BLE001  (the error itself is compared)
        return type(e).__name__, str(e).split("\n")[0]
    vals = np.asarray(r.float().numpy() if r.dtype.is_floating_point else r.numpy(), dtype=np.float64)
    return str(r.dtype).split(".")[-1], [repr(float(v)) for v in vals.reshape(-1)]


def _check(torch, case, data, dtype):
    """ember eager == torch, and ember.compile == ember eager, for ``case(module, tensor)``."""
    t = _outcome(lambda: case(torch, torch.tensor(data, dtype=getattr(torch, dtype))))
    x = ember.tensor(data, dtype=getattr(ember, dtype))
    e = _outcome(lambda: case(ember, x))
    assert e == t
    c = _outcome(ember.compile(lambda v: case(ember, v)), x)
    assert c == e


def _rng(*key):
    """A generator seeded by the test's parameters (``hash`` of a str is salted per process)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _draw(rng, n=6, lo=-40.0, hi=40.0):
    return [float(v) for v in rng.uniform(lo, hi, n).round(2)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_relu_keeps_negative_zero(dtype):
    torch = pytest.importorskip("torch")
    data = _draw(np.random.default_rng(1)) + [-0.0, 0.0, float("nan")]
    _check(torch, lambda m, v: m.relu(v), data, dtype)


NUMBER_FIRST = {
    "add": lambda m, n, v: m.add(n, v),
    "sub_alpha": lambda m, n, v: m.sub(n, v, alpha=2),
    "mul": lambda m, n, v: m.mul(n, v),
    "div": lambda m, n, v: m.div(n, v),
    "div_floor": lambda m, n, v: m.div(n, v, rounding_mode="floor"),
    "div_trunc": lambda m, n, v: m.div(n, v, rounding_mode="trunc"),
    "true_divide": lambda m, n, v: m.true_divide(n, v),
    "floor_divide": lambda m, n, v: m.floor_divide(n, v),
    "remainder": lambda m, n, v: m.remainder(n, v),
    "fmod": lambda m, n, v: m.fmod(n, v),           # no Scalar-first overload in PyTorch: TypeError
}


@pytest.mark.parametrize("op", sorted(NUMBER_FIRST))
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
@pytest.mark.parametrize("number", [7, -7.5, True])
def test_number_first_operand(op, dtype, number):
    torch = pytest.importorskip("torch")
    rng = _rng(op, dtype, number)
    if dtype == "bool":
        data = [bool(b) for b in rng.integers(0, 2, 6)]
    elif dtype == "int32":
        data = [int(v) for v in rng.choice([-9, -5, -2, 3, 4, 11], 6)]
    else:
        data = [v if abs(v) > 0.5 else 1.25 for v in _draw(rng)]
    fn = NUMBER_FIRST[op]
    if dtype == "bool" and isinstance(number, int) and op in ("div_floor", "div_trunc", "floor_divide",
                                                                 "remainder"):
        data = [True] * 6      # integer division by False: PyTorch's ZeroDivisionError text differs
    t_out = _outcome(lambda: fn(torch, number, torch.tensor(data, dtype=getattr(torch, dtype))))
    x = ember.tensor(data, dtype=getattr(ember, dtype))
    e_out = _outcome(lambda: fn(ember, number, x))
    if t_out[0] == "TypeError":
        assert e_out[0] == "TypeError"       # PyTorch's message lists its overloads
        return
    assert e_out == t_out
    if dtype in ("float32", "int32") and number is not True:     # compiled: a sample (time)
        assert _outcome(ember.compile(lambda v: fn(ember, number, v)), x) == e_out


def test_number_first_autograd_and_two_numbers():
    torch = pytest.importorskip("torch")
    data = _draw(np.random.default_rng(3))
    for m in (torch, ember):
        t = m.tensor(data, requires_grad=True)
        m.sub(3.0, t, alpha=2).sum().backward()
        assert t.grad.tolist() == [-2.0] * len(data)
        r = m.remainder(7, t)
        assert r.grad_fn.name().endswith("NotImplemented")
        assert len(r.grad_fn.next_functions) == 1
        with pytest.raises(RuntimeError, match="derivative for aten::remainder is not implemented"):
            r.sum().backward()
        assert m.add(1, 2).item() == 3 and m.div(7, 2, rounding_mode="floor").item() == 3
        for two_numbers in (lambda: m.remainder(7, 2), lambda: m.pow(2, 3)):
            with pytest.raises(TypeError):
                two_numbers()


CHECKED = {
    "clamp_min_big": lambda m, v: m.clamp(v, 1e10),
    "clamp_max_65519": lambda m, v: m.clamp(v, max=65519),
    "clamp_min_2p40": lambda m, v: m.clamp_min(v, 2 ** 40),
    "clamp_max_neg": lambda m, v: m.clamp_max(v, -3.5e38),
    "clamp_max_65504": lambda m, v: m.clamp(v, max=65504),     # fits float16: no error
    "clamp_inf": lambda m, v: m.clamp(v, float("-inf"), float("inf")),
    "pow_65519": lambda m, v: m.pow(v, 65519),
    "pow_3p5e38": lambda m, v: m.pow(v, 3.5e38),
    "pow_2p40": lambda m, v: m.pow(v, 2 ** 40),
    "pow_300": lambda m, v: m.pow(v, 300),
    "pow_neg_int": lambda m, v: m.pow(v, -300),
}


@pytest.mark.parametrize("case", sorted(CHECKED))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32"])
def test_checked_scalar_conversion(case, dtype):
    torch = pytest.importorskip("torch")
    rng = _rng(case, dtype)
    # powers of two: pow's result is exact, so only the conversion of the number is compared
    data = [int(v) for v in rng.integers(-3, 4, 6)] if dtype.startswith("int") else \
        [float(v) for v in rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], 6)]
    _check(torch, CHECKED[case], data, dtype)


BOOL_CASES = {
    "clamp_scalar_min": lambda m, v: m.clamp(v, True),
    "clamp_scalar_max": lambda m, v: m.clamp(v, max=False),
    "clamp_scalars": lambda m, v: m.clamp(v, False, True),
    "clamp_int_bounds": lambda m, v: m.clamp(v, 0, 1),
    "clamp_float_bound": lambda m, v: m.clamp(v, 0.5),
    "clamp_tensor_min": lambda m, v: m.clamp_min(v, v[1]),
    "clamp_tensor_max": lambda m, v: m.clamp(v, max=v[0]),
    "clamp_tensors": lambda m, v: m.clamp(v, v[0], v[1]),
    "clamp_min_scalar": lambda m, v: m.clamp_min(v, True),
    "clamp_max_scalar": lambda m, v: m.clamp_max(v, False),
    "pow_0d_base": lambda m, v: m.pow(v[0], v),
    "pow_tensors": lambda m, v: m.pow(v, v),
    "pow_number_base": lambda m, v: m.pow(True, v),
    "pow_bool_exponent": lambda m, v: m.pow(v, True),
    "pow_int_exponent": lambda m, v: m.pow(v, 2),
    "pow_int_base": lambda m, v: m.pow(3, v),
}


@pytest.mark.parametrize("case", sorted(BOOL_CASES))
def test_bool_clamp_and_pow(case):
    torch = pytest.importorskip("torch")
    data = [bool(b) for b in np.random.default_rng(5).integers(0, 2, 6)]
    data[:2] = [True, False]
    _check(torch, BOOL_CASES[case], data, "bool")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("number_first", [False, True])
def test_div_other_gradient_rounds_as_torch(dtype, number_first):
    """The divisor's gradient is -grad * ((self / other) / other), each step rounded."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    num, den = _draw(rng, 8), [v if abs(v) > 0.5 else 0.75 for v in _draw(rng, 8)]
    grads = []
    for m in (torch, ember):
        t = m.tensor(den, dtype=getattr(m, dtype), requires_grad=True)
        top = 7.3 if number_first else m.tensor(num, dtype=getattr(m, dtype))
        m.div(top, t).sum().backward()
        grads.append([repr(v) for v in t.grad.float().tolist()])
    assert grads[0] == grads[1]
