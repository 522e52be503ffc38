"""ember.fft and stft/istft against torch: values, dtypes and gradients (torch.autograd.grad)
for every transform, norm and signal-size case, on random data."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(99)


def cz(shape, dt=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)


def rz(shape, dt=np.float64):
    return RNG.standard_normal(shape).astype(dt)


def _loss(m, y):
    w = np.random.default_rng(7).standard_normal(tuple(y.shape) + ((2,) if y.is_complex() else ()))
    w = m.from_numpy(w.astype(np.float64 if y.dtype in (m.float64, m.complex128) else np.float32))
    return ((m.view_as_real(y.resolve_conj()) if y.is_complex() else y) * w).sum()


def _check(inputs, f, tol=1e-9):
    tin = [torch.from_numpy(x.copy()).requires_grad_() for x in inputs]
    ein = [ember.from_numpy(x.copy()).requires_grad_() for x in inputs]
    ty, ey = f(torch, *tin), f(ember, *ein)
    assert str(ty.dtype).replace("torch.", "") == ey.dtype.name and tuple(ty.shape) == tuple(ey.shape)
    np.testing.assert_allclose(np.asarray(ey.detach()._data), ty.detach().resolve_conj().numpy(), rtol=tol, atol=tol)
    tg = torch.autograd.grad(_loss(torch, ty), tin)
    eg = ember.autograd.grad(_loss(ember, ey), ein)
    for a, b in zip(tg, eg):
        assert str(a.dtype).replace("torch.", "") == b.dtype.name
        np.testing.assert_allclose(np.asarray(b._data), a.resolve_conj().numpy(), rtol=tol, atol=tol)


CASES = {
    "fft": ([cz((3, 8))], lambda m, a, n: m.fft.fft(a, norm=n)),
    "fft_real_input": ([rz((3, 8))], lambda m, a, n: m.fft.fft(a, norm=n)),
    "fft_cut_dim0": ([cz((3, 8))], lambda m, a, n: m.fft.fft(a, n=2, dim=0, norm=n)),
    "ifft_pad": ([cz((3, 8))], lambda m, a, n: m.fft.ifft(a, n=11, norm=n)),
    "rfft": ([rz((3, 8))], lambda m, a, n: m.fft.rfft(a, norm=n)),
    "rfft_odd_pad": ([rz((3, 7))], lambda m, a, n: m.fft.rfft(a, n=9, norm=n)),
    "irfft": ([cz((3, 5))], lambda m, a, n: m.fft.irfft(a, norm=n)),
    "irfft_odd": ([cz((3, 5))], lambda m, a, n: m.fft.irfft(a, n=9, dim=1, norm=n)),
    "irfft_short_dim0": ([cz((6, 5))], lambda m, a, n: m.fft.irfft(a, n=4, dim=0, norm=n)),
    "hfft": ([cz((3, 5))], lambda m, a, n: m.fft.hfft(a, norm=n)),
    "ihfft": ([rz((3, 8))], lambda m, a, n: m.fft.ihfft(a, norm=n)),
    "fft2": ([cz((2, 4, 6))], lambda m, a, n: m.fft.fft2(a, norm=n)),
    "ifft2_s": ([cz((2, 4, 6))], lambda m, a, n: m.fft.ifft2(a, s=(3, 8), norm=n)),
    "fftn": ([cz((2, 4, 6))], lambda m, a, n: m.fft.fftn(a, norm=n)),
    "ifftn_dims": ([cz((2, 4, 6))], lambda m, a, n: m.fft.ifftn(a, dim=(0, 2), norm=n)),
    "rfft2": ([rz((2, 4, 6))], lambda m, a, n: m.fft.rfft2(a, norm=n)),
    "irfft2": ([cz((2, 4, 4))], lambda m, a, n: m.fft.irfft2(a, norm=n)),
    "rfftn_s": ([rz((2, 4, 6))], lambda m, a, n: m.fft.rfftn(a, s=(5, 7), norm=n)),
    "irfftn_s": ([cz((2, 4, 4))], lambda m, a, n: m.fft.irfftn(a, s=(3, 4, 7), norm=n)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_transforms_match_torch(name, norm):
    inputs, f = CASES[name]
    _check(inputs, lambda m, *a: f(m, *a, norm))


@pytest.mark.parametrize("f", [lambda m, a: m.fft.fft(a), lambda m, a: m.fft.rfft(a.real.contiguous()),
                               lambda m, a: m.fft.irfft(a)])
def test_single_precision_dtypes(f):
    _check([cz((3, 8), np.complex64)], f, tol=1e-4)


def test_rfft_filter_grads():
    _check([rz((2, 16)), cz((9,))], lambda m, x, w: m.fft.irfft(m.fft.rfft(x) * w, n=16))


def test_integer_input_and_helpers():
    x = np.arange(6)
    np.testing.assert_allclose(np.asarray(ember.fft.fft(ember.from_numpy(x))._data),
                               torch.fft.fft(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert ember.fft.fft(ember.from_numpy(x)).dtype is ember.complex64
    for n, d in ((5, 1.0), (6, 0.5)):
        np.testing.assert_allclose(np.asarray(ember.fft.fftfreq(n, d)._data), torch.fft.fftfreq(n, d).numpy())
        np.testing.assert_allclose(np.asarray(ember.fft.rfftfreq(n, d)._data), torch.fft.rfftfreq(n, d).numpy())
    a = cz((4, 5))
    for dim in (None, 1, (0,)):
        np.testing.assert_array_equal(np.asarray(ember.fft.fftshift(ember.from_numpy(a), dim)._data),
                                      torch.fft.fftshift(torch.from_numpy(a), dim).numpy())
        np.testing.assert_array_equal(np.asarray(ember.fft.ifftshift(ember.from_numpy(a), dim)._data),
                                      torch.fft.ifftshift(torch.from_numpy(a), dim).numpy())


def test_errors_match_torch():
    for f in (lambda m: m.fft.fft(m.randn(4), norm="xx"), lambda m: m.fft.rfft(m.randn(4, dtype=m.cfloat)),
              lambda m: m.fft.fft(m.randn(4).half()), lambda m: m.fft.fft(m.randn(4), n=0),
              lambda m: m.stft(m.randn(100), 16)):
        msgs = []
        for m in (torch, ember):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(RuntimeError) as info:
                    f(m)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1]


STFT = {
    "stft_1d": ([rz((100,))], lambda m, x: m.stft(x, 16, window=m.hann_window(16, dtype=x.dtype), return_complex=True)),
    "stft_win_hop_norm": ([rz((2, 100))], lambda m, x: m.stft(x, 16, hop_length=5, win_length=12,
                                                              window=m.hann_window(12, dtype=x.dtype),
                                                              return_complex=True, normalized=True)),
    "stft_twosided_nocenter": ([rz((2, 64))], lambda m, x: x.stft(16, 4, window=m.hamming_window(16, dtype=x.dtype),
                                                                  center=False, return_complex=True, onesided=False)),
    "stft_constant_pad": ([rz((50,))], lambda m, x: m.stft(x, 8, window=m.hann_window(8, dtype=x.dtype),
                                                           pad_mode="constant", return_complex=True)),
    "istft_roundtrip": ([rz((2, 100))], lambda m, x: m.istft(
        m.stft(x, 16, window=m.hann_window(16, dtype=x.dtype), return_complex=True), 16,
        window=m.hann_window(16, dtype=x.dtype), length=100)),
    "istft_norm_hop": ([rz((100,))], lambda m, x: m.istft(
        m.stft(x, 16, hop_length=4, window=m.hann_window(16, dtype=x.dtype), return_complex=True, normalized=True),
        16, hop_length=4, window=m.hann_window(16, dtype=x.dtype), normalized=True)),
    "istft_of_spectrum": ([rz((9, 7)), rz((9, 7))], lambda m, a, b: m.complex(a, b).istft(
        16, window=m.hann_window(16, dtype=a.dtype))),
}


@pytest.mark.parametrize("name", sorted(STFT))
def test_stft_istft_match_torch(name):
    _check(*STFT[name])


def test_stft_return_complex_false_is_deprecated_view_as_real():
    x = rz((50,))
    outs = []
    for m in (torch, ember):
        with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
            outs.append(m.stft(m.from_numpy(x), 8, window=m.hann_window(8, dtype=m.float64), return_complex=False))
    assert tuple(outs[0].shape) == tuple(outs[1].shape) and outs[1].dtype is ember.float64
    np.testing.assert_allclose(np.asarray(outs[1]._data), outs[0].numpy(), atol=1e-10)
