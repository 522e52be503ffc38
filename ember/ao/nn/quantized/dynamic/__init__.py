"""Dynamically quantized modules: int8 weights, activations quantized per call from their range."""
from .modules import Linear, LSTM, GRU, LSTMCell, GRUCell, RNNCell  # noqa: F401

_UNSUPPORTED = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def __getattr__(name):
    if name in _UNSUPPORTED:
        raise NotImplementedError(f"ember.quantization: the dynamically quantized {name} "
                                  f"(ember.ao.nn.quantized.dynamic.{name}) is not supported (dynamic Linear and the "
                                  "recurrent layers are; the static quantized convolutions are)")
    raise AttributeError(f"module 'ember.ao.nn.quantized.dynamic' has no attribute '{name}'")
