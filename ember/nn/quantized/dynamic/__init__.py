"""``ember.nn.quantized.dynamic``: the same classes as ``ember.ao.nn.quantized.dynamic``."""
from ember.ao.nn.quantized.dynamic import Linear, LSTM, GRU, LSTMCell, GRUCell, RNNCell  # noqa: F401
