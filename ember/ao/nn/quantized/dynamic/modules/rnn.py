"""Dynamically quantized recurrent modules: not implemented in ember.

torch has them (``torch.ao.nn.quantized.dynamic.LSTM`` ...); ember's ``quantize_dynamic``
raises instead of leaving such a layer in float silently, and constructing one raises too."""
from __future__ import annotations


def _unsupported(name):
    class _Missing:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"ember.quantization: dynamic quantization of nn.{name} "
                                      f"(ember.ao.nn.quantized.dynamic.{name}) is not supported")

        @classmethod
        def from_float(cls, mod, *args, **kwargs):
            cls()

    _Missing.__name__ = _Missing.__qualname__ = name
    return _Missing


LSTM = _unsupported("LSTM")
GRU = _unsupported("GRU")
LSTMCell = _unsupported("LSTMCell")
GRUCell = _unsupported("GRUCell")
RNNCell = _unsupported("RNNCell")
