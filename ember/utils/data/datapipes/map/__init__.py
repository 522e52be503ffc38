"""The built-in map-style datapipes, by PyTorch's short names."""
from .datapipes import BatcherMapDataPipe as Batcher
from .datapipes import ConcaterMapDataPipe as Concater
from .datapipes import MapperMapDataPipe as Mapper
from .datapipes import SequenceWrapperMapDataPipe as SequenceWrapper
from .datapipes import ShufflerIterDataPipe as Shuffler
from .datapipes import ZipperMapDataPipe as Zipper

__all__ = ["Batcher", "Concater", "Mapper", "SequenceWrapper", "Shuffler", "Zipper"]
