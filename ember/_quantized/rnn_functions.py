"""``ember.quantized_lstm`` / ``ember.quantized_gru``: the whole-sequence recurrences behind the
dynamically quantized LSTM / GRU modules, callable as torch's.

torch's take a list of ``CellParamsBase`` script objects (what ``[m.param for m in
qlstm._all_weight_values]`` gives); ember's take the ``CellParamsDynamic`` objects in the same
place. The per-step cells (``quantized_lstm_cell`` ...) take fbgemm's packed matrices and
column offsets (``fbgemm_pack_quantized_matrix``, deprecated in torch): ember has no such
packing and raises NotImplementedError for them.
"""
from __future__ import annotations

import numpy as np


def _run(mode, name, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
         batch_sizes=None):
    import ember
    from ..ao.nn.quantized.dynamic.modules import _recurrence as R
    from ..tensor import Tensor
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    params = list(params)
    if not all(isinstance(p, R.CellParamsDynamic) for p in params):
        raise TypeError(f"{name}(): 'params' must be the cell parameters of a dynamic quantized module "
                        "([m.param for m in qmod._all_weight_values])")
    dirs = 2 if bidirectional else 1
    if len(params) != num_layers * dirs:
        raise RuntimeError(f"{name}: expected {num_layers * dirs} cell parameters (num_layers x directions), "
                           f"got {len(params)}")
    if not has_biases:
        raise NotImplementedError(f"ember.quantization: {name} with has_biases=False is not supported")
    if train and dropout > 0 and num_layers > 1:
        raise NotImplementedError(f"ember.quantization: {name} with dropout in training is not supported")
    if input.dim() != (2 if batch_sizes is not None else 3):
        raise RuntimeError(f"input must have {2 if batch_sizes is not None else 3} dimensions, got {input.dim()}")
    x = np.asarray(input.detach()._data, np.float32)
    if mode == "LSTM":
        states = tuple(np.asarray(h.detach()._data, np.float32) for h in hx)
    else:
        states = np.asarray(hx.detach()._data, np.float32)
    if batch_sizes is not None:
        sizes = np.asarray(batch_sizes.detach()._data, np.int64)
        out, h, c = R.run_packed(mode, x, sizes, states, params, num_layers, bidirectional)
    else:
        if batch_first:
            x = x.transpose(1, 0, 2)
        out, h, c = R.run_sequence(mode, x, states, params, num_layers, bidirectional)
        if batch_first:
            out = out.transpose(1, 0, 2)
    out = ember.tensor(np.ascontiguousarray(out))
    return (out, ember.tensor(h), ember.tensor(c)) if mode == "LSTM" else (out, ember.tensor(h))


def quantized_lstm(input, *args, dtype=None, use_dynamic=False):
    """``(output, h_n, c_n)`` of a dynamically quantized LSTM, torch's two forms:
    ``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)`` over
    a (T, B, F) / (B, T, F) tensor, or ``(data, batch_sizes, hx, params, has_biases, num_layers,
    dropout, train, bidirectional)`` over a packed sequence's data."""
    from ..tensor import Tensor
    if not use_dynamic:
        raise NotImplementedError("ember.quantization: quantized_lstm with use_dynamic=False (statically "
                                  "quantized cell parameters) is not supported")
    if args and isinstance(args[0], Tensor):          # the packed form: batch_sizes second
        batch_sizes, *rest = args
        return _run("LSTM", "quantized_lstm", input, *rest, False, batch_sizes=batch_sizes)
    return _run("LSTM", "quantized_lstm", input, *args)


def quantized_gru(input, *args):
    """``(output, h_n)`` of a dynamically quantized GRU (the two forms of ``quantized_lstm``)."""
    from ..tensor import Tensor
    if len(args) > 1 and isinstance(args[1], Tensor):  # (data, batch_sizes, hx, params, ...)
        batch_sizes, *rest = args
        return _run("GRU", "quantized_gru", input, *rest, False, batch_sizes=batch_sizes)
    return _run("GRU", "quantized_gru", input, *args)


def _legacy_cell(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(
            f"ember.quantization: ember.{name} (the legacy cell over fbgemm-packed matrices and column offsets) "
            f"is not supported; use ember.ao.nn.quantized.dynamic.{_CELL_MODULES[name]} instead")
    fn.__name__ = fn.__qualname__ = name
    return fn


_CELL_MODULES = {"quantized_lstm_cell": "LSTMCell", "quantized_gru_cell": "GRUCell",
                 "quantized_rnn_tanh_cell": "RNNCell", "quantized_rnn_relu_cell": "RNNCell(nonlinearity='relu')"}
quantized_lstm_cell = _legacy_cell("quantized_lstm_cell")
quantized_gru_cell = _legacy_cell("quantized_gru_cell")
quantized_rnn_tanh_cell = _legacy_cell("quantized_rnn_tanh_cell")
quantized_rnn_relu_cell = _legacy_cell("quantized_rnn_relu_cell")
