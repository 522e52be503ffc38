"""Tensor printing must be identical to PyTorch's (with ``torch.`` -> ``ember.``).

Three layers:
* fixed strings (no torch needed) for the cases users see most often;
* hypothesis over dtypes / shapes / values / print options, against
  ``repr(torch.tensor(...))`` (skipped without torch);
* ``repr(ember.tensor(...))`` once the Tensor class exists.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ml_dtypes

from ember import _tensor_str as ts
from ember._tensor_str import printoptions, set_printoptions, tensor_repr


# --------------------------------------------------------------------------
# helpers


def _torch():
    return pytest.importorskip("torch")


def _ember_tensor_api():
    import ember
    return ember


def torch_dtype(torch, name):
    return getattr(torch, name)


def to_torch(torch, arr: np.ndarray, dtype_name: str):
    """An exact torch copy of a numpy array (bfloat16 via float32, exact)."""
    if dtype_name == "bfloat16":
        return torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(arr, copy=True, order="C"))


def torch_repr(t) -> str:
    return repr(t).replace("torch.", ts.DTYPE_PREFIX)


@contextlib.contextmanager
def both_printoptions(torch, **opts):
    saved = ts.get_printoptions()
    torch.set_printoptions(**opts)
    set_printoptions(**opts)
    try:
        yield
    finally:
        torch.set_printoptions(profile="default")
        torch.set_printoptions(sci_mode=None)
        set_printoptions(**saved)


@pytest.fixture(autouse=True)
def _default_printoptions():
    saved = ts.get_printoptions()
    set_printoptions(profile="default")
    yield
    set_printoptions(**saved)


NP_DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}
FLOATS = ("float32", "float64", "float16", "bfloat16")


# --------------------------------------------------------------------------
# fixed strings (no oracle needed)

FIXED = [
    (np.float32(7.0), "tensor(7.)"),
    (np.array([2.0, 2.0, 2.0], np.float32), "tensor([2., 2., 2.])"),
    (np.array([1, 2, 3], np.int64), "tensor([1, 2, 3])"),
    (np.array([True, False]), "tensor([ True, False])"),
    (np.array(True), "tensor(True)"),
    (np.array(3, np.int64), "tensor(3)"),
    (np.array(3, np.int32), "tensor(3, dtype=ember.int32)"),
    (np.float32(math.e), "tensor(2.7183)"),
    (np.array([1e-5, 1e5], np.float32), "tensor([1.0000e-05, 1.0000e+05])"),
    (np.array([-1.5, 10.25, 3.0], np.float32), "tensor([-1.5000, 10.2500,  3.0000])"),
    (np.array([1.0, np.nan], np.float32), "tensor([1., nan])"),
    (np.array([0.0, np.inf, -np.inf], np.float32), "tensor([0., inf, -inf])"),
    (np.array([1.5, np.nan, 100.25], np.float32), "tensor([  1.5000,      nan, 100.2500])"),
    (np.array([-0.0], np.float32), "tensor([-0.])"),
    (np.array([123456789.0], np.float64), "tensor([1.2346e+08], dtype=ember.float64)"),
    (np.zeros((0,), np.float32), "tensor([])"),
    (np.zeros((0, 3), np.float32), "tensor([], size=(0, 3))"),
    (np.zeros((2, 0), np.float64), "tensor([], size=(2, 0), dtype=ember.float64)"),
    (np.zeros((0,), np.int32), "tensor([], dtype=ember.int32)"),
    (np.zeros((0,), np.int64), "tensor([], dtype=ember.int64)"),
    (np.zeros((0, 2), np.bool_), "tensor([], size=(0, 2), dtype=ember.bool)"),
    (np.array([0.1, 2.5], np.float16), "tensor([0.1000, 2.5000], dtype=ember.float16)"),
    (np.array([0.1, 2.5], ml_dtypes.bfloat16), "tensor([0.1001, 2.5000], dtype=ember.bfloat16)"),
    (np.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (np.ones((2, 2, 3), np.float32),
     "tensor([[[1., 1., 1.],\n"
     "         [1., 1., 1.]],\n"
     "\n"
     "        [[1., 1., 1.],\n"
     "         [1., 1., 1.]]])"),
    (np.zeros((60, 60), np.float32),
     "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        ...,\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
     "        [0., 0., 0.,  ..., 0., 0., 0.]])"),
    (np.arange(30, dtype=np.float32) + 0.5,
     "tensor([ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  6.5000,  7.5000,\n"
     "         8.5000,  9.5000, 10.5000, 11.5000, 12.5000, 13.5000, 14.5000, 15.5000,\n"
     "        16.5000, 17.5000, 18.5000, 19.5000, 20.5000, 21.5000, 22.5000, 23.5000,\n"
     "        24.5000, 25.5000, 26.5000, 27.5000, 28.5000, 29.5000])"),
]


@pytest.mark.parametrize("arr,expected", FIXED, ids=[e for _, e in FIXED])
def test_fixed_strings(arr, expected):
    assert tensor_repr(np.asarray(arr)) == expected


def test_suffixes():
    a = np.array([1.0, 2.0], np.float32)
    assert tensor_repr(a, requires_grad=True) == "tensor([1., 2.], requires_grad=True)"
    assert tensor_repr(a, requires_grad=True, grad_fn_name="MulBackward0") == \
        "tensor([1., 2.], grad_fn=<MulBackward0>)"
    assert tensor_repr(a, device="cuda:0") == "tensor([1., 2.], device='cuda:0')"
    assert tensor_repr(np.float64(7.0), device="cuda:1", grad_fn_name="PowBackward0") == \
        "tensor(7., device='cuda:1', dtype=ember.float64, grad_fn=<PowBackward0>)"
    assert tensor_repr(a, prefix="Foo") == "Foo([1., 2.])"


def test_device_object():
    class Dev:
        type = "cuda"
        index = 0

    class Cpu:
        type = "cpu"
        index = None

    a = np.array([1.0], np.float32)
    assert tensor_repr(a, device=Dev()) == "tensor([1.], device='cuda:0')"
    assert tensor_repr(a, device=Cpu()) == "tensor([1.])"


def test_meta_tensor():
    assert tensor_repr(None, shape=(2, 3), device="meta") == \
        "tensor(..., device='meta', size=(2, 3))"
    assert tensor_repr(None, shape=(2,), dtype_name="int32", device="meta") == \
        "tensor(..., device='meta', size=(2,), dtype=ember.int32)"


def test_suffix_wraps_past_linewidth():
    a = np.arange(12, dtype=np.float64).reshape(1, 12) * 1.5
    out = tensor_repr(a, grad_fn_name="SomeRatherLongBackwardName0")
    # the last line must stay within 80 columns: suffixes moved to new lines
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert out.endswith(",\n       grad_fn=<SomeRatherLongBackwardName0>)")


def test_set_printoptions_profiles():
    set_printoptions(profile="short")
    assert ts.get_printoptions()["precision"] == 2
    assert tensor_repr(np.float32(math.pi)) == "tensor(3.14)"
    set_printoptions(profile="full")
    assert tensor_repr(np.arange(1001)).count("...") == 0
    set_printoptions(profile="default")
    assert tensor_repr(np.arange(1001)).count("...") == 1
    with pytest.raises(ValueError):
        set_printoptions(profile="nope")


def test_sci_mode_override_and_context_manager():
    with printoptions(sci_mode=True):
        assert tensor_repr(np.float32(1.0)) == "tensor(1.0000e+00)"
    assert tensor_repr(np.float32(1.0)) == "tensor(1.)"
    with printoptions(sci_mode=False):
        assert tensor_repr(np.array([1e-5, 1e5], np.float32)) == \
            "tensor([     0.0000, 100000.0000])"


class _Node:
    def __init__(self, n):
        self._n = n

    def name(self):
        return self._n


class _FakeTensor:
    """Duck-typed stand-in for ember.Tensor (before the core lands)."""

    def __init__(self, data, dtype_name=None, requires_grad=False, grad_fn=None,
                 device="cpu"):
        self._data = data

        class D:
            pass

        self.dtype = D()
        self.dtype.name = dtype_name or ts._dtype_name_of(data)
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn
        self.device = device
        self.shape = data.shape


def test_repr_of_duck_typed():
    t = _FakeTensor(np.array([1.0, 2.0]), requires_grad=True, grad_fn=_Node("AddBackward0"))
    assert ts.repr_of(t) == "tensor([1., 2.], dtype=ember.float64, grad_fn=<AddBackward0>)"
    t = _FakeTensor(np.array(4.0, np.float32), requires_grad=True)
    assert ts.repr_of(t) == "tensor(4., requires_grad=True)"


# --------------------------------------------------------------------------
# hypothesis against torch


@st.composite
def float_values(draw, shape, dtype_name):
    n = int(np.prod(shape)) if shape else 1
    mode = draw(st.sampled_from(["int", "normal", "wide", "tiny", "huge", "special", "mixed"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if mode == "int":
        vals = rng.integers(-2000, 2000, size=n).astype(np.float64)
    elif mode == "normal":
        vals = rng.standard_normal(n) * 10.0 ** draw(st.integers(-3, 4))
    elif mode == "wide":
        vals = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, size=n)
    elif mode == "tiny":
        vals = rng.standard_normal(n) * 1e-6
    elif mode == "huge":
        vals = rng.standard_normal(n) * 1e9
    elif mode == "special":
        vals = rng.choice(np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -2.0, 0.5]), size=n)
    else:
        vals = rng.standard_normal(n)
        mask = rng.random(n)
        vals[mask < 0.15] = np.nan
        vals[(mask >= 0.15) & (mask < 0.25)] = np.inf
        vals[(mask >= 0.25) & (mask < 0.4)] = 0.0
        vals[(mask >= 0.4) & (mask < 0.6)] = np.round(vals[(mask >= 0.4) & (mask < 0.6)] * 100)
    with np.errstate(over="ignore", invalid="ignore"):
        return vals.astype(NP_DTYPES[dtype_name]).reshape(shape)


@st.composite
def int_values(draw, shape, dtype_name):
    n = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype_name == "bool":
        return (rng.random(n) < 0.5).reshape(shape)
    info = np.iinfo(NP_DTYPES[dtype_name])
    span = draw(st.sampled_from([10, 1000, None]))
    lo, hi = (info.min, info.max) if span is None else (max(info.min, -span), min(info.max, span))
    return rng.integers(lo, hi, size=n, endpoint=True, dtype=NP_DTYPES[dtype_name]).reshape(shape)


shapes = st.one_of(
    st.lists(st.integers(0, 6), min_size=0, max_size=4).map(tuple),
    st.tuples(st.integers(0, 2500)),
    st.tuples(st.integers(1, 60), st.integers(1, 60)),
    st.tuples(st.integers(1, 14), st.integers(1, 14), st.integers(1, 14)),
)


@st.composite
def tensors(draw, dtypes=tuple(NP_DTYPES)):
    dtype_name = draw(st.sampled_from(dtypes))
    shape = draw(shapes)
    if dtype_name in FLOATS:
        arr = draw(float_values(shape, dtype_name))
    else:
        arr = draw(int_values(shape, dtype_name))
    return dtype_name, np.asarray(arr)


options = st.fixed_dictionaries(
    {},
    optional={
        "precision": st.integers(0, 8),
        "threshold": st.integers(1, 2000),
        "edgeitems": st.integers(1, 5),
        "linewidth": st.integers(10, 200),
        "sci_mode": st.sampled_from([None, True, False]),
        "profile": st.sampled_from(["default", "short", "full"]),
    },
)

# EMBER_PRINT_EXAMPLES=20000 for a long soak
_N = int(os.environ.get("EMBER_PRINT_EXAMPLES", "400"))
HSETTINGS = settings(max_examples=_N, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HSETTINGS
@given(tensors())
def test_matches_torch_default_options(case):
    torch = _torch()
    dtype_name, arr = case
    t = to_torch(torch, arr, dtype_name)
    assert tensor_repr(arr, dtype_name=dtype_name) == torch_repr(t)


@HSETTINGS
@given(tensors(), options)
def test_matches_torch_with_printoptions(case, opts):
    torch = _torch()
    dtype_name, arr = case
    t = to_torch(torch, arr, dtype_name)
    with both_printoptions(torch, **opts):
        assert tensor_repr(arr, dtype_name=dtype_name) == torch_repr(t)


@HSETTINGS
@given(tensors(FLOATS), st.sampled_from(["leaf", "mul", "pow", "sum", "linewidth"]))
def test_matches_torch_autograd_suffixes(case, how):
    torch = _torch()
    dtype_name, arr = case
    t = to_torch(torch, arr, dtype_name).clone().requires_grad_(True)
    if how == "leaf":
        out = t
    elif how == "mul":
        out = t * 2
    elif how == "pow":
        out = t ** 2
    elif how == "sum":
        out = t.sum()
    else:
        out = t * 3
    name = None if out.grad_fn is None else out.grad_fn.name()
    data = out.detach().numpy() if dtype_name != "bfloat16" else \
        out.detach().float().numpy().astype(ml_dtypes.bfloat16)
    if how == "linewidth":
        with both_printoptions(torch, linewidth=40):
            assert tensor_repr(data, dtype_name=dtype_name, requires_grad=True,
                               grad_fn_name=name) == torch_repr(out)
    else:
        assert tensor_repr(data, dtype_name=dtype_name, requires_grad=True,
                           grad_fn_name=name) == torch_repr(out)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tensors(("float32", "float64", "int64", "bool")))
def test_matches_torch_default_dtype_float64(case):
    torch = _torch()
    dtype_name, arr = case
    t = to_torch(torch, arr, dtype_name)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        expected = torch_repr(t)
    finally:
        torch.set_default_dtype(old)
    assert tensor_repr(arr, dtype_name=dtype_name, default_dtype="float64") == expected


def test_matches_torch_meta():
    torch = _torch()
    for shape, dtype_name in [((2, 3), "float32"), ((4,), "int32"), ((), "float64")]:
        t = torch.empty(shape, device="meta", dtype=getattr(torch, dtype_name))
        assert tensor_repr(None, shape=shape, dtype_name=dtype_name, device="meta") == torch_repr(t)


def test_matches_torch_set_printoptions_semantics():
    """Setting one option resets sci_mode to automatic, like torch."""
    torch = _torch()
    x = np.array([1e-5, 1.0], np.float32)
    t = torch.from_numpy(x)
    with both_printoptions(torch, sci_mode=False):
        assert tensor_repr(x) == torch_repr(t)
        torch.set_printoptions(precision=3)
        set_printoptions(precision=3)
        assert tensor_repr(x) == torch_repr(t)


# --------------------------------------------------------------------------
# through ember's Tensor (once the core exists)


EMBER_CASES = [
    (7.0, {}),
    ([2.0, 2.0, 2.0], {}),
    ([1, 2, 3], {}),
    ([True, False], {}),
    (math.e, {}),
    ([1e-5, 1e5], {}),
    ([[1.5, -2.0], [float("nan"), float("inf")]], {}),
    ([1.0, 2.0], {"dtype": "float64"}),
    ([1.0, 2.0], {"dtype": "float16"}),
    ([1.0, 2.0], {"dtype": "bfloat16"}),
    ([1, 2], {"dtype": "int32"}),
    (3, {}),
    (False, {}),
    ([], {}),
]


@pytest.mark.parametrize("value,kw", EMBER_CASES, ids=[repr(v) + repr(k) for v, k in EMBER_CASES])
def test_ember_tensor_repr_matches_torch(value, kw):
    torch = _torch()
    ember = _ember_tensor_api()
    tkw = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
    ekw = {k: (getattr(ember, v) if k == "dtype" else v) for k, v in kw.items()}
    assert repr(ember.tensor(value, **ekw)) == torch_repr(torch.tensor(value, **tkw))


def test_ember_tensor_repr_autograd():
    torch = _torch()
    ember = _ember_tensor_api()
    x_t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x_e = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert repr(x_e) == torch_repr(x_t)
    assert repr(x_e * 2) == torch_repr(x_t * 2)
    assert repr(x_e + 1) == torch_repr(x_t + 1)
    assert repr((x_e ** 2).sum()) == torch_repr((x_t ** 2).sum())
    assert repr(ember.zeros(0, 3)) == torch_repr(torch.zeros(0, 3))
    assert repr(ember.zeros(60, 60)) == torch_repr(torch.zeros(60, 60))


def test_ember_tensor_repr_random_data():
    torch = _torch()
    ember = _ember_tensor_api()
    rng = np.random.default_rng()
    for shape in [(5,), (3, 40), (2, 3, 4), (1500,), (40, 40)]:
        a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6)).astype(np.float32)
        assert repr(ember.tensor(a.tolist())) == torch_repr(torch.tensor(a.tolist()))
