"""Batcher (``batch``), UnBatcher (``unbatch``), Grouper (``groupby``)."""
from collections import defaultdict
from collections.abc import Sized

from .._common import check_unpickable_fn
from .._decorator import functional_datapipe
from ..datapipe import DataChunk, IterDataPipe
from ._len import no_length

__all__ = ["BatcherIterDataPipe", "GrouperIterDataPipe", "UnBatcherIterDataPipe"]


@functional_datapipe("batch")
class BatcherIterDataPipe(IterDataPipe):
    """Consecutive items in batches of ``batch_size`` (a ``wrapper_class``, DataChunk by default);
    the short last batch is dropped with ``drop_last``."""

    def __init__(self, datapipe, batch_size, drop_last=False, wrapper_class=DataChunk):
        if not batch_size > 0:
            raise AssertionError("Batch size is required to be larger than 0!")
        super().__init__()
        self.datapipe = datapipe
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.wrapper_class = wrapper_class

    def __iter__(self):
        batch = []
        for x in self.datapipe:
            batch.append(x)
            if len(batch) == self.batch_size:
                yield self.wrapper_class(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.wrapper_class(batch)

    def __len__(self):
        if isinstance(self.datapipe, Sized):
            n = len(self.datapipe)
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        raise no_length(self)


@functional_datapipe("unbatch")
class UnBatcherIterDataPipe(IterDataPipe):
    """Undo ``unbatch_level`` levels of batching (``-1``: flatten every level of lists)."""

    def __init__(self, datapipe, unbatch_level=1):
        self.datapipe = datapipe
        self.unbatch_level = unbatch_level

    def __iter__(self):
        for element in self.datapipe:
            yield from self._dive(element, self.unbatch_level)

    def _dive(self, element, level):
        if level < -1:
            raise ValueError("unbatch_level must be -1 or >= 0")
        if level == 0:
            yield element
        elif isinstance(element, (list, DataChunk)):
            for item in element:
                yield from self._dive(item, -1 if level == -1 else level - 1)
        elif level == -1:
            yield element
        else:
            raise IndexError(f"unbatch_level {self.unbatch_level} exceeds the depth of the DataPipe")


@functional_datapipe("groupby")
class GrouperIterDataPipe(IterDataPipe):
    """Items grouped by ``group_key_fn`` (a DataChunk per group; ``(key, chunk)`` with ``keep_key``).

    A group is yielded as soon as it reaches ``group_size``; when ``buffer_size`` items are held,
    the biggest group is yielded early (or dropped with ``drop_remaining`` when it is smaller than
    ``guaranteed_group_size``, else RuntimeError); the rest are yielded at the end."""

    def __init__(self, datapipe, group_key_fn, *, keep_key=False, buffer_size=10000, group_size=None,
                 guaranteed_group_size=None, drop_remaining=False):
        check_unpickable_fn(group_key_fn)
        self.datapipe = datapipe
        self.group_key_fn = group_key_fn
        self.keep_key = keep_key
        self.max_buffer_size = buffer_size
        self.buffer_elements = defaultdict(list)
        self.curr_buffer_size = 0
        self.group_size = group_size
        self.guaranteed_group_size = None
        if group_size is not None and buffer_size is not None:
            if not 0 < group_size <= buffer_size:
                raise AssertionError("group_size must be > 0 and <= buffer_size")
            self.guaranteed_group_size = group_size
        if guaranteed_group_size is not None:
            if group_size is None or not 0 < guaranteed_group_size <= group_size:
                raise AssertionError("guaranteed_group_size must be > 0 and <= group_size and group_size must be set")
            self.guaranteed_group_size = guaranteed_group_size
        self.drop_remaining = drop_remaining
        self.wrapper_class = DataChunk

    def _out(self, key, items):
        chunk = self.wrapper_class(items)
        return (key, chunk) if self.keep_key else chunk

    def _evict_biggest(self):
        """Remove the biggest group from the buffer: (key, items) to yield, or None if dropped."""
        key = max(self.buffer_elements, key=lambda k: len(self.buffer_elements[k]))
        items = self.buffer_elements.pop(key)
        self.curr_buffer_size -= len(items)
        if self.guaranteed_group_size is not None and len(items) < self.guaranteed_group_size:
            if not self.drop_remaining:
                raise RuntimeError("Failed to group items", str(items))
            return None
        return key, items

    def __iter__(self):
        for x in self.datapipe:
            key = self.group_key_fn(x)
            self.buffer_elements[key].append(x)
            self.curr_buffer_size += 1
            if self.group_size is not None and len(self.buffer_elements[key]) == self.group_size:
                items = self.buffer_elements.pop(key)
                self.curr_buffer_size -= len(items)
                yield self._out(key, items)
            if self.curr_buffer_size == self.max_buffer_size:
                evicted = self._evict_biggest()
                if evicted is not None:
                    yield self._out(*evicted)
        for key in tuple(self.buffer_elements):
            items = self.buffer_elements.pop(key)
            self.curr_buffer_size -= len(items)
            yield self._out(key, items)

    def reset(self):
        self.curr_buffer_size = 0
        self.buffer_elements = defaultdict(list)
