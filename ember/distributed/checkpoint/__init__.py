"""``ember.distributed.checkpoint`` (DCP): save and load state_dicts as a directory of per-rank
files, with or without a process group -- torch's ``torch.distributed.checkpoint`` API.

* ``save(state_dict, checkpoint_id=dir | storage_writer=FileSystemWriter(dir))``,
  ``load(state_dict, checkpoint_id=... | storage_reader=FileSystemReader(dir))`` (in place),
  ``async_save`` (a background thread; one rank only), ``FileSystemWriter``/``FileSystemReader``,
  ``DefaultSavePlanner``/``DefaultLoadPlanner`` (their options only), ``Metadata`` and its parts,
  ``CheckpointException``; ``state_dict.get_state_dict`` & co. for models and optimizers.
* Layout as torch's: ``<dir>/.metadata`` plus ``<dir>/__<rank>_0.distcp`` per rank; nested
  dicts/lists are flattened to dotted keys as torch's planner does; replicated keys are written
  once (torch's dedup).
* Not byte-compatible with torch: ``.metadata`` is JSON and non-tensor values are stored with
  ``ember.save`` (JSON + raw arrays), because ember never unpickles data. Neither side can read
  the other's checkpoints.
* No DTensor/ShardedTensor (ember has none): every tensor is one whole chunk, so there is no
  resharding; custom planners and storage backends raise NotImplementedError.
"""
from __future__ import annotations

from . import state_dict  # noqa: F401
from .api import CheckpointException
from .filesystem import FileSystemReader, FileSystemWriter
from .metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata, MetadataIndex, TensorProperties,
                       TensorStorageMetadata)
from .planner import DefaultLoadPlanner, DefaultSavePlanner
from .state_dict_loader import load, load_state_dict
from .state_dict_saver import async_save, save, save_state_dict
from .stateful import Stateful

__all__ = ["save", "load", "async_save", "save_state_dict", "load_state_dict", "FileSystemWriter",
           "FileSystemReader", "DefaultSavePlanner", "DefaultLoadPlanner", "CheckpointException", "Stateful", "Metadata",
           "MetadataIndex", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
           "TensorProperties"]
