"""``ember.nn.quantized``: torch's older spelling of ``ember.ao.nn.quantized`` (same classes)."""
from ember.ao.nn.quantized import *  # noqa: F401,F403
from ember.ao.nn.quantized import LinearPackedParams, Quantize, DeQuantize, Linear, Conv1d, Conv2d, Conv3d, ReLU  # noqa: F401,E501
from . import dynamic  # noqa: F401
from . import functional  # noqa: F401
from ember.ao.nn.quantized import FloatFunctional, FXFloatFunctional, QFunctional, LSTM  # noqa: F401,E402
from ember.ao.nn.quantized import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401,E402
from ember.ao.nn.quantized import (ReLU6, Hardswish, ELU, LeakyReLU, Sigmoid, Dropout, BatchNorm2d,  # noqa: F401,E402
                                  BatchNorm3d)
from ember.ao.nn.quantized import (LayerNorm, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,  # noqa: F401,E402,E501
                                  Softmax)
from ember.ao.nn.quantized import Embedding, EmbeddingBag  # noqa: F401,E402
