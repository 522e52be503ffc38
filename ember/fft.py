"""``ember.fft``: torch.fft's discrete Fourier transforms, with autograd.

Every transform is: promote the input (integers to the default float dtype, real to complex
where the transform needs complex input), cut or zero-pad each transformed dim to the signal
size ``n``/``s`` (differentiable ``narrow``/``cat``), then one of the three kernels of
``ember.ops.fft_ops`` (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``), whose derivatives are
torch's. ``norm`` is "backward" (default: no scale forward, 1/n inverse), "ortho"
(1/sqrt(n) both ways) or "forward" (1/n forward, none inverse).
"""
from __future__ import annotations

import numbers

import numpy as np

from . import types as _t
from .ops import api
from .ops._helpers import wrap_dim
from .ops.fft_ops import _fft_c2c, _fft_c2r, _fft_r2c
from .tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
           "ifftn", "rfftn", "irfftn", "hfft2", "hfftn", "ihfft2", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _scale(norm, forward):
    """The kernels' scale mode (0 none, 1 1/sqrt(n), 2 1/n) of ``norm`` for a transform in the
    ``forward`` direction (an inverse transform's "backward" norm is its 1/n)."""
    if norm is None or norm == "backward":
        return 0 if forward else 2
    if norm == "ortho":
        return 1
    if norm == "forward":
        return 2 if forward else 0
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _check_tensor(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def _float_input(x):
    """Integers and bools transform as the default float dtype (torch)."""
    if x.dtype.category < 2:
        return x.to(_t.get_default_dtype())
    if x.dtype in (_t.float16, _t.bfloat16):
        raise RuntimeError(f"Unsupported dtype {x.dtype.legacy_name}")
    return x


def _complex_input(x):
    x = _float_input(x)
    return x if x.dtype.is_complex else x.to(x.dtype.to_complex())


def _resize(x, dims, sizes):
    """``x`` cut or zero-padded at the end of each of ``dims`` to ``sizes`` (None: as is)."""
    for d, n in zip(dims, sizes):
        if n is None:
            n = x.shape[d]      # as is; an empty dim is still no valid length (torch)
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
        cur = x.shape[d]
        if n < cur:
            x = api.narrow(x, d, 0, n)
        elif n > cur:
            shape = list(x.shape)
            shape[d] = n - cur
            x = api.cat([x, api.zeros(tuple(shape), dtype=x.dtype, device=x.device)], d)
    return x


def _dims_and_sizes(x, s, dim, default_all=True):
    """torch's resolution of ``s``/``dim`` for the n-dimensional transforms: ``dim`` defaults to
    the last ``len(s)`` dims when ``s`` is given, else to every dim (or the given default)."""
    if isinstance(dim, numbers.Integral):
        dim = (dim,)
    if s is not None and isinstance(s, numbers.Integral):
        s = (s,)
    if dim is None:
        if s is not None:
            dims = tuple(range(x.ndim - len(s), x.ndim))
        else:
            dims = tuple(range(x.ndim)) if default_all else (x.ndim - 2, x.ndim - 1)
    else:
        dims = tuple(wrap_dim(d, x.ndim) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is None:
        sizes = [None] * len(dims)
    else:
        s = [None if n == -1 else int(n) for n in s]
        if len(s) != len(dims):
            raise RuntimeError(f"When given, dim and shape arguments must have the same length")
        sizes = s
    return dims, sizes


# ---------------------------------------------------------------------- one dimension
def fft(input, n=None, dim=-1, norm=None):
    """The 1-D discrete Fourier transform (complex result)."""
    _check_tensor("fft", input)
    d = wrap_dim(dim, input.ndim)
    x = _resize(_complex_input(input), (d,), (n,))
    return _fft_c2c.binding(x, [d], _scale(norm, True), True)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-D inverse discrete Fourier transform."""
    _check_tensor("ifft", input)
    d = wrap_dim(dim, input.ndim)
    x = _resize(_complex_input(input), (d,), (n,))
    return _fft_c2c.binding(x, [d], _scale(norm, False), False)


def rfft(input, n=None, dim=-1, norm=None):
    """The FFT of a real signal: the ``n // 2 + 1`` non-negative frequencies."""
    _check_tensor("rfft", input)
    if input.dtype.is_complex:
        raise RuntimeError(f"rfft expects a real input tensor, but got {input.dtype.legacy_name}")
    d = wrap_dim(dim, input.ndim)
    x = _resize(_float_input(input), (d,), (n,))
    return _fft_r2c.binding(x, [d], _scale(norm, True), True)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    _check_tensor("irfft", input)
    d = wrap_dim(dim, input.ndim)
    x = _complex_input(input)
    out_n = 2 * (x.shape[d] - 1) if n is None else int(n)
    if out_n < 1:
        raise RuntimeError(f"Invalid number of data points ({out_n}) specified")
    x = _resize(x, (d,), (out_n // 2 + 1,))
    return _fft_c2r.binding(x, [d], _scale(norm, False), out_n)


def hfft(input, n=None, dim=-1, norm=None):
    """The FFT of a Hermitian-symmetric signal given by its first half (a real result)."""
    _check_tensor("hfft", input)
    d = wrap_dim(dim, input.ndim)
    x = _complex_input(input)
    out_n = 2 * (x.shape[d] - 1) if n is None else int(n)
    if out_n < 1:
        raise RuntimeError(f"Invalid number of data points ({out_n}) specified")
    x = _resize(x, (d,), (out_n // 2 + 1,))
    return _fft_c2r.binding(api.conj(x), [d], _scale(norm, True), out_n)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``hfft``: the first half of the spectrum of a real signal, conjugated."""
    _check_tensor("ihfft", input)
    if input.dtype.is_complex:
        raise RuntimeError(f"ihfft expects a real input tensor, but got {input.dtype.legacy_name}")
    d = wrap_dim(dim, input.ndim)
    x = _resize(_float_input(input), (d,), (n,))
    return api.conj(_fft_r2c.binding(x, [d], _scale(norm, False), True))


# ---------------------------------------------------------------------- n dimensions
def fftn(input, s=None, dim=None, norm=None):
    _check_tensor("fftn", input)
    dims, sizes = _dims_and_sizes(input, s, dim)
    x = _resize(_complex_input(input), dims, sizes)
    return _fft_c2c.binding(x, list(dims), _scale(norm, True), True)


def ifftn(input, s=None, dim=None, norm=None):
    _check_tensor("ifftn", input)
    dims, sizes = _dims_and_sizes(input, s, dim)
    x = _resize(_complex_input(input), dims, sizes)
    return _fft_c2c.binding(x, list(dims), _scale(norm, False), False)


def rfftn(input, s=None, dim=None, norm=None):
    _check_tensor("rfftn", input)
    if input.dtype.is_complex:
        raise RuntimeError(f"rfftn expects a real-valued input tensor, but got {input.dtype.legacy_name}")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    x = _resize(_float_input(input), dims, sizes)
    return _fft_r2c.binding(x, list(dims), _scale(norm, True), True)


def irfftn(input, s=None, dim=None, norm=None):
    _check_tensor("irfftn", input)
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    x = _complex_input(input)
    last = dims[-1]
    out_n = 2 * (x.shape[last] - 1) if sizes[-1] is None else sizes[-1]
    if out_n < 1:
        raise RuntimeError(f"Invalid number of data points ({out_n}) specified")
    x = _resize(x, dims, list(sizes[:-1]) + [out_n // 2 + 1])
    return _fft_c2r.binding(x, list(dims), _scale(norm, False), out_n)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    return irfftn(input, s, dim, norm)


def hfftn(input, s=None, dim=None, norm=None):
    """The n-D FFT of a Hermitian-symmetric signal given by its half along the last of ``dim``
    (a real result, last signal size ``s[-1]``, default ``2 * (m - 1)``), as torch: a forward
    c2c transform over the other dims, then the conjugate's c2r transform over the last."""
    _check_tensor("hfftn", input)
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("hfftn must transform at least one axis")
    x = _complex_input(input)
    last = dims[-1]
    out_n = 2 * (x.shape[last] - 1) if sizes[-1] is None else sizes[-1]
    if out_n < 1:
        raise RuntimeError(f"Invalid number of data points ({out_n}) specified")
    x = _resize(x, dims, list(sizes[:-1]) + [out_n // 2 + 1])
    scale = _scale(norm, True)
    if len(dims) > 1:
        x = _fft_c2c.binding(x, list(dims[:-1]), scale, True)
    # the c2r kernel scales by the last dim's size only when the others were already scaled:
    # its n is the product over the dims it is given
    return _fft_c2r.binding(api.conj(x), [last], scale, out_n)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``hfftn``: a real signal's one-sided (along the last of ``dim``) inverse
    spectrum, as torch: the conjugated r2c transform of the last dim, then the inverse c2c
    transform of the others."""
    _check_tensor("ihfftn", input)
    if input.dtype.is_complex:
        raise RuntimeError(f"ihfftn expects a real-valued input tensor, but got {input.dtype.legacy_name}")
    dims, sizes = _dims_and_sizes(input, s, dim)
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    x = _resize(_float_input(input), dims, sizes)
    scale = _scale(norm, False)
    out = api.conj(_fft_r2c.binding(x, [dims[-1]], scale, True))
    if len(dims) > 1:
        out = _fft_c2c.binding(out, list(dims[:-1]), scale, False)
    return out


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    return ihfftn(input, s, dim, norm)


# ---------------------------------------------------------------------- helpers
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The sample frequencies of an ``n``-point FFT with sample spacing ``d``."""
    dt = _t.as_dtype(dtype) if dtype is not None else _t.get_default_dtype()
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)]).astype(np.float64)
    return api.tensor(k / (n * d), dtype=dt, device=device, requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None):
    """The non-negative sample frequencies of an ``n``-point real FFT."""
    dt = _t.as_dtype(dtype) if dtype is not None else _t.get_default_dtype()
    k = np.arange(0, n // 2 + 1, dtype=np.float64)
    return api.tensor(k / (n * d), dtype=dt, device=device, requires_grad=requires_grad)


def _shift(input, dim, sign):
    if dim is None:
        dims = tuple(range(input.ndim))
    elif isinstance(dim, numbers.Integral):
        dims = (wrap_dim(dim, input.ndim),)
    else:
        dims = tuple(wrap_dim(d, input.ndim) for d in dim)
    if not dims:
        return input.clone()
    shifts = tuple(sign * (input.shape[d] // 2) for d in dims)
    return api.roll(input, shifts, dims)


def fftshift(input, dim=None):
    """Move the zero frequency to the middle (``roll`` by ``n // 2``)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift``."""
    return _shift(input, dim, -1)


# torch's out= on the transforms and frequency grids (ember/ops/_out.py)
from .ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), _out_mod.FFT, "fft.")
