"""``ember.nn.qat``: torch's older spelling of ``ember.ao.nn.qat`` (the same classes)."""
import sys as _sys

from ember.ao.nn.qat import Linear, Conv1d, Conv2d, Conv3d, Embedding, EmbeddingBag  # noqa: F401
from ember.ao.nn.qat import dynamic  # noqa: F401

_sys.modules[f"{__name__}.dynamic"] = dynamic
del _sys
