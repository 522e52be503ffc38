"""``FileSystemWriter`` / ``FileSystemReader``: a checkpoint is a directory holding

* ``.metadata``: the table of contents (JSON, written by the coordinator rank last, atomically,
  so a directory with a ``.metadata`` holds a complete checkpoint);
* ``__<rank>_0.distcp``: the bytes each rank wrote, one file per rank, items back to back:
  tensors as raw little-endian values in C order, other objects as ``ember.save`` archives
  (JSON + raw arrays: no pickle).

The directory layout and the classes' API are torch's; the files' contents are not
byte-compatible with torch's (torch pickles; ember never unpickles)."""
from __future__ import annotations

import os
from pathlib import Path

from .metadata import from_json, to_json

__all__ = ["FileSystemWriter", "FileSystemReader"]

METADATA_FILE = ".metadata"


def rank_file(rank):
    return f"__{rank}_0.distcp"


def _check_path(path, cls):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{cls}: path must be a str or os.PathLike, got {type(path).__name__}")
    return Path(path)


class _CheckpointDirectory:
    """What the writer and the reader share: the checkpoint directory (``checkpoint_id``)."""

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = _check_path(checkpoint_id, type(self).__name__)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))

    @property
    def checkpoint_id(self):
        return self.path


class FileSystemWriter(_CheckpointDirectory):
    def __init__(self, path, single_file_per_rank=True, sync_files=True, thread_count=1,
                 per_thread_copy_ahead=10_000_000, cache_staged_state_dict=False, overwrite=True,
                 _extensions=None, serialization_format=None):
        self.path = _check_path(path, "FileSystemWriter")
        if not single_file_per_rank:
            raise NotImplementedError("ember.distributed.checkpoint.FileSystemWriter: single_file_per_rank=False "
                                      "(one file per tensor) is not supported")
        if thread_count != 1:
            raise NotImplementedError(f"ember.distributed.checkpoint.FileSystemWriter: thread_count={thread_count} "
                                      "(several files per rank) is not supported; use thread_count=1")
        if _extensions:
            raise NotImplementedError("ember.distributed.checkpoint.FileSystemWriter: _extensions (stream "
                                      "transforms) are not supported")
        self.sync_files = sync_files
        self.overwrite = overwrite

    def _prepare(self):
        if not self.overwrite and (self.path / METADATA_FILE).exists():
            raise RuntimeError(f"Checkpoint already exists and {self.__class__.__name__}.overwrite is False.")
        self.path.mkdir(parents=True, exist_ok=True)

    def _write_rank(self, rank, payloads):
        """Write ``payloads`` (bytes-like objects, in plan order) to this rank's file."""
        tmp = self.path / (rank_file(rank) + ".tmp")
        with open(tmp, "wb") as f:
            for p in payloads:
                f.write(p)
            f.flush()
            if self.sync_files:
                os.fsync(f.fileno())
        os.replace(tmp, self.path / rank_file(rank))

    def _write_metadata(self, metadata):
        tmp = self.path / (METADATA_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(to_json(metadata))
            f.flush()
            if self.sync_files:
                os.fsync(f.fileno())
        os.replace(tmp, self.path / METADATA_FILE)


class FileSystemReader(_CheckpointDirectory):
    def __init__(self, path, _extension_registry=None):
        self.path = _check_path(path, "FileSystemReader")

    def read_metadata(self, *args, **kwargs):
        path = self.path / METADATA_FILE
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:1] == b"\x80":
            raise RuntimeError(f"ember.distributed.checkpoint: {path} is a pickle (a torch checkpoint?); ember reads "
                               "only its own JSON metadata and never unpickles")
        return from_json(raw.decode("utf-8", errors="replace"), str(path))

    def _read(self, info):
        path = self.path / info.relative_path
        with open(path, "rb") as f:
            f.seek(info.offset)
            data = f.read(info.length)
        if len(data) != info.length:
            raise RuntimeError(f"ember.distributed.checkpoint: {path} is truncated: expected {info.length} bytes at "
                               f"offset {info.offset}, found {len(data)}")
        return data
