"""Sampler (indices from a Sampler over the datapipe) and Shuffler (``shuffle``, buffered)."""
import random

from ...sampler import SequentialSampler
from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ._len import no_length, source_len

__all__ = ["SamplerIterDataPipe", "ShufflerIterDataPipe"]


def draw_seed(generator=None) -> int:
    """One int64 from ember's RNG: a Shuffler's seed when none was set (``ember.manual_seed``
    makes unseeded shuffles repeatable), or a seed per random datapipe in ``apply_random_seed``."""
    from ..... import empty, int64
    return int(empty((), dtype=int64).random_(generator=generator).item())


class SamplerIterDataPipe(IterDataPipe):
    """What ``sampler(data_source=datapipe, *sampler_args, **sampler_kwargs)`` yields (indices for
    the index samplers, as in PyTorch)."""

    def __init__(self, datapipe, sampler=SequentialSampler, sampler_args=None, sampler_kwargs=None):
        if not hasattr(type(datapipe), "__len__"):
            raise AssertionError("Sampler class requires input datapipe implemented `__len__`")
        super().__init__()
        self.datapipe = datapipe
        self.sampler_args = () if sampler_args is None else sampler_args
        self.sampler_kwargs = {} if sampler_kwargs is None else sampler_kwargs
        self.sampler_kwargs["data_source"] = self.datapipe
        self.sampler = sampler(*self.sampler_args, **self.sampler_kwargs)

    def __iter__(self):
        return iter(self.sampler)

    def __len__(self):
        if hasattr(type(self.sampler), "__len__"):
            return len(self.sampler)
        raise no_length(self)


@functional_datapipe("shuffle")
class ShufflerIterDataPipe(IterDataPipe):
    """Items in random order through a buffer of ``buffer_size``: once full, each new item replaces
    a random buffered one, which is yielded. Python's ``random.Random`` seeded by ``set_seed`` (or
    from ember's RNG per epoch), so a seeded shuffle gives PyTorch's order. ``set_shuffle(False)``
    passes items through (DataLoader's ``shuffle=`` does that)."""

    def __init__(self, datapipe, *, buffer_size=10000, unbatch_level=0):
        super().__init__()
        self._buffer = []
        if not buffer_size > 0:
            raise AssertionError("buffer_size should be larger than 0")
        self.datapipe = datapipe if unbatch_level == 0 else datapipe.unbatch(unbatch_level=unbatch_level)
        self.buffer_size = buffer_size
        self._enabled = True
        self._seed = None
        self._rng = random.Random()

    def set_shuffle(self, shuffle=True):
        self._enabled = shuffle
        return self

    def set_seed(self, seed: int):
        self._seed = seed
        return self

    def __iter__(self):
        if not self._enabled:
            yield from self.datapipe
            return
        buf = self._buffer
        for x in self.datapipe:
            if len(buf) == self.buffer_size:
                idx = self._rng.randint(0, len(buf) - 1)
                out, buf[idx] = buf[idx], x
                yield out
            else:
                buf.append(x)
        while buf:
            idx = self._rng.randint(0, len(buf) - 1)
            yield buf.pop(idx)

    def __len__(self):
        return source_len(self, self.datapipe)

    def reset(self):
        self._buffer = []
        if self._enabled:
            if self._seed is None:
                self._seed = draw_seed()
            self._rng.seed(self._seed)
            self._seed = None

    def __getstate__(self):
        state = (self.datapipe, self.buffer_size, self._enabled, self._seed, self._buffer, self._rng.getstate(),
                 self._valid_iterator_id, self._number_of_samples_yielded)
        if IterDataPipe.getstate_hook is not None:
            return IterDataPipe.getstate_hook(state)
        return state

    def __setstate__(self, state):
        (self.datapipe, self.buffer_size, self._enabled, self._seed, self._buffer, rng_state,
         self._valid_iterator_id, self._number_of_samples_yielded) = state
        self._rng = random.Random()
        self._rng.setstate(rng_state)
