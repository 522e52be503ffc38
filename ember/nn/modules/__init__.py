"""Every ember.nn layer (PyTorch's class names, constructor arguments, parameter names and reprs)."""
from .module import (Module, RemovableHandle, register_module_forward_hook,  # noqa: F401
                     register_module_forward_pre_hook)
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .linear import Identity, Linear, Bilinear
from .flatten import Flatten, Unflatten
from .activation import (Threshold, ReLU, RReLU, Hardtanh, ReLU6, Sigmoid, Hardsigmoid, Tanh, SiLU, Mish,
                         Hardswish, ELU, CELU, SELU, GLU, GELU, Hardshrink, LeakyReLU, LogSigmoid, Softplus,
                         Softshrink, PReLU, Softsign, Tanhshrink, Softmin, Softmax, Softmax2d, LogSoftmax)
from .loss import (L1Loss, NLLLoss, PoissonNLLLoss, GaussianNLLLoss, KLDivLoss, MSELoss, BCELoss,
                   BCEWithLogitsLoss, HingeEmbeddingLoss, SmoothL1Loss, HuberLoss, SoftMarginLoss, CrossEntropyLoss,
                   CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss, MultiLabelSoftMarginLoss,
                   MultiMarginLoss, CTCLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss)
from .distance import PairwiseDistance, CosineSimilarity
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout
from .sparse import Embedding, EmbeddingBag
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import (MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, LPPool1d, LPPool2d, MaxPool3d, AvgPool3d,
                      AdaptiveAvgPool3d, AdaptiveMaxPool3d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .normalization import LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .attention import MultiheadAttention
from .fractional_pool import FractionalMaxPool2d, FractionalMaxPool3d
from .transformer import (TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder,
                          Transformer)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .compat import AdaptiveLogSoftmaxWithLoss, DataParallel, SyncBatchNorm
from .padding import (ConstantPad1d, ConstantPad2d, ConstantPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d, ReflectionPad1d,
                      ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      CircularPad1d, CircularPad2d, CircularPad3d)
from .pixelshuffle import PixelShuffle, PixelUnshuffle, ChannelShuffle
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d
from .fold import Fold, Unfold
from .lazy import (LazyModuleMixin, LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,
                   LazyConvTranspose2d, LazyConvTranspose3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,
                   LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)
from .api_gaps import CrossMapLRN2d, NLLLoss2d, Container, LinearCrossEntropyLoss, LinearCrossEntropyOptions

__all__ = [n for n in dir() if not n.startswith("_") and n[0].isupper()]
