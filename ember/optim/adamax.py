"""Adamax (Adam with the infinity norm), with weight decay and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import (Optimizer, _check_adam_hparams, _addcdiv_, _check_unsupported, _init_step, _real,
                        _step_tensor)

__all__ = ["Adamax"]


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_adam_hparams(lr, eps, betas, weight_decay)
        _check_unsupported("Adamax", None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False),)

    _sparse_grad_error = "Adamax does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        beta1, beta2 = group["betas"]
        lr, eps, wd, maximize = group["lr"], group["eps"], group["weight_decay"], group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["exp_avg"] = zeros_like(p)
                state["exp_inf"] = zeros_like(p)
            step = _step_tensor(state["step"], traced)
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            exp_avg, exp_inf = _real(state["exp_avg"]), _real(state["exp_inf"])
            exp_avg.lerp_(grad, 1 - beta1)
            exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(eps)))
            bias_correction = 1 - beta1 ** step
            clr = lr / bias_correction
            _addcdiv_(p, exp_avg, exp_inf, -clr)
