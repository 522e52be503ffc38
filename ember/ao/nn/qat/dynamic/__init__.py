"""``ember.ao.nn.qat.dynamic``: the QAT Linear for *dynamic* quantization: the weight is
fake-quantized as in ``qat.Linear``; the activation's observer must be memoryless (a moving
average with averaging constant 1) because dynamic quantization computes the input's parameters
afresh on each call. ``quantize_dynamic`` turns it into ``quantized.dynamic.Linear``."""
from __future__ import annotations

from ..modules import Linear as _QATLinear

__all__ = ["Linear"]


class Linear(_QATLinear):
    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, qconfig, device, dtype)
        if not _activation_is_memoryless(qconfig):
            raise ValueError("Dynamic QAT requires a memoryless observer.This means a MovingAverage observer with "
                             "averaging constant equal to 1")


def _activation_is_memoryless(qconfig):
    """Whether the qconfig's activation observer keeps no history (averaging constant 1)."""
    act = qconfig.activation()
    obs = getattr(act, "activation_post_process", act)
    return getattr(obs, "averaging_constant", None) == 1
