"""The recurrences of the dynamically quantized LSTM / GRU / RNN cells, in numpy, as torch's
``quantized_lstm`` / ``quantized_gru`` (ATen RNN.cpp with ``QuantizedCellParamsDynamic``).

Each gate product is a dynamic quantized linear layer (``linear._dynamic_int8_linear``: the
input quantized per call from its own min/max, int8 weights, the bias in fbgemm's epilogue).
Where torch quantizes matters for the result, so ember follows it:

* over a whole sequence (``quantized_lstm`` / ``quantized_gru``, on the CPU; padded or packed) the input-to-hidden
  product of a layer is computed once for all time steps -- the activation scale comes from the
  min/max of the *whole* (T, B, F) layer input -- and only the hidden-to-hidden product runs per
  step, on that step's hidden state;
* a single cell (``LSTMCell`` ...) quantizes its input and its hidden state separately;
* the activations always use ``reduce_range`` (integers 0..127, as fbgemm's dynamic linear on x86).

The gate arithmetic (sigmoid, tanh, the cell update) is float32 as torch's; its vectorised
exp/tanh may differ from numpy's by an ulp.
"""
from __future__ import annotations

import numpy as np

from .linear import _dynamic_int8_linear

_F32 = np.float32


class CellParamsDynamic:
    """One layer-direction's weights (torch's ``CellParamsBase`` script object): the int8 (or
    float16-rounded) input-to-hidden and hidden-to-hidden weights with their float biases."""

    __slots__ = ("w_ih", "w_hh", "b_ih", "b_hh", "reduce_range", "dtype")

    def __init__(self, w_ih, w_hh, b_ih, b_hh, reduce_range, dtype):
        self.w_ih, self.w_hh, self.b_ih, self.b_hh = w_ih, w_hh, b_ih, b_hh
        self.reduce_range = bool(reduce_range)
        self.dtype = dtype

    def _linear(self, x2, w, b):
        import ember
        bias = None if b is None else np.asarray(b.detach()._data, _F32)
        if self.dtype is ember.float16:
            wf = np.asarray(w.detach()._data, _F32).astype(np.float16).astype(_F32)
            out = (x2 @ wf.T).astype(_F32)
            return out if bias is None else (out + bias).astype(_F32)
        return _dynamic_int8_linear(np.ascontiguousarray(x2, _F32), w, bias, self.reduce_range)

    def linear_ih(self, x2):
        return self._linear(x2, self.w_ih, self.b_ih)

    def linear_hh(self, h):
        return self._linear(h, self.w_hh, self.b_hh)

    def as_tuple(self):
        """The saved form (a tuple of tensors, a bool, a dtype: what ``ember.save`` stores)."""
        return (self.w_ih, self.w_hh, self.b_ih, self.b_hh, self.reduce_range, self.dtype)

    @classmethod
    def from_saved(cls, obj):
        return obj if isinstance(obj, cls) else cls(*obj)

    def __getstate__(self):
        return self.as_tuple()

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    def __repr__(self):
        return (f"CellParamsDynamic(w_ih={tuple(self.w_ih.shape)}, w_hh={tuple(self.w_hh.shape)}, "
                f"dtype={self.dtype}, reduce_range={self.reduce_range})")


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (_F32(1) / (_F32(1) + np.exp(-x, dtype=_F32))).astype(_F32)


def lstm_step(gi, h, c, params):
    """One LSTM step from the precomputed input gates ``gi`` (B, 4H): torch's gate order i, f, g, o."""
    gates = (params.linear_hh(h) + gi).astype(_F32)
    i, f, g, o = np.split(gates, 4, axis=1)
    i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
    cy = ((f * c).astype(_F32) + (i * g).astype(_F32)).astype(_F32)
    hy = (o * np.tanh(cy)).astype(_F32)
    return hy, cy


def gru_step(gi, h, params):
    """One GRU step: r, z from the summed gates, n = tanh(i_n + r * h_n), h' = (h - n) * z + n."""
    gh = params.linear_hh(h)
    i_r, i_z, i_n = np.split(gi, 3, axis=1)
    h_r, h_z, h_n = np.split(gh, 3, axis=1)
    r = _sigmoid((h_r + i_r).astype(_F32))
    z = _sigmoid((h_z + i_z).astype(_F32))
    n = np.tanh((i_n + (h_n * r).astype(_F32)).astype(_F32))
    return (((h - n).astype(_F32) * z).astype(_F32) + n).astype(_F32)


def rnn_step(gi, h, params, nonlinearity):
    pre = (params.linear_hh(h) + gi).astype(_F32)
    return np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, _F32(0))


def run_sequence(mode, x, hx, params, num_layers, bidirectional):
    """(T, B, F) float32 ``x`` through the layers; ``hx``: (L*D, B, H) (LSTM: a pair).
    Returns (output (T, B, D*H), final states as (L*D, B, H) arrays)."""
    dirs = 2 if bidirectional else 1
    t_len, batch = x.shape[0], x.shape[1]
    if t_len == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    h_fin, c_fin = [], []
    layer_in = x
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            p = params[layer * dirs + d]
            k = layer * dirs + d
            gi_all = p.linear_ih(layer_in.reshape(t_len * batch, -1)).reshape(t_len, batch, -1)
            h = hx[0][k] if mode == "LSTM" else hx[k]
            c = hx[1][k] if mode == "LSTM" else None
            steps = range(t_len - 1, -1, -1) if d == 1 else range(t_len)
            ys = [None] * t_len
            for t in steps:
                if mode == "LSTM":
                    h, c = lstm_step(gi_all[t], h, c, p)
                else:
                    h = gru_step(gi_all[t], h, p)
                ys[t] = h
            outs.append(np.stack(ys))
            h_fin.append(h)
            if mode == "LSTM":
                c_fin.append(c)
        layer_in = np.concatenate(outs, axis=2) if dirs == 2 else outs[0]
    return layer_in, np.stack(h_fin), (np.stack(c_fin) if mode == "LSTM" else None)


def run_packed(mode, data, batch_sizes, hx, params, num_layers, bidirectional):
    """A packed sequence (``data`` (N, F), time-major rows, ``batch_sizes`` per step) through the
    layers. As for a padded sequence, the input product of a layer is one call over all of its
    rows (the activation range is the whole packed data's). A direction works on the first
    ``batch_sizes[t]`` rows of its state: forward, the rows of sequences that ended keep their
    last state; backward, rows of sequences not started yet still hold the initial state.
    Returns (output data, final states) as ``run_sequence``."""
    dirs = 2 if bidirectional else 1
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)]).astype(np.int64)
    h_fin, c_fin = [], []
    layer_in = data
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            p = params[layer * dirs + d]
            k = layer * dirs + d
            h = np.array(hx[0][k] if mode == "LSTM" else hx[k], np.float32)
            c = np.array(hx[1][k], np.float32) if mode == "LSTM" else None
            ys = np.empty((layer_in.shape[0], h.shape[-1]), np.float32)
            steps = range(len(batch_sizes) - 1, -1, -1) if d == 1 else range(len(batch_sizes))
            gi_all = p.linear_ih(layer_in)
            for t in steps:
                b, lo = int(batch_sizes[t]), int(offsets[t])
                gi = gi_all[lo:lo + b]
                if mode == "LSTM":
                    h[:b], c[:b] = lstm_step(gi, h[:b], c[:b], p)
                else:
                    h[:b] = gru_step(gi, h[:b], p)
                ys[lo:lo + b] = h[:b]
            outs.append(ys)
            h_fin.append(h)
            if mode == "LSTM":
                c_fin.append(c)
        layer_in = np.concatenate(outs, axis=1) if dirs == 2 else outs[0]
    return layer_in, np.stack(h_fin), (np.stack(c_fin) if mode == "LSTM" else None)
