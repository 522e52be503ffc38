"""ember dtype <-> ONNX ``TensorProto`` element type.

Kept apart from the builder so the table is the single place that says which dtypes an
exported graph may carry (complex and quantized dtypes have no ONNX element type that
onnxruntime runs, so they raise)."""
from __future__ import annotations

from .errors import OnnxExporterError

_NAMES = {
    "float32": "FLOAT", "float64": "DOUBLE", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
    "int64": "INT64", "int32": "INT32", "int16": "INT16", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL",
}


def onnx_type(dtype) -> int:
    """The ``onnx.TensorProto`` enum value for an ember dtype."""
    from onnx import TensorProto
    name = getattr(dtype, "name", str(dtype).replace("ember.", ""))
    if name not in _NAMES:
        raise OnnxExporterError(f"ember.onnx.export: dtype {dtype} has no ONNX element type this exporter "
                                f"supports (supported: {', '.join(sorted(_NAMES))})")
    return getattr(TensorProto, _NAMES[name])


def is_float(dtype) -> bool:
    return bool(getattr(dtype, "is_floating_point", False))


def numpy_dtype(dtype):
    """numpy dtype of an ember dtype (``bfloat16`` through ml_dtypes, as ember stores it)."""
    import numpy as np
    name = getattr(dtype, "name", str(dtype).replace("ember.", ""))
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    if name not in _NAMES:
        onnx_type(dtype)    # raises the message above
    return np.dtype(name)
