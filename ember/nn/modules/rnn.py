"""Recurrent layers: RNN, LSTM, GRU and their cells (PyTorch's gate order, parameter names and init).

The input projection of a whole sequence is one matmul; the recurrence then runs step by step.
A PackedSequence input (ember.nn.utils.rnn) runs step t on the first batch_sizes[t] sorted sequences
(the reverse direction starts each sequence at its own last step); hx and h_n use the original order.
"""
from __future__ import annotations

import math
import numbers

from ...tensor import Parameter
from .. import init
from ._F import F
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _api():
    import ember
    return ember


def _rnn_tanh_cell(gi, h, w_hh, b_hh):
    return (gi + F.linear(h, w_hh, b_hh)).tanh()


def _rnn_relu_cell(gi, h, w_hh, b_hh):
    return F.relu(gi + F.linear(h, w_hh, b_hh))


def _lstm_cell(gi, hc, w_hh, b_hh, w_hr=None):
    h, c = hc
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c + i * g
    h = o * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_cell(gi, h, w_hh, b_hh):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return (1 - z) * n + z * h


# mode -> (step(gi, state, w_hh, b_hh[, w_hr]) -> state, output(state) -> y)
_CELLS = {"LSTM": (_lstm_cell, lambda s: s[0]), "GRU": (_gru_cell, lambda s: s),
          "RNN_TANH": (_rnn_tanh_cell, lambda s: s), "RNN_RELU": (_rnn_relu_cell, lambda s: s)}


def run_layers(mode, x, hx, layer_weights, num_layers, bidirectional, dropout, training, batch_sizes=None):
    """The stacked (bi)directional recurrence shared by nn.RNN/LSTM/GRU and ember.lstm/gru/rnn_*.

    mode: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU". x: (L, N, Hin), or packed data
    (sum(batch_sizes), Hin) when ``batch_sizes`` (a list of ints) is given; hx: per (layer,
    direction) state ((h, c) for LSTM); layer_weights(layer, direction) -> (w_ih, w_hh, b_ih,
    b_hh, w_hr), None where absent. Dropout (p=``dropout``) falls between layers when ``training``.
    Returns output (L, N, D*H) / (sum(batch_sizes), D*H) and the final states."""
    em = _api()
    num_directions = 2 if bidirectional else 1
    # (a Python int: the recurrence is unrolled step by step, so under ember.compile a new
    # sequence length is a new graph -- ``int`` specializes it instead of leaving a symbolic size
    # that ``[None] * seq_len`` cannot take, which ran the whole frame eagerly)
    seq_len = int(x.shape[0])
    finals = []
    layer_input = x
    for layer in range(num_layers):
        outs = []
        for direction in range(num_directions):
            idx = layer * num_directions + direction
            w_ih, w_hh, b_ih, b_hh, w_hr = layer_weights(layer, direction)
            gi_all = F.linear(layer_input, w_ih, b_ih)  # (L, N, G)
            if batch_sizes is not None:
                out, state = _run_packed(mode, gi_all, hx[idx], batch_sizes, direction == 1, w_hh, b_hh, w_hr)
                outs.append(out)
                finals.append(state)
                continue
            state = hx[idx]
            steps = range(seq_len - 1, -1, -1) if direction == 1 else range(seq_len)
            ys = [None] * seq_len
            for t in steps:
                gi = gi_all[t]
                if mode == "LSTM":
                    state = _lstm_cell(gi, state, w_hh, b_hh, w_hr)
                    ys[t] = state[0]
                elif mode == "GRU":
                    state = _gru_cell(gi, state, w_hh, b_hh)
                    ys[t] = state
                elif mode == "RNN_TANH":
                    state = _rnn_tanh_cell(gi, state, w_hh, b_hh)
                    ys[t] = state
                else:
                    state = _rnn_relu_cell(gi, state, w_hh, b_hh)
                    ys[t] = state
            outs.append(em.stack(ys, 0))
            finals.append(state)
        layer_output = outs[0] if num_directions == 1 else em.cat(outs, -1)
        if dropout > 0 and training and layer < num_layers - 1:
            layer_output = F.dropout(layer_output, dropout, True)
        layer_input = layer_output
    return layer_input, finals


def _run_packed(mode, gi_all, h0, batch_sizes, reverse, w_hh, b_hh, w_hr):
    """One direction of one layer over packed rows: step t sees the first batch_sizes[t] (sorted,
    longest first) sequences. Forward: rows that end drop out of the running state and are kept as
    final states. Reverse: each sequence starts at its own last step from its h0 row. Returns the
    packed output (sum(batch_sizes), H) and the final state of every sequence (N rows)."""
    em = _api()
    step, output = _CELLS[mode]
    lstm = mode == "LSTM"
    extra = (w_hr,) if lstm else ()

    def take(state, lo, hi):
        return tuple(s[lo:hi] for s in state) if lstm else state[lo:hi]

    def join(parts):
        if len(parts) == 1:
            return parts[0]
        if lstm:
            return tuple(em.cat([p[k] for p in parts], 0) for k in range(2))
        return em.cat(parts, 0)

    offsets = [0]
    for n in batch_sizes:
        offsets.append(offsets[-1] + n)
    T = len(batch_sizes)
    ys = [None] * T
    if not reverse:
        state, cur, done = h0, batch_sizes[0], []
        for t in range(T):
            n = batch_sizes[t]
            if n < cur:
                done.append(take(state, n, cur))
                state, cur = take(state, 0, n), n
            state = step(gi_all[offsets[t]:offsets[t + 1]], state, w_hh, b_hh, *extra)
            ys[t] = output(state)
        final = join([state] + done[::-1])
    else:
        cur = batch_sizes[-1]
        state = take(h0, 0, cur)
        for t in range(T - 1, -1, -1):
            n = batch_sizes[t]
            if n > cur:
                state, cur = join([state, take(h0, cur, n)]), n
            state = step(gi_all[offsets[t]:offsets[t + 1]], state, w_hh, b_hh, *extra)
            ys[t] = output(state)
        final = state
    return (ys[0] if T == 1 else em.cat(ys, 0)), final


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                     "bidirectional", "proj_size"]

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        from ... import empty
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if dropout > 0 and num_layers == 1:
            import warnings
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if mode == "LSTM":
            gate_size = 4 * hidden_size
        elif mode == "GRU":
            gate_size = 3 * hidden_size
        elif mode in ("RNN_TANH", "RNN_RELU"):
            gate_size = hidden_size
        else:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self._flat_weights_names = []
        self._all_weights = []
        fk = dict(device=device, dtype=dtype)
        for layer in range(num_layers):
            for direction in range(num_directions):
                real_hidden_size = proj_size if proj_size > 0 else hidden_size
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                w_ih = Parameter(empty((gate_size, layer_input_size), **fk))
                w_hh = Parameter(empty((gate_size, real_hidden_size), **fk))
                b_ih = Parameter(empty(gate_size, **fk))
                b_hh = Parameter(empty(gate_size, **fk))
                if proj_size == 0:
                    params = (w_ih, w_hh, b_ih, b_hh) if bias else (w_ih, w_hh)
                else:
                    w_hr = Parameter(empty((proj_size, hidden_size), **fk))
                    params = (w_ih, w_hh, b_ih, b_hh, w_hr) if bias else (w_ih, w_hh, w_hr)
                suffix = "_reverse" if direction == 1 else ""
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    names += ["weight_hr_l{}{}"]
                names = [x.format(layer, suffix) for x in names]
                for name, param in zip(names, params):
                    setattr(self, name, param)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, w) for w in weights] for weights in self._all_weights]

    def flatten_parameters(self):
        pass

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # -------------------------------------------------------------- forward
    def _layer_weights(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        b_ih = getattr(self, f"bias_ih_l{layer}{suffix}") if self.bias else None
        b_hh = getattr(self, f"bias_hh_l{layer}{suffix}") if self.bias else None
        w_hr = getattr(self, f"weight_hr_l{layer}{suffix}") if self.proj_size > 0 else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _cell(self):
        """(step(gi, state) -> state, output(state) -> y) of this module's recurrence."""
        return _CELLS[self.mode]

    def _run(self, x, hx, batch_sizes=None):
        """x: (L, N, Hin), or packed data (sum(batch_sizes), Hin) when ``batch_sizes`` (a list of ints) is
        given; hx: per (layer, direction) state. Returns output (L, N, D*H) / (sum(batch_sizes), D*H) and
        the final states."""
        return run_layers(self.mode, x, hx, self._layer_weights, self.num_layers, self.bidirectional,
                          self.dropout, self.training, batch_sizes)

    def _prepare(self, input):
        """-> (x, batched, packed): x is (L, N, Hin), or the packed data (sum(batch_sizes), Hin) when
        ``input`` is a PackedSequence, in which case ``packed`` = (batch_sizes as a list of ints,
        batch_sizes, sorted_indices, unsorted_indices), else None."""
        from ...nn.utils.rnn import PackedSequence
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            self._check_input_dtype(data)
            if data.dim() != 2:
                raise RuntimeError(f"input must have 2 dimensions, got {data.dim()} (the data of a "
                                   "PackedSequence fed to an RNN is (sum(lengths), input_size))")
            if data.shape[-1] != self.input_size:
                raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                                   f"got {data.shape[-1]}")
            sizes = [int(n) for n in (batch_sizes.tolist() if hasattr(batch_sizes, "tolist") else batch_sizes)]
            if not sizes or sum(sizes) != data.shape[0]:
                raise RuntimeError(f"PackedSequence: batch_sizes {sizes} do not add up to the {data.shape[0]} "
                                   "rows of its data")
            return data, True, (sizes, batch_sizes, sorted_indices, unsorted_indices)
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D tensor "
                             "instead")
        self._check_input_dtype(input)
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")
        return input, batched, None

    def _check_input_dtype(self, input):
        """torch refuses an input whose dtype isn't the weights' (outside autocast, which casts)."""
        from ...amp.autocast_mode import DEVICE_TYPES, is_autocast_enabled
        w = self._flat_weights[0]
        if input.dtype != w.dtype and not any(is_autocast_enabled(d) for d in DEVICE_TYPES):
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). Convert "
                             f"input: input.to({w.dtype}), or convert model: model.to({input.dtype})")

    def _check_hidden(self, hx, expected, msg="Expected hidden size {}, got {}"):
        # torch prints the expected size as a tuple and the actual one as a list
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _finish_output(self, out, batched, packed=None):
        if packed is not None:
            from ...nn.utils.rnn import PackedSequence
            return PackedSequence(out, packed[1], packed[2], packed[3])
        if not batched:
            return out.squeeze(1)
        if self.batch_first:
            return out.transpose(0, 1)
        return out

    @staticmethod
    def _permute_hidden(hx, permutation):
        """hx reordered along the batch dim (dim 1): original <-> sorted order of a PackedSequence."""
        return hx if permutation is None else hx.index_select(1, permutation)


class RNN(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        em = _api()
        x, batched, packed = self._prepare(input)
        D = 2 if self.bidirectional else 1
        n = x.shape[1] if packed is None else packed[0][0]
        if hx is None:
            hx = em.zeros((self.num_layers * D, n, self.hidden_size), dtype=x.dtype, device=x.device)
        else:
            if not batched:
                if hx.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D "
                                       "tensor")
                hx = hx.unsqueeze(1)
            self._check_hidden(hx, (self.num_layers * D, n, self.hidden_size))
            if packed is not None:
                hx = self._permute_hidden(hx, packed[2])
        out, finals = self._run(x, [hx[i] for i in range(hx.shape[0])], None if packed is None else packed[0])
        h_n = em.stack(finals, 0)
        if packed is not None:
            h_n = self._permute_hidden(h_n, packed[3])
        if not batched:
            h_n = h_n.squeeze(1)
        return self._finish_output(out, batched, packed), h_n


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    forward = RNN.forward


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        em = _api()
        x, batched, packed = self._prepare(input)
        D = 2 if self.bidirectional else 1
        n = x.shape[1] if packed is None else packed[0][0]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            h0 = em.zeros((self.num_layers * D, n, real_hidden), dtype=x.dtype, device=x.device)
            c0 = em.zeros((self.num_layers * D, n, self.hidden_size), dtype=x.dtype, device=x.device)
        else:
            h0, c0 = hx
            if not batched:
                if h0.dim() != 2 or c0.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx and cx should also be 2-D but got "
                                       f"({h0.dim()}-D, {c0.dim()}-D) tensors")
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_hidden(h0, (self.num_layers * D, n, real_hidden), "Expected hidden[0] size {}, got {}")
            self._check_hidden(c0, (self.num_layers * D, n, self.hidden_size), "Expected hidden[1] size {}, got {}")
            if packed is not None:
                h0, c0 = self._permute_hidden(h0, packed[2]), self._permute_hidden(c0, packed[2])
        out, finals = self._run(x, [(h0[i], c0[i]) for i in range(h0.shape[0])],
                                None if packed is None else packed[0])
        h_n = em.stack([s[0] for s in finals], 0)
        c_n = em.stack([s[1] for s in finals], 0)
        if packed is not None:
            h_n, c_n = self._permute_hidden(h_n, packed[3]), self._permute_hidden(c_n, packed[3])
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish_output(out, batched, packed), (h_n, c_n)


class RNNCellBase(Module):
    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        from ... import empty
        fk = dict(device=device, dtype=dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **fk))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **fk))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **fk))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **fk))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prep(self, input, hx, name):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = _api().zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
        elif not batched:
            hx = hx.unsqueeze(0)
        return input, hx, batched

    def _check_cell_args(self, mode, input, hiddens):
        """torch's cell kernels validate input_size / batch / hidden_size with their own messages;
        run the same checks so a bad call fails with them instead of a matmul shape error."""
        from ..._rnn_functions import _check_cell
        _check_cell(type(self).__name__, mode, input, hiddens, self.weight_ih, self.weight_hh)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, hx, batched = self._prep(input, hx, "RNNCell")
        self._check_cell_args("RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH", input, (hx,))
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        if self.nonlinearity == "tanh":
            ret = _rnn_tanh_cell(gi, hx, self.weight_hh, self.bias_hh)
        elif self.nonlinearity == "relu":
            ret = _rnn_relu_cell(gi, hx, self.weight_hh, self.bias_hh)
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return ret if batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = _api().zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            hx = (z, z)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check_cell_args("LSTM", input, tuple(hx))
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        h, c = _lstm_cell(gi, hx, self.weight_hh, self.bias_hh)
        if not batched:
            h, c = h.squeeze(0), c.squeeze(0)
        return h, c


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, batched = self._prep(input, hx, "GRUCell")
        self._check_cell_args("GRU", input, (hx,))
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        ret = _gru_cell(gi, hx, self.weight_hh, self.bias_hh)
        return ret if batched else ret.squeeze(0)

