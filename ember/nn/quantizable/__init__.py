"""``ember.nn.quantizable``: torch's older spelling of ``ember.ao.nn.quantizable`` (the same classes)."""
from ember.ao.nn.quantizable import LSTM, LSTMCell, MultiheadAttention  # noqa: F401
