"""``ember.ao.nn.quantizable``: observable float versions of LSTMCell / LSTM (for *static*
quantization of those layers: see ``rnn.py``), as torch's. ``MultiheadAttention`` is not
supported: constructing it raises NotImplementedError."""
from __future__ import annotations

from .rnn import LSTM, LSTMCell  # noqa: F401


class MultiheadAttention:
    """Not supported in ember (torch's observable MultiheadAttention)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ember.quantization: ember.ao.nn.quantizable.MultiheadAttention (static "
                                  "quantization of nn.MultiheadAttention) is not supported")

    @classmethod
    def from_float(cls, *args, **kwargs):
        cls()
