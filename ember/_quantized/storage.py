"""What a quantized tensor puts where a dense tensor keeps its array.

A quantized tensor is an ``ember.Tensor`` (as in torch), so every op written for
dense tensors accepts it and its kernel reads ``tensor._data``. Those kernels
would compute on the integers as if they were the values -- a silent wrong
answer -- so ``_data`` is a ``QuantizedStorage``: it answers the shape the
dispatcher reads without looking at values, and any other use (numpy's array
protocols, attribute reads, indexing, arithmetic) raises torch's error for an
op without a QuantizedCPU kernel, naming the op (found on the stack, as for
sparse tensors). The integers live in the tensor's ``_irepr``.
"""
from __future__ import annotations

from .._refusing_storage import RefusingStorage

# ops torch 2.13 runs on quantized tensors that ember does not (yet): a clear
# NotImplementedError instead of torch's "no kernel" error, which would be wrong for them
TORCH_HAS_QUANTIZED_KERNEL = frozenset((
    "relu", "relu_", "cat", "stack", "max", "min", "mean", "sort", "topk", "flip", "clamp", "hardtanh",
    "sigmoid", "tanh", "max_pool2d", "max_pool1d", "avg_pool2d", "adaptive_avg_pool2d", "index_select",
    "masked_fill", "masked_fill_", "fill_", "copy_", "repeat", "as_strided", "expand", "chunk", "split",
    "unbind", "eq", "ne", "lt", "le", "gt", "ge", "getitem", "setitem", "upsample_nearest2d",
    "interpolate", "hardswish", "leaky_relu", "elu", "gelu", "layer_norm", "group_norm", "instance_norm",
    "flatten", "reshape", "view", "transpose", "permute", "squeeze", "unsqueeze", "select", "narrow",
    "slice", "clone", "contiguous", "t", "detach", "dequantize", "empty_like", "quantized_max_pool2d"))


def _running_op():
    from ..sparse._storage import _running_op as find
    return find()


def quantized_unsupported(what=None):
    op = _running_op()
    name = getattr(op, "name", None)
    if name is not None and name in TORCH_HAS_QUANTIZED_KERNEL:
        return NotImplementedError(
            f"ember.quantization: '{name}' on a quantized tensor is not supported (ember runs views, indexing, "
            f"clone, contiguous, relu, cat, stack, max, min, mean, sort, topk, clamp, flip, sigmoid, tanh, pooling, "
            f"nearest "
            f"upsampling, dequantize and int_repr on quantized tensors); dequantize() first")
    if name is not None:
        return NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the 'QuantizedCPU' backend. ember has no "
            f"quantized kernel for '{name}'; call .dequantize() on the quantized tensor first.")
    return NotImplementedError(
        f"ember.quantization: {what or 'this operation'} is not supported for a quantized tensor: it has no "
        f"dense data (dense ops, ember.compile and numpy conversion do not take quantized tensors); call "
        f".dequantize() first.")


class QuantizedStorage(RefusingStorage):
    """The ``_data`` of a quantized tensor: its shape, and an error for any other use."""

    __slots__ = ("shape", "ndim")

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)

    def _fail(self, what):
        raise quantized_unsupported(what)

    def __repr__(self):
        return f"<quantized storage of shape {self.shape}>"

