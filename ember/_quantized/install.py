"""Where quantized tensors meet the rest of ember: top-level names (``ember.qint8``,
``ember.quantize_per_tensor``, ``ember.per_tensor_affine``, ...) and the quantization methods
of dense tensors (``dequantize`` returns the tensor itself, the quantizer accessors raise
torch's "no CPU kernel" error, ``is_quantized`` is False)."""
from __future__ import annotations

from .. import types as _t
from ..tensor import Tensor


def _no_cpu_kernel(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the 'CPU' backend. "
                                  f"'{name}' needs a quantized tensor (ember.quantize_per_tensor / "
                                  f"quantize_per_channel), got a dense {self.dtype} tensor.")
    method.__name__ = name
    return method


def _accessor(name):
    """``ember.q_scale(t)`` ...: the method of the same name (a dense tensor's raises torch's error)."""
    def fn(input):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
        return getattr(input, name)()
    fn.__name__ = fn.__qualname__ = name
    return fn


def _dense_dequantize(self):
    """A dense tensor's dequantization is its float32 values (itself when float32, as torch)."""
    return self if self.dtype is _t.float32 else self.to(_t.float32)


def install(g):
    from . import schemes as QS
    from . import functions as F
    for d in _t.QUANTIZED_DTYPES:
        g[d.name] = d
    g["qscheme"] = QS.qscheme
    for s in QS.ALL:
        g[s.name] = s
    for name in ("quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic", "dequantize",
                 "int_repr"):
        g[name] = getattr(F, name)
    from . import rnn_functions as RF
    for name in ("quantized_lstm", "quantized_gru", "quantized_lstm_cell", "quantized_gru_cell",
                 "quantized_rnn_tanh_cell", "quantized_rnn_relu_cell"):
        g[name] = getattr(RF, name)
    from . import elementwise as QE
    from . import pooling as QP
    g["quantized_max_pool1d"] = QP.quantized_max_pool1d
    g["quantized_max_pool2d"] = QP.quantized_max_pool2d
    g["quantized_batch_norm"] = QE.quantized_batch_norm
    from . import fbgemm_legacy as FB
    for name in ("fbgemm_linear_quantize_weight", "fbgemm_pack_quantized_matrix", "fbgemm_linear_int8_weight",
                 "fbgemm_linear_int8_weight_fp32_activation"):
        g[name] = getattr(FB, name)
    from . import fake_quant as FQ
    g["fake_quantize_per_tensor_affine"] = FQ.fake_quantize_per_tensor_affine
    g["fake_quantize_per_channel_affine"] = FQ.fake_quantize_per_channel_affine
    g["fused_moving_avg_obs_fake_quant"] = FQ.fused_moving_avg_obs_fake_quant
    for name in ("q_scale", "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points",
                 "q_per_channel_axis"):
        g[name] = _accessor(name)
    Tensor.is_quantized = False
    Tensor.dequantize = _dense_dequantize
    for name in ("int_repr", "q_scale", "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points",
                 "q_per_channel_axis", "qscheme"):
        if not hasattr(Tensor, name):
            setattr(Tensor, name, _no_cpu_kernel(name))
