"""``ember.ao.nn.intrinsic``: fused float modules made by ``fuse_modules`` (a conv or linear layer
followed by ReLU, run as one unit by quantization), as torch's ``torch.ao.nn.intrinsic``."""
from __future__ import annotations

from ember import nn


class _FusedModule(nn.Sequential):
    """A Sequential of the modules fused into one quantizable unit."""


class ConvReLU2d(_FusedModule):
    def __init__(self, conv, relu):
        if type(conv) is not nn.Conv2d or type(relu) is not nn.ReLU:
            raise AssertionError(f"Incorrect types for input modules{type(conv)}{type(relu)}")
        super().__init__(conv, relu)


class LinearReLU(_FusedModule):
    def __init__(self, linear, relu):
        if type(linear) is not nn.Linear or type(relu) is not nn.ReLU:
            raise AssertionError(f"Incorrect types for input modules{type(linear)}{type(relu)}")
        super().__init__(linear, relu)
