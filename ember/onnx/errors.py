"""Errors of ``ember.onnx`` (torch.onnx's names)."""
from __future__ import annotations


class OnnxExporterError(RuntimeError):
    """The export could not produce an ONNX model."""


class UnsupportedOperatorError(OnnxExporterError, NotImplementedError):
    """An ember op of the exported graph has no ONNX translation (also a ``NotImplementedError``:
    the op is valid, this exporter just does not cover it)."""
