"""``ember.distributed.tensor.parallel``: tensor parallelism over a 1-D mesh (torch's API)."""
from .api import parallelize_module
from .loss import loss_parallel
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput, RowwiseParallel,
                    SequenceParallel)

__all__ = ["parallelize_module", "ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput",
           "PrepareModuleOutput", "ParallelStyle", "loss_parallel"]
