"""``stft`` and ``istft`` (``ember.stft``, ``Tensor.stft``), built from differentiable ops:
padding, ``unfold`` into frames, a window, ``ember.fft``; the inverse overlap-adds with
``index_add`` and divides by the summed squared window, as torch does."""
from __future__ import annotations

import math
import warnings

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._exports import Exports

_export = Exports()


def _window_of(window, win_length, n_fft, like, name):
    """The window padded on both sides to ``n_fft`` (torch centres a shorter window)."""
    if window is None:
        w = api.ones(win_length, dtype=like.dtype.to_real() if like.dtype.is_complex else like.dtype,
                     device=like.device)
    else:
        if window.ndim != 1 or window.shape[0] != win_length:
            raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to win_length={win_length}, "
                               f"but got window with size {list(window.shape)}")
        w = window
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        w = api.cat([api.zeros(left, dtype=w.dtype, device=w.device), w,
                     api.zeros(n_fft - win_length - left, dtype=w.dtype, device=w.device)])
    return w


@_export(method=True)
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform: frames of ``n_fft`` samples every ``hop_length``,
    windowed, transformed; the result is ``(batch?, freq, frames)``."""
    from .. import fft as _fft
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.", UserWarning,
                      stacklevel=2)
    complex_in = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will "
                      "return complex tensors for all inputs, and return_complex=False will raise an error.\n"
                      "Note: you can still call torch.view_as_real on the complex output to recover the old "
                      "return format.", UserWarning, stacklevel=2)
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if x.dtype.category < 2:
        x = x.to(_t.get_default_dtype())
    if center:
        from ..nn import functional as F
        p = n_fft // 2
        x = F.pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    length = x.shape[-1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    w = _window_of(window, win, n_fft, x, "stft")
    frames = x.unfold(-1, n_fft, hop) * w             # (B, n_frames, n_fft)
    one = (not complex_in) if onesided is None else bool(onesided)
    if one and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if one else _fft.fft(frames, dim=-1, norm=norm)
    spec = spec.transpose(-1, -2)                      # (B, freq, n_frames)
    if input.ndim == 1:
        spec = spec.squeeze(0)
    return spec if return_complex else api.view_as_real(spec)


@_export(method=True)
def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The inverse of ``stft``: inverse transforms of the frames, windowed, overlap-added and
    divided by the overlap-added squared window (torch's least-squares inverse)."""
    from .. import fft as _fft
    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor.")
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex dtype, but got "
                           f"{input.ndim}")
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    one = (n_freq != n_fft) if onesided is None else bool(onesided)
    if one:
        if n_fft // 2 + 1 != n_freq:
            raise RuntimeError(f"istft: expected the frequency dimension (2nd to the last) of the input tensor to "
                               f"match n_fft / 2 + 1 when onesided=True, but got {n_freq}")
    elif n_fft != n_freq:
        raise RuntimeError(f"istft: expected the frequency dimension (2nd to the last) of the input tensor to "
                           f"match n_fft when onesided=False, but got {n_freq}")
    if one and return_complex:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    w = _window_of(window, win, n_fft, spec, "istft")
    norm = "ortho" if normalized else "backward"
    sp = spec.transpose(-1, -2)                        # (B, n_frames, freq)
    if one:
        frames = _fft.irfft(sp, n=n_fft, dim=-1, norm=norm)
    else:
        frames = _fft.ifft(sp, n=n_fft, dim=-1, norm=norm)
        if not return_complex:
            frames = api.real(frames)
    frames = frames * w                                 # (B, n_frames, n_fft)
    expected = n_fft + hop * (n_frames - 1)
    idx = (api.arange(n_frames, device=spec.device).unsqueeze(1) * hop +
           api.arange(n_fft, device=spec.device).unsqueeze(0)).reshape(-1)
    b = frames.shape[0]
    y = api.zeros((b, expected), dtype=frames.dtype, device=spec.device).index_add(
        1, idx, frames.reshape(b, n_frames * n_fft))
    wsq = (w * w) if not w.dtype.is_complex else (w * w.conj()).real
    env = api.zeros(expected, dtype=wsq.dtype, device=spec.device).index_add(
        0, idx, wsq.unsqueeze(0).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + int(length)
    else:
        end = expected - n_fft // 2 if center else expected
    end = min(end, expected)
    y = y[:, start:end]
    env = env[start:end]
    if bool((env.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: 0 (the window does not satisfy the NOLA "
                           "condition: its overlap-added square is zero somewhere)")
    y = y / env
    if length is not None and y.shape[-1] < int(length):
        y = api.cat([y, api.zeros((b, int(length) - y.shape[-1]), dtype=y.dtype, device=y.device)], -1)
    if input.ndim == 2:
        y = y.squeeze(0)
    return y


_export.install()
