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


def _eager_only(fn):
    """``fn`` as ember.compiler.disable makes it -- a graph break, run without capture -- but
    without importing ember.dynamo (when it is not loaded, nothing is being compiled)."""
    import functools
    import sys

    @functools.wraps(fn)
    def eager(*args, **kwargs):
        ef = sys.modules.get("ember.dynamo.eval_frame")
        if ef is None:
            return fn(*args, **kwargs)
        prev = ef.set_eval_frame(None)
        try:
            return fn(*args, **kwargs)
        finally:
            ef.set_eval_frame(prev)
    eager._ember_dynamo_disable = True
    return eager


def _run_eagerly_under_compile():
    """ember.compile must not trace into a MaskedTensor: making one breaks the graph (as any use
    of one does, see MaskedTensor._sparse_layout), and the code runs eagerly."""
    g = globals()
    for name in ("masked_tensor", "as_masked_tensor", "where"):
        g[name] = _eager_only(g[name])


_run_eagerly_under_compile()

__all__ = ["amax", "amin", "argmax", "argmin", "as_masked_tensor", "cumprod", "cumsum", "is_masked_tensor",
           "log_softmax", "logaddexp", "logsumexp", "masked_tensor", "MaskedTensor", "mean", "median", "norm",
           "normalize", "prod", "softmax", "softmin", "std", "sum", "var"]
