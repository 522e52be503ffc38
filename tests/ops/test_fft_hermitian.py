"""ember.fft.hfft2 / hfftn / ihfft2 / ihfftn against torch.fft: s / dim / norm resolution,
values, dtypes, gradients (torch's complex convention) and errors."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()


def tnp(t):
    return t.detach().resolve_conj().numpy()


def enp(t):
    return np.asarray(t.detach()._data)


def run(name, a, **kw):
    ta, ea = torch.tensor(a, requires_grad=a.dtype.kind in "fc"), ember.tensor(a, requires_grad=a.dtype.kind in "fc")
    to = getattr(torch.fft, name)(ta, **kw)
    eo = getattr(ember.fft, name)(ea, **kw)
    assert str(to.dtype).replace("torch.", "") == eo.dtype.name
    assert tuple(to.shape) == tuple(eo.shape)
    tol = 1e-4 if to.dtype in (torch.float32, torch.complex64) else 1e-9
    np.testing.assert_allclose(enp(eo), tnp(to), atol=tol, rtol=tol)
    if not ta.requires_grad:
        return
    w = RNG.standard_normal(tuple(to.shape))
    if to.is_complex():
        w = w + 1j * RNG.standard_normal(tuple(to.shape))
    w = w.astype(tnp(to).dtype)
    (to * torch.tensor(w)).real.sum().backward() if to.is_complex() else (to * torch.tensor(w)).sum().backward()
    (eo * ember.tensor(w)).real.sum().backward() if eo.dtype.is_complex else (eo * ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(enp(ea.grad), tnp(ta.grad), atol=tol * 10, rtol=tol * 10)


def signal(shape, complex_, single=False):
    a = RNG.standard_normal(shape)
    if complex_:
        a = a + 1j * RNG.standard_normal(shape)
        return a.astype(np.complex64 if single else np.complex128)
    return a.astype(np.float32 if single else np.float64)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), norm=st.sampled_from([None, "backward", "ortho",
                                                                                         "forward"]),
       single=st.booleans(), data=st.data())
def test_hfftn_ihfftn(shape, norm, single, data):
    nd = len(shape)
    dims = data.draw(st.none() | st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                                          unique_by=lambda d: d % nd))
    k = nd if dims is None else len(dims)
    s = data.draw(st.none() | st.lists(st.sampled_from([-1, 1, 2, 3, 4, 6]), min_size=k, max_size=k))
    if s is not None and dims is None and data.draw(st.booleans()):
        s = s[:max(1, len(s) - 1)]          # s alone: the last len(s) dims
    kw = dict(norm=norm)
    if s is not None:
        kw["s"] = s
    if dims is not None:
        kw["dim"] = dims
    last_m = shape[(dims[-1] if dims else -1)]
    if s is None or s[-1] == -1:
        if last_m == 1:                      # hfftn's default last size 2 * (1 - 1) = 0: torch's error
            with pytest.raises(RuntimeError, match="Invalid number of data points"):
                ember.fft.hfftn(ember.tensor(signal(shape, True)), **kw)
        else:
            run("hfftn", signal(shape, True, single), **kw)
    else:
        run("hfftn", signal(shape, True, single), **kw)
    run("ihfftn", signal(shape, False, single), **kw)


@pytest.mark.parametrize("s", [None, (3, 6), (4, -1)])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 1)])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hfft2_ihfft2(s, dim, norm):
    run("hfft2", signal((3, 4, 5), True), s=s, dim=dim, norm=norm)
    run("ihfft2", signal((3, 4, 5), False), s=s, dim=dim, norm=norm)


def test_defaults_and_promotion():
    run("hfft2", signal((2, 3, 4), True))
    run("ihfft2", signal((2, 3, 4), False))
    run("hfftn", signal((2, 3, 4), False))          # real input promotes to complex
    run("ihfftn", RNG.integers(-5, 5, (3, 4)))     # integers transform as the default float dtype


def test_errors():
    z = ember.tensor(signal((3, 4), True))
    x = ember.tensor(signal((3, 4), False))
    with pytest.raises(RuntimeError, match="ihfftn expects a real-valued input tensor"):
        ember.fft.ihfftn(z)
    with pytest.raises(RuntimeError):
        torch.fft.ihfftn(torch.tensor(signal((3, 4), True)))
    with pytest.raises(RuntimeError, match="same length"):
        ember.fft.hfft2(z, s=(4,))
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        ember.fft.hfftn(z, dim=(0, 0))
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        ember.fft.ihfft2(x, norm="bogus")
    with pytest.raises(RuntimeError, match="must transform at least one axis"):
        ember.fft.hfftn(z, dim=())
    with pytest.raises(RuntimeError):
        torch.fft.hfftn(torch.tensor(signal((3, 4), True)), dim=())
    with pytest.raises(TypeError):
        ember.fft.hfftn([1.0, 2.0])
