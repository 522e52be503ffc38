"""Dynamically quantized recurrent modules (``ember.ao.nn.quantized.dynamic.LSTM`` / ``GRU``; the
cells are in rnn_cells.py): float in, float out, int8 (or float16) weights.

The layout is torch's so that models print, save and load alike: a sequence module keeps one
``PackedParameter`` per layer and direction in ``_all_weight_values`` (state_dict keys
``_all_weight_values.<k>.param``), a cell keeps ``_packed_weight_ih`` / ``_packed_weight_hh``.
The arithmetic is in ``_recurrence`` (where torch quantizes the activations, and why);
packed (variable-length) sequences run there too (``run_packed``).
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

import ember
from ember import nn
from . import _recurrence as R
from ._rnn_common import _check_dtype, _float_input, _observe_and_quantize, _prepare_weight, _weight_observer_ctor
from .rnn_cells import GRUCell, LSTMCell, PackedLinearWeight, RNNCell, RNNCellBase  # noqa: F401  (torch's module path)

_MODES = {"LSTM": 4, "GRU": 3}


class PackedParameter(nn.Module):
    """Holds one ``CellParamsDynamic`` as ``param``. Its state_dict entry (``<prefix>param``, torch's
    key) is the parameters' tuple form -- torch stores a script object there, ember a tuple of
    tensors so that ``ember.save`` can write it; loading takes either."""

    def __init__(self, param):
        super().__init__()
        self.param = param

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "param"] = self.param.as_tuple()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        if prefix + "param" in state_dict:
            self.param = R.CellParamsDynamic.from_saved(state_dict[prefix + "param"])
        elif strict:
            missing_keys.append(prefix + "param")


class RNNBase(nn.Module):
    """Shared by the dynamic quantized LSTM and GRU (torch's ``RNNBase``, version 2)."""

    _version = 2

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):
        super().__init__()
        dtype = ember.qint8 if dtype is None else dtype
        _check_dtype(dtype)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.dtype = dtype
        self.version = 2
        self.training = False
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if mode not in _MODES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate = _MODES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        values = []
        for layer in range(num_layers):
            for _ in range(dirs):
                in_size = input_size if layer == 0 else hidden_size * dirs
                w_ih = _prepare_weight(ember.randn(gate, in_size), dtype, 0.1)
                w_hh = _prepare_weight(ember.randn(gate, hidden_size), dtype, 0.1)
                values.append(PackedParameter(R.CellParamsDynamic(w_ih, w_hh, ember.randn(gate), ember.randn(gate),
                                                                  True, dtype)))
        self._all_weight_values = nn.ModuleList(values)

    def _get_name(self):
        return "DynamicQuantizedRNN"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def __repr__(self):
        # the packed weights are an implementation detail: torch leaves them out of the repr
        children = [f"({k}): " + nn.modules.module._addindent(repr(m), 2) for k, m in self._modules.items()
                    if not isinstance(m, (PackedParameter, nn.ModuleList))]
        extra = self.extra_repr()
        lines = (extra.split("\n") if extra else []) + children
        if not lines:
            return self._get_name() + "()"
        if len(lines) == 1 and not children:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    # -- weights ---------------------------------------------------------------------
    def _keys(self):
        dirs = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            for d in range(dirs):
                yield layer * dirs + d, f"l{layer}{'_reverse' if d else ''}"

    def _weight_bias(self):
        out = {"weight": {}, "bias": {}}
        for k, suffix in self._keys():
            p = self._all_weight_values[k].param
            out["weight"][f"weight_ih_{suffix}"] = p.w_ih
            out["weight"][f"weight_hh_{suffix}"] = p.w_hh
            out["bias"][f"bias_ih_{suffix}"] = p.b_ih
            out["bias"][f"bias_hh_{suffix}"] = p.b_hh
        return out

    def get_weight(self):
        return self._weight_bias()["weight"]

    def get_bias(self):
        return self._weight_bias()["bias"]

    def set_weight_bias(self, weight_bias_dict):
        values = []
        for _, suffix in self._keys():
            w_ih, w_hh = weight_bias_dict[f"weight_ih_{suffix}"], weight_bias_dict[f"weight_hh_{suffix}"]
            dtype = ember.qint8 if w_ih.dtype is ember.qint8 else ember.float16
            values.append(PackedParameter(R.CellParamsDynamic(
                w_ih, w_hh, weight_bias_dict[f"bias_ih_{suffix}"], weight_bias_dict[f"bias_hh_{suffix}"],
                self.version is None or self.version >= 2, dtype)))
        self._all_weight_values = nn.ModuleList(values)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        self.version = local_metadata.get("version", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys,
                                      error_msgs)

    # -- forward -----------------------------------------------------------------------
    def _expected_hidden(self, batch):
        return (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)

    def _check_input(self, x):
        if x.dim() != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {x.dim()}")
        if self.input_size != x.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{x.shape[-1]}")

    @staticmethod
    def _check_hidden(hx, expected, msg):
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def forward(self, input, hx=None):
        from ember.nn.utils.rnn import PackedSequence
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise NotImplementedError(f"ember.quantization: {self._get_name()} in training mode with dropout is "
                                      "not supported")
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        self._check_input(input)
        batch = input.shape[0] if self.batch_first else input.shape[1]
        states = self._initial_states(hx, batch)
        x = _float_input(input, self._get_name())
        if self.batch_first:
            x = x.transpose(1, 0, 2)
        params = [m.param for m in self._all_weight_values]
        out, h, c = R.run_sequence(self.mode, x, states, params, self.num_layers, self.bidirectional)
        if self.batch_first:
            out = out.transpose(1, 0, 2)
        return self._result(out, h, c)

    def _result(self, out, h, c, unsorted=None):
        if unsorted is not None:
            h = h[:, unsorted]
            c = None if c is None else c[:, unsorted]
        out = out if isinstance(out, ember.Tensor) else ember.tensor(np.ascontiguousarray(out))
        if self.mode == "LSTM":
            return out, (ember.tensor(np.ascontiguousarray(h)), ember.tensor(np.ascontiguousarray(c)))
        return out, ember.tensor(np.ascontiguousarray(h))

    def _forward_packed(self, input, hx):
        from ember.nn.utils.rnn import PackedSequence
        data, batch_sizes, sorted_indices, unsorted_indices = input
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if self.input_size != data.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{data.shape[-1]}")
        sizes = np.asarray(batch_sizes.detach()._data, np.int64)
        perm = None if sorted_indices is None else np.asarray(sorted_indices.detach()._data, np.int64)
        states = self._initial_states(hx, int(sizes[0]), perm)
        params = [m.param for m in self._all_weight_values]
        out, h, c = R.run_packed(self.mode, _float_input(data, self._get_name()), sizes, states, params,
                                 self.num_layers, self.bidirectional)
        unsorted = None if unsorted_indices is None else np.asarray(unsorted_indices.detach()._data, np.int64)
        out, hidden = self._result(out, h, c, unsorted)
        return PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices), hidden

    def _initial_states(self, hx, batch, perm=None):
        """numpy (L*D, B, H) initial state(s), checked as torch checks them (after the packed
        sequence's sort permutation, which torch applies first)."""
        expected = self._expected_hidden(batch)
        if hx is None:
            zeros = np.zeros(expected, np.float32)
            return (zeros, zeros) if self.mode == "LSTM" else zeros
        if perm is not None:
            hx = tuple(h.index_select(1, ember.tensor(perm)) for h in hx) if self.mode == "LSTM" \
                else hx.index_select(1, ember.tensor(perm))
        if self.mode == "LSTM":
            self._check_hidden(hx[0], expected, "Expected hidden[0] size {}, got {}")
            self._check_hidden(hx[1], expected, "Expected hidden[1] size {}, got {}")
            return tuple(_float_input(h, self._get_name()) for h in hx)
        self._check_hidden(hx, expected, "Expected hidden size {}, got {}")
        return _float_input(hx, self._get_name())

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) not in (nn.LSTM, nn.GRU):
            raise AssertionError("nn.quantized.dynamic.RNNBase.from_float only works for nn.LSTM and nn.GRU")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        ctor = _weight_observer_ctor(mod)
        dtype = ctor().dtype
        _check_dtype(dtype)
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("ember.quantization: dynamic quantization of nn.LSTM with proj_size > 0 is "
                                      "not supported")
        qcls = LSTM if mod.mode == "LSTM" else GRU
        q = qcls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first, mod.dropout,
                 mod.bidirectional, dtype)
        if not mod.bias:
            raise AssertionError("mod.bias must be True")
        values = []
        for _, suffix in q._keys():
            w_ih, w_hh = getattr(mod, f"weight_ih_{suffix}"), getattr(mod, f"weight_hh_{suffix}")
            b_ih, b_hh = getattr(mod, f"bias_ih_{suffix}"), getattr(mod, f"bias_hh_{suffix}")
            values.append(PackedParameter(R.CellParamsDynamic(
                _observe_and_quantize(w_ih, dtype, ctor), _observe_and_quantize(w_hh, dtype, ctor),
                b_ih.detach().clone(), b_hh.detach().clone(), True, dtype)))
        q._all_weight_values = nn.ModuleList(values)
        return q

    @classmethod
    def from_reference(cls, ref_mod):
        raise NotImplementedError("ember.quantization: dynamic RNN from_reference is not supported")


class LSTM(RNNBase):
    """``DynamicQuantizedLSTM``: returns ``output, (h_n, c_n)`` as ``nn.LSTM``."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedLSTM"


class GRU(RNNBase):
    """``DynamicQuantizedGRU``: returns ``output, h_n`` as ``nn.GRU``."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedGRU"

