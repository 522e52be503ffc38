"""``ember.onnx``: export a model to an ONNX file (torch.onnx's API).

``ember.onnx.export(model, args, "model.onnx", dynamic_shapes=...)`` captures the model with
``ember.export.export`` and translates each op of the graph to ONNX nodes (``_ops_*.py``)
through the ``onnx`` package (``onnx.helper``: the ModelProto schema, ``onnx.checker``). onnx
is imported only when ``export`` is called, so ``import ember`` never needs it.

Also here, as in torch.onnx: ``ExportableModule`` (a module carrying its example inputs),
``InputObserver`` (inputs and dynamic shapes learnt from real calls) and the TorchScript-era
names (``_legacy``: JitScalarType, is_in_onnx_export, custom-symbolic registry...)."""
from .errors import OnnxExporterError, UnsupportedOperatorError
from ._exporter import TrainingMode, export
from ._program import ONNXProgram
from ._exportable import ExportableModule
from ._input_observer import InputObserver
from ._legacy import (JitScalarType, OperatorExportTypes, TensorProtoDataType, is_in_onnx_export, producer_name,
                      producer_version, register_custom_op_symbolic, select_model_mode_for_export,
                      unregister_custom_op_symbolic)

__all__ = ["export", "ONNXProgram", "TrainingMode", "OnnxExporterError", "UnsupportedOperatorError",
           "ExportableModule", "InputObserver", "JitScalarType", "OperatorExportTypes", "TensorProtoDataType",
           "is_in_onnx_export", "producer_name", "producer_version", "register_custom_op_symbolic",
           "select_model_mode_for_export", "unregister_custom_op_symbolic"]
