"""ember.utils.data: datasets, samplers, DataLoader (PyTorch's ``torch.utils.data``)."""
from .dataset import (Dataset, IterableDataset, TensorDataset, StackDataset, ConcatDataset, ChainDataset, Subset,
                      random_split)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler,
                      BatchSampler)
from .dataloader import DataLoader, get_worker_info
from .distributed import DistributedSampler
from ._collate import default_collate, default_convert
from .datapipes.datapipe import DataChunk, DFIterDataPipe, IterDataPipe, MapDataPipe
from .datapipes._decorator import (argument_validation, functional_datapipe, guaranteed_datapipes_determinism,
                                   non_deterministic, runtime_validation, runtime_validation_disabled)
from . import datapipes, graph, graph_settings  # noqa: E402

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "get_worker_info",
           "default_collate", "default_convert", "IterDataPipe", "MapDataPipe", "DataChunk", "DFIterDataPipe",
           "functional_datapipe", "argument_validation", "runtime_validation", "runtime_validation_disabled",
           "non_deterministic", "guaranteed_datapipes_determinism"]
