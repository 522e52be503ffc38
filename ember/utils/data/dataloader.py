"""DataLoader: batches from a dataset through a sampler and a collate function, in the main
process (``num_workers=0``) or in worker processes (``_MultiProcessingIter``, ``_worker.py``)."""
from __future__ import annotations

import itertools
import queue
from types import GenericAlias as _GenericAlias

from ._collate import default_collate, default_convert
from ._worker import ExceptionWrapper, _IterationEnd, get_worker_info, worker_loop
from .dataset import IterableDataset
from .datapipes.datapipe import (IterDataPipe, MapDataPipe, _IterDataPipeSerializationWrapper,
                                 _MapDataPipeSerializationWrapper)
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info"]


class DataLoader:
    # ``DataLoader[int]`` in annotations, as with PyTorch's Generic DataLoader
    __class_getitem__ = classmethod(_GenericAlias)

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterator = None
        dataset = self.dataset = _wrap_datapipe(dataset, shuffle)
        if isinstance(dataset, IterDataPipe):
            shuffle = None          # already applied to the pipeline's shufflers
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None and not self._is_iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._is_iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._is_iterable and self.batch_size is not None)

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.pin_memory:
            _warn_pin_memory()
            from ... import accelerator
            if accelerator.is_available():      # (else the warning said so: batches stay unpinned)
                from ._pin_memory import PinnedBatches
                return PinnedBatches(self._batches())
        return self._batches()

    def _batches(self):
        if self.num_workers > 0:
            if not self.persistent_workers:
                return _MultiProcessingIter(self)
            if self._iterator is None:
                self._iterator = _MultiProcessingIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        _seed_datapipe_epoch(self)
        _base_seed(self)        # as PyTorch: every iterator draws one, so shuffles match with workers
        return _SingleProcessIter(self, self._iter_iterable() if self._is_iterable else self._iter_map())

    def _iter_map(self):
        ds = self.dataset
        if self._auto_collation:
            for indices in self.batch_sampler:
                if hasattr(ds, "__getitems__") and ds.__getitems__:
                    samples = ds.__getitems__(indices)
                else:
                    samples = [ds[i] for i in indices]
                yield self.collate_fn(samples)
        else:
            for i in self.sampler:
                yield self.collate_fn(ds[i])

    def _iter_iterable(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return -(-length // self.batch_size)
            return length
        return len(self._index_sampler)


class _SingleProcessIter:
    """The batches of a ``num_workers=0`` loader: a generator with ``len()`` (the loader's), as
    PyTorch's single-process iterator has."""

    __slots__ = ("_loader", "_gen")

    def __init__(self, loader, gen):
        self._loader, self._gen = loader, gen

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def __len__(self):
        return len(self._loader)


def _wrap_datapipe(dataset, shuffle):
    """A datapipe as PyTorch's DataLoader takes it: ``shuffle`` (when given) switches the
    pipeline's shufflers, then the pipeline is wrapped so workers can receive it (dill for
    lambdas when installed). A map datapipe's ``shuffle`` stays for its sampler."""
    if isinstance(dataset, IterDataPipe):
        from .graph_settings import apply_shuffle_settings
        if shuffle is not None:
            dataset = apply_shuffle_settings(dataset, shuffle=shuffle)
        return _IterDataPipeSerializationWrapper(dataset)
    if isinstance(dataset, MapDataPipe):
        return _MapDataPipeSerializationWrapper(dataset)
    return dataset


def _seed_datapipe_epoch(loader):
    """Each iterator over an IterDataPipe draws one shared seed (before the base seed, as
    PyTorch) and seeds every random datapipe from it; workers re-apply the same seed, so their
    shuffles agree and the sharding_filter shards stay disjoint. Returns the seed (None for
    other datasets)."""
    if not isinstance(loader.dataset, IterDataPipe):
        return None
    from ...random import Generator
    from .datapipes.iter.combinatorics import draw_seed
    from .graph_settings import apply_random_seed
    seed = draw_seed(loader.generator)
    apply_random_seed(loader.dataset, Generator().manual_seed(seed))
    return seed


def _base_seed(loader) -> int:
    """The seed worker ``i`` adds its id to: one draw from the loader's generator (ember's
    default one when it has none) per iterator, workers or not (so a shuffle is the same with
    and without workers, as in PyTorch)."""
    from ...random import draw_seed
    return draw_seed(loader.generator)


def _warn_pin_memory() -> None:
    """PyTorch's warning for ``pin_memory=True`` without an accelerator (batches stay as they are)."""
    from ... import cuda
    if not cuda.is_available():
        import warnings
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                      "memory won't be used.", UserWarning, stacklevel=3)


def _check_worker_number(n: int) -> None:
    """PyTorch's warning when more workers are asked for than the CPUs this process may use."""
    import os
    import warnings
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    if cpus is not None and n > cpus:
        warnings.warn(f"This DataLoader will create {n} worker processes in total. Our suggested max number of "
                      f"worker in current system is {cpus}, which is smaller than what this DataLoader is going to "
                      f"create. Please be aware that excessive worker creation might get DataLoader running slow "
                      f"or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                      UserWarning, stacklevel=3)


def _context(ctx):
    import multiprocessing as mp
    if ctx is None:
        return mp.get_context()
    if isinstance(ctx, str):
        if ctx not in mp.get_all_start_methods():
            raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                             f"{mp.get_all_start_methods()!r}, but got multiprocessing_context={ctx!r}")
        return mp.get_context(ctx)
    if not hasattr(ctx, "Process") or not hasattr(ctx, "Queue"):
        raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                        f"specifying the start method, but got multiprocessing_context={ctx!r}")
    return ctx


class _MultiProcessingIter:
    """Batches made by ``num_workers`` worker processes. Up to ``prefetch_factor`` tasks per worker
    are outstanding; tasks go round-robin to the workers still active; with ``in_order`` results
    are handed out in task order (a batch that arrives early waits in ``_task_info``). A worker
    exception is re-raised here with the worker's traceback; a worker that dies, or a result
    that takes longer than ``timeout`` seconds, raises RuntimeError."""

    _POLL_S = 5.0
    _shut = True          # nothing to shut down until the queues exist

    def __init__(self, loader):
        from ... import multiprocessing as _emp  # noqa: F401  (registers the tensor reducers)
        self._ctx = _context(loader.multiprocessing_context)
        _check_worker_number(loader.num_workers)
        self._n = loader.num_workers
        self._timeout = loader.timeout
        self._prefetch = loader.prefetch_factor
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        self._is_iterable = loader._is_iterable
        shared_seed = _seed_datapipe_epoch(loader)
        base_seed = _base_seed(loader)
        self._result_queue = self._ctx.Queue()
        self._done_event = self._ctx.Event()
        self._index_queues, self._workers = [], []
        self._shut = False      # from here on, _shutdown has queues (and maybe workers) to close
        try:
            for i in range(self._n):
                iq = self._ctx.Queue()
                iq.cancel_join_thread()
                w = self._ctx.Process(target=worker_loop, daemon=True, args=(
                    loader.dataset, iq, self._result_queue, self._done_event, loader._auto_collation,
                    loader.collate_fn, loader.drop_last, loader.batch_size, base_seed, loader.worker_init_fn, i,
                    self._n, shared_seed))
                w.start()
                self._index_queues.append(iq)
                self._workers.append(w)
        except BaseException:
            self._shutdown()
            raise
        self._epoch = 0
        self._reset(loader, first=True)

    def _reset(self, loader, first=False):
        self._loader_len = len(loader) if not self._is_iterable else None
        self._sampler_iter = None if self._is_iterable else iter(loader._index_sampler)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}          # task index -> (worker,) or (worker, data) once it arrived early
        self._outstanding = 0
        self._active = [True] * self._n
        self._cycle = itertools.cycle(range(self._n))
        # A datapipe draws a shared seed at every reset, the first one included (PyTorch's
        # _BaseDataLoaderIter._reset does; the workers started with the one drawn before), so
        # the loader's generator advances as PyTorch's and worker shuffles match torch's.
        shared_seed = _seed_datapipe_epoch(loader)
        if not first:                 # persistent workers: restart their dataset iterators
            self._epoch += 1
            for q in self._index_queues:
                q.put((None, (self._epoch, shared_seed)))
            pending = self._n
            while pending:
                idx, data = self._get()
                if idx is None and data == ("resumed", self._epoch):
                    pending -= 1
        for _ in range(self._prefetch * self._n):
            self._put_task()

    def _put_task(self):
        if self._sampler_iter is not None:
            what = next(self._sampler_iter, _IterationEnd)
            if what is _IterationEnd:
                return
        else:
            what = None
        for _ in range(self._n):
            w = next(self._cycle)
            if self._active[w]:
                break
        else:
            return
        self._index_queues[w].put((self._send_idx, what))
        self._task_info[self._send_idx] = (w,)
        self._send_idx += 1
        self._outstanding += 1

    def _get(self):
        """One (index, data) from the result queue, watching the timeout and the workers."""
        if self._timeout > 0:
            try:
                return self._result_queue.get(timeout=self._timeout)
            except queue.Empty:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
        while True:
            try:
                return self._result_queue.get(timeout=self._POLL_S)
            except queue.Empty:
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    codes = ", ".join(str(w.exitcode) for w in dead)
                    self._shutdown()
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly "
                                       f"(exit code(s) {codes})") from None

    def __iter__(self):
        return self

    def __len__(self):
        return self._loader_len if self._loader_len is not None else len(self._workers)

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._active[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)   # handed out already, or its worker ended
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._deliver(info[1])
            idx, data = self._get()
            if idx is None:              # a late "resumed" answer
                continue
            self._outstanding -= 1
            if isinstance(data, _IterationEnd):
                self._active[data.worker_id] = False
                self._task_info.pop(idx, None)
                continue
            if idx == self._rcvd_idx:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._deliver(data)
            if not self._in_order:
                del self._task_info[idx]
                return self._deliver(data)
            self._task_info[idx] += (data,)

    def _deliver(self, data):
        self._put_task()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown(self):
        if self._shut:
            return
        self._shut = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            for w in self._workers:
                w.join(timeout=5.0)
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)
            for q in self._index_queues + [self._result_queue]:
                q.cancel_join_thread()
                q.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the daemon workers die with us
            pass

    def __del__(self):
        self._shutdown()
