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


class ConvBn1d(_FusedModule):
    def __init__(self, conv, bn):
        _check((nn.Conv1d, nn.BatchNorm1d), (conv, bn))
        super().__init__(conv, bn)


class ConvBn3d(_FusedModule):
    def __init__(self, conv, bn):
        _check((nn.Conv3d, nn.BatchNorm3d), (conv, bn))
        super().__init__(conv, bn)


class ConvBnReLU1d(_FusedModule):
    def __init__(self, conv, bn, relu):
        _check((nn.Conv1d, nn.BatchNorm1d, nn.ReLU), (conv, bn, relu))
        super().__init__(conv, bn, relu)


class ConvBnReLU3d(_FusedModule):
    def __init__(self, conv, bn, relu):
        _check((nn.Conv3d, nn.BatchNorm3d, nn.ReLU), (conv, bn, relu))
        super().__init__(conv, bn, relu)


class LinearBn1d(_FusedModule):
    """Linear then BatchNorm1d (QAT folds the batch norm into the linear weight as it trains)."""

    def __init__(self, linear, bn):
        _check((nn.Linear, nn.BatchNorm1d), (linear, bn))
        super().__init__(linear, bn)


class LinearLeakyReLU(_FusedModule):
    def __init__(self, linear, leaky_relu):
        _check((nn.Linear, nn.LeakyReLU), (linear, leaky_relu))
        super().__init__(linear, leaky_relu)


class LinearTanh(_FusedModule):
    def __init__(self, linear, tanh):
        _check((nn.Linear, nn.Tanh), (linear, tanh))
        super().__init__(linear, tanh)


class ConvAdd2d(_FusedModule):
    """Conv2d whose output is added to a second input: ``forward(x1, x2) = add(conv(x1), x2)``
    (``add`` is any callable, e.g. ``operator.add``; it is kept as an attribute, not a submodule)."""

    def __init__(self, conv, add):
        super().__init__(conv)
        self.add = add

    def forward(self, x1, x2):
        return self.add(self[0](x1), x2)


class ConvAddReLU2d(_FusedModule):
    """``relu(add(conv(x1), x2))``, as ConvAdd2d with a ReLU module after the sum."""

    def __init__(self, conv, add, relu):
        super().__init__(conv)
        self.add = add
        self.relu = relu

    def forward(self, x1, x2):
        return self.relu(self.add(self[0](x1), x2))


def __getattr__(name):
    if name in ("qat", "quantized"):
        import importlib
        mod = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'ember.ao.nn.intrinsic' has no attribute '{name}'")
