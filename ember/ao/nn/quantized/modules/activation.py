"""Quantized activation, normalization and dropout modules (quantized tensors in and out), as
``torch.ao.nn.quantized``'s: each holds the output scale / zero point observed in calibration
(``from_float``) and runs the integer kernels of ember/_quantized and the quantized functional."""
from __future__ import annotations

import numpy as np

import ember
from ember import nn
from ember._quantized import elementwise as _qelem
from ember._quantized import kernels as _K
from ember._quantized import schemes as _QS
from ember._quantized.tensor import QParams, make_qtensor
from .. import functional as qF

__all__ = ["ReLU6", "Hardswish", "ELU", "LeakyReLU", "Sigmoid", "Dropout", "BatchNorm2d", "BatchNorm3d", "PReLU",
           "BNReLU2d", "BNReLU3d"]


def _observed_qparams(mod):
    scale, zero_point = mod.activation_post_process.calculate_qparams()
    return float(scale), int(zero_point)


class ReLU6(nn.ReLU):
    """``min(max(x, zero_point), q(6))`` on the input's grid (its parameters kept)."""

    def __init__(self, inplace=False):
        super().__init__(inplace)
        self.inplace = inplace

    def forward(self, input):
        if self.inplace:
            raise NotImplementedError("ember.quantization: in-place quantized ReLU6 is not supported")
        return _qelem.clamp(input, 0.0, 6.0)

    def _get_name(self):
        return "QuantizedReLU6"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return ReLU6(mod.inplace)


class Hardswish(nn.Hardswish):
    def __init__(self, scale, zero_point, device=None, dtype=None):
        super().__init__()
        self.register_buffer("scale", ember.tensor(scale))
        self.register_buffer("zero_point", ember.tensor(zero_point))

    def forward(self, input):
        return qF.hardswish(input, float(self.scale), int(self.zero_point))

    def _get_name(self):
        return "QuantizedHardswish"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return Hardswish(*_observed_qparams(mod))


class ELU(nn.ELU):
    def __init__(self, scale, zero_point, alpha=1.0):
        super().__init__(alpha)
        self.scale = scale
        self.zero_point = zero_point

    def forward(self, input):
        return qF.elu(input, self.scale, self.zero_point, self.alpha)

    def _get_name(self):
        return "QuantizedELU"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        return ELU(*_observed_qparams(mod), mod.alpha)


class LeakyReLU(nn.LeakyReLU):
    def __init__(self, scale, zero_point, negative_slope=1e-2, inplace=False, device=None, dtype=None):
        super().__init__(negative_slope, inplace)
        self.register_buffer("scale", ember.tensor(scale))
        self.register_buffer("zero_point", ember.tensor(zero_point))

    def forward(self, input):
        return qF.leaky_relu(input, self.negative_slope, self.inplace, float(self.scale), int(self.zero_point))

    def _get_name(self):
        return "QuantizedLeakyReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(*_observed_qparams(mod), mod.negative_slope, mod.inplace)


class Sigmoid(nn.Sigmoid):
    """Sigmoid of the dequantized values, requantized with the observed output parameters."""

    def __init__(self, output_scale, output_zero_point):
        super().__init__()
        self.output_scale = output_scale
        self.output_zero_point = output_zero_point

    def forward(self, input):
        qF._need_quantized(input, "quantized.sigmoid")
        f32 = np.float32
        d = np.asarray(input.dequantize()._data, f32)
        with np.errstate(over="ignore"):
            y = (f32(1) / (f32(1) + np.exp(-d))).astype(f32)
        ints = _K.quantize_per_tensor(y, self.output_scale, self.output_zero_point, input.dtype)
        return make_qtensor(ints, input.dtype, QParams(_QS.per_tensor_affine, scale=float(self.output_scale),
                                                       zero_point=int(self.output_zero_point)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(*_observed_qparams(mod))


class Dropout(nn.Dropout):
    """The identity (quantized models run in inference)."""

    def forward(self, input):
        return input

    def _get_name(self):
        return "QuantizedDropout"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.p, mod.inplace)


class _BatchNorm(nn.Module):
    """Eval batch norm of a quantized (N, C, ...) tensor into the observed output parameters."""

    _DIM = 2
    _FUSE_RELU = False

    def __init__(self, num_features, eps=1e-5, momentum=0.1, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine = self.track_running_stats = True
        self.weight = nn.Parameter(ember.ones(num_features))
        self.bias = nn.Parameter(ember.zeros(num_features))
        self.register_buffer("running_mean", ember.zeros(num_features))
        self.register_buffer("running_var", ember.ones(num_features))
        self.register_buffer("num_batches_tracked", ember.tensor(0, dtype=ember.long))
        self.register_buffer("scale", ember.tensor(1.0))
        self.register_buffer("zero_point", ember.tensor(0))

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine=True, bias=True, "
                "track_running_stats=True")

    def forward(self, input):
        if input.ndim != self._DIM + 2:
            raise ValueError(f"Input shape must be `(N, C, {'H, W' if self._DIM == 2 else 'D, H, W'})`!")
        out = _qelem.quantized_batch_norm(input, self.weight, self.bias, self.running_mean, self.running_var,
                                          self.eps, float(self.scale), int(self.zero_point))
        return out.relu() if self._FUSE_RELU else out

    def _get_name(self):
        return f"QuantizedBNReLU{self._DIM}d" if self._FUSE_RELU else f"QuantizedBatchNorm{self._DIM}d"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from ember.ao.nn import intrinsic as nni
        app = mod.activation_post_process
        if isinstance(mod, nni._FusedModule):
            mod = mod[0]
        scale, zero_point = app.calculate_qparams()
        new = cls(mod.num_features, mod.eps)
        new.weight, new.bias = mod.weight, mod.bias
        new.running_mean, new.running_var = mod.running_mean, mod.running_var
        new.scale, new.zero_point = scale, zero_point
        return new


class BatchNorm2d(_BatchNorm):
    _DIM = 2


class BatchNorm3d(_BatchNorm):
    _DIM = 3


class BNReLU2d(BatchNorm2d):
    _FUSE_RELU = True


class BNReLU3d(BatchNorm3d):
    _FUSE_RELU = True


class PReLU(nn.Module):
    """``QuantizedPReLU``: ``x`` above 0, ``weight * x`` below, with a quint8-quantized ``weight``
    (one slope, or one per channel -- dim 1 of the input), requantized with the observed output
    scale / zero point: the float32 arithmetic of torch's kernel on the dequantized values."""

    def __init__(self, output_scale, output_zero_point, num_parameters=1):
        super().__init__()
        self.num_parameters = num_parameters
        self.scale = output_scale
        self.zero_point = output_zero_point
        w = ember.randn(num_parameters, dtype=ember.float)
        self.set_weight(ember.quantize_per_tensor(w, scale=1.0, zero_point=0, dtype=ember.quint8))

    def set_weight(self, w):
        self.weight = w

    def forward(self, input):
        qF._need_quantized(input, "quantized.prelu")
        w = self.weight
        if not getattr(w, "is_quantized", False):
            raise RuntimeError(f"QuantizedPReLU: the weight must be a quantized tensor (set_weight with a quint8 "
                               f"tensor), got {getattr(w, 'dtype', type(w).__name__)}")
        if w.qscheme() is not _QS.per_tensor_affine:
            raise NotImplementedError("ember.quantization: QuantizedPReLU with a per-channel quantized weight is not "
                                      "supported")
        if w.dtype is not input.dtype:       # torch's kernel iterates input and weight as one dtype
            raise RuntimeError(f"Found dtype {_QNAME[w.dtype.name]} but expected {_QNAME[input.dtype.name]}")
        wd = np.asarray(w.dequantize()._data, np.float32).reshape(-1)
        n = wd.size
        if n != 1:
            channels = input.shape[1] if input.ndim >= 2 else None
            if channels != n:
                raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers "
                                   f"= {n} and channel size = {channels}.")
            wd = wd.reshape((1, n) + (1,) * (input.ndim - 2))
        # torch's kernel multiplies *every* value by a slope on the weight's grid: the weight for
        # negatives, and 1.0 quantized with the weight's scale / zero point for the others -- which
        # is not exactly 1 when 1 / w_scale is not an integer, and is clamped at quint8's 255
        # (a weight zero point of 200, scale 0.01 gives positives a gain of 0.55)
        wq = w.q_scale(), w.q_zero_point()
        one = np.float32((int(_K.quantize_per_tensor(np.ones(1, np.float32), wq[0], wq[1], w.dtype)[0]) - wq[1])
                         * np.float32(wq[0]))
        return qF._requantized(input, lambda d: (d * np.where(d > 0, one, wd)).astype(np.float32), self.scale,
                               self.zero_point, "quantized.prelu")

    def _get_name(self):
        return "QuantizedPReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zero_point = _observed_qparams(mod)
        out = cls(scale, zero_point, mod.num_parameters)
        out.set_weight(_quint8_weight(mod))
        return out

    @classmethod
    def from_reference(cls, mod, scale, zero_point):
        out = cls(float(scale), int(zero_point), mod.num_parameters)
        out.set_weight(_quint8_weight(mod))
        return out


_QNAME = {"quint8": "QUInt8", "qint8": "QInt8", "qint32": "QInt32", "quint4x2": "QUInt4x2", "quint2x4": "QUInt2x4"}


def _quint8_weight(mod):
    """The PReLU slope(s) quantized to quint8 with the qconfig's weight observer (torch warns, and
    goes on, when that observer is not a quint8 one)."""
    import warnings
    float_wt = mod.weight.detach().float()
    observer = mod.qconfig.weight()
    observer(float_wt)
    if observer.dtype is not ember.quint8:
        warnings.warn(f"PReLU's weight observer should have dtype quint8 but got {observer.dtype}", stacklevel=3)
    wt_scale, wt_zp = observer.calculate_qparams()
    return ember.quantize_per_tensor(float_wt, float(wt_scale), int(wt_zp), ember.quint8)
