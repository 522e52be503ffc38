"""``ember.onnx``: export a model to an ONNX file (torch.onnx's API).

``ember.onnx.export(model, args, "model.onnx", dynamic_shapes=...)`` captures the model with
``ember.export.export`` and translates each op of the graph to ONNX nodes (``_ops_*.py``)
through the ``onnx`` package (``onnx.helper``: the ModelProto schema, ``onnx.checker``). onnx
is imported only when ``export`` is called, so ``import ember`` never needs it."""
from .errors import OnnxExporterError, UnsupportedOperatorError
from ._exporter import TrainingMode, export
from ._program import ONNXProgram

__all__ = ["export", "ONNXProgram", "TrainingMode", "OnnxExporterError", "UnsupportedOperatorError"]
