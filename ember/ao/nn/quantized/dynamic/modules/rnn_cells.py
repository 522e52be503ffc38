"""Dynamically quantized recurrent cells (``ember.ao.nn.quantized.dynamic.LSTMCell`` / ``GRUCell`` /
``RNNCell``): one step, float in, float out, int8 (or float16) weights kept as torch's packed
``_packed_weight_ih`` / ``_packed_weight_hh`` (state_dict keys of the same names)."""
from __future__ import annotations

import ember
from ember import nn
from . import _recurrence as R
from ._rnn_common import _check_dtype, _float_input, _observe_and_quantize, _prepare_weight, _weight_observer_ctor


class PackedLinearWeight:
    """A cell's packed (weight, bias) pair (torch's ``LinearPackedParamsBase`` script object)."""

    __slots__ = ("weight", "bias")

    def __init__(self, weight, bias):
        self.weight, self.bias = weight, bias

    def as_tuple(self):
        return (self.weight, self.bias)

    @classmethod
    def from_saved(cls, obj):
        return obj if isinstance(obj, cls) else cls(*obj)

    def __getstate__(self):
        return ((self.weight, self.bias),)

    def __setstate__(self, state):
        self.weight, self.bias = state[0]

    def __repr__(self):
        return f"PackedLinearWeight(weight={tuple(self.weight.shape)}, dtype={self.weight.dtype})"



class RNNCellBase(nn.Module):
    """Shared by the dynamic quantized cells: one packed (weight, bias) per product."""

    def __init__(self, input_size, hidden_size, bias=True, num_chunks=4, dtype=None):
        super().__init__()
        dtype = ember.qint8 if dtype is None else dtype
        _check_dtype(dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_dtype = dtype
        if bias:
            self.bias_ih = ember.randn(num_chunks * hidden_size)
            self.bias_hh = ember.randn(num_chunks * hidden_size)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        w_ih = _prepare_weight(ember.randn(num_chunks * hidden_size, input_size), dtype, 1.0)
        w_hh = _prepare_weight(ember.randn(num_chunks * hidden_size, hidden_size), dtype, 1.0)
        self._packed_weight_ih = PackedLinearWeight(w_ih, self.bias_ih)
        self._packed_weight_hh = PackedLinearWeight(w_hh, self.bias_hh)

    def _get_name(self):
        return "DynamicQuantizedRNNBase"

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _params(self):
        ih, hh = self._packed_weight_ih, self._packed_weight_hh
        dtype = ember.qint8 if ih.weight.dtype is ember.qint8 else ember.float16
        return R.CellParamsDynamic(ih.weight, hh.weight, ih.bias, hh.bias, True, dtype)

    def _check_input(self, x):
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]}, expected {self.input_size}")

    def _check_hidden(self, x, hx, label=""):
        if x.shape[0] != hx.shape[0]:
            raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{label} batch size "
                               f"{hx.shape[0]}")
        if hx.shape[1] != self.hidden_size:
            raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {hx.shape[1]}, expected "
                               f"{self.hidden_size}")

    def _zeros(self, x):
        return ember.zeros(x.shape[0], self.hidden_size, dtype=x.dtype)

    def _weight_bias(self):
        ih, hh = self._packed_weight_ih, self._packed_weight_hh
        return {"weight": {"weight_ih": ih.weight, "weight_hh": hh.weight},
                "bias": {"bias_ih": ih.bias, "bias_hh": hh.bias}}

    def get_weight(self):
        return self._weight_bias()["weight"]

    def get_bias(self):
        return self._weight_bias()["bias"]

    def set_weight_bias(self, weight_bias_dict):
        w, b = weight_bias_dict["weight"], weight_bias_dict["bias"]
        self._packed_weight_ih = PackedLinearWeight(w["weight_ih"], b["bias_ih"])
        self._packed_weight_hh = PackedLinearWeight(w["weight_hh"], b["bias_hh"])

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "_packed_weight_ih"] = self._packed_weight_ih.as_tuple()
        destination[prefix + "_packed_weight_hh"] = self._packed_weight_hh.as_tuple()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        for key in ("_packed_weight_ih", "_packed_weight_hh"):
            if prefix + key in state_dict:
                setattr(self, key, PackedLinearWeight.from_saved(state_dict[prefix + key]))
            elif strict:
                missing_keys.append(prefix + key)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) not in (nn.LSTMCell, nn.GRUCell, nn.RNNCell):
            raise AssertionError("nn.quantized.dynamic.RNNCellBase.from_float only works for nn.LSTMCell, "
                                 "nn.GRUCell and nn.RNNCell")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        ctor = _weight_observer_ctor(mod)
        dtype = ctor().dtype
        _check_dtype(dtype)
        if type(mod) is nn.LSTMCell:
            q = LSTMCell(mod.input_size, mod.hidden_size, bias=mod.bias, dtype=dtype)
        elif type(mod) is nn.GRUCell:
            q = GRUCell(mod.input_size, mod.hidden_size, bias=mod.bias, dtype=dtype)
        else:
            q = RNNCell(mod.input_size, mod.hidden_size, bias=mod.bias, nonlinearity=mod.nonlinearity, dtype=dtype)
        if not mod.bias:
            raise AssertionError("mod.bias must be True")
        q._packed_weight_ih = PackedLinearWeight(_observe_and_quantize(mod.weight_ih, dtype, ctor),
                                                 mod.bias_ih.detach().clone())
        q._packed_weight_hh = PackedLinearWeight(_observe_and_quantize(mod.weight_hh, dtype, ctor),
                                                 mod.bias_hh.detach().clone())
        return q

    @classmethod
    def from_reference(cls, ref_mod):
        raise NotImplementedError("ember.quantization: dynamic RNN cell from_reference is not supported")


class RNNCell(RNNCellBase):
    """``DynamicQuantizedRNNCell``: ``h' = act(W_ih x + b_ih + W_hh h + b_hh)``, act tanh or relu."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def _get_name(self):
        return "DynamicQuantizedRNNCell"

    def forward(self, input, hx=None):
        self._check_input(input)
        hx = self._zeros(input) if hx is None else hx
        self._check_hidden(input, hx)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        p = self._params()
        x = _float_input(input, self._get_name())
        return ember.tensor(R.rnn_step(p.linear_ih(x), _float_input(hx, self._get_name()), p, self.nonlinearity))


class LSTMCell(RNNCellBase):
    """``DynamicQuantizedLSTMCell``: returns ``(h', c')``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, num_chunks=4, **kwargs)

    def _get_name(self):
        return "DynamicQuantizedLSTMCell"

    def forward(self, input, hx=None):
        self._check_input(input)
        if hx is None:
            hx = (self._zeros(input), self._zeros(input))
        self._check_hidden(input, hx[0], "[0]")
        self._check_hidden(input, hx[1], "[1]")
        p = self._params()
        x = _float_input(input, self._get_name())
        h, c = R.lstm_step(p.linear_ih(x), _float_input(hx[0], self._get_name()),
                           _float_input(hx[1], self._get_name()), p)
        return ember.tensor(h), ember.tensor(c)


class GRUCell(RNNCellBase):
    """``DynamicQuantizedGRUCell``: returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def _get_name(self):
        return "DynamicQuantizedGRUCell"

    def forward(self, input, hx=None):
        self._check_input(input)
        hx = self._zeros(input) if hx is None else hx
        self._check_hidden(input, hx)
        p = self._params()
        x = _float_input(input, self._get_name())
        return ember.tensor(R.gru_step(p.linear_ih(x), _float_input(hx, self._get_name()), p))
