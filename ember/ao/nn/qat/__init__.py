"""``ember.ao.nn.qat``: quantization-aware-training versions of Linear, Conv1d/2d/3d and Embedding /
EmbeddingBag (float modules whose weight passes through a fake quantizer on every forward), as
``torch.ao.nn.qat``; ``.dynamic``: the Linear for dynamic quantization-aware training."""
from .modules import Linear, Conv1d, Conv2d, Conv3d  # noqa: F401
from .embedding_ops import Embedding, EmbeddingBag  # noqa: F401
from . import dynamic  # noqa: F401
