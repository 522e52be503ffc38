"""ember.signal.windows vs torch.signal.windows: values (symmetric and periodic, lengths 0..40,
float32/float64, the per-window parameters), gradients through ``requires_grad`` and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.signal
from oracle import needs_torch, torch

pytestmark = needs_torch

W = ember.signal.windows
PARAMS = {  # name -> extra keyword arguments to try
    "bartlett": [{}], "blackman": [{}], "cosine": [{}], "hamming": [{}], "hann": [{}], "nuttall": [{}],
    "exponential": [{}, {"tau": 2.5}], "gaussian": [{}, {"std": 3.7}], "kaiser": [{}, {"beta": 0.0}, {"beta": 5.5}],
    "general_cosine": [{"a": [0.46, 0.23, 0.31]}, {"a": (1.0,)}], "general_hamming": [{}, {"alpha": 0.61}],
}
DT = {"float32": ("float32", 2e-6), "float64": ("float64", 1e-12)}


def _dtypes(dt):
    name, tol = DT[dt]
    return getattr(ember, name), getattr(torch, name), tol


def _cmp(e, t, tol):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(PARAMS)), M=st.integers(0, 40), sym=st.booleans(),
       dt=st.sampled_from(sorted(DT)), which=st.integers(0, 2))
def test_values(name, M, sym, dt, which):
    kw = PARAMS[name][which % len(PARAMS[name])]
    edt, tdt, tol = _dtypes(dt)
    e = getattr(W, name)(M, sym=sym, dtype=edt, **kw)
    t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=tdt, **kw)
    assert e.dtype == edt
    _cmp(e, t, tol)


def test_default_dtype_and_exponential_center():
    for name in PARAMS:
        e = getattr(W, name)(7, **PARAMS[name][0])
        assert e.dtype == ember.float32
    e = W.exponential(9, sym=False, center=2.0, tau=1.5, dtype=ember.float64)
    t = torch.signal.windows.exponential(9, sym=False, center=2.0, tau=1.5, dtype=torch.float64)
    _cmp(e, t, 1e-14)
    assert W.hann(True).tolist() == [1.0]


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_requires_grad(name):
    kw = PARAMS[name][0]
    e = getattr(W, name)(6, dtype=ember.float64, requires_grad=True, **kw)
    t = getattr(torch.signal.windows, name)(6, dtype=torch.float64, requires_grad=True, **kw)
    assert e.requires_grad and t.requires_grad
    assert (e.grad_fn is None) == (t.grad_fn is None)
    _cmp(e, t, 1e-12)
    for M in (0, 1):
        e = getattr(W, name)(M, requires_grad=True, **kw)
        t = getattr(torch.signal.windows, name)(M, requires_grad=True, **kw)
        assert e.requires_grad == t.requires_grad and tuple(e.shape) == tuple(t.shape)


ERRORS = [
    ("hann", (-1,), {}), ("bartlett", (-3,), {}), ("blackman", (4,), {"dtype": "int64"}),
    ("gaussian", (4,), {"dtype": "float16"}), 
    ("general_cosine", (3,), {"a": 5}), ("general_cosine", (3,), {"a": []}), ("kaiser", (3,), {"beta": -1}),
    ("gaussian", (3,), {"std": 0}), ("exponential", (3,), {"tau": 0}), ("exponential", (3,), {"center": 1.0}),
    ("nuttall", (-2,), {}), ("hamming", (3,), {"dtype": "complex64"}),
]


@pytest.mark.parametrize("name,args,kw", ERRORS)
def test_errors(name, args, kw):
    def conv(mod, v):
        return getattr(mod, v) if isinstance(v, str) and v in ("int64", "float16", "sparse_coo", "complex64") else v
    with pytest.raises(Exception) as te:
        getattr(torch.signal.windows, name)(*args, **{k: conv(torch, v) for k, v in kw.items()})
    with pytest.raises(type(te.value)) as ee:
        getattr(W, name)(*args, **{k: conv(ember, v) for k, v in kw.items()})
    assert str(ee.value).replace("ember.", "torch.") == str(te.value)


def test_non_integer_length_and_layout():
    with pytest.raises(TypeError, match="'M' must be int"):
        W.hann(2.5)
    with pytest.raises(TypeError):
        torch.signal.windows.hann(2.5)
    with pytest.raises(ValueError, match="cosine is implemented for strided tensors only, got: sparse"):
        W.cosine(3, layout="sparse")   # (ember has no sparse layouts; anything but ember.strided is refused)
    assert W.cosine(3, layout=ember.strided).shape == (3,)


def test_namespace():
    import importlib
    assert importlib.import_module("ember.signal.windows") is ember.signal.windows
    assert sorted(W.__all__) == sorted(torch.signal.windows.__all__)
