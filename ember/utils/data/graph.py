"""The graph of a data pipeline: which datapipes feed which (``traverse_dps``).

Found by pickling each datapipe with class-level hooks installed (as PyTorch does): the
``getstate_hook`` keeps only attributes that are datapipes or collections, and the
``reduce_ex_hook`` records every *other* datapipe met and stubs it out, so each level stops at
its direct inputs. A datapipe's own ``__getstate__`` therefore decides what counts as an input
(Forker's container lists only its source, not its children). Lambdas inside are fine: they are
dropped by the getstate hook before pickling reaches them; a datapipe whose custom state still
cannot be pickled falls back to dill when installed.
"""
from __future__ import annotations

import io
import pickle
import warnings
from collections.abc import Collection

from .datapipes.datapipe import HAS_DILL, IterDataPipe, MapDataPipe

__all__ = ["traverse", "traverse_dps"]

DataPipe = IterDataPipe | MapDataPipe


def _stub_unpickler():
    return "STUB"


def _keep_inputs_only(state):
    """The part of a datapipe's state that can hold its inputs: datapipes and collections."""
    kinds = (IterDataPipe, MapDataPipe, Collection)
    if isinstance(state, dict):
        return {k: v for k, v in state.items() if isinstance(v, kinds)}
    if isinstance(state, (tuple, list)):
        return [v for v in state if isinstance(v, kinds)]
    return state if isinstance(state, kinds) else None


def _direct_inputs(scan_obj, only_datapipe: bool, cache: set) -> list:
    found = []

    def reduce_hook(obj):
        if obj is scan_obj or id(obj) in cache:
            raise NotImplementedError       # pickle it normally (scan_obj) / don't report twice
        found.append(obj)
        cache.add(id(obj))
        return _stub_unpickler, ()

    classes = (IterDataPipe, MapDataPipe)
    try:
        for cls in classes:
            cls.set_reduce_ex_hook(reduce_hook)
            if only_datapipe:
                cls.set_getstate_hook(_keep_inputs_only)
        buf = io.BytesIO()
        try:
            pickle.Pickler(buf).dump(scan_obj)
        except (pickle.PickleError, AttributeError, TypeError):
            if not HAS_DILL:
                raise
            import dill
            dill.Pickler(buf).dump(scan_obj)
    finally:
        for cls in classes:
            cls.set_reduce_ex_hook(None)
            if only_datapipe:
                cls.set_getstate_hook(None)
    return found


def _traverse(datapipe, only_datapipe: bool, cache: set) -> dict:
    if not isinstance(datapipe, (IterDataPipe, MapDataPipe)):
        raise RuntimeError(f"Expected `IterDataPipe` or `MapDataPipe`, but {type(datapipe)} is found")
    dp_id = id(datapipe)
    if dp_id in cache:
        return {}
    cache.add(dp_id)
    children = {}
    for item in _direct_inputs(datapipe, only_datapipe, cache.copy()):
        children.update(_traverse(item, only_datapipe, cache.copy()))
    return {dp_id: (datapipe, children)}


def traverse_dps(datapipe) -> dict:
    """``{id(dp): (dp, {id(input): (input, {...}), ...})}`` from the last datapipe back to the
    sources. A datapipe reached along two paths appears under both."""
    return _traverse(datapipe, only_datapipe=True, cache=set())


def traverse(datapipe, only_datapipe=None) -> dict:
    """Deprecated form of ``traverse_dps`` (``only_datapipe=False`` also pickles other attributes)."""
    msg = "`traverse` function is deprecated and will be removed after 1.13. Please use `traverse_dps` instead."
    if not only_datapipe:
        msg += " And, the behavior will be changed to the equivalent of `only_datapipe=True`."
    warnings.warn(msg, FutureWarning, stacklevel=2)
    return _traverse(datapipe, bool(only_datapipe), set())
