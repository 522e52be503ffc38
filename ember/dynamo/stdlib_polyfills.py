"""Traceable stand-ins for the C helpers of the standard library that common Python code calls
(``polyfill.substitute_in_graph``): dynamo traces these where a call into the C function
would break the graph. Each computes what its original does, step for step, over the same
protocol calls (``get``, ``__setitem__``), so a dict subclass overriding them sees the same calls."""
from __future__ import annotations

import collections
import heapq

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


@substitute_in_graph(heapq.heappop, skip_signature_check=True)
def heappop(heap):
    _check_list(heap, "heappop", False)
    if not heap:
        raise IndexError("index out of range")
    last = heap.pop()
    if heap:
        top = heap[0]
        heap[0] = last
        heapq._siftup(heap, 0)
        return top
    return last


@substitute_in_graph(heapq.heapreplace, skip_signature_check=True)
def heapreplace(heap, item):
    _check_list(heap, "heapreplace", True)
    if not heap:
        raise IndexError("index out of range")
    top = heap[0]
    heap[0] = item
    heapq._siftup(heap, 0)
    return top


@substitute_in_graph(heapq.heappushpop, skip_signature_check=True)
def heappushpop(heap, item):
    _check_list(heap, "heappushpop", True)
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        heapq._siftup(heap, 0)
    return item


@substitute_in_graph(heapq.heapify, skip_signature_check=True)
def heapify(x):
    _check_list(x, "heapify", False)
    for i in reversed(range(len(x) // 2)):
        heapq._siftup(x, i)


@substitute_in_graph(heapq._heapify_max, skip_signature_check=True)
def _heapify_max(x):
    _check_list(x, "_heapify_max", False)
    for i in reversed(range(len(x) // 2)):
        heapq._siftup_max(x, i)


@substitute_in_graph(heapq._heapreplace_max, skip_signature_check=True)
def _heapreplace_max(heap, item):
    _check_list(heap, "_heapreplace_max", True)
    if not heap:
        raise IndexError("index out of range")
    top = heap[0]
    heap[0] = item
    heapq._siftup_max(heap, 0)
    return top


@substitute_in_graph(heapq._heappop_max, skip_signature_check=True)
def _heappop_max(heap):
    _check_list(heap, "_heappop_max", False)
    if not heap:
        raise IndexError("index out of range")
    last = heap.pop()
    if heap:
        top = heap[0]
        heap[0] = last
        heapq._siftup_max(heap, 0)
        return top
    return last
