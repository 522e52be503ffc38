"""ember.masked: PyTorch's ``torch.masked`` -- reductions and normalizations that ignore
masked-out elements (``sum(x, dim, mask=m)``, ``softmax(x, dim, mask=m)``, ...; _ops.py) and the
prototype ``MaskedTensor`` (data + mask, ops that combine masks, masked gradients; _tensor.py,
_methods.py)."""
from ._ops import (amax, amin, argmax, argmin, cumprod, cumsum, log_softmax, logaddexp, logsumexp, mean,
                   median, norm, normalize, prod, softmax, softmin, std, sum, var)
from ._tensor import MaskedTensor, as_masked_tensor, is_masked_tensor, masked_tensor
from . import _methods

_methods.install()
where = _methods.masked_where

__all__ = ["amax", "amin", "argmax", "argmin", "as_masked_tensor", "cumprod", "cumsum", "is_masked_tensor",
           "log_softmax", "logaddexp", "logsumexp", "masked_tensor", "MaskedTensor", "mean", "median", "norm",
           "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]
