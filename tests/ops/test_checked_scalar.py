"""A Python number that becomes an element or a bound of an integer tensor (a fill value,
masked_fill/index_fill/scatter's value, a clamp/hardtanh/threshold limit, alpha, where's scalar,
torch.tensor(..., dtype=int8)) is checked as PyTorch checks it: out of range raises instead of
wrapping into a silent wrong value; -1 into uint8 is 255, as in C; arithmetic still wraps."""
import numpy as np
import pytest

import ember
from tests.oracle import needs_torch, torch

RNG = np.random.default_rng()


def _cases(m, rng=None):
    rng = rng if rng is not None else np.random.default_rng()
    def x():
        return m.tensor(rng.integers(-100, 100, 4).tolist(), dtype=m.int8)

    def u():
        return m.tensor(rng.integers(0, 200, 4).tolist(), dtype=m.uint8)

    mask = m.tensor([True, False, True, False])

    def setitem(t, key, v):
        t[key] = v
        return t

    big = int(rng.integers(128, 10_000))          # does not fit int8
    return {
        "masked_fill": lambda: x().masked_fill(mask, big),
        "masked_fill -1 uint8": lambda: u().masked_fill(mask, -1),
        "masked_fill 2.5": lambda: x().masked_fill(mask, 2.5),
        "masked_fill nan": lambda: x().masked_fill(mask, float("nan")),
        "index_fill": lambda: x().index_fill(0, m.tensor([1, 2]), -big),
        "index_fill -1 uint8": lambda: u().index_fill(0, m.tensor([1, 2]), -1),
        "scatter": lambda: x().scatter(0, m.tensor([0, 3]), big),
        "scatter -1 uint8": lambda: u().scatter(0, m.tensor([0, 3]), -1),
        "clamp max": lambda: x().clamp(max=big),
        "clamp min": lambda: x().clamp(min=-big),
        "clamp -1 uint8": lambda: u().clamp(min=-1),
        "clamp -300 uint8": lambda: u().clamp(min=-300),
        "clamp float bound promotes": lambda: x().clamp(max=2.5),
        "hardtanh": lambda: m.nn.functional.hardtanh(x(), -1, big),
        "threshold limit": lambda: m.nn.functional.threshold(x(), big, 0),
        "threshold value": lambda: m.nn.functional.threshold(x(), 0, big),
        "add alpha": lambda: m.add(x(), x(), alpha=big),
        "sub alpha": lambda: m.sub(x(), x(), alpha=big),
        "rsub alpha": lambda: m.rsub(x(), x(), alpha=big),
        "addcmul value": lambda: m.addcmul(x(), x(), x(), value=big),
        "where scalar": lambda: m.where(mask, big, x()),
        "where -1 uint8": lambda: m.where(mask, u(), -1),
        "full": lambda: m.full((2,), big, dtype=m.int8),
        "full -1 uint8": lambda: m.full((2,), -1, dtype=m.uint8),
        "full int64 2**63": lambda: m.full((1,), 2 ** 63, dtype=m.int64),
        "full_like": lambda: m.full_like(x(), big),
        "new_full": lambda: x().new_full((3,), big),
        "fill_": lambda: x().fill_(big),
        "fill_ -1 uint8": lambda: u().fill_(-1),
        "fill_ 0-d tensor wraps": lambda: x().fill_(m.tensor(big)),
        "setitem int": lambda: setitem(x(), 1, big),
        "setitem slice": lambda: setitem(x(), slice(1, 3), big),
        "setitem mask": lambda: setitem(x(), mask, big),
        "setitem index": lambda: setitem(x(), m.tensor([0, 2]), big),
        "setitem 0-d tensor wraps": lambda: setitem(x(), 1, m.tensor(big)),
        "setitem -1 uint8": lambda: setitem(u(), mask, -1),
        "tensor int8": lambda: m.tensor([1, big], dtype=m.int8),
        "tensor uint8 -1": lambda: m.tensor([-1, 3], dtype=m.uint8),
        "tensor uint8 -300": lambda: m.tensor([-300], dtype=m.uint8),
        "tensor int8 nan": lambda: m.tensor([float("nan")], dtype=m.int8),
        "tensor int8 floats truncate": lambda: m.tensor([2.7, -2.7], dtype=m.int8),
        "tensor int32 1e10": lambda: m.tensor([1e10], dtype=m.int32),
        "tensor from numpy wraps": lambda: m.tensor(np.array([big]), dtype=m.int8),
        "tensor bool": lambda: m.tensor([5, 0], dtype=m.bool),
        "arithmetic wraps": lambda: x() + big,
        "comparison": lambda: x() < big,
    }


def _outcome(f):
    try:
        r = f()
    except RuntimeError as e:
        return "RuntimeError", str(e)
    return r.tolist(), str(r.dtype).split(".")[-1]


@needs_torch
@pytest.mark.parametrize("case", list(_cases(ember)))
def test_matches_torch(case):
    seed = int(RNG.integers(2 ** 32))          # one fresh draw, the same for both
    want = _outcome(_cases(torch, np.random.default_rng(seed))[case])
    got = _outcome(_cases(ember, np.random.default_rng(seed))[case])
    assert got == want


def test_errors_and_wraps_without_torch():
    x = ember.tensor([1, -2, 3], dtype=ember.int8)
    mask = ember.tensor([True, False, True])
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        x.masked_fill(mask, 300)
    with pytest.raises(RuntimeError, match="type uint8 without overflow"):
        ember.tensor([256], dtype=ember.uint8)
    assert ember.full((2,), -1, dtype=ember.uint8).tolist() == [255, 255]
    assert (x + 300).tolist() == [45, 42, 47]          # arithmetic wraps, as PyTorch's


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_matches_eager(backend):
    u = ember.tensor(RNG.integers(0, 200, 5).tolist(), dtype=ember.uint8)
    x = ember.tensor(RNG.integers(-100, 100, 5).tolist(), dtype=ember.int8)
    mask = ember.tensor(RNG.random(5) < 0.5)

    def fine(u, x, mask):
        return u.masked_fill(mask, -1) + 1, ember.where(mask, u, -1) * 1, u.clamp(min=-1) + 0

    got = ember.compile(fine, backend=backend)(u, x, mask)
    for g, w in zip(got, fine(u, x, mask)):
        assert g.tolist() == w.tolist()

    def bad(u, x, mask):
        return x.masked_fill(mask, 300) + 1

    with pytest.raises(RuntimeError, match="int8_t without overflow"):
        ember.compile(bad, backend=backend)(u, x, mask)


def test_fits_rule():
    from ember.ops.checked_scalar import fits
    assert fits(-128, ember.int8) and not fits(-129, ember.int8) and fits(127.9, ember.int8) is False
    assert fits(-255, ember.uint8) and not fits(-256, ember.uint8) and not fits(256, ember.uint8)
    assert not fits(float("inf"), ember.int32) and fits(1e300, ember.float32) and fits(True, ember.int8)
    assert fits(2 ** 63 - 1, ember.int64) and not fits(2 ** 63, ember.int64)


@needs_torch
def test_alpha_given_as_a_zero_dim_tensor():
    """PyTorch's parser takes a 0-d tensor for a Scalar (``alpha``); the kernel got the tensor
    and raised AttributeError."""
    a = RNG.standard_normal(5).astype(np.float32)
    for m in (ember, torch):
        x, y = m.tensor(a), m.tensor(a[::-1].copy())
        got = (m.add(x, y, alpha=m.tensor(2.0)), x.clone().add_(y, alpha=m.tensor(3)),
               m.sub(x, y, alpha=m.tensor(0.5)), m.rsub(x, y, alpha=m.tensor(2.0)))
        if m is ember:
            mine = [g.numpy() for g in got]
        else:
            for e, t in zip(mine, got):
                np.testing.assert_allclose(e, t.numpy(), rtol=1e-6, atol=1e-6)   # (x - y/2 can cancel)
    f = ember.compile(lambda x, y, k: ember.add(x, y, alpha=k))
    x = ember.tensor(a)
    np.testing.assert_allclose(f(x, x, ember.tensor(2.0)).numpy(), a * 3, rtol=1e-6)
