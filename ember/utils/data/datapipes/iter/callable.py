"""Mapper (``map``) and Collator (``collate``): apply a function to each item, or to some columns."""
from ..._collate import default_collate
from .._common import check_unpickable_fn, validate_input_col
from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ._len import source_len

__all__ = ["CollatorIterDataPipe", "MapperIterDataPipe"]


def apply_to_columns(fn, data, input_col, output_col):
    """``fn`` of the whole item, or of ``data[input_col]`` (several columns: ``fn(*cols)``) written
    back to ``input_col`` (several: to the first, the others removed) or to ``output_col``
    (``-1`` appends). Tuples come back as tuples."""
    if input_col is None:
        return fn(data)
    if isinstance(input_col, (list, tuple)):
        result = fn(*(data[c] for c in input_col))
    else:
        result = fn(data[input_col])
    was_tuple = isinstance(data, tuple)
    if was_tuple:
        data = list(data)
    if output_col is None:
        if isinstance(input_col, (list, tuple)):
            data[input_col[0]] = result
            for idx in sorted(input_col[1:], reverse=True):
                del data[idx]
        else:
            data[input_col] = result
    elif output_col == -1:
        data.append(result)
    else:
        data[output_col] = result
    return tuple(data) if was_tuple else data


@functional_datapipe("map")
class MapperIterDataPipe(IterDataPipe):
    """``fn`` applied to each item (or to the ``input_col`` columns, stored in ``output_col``)."""

    def __init__(self, datapipe, fn, input_col=None, output_col=None):
        super().__init__()
        self.datapipe = datapipe
        check_unpickable_fn(fn)
        self.fn = fn
        self.input_col = input_col
        if input_col is None and output_col is not None:
            raise ValueError("`output_col` must be None when `input_col` is None.")
        if isinstance(output_col, (list, tuple)):
            if len(output_col) > 1:
                raise ValueError("`output_col` must be a single-element list or tuple")
            output_col = output_col[0]
        self.output_col = output_col
        validate_input_col(fn, input_col)

    def _apply_fn(self, data):
        return apply_to_columns(self.fn, data, self.input_col, self.output_col)

    def __iter__(self):
        for data in self.datapipe:
            yield self._apply_fn(data)

    def __len__(self):
        return source_len(self, self.datapipe)


@functional_datapipe("collate")
class CollatorIterDataPipe(MapperIterDataPipe):
    """Each item (a batch) through ``collate_fn`` (default: ``default_collate``)."""

    def __init__(self, datapipe, conversion=default_collate, collate_fn=None):
        if collate_fn is not None:
            super().__init__(datapipe, fn=collate_fn)
        elif callable(conversion):
            super().__init__(datapipe, fn=conversion)
        else:
            raise NotImplementedError(
                "ember.utils.data.datapipes: Collator with a dict `conversion` (per-column conversion of "
                "TorchArrow DataFrames) is not supported; pass a callable `collate_fn`")
