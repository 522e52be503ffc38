"""Fractional max pooling modules (``F.fractional_max_pool2d`` / ``3d``, see
ember/nn/_fractional_pool.py): torch's constructor checks, and ``_random_samples`` kept as a
buffer so a module built with fixed samples pools the same windows every call (each call
draws fresh samples otherwise)."""
from __future__ import annotations

from ._F import F
from .module import Module
from .utils import _pair, _triple

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


class _FractionalMaxPoolNd(Module):
    __constants__ = ["kernel_size", "return_indices", "output_size", "output_ratio"]
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        tup = _pair if self._nd == 2 else _triple
        name = type(self).__name__
        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        fn = F.fractional_max_pool2d if self._nd == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                  _random_samples=self._random_samples)

    # no extra_repr: PyTorch prints these modules as ``FractionalMaxPool2d()``

class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-d fractional max pooling over (N, C, H, W) or (C, H, W) input."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-d fractional max pooling over (N, C, T, H, W) or (C, T, H, W) input."""
    _nd = 3
