"""``ember.utils.data.datapipes``: composable data pipelines (PyTorch's DataPipes).

``iter`` holds the stream datapipes (``IterableWrapper(range(10)).map(f).shuffle().batch(4)``),
``map`` the indexable ones. ``graph``/``graph_settings`` in ``ember.utils.data`` walk a pipeline
to seed its shufflers and shard it across DataLoader workers.
"""
from . import iter, map  # noqa: A004 - PyTorch's module names
from .datapipe import DataChunk, DFIterDataPipe, IterDataPipe, MapDataPipe

__all__ = ["DataChunk", "DFIterDataPipe", "IterDataPipe", "MapDataPipe", "iter", "map"]
