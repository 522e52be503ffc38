"""Quant/DeQuant stubs: placeholders marking where a model's float region starts and ends
(before ``convert`` they pass tensors through, as torch's)."""
from __future__ import annotations

from ... import nn


class _Stub(nn.Module):
    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantStub(_Stub):
    """Where the quantized region starts (``convert`` turns it into a Quantize module)."""


class DeQuantStub(_Stub):
    """Where it ends (``convert``: a DeQuantize module)."""


class QuantWrapper(nn.Module):
    """``quant -> module -> dequant``."""

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X):
        return self.dequant(self.module(self.quant(X)))
