"""Quantizable LSTM: an LSTM built from observable pieces (two ``Linear`` gate projections,
``FloatFunctional`` adds and products, Sigmoid / Tanh modules) so *static* quantization can
observe every intermediate and ``convert`` can turn it into a quantized LSTM
(``ember.ao.nn.quantized.LSTM``) that runs on quantized tensors, as torch's
``torch.ao.nn.quantizable.LSTM``.

Flow (torch's)::

    custom = {"float_to_observed_custom_module_class": {nn.LSTM: quantizable.LSTM},
              "observed_to_quantized_custom_module_class": {quantizable.LSTM: quantized.LSTM}}
    prepared = prepare(model, prepare_custom_config_dict=custom); calibrate
    quantized = convert(prepared, convert_custom_config_dict=custom)
"""
from __future__ import annotations

import numbers
import warnings

import ember
from ember import nn
from ..quantized.modules.functional_modules import FloatFunctional

__all__ = ["LSTMCell", "LSTM"]


class LSTMCell(nn.Module):
    """One LSTM step: ``gates = igates(x) + hgates(h)`` split into input / forget / cell / output
    gates, ``c' = f * c + i * g``, ``h' = o * tanh(c')``; each product and sum a FloatFunctional."""

    _FLOAT_MODULE = nn.LSTMCell

    def __init__(self, input_dim, hidden_dim, bias=True, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        if split_gates:
            raise NotImplementedError("ember.quantization: quantizable LSTMCell(split_gates=True) is not supported")
        self.input_size = input_dim
        self.hidden_size = hidden_dim
        self.bias = bias
        self.split_gates = split_gates
        self.igates = nn.Linear(input_dim, 4 * hidden_dim, bias=bias)
        self.hgates = nn.Linear(hidden_dim, 4 * hidden_dim, bias=bias)
        self.gates = FloatFunctional()
        self.input_gate = nn.Sigmoid()
        self.forget_gate = nn.Sigmoid()
        self.cell_gate = nn.Tanh()
        self.output_gate = nn.Sigmoid()
        self.fgate_cx = FloatFunctional()
        self.igate_cgate = FloatFunctional()
        self.fgate_cx_igate_cgate = FloatFunctional()
        self.ogate_cy = FloatFunctional()
        self.initial_hidden_state_qparams = (1.0, 0)
        self.initial_cell_state_qparams = (1.0, 0)
        self.hidden_state_dtype = ember.quint8
        self.cell_state_dtype = ember.quint8

    def forward(self, x, hidden=None):
        if hidden is None or hidden[0] is None or hidden[1] is None:
            hidden = self.initialize_hidden(x.shape[0], x.is_quantized)
        hx, cx = hidden
        gates = self.gates.add(self.igates(x), self.hgates(hx))
        input_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, 1)
        input_gate = self.input_gate(input_gate)
        forget_gate = self.forget_gate(forget_gate)
        cell_gate = self.cell_gate(cell_gate)
        out_gate = self.output_gate(out_gate)
        fgate_cx = self.fgate_cx.mul(forget_gate, cx)
        igate_cgate = self.igate_cgate.mul(input_gate, cell_gate)
        cy = self.fgate_cx_igate_cgate.add(fgate_cx, igate_cgate)
        hy = self.ogate_cy.mul(out_gate, ember.tanh(cy))
        return hy, cy

    def initialize_hidden(self, batch_size, is_quantized=False):
        h, c = ember.zeros((batch_size, self.hidden_size)), ember.zeros((batch_size, self.hidden_size))
        if is_quantized:
            (h_scale, h_zp), (c_scale, c_zp) = self.initial_hidden_state_qparams, self.initial_cell_state_qparams
            h = ember.quantize_per_tensor(h, scale=h_scale, zero_point=h_zp, dtype=self.hidden_state_dtype)
            c = ember.quantize_per_tensor(c, scale=c_scale, zero_point=c_zp, dtype=self.cell_state_dtype)
        return h, c

    def _get_name(self):
        return "QuantizableLSTMCell"

    @classmethod
    def from_params(cls, wi, wh, bi=None, bh=None, split_gates=False):
        """A cell over the given gate weights (4*hidden x input, 4*hidden x hidden) and biases."""
        if (bi is None) != (bh is None):
            raise AssertionError("bi and bh must both be None or both have values")
        cell = cls(input_dim=wi.shape[1], hidden_dim=wh.shape[1], bias=bi is not None, split_gates=split_gates)
        cell.igates.weight = nn.Parameter(wi)
        cell.hgates.weight = nn.Parameter(wh)
        if bi is not None:
            cell.igates.bias = nn.Parameter(bi)
            cell.hgates.bias = nn.Parameter(bh)
        return cell

    @classmethod
    def from_float(cls, other, use_precomputed_fake_quant=False, split_gates=False):
        if type(other) is not cls._FLOAT_MODULE:
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig"):
            raise AssertionError("The float module must have 'qconfig'")
        observed = cls.from_params(other.weight_ih, other.weight_hh, other.bias_ih, other.bias_hh,
                                   split_gates=split_gates)
        observed.qconfig = other.qconfig
        observed.igates.qconfig = other.qconfig
        observed.hgates.qconfig = other.qconfig
        return observed


class _LSTMSingleLayer(nn.Module):
    """One direction of one layer: the cell run over the sequence (dim 0)."""

    def __init__(self, input_dim, hidden_dim, bias=True, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        self.cell = LSTMCell(input_dim, hidden_dim, bias=bias, split_gates=split_gates)

    def forward(self, x, hidden=None):
        result = []
        for i in range(x.shape[0]):
            hidden = self.cell(x[i], hidden)
            result.append(hidden[0])
        return ember.stack(result, 0), hidden

    @classmethod
    def from_params(cls, *args, **kwargs):
        cell = LSTMCell.from_params(*args, **kwargs)
        layer = cls(cell.input_size, cell.hidden_size, cell.bias, split_gates=cell.split_gates)
        layer.cell = cell
        return layer


class _LSTMLayer(nn.Module):
    """One layer, one or two directions (the backward one runs over the reversed sequence)."""

    def __init__(self, input_dim, hidden_dim, bias=True, batch_first=False, bidirectional=False, device=None,
                 dtype=None, *, split_gates=False):
        super().__init__()
        self.batch_first = batch_first
        self.bidirectional = bidirectional
        self.layer_fw = _LSTMSingleLayer(input_dim, hidden_dim, bias=bias, split_gates=split_gates)
        if bidirectional:
            self.layer_bw = _LSTMSingleLayer(input_dim, hidden_dim, bias=bias, split_gates=split_gates)

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        hx_fw, cx_fw = (None, None) if hidden is None else hidden
        hidden_bw = None
        if self.bidirectional:
            hx_bw = None if hx_fw is None else hx_fw[1]
            hx_fw = None if hx_fw is None else hx_fw[0]
            cx_bw = None if cx_fw is None else cx_fw[1]
            cx_fw = None if cx_fw is None else cx_fw[0]
            if hx_bw is not None and cx_bw is not None:
                hidden_bw = (hx_bw, cx_bw)
        hidden_fw = None if hx_fw is None and cx_fw is None else (hx_fw, cx_fw)
        result_fw, hidden_fw = self.layer_fw(x, hidden_fw)
        if self.bidirectional:
            result_bw, hidden_bw = self.layer_bw(x.flip(0), hidden_bw)
            result = ember.cat([result_fw, result_bw.flip(0)], result_fw.dim() - 1)
            h = ember.stack([hidden_fw[0], hidden_bw[0]], 0)
            c = ember.stack([hidden_fw[1], hidden_bw[1]], 0)
        else:
            result = result_fw
            h, c = hidden_fw
        if self.batch_first:
            result = result.transpose(0, 1)
        return result, (h, c)

    @classmethod
    def from_float(cls, other, layer_idx=0, qconfig=None, **kwargs):
        """Layer ``layer_idx`` of the float ``nn.LSTM`` ``other`` (its weights shared)."""
        if not hasattr(other, "qconfig") and qconfig is None:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        layer = cls(kwargs.get("input_size", other.input_size), kwargs.get("hidden_size", other.hidden_size),
                    kwargs.get("bias", other.bias), kwargs.get("batch_first", other.batch_first),
                    kwargs.get("bidirectional", other.bidirectional), split_gates=kwargs.get("split_gates", False))
        layer.qconfig = getattr(other, "qconfig", qconfig)

        def params(suffix):
            return (getattr(other, f"weight_ih_l{layer_idx}{suffix}"),
                    getattr(other, f"weight_hh_l{layer_idx}{suffix}"),
                    getattr(other, f"bias_ih_l{layer_idx}{suffix}", None),
                    getattr(other, f"bias_hh_l{layer_idx}{suffix}", None))

        layer.layer_fw = _LSTMSingleLayer.from_params(*params(""))
        if other.bidirectional:
            layer.layer_bw = _LSTMSingleLayer.from_params(*params("_reverse"))
        return layer


class LSTM(nn.Module):
    """A quantizable ``nn.LSTM`` (eval mode by default; dropout is ignored, as torch's)."""

    _FLOAT_MODULE = nn.LSTM

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, *, split_gates=False):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.training = False
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if dropout > 0:
            warnings.warn("dropout option for quantizable LSTM is ignored. If you are training, please, use nn.LSTM "
                          "version followed by `prepare` step.", stacklevel=2)
            if num_layers == 1:
                warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                              f"expects num_layers greater than 1, but got dropout={dropout} and "
                              f"num_layers={num_layers}", stacklevel=2)
        layers = [_LSTMLayer(input_size, hidden_size, bias, batch_first=False, bidirectional=bidirectional,
                             split_gates=split_gates)]
        layers += [_LSTMLayer(hidden_size, hidden_size, bias, batch_first=False, bidirectional=bidirectional,
                              split_gates=split_gates) for _ in range(1, num_layers)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x, hidden=None):
        if self.batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1]
        num_directions = 2 if self.bidirectional else 1
        if hidden is None:
            zeros = ember.zeros(num_directions, batch, self.hidden_size, dtype=ember.float32)
            if num_directions == 1:
                zeros = zeros.squeeze(0)
            if x.is_quantized:
                zeros = ember.quantize_per_tensor(zeros, scale=1.0, zero_point=0, dtype=x.dtype)
            hxcx = [(zeros, zeros) for _ in range(self.num_layers)]
        elif isinstance(hidden[0], ember.Tensor):
            hx = hidden[0].reshape(self.num_layers, num_directions, batch, self.hidden_size)
            cx = hidden[1].reshape(self.num_layers, num_directions, batch, self.hidden_size)
            hxcx = [(_squeeze0(hx[i]), _squeeze0(cx[i])) for i in range(self.num_layers)]
        else:
            hxcx = hidden
        hs, cs = [], []
        for idx, layer in enumerate(self.layers):
            x, (h, c) = layer(x, hxcx[idx])
            hs.append(h)
            cs.append(c)
        h, c = ember.stack(hs), ember.stack(cs)
        h = h.reshape(-1, h.shape[-2], h.shape[-1])
        c = c.reshape(-1, c.shape[-2], c.shape[-1])
        if self.batch_first:
            x = x.transpose(0, 1)
        return x, (h, c)

    def _get_name(self):
        return "QuantizableLSTM"

    @classmethod
    def from_float(cls, other, qconfig=None, split_gates=False):
        """The observed LSTM for a float ``nn.LSTM`` with a qconfig: its weights in gate Linears,
        prepared (observers attached; QAT-prepared when ``other`` is training)."""
        from ember.ao import quantization as Q
        if not isinstance(other, cls._FLOAT_MODULE):
            raise AssertionError(f"Expected module type {cls._FLOAT_MODULE}, got {type(other)}")
        if not hasattr(other, "qconfig") and not qconfig:
            raise AssertionError("other must have qconfig or qconfig must be provided")
        if getattr(other, "proj_size", 0):
            raise NotImplementedError("ember.quantization: quantizable LSTM with proj_size > 0 is not supported")
        observed = cls(other.input_size, other.hidden_size, other.num_layers, other.bias, other.batch_first,
                       other.dropout, other.bidirectional, split_gates=split_gates)
        observed.qconfig = getattr(other, "qconfig", qconfig)
        for idx in range(other.num_layers):
            observed.layers[idx] = _LSTMLayer.from_float(other, idx, qconfig, batch_first=False,
                                                         split_gates=split_gates)
        if other.training:
            observed.train()
            return Q.prepare_qat(observed, inplace=True)
        observed.eval()
        return Q.prepare(observed, inplace=True)

    @classmethod
    def from_observed(cls, other):
        raise NotImplementedError("It looks like you are trying to convert a non-quantizable LSTM module. Please, "
                                  "see the examples on quantizable LSTMs.")


def _squeeze0(t):
    return t.squeeze(0) if t.shape[0] == 1 else t
