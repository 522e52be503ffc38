from .linear import Linear  # noqa: F401
from .rnn import LSTM, GRU, LSTMCell, GRUCell, RNNCell  # noqa: F401
