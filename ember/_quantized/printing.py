"""``repr`` of a quantized tensor, character for character torch's (``torch.`` -> ``ember.``):
the dequantized values, then ``size``, ``dtype``, ``quantization_scheme`` and the scale and
zero point (per-channel: as tensors, and the axis), wrapped at the line width."""
from __future__ import annotations

from .. import _tensor_str as ts


def qtensor_repr(t):
    prefix = "tensor("
    indent = len(prefix)
    suffixes = ["size=" + str(tuple(int(s) for s in t.shape)), "dtype=" + ts.format_dtype(t.dtype.name),
                "quantization_scheme=" + repr(t.qscheme())]
    qp = t._qp
    if qp.per_channel:
        suffixes.append("scale=" + repr(t.q_per_channel_scales()))
        suffixes.append("zero_point=" + repr(t.q_per_channel_zero_points()))
        suffixes.append("axis=" + str(qp.axis))
    else:
        suffixes.append("scale=" + repr(float(qp.scale)))
        suffixes.append("zero_point=" + str(int(qp.zero_point)))
    body = ts.tensor_str(t.dequantize()._data, indent)
    return ts._join_suffixes(prefix + body, suffixes, indent, ts._OPTS)
