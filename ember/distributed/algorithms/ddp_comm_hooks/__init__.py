"""Communication hooks for ``DistributedDataParallel.register_comm_hook`` (PyTorch's
``torch.distributed.algorithms.ddp_comm_hooks``): ``default_hooks.allreduce_hook`` (what DDP
does without a hook) and ``default_hooks.fp16_compress_hook`` / ``bf16_compress_hook``
(gradients travel in half precision: half the bytes, at the cost of rounding)."""
from . import default_hooks  # noqa: F401
