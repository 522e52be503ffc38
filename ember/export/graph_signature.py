"""What the inputs and outputs of an exported graph mean (``torch.export.graph_signature``).

An exported graph is a pure function of *all* the state it reads: parameters, buffers and
constant tensors are lifted to placeholders ahead of the user's inputs, and writes to buffers
(BatchNorm's running statistics in training mode) come back as extra outputs ahead of the
user's outputs. The signature records, per placeholder and per output, which is which and
what it stands for (the module's fully qualified name), so ``ExportedProgram.module()`` can
feed the state in and write the mutations back."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["InputKind", "OutputKind", "TensorArgument", "ConstantArgument", "SymIntArgument", "InputSpec",
           "OutputSpec", "ExportGraphSignature", "ExportBackwardSignature"]


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()
    CUSTOM_OBJ = enum.auto()
    TOKEN = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()
    LOSS_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()
    GRADIENT_TO_PARAMETER = enum.auto()
    GRADIENT_TO_USER_INPUT = enum.auto()
    USER_INPUT_MUTATION = enum.auto()
    TOKEN = enum.auto()
    PARAMETER_MUTATION = enum.auto()


@dataclass(frozen=True)
class TensorArgument:
    name: str


@dataclass(frozen=True)
class SymIntArgument:
    name: str


@dataclass(frozen=True)
class ConstantArgument:
    name: str
    value: Any


@dataclass
class InputSpec:
    kind: InputKind
    arg: Any
    target: Optional[str]
    persistent: Optional[bool] = None


@dataclass
class OutputSpec:
    kind: OutputKind
    arg: Any
    target: Optional[str]


@dataclass
class ExportBackwardSignature:
    """The gradient outputs of a joint (forward + backward) graph: output name -> parameter or
    user input it is the gradient of, and the loss output's name (torch's record; ember's
    exported programs are forward-only, so none of them carries one)."""
    gradients_to_parameters: Dict[str, str]
    gradients_to_user_inputs: Dict[str, str]
    loss_output: str


@dataclass
class ExportGraphSignature:
    input_specs: List[InputSpec] = field(default_factory=list)
    output_specs: List[OutputSpec] = field(default_factory=list)

    def _inputs(self, kind):
        return [s.target for s in self.input_specs if s.kind == kind]

    @property
    def parameters(self) -> List[str]:
        return self._inputs(InputKind.PARAMETER)

    @property
    def buffers(self) -> List[str]:
        return self._inputs(InputKind.BUFFER)

    @property
    def non_persistent_buffers(self) -> List[str]:
        return [s.target for s in self.input_specs if s.kind == InputKind.BUFFER and s.persistent is False]

    @property
    def lifted_tensor_constants(self) -> List[str]:
        return self._inputs(InputKind.CONSTANT_TENSOR)

    @property
    def user_inputs(self) -> List[Any]:
        return [s.arg.name if isinstance(s.arg, TensorArgument) else s.arg.value
                for s in self.input_specs if s.kind == InputKind.USER_INPUT]

    @property
    def user_outputs(self) -> List[Any]:
        return [s.arg.name if isinstance(s.arg, TensorArgument) else s.arg.value
                for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT]

    @property
    def inputs_to_parameters(self) -> Dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self) -> Dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def inputs_to_lifted_tensor_constants(self) -> Dict[str, str]:
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.CONSTANT_TENSOR}

    @property
    def buffers_to_mutate(self) -> Dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self) -> Dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION}

    def __str__(self):
        lines = ["# inputs"]
        for s in self.input_specs:
            extra = ""
            if s.kind != InputKind.USER_INPUT:
                extra = f" target={s.target!r}"
                if s.kind == InputKind.BUFFER:
                    extra += f" persistent={s.persistent}"
            name = s.arg.name
            lines.append(f"{name}: {s.kind.name}{extra}")
        lines.append("")
        lines.append("# outputs")
        for s in self.output_specs:
            name = s.arg.name if not isinstance(s.arg, ConstantArgument) else repr(s.arg.value)
            extra = f" target={s.target!r}" if s.target is not None else ""
            lines.append(f"{name}: {s.kind.name}{extra}")
        return "\n".join(lines)
