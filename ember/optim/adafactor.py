"""Adafactor (Shazeer & Stern, 2018) with PyTorch's variant of it.

The second moment of a parameter with two or more dims is kept factored: a row factor (the
mean of ``g^2`` over the last dim) and a column factor (over the second-to-last), their
outer product divided by the row factor's mean standing in for the full estimate (memory
O(m + n) per matrix instead of O(m n)). Vectors (and scalars) keep a full running mean.

PyTorch's choices, followed exactly so trajectories and state dicts match ``torch.optim``:

* ``lr`` caps the relative step size ``rho_t = min(lr, 1/sqrt(t))`` and scales the decoupled
  weight decay (``p *= 1 - lr * weight_decay``); the step is ``alpha_t = max(eps2, RMS(p)) *
  rho_t`` with ``RMS(p)`` taken before the decay;
* ``beta2_t = 1 - t^beta2_decay``: the running means are ``lerp``-ed towards the new squares
  with weight ``t^beta2_decay``;
* ``eps1`` (default: the machine epsilon of the first parameter's dtype met in the group, as
  PyTorch's loop leaves it) floors the row-factor mean and, squared, the variance estimate;
* the update ``U = g / sqrt(V)`` is clipped by ``max(1, RMS(U) / d)``.
"""
from __future__ import annotations

from .optimizer import Optimizer, _get_value, _init_step, _step_tensor

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        from ..tensor import Tensor
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None),)

    def __setstate__(self, state):
        super().__setstate__(state)
        from .. import float32, tensor
        from ..tensor import Tensor
        for st in self.state.values():
            if "step" in st and not isinstance(st["step"], Tensor):
                st["step"] = tensor(float(st["step"]), dtype=float32)

    def step(self, closure=None):
        """One Adafactor step over every parameter with a gradient (``closure`` re-evaluates the
        loss, as in every optimizer)."""
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        lr = _get_value(group["lr"])
        beta2_decay, d, wd, maximize = group["beta2_decay"], group["d"], group["weight_decay"], group["maximize"]
        eps1, eps2 = group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if getattr(p.dtype, "is_complex", False):
                raise RuntimeError("Adafactor does not support complex parameters")
            if getattr(p.grad, "is_sparse", False):
                raise RuntimeError("Adafactor does not support sparse gradients")
            grad = p.grad if not maximize else -p.grad
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                if grad.ndim > 1:
                    state["row_var"] = grad.new_zeros([*grad.shape[:-1], 1])
                    state["col_var"] = grad.new_zeros([*grad.shape[:-2], 1, grad.shape[-1]])
                else:
                    state["variance"] = zeros_like(grad)
            if eps1 is None:
                # PyTorch resolves the default once per group, from the first parameter stepped
                import numpy as np
                eps1 = float(np.finfo(p.dtype.np).eps)
            t = _step_tensor(state["step"])
            one_minus_beta2 = t ** beta2_decay
            rho = min(lr, 1 / (t ** 0.5))
            alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho
            if wd != 0:
                p.mul_(1 - lr * wd)
            if grad.ndim > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                row_var.lerp_((grad * grad).mean(-1, keepdim=True), one_minus_beta2)
                col_var.lerp_((grad * grad).mean(-2, keepdim=True), one_minus_beta2)
                var = row_var @ col_var
                var.div_(row_var.mean(-2, keepdim=True).clamp(min=eps1))
            else:
                variance = state["variance"]
                variance.lerp_(grad * grad, one_minus_beta2)
                var = variance.clone()
            update = var.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
            denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
            p.add_(update, alpha=-alpha / denom)
