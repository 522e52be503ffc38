"""The three discrete Fourier transform kernels every ``ember.fft`` function is built from,
as in torch (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``), and their derivatives.

Each takes the input already cut or zero-padded to the signal sizes (``ember.fft`` does that
with differentiable ops), the dims to transform, and a *scale mode*: 0 none, 1 1/sqrt(n),
2 1/n, where n is the product of the signal sizes. The direction is separate from the scale
(a "backward"-normalised inverse FFT is the inverse direction with scale 1/n), because the
adjoint of a transform is the opposite direction with the same scale: that is what the
derivative formulas need.

The kernel is numpy's pocketfft (cupy's cuFFT on a GPU), which computes in double precision
for float32 input; results are cast to torch's dtype (complex64 for float32/complex64 input).
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from . import _meta, api
from ._helpers import wrap_dim
from .registry import defop

_NORM_FOR = {  # (forward direction, scale mode) -> numpy's norm for its fftn / ifftn
    (True, 0): "backward", (True, 1): "ortho", (True, 2): "forward",
    (False, 0): "forward", (False, 1): "ortho", (False, 2): "backward",
}


def _dims(dim, ndim):
    return tuple(wrap_dim(d, ndim) for d in dim)


def _complex_of(dt):
    """The complex dtype of a transform's result for input dtype ``dt`` (torch's rules)."""
    if dt.is_complex:
        return dt
    if dt in (_t.float16, _t.bfloat16):
        raise RuntimeError(f"Unsupported dtype {dt.legacy_name}")
    return dt.to_complex()


def _real_of(dt):
    return dt.to_real() if dt.is_complex else dt


def _check_dtype(dt):
    if dt in (_t.float16, _t.bfloat16) or (dt.is_complex and dt.to_real() is _t.float16):
        raise RuntimeError(f"Unsupported dtype {dt.legacy_name}")


# ---------------------------------------------------------------------- complex -> complex
@defop("_fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor", save=(), method=False,
       function=False)
def _fft_c2c(xp, a, dim, normalization, forward):
    dt = _t.from_numpy_dtype(a.dtype)
    _check_dtype(dt)
    if not dt.is_complex:
        raise RuntimeError(f"_fft_c2c expects a complex input tensor, but got {dt.legacy_name}")
    dims = _dims(dim, a.ndim)
    if not dims:
        return a.copy()
    fn = xp.fft.fftn if forward else xp.fft.ifftn
    return xp.ascontiguousarray(fn(a, axes=dims, norm=_NORM_FOR[(bool(forward), int(normalization))])
                                .astype(dt.np, copy=False))


@_fft_c2c.meta_fn
def _fft_c2c_meta(a, dim, normalization, forward):
    _check_dtype(a.dtype)
    if not a.dtype.is_complex:
        raise RuntimeError(f"_fft_c2c expects a complex input tensor, but got {a.dtype.legacy_name}")
    return _meta.out(tuple(a.shape), a.dtype)


@_fft_c2c.derivative
def _fft_c2c_bw(ctx, g):
    # the adjoint (conjugate transpose) of a DFT is the opposite direction, same scale
    _, dim, normalization, forward = ctx.args
    return (_fft_c2c.binding(g, dim, normalization, not forward),)


_fft_c2c.complex_grad = "raw"


# ---------------------------------------------------------------------- real -> complex
@defop("_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", save=("self",),
       method=False, function=False)
def _fft_r2c(xp, a, dim, normalization, onesided):
    dt = _t.from_numpy_dtype(a.dtype)
    _check_dtype(dt)
    if dt.is_complex:
        raise RuntimeError(f"_fft_r2c expects a real input tensor, but got {dt.legacy_name}")
    dims = _dims(dim, a.ndim)
    norm = _NORM_FOR[(True, int(normalization))]
    r = xp.fft.rfftn(a, axes=dims, norm=norm) if onesided else xp.fft.fftn(a, axes=dims, norm=norm)
    return xp.ascontiguousarray(r.astype(dt.to_complex().np, copy=False))


@_fft_r2c.meta_fn
def _fft_r2c_meta(a, dim, normalization, onesided):
    _check_dtype(a.dtype)
    if a.dtype.is_complex:
        raise RuntimeError(f"_fft_r2c expects a real input tensor, but got {a.dtype.legacy_name}")
    shape = list(a.shape)
    if onesided:
        d = wrap_dim(dim[-1], len(shape))
        shape[d] = shape[d] // 2 + 1
    return _meta.out(tuple(shape), a.dtype.to_complex())


@_fft_r2c.derivative
def _fft_r2c_bw(ctx, g):
    # torch's fft_r2c_backward: the one-sided gradient zero-extended to the full spectrum, then
    # the adjoint c2c transform, real part
    a, dim, normalization, onesided = ctx.args
    if onesided:
        d = wrap_dim(dim[-1], a.ndim)
        full = a.shape[d]
        missing = full - g.shape[d]
        if missing > 0:
            g = _zero_extend(g, d, full)
    return (api.real(_fft_c2c.binding(g, dim, normalization, False)),)


def _zero_extend(g, d, n):
    shape = list(g.shape)
    extra = n - shape[d]
    shape[d] = extra
    return api.cat([g, api.zeros(tuple(shape), dtype=g.dtype, device=g.device)], d)


_fft_r2c.complex_grad = "raw"


# ---------------------------------------------------------------------- complex -> real
@defop("_fft_c2r(Tensor self, int[] dim, int normalization, int last_dim_size) -> Tensor", save=(),
       method=False, function=False)
def _fft_c2r(xp, a, dim, normalization, last_dim_size):
    dt = _t.from_numpy_dtype(a.dtype)
    _check_dtype(dt)
    if not dt.is_complex:
        raise RuntimeError(f"_fft_c2r expects a complex input tensor, but got {dt.legacy_name}")
    dims = _dims(dim, a.ndim)
    s = [a.shape[d] for d in dims[:-1]] + [int(last_dim_size)]
    r = xp.fft.irfftn(a, s=s, axes=dims, norm=_NORM_FOR[(False, int(normalization))])
    return xp.ascontiguousarray(r.astype(dt.to_real().np, copy=False))


@_fft_c2r.meta_fn
def _fft_c2r_meta(a, dim, normalization, last_dim_size):
    _check_dtype(a.dtype)
    if not a.dtype.is_complex:
        raise RuntimeError(f"_fft_c2r expects a complex input tensor, but got {a.dtype.legacy_name}")
    shape = list(a.shape)
    shape[wrap_dim(dim[-1], len(shape))] = last_dim_size
    return _meta.out(tuple(shape), a.dtype.to_real())


@_fft_c2r.derivative
def _fft_c2r_bw(ctx, g):
    # torch's fft_c2r_backward: the forward one-sided transform of the gradient, with the bins
    # that stand for two (conjugate) bins of the full spectrum doubled
    _, dim, normalization, last_dim_size = ctx.args
    gi = _fft_r2c.binding(g, dim, normalization, True)
    d = wrap_dim(dim[-1], g.ndim)
    double = g.shape[d] - gi.shape[d]
    if double > 0:
        n = gi.shape[d]
        shape = [1] * gi.ndim
        shape[d] = n
        scale = np.ones(n)
        scale[1:1 + double] = 2.0
        gi = gi * api.tensor(scale.reshape(shape), dtype=gi.dtype.to_real(), device=gi.device)
    return (gi,)


_fft_c2r.complex_grad = "raw"
