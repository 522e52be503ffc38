"""ember.nn.utils: gradient clipping, parameter/vector conversion, rnn helpers."""
from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters"]
