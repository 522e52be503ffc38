"""What runs inside a DataLoader worker process (``num_workers > 0``), and what it sends back.

A worker gets tasks ``(index, what)`` on its own index queue and answers ``(index, result)``
on the loader's shared result queue, in any order (the main process puts batches back in
sampler order when ``in_order=True``). For a map-style dataset ``what`` is the batch's list of
indices (or one index without auto-collation); for an iterable dataset it is ignored and the
worker takes the next batch from its own copy of the dataset's iterator (the dataset shards
itself by ``get_worker_info()``), answering ``_IterationEnd`` once it runs out. ``None`` on the
index queue ends the worker; ``(None, (epoch, shared_seed))`` (persistent workers, a new epoch)
restarts its dataset iterator and is answered ``(None, ("resumed", epoch))``.

A datapipe (IterDataPipe) is seeded from the loader's per-epoch ``shared_seed`` (the same in
every worker, so shuffles agree) and sharded: its ``sharding_filter`` keeps the items of this
worker (``apply_sharding(dataset, num_workers, worker_id)``, before ``worker_init_fn``).

Seeding as PyTorch: worker ``i`` seeds Python's ``random``, ember's default generator and
numpy's global generator from ``base_seed + i`` (a fresh ``base_seed`` per epoch, drawn from
the loader's generator or ember's), so workers draw different augmentations and runs are
reproducible under ``ember.manual_seed``. A worker uses one intra-op thread (OpenMP pools do
not survive ``fork``).
"""
from __future__ import annotations

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

_WORKER_INFO = None


@dataclass(frozen=True)
class WorkerInfo:
    """``get_worker_info()`` inside a worker: its ``id``, ``num_workers``, ``seed`` and its copy of
    the ``dataset``."""
    id: int
    num_workers: int
    seed: int
    dataset: Any


def get_worker_info():
    """The calling worker's ``WorkerInfo``; None in the main process."""
    return _WORKER_INFO


class _IterationEnd:
    """An iterable dataset's worker has no more batches."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback text and
    re-raised there (same type when it can be rebuilt from a message, else RuntimeError)."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            raise RuntimeError(msg) from None
        raise exc


class KeyErrorMessage(str):
    """KeyError quotes its message; this keeps the traceback readable (as PyTorch)."""

    def __repr__(self):
        return self


def _seed_worker(seed: int):
    from ... import random as ember_random
    random.seed(seed)
    ember_random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF]).generate_state(1)[0])


def _seed_datapipe(dataset, shared_seed):
    """Seed the random datapipes of an IterDataPipe from the epoch's shared seed."""
    from .datapipes.datapipe import IterDataPipe
    if isinstance(dataset, IterDataPipe):
        if shared_seed is None:
            raise AssertionError("shared_seed must be provided for IterDataPipe workers")
        from ...random import Generator
        from .graph_settings import apply_random_seed
        apply_random_seed(dataset, Generator().manual_seed(shared_seed))


def _shard_datapipe(dataset, worker_id, num_workers):
    from .datapipes.datapipe import IterDataPipe, MapDataPipe
    if isinstance(dataset, (IterDataPipe, MapDataPipe)):
        from .graph_settings import apply_sharding
        apply_sharding(dataset, num_workers, worker_id)


def worker_loop(dataset, index_queue, result_queue, done_event, auto_collation, collate_fn, drop_last,
                batch_size, base_seed, init_fn, worker_id, num_workers, shared_seed=None):
    global _WORKER_INFO
    try:
        from ... import set_num_threads
        set_num_threads(1)
        seed = base_seed + worker_id
        _seed_worker(seed)
        _seed_datapipe(dataset, shared_seed)
        _WORKER_INFO = WorkerInfo(worker_id, num_workers, seed, dataset)
        from .dataset import IterableDataset
        init_error = None
        try:
            _shard_datapipe(dataset, worker_id, num_workers)
            if init_fn is not None:
                init_fn(worker_id)
            it = iter(dataset) if isinstance(dataset, IterableDataset) else None
        except Exception:  # noqa: BLE001 - reported with the first batch
            init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            it = None
        exhausted = False
        while True:
            try:
                task = index_queue.get(timeout=5.0)
            except queue.Empty:
                if done_event.is_set() or os.getppid() == 1:   # the loader is gone
                    return
                continue
            if task is None:
                return
            if done_event.is_set():
                continue
            idx, what = task
            if idx is None:              # a new epoch with persistent workers: restart the iterator
                what, epoch_seed = what
                if isinstance(dataset, IterableDataset) and init_error is None:
                    try:
                        _seed_datapipe(dataset, epoch_seed)
                        it = iter(dataset)
                    except Exception:  # noqa: BLE001 - reported with the next batch
                        init_error = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
                        it = None
                exhausted = False
                result_queue.put((None, ("resumed", what)))
                continue
            if init_error is not None:
                data, init_error = init_error, None
                exhausted = it is None and isinstance(dataset, IterableDataset)
            elif exhausted:
                data = _IterationEnd(worker_id)
            else:
                try:
                    data = _fetch(dataset, it, what, auto_collation, collate_fn, drop_last, batch_size)
                except StopIteration:
                    exhausted = True
                    data = _IterationEnd(worker_id)
                except Exception:  # noqa: BLE001 - re-raised in the main process
                    data = ExceptionWrapper(sys.exc_info(), f"in DataLoader worker process {worker_id}")
            result_queue.put((idx, data))
            del data
    except KeyboardInterrupt:
        return


def _fetch(dataset, it, what, auto_collation, collate_fn, drop_last, batch_size):
    if it is None:                                    # map-style: `what` is the index / indices
        if auto_collation:
            if getattr(dataset, "__getitems__", None):
                return collate_fn(dataset.__getitems__(what))
            return collate_fn([dataset[i] for i in what])
        return collate_fn(dataset[what])
    if not auto_collation:
        return collate_fn(next(it))
    batch = []
    for sample in it:
        batch.append(sample)
        if len(batch) == batch_size:
            break
    if not batch or (drop_last and len(batch) < batch_size):
        raise StopIteration
    return collate_fn(batch)
