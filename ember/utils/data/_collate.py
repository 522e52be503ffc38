"""default_collate / default_convert: how samples become batches."""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def default_convert(data):
    """Turn numpy arrays (not of strings/objects) into tensors, recursively; leave the rest."""
    from ... import as_tensor
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "USO":
            return data
        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "USO":
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stack a list of samples into a batch: tensors and numpy arrays are stacked along a new first
    dimension, numbers become 1-D tensors (floats as float64, ints as int64), strings stay a list,
    and dicts / tuples / lists / namedtuples are collated field by field."""
    import ember
    elem = batch[0]
    if isinstance(elem, Tensor):
        return ember.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or (isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_))):
        if elem.dtype.kind in "USO":
            raise TypeError(_ERR.format(elem.dtype))
        return default_collate([ember.as_tensor(b) for b in batch])
    if isinstance(elem, bool):
        return ember.tensor(list(batch))
    if isinstance(elem, float):
        return ember.tensor(list(batch), dtype=ember.float64)
    if isinstance(elem, numbers.Integral):
        return ember.tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated) if type(elem) is not dict else collated
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            return type(elem)([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(_ERR.format(type(elem)))
