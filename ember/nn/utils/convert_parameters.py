"""Flatten parameters into one vector and back."""
from __future__ import annotations

from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, old_device):
    if old_device is None:
        return param.device
    if param.device != old_device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_device


def parameters_to_vector(parameters):
    import ember
    device = None
    vec = []
    for param in parameters:
        device = _check_same_device(param, device)
        vec.append(param.view(-1))
    return ember.cat(vec)


def vector_to_parameters(vec, parameters):
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected ember.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
