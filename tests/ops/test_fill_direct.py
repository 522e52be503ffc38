"""fill_ / zero_ written straight into the tensor's memory (``copy._fill_direct``).

The generic in-place path builds the functional result and copies it in; fill_ and
zero_ of a CPU tensor with a number write ``self``'s memory in one pass instead. These
tests pin that the shortcut is the generic path's twin: the same values and bits, the
same errors, the same version bumps and aliasing through views -- over dtypes, values
that wrap, truncate, round or overflow, and strided, transposed and sliced views.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.ops.registry import OPS
from oracle import needs_torch

FILL = OPS["fill_"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
          "bool", "complex64", "complex128"]
VALUES = [0, 1, -1, 2.7, -2.5, 1 / 3, 300, -129, 2 ** 31, 2 ** 63, True, False, float("nan"),
          float("inf"), -float("inf"), 1e40, 1 + 2j, np.float64(2.5), np.int64(7), np.float32(-0.1)]


def _generic(fn):
    """Run ``fn`` with the shortcut off: the reference it must match."""
    saved = FILL.direct
    FILL.direct = None
    try:
        return fn()
    finally:
        FILL.direct = saved


def _outcome(fn):
    try:
        t = fn()
    except Exception as e:       # the error is part of the contract
        return ("error", type(e), str(e))
    return ("ok", t.dtype, t._data.tobytes(), t._data.shape, t._version)


def _view(base, layout):
    if layout == "contig":
        return base
    if layout == "transposed":
        return base.t()
    if layout == "stepped":
        return base[::2, 1::3]
    if layout == "row":
        return base[1]
    return base[:, 2:5]


def test_direct_path_is_taken():
    assert FILL.direct is not None
    seen = []
    saved = FILL.direct
    FILL.direct = lambda self, args: seen.append(args[1]) or saved(self, args)
    try:
        ember.zeros(3).zero_()
        ember.zeros(3).fill_(2.0)
    finally:
        FILL.direct = saved
    assert seen == [0, 2.0]


@settings(max_examples=150, deadline=None)
@given(dtype=st.sampled_from(DTYPES), value=st.sampled_from(VALUES),
       layout=st.sampled_from(["contig", "transposed", "stepped", "row", "cols"]),
       zero=st.booleans(), seed=st.integers(0, 2 ** 31 - 1))
def test_fill_matches_generic_path(dtype, value, layout, zero, seed):
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal((6, 7)) * 50).astype(np.float64)

    def run():
        base = ember.tensor(data).to(getattr(ember, dtype))
        view = _view(base, layout)
        out = view.zero_() if zero else view.fill_(value)
        assert out is view
        return base          # the write must reach the base through the view

    assert _outcome(run) == _outcome(lambda: _generic(run))


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_fill_zero_dim_and_empty(dtype):
    for shape in [(), (0,), (3, 0, 2)]:
        def run():
            t = ember.ones(shape, dtype=getattr(ember, dtype))
            t.fill_(5)
            return t
        assert _outcome(run) == _outcome(lambda: _generic(run))


def test_fill_with_a_tensor_value_and_under_autograd_take_the_generic_path():
    seen = []
    saved = FILL.direct
    FILL.direct = lambda self, args: seen.append(1) or saved(self, args)
    try:
        t = ember.zeros(4)
        t.fill_(ember.tensor(2.5))        # a 0-d tensor value: the shortcut declines it
        assert t.tolist() == [2.5] * 4
        h = ember.ones(4, requires_grad=True) * 2
        h.fill_(3.0)                       # recorded by autograd: its own path
        h.sum().backward()
        assert h.grad_fn is not None
    finally:
        FILL.direct = saved
    assert seen == [1]                     # the 0-d value reached the shortcut and was declined


def test_fill_overflow_error_names_the_dtype():
    with pytest.raises(RuntimeError, match="int8"):
        ember.zeros(3, dtype=ember.int8).fill_(300)
    t = ember.zeros(3, dtype=ember.int8)
    with pytest.raises(RuntimeError):
        t.fill_(300)
    assert t.tolist() == [0, 0, 0] and t._version == 0   # nothing written, no bump


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint8", "bool"])
@pytest.mark.parametrize("value", [2.7, -1, 1 / 3, True])
def test_fill_against_torch(dtype, value):
    import torch
    e = ember.zeros(3, 4, dtype=getattr(ember, dtype)).t()
    t = torch.zeros(3, 4, dtype=getattr(torch, dtype)).t()
    e.fill_(value)
    t.fill_(value)
    want = t.to(torch.float64).numpy()
    got = e.to(ember.float64).numpy()
    assert np.array_equal(got, want)
