"""Functions of ``ember.nn.functional`` that call a user's function: dynamo traces through them
like user code (``dynamo.variables.builder.is_inlined_ember_module``), so the user's function is
traced into the graph. Recorded as one operator like the rest of ``F``, a module or lambda
passed as ``distance_function`` broke the graph (torch.compile inlines it)."""
from __future__ import annotations

from ..ops import api as _api

__all__ = ["triplet_margin_with_distance_loss"]


def _F():
    import ember.nn.functional as F   # resolved at call time (this module is imported by it)
    return F


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    if distance_function is None:
        distance_function = _F().pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_swap = distance_function(positive, negative)
        dist_neg = _api.minimum(dist_neg, dist_swap)
    loss = _api.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    return loss
