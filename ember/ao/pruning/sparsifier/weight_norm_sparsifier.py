"""``WeightNormSparsifier``: zeroes the blocks of a 2-d weight with the lowest norm.

The weight is cut into ``sparse_block_shape`` (rows, cols) blocks from index 0 (the last row /
column of blocks may be partial). ``norm`` maps the weight elementwise (2: squares, 1: absolute
values, or a callable); blocks are ranked by the mean of those values over their in-range
elements, and the ``round(sparsity_level * n_blocks)`` lowest (at most ``n_blocks - 1``) are
pruned. With ``zeros_per_block`` below the block size only that many elements -- the smallest
within the block -- are zeroed in a pruned block (the tensor-level mask OR'ed with a
block-level one: the mask then holds booleans, as torch's). The norm is taken of the current,
already masked weight, so pruned blocks stay pruned while the level grows. Among blocks of
equal norm (pruned ones, when a level goes *down*) ember prunes the lowest indices first; torch's
choice there is its ``topk``'s unspecified tie order.
"""
from __future__ import annotations

import operator
from functools import reduce

import numpy as np

import ember
from .base_sparsifier import BaseSparsifier

__all__ = ["WeightNormSparsifier"]


def _padding(h, w, block):
    bh, bw = block
    return (bh - h % bh) % bh, (bw - w % bw) % bw


def _blocks(a, block):
    """(rows of blocks, cols of blocks, bh * bw) view of a padded 2-d array, block-major."""
    bh, bw = block
    gh, gw = a.shape[0] // bh, a.shape[1] // bw
    return a.reshape(gh, bh, gw, bw).transpose(0, 2, 1, 3).reshape(gh, gw, bh * bw)


def _unblock(b, block, shape):
    bh, bw = block
    gh, gw = shape[0] // bh, shape[1] // bw
    return b.reshape(gh, gw, bh, bw).transpose(0, 2, 1, 3).reshape(shape)


class WeightNormSparsifier(BaseSparsifier):
    def __init__(self, sparsity_level=0.5, sparse_block_shape=(1, 4), zeros_per_block=None, norm=None):
        if zeros_per_block is None:
            zeros_per_block = reduce(operator.mul, sparse_block_shape)
        defaults = {"sparsity_level": sparsity_level, "sparse_block_shape": sparse_block_shape,
                    "zeros_per_block": zeros_per_block}
        if norm is None:
            norm = 2
        if callable(norm):
            self.norm_fn = norm
        elif norm == 1:
            self.norm_fn = lambda t: t.abs()
        elif norm == 2:
            self.norm_fn = lambda t: t * t
        else:
            raise NotImplementedError(f"L-{norm} is not yet implemented.")
        super().__init__(defaults=defaults)

    @staticmethod
    def _tensor_mask(data, sparsity_level, block):
        """float32 mask of the padded shape cropped to ``data``'s: the lowest-mean blocks zeroed."""
        h, w = data.shape
        dh, dw = _padding(h, w, block)
        if sparsity_level >= 1.0:
            return np.zeros((h + dh, w + dw), np.float32)
        if sparsity_level <= 0.0:
            return np.ones((h + dh, w + dw), np.float32)
        padded = np.zeros((h + dh, w + dw), np.float64)
        padded[:h, :w] = data
        counts = np.zeros((h + dh, w + dw), np.float64)
        counts[:h, :w] = 1
        # the mean over each block's in-range elements (avg_pool2d with ceil_mode's divisor)
        means = (_blocks(padded, block).sum(-1) / _blocks(counts, block).sum(-1)).astype(np.float32).reshape(-1)
        n_blocks = means.size
        k = max(0, min(n_blocks - 1, round(sparsity_level * n_blocks)))
        keep = np.ones(n_blocks, np.float32)
        keep[np.argsort(means, kind="stable")[:k]] = 0
        bh, bw = block
        mask = np.repeat(np.repeat(keep.reshape((h + dh) // bh, (w + dw) // bw), bh, 0), bw, 1)
        return np.ascontiguousarray(mask[:h, :w])

    @staticmethod
    def _block_mask(data, block, zeros_per_block):
        """float32 mask of the padded shape: the ``zeros_per_block`` smallest of each block zeroed
        (the padding counts as larger than any value)."""
        h, w = data.shape
        dh, dw = _padding(h, w, block)
        values_per_block = block[0] * block[1]
        if values_per_block == zeros_per_block:
            return np.zeros((h + dh, w + dw), np.float32)
        padded = np.full((h + dh, w + dw), np.nan, np.float32)
        padded[:h, :w] = data
        blocks = _blocks(padded, block)
        order = np.argsort(blocks, axis=-1, kind="stable")[..., :zeros_per_block]
        mask = np.ones(blocks.shape, np.float32)
        np.put_along_axis(mask, order, 0, axis=-1)
        return _unblock(mask, block, (h + dh, w + dw))

    def update_mask(self, module, tensor_name, sparsity_level, sparse_block_shape, zeros_per_block, **kwargs):
        values_per_block = reduce(operator.mul, sparse_block_shape)
        if zeros_per_block > values_per_block:
            raise ValueError("Number of zeros per block cannot be more than the total number of elements in that "
                             "block.")
        if zeros_per_block < 0:
            raise ValueError("Number of zeros per block should be positive.")
        mask = getattr(module.parametrizations, tensor_name)[0].mask
        if sparsity_level <= 0 or zeros_per_block == 0:
            mask.data = ember.ones_like(mask)
            return
        if sparsity_level >= 1.0 and zeros_per_block == values_per_block:
            mask.data = ember.zeros_like(mask)
            return
        ww = self.norm_fn(getattr(module, tensor_name))
        if ww.ndim != 2:
            raise ValueError(f"WeightNormSparsifier: the sparsified tensor must be 2-d (rows, cols), got shape "
                             f"{tuple(ww.shape)}")
        data = np.asarray(ww.detach()._data, np.float32)
        block = tuple(int(b) for b in sparse_block_shape)
        tensor_mask = ember.tensor(self._tensor_mask(data, sparsity_level, block))
        if values_per_block != zeros_per_block:
            block_mask = ember.tensor(self._block_mask(data, block, zeros_per_block))
            tensor_mask = ember.logical_or(tensor_mask, block_mask)
        mask.data = tensor_mask
