"""Padding modules: thin wrappers over ``F.pad`` (PyTorch's names, ``padding`` tuples and reprs).

As in PyTorch, the constructor only normalises ``padding`` (an int is repeated for both sides of every
padded dimension, a sequence is kept as a tuple); lengths, signs and sizes are checked by ``F.pad`` at
forward time, against the actual input.
"""
from __future__ import annotations

from ._F import F
from .module import Module
from .utils import _ntuple

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


class _PadNd(Module):
    """Base: ``_nd`` padded (trailing) dimensions, ``_mode`` the ``F.pad`` mode."""
    __constants__ = ["padding"]
    _nd = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(2 * self._nd)(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    __constants__ = ["padding", "value"]

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    """``ConstantPadNd`` with value 0.0; PyTorch prints only the padding tuple."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    _nd = 3


class ReflectionPad1d(_PadNd):
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    _nd, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        # PyTorch's circular modules check the rank themselves (ValueError), before F.pad does.
        d = input.dim()
        if d not in (self._nd + 1, self._nd + 2):
            raise ValueError(f"expected {self._nd + 1}D or {self._nd + 2}D input (got {d}D input)")
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    _nd = 1


class CircularPad2d(_CircularPadNd):
    _nd = 2


class CircularPad3d(_CircularPadNd):
    _nd = 3
