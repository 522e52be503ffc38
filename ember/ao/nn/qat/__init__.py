"""``ember.ao.nn.qat``: quantization-aware-training versions of Linear and Conv1d/2d/3d (float modules
whose weight passes through a fake quantizer on every forward), as ``torch.ao.nn.qat``."""
from .modules import Linear, Conv1d, Conv2d, Conv3d  # noqa: F401


def __getattr__(name):
    if name in ("Embedding", "EmbeddingBag"):
        raise NotImplementedError(f"ember.quantization: ember.ao.nn.qat.{name} is not supported (Linear and the "
                                  f"convolutions are)")
    raise AttributeError(f"module 'ember.ao.nn.qat' has no attribute '{name}'")
