"""``ember.nn.quantized``: torch's older spelling of ``ember.ao.nn.quantized`` (same classes)."""
from ember.ao.nn.quantized import *  # noqa: F401,F403
from ember.ao.nn.quantized import (LinearPackedParams, Quantize, DeQuantize, Linear, ReLU, Conv1d,  # noqa: F401
                                   Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                                   FloatFunctional, FXFloatFunctional, QFunctional, LSTM, ReLU6, Hardswish, ELU,
                                   LeakyReLU, Sigmoid, Dropout, BatchNorm2d, BatchNorm3d, LayerNorm, GroupNorm,
                                   InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, Softmax, Embedding,
                                   EmbeddingBag, MaxPool2d, PReLU, MultiheadAttention)
from . import dynamic  # noqa: F401
from . import functional  # noqa: F401
