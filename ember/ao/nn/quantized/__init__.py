"""``ember.ao.nn.quantized``: modules that compute on quantized tensors (``dynamic``: float in,
float out, int8 weights; the others: quantized tensors in and out)."""
from . import dynamic  # noqa: F401
from . import functional  # noqa: F401
from .modules import LinearPackedParams  # noqa: F401
from .modules.static import Quantize, DeQuantize, Linear, Conv1d, Conv2d, Conv3d, ReLU  # noqa: F401
from .modules.functional_modules import FloatFunctional, FXFloatFunctional, QFunctional  # noqa: F401,E402
from .modules.rnn import LSTM  # noqa: F401,E402
from .modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401,E402
from .modules.activation import (ReLU6, Hardswish, ELU, LeakyReLU, Sigmoid, Dropout, BatchNorm2d,  # noqa: F401,E402
                                 BatchNorm3d)
from ember.nn import MaxPool2d  # noqa: F401,E402  (torch's nnq.MaxPool2d is the float module: it runs on quantized tensors)
from .modules.normalization import (LayerNorm, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,  # noqa: F401,E402,E501
                                    Softmax)
from .modules.embedding_ops import Embedding, EmbeddingBag  # noqa: F401,E402
