"""Fake quantization modules (quantization-aware training): an observer chooses the scale and
zero point from what flows by, and the tensor is quantized and dequantized in floating point
(``ember.fake_quantize_per_tensor_affine``), its gradient passed straight through."""
from __future__ import annotations

import numpy as np

import ember
from ... import nn
from ..._quantized import kernels as K
from ..._quantized import schemes as QS
from .observer import (FixedQParamsObserver, HistogramObserver, MovingAverageMinMaxObserver,
                       MovingAveragePerChannelMinMaxObserver, _with_args, _with_callable_args,
                       default_fixed_qparams_range_0to1_observer, default_fixed_qparams_range_neg1to1_observer)

__all__ = ["FakeQuantizeBase", "FakeQuantize", "FusedMovingAvgObsFakeQuantize", "default_fake_quant",
           "default_weight_fake_quant", "default_dynamic_fake_quant", "default_per_channel_weight_fake_quant",
           "default_embedding_fake_quant", "default_histogram_fake_quant", "default_fused_act_fake_quant",
           "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant",
           "fused_wt_fake_quant_range_neg_127_to_127", "fused_per_channel_wt_fake_quant_range_neg_127_to_127",
           "disable_fake_quant", "enable_fake_quant", "disable_observer", "enable_observer",
           "FixedQParamsFakeQuantize", "default_fixed_qparams_range_neg1to1_fake_quant",
           "default_fixed_qparams_range_0to1_fake_quant", "default_symmetric_fixed_qparams_fake_quant",
           "default_affine_fixed_qparams_fake_quant", "default_embedding_fake_quant_4bit"]

_INT_RANGE = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2 ** 31, 2 ** 31 - 1), "int8": (-128, 127),
              "uint8": (0, 255), "int32": (-2 ** 31, 2 ** 31 - 1), "quint4x2": (0, 15)}


class FakeQuantizeBase(nn.Module):
    """Switches for the observer and the fake quantization (uint8 flag buffers, as torch's)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", ember.tensor([1], dtype=ember.uint8))
        self.register_buffer("observer_enabled", ember.tensor([1], dtype=ember.uint8))

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.calculate_qparams")

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self):
        self.enable_observer(False)

    with_args = classmethod(_with_args)
    with_callable_args = classmethod(_with_callable_args)


class FakeQuantize(FakeQuantizeBase):
    """Observe (``activation_post_process``), then fake-quantize with the observed qparams."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None, is_dynamic=False,
                 **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            dtype = observer_kwargs.get("dtype", ember.quint8)
            p = getattr(observer, "p", None)
            if p is not None:
                dtype = getattr(p, "keywords", {}).get("dtype", dtype)
            lo, hi = _INT_RANGE.get(dtype.name, (quant_min, quant_max))
            if quant_min < lo:
                raise AssertionError("quant_min out of bound")
            if quant_max > hi:
                raise AssertionError("quant_max out of bound")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        observer_kwargs["is_dynamic"] = is_dynamic
        self.activation_post_process = observer(**observer_kwargs)
        app = self.activation_post_process
        self.quant_min, self.quant_max = app.quant_min, app.quant_max
        self.is_dynamic = app.is_dynamic
        zp_dtype = ember.float32 if app.qscheme is QS.per_channel_affine_float_qparams else ember.int32
        self.register_buffer("scale", ember.tensor([1.0], dtype=ember.float32))
        self.register_buffer("zero_point", ember.tensor([0], dtype=zp_dtype))
        self.dtype = app.dtype
        self.qscheme = app.qscheme
        self.ch_axis = getattr(app, "ch_axis", -1)
        if self.qscheme not in QS.ALL:
            raise AssertionError("Only per channel and per tensor quantization are supported in fake quantize "
                                 f"got qscheme: {self.qscheme}")
        self.is_per_channel = self.qscheme in QS.PER_CHANNEL

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X):
        if int(self.observer_enabled[0]) == 1:
            self.activation_post_process(X.detach())
            scale, zp = self.calculate_qparams()
            self.scale = scale.to(ember.float32)
            self.zero_point = zp.to(self.zero_point.dtype)
        return self._fake_quantize(X)

    def _fake_quantize(self, X):
        """``X`` fake-quantized with the current qparams, when fake quantization is enabled."""
        if int(self.fake_quant_enabled[0]) == 1:
            app = self.activation_post_process
            if self.is_per_channel:
                X = ember.fake_quantize_per_channel_affine(X, self.scale, self.zero_point, self.ch_axis,
                                                           app.quant_min, app.quant_max)
            else:
                X = ember.fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, app.quant_min,
                                                          app.quant_max)
        return X

    def extra_repr(self):
        app = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"quant_min={app.quant_min}, quant_max={app.quant_max}, dtype={self.dtype}, "
                f"qscheme={self.qscheme}, ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = self.scale
        destination[prefix + "zero_point"] = self.zero_point

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        # scale / zero_point may change size (per-channel): take them as they are, as torch does
        for name in ("scale", "zero_point"):
            key = prefix + name
            if key in state_dict:
                setattr(self, name, state_dict[key].clone())
            elif strict:
                missing_keys.append(key)
        rest = {k: v for k, v in state_dict.items() if k not in (prefix + "scale", prefix + "zero_point")}
        keep = {k: self._buffers.pop(k) for k in ("scale", "zero_point")}
        try:
            super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
        finally:
            self._buffers.update(keep)
        for name in ("scale", "zero_point"):
            if prefix + name in unexpected_keys:
                unexpected_keys.remove(prefix + name)


class FixedQParamsFakeQuantize(FakeQuantize):
    """Fake quantization with the fixed scale / zero point of a ``FixedQParamsObserver`` (the
    buffers are the observer's own tensors, so the two never disagree)."""

    def __init__(self, observer):
        super().__init__(observer=observer)
        if type(self.activation_post_process) is not FixedQParamsObserver:
            raise AssertionError(f"{type(self).__name__}'s observer must be a {FixedQParamsObserver.__name__}")
        self._observer_ctr = observer
        self.scale = self.activation_post_process.scale
        self.zero_point = self.activation_post_process.zero_point
        if self.qscheme not in QS.PER_TENSOR:
            raise AssertionError("Only per tensor quantization is supported FixedQParamsFakeQuantize module, got "
                                 f"qscheme:{self.qscheme}")

    def calculate_qparams(self):
        return self.scale, self.zero_point

    def extra_repr(self):
        app = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}, "
                f"quant_min={app.quant_min}, quant_max={app.quant_max}, qscheme={self.qscheme}")


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """FakeQuantize with a moving-average min/max observer (torch fuses the two into one kernel;
    ember runs them one after the other, with the same result); int64 flag buffers as torch's."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", ember.tensor([1], dtype=ember.long))
        self.register_buffer("observer_enabled", ember.tensor([1], dtype=ember.long))
        self.is_symmetric_quant = self.activation_post_process.qscheme in (QS.per_tensor_symmetric,
                                                                           QS.per_channel_symmetric)

    def forward(self, X):
        """torch's fused kernel: the moving-average observer, then scale / zero point from its
        min/max by ATen's ``ChooseQuantizationParams`` (not the Python observer's formula: for a
        symmetric scheme the larger side sets the scale over [-128, 127], so the scale is
        max/127 or |min|/128, not max(|min|, max)/127.5), then fake quantization."""
        app = self.activation_post_process
        if int(self.observer_enabled[0]) == 1:
            app(X.detach())
            mn = np.atleast_1d(np.asarray(app.min_val.detach()._data, np.float32))
            mx = np.atleast_1d(np.asarray(app.max_val.detach()._data, np.float32))
            pairs = [K.choose_qparams(a, b, app.quant_min, app.quant_max, preserve_sparsity=self.is_symmetric_quant)
                     for a, b in zip(mn, mx)]
            self.scale = ember.tensor(np.array([p[0] for p in pairs], np.float32))
            self.zero_point = ember.tensor(np.array([p[1] for p in pairs], np.int32))
        return self._fake_quantize(X)

    def extra_repr(self):
        app = self.activation_post_process
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}, "
                f"quant_min={app.quant_min}, quant_max={app.quant_max}, qscheme={self.qscheme}, "
                f"reduce_range={app.reduce_range}")


default_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                            dtype=ember.quint8, qscheme=QS.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                   quant_max=127, dtype=ember.qint8,
                                                   qscheme=QS.per_tensor_symmetric, reduce_range=False)
default_dynamic_fake_quant = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                                    quant_max=255, is_dynamic=True, dtype=ember.quint8,
                                                    averaging_constant=1)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=QS.per_channel_symmetric, reduce_range=False, ch_axis=0)
default_embedding_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=QS.per_channel_affine_float_qparams,
    dtype=ember.quint8, quant_min=0, quant_max=255, ch_axis=0, averaging_constant=1)
default_embedding_fake_quant_4bit = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, qscheme=QS.per_channel_affine_float_qparams, ch_axis=0,
    dtype=ember.quint4x2, averaging_constant=1)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_neg1to1_observer)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=default_fixed_qparams_range_0to1_observer)
default_symmetric_fixed_qparams_fake_quant = default_fixed_qparams_range_neg1to1_fake_quant
default_affine_fixed_qparams_fake_quant = default_fixed_qparams_range_0to1_fake_quant
default_histogram_fake_quant = FakeQuantize.with_args(observer=HistogramObserver, quant_min=0, quant_max=255,
                                                      dtype=ember.quint8, qscheme=QS.per_tensor_affine,
                                                      reduce_range=True)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=ember.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=QS.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=ember.qint8,
    qscheme=QS.per_channel_symmetric)
fused_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-127, quant_max=127, dtype=ember.qint8,
    qscheme=QS.per_tensor_symmetric, eps=2 ** -12)
fused_per_channel_wt_fake_quant_range_neg_127_to_127 = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver, quant_min=-127, quant_max=127, dtype=ember.qint8,
    qscheme=QS.per_channel_symmetric, eps=2 ** -12)


def _is_fake_quant(mod):
    return isinstance(mod, FakeQuantizeBase)


def disable_fake_quant(mod):
    """``model.apply(disable_fake_quant)``."""
    if _is_fake_quant(mod):
        mod.disable_fake_quant()


def enable_fake_quant(mod):
    if _is_fake_quant(mod):
        mod.enable_fake_quant()


def disable_observer(mod):
    if _is_fake_quant(mod):
        mod.disable_observer()


def enable_observer(mod):
    if _is_fake_quant(mod):
        mod.enable_observer()

