"""Helpers shared by the distributions (torch.distributions.utils)."""
from __future__ import annotations

import numbers
from functools import update_wrapper

import ember

euler_constant = 0.57721566490153286060

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property"]


def broadcast_all(*values):
    """Broadcast tensors together; Python numbers become tensors of the first tensor's dtype
    (the default dtype when all are numbers)."""
    if not all(isinstance(v, (ember.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number or ember.Tensor.")
    if not all(isinstance(v, ember.Tensor) for v in values):
        dtype = ember.get_default_dtype()
        for v in values:
            if isinstance(v, ember.Tensor):
                dtype = v.dtype
                break
        values = [v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=dtype) for v in values]
    return tuple(ember.broadcast_tensors(*values))


def _standard_normal(shape, dtype):
    """N(0, 1) noise from ember's default generator (``ember.manual_seed`` reproduces it)."""
    return ember.randn(tuple(shape), dtype=dtype)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return ember.sigmoid(logits)
    return ember.softmax(logits, dim=-1)


def clamp_probs(probs):
    """Clamp to ``[eps, 1 - eps]`` (eps of the dtype)."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ember.log(ps_clamped) - ember.log1p(-ps_clamped)
    return ember.log(ps_clamped)


def _init_probs_or_logits(dist, probs, logits, *others):
    """The shared ``__init__`` step of the families parameterised by exactly one of ``probs`` /
    ``logits`` (Binomial, NegativeBinomial, Geometric): checks that exactly one is given,
    broadcasts it with ``others`` (e.g. ``total_count``), stores it on ``dist`` as ``probs`` or
    ``logits`` (shadowing that lazy property; the other one is derived on access) and as
    ``dist._param``. Returns ``(param, *others)`` with ``others`` cast to the parameter's dtype.
    ``others`` come first in the broadcast, so a Python-number parameter takes their dtype."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    name, value = ("probs", probs) if probs is not None else ("logits", logits)
    *rest, param = broadcast_all(*others, value)
    setattr(dist, name, param)
    dist._param = param
    return (param, *(r.type_as(param) for r in rest))


def _expand_probs_or_logits(dist, cls, batch_shape, _instance, *others):
    """``Distribution.expand`` for the same families: a ``cls`` instance with the attributes named
    in ``others`` and whichever of ``probs`` / ``logits`` ``dist`` holds expanded to
    ``batch_shape`` (``_param`` follows), validation settings carried over."""
    new = dist._get_checked_instance(cls, _instance)
    batch_shape = tuple(batch_shape)
    for name in others:
        setattr(new, name, getattr(dist, name).expand(batch_shape))
    for name in ("probs", "logits"):
        if name in dist.__dict__:
            setattr(new, name, dist.__dict__[name].expand(batch_shape))
            new._param = new.__dict__[name]
    super(cls, new).__init__(batch_shape, validate_args=False)
    new._validate_args = dist._validate_args
    return new


class lazy_property:
    """Computed on first access (with grad enabled), then cached as an instance attribute."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _solve_tril(L, B):
    """``L^{-1} B`` for lower-triangular ``L`` (broadcast over batch dims).

    ember has no triangular solve, so this is a general solve on ``L.tril()``; the ``tril``
    makes the gradient w.r.t. ``L`` lower-triangular, as torch's ``solve_triangular`` gives.
    """
    L = L.tril()
    shape = ember.broadcast_shapes(tuple(L.shape[:-2]), tuple(B.shape[:-2]))
    return ember.linalg.solve(L.expand(tuple(shape) + tuple(L.shape[-2:])),
                              B.expand(tuple(shape) + tuple(B.shape[-2:])))
