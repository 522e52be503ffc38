"""``ember.nn.parallel`` (PyTorch's ``torch.nn.parallel``): ``DistributedDataParallel`` -- one
replica per process, gradients averaged over an ``ember.distributed`` process group during
backward -- and ``DataParallel`` (single device: runs the module as is)."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel
from .cpu_comm import gather, parallel_apply, replicate, scatter, scatter_kwargs
from ._deprecated import DistributedDataParallelCPU

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel", "gather", "parallel_apply", "replicate",
           "scatter", "scatter_kwargs", "DistributedDataParallelCPU"]
