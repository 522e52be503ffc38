"""ember.nn.utils: gradient clipping, parameter/vector conversion, rnn helpers,
parametrizations, weight / spectral normalization, conv/linear + batch-norm fusion."""
from . import parametrizations, parametrize, prune, rnn, stateless
from .clip_grad import clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .init import skip_init
from .memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format",
           "clip_grad_norm", "clip_grad_norm_", "clip_grads_with_norm_", "clip_grad_value_",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights",
           "get_total_norm", "parameters_to_vector", "parametrizations", "parametrize", "prune",
           "remove_spectral_norm", "remove_weight_norm", "rnn", "skip_init", "spectral_norm", "stateless",
           "vector_to_parameters", "weight_norm"]
