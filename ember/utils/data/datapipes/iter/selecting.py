"""Filter (``filter``): keep the items for which a predicate is True."""
from .._common import StreamWrapper, check_unpickable_fn, validate_input_col
from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe

__all__ = ["FilterIterDataPipe"]


@functional_datapipe("filter")
class FilterIterDataPipe(IterDataPipe):
    """Items with ``filter_fn(item)`` (or of the ``input_col`` columns) True; the predicate must
    return a bool. No ``len()``: the count is unknown until iterated."""

    def __init__(self, datapipe, filter_fn, input_col=None):
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(filter_fn)
        self.filter_fn = filter_fn
        self.input_col = input_col
        validate_input_col(filter_fn, input_col)

    def _apply_filter_fn(self, data):
        if self.input_col is None:
            return self.filter_fn(data)
        if isinstance(self.input_col, (list, tuple)):
            return self.filter_fn(*(data[c] for c in self.input_col))
        return self.filter_fn(data[self.input_col])

    def _returnIfTrue(self, data):  # noqa: N802 - PyTorch's name
        condition = self._apply_filter_fn(data)
        if not isinstance(condition, bool):
            raise ValueError("Boolean output is required for `filter_fn` of FilterIterDataPipe, got",
                             type(condition))
        return condition, data

    def __iter__(self):
        for data in self.datapipe:
            keep, data = self._returnIfTrue(data)
            if keep:
                yield data
            else:
                StreamWrapper.close_streams(data)
