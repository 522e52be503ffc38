"""ember.testing.make_tensor and the deprecated assert_allclose, against torch.testing 2.13."""
import math
import warnings

import numpy as np
import pytest

import ember
from oracle import assert_same_error


def _torch():
    return pytest.importorskip("torch")


INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("name", ["bool"] + INTS + FLOATS + ["complex64", "complex128"])
def test_default_ranges_dtype_shape(name):
    dt = getattr(ember, name)
    t = ember.testing.make_tensor(4, 50, dtype=dt, device="cpu")
    assert t.dtype is dt and tuple(t.shape) == (4, 50) and t.is_contiguous() and not t.requires_grad
    a = t.numpy()
    if name == "bool":
        assert set(np.unique(a)) <= {False, True}
    elif name in INTS:
        lo = 0 if name == "uint8" else -9
        assert a.min() >= lo and a.max() <= 9 and len(np.unique(a)) > 5
    else:
        parts = [a.real, a.imag] if name.startswith("complex") else [a.astype(np.float64)]
        for p in parts:
            assert p.min() >= -9 and p.max() <= 9 and len(np.unique(p)) > 50


@pytest.mark.parametrize("name,low,high", [("float32", -0.5, 0.25), ("int32", 3, 7), ("int64", -2.5, 2.5),
                                           ("uint8", -100, 5), ("float64", 2, None), ("int8", None, -3)])
def test_low_high_match_torch_bounds(name, low, high):
    torch = _torch()
    e = ember.testing.make_tensor((2000,), dtype=getattr(ember, name), device="cpu", low=low, high=high).numpy()
    t = torch.testing.make_tensor((2000,), dtype=getattr(torch, name), device="cpu", low=low, high=high).numpy()
    assert e.dtype == t.dtype
    if name.startswith("float"):
        assert t.min() >= e.min() - 0.05 * abs(e.min()) - 0.05 and e.max() <= 9 and e.min() >= (low or -9)
        assert e.max() < (high if high is not None else 9)
    else:
        # integer draws: both cover exactly the same value set
        assert set(np.unique(e)) == set(np.unique(t))


def test_extreme_ranges_are_clamped_and_finite():
    for name in ["float16", "float32"]:
        e = ember.testing.make_tensor((500,), dtype=getattr(ember, name), device="cpu", low=-1e300, high=1e300)
        assert np.isfinite(e.numpy()).all() and np.abs(e.numpy()).max() > 1e3
    e = ember.testing.make_tensor((500,), dtype=ember.int64, device="cpu", low=-2 ** 70, high=2 ** 70)
    assert np.abs(e.numpy().astype(np.float64)).max() > 1e17


def test_noncontiguous_memory_format_grad_and_exclude_zero():
    x = ember.testing.make_tensor((3, 4), dtype=ember.float64, device="cpu", noncontiguous=True, requires_grad=True)
    assert not x.is_contiguous() and tuple(x.shape) == (3, 4) and x.requires_grad and x.is_leaf
    assert ember.testing.make_tensor((1,), dtype=ember.float32, device="cpu", noncontiguous=True).is_contiguous()
    y = ember.testing.make_tensor(2, 3, 4, 5, dtype=ember.float32, device="cpu", memory_format=ember.channels_last)
    assert y.is_contiguous(memory_format=ember.channels_last) and not y.is_contiguous()
    for name, small in [("int8", 1), ("bool", True), ("float32", float(np.finfo(np.float32).tiny))]:
        z = ember.testing.make_tensor((4000,), dtype=getattr(ember, name), device="cpu", low=-1 if name != "bool" else None,
                                      high=1 if name != "bool" else None, exclude_zero=True).numpy()
        assert (z != 0).all()
        if name == "int8":
            assert set(np.unique(z)) == {-1, 1}


@pytest.mark.parametrize("kw", [
    dict(dtype="int32", requires_grad=True),
    dict(dtype="bool", requires_grad=True),
    dict(dtype="float32", low=3, high=2),
    dict(dtype="int64", low=5, high=5),
    dict(dtype="float32", low=float("nan")),
    dict(dtype="uint8", low=-10, high=-2),
    dict(dtype="int8", low=200, high=300),
    dict(dtype="float32", noncontiguous=True, memory_format="channels_last"),
])
def test_errors_match_torch(kw):
    torch = _torch()

    def call(m):
        k = dict(kw)
        k["dtype"] = getattr(m, k["dtype"])
        if "memory_format" in k:
            k["memory_format"] = getattr(m, k["memory_format"])
        return m.testing.make_tensor((2, 3, 4, 5), device="cpu", **k)
    assert_same_error(lambda: call(ember), lambda: call(torch))


def test_low_equal_high_float_warns_like_torch():
    torch = _torch()
    got = []
    for m in (ember, torch):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            out = m.testing.make_tensor((3,), dtype=m.float32, device="cpu", low=2.0, high=2.0)
        assert (out.numpy() == 2.0).all()
        got.append([(r.category, str(r.message).replace("ember", "torch")) for r in rec])
        assert rec[0].filename == __file__
    assert got[0] == got[1]


@pytest.mark.parametrize("a,b,kw", [
    ([1.0, 2.0], [1.0, 2.0001], {}),
    ([1.0, 2.0], [1.0, 2.001], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {}),
    ([1.0, float("nan")], [1.0, float("nan")], {"equal_nan": False}),
    ([1.0, 2.0], [1.0, 2.5], {"rtol": 0.3, "atol": 0.0}),
    ([1.0, 2.0], [1.0, 2.5], {"rtol": 0.1, "atol": 0.0}),
    ([1, 2], [1.0, 2.0], {}),
    ([1.0, 2.0], [1.0, 3.0], {"rtol": 0.1}),
    ([1.0, 2.0], [1.0, 3.0], {"msg": "custom"}),
])
def test_assert_allclose_matches_torch(a, b, kw):
    torch = _torch()
    outcomes = []
    for m in (ember, torch):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                m.testing.assert_allclose(m.tensor(a), b, **kw)
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - compared below
                outcomes.append((type(exc), str(exc).replace("ember", "torch")))
        warns = [(r.category, str(r.message)) for r in rec]
        assert len(warns) == 1 and warns[0][0] is FutureWarning and rec[0].filename == __file__
        outcomes.append(warns)
    if outcomes[0] is not None and outcomes[0][0] is AssertionError:
        # the differences are printed from float32 arithmetic: compare all but the digits
        assert outcomes[2][0] is AssertionError
        assert outcomes[0][1].splitlines()[:3] == outcomes[2][1].splitlines()[:3]
        assert outcomes[1] == outcomes[3]
    else:
        assert outcomes[:2] == outcomes[2:]
