"""``load``: fill the given state_dict from a checkpoint, in place.

Tensors in the state_dict keep their identity: their values are overwritten (``copy_``, so a
saved float32 loads into a float64 tensor converted, as torch); their shape must equal the
saved one. Other values are replaced by the saved object. Keys of the checkpoint that the
state_dict lacks are skipped; keys of the state_dict missing from the checkpoint are torch's
``RuntimeError`` (unless ``DefaultLoadPlanner(allow_partial_load=True)``). Every rank reads the
items it needs from whichever rank's file holds them (the directory must be visible to all)."""
from __future__ import annotations

import io

import numpy as np

from ._coord import Coordinator
from ._flatten import flatten, set_element
from ._storage import check_plain_tensor, is_tensor, reader_for
from .metadata import BytesStorageMetadata, MetadataIndex, TensorStorageMetadata
from .planner import DefaultLoadPlanner, check_planner
from .stateful import Stateful, to_state_dicts

__all__ = ["load", "load_state_dict"]


def _plan(flat, metadata, allow_partial):
    todo = []
    for fqn, obj in flat.items():
        md = metadata.state_dict_metadata.get(fqn)
        if md is None:
            if allow_partial:
                continue
            raise RuntimeError(f"Missing key in checkpoint state_dict: {fqn}.")
        if isinstance(md, TensorStorageMetadata):
            if not is_tensor(obj):
                raise ValueError(f"Invalid checkpoint metadata for {fqn}, expected BytesStorageMetadata but found "
                                 f"{type(md)}")
            if tuple(md.size) != tuple(obj.shape):
                raise ValueError(f"Size mismatch between saved {md.size} and current: {obj.size()} for {fqn}")
            check_plain_tensor(obj, fqn, "load")
        todo.append((fqn, md))
    return todo


def _read_all(reader, metadata, flat, paths, state_dict, todo):
    import ember
    from ember.serialization import _np_dtype
    from ember.serialization import load as ember_load
    for fqn, md in todo:
        if isinstance(md, BytesStorageMetadata):
            data = reader._read(metadata.storage_data[MetadataIndex(fqn)])
            set_element(state_dict, paths[fqn], ember_load(io.BytesIO(data)))
            continue
        info = metadata.storage_data[MetadataIndex(fqn, ember.Size([0] * len(md.size)), 0)]
        data = reader._read(info)
        arr = np.frombuffer(bytearray(data), dtype=_np_dtype(md.properties.dtype.name)).reshape(tuple(md.size))
        src = ember.from_numpy(arr)
        with ember.no_grad():
            flat[fqn].copy_(src)


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False):
    """Load the checkpoint at ``checkpoint_id`` (or ``storage_reader``'s path) into
    ``state_dict`` in place (a top-level value with ``state_dict()``/``load_state_dict()`` gets
    its state_dict filled, then ``load_state_dict`` called with it). With a process group every
    rank of it must call ``load``. Reads ember's own checkpoint files only (JSON metadata; torch's pickled ones are refused)."""
    reader = reader_for(storage_reader, checkpoint_id)
    planner = check_planner(planner, DefaultLoadPlanner, "load")
    coord = Coordinator(process_group, no_dist, "load")
    target = to_state_dicts(state_dict)
    flat, paths, _ = flatten(target)
    metadata = coord.step(reader.read_metadata)
    todo = coord.step(lambda: _plan(flat, metadata, planner.allow_partial_load))
    coord.step(lambda: _read_all(reader, metadata, flat, paths, target, todo))
    for k, v in state_dict.items():
        if isinstance(v, Stateful):
            v.load_state_dict(target[k])      # a Stateful loads what was filled into its state_dict
        else:
            state_dict[k] = target[k]


def load_state_dict(state_dict, storage_reader, process_group=None, coordinator_rank=0, no_dist=False, planner=None):
    """torch's deprecated spelling of ``load``."""
    return load(state_dict, storage_reader=storage_reader, process_group=process_group, no_dist=no_dist,
                planner=planner)
