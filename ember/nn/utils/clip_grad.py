"""Gradient clipping by total norm or by value (in place, like ``torch.nn.utils``)."""
from __future__ import annotations

import math

from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _norm(t, norm_type):
    if norm_type == math.inf:
        return t.abs().amax()
    if norm_type == -math.inf:
        return t.abs().amin()
    return t.norm(norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of all ``tensors`` taken together (as if concatenated)."""
    import ember
    tensors = [t for t in _as_list(tensors) if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return ember.tensor(0.0)
    with ember.no_grad():
        norms = [_norm(t.detach(), norm_type) for t in tensors]
        # stack promotes, as PyTorch's: float32 and float64 gradients give a float64 total
        total = _norm(ember.stack(norms), norm_type)
    if error_if_nonfinite and not bool(total.isfinite().all() if hasattr(total, "isfinite")
                                       else math.isfinite(total.item())):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                           "so it cannot be clipped. To disable this error and scale the gradients by the "
                           "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    import ember
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with ember.no_grad():
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = clip_coef.clamp(max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients so that their total ``norm_type`` norm is at most ``max_norm``; returns the
    total norm before clipping."""
    params = _as_list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    if grads:
        clip_grads_with_norm_(params, float(max_norm), total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    import warnings
    warnings.warn("`nn.utils.clip_grad_norm` is now deprecated in favor of `nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient into ``[-clip_value, clip_value]`` in place."""
    import ember
    clip_value = float(clip_value)
    with ember.no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
