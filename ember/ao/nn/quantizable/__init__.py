"""``ember.ao.nn.quantizable``: observable float versions of LSTMCell / LSTM and MultiheadAttention
(for *static* quantization of those layers: see ``rnn.py`` and ``activation.py``), as torch's."""
from __future__ import annotations

from .rnn import LSTM, LSTMCell  # noqa: F401
from .activation import MultiheadAttention  # noqa: F401
