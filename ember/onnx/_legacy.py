"""torch.onnx's names from its TorchScript-exporter era that code still imports:
``JitScalarType`` / ``TensorProtoDataType`` / ``OperatorExportTypes`` (the dtype <-> ONNX type
tables), ``producer_name`` / ``producer_version``, ``is_in_onnx_export`` (True while
``ember.onnx.export`` runs, so modules can take an export-friendly path), the deprecated
``select_model_mode_for_export``, and ``register_custom_op_symbolic`` /
``unregister_custom_op_symbolic``.

About custom symbolics: PyTorch's default exporter (``dynamo=True``) does not consult them --
they are TorchScript-graph functions -- and ember's exporter is of that kind, so ember keeps
the registry (validated as PyTorch's, listed by ``registered_custom_op_symbolics``) without
applying it: a model using an op ember cannot translate still fails with
``UnsupportedOperatorError``, never with a silently different graph."""
from __future__ import annotations

import contextlib
import enum
import re
import threading
from typing import Callable

from .errors import OnnxExporterError

__all__ = ["JitScalarType", "TensorProtoDataType", "OperatorExportTypes", "producer_name", "producer_version",
           "is_in_onnx_export", "select_model_mode_for_export", "register_custom_op_symbolic",
           "unregister_custom_op_symbolic"]

producer_name = "ember"


def _producer_version() -> str:
    try:
        from ..version import __version__
        return str(__version__)
    except Exception:  # noqa: BLE001 - no package metadata (a source checkout)
        return ""


producer_version = _producer_version()


class TensorProtoDataType(enum.IntEnum):
    """ONNX's TensorProto.DataType numbers."""
    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20

    def __repr__(self):
        return f"<TensorProtoDataType.{self.name}: {self.value}>"

    def __str__(self):
        return f"TensorProtoDataType.{self.name}"


class OperatorExportTypes(enum.IntEnum):
    """How the legacy exporter treated ops without an ONNX symbolic (ember's exporter: ONNX)."""
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3

    def __repr__(self):
        return f"<OperatorExportTypes.{self.name}: {self.value}>"

    def __str__(self):
        return f"OperatorExportTypes.{self.name}"


# member -> (c10 scalar name, C++ type name, ember dtype name, ONNX type)
_TABLE = {
    "UINT8": ("Byte", "uint8_t", "uint8", "UINT8"), "INT8": ("Char", "int8_t", "int8", "INT8"),
    "INT16": ("Short", "int16_t", "int16", "INT16"), "INT": ("Int", "int", "int32", "INT32"),
    "INT64": ("Long", "int64_t", "int64", "INT64"), "HALF": ("Half", "half", "float16", "FLOAT16"),
    "FLOAT": ("Float", "float", "float32", "FLOAT"), "DOUBLE": ("Double", "double", "float64", "DOUBLE"),
    "COMPLEX32": ("ComplexHalf", "complex32", "complex32", "UNDEFINED"),
    "COMPLEX64": ("ComplexFloat", "complex64", "complex64", "COMPLEX64"),
    "COMPLEX128": ("ComplexDouble", "complex128", "complex128", "COMPLEX128"),
    "BOOL": ("Bool", "bool", "bool", "BOOL"), "QINT8": ("QInt8", "qint8", "qint8", "INT8"),
    "QUINT8": ("QUInt8", "quint8", "quint8", "UINT8"), "QINT32": ("QInt32", "qint32", "qint32", "INT32"),
    "BFLOAT16": ("BFloat16", "bfloat16", "bfloat16", "BFLOAT16"),
    "FLOAT8E5M2": ("Float8E5M2", "float8_e5m2", "float8_e5m2", "FLOAT8E5M2"),
    "FLOAT8E4M3FN": ("Float8E4M3FN", "float8_e4m3fn", "float8_e4m3fn", "FLOAT8E4M3FN"),
    "FLOAT8E5M2FNUZ": ("Float8E5M2FNUZ", "float8_e5m2fnuz", "float8_e5m2fnuz", "FLOAT8E5M2FNUZ"),
    "FLOAT8E4M3FNUZ": ("Float8E4M3FNUZ", "float8_e4m3fnuz", "float8_e4m3fnuz", "FLOAT8E4M3FNUZ"),
    "UNDEFINED": ("Undefined", None, None, "UNDEFINED"),
}


class JitScalarType(enum.IntEnum):
    """A dtype as the legacy exporter numbered it (c10's ScalarType order), with its
    conversions: ``from_dtype`` / ``from_value`` / ``from_onnx_type`` and ``dtype()`` /
    ``onnx_type()`` / ``scalar_name()`` / ``torch_name()``."""
    UINT8 = 0
    INT8 = 1
    INT16 = 2
    INT = 3
    INT64 = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    FLOAT8E5M2 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E5M2FNUZ = 18
    FLOAT8E4M3FNUZ = 19
    UNDEFINED = 20

    @classmethod
    def from_dtype(cls, dtype):
        import ember
        if isinstance(dtype, ember.dtype):
            for member in cls:
                name = _TABLE[member.name][2]
                try:
                    found = getattr(ember, name) if name is not None else None
                except (AttributeError, TypeError):    # a dtype ember refuses (complex32)
                    continue
                if found == dtype:
                    return member
        raise OnnxExporterError(f"Unknown dtype: {dtype}")

    @classmethod
    def from_onnx_type(cls, onnx_type):
        # the last member mapping to it wins (INT8 -> QINT8, UINT8 -> QUINT8), as PyTorch's table
        for member in reversed(cls):
            if int(TensorProtoDataType[_TABLE[member.name][3]]) == int(onnx_type) and member != cls.UNDEFINED:
                return member
        raise OnnxExporterError(f"Unknown onnx_type: {onnx_type}")

    @classmethod
    def from_value(cls, value, default=None):
        """The type of a tensor (``default`` for None)."""
        from ..tensor import Tensor
        if value is None and default is not None:
            return default
        if isinstance(value, Tensor):
            return cls.from_dtype(value.dtype)
        raise OnnxExporterError("value must be either torch._C.Value or torch.Tensor objects.")

    def scalar_name(self) -> str:
        return _TABLE[self.name][0]

    def torch_name(self) -> str:
        name = _TABLE[self.name][1]
        if name is None:
            raise KeyError(self)
        return name

    def dtype(self):
        import ember
        name = _TABLE[self.name][2]
        if name is None:
            raise KeyError(self)
        return getattr(ember, name)

    def onnx_type(self) -> TensorProtoDataType:
        return TensorProtoDataType[_TABLE[self.name][3]]

    def onnx_compatible(self) -> bool:
        return self.onnx_type() != TensorProtoDataType.UNDEFINED


# ---- "are we exporting?" ----------------------------------------------------------------
_state = threading.local()


def is_in_onnx_export() -> bool:
    """Whether an ``ember.onnx.export`` call is running (in this thread)."""
    return getattr(_state, "depth", 0) > 0


# traced by ember.dynamo as its value at capture time (PyTorch's dynamo folds it the same way),
# so a forward branching on it is captured along the branch the export takes
is_in_onnx_export._ember_assume_constant = True


@contextlib.contextmanager
def _exporting():
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


@contextlib.contextmanager
def select_model_mode_for_export(model, mode):
    """Deprecated (set the mode before exporting; PyTorch marks it so without warning at run
    time): within the block ``model`` is in ``mode``
    (TRAINING: train, EVAL: eval, PRESERVE: as it is); its mode comes back on exit."""
    from ._exporter import TrainingMode
    if not isinstance(mode, TrainingMode):
        raise TypeError(f"'mode' should be a torch.onnx.TrainingMode enum, but got '{type(mode)}'.")
    has_mode = hasattr(model, "training")
    was_training = model.training if has_mode else False
    if has_mode:
        if mode == TrainingMode.TRAINING:
            model.train(True)
        elif mode == TrainingMode.EVAL:
            model.train(False)
    try:
        yield
    finally:
        if has_mode and mode != TrainingMode.PRESERVE:
            model.train(was_training)


# ---- custom symbolics (kept, not applied: see the module docstring) ------------------------
_CUSTOM_SYMBOLICS: dict = {}     # (qualified name, opset) -> symbolic function
_NAME_FORMAT = re.compile(r"^[a-zA-Z0-9-_]+::[a-zA-Z-_]+[a-zA-Z0-9-_]*$")


def _checked_name(symbolic_name: str) -> str:
    if symbolic_name.startswith("::"):
        symbolic_name = f"aten{symbolic_name}"
    if not _NAME_FORMAT.match(symbolic_name):
        raise OnnxExporterError(f"Failed to register operator {symbolic_name}. The symbolic name must match the "
                                f"format domain::name, and should start with a letter and contain only "
                                f"alphanumeric characters")
    domain = symbolic_name.split("::", 1)[0]
    if domain == "onnx":
        raise ValueError(f"Failed to register operator {symbolic_name}. {domain} domain cannot be modified.")
    return symbolic_name


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable, opset_version: int) -> None:
    """Record a TorchScript-exporter symbolic for ``domain::op`` at ``opset_version`` (kept
    and listed; ember's exporter, like PyTorch's dynamo exporter, does not apply it)."""
    _CUSTOM_SYMBOLICS[(_checked_name(symbolic_name), opset_version)] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Forget a symbolic recorded by ``register_custom_op_symbolic`` (none recorded: nothing)."""
    _CUSTOM_SYMBOLICS.pop((_checked_name(symbolic_name), opset_version), None)


def registered_custom_op_symbolics() -> dict:
    """``{(name, opset): symbolic_fn}`` of the recorded custom symbolics."""
    return dict(_CUSTOM_SYMBOLICS)
