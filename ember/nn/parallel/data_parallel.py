"""``DataParallel``: PyTorch splits a batch over several GPUs of one process. ember has no
multi-GPU scatter, so with no (or one) device it runs ``module`` as is -- what PyTorch does
when there is no GPU; several devices raise. For several CPU processes use
``DistributedDataParallel``."""
from __future__ import annotations

from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        from ... import cuda
        self.module = module
        self.dim = dim
        if device_ids is None:
            device_ids = list(range(cuda.device_count())) if cuda.is_available() else []
        self.device_ids = [d.index if hasattr(d, "index") else int(d) for d in device_ids]
        if len(self.device_ids) > 1:
            raise NotImplementedError(f"DataParallel over several GPUs ({self.device_ids}): ember does not scatter a "
                                      f"batch across devices; use one device, or DistributedDataParallel with one "
                                      f"process per device")
        self.output_device = (self.device_ids[0] if self.device_ids else None) if output_device is None \
            else output_device

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """The functional form: ``module(*inputs, **module_kwargs)`` on one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return DataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))
