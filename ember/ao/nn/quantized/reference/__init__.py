"""``ember.ao.nn.quantized.reference``: "reference" quantized modules, as torch's -- float modules
whose weight is stored in float with its quantization parameters (``weight_qparams``: qscheme,
dtype, scale, zero_point, axis) and is quantized and dequantized on every forward, so the
module computes in float what the quantized kernel approximates (the form FX's
``convert_to_reference_fx`` produces and backends pattern-match). Linear, Conv1d/2d/3d,
Embedding and EmbeddingBag; the transposed convolutions and the recurrent layers are not
supported (their names raise NotImplementedError)."""
from __future__ import annotations

from .modules import Conv1d, Conv2d, Conv3d, Embedding, EmbeddingBag, Linear  # noqa: F401

_UNSUPPORTED = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "RNNCell", "LSTMCell", "GRUCell", "LSTM",
                "GRU")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise NotImplementedError(f"ember.ao.nn.quantized.reference.{name} is not supported (reference Linear, "
                                  "Conv1d/2d/3d, Embedding and EmbeddingBag are)")
    raise AttributeError(f"module 'ember.ao.nn.quantized.reference' has no attribute '{name}'")
