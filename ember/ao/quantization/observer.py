"""Observers: modules that watch tensors flow by and choose a scale and zero point for them.

Each observer records statistics in buffers (so they live in ``state_dict``) and
``calculate_qparams()`` turns them into ``(scale, zero_point)`` tensors exactly as torch
2.13's ``torch.ao.quantization.observer`` does (same quant_min/quant_max defaults and
reduce_range halving, eps floor, symmetric zero points, float qparams for embeddings).
``HistogramObserver`` implements torch's algorithm -- a 2048-bin histogram whose range grows
by re-binning the old counts at 16x upsampling, then an L2-error search over clipping
ranges -- in numpy float32 like torch's float32 tensors.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

import ember
from ... import nn
from ...tensor import Tensor
from ..._quantized import schemes as QS

__all__ = ["ObserverBase", "UniformQuantizationObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
           "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "HistogramObserver",
           "PlaceholderObserver", "NoopObserver", "default_observer", "default_weight_observer",
           "default_per_channel_weight_observer", "default_dynamic_quant_observer", "default_histogram_observer",
           "default_placeholder_observer", "default_float_qparams_observer", "weight_observer_range_neg_127_to_127",
           "per_channel_weight_observer_range_neg_127_to_127", "get_observer_state_dict", "load_observer_state_dict",
           "FixedQParamsObserver", "RecordingObserver", "ReuseInputObserver", "default_debug_observer",
           "default_float_qparams_observer_4bit", "default_fixed_qparams_range_neg1to1_observer",
           "default_fixed_qparams_range_0to1_observer", "default_symmetric_fixed_qparams_observer",
           "default_affine_fixed_qparams_observer", "default_reuse_input_observer"]

_EPS = float(np.finfo(np.float32).eps)


class _PartialWrapper:
    """A constructor with some keyword arguments bound (``Observer.with_args(...)``): every call
    makes a fresh instance; ``with_callable_args`` binds arguments computed at each call."""

    def __init__(self, p):
        self.p = p
        self.callable_args = {}

    def __call__(self, *args, **keywords):
        for name, fn in self.callable_args.items():
            if name not in keywords:
                keywords = {**keywords, name: fn()}
        return self.p(*args, **keywords)

    def __repr__(self):
        return repr(self.p) + repr(self.callable_args)

    def with_args(self, **kwargs):
        return _with_args(self, **kwargs)

    def with_callable_args(self, **kwargs):
        r = _PartialWrapper(self.p)
        r.callable_args = {**self.callable_args, **kwargs}
        return r


def _with_args(cls_or_self, **kwargs):
    return _PartialWrapper(functools.partial(cls_or_self, **kwargs))


def _with_callable_args(cls_or_self, **kwargs):
    r = _PartialWrapper(functools.partial(cls_or_self))
    return r.with_callable_args(**kwargs)


def _qbits_range(dtype):
    return {"qint8": (-128, 127), "int8": (-128, 127), "quint8": (0, 255), "uint8": (0, 255),
            "qint32": (-2 ** 31, 2 ** 31 - 1), "int32": (-2 ** 31, 2 ** 31 - 1), "int16": (-2 ** 15, 2 ** 15 - 1),
            "uint16": (0, 2 ** 16 - 1), "quint4x2": (0, 15)}.get(dtype.name)


def calculate_qmin_qmax(quant_min, quant_max, has_customized_qrange, dtype, reduce_range):
    """The observer's integer range: the dtype's (halved by ``reduce_range``) unless customised."""
    if has_customized_qrange:
        qrange_len = quant_max - quant_min + 1
        if dtype.name in ("qint8", "int8") and not 0 < qrange_len <= 256:
            raise AssertionError("quantization range should be positive and not exceed the maximum bit range (=256).")
        if dtype.name in ("qint32", "int32") and not 0 < qrange_len <= 2 ** 32:
            raise AssertionError("quantization range should be positive and not exceed the maximum bit range "
                                 "(=4294967296).")
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max
    lo, hi = _qbits_range(dtype) or (0, 15)
    if reduce_range and dtype.name in ("qint8", "int8"):
        return -64, 63
    if reduce_range and dtype.name in ("quint8", "uint8"):
        return 0, 127
    return lo, hi


def _validate_qmin_qmax(quant_min, quant_max):
    if not quant_min <= 0 <= quant_max:
        raise AssertionError("Used-specified quantization range must include 0.")
    if quant_min >= quant_max:
        raise AssertionError("qmin must be strictly less than qmax for user-specified quantization range.")


def _np(t):
    return np.asarray(t.detach()._data)


def _f32(x):
    return ember.tensor(np.asarray(x, dtype=np.float32))


class ObserverBase(nn.Module):
    """The base of every observer: ``dtype`` (what the observed tensor becomes) and ``is_dynamic``."""

    def __init__(self, dtype, is_dynamic=False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.calculate_qparams")

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)


class UniformQuantizationObserverBase(ObserverBase):
    """Observers that end in one affine (scale, zero point) per tensor or per channel."""

    _ALLOWED = ("qint8", "quint8", "quint4x2", "qint32", "int8", "uint8", "int16", "int32", "uint16")

    def __init__(self, dtype=None, qscheme=None, reduce_range=False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        dtype = ember.quint8 if dtype is None else dtype
        qscheme = QS.per_tensor_affine if qscheme is None else qscheme
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.qscheme = qscheme
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for observers.                     "
                          "reduce_range will be deprecated in a future release of PyTorch.", stacklevel=2)
        self.reduce_range = reduce_range
        self.register_buffer("eps", ember.tensor([float(eps)], dtype=ember.float32))
        if qscheme not in QS.ALL:
            raise AssertionError("Default Observer only works for per_tensor_affine, per_tensor_symmetric, "
                                 "per_channel_affine, per_channel_symmetric and per_channel_float_qparams "
                                 "quantization scheme")
        if getattr(dtype, "name", None) not in self._ALLOWED:
            raise AssertionError(f"Default Observer only works for (ember.qint8, ember.quint8, ember.quint4x2, "
                                 f"ember.qint32, ember.int8, ember.uint8, ember.int16, ember.int32, ember.uint16) "
                                 f"data type, got {dtype}")
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        if self.has_customized_qrange:
            _validate_qmin_qmax(quant_min, quant_max)
        self.quant_min, self.quant_max = calculate_qmin_qmax(quant_min, quant_max, self.has_customized_qrange,
                                                             dtype, reduce_range)

    def _calculate_qparams(self, min_val, max_val):
        """(scale float32, zero_point int64) tensors of shape (channels,) -- torch's formulas."""
        mn, mx = _np(min_val).astype(np.float32), _np(max_val).astype(np.float32)
        if not _check_min_max_valid(mn, mx):
            return ember.tensor([1.0]), ember.tensor([0])
        qmin, qmax = self.quant_min, self.quant_max
        min_neg = np.minimum(mn, np.float32(0))
        max_pos = np.maximum(mx, np.float32(0))
        eps = _np(self.eps).astype(np.float32)
        zp_float = False
        if self.qscheme in (QS.per_tensor_symmetric, QS.per_channel_symmetric):
            max_pos = np.maximum(-min_neg, max_pos)
            scale = np.maximum((max_pos / np.float32((qmax - qmin) / 2)).astype(np.float32), eps)
            zp = np.zeros(scale.shape, np.int64)
            if self.dtype.name in ("quint8", "uint8"):
                zp[...] = (qmin + qmax) // 2 if self.has_customized_qrange else 128
            elif self.dtype.name == "uint16":
                zp[...] = 2 ** 15
        elif self.qscheme is QS.per_channel_affine_float_qparams:
            scale = ((mx - mn) / np.float32(qmax - qmin)).astype(np.float32)
            scale = np.where(scale > eps, scale, np.float32(1)).astype(np.float32)
            zp = (-1 * mn / scale).astype(np.float32)
            zp_float = True
        else:
            scale = np.maximum(((max_pos - min_neg) / np.float32(qmax - qmin)).astype(np.float32), eps)
            zp = (qmin - np.rint(min_neg / scale).astype(np.int32)).astype(np.int32)
            zp = np.clip(zp, qmin, qmax).astype(np.int32)     # (torch: int32 here, int64 when symmetric)
        scale = np.asarray(scale, np.float32).reshape(-1) if scale.ndim == 0 else np.asarray(scale, np.float32)
        zp = np.asarray(zp).reshape(-1) if np.ndim(zp) == 0 else np.asarray(zp)
        return ember.tensor(scale), ember.tensor(zp.astype(np.float32) if zp_float else zp)

    def reset_min_max_vals(self):
        raise NotImplementedError("Cannot reset min/max values in the given observer.")


def _check_min_max_valid(mn, mx):
    if mn.size == 0 or mx.size == 0:
        warnings.warn("must run observer before calling calculate_qparams. Returning default values.", stacklevel=3)
        return False
    if mn.ndim == 0 or mx.ndim == 0:
        if mn == np.inf and mx == -np.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning default values.",
                          stacklevel=3)
            return False
        if mn > mx:
            raise AssertionError(f"min {mn} should be less than max {mx}")
    elif np.any(mn > mx):
        raise AssertionError(f"min {mn} should be less than max {mx}")
    return True


def _observed(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}.forward: expected a Tensor, got {type(x).__name__}")
    if x.is_quantized:
        raise RuntimeError(f"{name}.forward: observers watch float tensors, got a quantized {x.dtype} tensor")
    return np.asarray(x.detach()._data).astype(np.float32, copy=False)


def _per_tensor_qscheme(cls_name, qscheme, is_dynamic):
    """The qscheme of a per-tensor observer (default per_tensor_affine), with torch's refusals."""
    qscheme = QS.per_tensor_affine if qscheme is None else qscheme
    if qscheme not in QS.PER_TENSOR:
        raise NotImplementedError(f"{cls_name}'s qscheme only support torch.per_tensor_symmetric "
                                  "and torch.per_tensor_affine.")
    if is_dynamic:
        raise NotImplementedError(f"{cls_name} doesn't support dynamic quantization")
    return qscheme


class MinMaxObserver(UniformQuantizationObserverBase):
    """Running min and max of everything observed."""

    def __init__(self, dtype=None, qscheme=None, reduce_range=False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        # torch lets a MinMaxObserver be dynamic (a memoryless moving average is dynamic QAT's observer)
        qscheme = _per_tensor_qscheme("MinMaxObserver", qscheme, False)
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.register_buffer("min_val", ember.tensor(float("inf")))
        self.register_buffer("max_val", ember.tensor(float("-inf")))

    def _update(self, cur_min, cur_max):
        self.min_val = _f32(np.minimum(cur_min, _np(self.min_val)))
        self.max_val = _f32(np.maximum(cur_max, _np(self.max_val)))

    def forward(self, x_orig):
        x = _observed(x_orig, type(self).__name__)
        if x.size == 0:
            return x_orig
        self._update(x.min(), x.max())
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def reset_min_max_vals(self):
        self.min_val = ember.tensor(float("inf"))
        self.max_val = ember.tensor(float("-inf"))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """min/max as exponential moving averages (``averaging_constant``) of each batch's min/max."""

    def __init__(self, averaging_constant=0.01, dtype=None, qscheme=None, reduce_range=False, quant_min=None,
                 quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        if is_dynamic and averaging_constant != 1:      # memoryless (constant 1) is dynamic QAT's observer
            raise NotImplementedError("MovingAverageMinMaxObserver doesn't support dynamic quantization for "
                                      f"averaging constant of {averaging_constant}")
        self.averaging_constant = averaging_constant
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig):
        x = _observed(x_orig, type(self).__name__)
        if x.size == 0:
            return x_orig
        mn, mx = np.float32(x.min()), np.float32(x.max())
        old_mn, old_mx = _np(self.min_val), _np(self.max_val)
        if old_mn == np.inf and old_mx == -np.inf:
            new_mn, new_mx = mn, mx
        else:
            c = np.float32(self.averaging_constant)
            new_mn = old_mn + c * (mn - old_mn)
            new_mx = old_mx + c * (mx - old_mx)
        self.min_val, self.max_val = _f32(new_mn), _f32(new_mx)
        return x_orig


def _per_channel_minmax(x, ch_axis):
    y = np.moveaxis(x, ch_axis, 0).reshape(x.shape[ch_axis], -1)
    return y.min(axis=1), y.max(axis=1)


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Running min and max of each slice along ``ch_axis`` (weights: one scale per output channel)."""

    def __init__(self, ch_axis=0, dtype=None, qscheme=None, reduce_range=False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        qscheme = QS.per_channel_affine if qscheme is None else qscheme
        if qscheme not in QS.PER_CHANNEL:
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme only support "
                                      "torch.per_channel_symmetric, torch.per_channel_affine and "
                                      "torch.per_channel_affine_float_qparams.")
        if is_dynamic:
            raise NotImplementedError("PerChannelMinMaxObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", ember.tensor(np.zeros(0, np.float32)))
        self.register_buffer("max_val", ember.tensor(np.zeros(0, np.float32)))

    def forward(self, x_orig):
        x = _observed(x_orig, type(self).__name__)
        if x.size == 0:
            return x_orig
        mn, mx = _per_channel_minmax(x, self.ch_axis)
        old_mn, old_mx = _np(self.min_val), _np(self.max_val)
        if old_mn.size and old_mx.size:
            mn, mx = np.minimum(mn, old_mn), np.maximum(mx, old_mx)
        self.min_val, self.max_val = _f32(mn), _f32(mx)
        return x_orig

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        # the per-channel min/max have as many entries as the observed tensor had channels: take
        # the saved ones whatever their length (an unobserved observer holds empty ones), as torch
        for name in ("min_val", "max_val"):
            key = prefix + name
            if key in state_dict:
                setattr(self, name, state_dict[key].clone())
            elif strict:
                missing_keys.append(key)
        rest = {k: v for k, v in state_dict.items() if k not in (prefix + "min_val", prefix + "max_val")}
        keep = {k: self._buffers.pop(k) for k in ("min_val", "max_val")}
        try:
            super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
        finally:
            self._buffers.update(keep)

    def reset_min_max_vals(self):
        self.min_val = ember.tensor(np.zeros(0, np.float32))
        self.max_val = ember.tensor(np.zeros(0, np.float32))


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel min/max as exponential moving averages."""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=None, qscheme=None, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("MovingAveragePerChannelMinMaxObserver doesn't support dynamic "
                                      "quantization for observer without a history")
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        x = _observed(x_orig, type(self).__name__)
        if x.size == 0:
            return x_orig
        mn, mx = _per_channel_minmax(x, self.ch_axis)
        old_mn, old_mx = _np(self.min_val), _np(self.max_val)
        if old_mn.size and old_mx.size:
            c = np.float32(self.averaging_constant)
            mn = old_mn + c * (mn - old_mn)
            mx = old_mx + c * (mx - old_mx)
        self.min_val, self.max_val = _f32(mn), _f32(mx)
        return x_orig


# ---------------------------------------------------------------------- histogram
def _histc(x, bins, lo, hi):
    """torch.histc over [lo, hi] (a degenerate range widened by 1 each side), float32 counts."""
    lo, hi = float(lo), float(hi)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    x = x[(x >= lo) & (x <= hi)].astype(np.float64)
    idx = np.floor((x - lo) * bins / (hi - lo)).astype(np.int64)
    idx = np.clip(idx, 0, bins - 1)
    return np.bincount(idx, minlength=bins).astype(np.float32)


class HistogramObserver(UniformQuantizationObserverBase):
    """A histogram of the values; qparams from the clipping range with the least L2 quantization
    error (torch's ``_non_linear_param_search``). Per tensor only."""

    def __init__(self, bins=2048, dtype=None, qscheme=None, reduce_range=False, quant_min=None, quant_max=None,
                 factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        qscheme = _per_tensor_qscheme("HistogramObserver", qscheme, is_dynamic)
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)
        self.bins = bins
        self.register_buffer("histogram", ember.tensor(np.zeros(bins, np.float32)))
        self.register_buffer("min_val", ember.tensor(float("inf")))
        self.register_buffer("max_val", ember.tensor(float("-inf")))
        self.dst_nbins = 2 ** (8 * self.dtype.itemsize)
        self.upsample_rate = 16

    def _compute_quantization_error(self, hist, mn, mx, start, end):
        bins, f32 = self.bins, np.float32
        bin_width = (float(mx) - float(mn)) / bins
        dst_w = bin_width * (end - start + 1) / self.dst_nbins
        if dst_w == 0.0:
            return 0.0
        src = np.arange(bins, dtype=np.float32)
        begin = ((src - f32(start)) * f32(bin_width)).astype(f32)
        end_ = (begin + f32(bin_width)).astype(f32)
        dbeg = np.clip(np.floor(begin / f32(dst_w)), 0, self.dst_nbins - 1).astype(f32)
        dbeg_c = ((dbeg + f32(0.5)) * f32(dst_w)).astype(f32)
        dend = np.clip(np.floor(end_ / f32(dst_w)), 0, self.dst_nbins - 1).astype(f32)
        density = (hist / f32(bin_width)).astype(f32)

        def norm(b, e):
            return density * ((e * e * e - b * b * b) / f32(3))

        half = f32(dst_w / 2)
        total = norm(begin - dbeg_c, np.full(bins, half, f32))
        total = total + (dend - dbeg - 1) * norm(-half, half)
        dend_c = (dend * f32(dst_w) + half).astype(f32)
        total = total + norm(-half, end_ - dend_c)
        return float(total.astype(f32).sum(dtype=f32))

    def _non_linear_param_search(self):
        hist = _np(self.histogram).astype(np.float32)
        mn, mx = np.float32(_np(self.min_val)), np.float32(_np(self.max_val))
        bins = self.bins
        bin_width = np.float32((mx - mn) / np.float32(bins))
        total = float(hist.sum(dtype=np.float32))
        csum = np.cumsum(hist, dtype=np.float32)
        step, alpha, beta = 1e-5, 0.0, 1.0
        start, end = 0, bins - 1
        norm_min = float("inf")
        while alpha < beta:
            na, nb = alpha + step, beta - step
            lo, hi = start, end
            while lo < end and csum[lo] < na * total:
                lo += 1
            while hi > start and csum[hi] > nb * total:
                hi -= 1
            ns, ne = start, end
            if (lo - start) > (end - hi):
                ns, alpha = lo, na
            else:
                ne, beta = hi, nb
            if ns == start and ne == end:
                continue
            err = self._compute_quantization_error(hist, mn, mx, ns, ne)
            if err > norm_min:
                break
            norm_min, start, end = err, ns, ne
        return (np.float32(mn + bin_width * np.float32(start)), np.float32(mn + bin_width * np.float32(end + 1)))

    def _upscale_histogram(self, hist, omin, omax, umin, umax):
        rate, bins = self.upsample_rate, self.bins
        up = np.repeat(hist, rate) / np.float32(rate)
        size = np.float32((omax - omin) / np.float32(bins * rate))
        mids = np.linspace(omin, omax, bins * rate + 1, dtype=np.float32)[:-1] + np.float32(0.5) * size
        bounds = np.linspace(umin, umax, bins + 1, dtype=np.float32)
        assign = np.searchsorted(bounds, mids, side="right") - 1
        assign = np.clip(assign, 0, bins - 1)
        return np.bincount(assign, weights=up.astype(np.float64), minlength=bins).astype(np.float32)

    def forward(self, x_orig):
        x = _observed(x_orig, type(self).__name__)
        if x.size == 0:
            return x_orig
        xmin, xmax = np.float32(x.min()), np.float32(x.max())
        if np.isinf(xmin) or np.isinf(xmax):
            warnings.warn("torch.inf detected in input tensor, ignoring input", stacklevel=2)
            x = x[np.abs(x) != np.inf]
            if x.size == 0:
                return x_orig
            xmin, xmax = np.float32(x.min()), np.float32(x.max())
        cmin, cmax = np.float32(_np(self.min_val)), np.float32(_np(self.max_val))
        hist = _np(self.histogram).astype(np.float32)
        if cmin == np.inf or cmax == -np.inf:
            self.min_val, self.max_val = _f32(xmin), _f32(xmax)
            self.histogram = _f32(_histc(x, self.bins, xmin, xmax))
            return x_orig
        nmin, nmax = min(cmin, xmin), max(cmax, xmax)
        upd = _histc(x, self.bins, nmin, nmax)
        if nmin == cmin and nmax == cmax:
            self.histogram = _f32(hist + upd)
            return x_orig
        if cmin == cmax:
            orig = _histc(np.array([cmin], np.float32), self.bins, nmin, nmax) * hist.sum(dtype=np.float32)
        else:
            orig = self._upscale_histogram(hist, cmin, cmax, nmin, nmax)
        self.histogram = _f32(upd + orig)
        self.min_val, self.max_val = _f32(nmin), _f32(nmax)
        return x_orig

    def calculate_qparams(self):
        if float(self.min_val) == math.inf and float(self.max_val) == -math.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning default scale and "
                          "zero point ", stacklevel=2)
            return ember.tensor([1.0]), ember.tensor([0])
        if self.bins != len(self.histogram):
            raise AssertionError("The number of bins in histogram should be equal to the number of bins supplied "
                                 "while making this observer")
        new_min, new_max = self._non_linear_param_search()
        return self._calculate_qparams(_f32(new_min), _f32(new_max))

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class PlaceholderObserver(ObserverBase):
    """Passes tensors through and records nothing: it carries the dtype (and for dynamic
    quantization, the activation's is_dynamic / quant range) into a qconfig."""

    def __init__(self, dtype=ember.float32, custom_op_name="", compute_dtype=None, quant_min=None, quant_max=None,
                 qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if qscheme is None:
            qscheme = QS.per_tensor_affine
        if eps is None:
            eps = _EPS
        self.dtype = dtype
        self.qscheme = qscheme
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.eps = eps
        self.custom_op = custom_op_name
        if compute_dtype:
            is_dynamic = True
            warnings.warn("Please use `is_dynamic` instead of `compute_dtype`. `compute_dtype` will be deprecated "
                          "in a future release of PyTorch.", stacklevel=2)
        self.is_dynamic = is_dynamic

    def forward(self, x):
        return x

    def extra_repr(self):
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


class NoopObserver(ObserverBase):
    """Does nothing; its dtype (float16 by default) tells a converter what to cast to."""

    def __init__(self, dtype=ember.float16, custom_op_name=""):
        super().__init__(dtype=dtype)
        self.dtype = dtype
        self.custom_op = custom_op_name

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for NoopObserver")  # noqa: TRY002


class FixedQParamsObserver(ObserverBase):
    """Reports a scale and zero point fixed in advance (ops with a known output range, such as
    sigmoid's [0, 1] or tanh's [-1, 1], need no statistics); per tensor only."""

    def __init__(self, scale, zero_point, dtype=ember.quint8, qscheme=QS.per_tensor_affine, quant_min=0,
                 quant_max=255, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, is_dynamic=is_dynamic, **kwargs)
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.register_buffer("scale", ember.tensor([float(scale)], dtype=ember.float32))
        self.register_buffer("zero_point", ember.tensor([int(zero_point)], dtype=ember.int32))
        self.dtype = dtype
        self.qscheme = qscheme

    def forward(self, X):
        return X

    def calculate_qparams(self):
        return self.scale, self.zero_point


class RecordingObserver(ObserverBase):
    """Keeps a copy of every tensor it sees (``get_tensor_value()``): a debugging aid."""

    def __init__(self, dtype=ember.quint8):
        super().__init__(dtype=dtype, is_dynamic=False)
        self.tensor_val = []

    def forward(self, x):
        self.tensor_val.append(x.clone())
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for RecordingObserver")  # noqa: TRY002

    def get_tensor_value(self):
        return self.tensor_val


class ReuseInputObserver(ObserverBase):
    """Marks an op (``reshape``) whose output reuses its input's observer: it records nothing."""

    def __init__(self):
        super().__init__(ember.quint8, is_dynamic=False)

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for ReuseInputObserver")  # noqa: TRY002


def get_observer_state_dict(mod):
    """The observer/fake-quant entries of a model's state_dict."""
    from collections import OrderedDict
    od = OrderedDict()
    for k, v in mod.state_dict().items():
        if "activation_post_process" in k:
            od[k] = v
    od._metadata = mod.state_dict()._metadata
    return od


def load_observer_state_dict(mod, obs_dict):
    missing, unexpected = [], []
    for name, module in mod.named_modules():
        prefix = name + "." if name else ""
        if isinstance(module, ObserverBase) or type(module).__name__.endswith("FakeQuantize"):
            module._load_from_state_dict(obs_dict, prefix, {}, False, missing, unexpected, [])
    for k in missing:
        if "observer_enabled" not in k and "fake_quant_enabled" not in k:
            raise Exception(f"Missing keys for observer {k} in state_dict")  # noqa: TRY002
    for k in unexpected:
        raise Exception(f"Unexpected keys for observer {k} in state_dict")  # noqa: TRY002


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_weight_observer = MinMaxObserver.with_args(dtype=ember.qint8, qscheme=QS.per_tensor_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=QS.per_tensor_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=QS.per_channel_symmetric)
per_channel_weight_observer_range_neg_127_to_127 = PerChannelMinMaxObserver.with_args(
    dtype=ember.qint8, qscheme=QS.per_channel_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_dynamic_quant_observer = PlaceholderObserver.with_args(
    dtype=ember.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=ember.quint8, qscheme=QS.per_channel_affine_float_qparams, ch_axis=0)
default_debug_observer = RecordingObserver
default_float_qparams_observer_4bit = PerChannelMinMaxObserver.with_args(
    dtype=ember.quint4x2, qscheme=QS.per_channel_affine_float_qparams, ch_axis=0)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(
    scale=2.0 / 256.0, zero_point=128, dtype=ember.quint8, quant_min=0, quant_max=255)
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(
    scale=1.0 / 256.0, zero_point=0, dtype=ember.quint8, quant_min=0, quant_max=255)
default_symmetric_fixed_qparams_observer = default_fixed_qparams_range_neg1to1_observer
default_affine_fixed_qparams_observer = default_fixed_qparams_range_0to1_observer
default_reuse_input_observer = ReuseInputObserver
