"""The checkpoint's table of contents: what each key is (tensor or object), its dtype and size,
and where its bytes lie (``torch.distributed.checkpoint.metadata``'s classes).

The objects mirror torch's (``Metadata.state_dict_metadata`` / ``storage_data`` /
``planner_data``, ``TensorStorageMetadata``, ``BytesStorageMetadata``, ...), but the ``.metadata``
file holding them is JSON, not a pickle: ember never unpickles a file (a pickle runs code).
So an ember checkpoint has torch's layout and API, but its files are not byte-compatible with
torch's, in either direction."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = ["ChunkStorageMetadata", "TensorProperties", "TensorStorageMetadata", "BytesStorageMetadata",
           "MetadataIndex", "Metadata", "StorageMeta"]

FORMAT = "ember.distributed.checkpoint"
FORMAT_VERSION = 1


@dataclass
class ChunkStorageMetadata:
    offsets: Any
    sizes: Any


@dataclass
class TensorProperties:
    dtype: Any = None
    requires_grad: bool = False


@dataclass
class TensorStorageMetadata:
    properties: TensorProperties
    size: Any
    chunks: List[ChunkStorageMetadata]


@dataclass
class BytesStorageMetadata:
    pass


@dataclass(frozen=True)
class MetadataIndex:
    """Which item: its flattened key (``fqn``); ember writes each tensor as one chunk, so
    ``offset`` is all zeros for tensors and None for objects, ``index`` 0 / None."""
    fqn: str
    offset: Optional[Tuple[int, ...]] = None
    index: Optional[int] = None


@dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None


@dataclass
class _StorageInfo:
    """Where an item's bytes are: ``relative_path`` (a ``__<rank>_0.distcp`` file), ``offset``
    and ``length`` in bytes."""
    relative_path: str
    offset: int
    length: int


STORAGE_TYPES = Union[TensorStorageMetadata, BytesStorageMetadata]


@dataclass
class Metadata:
    state_dict_metadata: Dict[str, STORAGE_TYPES]
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StorageMeta] = None
    version: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------- JSON form
def to_json(md: Metadata) -> str:
    sdm = {}
    for fqn, m in md.state_dict_metadata.items():
        if isinstance(m, BytesStorageMetadata):
            sdm[fqn] = {"kind": "bytes"}
        else:
            sdm[fqn] = {"kind": "tensor", "dtype": m.properties.dtype.name, "requires_grad": m.properties.requires_grad,
                        "size": [int(s) for s in m.size],
                        "chunks": [{"offsets": [int(o) for o in c.offsets], "sizes": [int(s) for s in c.sizes]}
                                   for c in m.chunks]}
    storage = [{"fqn": idx.fqn, "offset": None if idx.offset is None else list(idx.offset), "index": idx.index,
                "relative_path": info.relative_path, "file_offset": info.offset, "length": info.length}
               for idx, info in md.storage_data.items()]
    planner = {fqn: list(path) for fqn, path in (md.planner_data or {}).items()}
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "state_dict_metadata": sdm,
                       "storage_data": storage, "planner_data": planner})


def from_json(text: str, where: str) -> Metadata:
    import ember
    from ember import Size
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise RuntimeError(f"ember.distributed.checkpoint: {where} is not an ember checkpoint's metadata (JSON) "
                           f"file ({e}); torch's pickled .metadata files cannot be read (ember never unpickles)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RuntimeError(f"ember.distributed.checkpoint: {where} is not an ember checkpoint's metadata file")
    if doc.get("version") != FORMAT_VERSION:
        raise RuntimeError(f"ember.distributed.checkpoint: {where} has format version {doc.get('version')!r}; "
                           f"this ember reads version {FORMAT_VERSION}")
    sdm = {}
    for fqn, m in doc["state_dict_metadata"].items():
        if m["kind"] == "bytes":
            sdm[fqn] = BytesStorageMetadata()
        else:
            sdm[fqn] = TensorStorageMetadata(
                TensorProperties(getattr(ember, m["dtype"]), bool(m["requires_grad"])), Size(m["size"]),
                [ChunkStorageMetadata(Size(c["offsets"]), Size(c["sizes"])) for c in m["chunks"]])
    storage = {}
    for s in doc["storage_data"]:
        idx = MetadataIndex(s["fqn"], None if s["offset"] is None else Size(s["offset"]), s["index"])
        storage[idx] = _StorageInfo(s["relative_path"], int(s["file_offset"]), int(s["length"]))
    planner = {fqn: tuple(p) for fqn, p in doc["planner_data"].items()}
    return Metadata(sdm, planner, storage, version=str(FORMAT_VERSION))
