"""``ember.export``: ahead-of-time capture of a module call into one functional graph
(``torch.export``). See ``_trace.py`` for the pipeline, ``exported_program.py`` for what comes
back, ``dynamic_shapes.py`` for ``Dim`` and ``serialize.py`` for ``save``/``load``."""
from .dynamic_shapes import Constraint, Dim, ValueRange, dims
from .errors import ConstraintViolationError, UserError
from .exported_program import ExportedProgram
from .graph_signature import (ConstantArgument, ExportBackwardSignature, ExportGraphSignature, InputKind, InputSpec,
                              OutputKind, OutputSpec, TensorArgument)
from ._trace import export
from .serialize import DEFAULT_PICKLE_PROTOCOL, load, save
from .unflatten import FlatArgsAdapter, InterpreterModule, UnflattenedModule, unflatten
from .pytree_types import register_dataclass
from .decomp_utils import CustomDecompTable, default_decompositions
from .shapes_collection import AdditionalInputs, ShapesCollection
from .draft_export import draft_export
from .exported_program import ModuleCallEntry, ModuleCallSignature

__all__ = ["export", "save", "load", "Dim", "dims", "ExportedProgram", "ExportGraphSignature", "InputKind",
           "OutputKind", "InputSpec", "OutputSpec", "TensorArgument", "ConstantArgument", "ValueRange",
           "UserError", "ConstraintViolationError", "unflatten", "FlatArgsAdapter", "UnflattenedModule", "InterpreterModule",
           "ModuleCallEntry", "ModuleCallSignature", "register_dataclass",
           "default_decompositions", "CustomDecompTable",
           "AdditionalInputs", "ShapesCollection", "draft_export",
           "ExportBackwardSignature", "Constraint", "DEFAULT_PICKLE_PROTOCOL"]

