"""``save`` / ``async_save``: every rank writes its share of the state_dict to its own
``__<rank>_0.distcp`` file, and the coordinator (rank 0) writes ``.metadata``.

Which rank writes what follows torch's default planner: the ranks swap their lists of keys;
a key that several ranks hold (a replicated tensor, e.g. every DDP parameter) is written once,
by the holder with the fewest bytes planned so far (ties: the lowest rank) -- or always the
lowest rank with ``DefaultSavePlanner(dedup_save_to_lowest_rank=True)``. A key held by one
rank only is written by that rank. Every rank computes the same global plan from the swapped
lists, so the file offsets need no further exchange.

Non-tensor values are stored with ``ember.save`` (JSON + raw arrays, never a pickle), so a
checkpoint can hold ints, floats, strings, None, lists/tuples/dicts of them, and tensors inside
tuples -- not arbitrary Python objects (``ember.save`` names the type it refuses)."""
from __future__ import annotations

import io
from concurrent.futures import Future
import threading

import numpy as np

from ember.tensor import _host

from ._coord import Coordinator
from ._flatten import flatten
from ._storage import check_plain_tensor, is_tensor, writer_for
from .filesystem import rank_file
from .metadata import (BytesStorageMetadata, ChunkStorageMetadata, Metadata, MetadataIndex, TensorProperties,
                       TensorStorageMetadata, _StorageInfo)
from .planner import DefaultSavePlanner, check_planner
from .stateful import to_state_dicts

__all__ = ["save", "async_save", "save_state_dict"]


def _stage(state_dict, copy):
    """({fqn: payload}, local plan). The plan entries are JSON-able lists:
    ``["tensor", fqn, dtype, shape, requires_grad, nbytes, saved_path]`` or
    ``["bytes", fqn, nbytes, saved_path]``."""
    from ember.serialization import save as ember_save
    flat, _, saved = flatten(state_dict)
    payloads, plan = {}, []
    for fqn, value in flat.items():
        if is_tensor(value):
            check_plain_tensor(value, fqn, "save")
            arr = np.asarray(_host(value.detach()._data))
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            arr = np.array(arr, order="C", copy=True) if copy or not arr.flags.c_contiguous else arr
            payloads[fqn] = memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else b""
            plan.append(["tensor", fqn, value.dtype.name, [int(s) for s in value.shape], bool(value.requires_grad),
                         int(arr.nbytes), list(saved[fqn])])
        else:
            buf = io.BytesIO()
            try:
                ember_save(value, buf, _use_new_zipfile_serialization=False)   # JSON: never a pickle
            except TypeError as e:
                raise TypeError(f"ember.distributed.checkpoint.save: cannot store the value at key {fqn!r}: {e}") \
                    from None
            payloads[fqn] = buf.getvalue()
            plan.append(["bytes", fqn, len(payloads[fqn]), list(saved[fqn])])
    return payloads, plan


def _global_plan(plans, lowest_rank):
    """(Metadata without storage_data yet, {fqn: writing rank}, {rank: [fqn in file order]})."""
    import ember
    from ember import Size
    first, holders, order = {}, {}, []
    for r, plan in enumerate(plans):
        for e in plan:
            fqn = e[1]
            if fqn not in first:
                first[fqn], holders[fqn] = (r, e), []
                order.append(fqn)
            else:
                r0, e0 = first[fqn]
                if e0[0] != e[0] or (e[0] == "tensor" and (e0[2] != e[2] or e0[3] != e[3])):
                    desc = (lambda x: f"a tensor of dtype {x[2]} and shape {x[3]}" if x[0] == "tensor" else "an object")
                    raise ValueError(f"ember.distributed.checkpoint.save: key {fqn!r} is {desc(e0)} on rank {r0} but "
                                     f"{desc(e)} on rank {r}; a key several ranks hold must be the same replicated "
                                     "value (ember has no sharded tensors)")
            holders[fqn].append(r)
    planned = [0] * len(plans)
    writer_of, per_rank = {}, {r: [] for r in range(len(plans))}
    sdm, planner_data = {}, {}
    for fqn in order:
        cands = holders[fqn]
        w = cands[0] if lowest_rank else min(cands, key=lambda r: planned[r])
        e = first[fqn][1]
        planned[w] += e[5] if e[0] == "tensor" else 1
        writer_of[fqn] = w
        per_rank[w].append(fqn)
        if e[0] == "tensor":
            sdm[fqn] = TensorStorageMetadata(TensorProperties(getattr(ember, e[2]), e[4]), Size(e[3]),
                                             [ChunkStorageMetadata(Size([0] * len(e[3])), Size(e[3]))])
        else:
            sdm[fqn] = BytesStorageMetadata()
        planner_data[fqn] = tuple(e[-1])
    storage = {}
    for r, fqns in per_rank.items():
        # objects first, then tensors largest first (the order torch's writer uses)
        objs = [f for f in fqns if first[f][1][0] == "bytes"]
        tens = sorted((f for f in fqns if first[f][1][0] == "tensor"), key=lambda f: -first[f][1][5])
        per_rank[r] = objs + tens
        offset = 0
        for f in per_rank[r]:
            e = first[f][1]
            n = e[5] if e[0] == "tensor" else e[2]
            idx = MetadataIndex(f, Size([0] * len(e[3])), 0) if e[0] == "tensor" else MetadataIndex(f)
            storage[idx] = _StorageInfo(rank_file(r), offset, n)
            offset += n
    return Metadata(sdm, planner_data, storage, version="1"), per_rank


def _plan(coord, writer, state_dict, planner, copy):
    staged = coord.step(lambda: (writer._prepare(), _stage(to_state_dicts(state_dict), copy))[1])
    payloads, plan = staged
    plans = coord.all_gather(plan)
    metadata, per_rank = coord.step(lambda: _global_plan(plans, planner.dedup_save_to_lowest_rank))
    return payloads, metadata, per_rank


def _write(coord, writer, payloads, metadata, per_rank):
    coord.step(lambda: writer._write_rank(coord.rank, [payloads[f] for f in per_rank[coord.rank]]))
    coord.step(lambda: writer._write_metadata(metadata) if coord.rank == 0 else None)
    return metadata


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False,
         use_collectives=True):
    """Save ``state_dict`` (nested dicts/lists of tensors and plain values; a top-level value
    with ``state_dict()``/``load_state_dict()`` -- a module, an optimizer -- is saved as its
    ``state_dict()``) as a distributed
    checkpoint in the directory ``checkpoint_id`` (or ``storage_writer``'s path). With a process
    group every rank of it must call ``save``; the returned ``Metadata`` is the global one.
    The layout and API are torch's; the files are ember's (JSON metadata, raw tensor bytes,
    ``ember.save`` objects), not byte-compatible with torch's."""
    if not use_collectives:
        raise NotImplementedError("ember.distributed.checkpoint.save: use_collectives=False is not supported")
    writer = writer_for(storage_writer, checkpoint_id)
    planner = check_planner(planner, DefaultSavePlanner, "save")
    coord = Coordinator(process_group, no_dist, "save")
    payloads, metadata, per_rank = _plan(coord, writer, state_dict, planner, copy=False)
    return _write(coord, writer, payloads, metadata, per_rank)


def async_save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None,
               async_checkpointer_type=None, async_stager=None, no_dist=False, use_collectives=True):
    """Copy ``state_dict``'s tensors now, write them on a background thread; returns a
    ``concurrent.futures.Future`` whose result is the ``Metadata`` (as torch). Changing the
    tensors after ``async_save`` returns does not change what is saved.

    Only without a process group (or a one-rank group, or ``no_dist=True``): with several ranks
    the write steps exchange messages, and collectives issued from a background thread could
    interleave with the caller's own collectives in a different order on each rank."""
    if async_stager is not None:
        raise NotImplementedError("ember.distributed.checkpoint.async_save: async_stager is not supported")
    if async_checkpointer_type is not None and str(getattr(async_checkpointer_type, "value", async_checkpointer_type)) \
            != "thread":
        raise NotImplementedError("ember.distributed.checkpoint.async_save: only the thread checkpointer is "
                                  f"supported, got {async_checkpointer_type!r}")
    if not use_collectives:
        raise NotImplementedError("ember.distributed.checkpoint.async_save: use_collectives=False is not supported")
    writer = writer_for(storage_writer, checkpoint_id)
    planner = check_planner(planner, DefaultSavePlanner, "async_save")
    coord = Coordinator(process_group, no_dist, "async_save")
    if coord.world > 1:
        raise NotImplementedError("ember.distributed.checkpoint.async_save: a process group of more than one rank "
                                  "is not supported (use save, or no_dist=True)")
    payloads, metadata, per_rank = _plan(coord, writer, state_dict, planner, copy=True)
    fut = Future()

    def run():
        try:
            fut.set_result(_write(coord, writer, payloads, metadata, per_rank))
        except BaseException as e:  # noqa: BLE001 - handed to the future
            fut.set_exception(e)

    threading.Thread(target=run, name="ember-dcp-async-save", daemon=True).start()
    return fut


def save_state_dict(state_dict, storage_writer, process_group=None, coordinator_rank=0, no_dist=False, planner=None):
    """torch's deprecated spelling of ``save``."""
    if coordinator_rank != 0:
        raise NotImplementedError("ember.distributed.checkpoint.save_state_dict: coordinator_rank must be 0")
    return save(state_dict, storage_writer=storage_writer, process_group=process_group, no_dist=no_dist,
                planner=planner)
