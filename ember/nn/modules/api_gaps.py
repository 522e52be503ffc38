"""nn layers torch keeps for old code: ``CrossMapLRN2d`` (Lua torch's local response norm),
``NLLLoss2d`` and ``Container`` (deprecated aliases), and the new ``LinearCrossEntropyLoss``
(a Linear head fused with cross entropy, ember/nn/_functional_gaps.py)."""
from __future__ import annotations

import warnings

from .loss import NLLLoss, _WeightedLoss
from .module import Module

__all__ = ["CrossMapLRN2d", "NLLLoss2d", "Container", "LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


def _ember():
    import ember
    return ember


class CrossMapLRN2d(Module):
    """Local response normalisation across channels as Lua torch computed it:
    ``x / (k + alpha / size * window_sum(x**2)) ** beta``, where the window follows Lua's running
    sum (``pre_pad = (size - 1) // 2 + 1`` channels ahead; channel 0 never leaves the sum, a
    quirk torch keeps)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        ember = _ember()
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        c = input.shape[1]
        pre_pad = int((self.size - 1) / 2 + 1)
        sq = input * input
        csum = ember.cumsum(sq, 1)
        hi = ember.tensor([min(i + pre_pad - 1, c - 1) for i in range(c)])
        upper = csum.index_select(1, hi)
        # Lua's running sum removes channel i - pre_pad from channel i > pre_pad on: channels
        # 1 .. i - pre_pad (channel 0 stays)
        lo = ember.tensor([max(i - pre_pad, 0) for i in range(c)])
        removed = csum.index_select(1, lo) - csum[:, :1]
        scale = (upper - removed) * (self.alpha / self.size) + self.k
        return input * scale.pow(-self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class NLLLoss2d(NLLLoss):
    """``NLLLoss`` under its deprecated name (for (N, C, H, W) inputs, which NLLLoss takes too)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.", FutureWarning,
                      stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class Container(Module):
    """A Module holding the keyword arguments as submodules (deprecated: subclass Module)."""

    def __init__(self, **kwargs):
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


from .._functional_gaps import LinearCrossEntropyOptions  # noqa: E402


class LinearCrossEntropyLoss(_WeightedLoss):
    """A Linear layer (``in_features -> num_classes * prod(out_features)``, no bias by default)
    followed by cross entropy, computed by ``F.linear_cross_entropy`` (chunked when ``options``
    is given: the logits are never materialised whole)."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        from .linear import Linear
        out_features = tuple(out_features)
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight, None, None, reduction)
        self.num_classes = num_classes
        self.out_features = out_features
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        n_out = num_classes
        for d in out_features:
            n_out *= d
        self.linear = Linear(in_features, n_out, bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):
        from .. import functional as F
        linear_weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        linear_bias = self.linear.bias.reshape((self.num_classes, *self.out_features)) \
            if self.linear.bias is not None else None
        return F.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes},"
                f" out_features={self.out_features}, bias={self.linear.bias is not None},"
                f" reduction={self.reduction}, ignore_index={self.ignore_index},"
                f" label_smoothing={self.label_smoothing}, options={self.options}")
