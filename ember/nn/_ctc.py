"""Connectionist temporal classification loss (``F.ctc_loss``), written in ember ops.

The loss is ``-log p(target | input)``, summed over every alignment of the target to the input
frames: the forward (alpha) recursion over the extended label sequence ``blank, l1, blank, l2,
..., blank`` runs in log space, one step per frame (a Python loop over T). Because it is plain
ops, autograd differentiates it (no hand-written backward), fake tensors propagate shapes
through it and the compiler traces it (unrolled over T).

Design notes:

* Every shape comes from the tensors' shapes, never from their data: the target axis is the
  padded targets' width (or, for concatenated targets, the longest target when the lengths can
  be read, else the concatenation's length), and per-sample input/target lengths act as masks.
  A sample stops its recursion once ``t >= input_length`` (its alpha is carried unchanged), so
  the end state holds ``alpha`` at the sample's last frame.
* Checks that need data (length ranges, target values, the concatenation's length) run when the
  data can be read: always for Python lengths, in eager mode for tensors (a traced or compiled
  call skips them, as ``histc``'s range check).
* Log-sum-exp of unreachable states (all ``-inf``) yields ``-inf`` with a zero gradient (never
  ``0 * inf``), so they cannot poison the gradient of reachable ones.
* PyTorch's backward returns ``exp(log_probs) - posterior`` for the frames ``t <
  input_length``, not the derivative ``-posterior`` of the loss w.r.t. ``log_probs``: it assumes
  the input came from ``log_softmax``, through which both give the same gradient to the logits.
  ember adds ``S - S.detach()`` (S the sum of ``exp(log_probs)`` over those frames), which is 0
  in value and ``exp(log_probs)`` in gradient, so ``log_probs.grad`` is PyTorch's too.
* An infeasible sample (no alignment: the target needs more frames than the input has) has an
  infinite loss; like PyTorch its gradient is NaN on all of the sample's frames (in eager mode,
  see ``_nan_grad_of_infeasible``; a traced call has NaN in the entries of its last frame that
  the end states read), and ``zero_infinity`` turns both the loss and its gradient into zeros.
* A target label equal to ``blank`` is outside CTC's definition (PyTorch's docs forbid it):
  the loss still follows PyTorch's recursion, but PyTorch's hand-written backward then differs
  from the loss's derivative (when such a label ends the target), which ember's gradient stays.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..ops import api
from ..tensor import Tensor

_NEG_INF = float("-inf")


def _readable(t):
    """Whether ``t``'s values can be read now (eager numpy data, no tracing/fake mode active)."""
    from .._state import STATE
    return not STATE.modes and type(t._data) is np.ndarray


def _lengths(v, name, n, device):
    """``input_lengths``/``target_lengths`` as an int64 tensor of shape (n,), and their values as a
    list when they can be read (else None)."""
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point or v.dtype.is_complex or v.dtype is _t.bool_:
            raise RuntimeError(f"{name} must be integral (got a {v.dtype} tensor)")
        lens = v.reshape(-1).to(_t.int64)
        values = lens.tolist() if _readable(lens) else None
    else:
        if isinstance(v, numbers.Integral):
            v = [v]
        try:
            values = [int(x) for x in v]
        except TypeError:
            raise TypeError(f"ctc_loss(): {name} must be a tensor or a sequence of ints, not "
                            f"{type(v).__name__}") from None
        lens = api.tensor(values, dtype=_t.int64, device=device)
    if tuple(lens.shape) != (n,):
        raise RuntimeError(f"{name} must be of size batch_size (expected {n} lengths, got {lens.numel()})")
    return lens, values


def _lse(*xs):
    """log(sum(exp(x))) of same-shaped tensors: the shift is a constant for autograd, and an
    all ``-inf`` set gives ``-inf`` with a zero gradient."""
    m = xs[0]
    for x in xs[1:]:
        m = api.maximum(m, x)
    m = m.detach()
    m = api.where(m == _NEG_INF, 0.0, m)
    total = api.exp(xs[0] - m)
    for x in xs[1:]:
        total = total + api.exp(x - m)
    some = total > 0
    return api.where(some, m + api.log(api.where(some, total, 1.0)), _NEG_INF)


def _nan_grad_of_infeasible(log_probs, nll, frames):
    """Zeros of shape (N,) (None when there is nothing to do) whose gradient puts NaN into
    ``log_probs`` on every frame ``t < input_length`` of each infeasible sample (infinite
    ``nll``), as PyTorch's backward does (the recursion alone leaves NaN only in the last frame).
    sqrt(0 * x) is 0 with an inf * 0 = NaN derivative; the ``where`` keeps it off every other
    sample and frame. Eager only (the data must be read to know whether any sample is
    infeasible): a traced call keeps the recursion's NaN."""
    if not log_probs.requires_grad or not _readable(nll):
        return None
    infeasible = (nll == float("inf")).detach()
    if not bool(infeasible.any()):
        return None
    poison = (frames & infeasible.unsqueeze(0)).unsqueeze(2)                  # (T, N, 1)
    probe = api.where(poison, api.exp(log_probs), 0.0)
    return api.sqrt(probe * 0.0).sum((0, 2))


def _padded_targets(targets, tl, tl_values, n, device):
    """(N, S) targets from padded or concatenated targets, S the target axis' width."""
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise RuntimeError(f"Expected tensor to have size {n} at dimension 0, but got size {targets.shape[0]} "
                               f"for argument #2 'targets' (padded targets need one row per batch element)")
        s = targets.shape[1]
        if tl_values is not None and tl_values and max(tl_values) > s:
            raise RuntimeError(f"Expected tensor to have size at least {max(tl_values)} at dimension 1, but got "
                               f"size {s} for argument #2 'targets' (a target length exceeds the padded targets' "
                               f"width)")
        return targets
    total = targets.shape[0]
    if tl_values is not None and sum(tl_values) != total:
        raise RuntimeError(f"Expected tensor to have size {sum(tl_values)} at dimension 0, but got size {total} for "
                           f"argument #2 'targets' (concatenated targets must hold sum(target_lengths) labels)")
    s = max(tl_values, default=0) if tl_values is not None else total
    if s == 0 or total == 0:
        return api.zeros((n, 0), dtype=_t.int64, device=device)
    starts = api.cumsum(tl, 0) - tl
    pos = starts.unsqueeze(1) + api.arange(s, dtype=_t.int64, device=device).unsqueeze(0)
    pos = api.clamp(pos, 0, total - 1)          # past a sample's own labels: masked later
    return api.index_select(targets, 0, pos.reshape(-1)).reshape(n, s)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """See ``ember.nn.functional.ctc_loss``."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise TypeError("ctc_loss(): log_probs and targets must be tensors")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss(): expected log_probs of shape (T, N, C), or (T, C) for one unbatched "
                           f"sequence, but got a {log_probs.ndim}-dimensional tensor of shape "
                           f"{list(log_probs.shape)}")
    if log_probs.dtype not in (_t.float32, _t.float64):
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for \'{log_probs.dtype.legacy_name}\'')
    unbatched = log_probs.ndim == 2
    if unbatched:       # a batch of one; 1-D targets are then its concatenated (whole) target
        log_probs = log_probs.unsqueeze(1)
    if log_probs.numel() == 0:
        raise RuntimeError(f"log_probs tensor must not be empty (got shape {list(log_probs.shape)})")
    if targets.ndim not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional tensor for argument #2 "
                           f"'targets' (pass padded (N, S) targets or the targets concatenated in 1-D)")
    T, N, C = log_probs.shape
    if not isinstance(blank, numbers.Integral) or not 0 <= blank < C:
        raise RuntimeError(f"blank must be in label range [0, {C}), but got {blank}")
    dev, dt = log_probs.device, log_probs.dtype
    il, il_values = _lengths(input_lengths, "input_lengths", N, dev)
    tl, tl_values = _lengths(target_lengths, "target_lengths", N, dev)
    for name, vals in (("input_lengths", il_values), ("target_lengths", tl_values)):
        if vals is not None and vals and min(vals) < 0:
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value {min(vals)}")
    if il_values is not None and il_values and max(il_values) > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {max(il_values)} "
                           f"(log_probs has {T} time steps)")
    if targets.dtype is not _t.int64:
        targets = targets.to(_t.int64)
    tgt = _padded_targets(targets, tl, tl_values, N, dev)
    S = tgt.shape[1]
    L = 2 * S + 1

    # extended labels: blank, l1, blank, l2, ..., blank (padding beyond a target's length: blank)
    in_target = api.arange(S, dtype=_t.int64, device=dev).unsqueeze(0) < tl.unsqueeze(1)
    if S and _readable(tgt) and tl_values is not None:
        bad = api.where(in_target, (tgt < 0) | (tgt >= C), False)
        if bool(bad.any()):
            v = int(api.masked_select(tgt, bad)[0])
            raise RuntimeError(f"ctc_loss(): targets must be class indices in [0, {C}), but got {v}")
    labels = api.clamp(api.where(in_target, tgt, blank), 0, C - 1)
    blanks = api.full((N, S), blank, dtype=_t.int64, device=dev)
    ext = api.cat([api.stack([blanks, labels], 2).reshape(N, 2 * S),
                   api.full((N, 1), blank, dtype=_t.int64, device=dev)], 1)
    # a label may be reached from two states back unless it repeats the label there (blanks
    # always do): PyTorch's rule, which also decides for labels equal to blank
    no = api.full((N, min(2, L)), False, dtype=_t.bool_, device=dev)
    skip = api.cat([no, api.narrow(ext, 1, 2, L - 2) != api.narrow(ext, 1, 0, L - 2)], 1) if L > 2 else no
    lp_ext = api.gather(log_probs, 2, ext.unsqueeze(0).expand(T, N, L))        # (T, N, L)

    # alpha before the first frame: the empty prefix, in state 0 with probability 1
    alpha = api.cat([api.zeros((N, 1), dtype=dt, device=dev), api.full((N, L - 1), _NEG_INF, dtype=dt, device=dev)], 1)
    pad = api.full((N, 2), _NEG_INF, dtype=dt, device=dev)
    for t in range(T):
        prev = api.cat([pad, alpha], 1)
        stay, step = alpha, api.narrow(prev, 1, 1, L)
        jump = api.where(skip, api.narrow(prev, 1, 0, L), _NEG_INF)
        new = _lse(stay, step, jump) + api.select(lp_ext, 0, t)
        alpha = api.where((il > t).unsqueeze(1), new, alpha)

    # end in the last label or the blank after it
    end = (2 * tl).unsqueeze(1)
    last_blank = api.gather(alpha, 1, end)
    last_label = api.where(tl.unsqueeze(1) > 0, api.gather(alpha, 1, api.clamp(end - 1, 0, None)), _NEG_INF)
    if zero_infinity:
        nll = -_lse(last_blank, last_label).squeeze(1)
    else:
        # unguarded: an infeasible sample (both ends -inf) gets an infinite loss whose gradient
        # is NaN (0 / 0 in log's backward), as PyTorch's
        m = api.maximum(last_blank, last_label).detach()
        m = api.where(api.isinf(m), 0.0, m)
        nll = -(m + api.log(api.exp(last_blank - m) + api.exp(last_label - m))).squeeze(1)

    # PyTorch's gradient convention (see the module notes): + exp(log_probs) on the frames used.
    # Subtracting the zero keeps nll's sign of zero (-0.0 - 0.0 is -0.0, -0.0 + 0.0 is not)
    frames = api.arange(T, dtype=_t.int64, device=dev).unsqueeze(1) < il.unsqueeze(0)     # (T, N)
    mass = api.where(frames.unsqueeze(2), api.exp(log_probs), 0.0).sum((0, 2))
    fixed = mass.detach()
    loss = nll - api.where(api.isfinite(fixed), fixed - mass, 0.0)
    if zero_infinity:
        loss = api.where(nll == float("inf"), 0.0, loss)
    else:
        poison = _nan_grad_of_infeasible(log_probs, nll, frames)
        if poison is not None:
            loss = loss - poison            # x - 0.0 keeps a -0.0 loss (x + 0.0 would not)
    if reduction == "mean":
        return (loss / api.clamp(tl, 1, None).to(dt)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if unbatched else loss
