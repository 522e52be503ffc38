"""Concater (``concat``), Forker (``fork``), Demultiplexer (``demux``), Multiplexer (``mux``),
Zipper (``zip``).

``fork``/``demux`` return child datapipes that read one source through a shared container: the
container buffers what the fastest child read and the slowest has not (at most ``buffer_size``
items, BufferError beyond; ``-1``: unbounded, with a warning). All children share one iterator
id with the container: starting a child again after every child has started restarts them all
(with a warning if some were not exhausted).
"""
import copy as copymodule
import warnings
from collections import deque
from collections.abc import Sized

from .._common import StreamWrapper, check_unpickable_fn
from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ._len import no_length

__all__ = ["ConcaterIterDataPipe", "DemultiplexerIterDataPipe", "ForkerIterDataPipe", "MultiplexerIterDataPipe",
           "ZipperIterDataPipe"]


@functional_datapipe("concat")
class ConcaterIterDataPipe(IterDataPipe):
    """The items of each datapipe in turn."""

    def __init__(self, *datapipes):
        if len(datapipes) == 0:
            raise ValueError("Expected at least one DataPipe, but got nothing")
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("Expected all inputs to be `IterDataPipe`")
        self.datapipes = datapipes

    def __iter__(self):
        for dp in self.datapipes:
            yield from dp

    def __len__(self):
        if all(isinstance(dp, Sized) for dp in self.datapipes):
            return sum(len(dp) for dp in self.datapipes)
        raise no_length(self)


def _no_op(x):
    return x


class _ChildDataPipe(IterDataPipe):
    """One output of ``fork``/``demux``: reads its share from ``main_datapipe``."""

    _is_child_datapipe = True

    def __init__(self, main_datapipe, instance_id: int):
        if not isinstance(main_datapipe, _Container):
            raise AssertionError("main_datapipe must implement _ContainerTemplate")
        self.main_datapipe = main_datapipe
        self.instance_id = instance_id

    def __iter__(self):
        return self.main_datapipe.get_next_element_by_instance(self.instance_id)

    def __len__(self):
        return self.main_datapipe.get_length_by_instance(self.instance_id)

    def _set_main_datapipe_valid_iterator_id(self) -> int:
        """Join the container's current iterator generation, or start a new one (resetting the
        container) when this child already belongs to the current one."""
        main = self.main_datapipe
        if main._valid_iterator_id is None:
            main._valid_iterator_id = 0
        elif main._valid_iterator_id == self._valid_iterator_id:
            main._valid_iterator_id += 1
            if not main.is_every_instance_exhausted():
                warnings.warn("Some child DataPipes are not exhausted when __iter__ is called. We are resetting "
                              "the buffer and each child DataPipe will read from the start again.", UserWarning,
                              stacklevel=4)
            main.reset()
        self._valid_iterator_id = main._valid_iterator_id
        return self._valid_iterator_id

    def _check_valid_iterator_id(self, iterator_id) -> bool:
        return iterator_id == self._valid_iterator_id == self.main_datapipe._valid_iterator_id


class _Container:
    """What a child needs from its container (Forker's or Demultiplexer's)."""

    def get_next_element_by_instance(self, instance_id):
        raise NotImplementedError

    def is_every_instance_exhausted(self) -> bool:
        raise NotImplementedError

    def get_length_by_instance(self, instance_id):
        raise NotImplementedError


def _warn_unbounded(buffer_size, what):
    if buffer_size < 0:
        warnings.warn(f"Unlimited buffer size is set for `{what}`, please be aware of OOM at random places",
                      UserWarning, stacklevel=4)


@functional_datapipe("fork")
class ForkerIterDataPipe(IterDataPipe):
    """``num_instances`` datapipes that each yield every item of ``datapipe`` (the datapipe
    itself for 1). ``copy``: None, ``"shallow"`` or ``"deep"`` copies per child."""

    def __new__(cls, datapipe, num_instances, buffer_size=1000, copy=None):
        if num_instances < 1:
            raise ValueError(f"Expected `num_instances` larger than 0, but {num_instances} is found")
        if num_instances == 1:
            return datapipe
        container = _ForkerIterDataPipe(datapipe, num_instances, buffer_size, copy)
        return [_ChildDataPipe(container, i) for i in range(num_instances)]


class _ForkerIterDataPipe(IterDataPipe, _Container):
    """Buffer of the items between the slowest and the fastest child. ``positions[i]`` is the
    global index of child i's next item; ``buffer[0]`` has global index ``base``."""

    def __init__(self, datapipe, num_instances, buffer_size=1000, copy=None):
        self.main_datapipe = datapipe
        self.num_instances = num_instances
        self.buffer_size = buffer_size
        _warn_unbounded(buffer_size, "fork")
        if copy is None:
            self.copy_fn = _no_op
        elif copy == "shallow":
            self.copy_fn = copymodule.copy
        elif copy == "deep":
            self.copy_fn = copymodule.deepcopy
        else:
            raise ValueError(f"Unknown copy method `{copy}` requested, choose one of None, `shallow` or `deep`.")
        self._init_state()

    def _init_state(self):
        self._source_iter = None
        self.buffer = deque()
        self.base = 0
        self.positions = [0] * self.num_instances
        self.end = None                       # global index where the source ran out
        self._child_stop = [True] * self.num_instances

    def __len__(self):
        return len(self.main_datapipe)

    def get_next_element_by_instance(self, instance_id):
        if self._source_iter is None and self._child_stop[instance_id]:
            self._source_iter = iter(self.main_datapipe)
            self._child_stop = [False] * self.num_instances
        try:
            while not self._child_stop[instance_id]:
                pos = self.positions[instance_id]
                if self.end is not None and pos >= self.end:
                    self._child_stop[instance_id] = True
                    break
                if pos < self.base + len(self.buffer):
                    value = self.buffer[pos - self.base]
                else:
                    try:
                        value = next(self._source_iter)
                    except StopIteration:
                        self.end = pos
                        self._source_iter = None
                        self._child_stop[instance_id] = True
                        break
                    self.buffer.append(value)
                self.positions[instance_id] = pos + 1
                while self.buffer and min(self.positions) > self.base:
                    self.buffer.popleft()
                    self.base += 1
                if self.buffer_size >= 0 and len(self.buffer) > self.buffer_size:
                    raise BufferError(f"ForkerIterDataPipe buffer overflow,buffer size {self.buffer_size} "
                                      "is insufficient.")
                yield self.copy_fn(value)
        finally:
            self._child_stop[instance_id] = True
            if all(self._child_stop):
                self._source_iter = None
                self._cleanup()

    def is_every_instance_exhausted(self) -> bool:
        return self.end is not None and all(self._child_stop)

    def get_length_by_instance(self, instance_id) -> int:
        return len(self.main_datapipe)

    def reset(self):
        self._init_state()

    def __getstate__(self):
        state = (self.main_datapipe, self.num_instances, self.buffer_size, self.copy_fn, self._valid_iterator_id,
                 self._number_of_samples_yielded)
        if IterDataPipe.getstate_hook is not None:
            return IterDataPipe.getstate_hook(state)
        return state

    def __setstate__(self, state):
        (self.main_datapipe, self.num_instances, self.buffer_size, self.copy_fn, self._valid_iterator_id,
         self._number_of_samples_yielded) = state
        self._init_state()

    def _cleanup(self):
        while self.buffer:
            StreamWrapper.close_streams(self.buffer.popleft())


@functional_datapipe("demux")
class DemultiplexerIterDataPipe(IterDataPipe):
    """``num_instances`` datapipes; item ``x`` goes to child ``classifier_fn(x)`` (None: dropped
    with ``drop_none``, else an error)."""

    def __new__(cls, datapipe, num_instances, classifier_fn, drop_none=False, buffer_size=1000):
        if num_instances < 1:
            raise ValueError(f"Expected `num_instances` larger than 0, but {num_instances} is found")
        check_unpickable_fn(classifier_fn)
        container = _DemultiplexerIterDataPipe(datapipe, num_instances, classifier_fn, drop_none, buffer_size)
        return [_ChildDataPipe(container, i) for i in range(num_instances)]


class _DemultiplexerIterDataPipe(IterDataPipe, _Container):
    """A queue per child of the items classified for it but not yet read by it."""

    def __init__(self, datapipe, num_instances, classifier_fn, drop_none, buffer_size):
        self.main_datapipe = datapipe
        self.num_instances = num_instances
        self.buffer_size = buffer_size
        _warn_unbounded(buffer_size, "demux")
        self.classifier_fn = classifier_fn
        self.drop_none = drop_none
        self._init_state()

    def _init_state(self):
        self._source_iter = None
        self.current_buffer_usage = 0
        self.child_buffers = [deque() for _ in range(self.num_instances)]
        self.main_datapipe_exhausted = False
        self._child_stop = [True] * self.num_instances

    def _find_next(self, instance_id):
        """Pull from the source until an item for ``instance_id`` comes (StopIteration at the end)."""
        while True:
            value = next(self._source_iter)
            c = self.classifier_fn(value)
            if c is None and self.drop_none:
                StreamWrapper.close_streams(value)
                continue
            if c is None or c >= self.num_instances or c < 0:
                raise ValueError(f"Output of the classification fn should be between 0 and {self.num_instances - 1}. "
                                 f"{c} is returned.")
            if c == instance_id:
                return value
            self.child_buffers[c].append(value)
            self.current_buffer_usage += 1
            if 0 <= self.buffer_size < self.current_buffer_usage:
                raise BufferError(f"DemultiplexerIterDataPipe buffer overflow, buffer size {self.buffer_size} "
                                  "is insufficient.")

    def get_next_element_by_instance(self, instance_id):
        if self._source_iter is None and self._child_stop[instance_id]:
            self._source_iter = iter(self.main_datapipe)
            self.main_datapipe_exhausted = False
            self._child_stop = [False] * self.num_instances
        try:
            while not self._child_stop[instance_id]:
                if self.child_buffers[instance_id]:
                    self.current_buffer_usage -= 1
                    yield self.child_buffers[instance_id].popleft()
                elif self.main_datapipe_exhausted:
                    self._child_stop[instance_id] = True
                else:
                    try:
                        value = self._find_next(instance_id)
                    except StopIteration:
                        self._child_stop[instance_id] = True
                        self.main_datapipe_exhausted = True
                        self._source_iter = None
                        continue
                    yield value
        finally:
            self._child_stop[instance_id] = True
            if all(self._child_stop):
                self._source_iter = None
            while self.child_buffers[instance_id]:
                self.current_buffer_usage -= 1
                StreamWrapper.close_streams(self.child_buffers[instance_id].popleft())

    def is_every_instance_exhausted(self) -> bool:
        return self.main_datapipe_exhausted and all(self._child_stop)

    def get_length_by_instance(self, instance_id):
        raise TypeError(f"{type(self).__name__}: a demux child has no length (how many items the classifier "
                        "sends to it is known only after iterating)")

    def reset(self):
        self._init_state()

    def __getstate__(self):
        state = (self.main_datapipe, self.num_instances, self.buffer_size, self.classifier_fn, self.drop_none,
                 self._valid_iterator_id, self._number_of_samples_yielded)
        if IterDataPipe.getstate_hook is not None:
            return IterDataPipe.getstate_hook(state)
        return state

    def __setstate__(self, state):
        (self.main_datapipe, self.num_instances, self.buffer_size, self.classifier_fn, self.drop_none,
         self._valid_iterator_id, self._number_of_samples_yielded) = state
        self._init_state()


@functional_datapipe("mux")
class MultiplexerIterDataPipe(IterDataPipe):
    """One item from each datapipe in turn, until the shortest runs out (a round is yielded only
    when every datapipe provided its item)."""

    def __init__(self, *datapipes):
        self.datapipes = datapipes
        self.buffer = []

    def __iter__(self):
        iterators = [iter(dp) for dp in self.datapipes]
        while iterators:
            for it in iterators:
                try:
                    self.buffer.append(next(it))
                except StopIteration:
                    self.buffer.clear()
                    return
            yield from self.buffer
            self.buffer.clear()

    def __len__(self):
        if all(isinstance(dp, Sized) for dp in self.datapipes):
            return min(len(dp) for dp in self.datapipes) * len(self.datapipes)
        raise no_length(self)

    def reset(self):
        self.buffer = []

    def __getstate__(self):
        state = (self.datapipes, self._valid_iterator_id, self._number_of_samples_yielded)
        if IterDataPipe.getstate_hook is not None:
            return IterDataPipe.getstate_hook(state)
        return state

    def __setstate__(self, state):
        self.datapipes, self._valid_iterator_id, self._number_of_samples_yielded = state
        self.buffer = []


@functional_datapipe("zip")
class ZipperIterDataPipe(IterDataPipe):
    """Tuples of one item from each datapipe, until the shortest runs out."""

    def __init__(self, *datapipes):
        if not all(isinstance(dp, IterDataPipe) for dp in datapipes):
            raise TypeError("All inputs are required to be `IterDataPipe` for `ZipIterDataPipe`.")
        super().__init__()
        self.datapipes = datapipes

    def __iter__(self):
        iterators = [iter(dp) for dp in self.datapipes]
        yield from zip(*iterators)

    def __len__(self):
        if all(isinstance(dp, Sized) for dp in self.datapipes):
            return min(len(dp) for dp in self.datapipes)
        raise no_length(self)
