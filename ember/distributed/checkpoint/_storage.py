"""Resolving ``checkpoint_id`` / ``storage_writer`` / ``storage_reader`` as torch does, and the
checks on what a tensor must be to go into (or come out of) a checkpoint."""
from __future__ import annotations

from ember.tensor import Tensor

from .filesystem import FileSystemReader, FileSystemWriter

_NEED_ID = "`checkpoint_id` must be specified if storage_reader/storage_writer is None."


def resolve(storage, checkpoint_id, cls, arg):
    if storage is None:
        if checkpoint_id is None:
            raise RuntimeError(_NEED_ID)
        return cls(checkpoint_id)
    if not isinstance(storage, cls):
        raise NotImplementedError(f"ember.distributed.checkpoint: {arg} must be a {cls.__name__} (other storage "
                                  f"backends are not supported), got {type(storage).__name__}")
    storage.reset(checkpoint_id)
    return storage


def writer_for(storage_writer, checkpoint_id):
    return resolve(storage_writer, checkpoint_id, FileSystemWriter, "storage_writer")


def reader_for(storage_reader, checkpoint_id):
    return resolve(storage_reader, checkpoint_id, FileSystemReader, "storage_reader")


def check_plain_tensor(t, fqn, what):
    """Only dense, real-data tensors: anything else would be written (or read) wrongly."""
    if getattr(t, "is_nested", False):
        raise NotImplementedError(f"ember.distributed.checkpoint.{what}: nested tensors are not supported (key {fqn!r})")
    if t.is_quantized:
        raise NotImplementedError(f"ember.distributed.checkpoint.{what}: quantized tensors are not supported "
                                  f"(key {fqn!r})")
    if t._fake:
        raise NotImplementedError(f"ember.distributed.checkpoint.{what}: tensors without data (meta / fake) are not "
                                  f"supported (key {fqn!r})")
    if getattr(t, "is_sparse", False) or str(getattr(t, "layout", "torch.strided")).split(".")[-1] != "strided":
        raise NotImplementedError(f"ember.distributed.checkpoint.{what}: non-strided (sparse) tensors are not "
                                  f"supported (key {fqn!r})")


def is_tensor(x):
    return isinstance(x, Tensor)
