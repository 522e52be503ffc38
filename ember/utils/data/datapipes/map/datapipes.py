"""The built-in map-style datapipes: SequenceWrapper, Mapper (``map``), Batcher (``batch``),
Concater (``concat``), Zipper (``zip``), and Shuffler (``shuffle``: an IterDataPipe over a
shuffled permutation of the indices)."""
import copy
import random
import warnings
from collections.abc import Sized

from .._common import check_unpickable_fn
from .._decorator import functional_datapipe
from ..datapipe import DataChunk, IterDataPipe, MapDataPipe
from ..iter._len import no_length

__all__ = ["BatcherMapDataPipe", "ConcaterMapDataPipe", "MapperMapDataPipe", "SequenceWrapperMapDataPipe",
           "ShufflerIterDataPipe", "ZipperMapDataPipe"]


class SequenceWrapperMapDataPipe(MapDataPipe):
    """A sequence or mapping as a MapDataPipe (deep-copied at construction by default)."""

    def __init__(self, sequence, deepcopy=True):
        if deepcopy:
            try:
                self.sequence = copy.deepcopy(sequence)
            except TypeError:
                warnings.warn("The input sequence can not be deepcopied, please be aware of in-place modification "
                              "would affect source data", stacklevel=2)
                self.sequence = sequence
        else:
            self.sequence = sequence

    def __getitem__(self, index):
        return self.sequence[index]

    def __len__(self):
        return len(self.sequence)


def _identity(x):
    return x


@functional_datapipe("map")
class MapperMapDataPipe(MapDataPipe):
    """``fn(datapipe[index])``, computed at each access."""

    def __init__(self, datapipe, fn=_identity):
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(fn)
        self.fn = fn

    def __len__(self):
        return len(self.datapipe)

    def __getitem__(self, index):
        return self.fn(self.datapipe[index])


@functional_datapipe("batch")
class BatcherMapDataPipe(MapDataPipe):
    """Batch ``i`` is items ``i*batch_size`` .. ``(i+1)*batch_size - 1`` (the short last one unless
    ``drop_last``)."""

    def __init__(self, datapipe, batch_size, drop_last=False, wrapper_class=DataChunk):
        if batch_size <= 0:
            raise AssertionError("Batch size is required to be larger than 0!")
        super().__init__()
        self.datapipe = datapipe
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.wrapper_class = wrapper_class

    def __getitem__(self, index):
        batch = []
        try:
            for i in range(index * self.batch_size, (index + 1) * self.batch_size):
                batch.append(self.datapipe[i])
        except IndexError as e:
            if self.drop_last or not batch:
                raise IndexError(f"Index {index} is out of bound.") from e
        return self.wrapper_class(batch)

    def __len__(self):
        if isinstance(self.datapipe, Sized):
            n = len(self.datapipe)
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        raise no_length(self)


def _check_sized_maps(datapipes):
    if len(datapipes) == 0:
        raise ValueError("Expected at least one DataPipe, but got nothing")
    if not all(isinstance(dp, MapDataPipe) for dp in datapipes):
        raise TypeError("Expected all inputs to be `MapDataPipe`")
    if not all(isinstance(dp, Sized) for dp in datapipes):
        raise TypeError("Expected all inputs to be `Sized`")


@functional_datapipe("concat")
class ConcaterMapDataPipe(MapDataPipe):
    """The datapipes end to end: index ``len(a) + i`` is ``b[i]``."""

    def __init__(self, *datapipes):
        _check_sized_maps(datapipes)
        self.datapipes = datapipes

    def __getitem__(self, index):
        offset = 0
        for dp in self.datapipes:
            if index - offset < len(dp):
                return dp[index - offset]
            offset += len(dp)
        raise IndexError(f"Index {index} is out of range.")

    def __len__(self):
        return sum(len(dp) for dp in self.datapipes)


@functional_datapipe("zip")
class ZipperMapDataPipe(MapDataPipe):
    """``(a[i], b[i], ...)``; length of the shortest."""

    def __init__(self, *datapipes):
        _check_sized_maps(datapipes)
        self.datapipes = datapipes

    def __getitem__(self, index):
        out = []
        for dp in self.datapipes:
            try:
                out.append(dp[index])
            except IndexError as e:
                raise IndexError(f"Index {index} is out of range for one of the input MapDataPipes {dp}.") from e
        return tuple(out)

    def __len__(self):
        return min(len(dp) for dp in self.datapipes)


class ShufflerIterDataPipe(IterDataPipe):
    """The items of a MapDataPipe at a random permutation of ``indices`` (all by default), a new
    permutation per epoch: ``random.Random(seed).sample`` as PyTorch, so seeded orders match."""

    def __init__(self, datapipe, *, indices=None):
        super().__init__()
        self.datapipe = datapipe
        self.indices = list(range(len(datapipe))) if indices is None else indices
        self._enabled = True
        self._seed = None
        self._rng = random.Random()
        self._shuffled_indices = self.indices

    def set_shuffle(self, shuffle=True):
        self._enabled = shuffle
        return self

    def set_seed(self, seed: int):
        self._seed = seed
        return self

    def __iter__(self):
        if not self._enabled:
            for idx in self.indices:
                yield self.datapipe[idx]
        else:
            while self._shuffled_indices:
                yield self.datapipe[self._shuffled_indices.pop()]

    def reset(self):
        from ..iter.combinatorics import draw_seed
        if self._enabled and self._seed is None:
            self._seed = draw_seed()
        self._rng.seed(self._seed)
        self._seed = None
        self._shuffled_indices = self._rng.sample(self.indices, len(self.indices))

    def __len__(self):
        return len(self.datapipe)

    def __getstate__(self):
        state = (self.datapipe, self.indices, self._enabled, self._seed, self._rng.getstate(), self._shuffled_indices,
                 self._valid_iterator_id, self._number_of_samples_yielded)
        if IterDataPipe.getstate_hook is not None:
            return IterDataPipe.getstate_hook(state)
        return state

    def __setstate__(self, state):
        (self.datapipe, self.indices, self._enabled, self._seed, rng_state, self._shuffled_indices,
         self._valid_iterator_id, self._number_of_samples_yielded) = state
        self._rng = random.Random()
        self._rng.setstate(rng_state)


MapDataPipe.register_datapipe_as_function("shuffle", ShufflerIterDataPipe)
