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
    quirk torch keeps), with torch's backward formula."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        return _cross_map_lrn2d().apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _lua_scale(x, size, alpha, k):
    """Lua's running window sum of squares over channels (numpy, (N, C, H, W)), scaled:
    ``k + alpha / size * window``."""
    import numpy as np
    c = x.shape[1]
    pre_pad = int((size - 1) / 2 + 1)
    csum = np.cumsum(x * x, axis=1)
    upper = csum[:, [min(i + pre_pad - 1, c - 1) for i in range(c)]]
    # from channel pre_pad + 1 on, channel i - pre_pad leaves the sum (channel 0 never does)
    removed = csum[:, [max(i - pre_pad, 0) for i in range(c)]] - csum[:, :1]
    return (upper - removed) * (alpha / size) + k


_LRN_FN = []


def _cross_map_lrn2d():
    """The autograd Function: Lua's forward, and torch's hand-written backward (which is the
    gradient of the textbook centred window, not of the forward's running sum -- torch's result,
    kept)."""
    if _LRN_FN:
        return _LRN_FN[0]
    import numpy as np
    from ...autograd import Function

    class CrossMapLRN2dFunction(Function):
        @staticmethod
        def forward(ctx, input, size, alpha, beta, k):
            ember = _ember()
            x = input.detach().numpy()
            scale = _lua_scale(x, size, alpha, k)
            out = (x * scale ** -beta).astype(x.dtype)
            ctx.lrn = (size, alpha, beta, scale)
            ctx.save_for_backward(input)
            return ember.tensor(out)

        @staticmethod
        def backward(ctx, grad_output):
            ember = _ember()
            size, alpha, beta, scale = ctx.lrn
            x = ctx.saved_tensors[0].detach().numpy()
            g = grad_output.detach().numpy()
            out = x * scale ** -beta
            c = x.shape[1]
            inv = int(size - (size - 1) / 2)
            if inv + c > c + size - 1:
                raise RuntimeError(f"start ({inv}) + length ({c}) exceeds dimension size ({c + size - 1}).")
            padded = np.zeros((x.shape[0], c + size - 1) + x.shape[2:], dtype=np.float64)
            padded[:, inv:inv + c] = g * out / scale
            csum = np.concatenate([np.zeros_like(padded[:, :1]), np.cumsum(padded, axis=1)], axis=1)
            window = csum[:, size:size + c] - csum[:, :c]          # sum of padded[c : c + size]
            grad = scale ** -beta * g - (2 * alpha * beta / size) * x * window
            return ember.tensor(grad.astype(x.dtype)), None, None, None, None

    _LRN_FN.append(CrossMapLRN2dFunction)
    return CrossMapLRN2dFunction


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
