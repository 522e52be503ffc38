"""Traceable stand-ins for standard-library functions that compiled code calls and dynamo could
not trace (``polyfill.substitute_in_graph``): C helpers (``collections.Counter``'s counting loop,
``heapq``) and ``copy.copy`` (its dispatch table is keyed by types). Instead of a graph break at
the call, dynamo traces these. Each computes what its original does, step for step, over the
same protocol calls (``get``, ``__setitem__``, ``<`` between items), so objects overriding them
see the same calls. Run eagerly, nothing changes: the originals are called."""
from __future__ import annotations

import collections
import copy as _copy
import heapq
import types

from .exc import graph_break
from .polyfill import substitute_in_graph


@substitute_in_graph(collections._count_elements, skip_signature_check=True)
def _count_elements(mapping, iterable):
    """``collections.Counter.update``'s counting loop (C in CPython: ``_collections._count_elements``)."""
    mapping_get = mapping.get
    for elem in iterable:
        mapping[elem] = mapping_get(elem, 0) + 1


def _check_list(heap, name, first_of_two):
    """The C functions' argument check (a list or a subclass), with their message."""
    if not isinstance(heap, list):
        raise TypeError(f"{name}() argument{' 1' if first_of_two else ''} must be list, not {type(heap).__name__}")


# heapq: the C module (_heapq) replaces heapq's public functions, but heapq keeps its Python
# sift helpers (_siftdown, _siftup and their max-heap forms), which make the same comparisons
# (``<`` between items) in the same order as the C code: the stand-ins are heapq's own bodies.
@substitute_in_graph(heapq.heappush, skip_signature_check=True)
def heappush(heap, item):
    _check_list(heap, "heappush", True)
    heap.append(item)
    heapq._siftdown(heap, 0, len(heap) - 1)


@substitute_in_graph(heapq.heappushpop, skip_signature_check=True)
def heappushpop(heap, item):
    _check_list(heap, "heappushpop", True)
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        heapq._siftup(heap, 0)
    return item


def _pop(heap, name, siftup):
    _check_list(heap, name, False)
    if not heap:
        raise IndexError("index out of range")
    last = heap.pop()
    if heap:
        top = heap[0]
        heap[0] = last
        siftup(heap, 0)
        return top
    return last


def _replace(heap, item, name, siftup):
    _check_list(heap, name, True)
    if not heap:
        raise IndexError("index out of range")
    top = heap[0]
    heap[0] = item
    siftup(heap, 0)
    return top


def _heapify(x, name, siftup):
    _check_list(x, name, False)
    for i in reversed(range(len(x) // 2)):
        siftup(x, i)


@substitute_in_graph(heapq.heappop, skip_signature_check=True)
def heappop(heap):
    return _pop(heap, "heappop", heapq._siftup)


@substitute_in_graph(heapq._heappop_max, skip_signature_check=True)
def _heappop_max(heap):
    return _pop(heap, "_heappop_max", heapq._siftup_max)


@substitute_in_graph(heapq.heapreplace, skip_signature_check=True)
def heapreplace(heap, item):
    return _replace(heap, item, "heapreplace", heapq._siftup)


@substitute_in_graph(heapq._heapreplace_max, skip_signature_check=True)
def _heapreplace_max(heap, item):
    return _replace(heap, item, "_heapreplace_max", heapq._siftup_max)


@substitute_in_graph(heapq.heapify, skip_signature_check=True)
def heapify(x):
    _heapify(x, "heapify", heapq._siftup)


@substitute_in_graph(heapq._heapify_max, skip_signature_check=True)
def _heapify_max(x):
    _heapify(x, "_heapify_max", heapq._siftup_max)


# copy.copy: the module's dispatch table is a dict keyed by types, which the trace does not
# index; the stand-in makes the same choice for the types a compiled frame copies (containers
# by their own copy, immutable values as themselves) and breaks the graph for the rest, where
# the real copy.copy then runs (__copy__, __reduce_ex__).
_COPY_AS_ITSELF = (type(None), int, float, bool, complex, str, tuple, bytes, frozenset, range, slice,
                   type(Ellipsis), types.FunctionType, types.BuiltinFunctionType)


@substitute_in_graph(_copy.copy, skip_signature_check=True)
def copy(x):
    cls = type(x)
    if cls in (list, dict, set, collections.deque):
        return x.copy()
    if cls in _COPY_AS_ITSELF or issubclass(cls, type):
        return x
    graph_break(f"copy.copy of a {cls.__name__}")
    return _copy.copy(x)
