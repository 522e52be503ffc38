"""``ember.onnx.ExportableModule``: a module that carries its own export recipe.

Subclasses implement ``example_arguments()`` (``(args, kwargs or None)``) and may override
``input_names()`` / ``output_names()`` / ``dynamic_shapes()`` (default None); then
``module.to_onnx(**options)`` -- or ``ember.onnx.export(module)`` with no inputs -- exports it
without the caller repeating those, as torch.onnx.ExportableModule."""
from __future__ import annotations

import abc

from ..nn.modules.module import Module

__all__ = ["ExportableModule"]


class ExportableModule(Module, abc.ABC):
    """See the module docstring."""

    @abc.abstractmethod
    def example_arguments(self):
        """``(args tuple, kwargs dict or None)`` to export ``forward`` with."""
        raise NotImplementedError

    def dynamic_shapes(self):
        """The ``dynamic_shapes`` argument of the export (None: all static)."""
        return None

    def input_names(self):
        """Names of the ONNX graph's inputs (None: generated)."""
        return None

    def output_names(self):
        """Names of the ONNX graph's outputs (None: generated)."""
        return None

    def to_onnx(self, **kwargs):
        """``ember.onnx.export(self, **kwargs)`` with this module's example inputs and names."""
        from ._exporter import export
        return export(self, **kwargs)
