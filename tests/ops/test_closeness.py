"""isclose / allclose / equal and ember.testing.assert_close, pinned against PyTorch.

Values are drawn so that many elements sit near the tolerance boundary (a base value plus a
perturbation of a few tolerances), with NaN and infinities mixed in, over broadcasting
shapes and strided views."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.testing
from tests.oracle import needs_torch, torch

DTYPES = ["float32", "float64", "int64", "int32", "bool"]


def _pair(rng, shape_a, shape_b, dtype):
    if dtype == "bool":
        return np.asarray(rng.random(shape_a) < 0.5), np.asarray(rng.random(shape_b) < 0.5)
    if dtype.startswith("int"):
        return (np.asarray(rng.integers(-5, 5, shape_a), dtype=dtype),
                np.asarray(rng.integers(-5, 5, shape_b), dtype=dtype))
    b = rng.standard_normal(shape_b)
    try:        # a near b where b broadcasts to a's shape: many elements at the tolerance edge
        a = np.broadcast_to(b, shape_a).copy()
    except ValueError:
        a = rng.standard_normal(shape_a)
    a = a * (1 + rng.choice([0, 1e-7, 1e-6, 1e-5, 1e-3], a.shape)) + rng.choice([0, 1e-9, 1e-8, 1e-6, 1e-4], a.shape)
    a, b = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    for arr in (a, b):
        if arr.size:
            flat = arr.reshape(-1)
            flat[rng.integers(0, flat.size, max(1, flat.size // 6))] = rng.choice([np.nan, np.inf, -np.inf])
    return a, b


shapes = st.sampled_from([((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 5), (3, 1)), ((), (4,)), ((0, 3), (3,))])


@needs_torch
@settings(max_examples=60, deadline=None)
@given(shapes=shapes, dtype=st.sampled_from(DTYPES), rtol=st.sampled_from([0.0, 1e-5, 1e-3]),
       atol=st.sampled_from([0.0, 1e-8, 1e-6, 1.0]), equal_nan=st.booleans(), seed=st.integers(0, 2**31 - 1),
       transpose=st.booleans())
def test_isclose_allclose_equal_match_torch(shapes, dtype, rtol, atol, equal_nan, seed, transpose):
    rng = np.random.default_rng(seed)
    a, b = _pair(rng, shapes[0], shapes[1], dtype)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b)
    ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
    if transpose and a.ndim == 2:                   # a strided view on both sides
        ea, ta = ea.t(), ta.t()
        if b.ndim == 2:
            eb, tb = eb.t(), tb.t()
        elif b.ndim == 1 and b.shape[0] != ea.shape[1]:
            return
    got = ember.isclose(ea, eb, rtol=rtol, atol=atol, equal_nan=equal_nan)
    want = torch.isclose(ta, tb, rtol=rtol, atol=atol, equal_nan=equal_nan)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype is ember.bool
    assert ember.allclose(ea, eb, rtol, atol, equal_nan) == torch.allclose(ta, tb, rtol, atol, equal_nan)
    assert ea.allclose(eb, rtol=rtol, atol=atol, equal_nan=equal_nan) is bool(want.all())
    assert ember.equal(ea, eb) == torch.equal(ta, tb)
    assert ember.equal(ea, ea) == torch.equal(ta, ta)


@needs_torch
def test_closeness_errors_match_torch():
    a = ember.ones(2)
    for bad in (lambda m, x: m.isclose(m.tensor([1, 2]), x), lambda m, x: m.isclose(x, x.double()),
                lambda m, x: m.isclose(x, x, rtol=-1.0), lambda m, x: m.isclose(x, x, atol=-1.0),
                lambda m, x: m.allclose(m.ones(2, 3), m.ones(2))):
        with pytest.raises(RuntimeError) as ours:
            bad(ember, a)
        with pytest.raises(RuntimeError) as theirs:
            bad(torch, torch.ones(2))
        assert str(ours.value) == str(theirs.value)
    assert ember.equal(ember.ones(2), ember.ones(3)) is False          # another shape: False, no error
    assert ember.equal(ember.ones(2), ember.ones(2, dtype=ember.int64)) is True
    with pytest.raises(TypeError, match="argument 'other' must be Tensor"):
        ember.allclose(a, 1.0)


def test_isclose_compiles_and_matches_eager():
    rng = np.random.default_rng(5)
    a, b = (ember.from_numpy(x) for x in _pair(rng, (6, 7), (6, 7), "float32"))

    def f(x, y):
        return ember.isclose(x, y, rtol=1e-4, atol=1e-6, equal_nan=True), ember.isclose(x * 2, y * 2)

    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor")(a, b)
    for g, w in zip(got, f(a, b)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_kernels_producing_nan_and_inf_do_not_warn():
    """inf - inf, 0/0, exp(1000): NaN and inf, silently, as PyTorch -- even under ``-W error``
    (numpy's RuntimeWarnings from ember's kernels are filtered; the user's own numpy still
    warns)."""
    code = ("import ember, numpy as np\n"
            "x = ember.tensor([float('inf'), 0.0])\n"
            "r = [x - x, x + (-x), x * 0, x / x, ember.tensor([1000.0]).exp(), ember.isclose(x, x + 1)]\n"
            "try:\n    np.array([np.inf]) - np.array([np.inf])\nexcept RuntimeWarning:\n    print('numpy warns')\n"
            "print('ok', bool(ember.isnan((x - x)[0])))\n")
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numpy", "warns", "ok", "True"]


# ---------------------------------------------------------------------- assert_close
CASES = {
    "close": lambda m: (m.tensor([1.0, 2.0]), m.tensor([1.0, 2.000001])),
    "far": lambda m: (m.tensor([1.0, 2.0]), m.tensor([2.0, 3.0])),
    "ints": lambda m: (m.tensor([1, 2]), m.tensor([1, 3])),
    "shape": lambda m: (m.ones(2), m.ones(3)),
    "dtype": lambda m: (m.ones(2), m.ones(2, dtype=m.float64)),
    "scalars": lambda m: (1.0, 1.1),
    "nested": lambda m: ([m.ones(2), {"k": m.zeros(2)}], [m.ones(2), {"k": m.ones(2)}]),
    "nan": lambda m: (m.tensor([float("nan")]), m.tensor([float("nan")])),
    "bools": lambda m: (m.tensor([True]), m.tensor([False])),
    "zero_expected": lambda m: (m.tensor([0.0, 1.0]), m.tensor([1.0, 0.0])),
    "explicit_tol": lambda m: (m.tensor([1.0]), m.tensor([1.05])),
}


@needs_torch
@pytest.mark.parametrize("case", sorted(CASES))
def test_assert_close_matches_torch(case):
    kw = {"rtol": 0.1, "atol": 0.0} if case == "explicit_tol" else {}

    def outcome(m):
        try:
            m.testing.assert_close(*CASES[case](m), **kw)
            return "ok"
        except AssertionError as e:
            return str(e).replace("torch.", "ember.")
    ours, theirs = outcome(ember), outcome(torch)
    if case == "ints":      # torch computes the relative difference in float32
        ours, theirs = ours.split("Greatest relative")[0], theirs.split("Greatest relative")[0]
    assert ours == theirs


def test_assert_close_options():
    a = ember.tensor([1.0, float("nan")])
    ember.testing.assert_close(a, a.clone(), equal_nan=True)
    ember.testing.assert_close(a[:1], a[:1].double(), check_dtype=False)
    with pytest.raises(AssertionError, match="^custom$"):
        ember.testing.assert_close(a[:1], a[:1] + 1, msg="custom")
    with pytest.raises(ValueError, match="'rtol' and 'atol'"):
        ember.testing.assert_close(a, a, rtol=1e-3)
