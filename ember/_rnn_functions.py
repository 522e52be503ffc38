"""Top-level recurrent functions (``ember.lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu`` and the
``*_cell`` ones): torch's flat-parameter entry points to the recurrences nn.LSTM/GRU/RNN run.

They exist so code that calls ``torch.lstm(...)`` directly (scripted / traced models, custom
RNN wrappers) runs unchanged; the math is nn.modules.rnn's (``run_layers`` and its cells), only
the calling conventions are here: a flat ``params`` list per (layer, direction) ordered
``w_ih, w_hh[, b_ih, b_hh][, w_hr]``, and two overloads for the sequence functions -- padded
``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)`` and
packed ``(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)``
(hx and the final states in the packed batch's sorted order, as torch).
"""
from __future__ import annotations

from .nn.modules.rnn import _gru_cell, _lstm_cell, _rnn_relu_cell, _rnn_tanh_cell, run_layers
from .nn.modules._F import F

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_SEQ_ARGS = ("has_biases", "num_layers", "dropout", "train", "bidirectional")


def _layer_weights_fn(name, params, has_biases, has_proj, num_layers, num_directions):
    """(layer, direction) -> (w_ih, w_hh, b_ih, b_hh, w_hr) over torch's flat ``params`` list."""
    params = list(params)
    per = 2 + (2 if has_biases else 0) + (1 if has_proj else 0)
    groups = num_layers * num_directions
    if len(params) != per * groups:
        raise RuntimeError(f"{name}: params has {len(params)} tensors, expected {per * groups} = {per} per layer and "
                           f"direction (w_ih, w_hh{', b_ih, b_hh' if has_biases else ''}"
                           f"{', w_hr' if has_proj else ''}) x num_layers={num_layers} x {num_directions} "
                           "direction(s)")

    def weights(layer, direction):
        chunk = params[(layer * num_directions + direction) * per:][:per]
        w_ih, w_hh = chunk[0], chunk[1]
        b_ih, b_hh = (chunk[2], chunk[3]) if has_biases else (None, None)
        w_hr = chunk[-1] if has_proj else None
        return w_ih, w_hh, b_ih, b_hh, w_hr
    return weights


def _check_state(name, which, state, expected):
    if tuple(state.shape) != tuple(expected):
        raise RuntimeError(f"{name}: expected {which} of size {list(expected)}, got {list(state.shape)}")


def _bind(name, args, kwargs, hx_is_tensor):
    """Sort the call into the padded or packed overload; returns (packed, input, batch_sizes, hx,
    params, has_biases, num_layers, dropout, train, bidirectional, batch_first)."""
    from .tensor import Tensor
    args = list(args)
    # packed: the second argument is batch_sizes, a tensor; for gru/rnn_* hx is a tensor too,
    # so the third argument (params, a sequence, versus hx, a tensor) decides
    if "batch_sizes" in kwargs or "data" in kwargs:
        packed = True
    elif "batch_first" in kwargs or "input" in kwargs:
        packed = False
    elif not hx_is_tensor:
        packed = len(args) > 1 and isinstance(args[1], Tensor)
    elif len(args) > 2:
        packed = isinstance(args[2], Tensor)
    else:
        packed = len(args) == 2 and "hx" in kwargs
    names = (["data", "batch_sizes", "hx", "params", *_SEQ_ARGS] if packed
             else ["input", "hx", "params", *_SEQ_ARGS, "batch_first"])
    if len(args) > len(names):
        raise TypeError(f"{name}() takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
        if k in bound:
            raise TypeError(f"{name}() got multiple values for argument '{k}'")
        bound[k] = v
    missing = [n for n in names if n not in bound]
    if missing:
        raise TypeError(f"{name}() missing required argument(s): {', '.join(missing)} (overload "
                        f"({', '.join(names)}))")
    x = bound["data" if packed else "input"]
    return (packed, x, bound.get("batch_sizes"), bound["hx"], bound["params"], bool(bound["has_biases"]),
            int(bound["num_layers"]), float(bound["dropout"]), bool(bound["train"]), bool(bound["bidirectional"]),
            bool(bound.get("batch_first", False)))


def _sequence(mode, name, args, kwargs):
    import ember
    lstm = mode == "LSTM"
    packed, x, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = \
        _bind(name, args, kwargs, hx_is_tensor=not lstm)
    if lstm:
        if len(hx) != 2:
            raise RuntimeError("lstm expects two hidden states")
        h0, c0 = hx
    else:
        h0, c0 = hx, None
    num_directions = 2 if bidirectional else 1
    if packed:
        sizes = [int(n) for n in (batch_sizes.tolist() if hasattr(batch_sizes, "tolist") else batch_sizes)]
        if x.dim() != 2:
            raise RuntimeError(f"{name}: packed data must be 2-D (sum(batch_sizes), input_size), got {x.dim()}-D")
        if not sizes or sum(sizes) != x.shape[0]:
            raise RuntimeError(f"{name}: batch_sizes {sizes} do not add up to the {x.shape[0]} rows of data")
        batch = sizes[0]
    else:
        sizes = None
        if x.dim() != 3:
            raise RuntimeError(f"{name}: expected input to be 3-D ({'batch, seq_len' if batch_first else 'seq_len, batch'}"
                               f", input_size), got {x.dim()}-D")
        if batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1]
    has_proj = lstm and h0.shape[-1] != c0.shape[-1]
    weights = _layer_weights_fn(name, params, has_biases, has_proj, num_layers, num_directions)
    hidden = weights(0, 0)[1].shape[1]
    _check_state(name, "hx[0]" if lstm else "hx", h0, (num_layers * num_directions, batch, hidden))
    if lstm:
        _check_state(name, "hx[1]", c0, (num_layers * num_directions, batch, weights(0, 0)[0].shape[0] // 4))
    states = [(h0[i], c0[i]) if lstm else h0[i] for i in range(h0.shape[0])]
    out, finals = run_layers(mode, x, states, weights, num_layers, bidirectional, dropout, train, sizes)
    if not packed and batch_first:
        out = out.transpose(0, 1)
    if lstm:
        return out, ember.stack([s[0] for s in finals], 0), ember.stack([s[1] for s in finals], 0)
    return out, ember.stack(finals, 0)


def lstm(*args, **kwargs):
    """``(output, h_n, c_n)``; hx = (h_0, c_0); projections when h_0's size differs from c_0's."""
    return _sequence("LSTM", "lstm", args, kwargs)


def gru(*args, **kwargs):
    """``(output, h_n)`` of a (stacked, optionally bidirectional) GRU."""
    return _sequence("GRU", "gru", args, kwargs)


def rnn_tanh(*args, **kwargs):
    """``(output, h_n)`` of an Elman RNN with tanh."""
    return _sequence("RNN_TANH", "rnn_tanh", args, kwargs)


def rnn_relu(*args, **kwargs):
    """``(output, h_n)`` of an Elman RNN with relu."""
    return _sequence("RNN_RELU", "rnn_relu", args, kwargs)


def _check_cell(name, mode, input, hiddens, w_ih, w_hh):
    """torch's checks (and messages) on a cell call's input, hidden states and weights."""
    hidden_size = w_hh.size(1)
    if input.size(1) != w_ih.size(1):
        raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {w_ih.size(1)}")
    # torch checks an LSTM cell's gate rows before its hidden states, the other cells' after
    if mode == "LSTM":
        _check_gate_rows(mode, w_ih, hidden_size)
    for i, h in enumerate(hiddens):
        if input.size(0) != h.size(0):
            raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {h.size(0)}")
        if h.size(1) != hidden_size:
            raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, expected {hidden_size}")
    if mode != "LSTM":
        _check_gate_rows(mode, w_ih, hidden_size)


def _check_gate_rows(mode, w_ih, hidden_size):
    gates = _GATES[mode]
    if w_ih.size(0) != gates * hidden_size:
        raise RuntimeError(f"weight_ih first dim must be {gates} * hidden_size = {gates * hidden_size}, but got "
                           f"{w_ih.size(0)}")


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: ``(h_1, c_1)``; hx = (h_0, c_0), all (batch, ...) 2-D."""
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    _check_cell("lstm_cell", "LSTM", input, hx, w_ih, w_hh)
    return _lstm_cell(F.linear(input, w_ih, b_ih), tuple(hx), w_hh, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step: h_1."""
    _check_cell("gru_cell", "GRU", input, (hx,), w_ih, w_hh)
    return _gru_cell(F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One tanh RNN step: h_1."""
    _check_cell("rnn_tanh_cell", "RNN_TANH", input, (hx,), w_ih, w_hh)
    return _rnn_tanh_cell(F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One relu RNN step: h_1."""
    _check_cell("rnn_relu_cell", "RNN_RELU", input, (hx,), w_ih, w_hh)
    return _rnn_relu_cell(F.linear(input, w_ih, b_ih), hx, w_hh, b_hh)
