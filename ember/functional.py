"""``ember.functional``: torch.functional's names (functions PyTorch writes in Python over its
ops; ember's are the same objects as the top-level ones)."""
from __future__ import annotations

import ember as _ember

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "cdist", "chain_matmul", "einsum", "istft", "lu", "meshgrid", "norm",
           "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive",
           "unravel_index"]


def __getattr__(name):
    if name in __all__:
        return getattr(_ember, name)
    raise AttributeError(f"module 'ember.functional' has no attribute '{name}'")
