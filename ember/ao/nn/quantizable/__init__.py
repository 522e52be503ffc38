"""``ember.ao.nn.quantizable``: torch's observable float versions of LSTM / LSTMCell /
MultiheadAttention (for *static* quantization of those layers). ember does not have them:
constructing one raises NotImplementedError (dynamic quantization of LSTM is supported:
``ember.ao.quantization.quantize_dynamic``)."""
from __future__ import annotations


def _unsupported(name):
    class _Missing:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"ember.quantization: ember.ao.nn.quantizable.{name} (static quantization of "
                                      f"nn.{name}) is not supported; quantize_dynamic handles nn.LSTM")

        @classmethod
        def from_float(cls, *args, **kwargs):
            cls()

    _Missing.__name__ = _Missing.__qualname__ = name
    return _Missing


LSTM = _unsupported("LSTM")
LSTMCell = _unsupported("LSTMCell")
MultiheadAttention = _unsupported("MultiheadAttention")
