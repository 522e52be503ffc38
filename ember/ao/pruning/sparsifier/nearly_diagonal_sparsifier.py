"""``NearlyDiagonalSparsifier``: keeps a band of ``nearliness`` diagonals (odd) around the main
diagonal of each 2-d weight and zeroes the rest (``nearliness`` 1: the diagonal alone)."""
from __future__ import annotations

import numpy as np

import ember
from .base_sparsifier import BaseSparsifier

__all__ = ["NearlyDiagonalSparsifier"]


class NearlyDiagonalSparsifier(BaseSparsifier):
    def __init__(self, nearliness=1):
        super().__init__(defaults={"nearliness": nearliness})

    def update_mask(self, module, tensor_name, nearliness, **kwargs):
        mask = getattr(module.parametrizations, tensor_name)[0].mask
        band = np.zeros(tuple(mask.shape), np.asarray(mask.detach()._data).dtype)
        if nearliness > 0:
            height, width = getattr(module, tensor_name).shape
            if nearliness % 2 == 0:
                mask.data = ember.tensor(band)
                raise ValueError("nearliness can only be an odd number")
            half = nearliness // 2
            if half >= min(height, width):
                mask.data = ember.tensor(band)
                raise ValueError("nearliness cannot be larger than the dimensions of tensor.")
            rows, cols = np.indices((height, width))
            band[np.abs(rows - cols) <= half] = 1
        mask.data = ember.tensor(band)
