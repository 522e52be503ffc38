"""``ember.ao.nn.quantized``: modules that compute on quantized tensors (``dynamic``: float in,
float out, int8 weights; the others: quantized tensors in and out; ``Embedding`` /
``EmbeddingBag``: integer indices in, float rows out)."""
from ember.nn import MaxPool2d  # noqa: F401  (torch's nnq.MaxPool2d is the float module: it takes quantized tensors)
from . import dynamic  # noqa: F401
from . import functional  # noqa: F401
from . import reference  # noqa: F401
from .modules import LinearPackedParams  # noqa: F401
from .modules.static import Quantize, DeQuantize, Linear, ReLU  # noqa: F401
from .modules.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,  # noqa: F401
                           ConvTranspose3d)
from .modules.functional_modules import FloatFunctional, FXFloatFunctional, QFunctional  # noqa: F401
from .modules.rnn import LSTM  # noqa: F401
from .modules.activation import (ReLU6, Hardswish, ELU, LeakyReLU, Sigmoid, Dropout, BatchNorm2d, PReLU,  # noqa: F401
                                 BatchNorm3d)
from .modules.normalization import (LayerNorm, GroupNorm, InstanceNorm1d, InstanceNorm2d,  # noqa: F401
                                    InstanceNorm3d, Softmax)
from .modules.embedding_ops import Embedding, EmbeddingBag  # noqa: F401
from .modules.mha import MultiheadAttention  # noqa: F401
