"""IterableWrapper: any iterable as the start of a pipeline."""
import copy
import warnings

from ..datapipe import IterDataPipe
from ._len import source_len

__all__ = ["IterableWrapperIterDataPipe"]


class IterableWrapperIterDataPipe(IterDataPipe):
    """Yields the items of ``iterable``; with ``deepcopy=True`` (default) each iteration reads a deep
    copy, so in-place changes to yielded items do not leak into the next epoch."""

    def __init__(self, iterable, deepcopy=True):
        self.iterable = iterable
        self.deepcopy = deepcopy

    def __iter__(self):
        source = self.iterable
        if self.deepcopy:
            try:
                source = copy.deepcopy(self.iterable)
            except TypeError:   # e.g. an iterator over a file: iterate it as it is
                warnings.warn("The input iterable can not be deepcopied, please be aware of in-place "
                              "modification would affect source data.", stacklevel=2)
        yield from source

    def __len__(self):
        return source_len(self, self.iterable)
