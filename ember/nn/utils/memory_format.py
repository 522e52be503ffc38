"""``convert_conv2d_weight_memory_format`` / ``convert_conv3d_weight_memory_format``: re-lay the
weights of a model's (transposed) convolutions in a memory format (usually channels-last), in
place, so convolutions fed channels-last activations need no layout conversion per call. The
Parameter objects stay the same (their ``.data`` is replaced), so optimizers keep working."""
from __future__ import annotations

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """``module`` with every Conv2d / ConvTranspose2d weight (recursively) in ``memory_format``."""
    from ..modules.conv import Conv2d, ConvTranspose2d
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """``module`` with every Conv3d / ConvTranspose3d weight (recursively) in ``memory_format``."""
    from ..modules.conv import Conv3d, ConvTranspose3d
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
