"""Fractional max pooling (Graham, "Fractional Max-Pooling"), as torch's
``F.fractional_max_pool2d`` / ``fractional_max_pool3d``.

Each plane (n, c) draws one sample u in [0, 1) per pooled dim (``_random_samples``, shape
(N, C, nd); torch's order is (W, H) for 2-d and (T, H, W) for 3-d). The window starts along a
dim of input size L, output size O and pool size K are torch's pseudo-random sequence
``int((i + u) * a) - int(u * a)`` with ``a = (L - K) / (O - 1)``, the last start pinned at
``L - K``, computed in the input's floating dtype as torch does so the windows are the same
for the same samples. Each output is the max of its K-window (the first maximum; a NaN wins,
the last NaN as in torch's scan); its index is the flat position in the plane.

The window arithmetic and the argmax run on numpy arrays (indices carry no gradient); the
output is ``gather`` of the input at those indices, so the gradient (scatter-add of the output
gradient to the chosen elements, torch's formula) and double backward come from ``gather``.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..ops import api
from ..tensor import Tensor

_SAMPLE_DIM_ORDER = {2: (1, 0), 3: (0, 1, 2)}   # spatial dim d takes samples[..., order[d]]
_DIM_WORD = {2: ("height", "width"), 3: ("time", "height", "width")}


def _tuple(v, nd, name, fn):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * nd
    try:
        t = tuple(v)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of {nd} ints, not "
                        f"{type(v).__name__}") from None
    if len(t) == 1:
        t = t * nd
    if len(t) != nd:
        raise ValueError(f"{fn}(): argument '{name}' must be an int or a tuple of {nd} ints, got {v!r}")
    return tuple(int(x) for x in t)


def _intervals(u, L, O, K, np_dt):
    """Window starts (P, O) for samples ``u`` (P,), in the input's float dtype as torch."""
    u = u.astype(np_dt)
    P = u.shape[0]
    seq = np.zeros((P, O), dtype=np.int64)
    if O > 1:
        alpha = np_dt.type(L - K) / np_dt.type(O - 1)
        i = np.arange(O, dtype=np_dt)
        seq = ((i[None, :] + u[:, None]) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)[:, None]
    if O > 0:
        seq[:, O - 1] = L - K
    return seq


def _fractional_indices(x, nd, kernel, out_size, samples):
    """The flat in-plane index (N, C, *out) of each output's maximum."""
    N, C = x.shape[:2]
    sp = x.shape[2:]
    P = N * C
    np_dt = np.dtype(x.dtype.np)       # half / bfloat16 too: each step rounds to the dtype, as torch's
    u = np.asarray(samples.detach()._data).astype(np_dt)[:N].reshape(P, nd)
    order = _SAMPLE_DIM_ORDER[nd]
    # per dim: the input coordinate of (plane, output position, window offset)
    coords = []
    for d in range(nd):
        start = _intervals(u[:, order[d]], sp[d], out_size[d], kernel[d], np_dt)      # (P, O_d)
        coords.append(start[:, :, None] + np.arange(kernel[d])[None, None, :])          # (P, O_d, K_d)
    # broadcast to (P, O_0, .., O_nd-1, K_0, .., K_nd-1)
    flat = np.zeros((P,) + tuple(out_size) + tuple(kernel), dtype=np.int64)
    stride = 1
    for d in reversed(range(nd)):
        shape = [P] + [1] * (2 * nd)
        shape[1 + d] = out_size[d]
        shape[1 + nd + d] = kernel[d]
        flat = flat + coords[d].reshape(shape) * stride
        stride *= sp[d]
    vals = np.asarray(x.detach()._data).reshape(P, -1)
    kflat = int(np.prod(kernel))
    win_idx = flat.reshape(P, -1, kflat)
    win = np.take_along_axis(vals, win_idx.reshape(P, -1), axis=1).reshape(win_idx.shape)
    if win.dtype.kind != "f":
        win = win.astype(np.float32)
    nan = np.isnan(win)
    best = np.argmax(np.where(nan, -np.inf, win), axis=-1)          # the first maximum
    any_nan = nan.any(-1)
    if any_nan.any():                                                 # the last NaN wins
        last_nan = kflat - 1 - np.argmax(nan[..., ::-1], axis=-1)
        best = np.where(any_nan, last_nan, best)
    chosen = np.take_along_axis(win_idx, best[..., None], axis=-1)[..., 0]
    return chosen.reshape((N, C) + tuple(out_size))


def _fractional_max_pool(nd, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    fn = f"fractional_max_pool{nd}d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{fn}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for '{input.dtype.legacy_name[:-6]}'")
    kernel = _tuple(kernel_size, nd, "kernel_size", fn)
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{fn}(): kernel_size must be positive, got {list(kernel)}")
    sp_in = tuple(input.shape[-nd:])
    if output_size is None:
        if not isinstance(output_ratio, numbers.Real) and len(output_ratio) > nd:
            raise ValueError(f"{fn} requires output_ratio to either be a single Int or tuple of Ints.")
        ratio = (float(output_ratio),) * nd if isinstance(output_ratio, numbers.Real) else tuple(
            float(r) for r in (tuple(output_ratio) * nd if len(output_ratio) == 1 else output_ratio))
        out = tuple(int(s * r) for s, r in zip(sp_in, ratio))
    else:
        out = _tuple(output_size, nd, "output_size", fn)
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    N, C = x.shape[:2]
    if _random_samples is None:
        samples = api.rand((N, C, nd), dtype=input.dtype, device=input.device)
    else:
        samples = _random_samples
        if samples.ndim != 3:
            raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
        if samples.shape[2] != nd:
            raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {samples.shape[2]}.")
        if samples.shape[1] != C:
            raise RuntimeError(f"Expect _random_samples.size(1) equals to input channel size; got "
                               f"{samples.shape[1]}.")
        if samples.shape[0] < N:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        if samples.dtype is not input.dtype:
            raise RuntimeError("Expect _random_samples to have the same dtype as input")
    for d in range(nd):
        # torch's bound: out + K - 1 <= L in 2-d, < L in 3-d
        if out[d] + kernel[d] - 1 > sp_in[d] - (nd == 3):
            suffix = "_out" if nd == 3 else ""
            raise RuntimeError(f"{fn}{suffix}(): pool {_DIM_WORD[nd][d]} {kernel[d]} too large relative to input "
                               f"{_DIM_WORD[nd][d]} {sp_in[d]}")
        if out[d] < 0:
            raise RuntimeError(f"{fn}(): output_size must be non-negative, got {list(out)}")
    idx_np = _fractional_indices(x, nd, kernel, out, samples)
    idx = api.tensor(idx_np, dtype=_t.int64, device=input.device)
    flat_in = x.reshape((N, C, -1))
    res = api.gather(flat_in, 2, idx.reshape((N, C, -1))).reshape((N, C) + out)
    if unbatched:
        res, idx = res.squeeze(0), idx.squeeze(0)
    return (res, idx) if return_indices else res


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(output, indices)`` of 2-d fractional max pooling (module docstring)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """2-d fractional max pooling over (N, C, H, W) or (C, H, W) input (module docstring)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(output, indices)`` of 3-d fractional max pooling (module docstring)."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """3-d fractional max pooling over (N, C, T, H, W) or (C, T, H, W) input (module docstring)."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)
