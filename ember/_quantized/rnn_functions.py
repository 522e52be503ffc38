"""``ember.quantized_lstm`` / ``ember.quantized_gru``: the whole-sequence recurrences behind the
dynamically quantized LSTM / GRU modules, callable as torch's.

torch's take a list of ``CellParamsBase`` script objects (what ``[m.param for m in
qlstm._all_weight_values]`` gives); ember's take the ``CellParamsDynamic`` objects in the same
place. The legacy per-step cells (``quantized_lstm_cell`` ...) take the int8 weights, packed
matrices, column offsets, scales and zero points of ``fbgemm_linear_quantize_weight`` /
``fbgemm_pack_quantized_matrix`` (fbgemm_legacy.py) and compute from the int8 weights.
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


class _LegacyCellParams:
    """The int8 weights of a legacy cell (``fbgemm_linear_quantize_weight`` outputs): each product is
    ``fbgemm_linear_int8_weight_fp32_activation`` (its input quantized over 0..255 per call)."""

    def __init__(self, w_ih, w_hh, b_ih, b_hh, scale_ih, scale_hh, zp_ih, zp_hh):
        self.ih = (w_ih, float(scale_ih), int(zp_ih), b_ih)
        self.hh = (w_hh, float(scale_hh), int(zp_hh), b_hh)

    @staticmethod
    def _apply(x, spec):
        from .fbgemm_legacy import int8_linear
        w, scale, zp, b = spec
        return int8_linear(np.asarray(x, np.float32), w, scale, zp, b)

    def linear_ih(self, x):
        return self._apply(x, self.ih)

    def linear_hh(self, h):
        return self._apply(h, self.hh)


def _legacy_cell(name, mode):
    def fn(input, hx, w_ih, w_hh, b_ih, b_hh, packed_ih, packed_hh, col_offsets_ih, col_offsets_hh, scale_ih,
           scale_hh, zero_point_ih, zero_point_hh):
        import ember
        from ..ao.nn.quantized.dynamic.modules import _recurrence as R
        from ..tensor import Tensor
        for arg, v in (("input", input), ("w_ih", w_ih), ("w_hh", w_hh)):
            if not isinstance(v, Tensor):
                raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")
        if w_ih.dtype is not ember.int8 or w_hh.dtype is not ember.int8:
            raise RuntimeError(f"{name}: w_ih / w_hh must be the int8 weights of ember.fbgemm_linear_quantize_weight")
        if input.dtype is not ember.float32:
            raise RuntimeError(f"expected scalar type Float but found {input.dtype.legacy_name}")
        p = _LegacyCellParams(w_ih, w_hh, b_ih, b_hh, scale_ih, scale_hh, zero_point_ih, zero_point_hh)
        x = np.asarray(input.detach()._data, np.float32)
        gi = p.linear_ih(x)
        if mode == "LSTM":
            h, c = (np.asarray(t.detach()._data, np.float32) for t in hx)
            hy, cy = R.lstm_step(gi, h, c, p)
            return ember.tensor(hy), ember.tensor(cy)
        h = np.asarray(hx.detach()._data, np.float32)
        if mode == "GRU":
            return ember.tensor(R.gru_step(gi, h, p))
        return ember.tensor(R.rnn_step(gi, h, p, "tanh" if mode == "RNN_TANH" else "relu"))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"torch's legacy ``{name}``: one step over weights from ``fbgemm_linear_quantize_weight`` "
                  "(the packed matrices and column offsets are accepted; ember computes from the int8 weights).")
    return fn


quantized_lstm_cell = _legacy_cell("quantized_lstm_cell", "LSTM")
quantized_gru_cell = _legacy_cell("quantized_gru_cell", "GRU")
quantized_rnn_tanh_cell = _legacy_cell("quantized_rnn_tanh_cell", "RNN_TANH")
quantized_rnn_relu_cell = _legacy_cell("quantized_rnn_relu_cell", "RNN_RELU")
