"""Pinning a DataLoader batch: ``DataLoader(pin_memory=True)`` with an accelerator.

Every tensor of the batch is copied into page-locked host memory
(``Tensor.pin_memory``, ember/_pinned.py), so that ``batch.to("cuda",
non_blocking=True)`` can be a DMA copy. The batch keeps its structure, as PyTorch's
``torch.utils.data._utils.pin_memory.pin_memory`` keeps it: mappings and sequences
are rebuilt around the pinned tensors, objects with their own ``pin_memory()`` (a
custom batch class, a PackedSequence) are asked to pin themselves, everything else
passes through. Without an accelerator the DataLoader never calls this (it warns,
as PyTorch does, and yields the batches unpinned).
"""
from __future__ import annotations

import collections.abc
import copy

__all__ = ["pin_memory"]


def pin_memory(data):
    """``data`` with every tensor in it pinned (see the module docstring)."""
    from ...tensor import Tensor
    if isinstance(data, Tensor) or hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                out = copy.copy(data)          # keeps the mapping type's own attributes
                out.update(pinned)
                return out
            return type(data)(pinned)
        except TypeError:                      # a mapping type that cannot be copied or rebuilt
            return pinned
    if isinstance(data, tuple):
        items = [pin_memory(v) for v in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, collections.abc.Sequence):
        items = [pin_memory(v) for v in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                out = copy.copy(data)
                for i, v in enumerate(items):
                    out[i] = v
                return out
            return type(data)(items)
        except TypeError:                      # e.g. range: not rebuildable from a list
            return items
    return data


class PinnedBatches:
    """An iterator over a DataLoader iterator's batches, pinned. Other attributes (``len``,
    the worker iterator's state) are the wrapped iterator's."""

    def __init__(self, it):
        self._it = it

    def __iter__(self):
        return self

    def __next__(self):
        return pin_memory(next(self._it))

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)
