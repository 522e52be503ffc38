"""``ember.ao.nn.intrinsic``: fused float modules made by ``fuse_modules`` / ``fuse_modules_qat``
(a conv or linear layer followed by batch norm and/or ReLU, run as one unit by quantization),
as torch's ``torch.ao.nn.intrinsic``. ``.qat``: their quantization-aware-training versions;
``.quantized``: the quantized ones."""
from __future__ import annotations

from ember import nn


class _FusedModule(nn.Sequential):
    """A Sequential of the modules fused into one quantizable unit."""


def _check(types, mods):
    if tuple(type(m) for m in mods) != types:
        raise AssertionError("Incorrect types for input modules" + "".join(str(type(m)) for m in mods))


class ConvReLU2d(_FusedModule):
    def __init__(self, conv, relu):
        _check((nn.Conv2d, nn.ReLU), (conv, relu))
        super().__init__(conv, relu)


class ConvReLU1d(_FusedModule):
    def __init__(self, conv, relu):
        _check((nn.Conv1d, nn.ReLU), (conv, relu))
        super().__init__(conv, relu)


class ConvReLU3d(_FusedModule):
    def __init__(self, conv, relu):
        _check((nn.Conv3d, nn.ReLU), (conv, relu))
        super().__init__(conv, relu)


class BNReLU2d(_FusedModule):
    def __init__(self, batch_norm, relu):
        _check((nn.BatchNorm2d, nn.ReLU), (batch_norm, relu))
        super().__init__(batch_norm, relu)


class BNReLU3d(_FusedModule):
    def __init__(self, batch_norm, relu):
        _check((nn.BatchNorm3d, nn.ReLU), (batch_norm, relu))
        super().__init__(batch_norm, relu)


class LinearReLU(_FusedModule):
    def __init__(self, linear, relu):
        _check((nn.Linear, nn.ReLU), (linear, relu))
        super().__init__(linear, relu)


class ConvBn2d(_FusedModule):
    """Conv2d then BatchNorm2d (training mode: QAT folds the batch norm as it trains)."""

    def __init__(self, conv, bn):
        _check((nn.Conv2d, nn.BatchNorm2d), (conv, bn))
        super().__init__(conv, bn)


class ConvBnReLU2d(_FusedModule):
    def __init__(self, conv, bn, relu):
        _check((nn.Conv2d, nn.BatchNorm2d, nn.ReLU), (conv, bn, relu))
        super().__init__(conv, bn, relu)


def __getattr__(name):
    if name in ("qat", "quantized"):
        import importlib
        mod = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = mod
        return mod
    if name in ("ConvBn1d", "ConvBn3d", "ConvBnReLU1d", "ConvBnReLU3d", "LinearBn1d"):
        raise NotImplementedError(f"ember.quantization: the fused module ember.ao.nn.intrinsic.{name} (a "
                                  "quantization-aware-training conv/linear + batch norm fusion) is not supported "
                                  "(ConvBn2d / ConvBnReLU2d are)")
    raise AttributeError(f"module 'ember.ao.nn.intrinsic' has no attribute '{name}'")
