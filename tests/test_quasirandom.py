"""ember.quasirandom.SobolEngine against torch.quasirandom.SobolEngine (torch 2.13).

Unscrambled sequences must equal torch's bit for bit (the same Joe & Kuo direction numbers,
the same Gray-code order, the same float rounding), across draw / draw_base2 / fast_forward /
reset and both float dtypes. Scrambled sequences use ember's generator (PCG64), which cannot
reproduce torch's Mersenne Twister stream, so they are checked for determinism and for the
net properties scrambling must keep.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.quasirandom import SobolEngine

torch = pytest.importorskip("torch")
TS = torch.quasirandom.SobolEngine


def _same(a, b):
    assert a.dtype == getattr(ember, str(b.dtype).split(".")[1])
    assert tuple(a.shape) == tuple(b.shape)
    assert np.array_equal(a.numpy(), b.numpy())


def test_direction_numbers_equal_torch_for_every_dimension():
    e = SobolEngine(SobolEngine.MAXDIM)
    t = TS(TS.MAXDIM)
    assert np.array_equal(e.sobolstate.numpy(), t.sobolstate.numpy())
    assert e.sobolstate.dtype is ember.int64 and tuple(e.sobolstate.shape) == (21201, 30)


@pytest.mark.parametrize("dim", [1, 2, 3, 17, 1111, 21201])
def test_unscrambled_draws_equal_torch(dim):
    rng = np.random.default_rng(dim)
    e, t = SobolEngine(dim), TS(dim)
    _same(e.draw(), t.draw())
    for _ in range(6):
        what = rng.integers(0, 4)
        n = int(rng.integers(0, 40 if dim < 2000 else 5))
        if what == 0:
            _same(e.draw(n), t.draw(n))
        elif what == 1:
            _same(e.draw(n, dtype=ember.float64), t.draw(n, dtype=torch.float64))
        elif what == 2:
            k = int(rng.integers(0, 5000))
            e.fast_forward(k)
            t.fast_forward(k)
        else:
            e.reset()
            t.reset()
        assert e.num_generated == t.num_generated
        _same(e.quasi, t.quasi)
    _same(e.draw(3), t.draw(3))


def test_first_draws_and_fast_forward_from_the_start():
    for n in (0, 1, 2, 9):
        e, t = SobolEngine(4), TS(4)
        e.fast_forward(n)
        t.fast_forward(n)
        _same(e.draw(5), t.draw(5))
    e, t = SobolEngine(4), TS(4)
    _same(e.draw(64, dtype=ember.float64), t.draw(64, dtype=torch.float64))
    # far into the sequence: float32 rounds the 30-bit numbers as torch does
    e.fast_forward(123_456)
    t.fast_forward(123_456)
    _same(e.draw(50), t.draw(50))


def test_draw_base2_and_its_error():
    e, t = SobolEngine(5), TS(5)
    _same(e.draw_base2(3), t.draw_base2(3))
    _same(e.draw_base2(3), t.draw_base2(3))
    with pytest.raises(ValueError) as want:
        t.draw_base2(2)
    with pytest.raises(ValueError) as got:
        e.draw_base2(2)
    assert str(got.value) == str(want.value)
    e, t = SobolEngine(2), TS(2)
    e.draw(3)
    t.draw(3)
    _same(e.draw_base2(0), t.draw_base2(0))


def test_out_argument():
    e, t = SobolEngine(3), TS(3)
    o, p = ember.empty(0), torch.empty(0)
    assert e.draw(4, out=o) is o
    t.draw(4, out=p)
    _same(o, p)
    o, p = ember.empty(0, dtype=ember.float64), torch.empty(0, dtype=torch.float64)
    e.draw(2, out=o)
    t.draw(2, out=p)
    _same(o, p)


def test_default_dtype():
    prev = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert SobolEngine(2).draw(3).dtype is ember.float64
    finally:
        ember.set_default_dtype(prev)


@pytest.mark.parametrize("make", [
    lambda S: S(0), lambda S: S(21202), lambda S: S(-1),
    lambda S: S(3).draw(2, dtype=S.__module__.startswith("torch") and torch.float16 or ember.float16),
    lambda S: S(3).draw(2, dtype=S.__module__.startswith("torch") and torch.int64 or ember.int64),
    lambda S: S(3).draw(-2), lambda S: S(3).draw(2.0),
])
def test_errors_as_torch(make):
    with pytest.raises(Exception) as want:
        make(TS)
    with pytest.raises(Exception) as got:
        make(SobolEngine)
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)


def test_dimension_must_be_an_int():
    with pytest.raises(TypeError, match="'dimension' must be int, not float"):
        SobolEngine(2.5)


def test_repr():
    for args in ((3,), (3, True, 3), (3, False, 3), (7, True)):
        assert repr(SobolEngine(*args)) == repr(TS(*args))


def test_top_level_module():
    assert ember.quasirandom.SobolEngine is SobolEngine


# ---------------------------------------------------------------------- scrambled
def test_scrambled_is_deterministic_per_seed():
    a = SobolEngine(6, scramble=True, seed=11).draw(32)
    b = SobolEngine(6, scramble=True, seed=11).draw(32)
    c = SobolEngine(6, scramble=True, seed=12).draw(32)
    assert ember.equal(a, b) and not ember.equal(a, c)
    ember.manual_seed(5)
    d = SobolEngine(6, scramble=True).draw(8)
    ember.manual_seed(5)
    assert ember.equal(SobolEngine(6, scramble=True).draw(8), d)


def test_scrambled_reset_and_fast_forward_are_consistent():
    e = SobolEngine(4, scramble=True, seed=3)
    first = e.draw(20, dtype=ember.float64)
    e.reset()
    assert ember.equal(e.draw(20, dtype=ember.float64), first)
    e.reset()
    e.fast_forward(7)
    assert ember.equal(e.draw(13, dtype=ember.float64), first[7:])
    # the first point is the digital shift, made in the default dtype at construction (as torch)
    assert np.array_equal(first[0].numpy(), (e.shift.numpy() / 2.0 ** 30).astype(np.float32).astype(np.float64))
    t = TS(4, scramble=True, seed=3)
    assert np.array_equal(t.draw(1, dtype=torch.float64).numpy(),
                          (t.shift.numpy() / 2.0 ** 30).astype(np.float32).astype(np.float64)[None])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scrambled_points_keep_the_net_properties(seed):
    m = 8
    e = SobolEngine(40, scramble=True, seed=seed)
    x = e.draw_base2(m, dtype=ember.float64).numpy()
    assert x.shape == (256, 40) and (x >= 0).all() and (x < 1).all()
    # every 1-D projection of 2^m points: one point in each interval of width 2^-m
    cells = np.floor(x * 2 ** m).astype(np.int64)
    for d in range(40):
        assert np.array_equal(np.sort(cells[:, d]), np.arange(2 ** m))
    # the first two dimensions form a (0, m, 2)-net: one point in every elementary box
    for k in range(m + 1):
        box = np.floor(x[:, 0] * 2 ** k).astype(np.int64) * 2 ** (m - k) + np.floor(x[:, 1] * 2 ** (m - k)).astype(
            np.int64)
        assert np.array_equal(np.sort(box), np.arange(2 ** m))
    # the next 256 points are a net again
    y = e.draw_base2(m, dtype=ember.float64).numpy()
    for d in range(40):
        assert np.array_equal(np.sort(np.floor(y[:, d] * 2 ** m)), np.arange(2 ** m))


def test_scrambled_integration_error_is_small():
    # ∫ over [0,1]^5 of prod(x) = 1/32; randomised QMC with 1024 points is far better than 1/sqrt(n)
    errs = []
    for seed in range(5):
        x = SobolEngine(5, scramble=True, seed=seed).draw(1024, dtype=ember.float64).numpy()
        errs.append(abs(np.prod(x, axis=1).mean() - 1 / 32))
    assert max(errs) < 2e-3 and np.mean(errs) < 5e-4


def test_scrambled_unscrambled_differ_but_share_direction_structure():
    u = SobolEngine(3).draw(16).numpy()
    s = SobolEngine(3, scramble=True, seed=0).draw(16).numpy()
    assert not np.array_equal(u, s)
    assert SobolEngine(3, scramble=True, seed=0).sobolstate.dtype is ember.int64
