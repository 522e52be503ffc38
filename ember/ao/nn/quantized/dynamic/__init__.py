"""Dynamically quantized modules: int8 weights, activations quantized per call from their range."""
from .modules import Linear, LSTM, GRU, LSTMCell, GRUCell, RNNCell  # noqa: F401
