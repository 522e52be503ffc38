"""``DistributedDataParallelCPU``: PyTorch's old name for DDP over CPU tensors, kept as a
deprecated subclass of ``DistributedDataParallel`` (instantiating it warns, as PyTorch's)."""
from __future__ import annotations

import warnings

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallelCPU"]


class DistributedDataParallelCPU(DistributedDataParallel):
    """Deprecated: use ``DistributedDataParallel`` (which handles CPU tensors)."""

    def __new__(cls, *args, **kwargs):
        warnings.warn("`torch.nn.parallel.DistributedDataParallelCPU` is deprecated, please use "
                      "`torch.nn.parallel.DistributedDataParallel` instead.", FutureWarning, stacklevel=2)
        return super().__new__(cls)
