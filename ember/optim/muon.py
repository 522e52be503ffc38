"""Muon (Keller Jordan, 2024): momentum SGD whose update is orthogonalised.

For a 2-D parameter the (Nesterov) momentum ``B`` is replaced by an approximation of its
"zeroth power" ``U V^T`` (``B = U S V^T``): every singular value pushed towards 1, so each
step moves all directions of the matrix by a similar amount. The approximation is a quintic
Newton-Schulz iteration ``X <- a X + (b A + c A^2) X`` with ``A = X X^T`` and the
coefficients ``(3.4445, -4.7750, 2.0315)`` chosen to maximise the slope at zero (so small
singular values grow fast; the result has singular values roughly in [0.5, 1.5], which
does not hurt training). As in PyTorch, the iteration runs in bfloat16 on the wide
orientation of the matrix (transposed when it has more rows than columns), after scaling
it to Frobenius norm 1 (so the spectral norm is at most 1).

The step, exactly as ``torch.optim.Muon``: ``B <- lerp(B, g, 1 - momentum)``; the update is
``lerp(g, B, momentum)`` with ``nesterov`` (else ``B``); decoupled weight decay
``p *= 1 - lr * weight_decay``; then ``p -= lr' * NS(update)`` with ``lr'`` adjusted to the
shape ``(A, B)``: ``sqrt(max(1, A / B))`` ("original", the default) or
``0.2 * sqrt(max(A, B))`` ("match_rms_adamw", Moonshot's rule that lets AdamW's learning rate
and weight decay be reused).
"""
from __future__ import annotations

import math

from .optimizer import Optimizer, _get_value

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps):
    """The Newton-Schulz orthogonalisation of a 2-D ``grad`` (bfloat16 result)."""
    from .. import addmm
    from ..linalg import vector_norm
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = grad.bfloat16()
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    x = x.div_(vector_norm(x).clamp(min=eps))     # the Frobenius norm, as x.norm()
    for _ in range(ns_steps):
        gram = x @ x.T
        poly = addmm(gram, gram, gram, beta=b, alpha=c)
        x = addmm(x, poly, x, beta=a)
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, param_shape):
    """The learning rate scaled to the matrix shape (see the module docstring)."""
    A, B = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, A / B))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(A, B))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS, ns_steps=DEFAULT_NS_STEPS,
                 adjust_lr_fn=None):
        from ..tensor import Tensor
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.size()}")

    def step(self, closure=None):
        """One Muon step over every parameter with a gradient."""
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        lr = _get_value(group["lr"])
        wd, momentum, nesterov = group["weight_decay"], group["momentum"], group["nesterov"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if getattr(p.dtype, "is_complex", False):
                raise RuntimeError("Muon does not support complex parameters")
            if getattr(p.grad, "is_sparse", False):
                raise RuntimeError("Muon does not support sparse gradients")
            grad = p.grad
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(grad)
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if nesterov else buf
            update = _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
            adjusted = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
            p.mul_(1 - lr * wd)
            p.add_(update, alpha=-adjusted)
