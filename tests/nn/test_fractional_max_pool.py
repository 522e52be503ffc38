"""F.fractional_max_pool2d / 3d (+ _with_indices) and nn.FractionalMaxPool2d / 3d against torch
given the same ``_random_samples``: values, indices, gradients, output_size / output_ratio,
unbatched input, errors."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()


def enp(t):
    return np.asarray(t.detach()._data)


@settings(max_examples=40, deadline=None)
@given(nd=st.sampled_from([2, 3]), single=st.booleans(), unbatched=st.booleans(), ratio=st.booleans(),
       data=st.data())
def test_fractional_max_pool_vs_torch(nd, single, unbatched, ratio, data):
    dt = np.float32 if single else np.float64
    sp = tuple(data.draw(st.integers(3, 9)) for _ in range(nd))
    k = tuple(data.draw(st.integers(1, min(3, s - 1))) for s in sp)
    strict = nd == 3          # torch's 3-d bound is out + k - 1 < L
    if ratio:
        r = tuple(data.draw(st.sampled_from([0.3, 0.5, 0.7])) for _ in range(nd))
        out_kw = dict(output_ratio=r)
        out = tuple(int(s * q) for s, q in zip(sp, r))
        if any(o + kk - 1 > s - strict for o, kk, s in zip(out, k, sp)):
            return
    else:
        out = tuple(data.draw(st.integers(1, s - kk + 1 - strict)) for s, kk in zip(sp, k))
        out_kw = dict(output_size=out)
    N, C = 2, 3
    x = RNG.standard_normal((N, C) + sp).astype(dt)
    if data.draw(st.booleans()):
        x[(0, 1) + tuple(0 for _ in sp)] = np.nan       # a NaN wins its windows, as torch
    if unbatched:
        x = x[0]
    samples = RNG.random((1 if unbatched else N, C, nd)).astype(dt)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    tfn, efn = getattr(TF, f"fractional_max_pool{nd}d"), getattr(EF, f"fractional_max_pool{nd}d")
    to, ti = tfn(tx, k, return_indices=True, _random_samples=torch.tensor(samples), **out_kw)
    eo, ei = efn(ex, k, return_indices=True, _random_samples=ember.tensor(samples), **out_kw)
    assert tuple(eo.shape) == tuple(to.shape) and eo.dtype.name == str(to.dtype)[6:] and ei.dtype is ember.int64
    np.testing.assert_array_equal(enp(ei), ti.numpy())
    np.testing.assert_array_equal(enp(eo), to.detach().numpy())
    g = RNG.standard_normal(tuple(to.shape)).astype(dt)
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    np.testing.assert_allclose(enp(ex.grad), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    # _with_indices names
    wfn = getattr(EF, f"fractional_max_pool{nd}d_with_indices")
    o2, i2 = wfn(ember.tensor(x), k, _random_samples=ember.tensor(samples), **out_kw)
    np.testing.assert_array_equal(enp(i2), ti.numpy())


def test_random_samples_drawn_when_absent():
    x = ember.randn(2, 3, 9, 9)
    o, i = EF.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    assert tuple(o.shape) == (2, 3, 4, 4)
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(enp(o), enp(ember.gather(flat, 2, i.reshape(2, 3, -1)).reshape(2, 3, 4, 4)))


@pytest.mark.parametrize("nd", [2, 3])
def test_modules(nd):
    sp = (8,) * nd
    x = RNG.standard_normal((2, 3) + sp)
    samples = RNG.random((2, 3, nd))
    T = getattr(torch.nn, f"FractionalMaxPool{nd}d")
    E = getattr(ember.nn, f"FractionalMaxPool{nd}d")
    for kw in (dict(output_size=3), dict(output_ratio=0.5)):
        tm = T(2, return_indices=True, _random_samples=torch.tensor(samples), **kw)
        em = E(2, return_indices=True, _random_samples=ember.tensor(samples), **kw)
        (to, ti), (eo, ei) = tm(torch.tensor(x)), em(ember.tensor(x))
        np.testing.assert_array_equal(enp(eo), to.numpy())
        np.testing.assert_array_equal(enp(ei), ti.numpy())
        assert "_random_samples" in dict(em.named_buffers())
    for kw, msg in ((dict(), "requires specifying either an output size, or a pooling ratio"),
                    (dict(output_ratio=1.2), r"output_ratio must be between 0 and 1 \(got 1.2\)"),
                    (dict(output_size=2, output_ratio=0.5), "only one of output_size and output_ratio")):
        with pytest.raises(ValueError, match=msg):
            T(2, **kw)
        with pytest.raises(ValueError, match=msg):
            E(2, **kw)


def test_errors_match_torch():
    x = RNG.standard_normal((2, 3, 7, 8))
    cases = [
        (lambda m, F, t: F.fractional_max_pool2d(t, 3), ValueError, "requires specifying either"),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_size=(7, 8)), RuntimeError,
         "pool height 3 too large relative to input height 7"),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_size=4, _random_samples=m.rand(2, 3, 3, dtype=m.float64)),
         RuntimeError, r"Expect _random_samples.size\(2\) equals to 2; got 3."),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_size=4, _random_samples=m.rand(2, 3, dtype=m.float64)),
         RuntimeError, "Expect _random_samples to have 3 dimensions, got 2"),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_size=4, _random_samples=m.rand(1, 3, 2,
                                                                                               dtype=m.float64)),
         RuntimeError, "no less then input batch size"),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_size=4, _random_samples=m.rand(2, 3, 2,
                                                                                               dtype=m.float32)),
         RuntimeError, "same dtype as input"),
        (lambda m, F, t: F.fractional_max_pool2d(t, 3, output_ratio=(0.5, 0.5, 0.5)), ValueError,
         "output_ratio to either be a single Int or tuple of Ints"),
        (lambda m, F, t: F.fractional_max_pool3d(m.randn(1, 1, 5, 5, 5, dtype=m.float64), 2, output_size=5),
         RuntimeError, "pool time 2 too large relative to input time 5"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn(torch, TF, torch.tensor(x))
        with pytest.raises(exc, match=msg):
            fn(ember, EF, ember.tensor(x))
    with pytest.raises(NotImplementedError):
        EF.fractional_max_pool2d(ember.tensor(x).long(), 3, output_size=4)


@pytest.mark.parametrize("tdt,edt", [("float16", "float16"), ("bfloat16", "bfloat16")])
def test_half_precision_windows(tdt, edt):
    """torch computes the window sequence in the input dtype (each step rounded): same windows."""
    for _ in range(10):
        x = RNG.standard_normal((2, 3, 13, 11)).astype(np.float32)
        s = RNG.random((2, 3, 2)).astype(np.float32)
        out = (int(RNG.integers(1, 12)), int(RNG.integers(1, 10)))
        tx = torch.tensor(x).to(getattr(torch, tdt)).requires_grad_()
        ex = ember.tensor(x).to(getattr(ember, edt)).requires_grad_()
        to, ti = TF.fractional_max_pool2d(tx, 2, output_size=out, return_indices=True,
                                          _random_samples=torch.tensor(s).to(getattr(torch, tdt)))
        eo, ei = EF.fractional_max_pool2d(ex, 2, output_size=out, return_indices=True,
                                          _random_samples=ember.tensor(s).to(getattr(ember, edt)))
        np.testing.assert_array_equal(enp(ei), ti.numpy())
        np.testing.assert_array_equal(enp(eo.float()), to.float().detach().numpy())
        to.float().sum().backward()
        eo.float().sum().backward()
        np.testing.assert_array_equal(enp(ex.grad.float()), tx.grad.float().numpy())
