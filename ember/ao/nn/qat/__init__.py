"""``ember.ao.nn.qat``: quantization-aware-training versions of Linear and Conv2d (float modules
whose weight passes through a fake quantizer on every forward), as ``torch.ao.nn.qat``."""
from .modules import Linear, Conv2d  # noqa: F401


def __getattr__(name):
    if name in ("Conv1d", "Conv3d", "Embedding", "EmbeddingBag"):
        raise NotImplementedError(f"ember.quantization: ember.ao.nn.qat.{name} is not supported (Linear and Conv2d "
                                  f"are)")
    raise AttributeError(f"module 'ember.ao.nn.qat' has no attribute '{name}'")
