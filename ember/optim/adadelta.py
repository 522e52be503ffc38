"""Adadelta with weight decay and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import Optimizer, _add_, _check_unsupported, _init_step, _real, _step_tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_unsupported("Adadelta", None, differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False),)

    _capturable_xla = False

    _sparse_grad_error = "Adadelta does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        lr, rho, eps, wd, maximize = group["lr"], group["rho"], group["eps"], group["weight_decay"], group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["square_avg"] = zeros_like(p)
                state["acc_delta"] = zeros_like(p)
            _step_tensor(state["step"], traced)   # the count itself is not used here
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            square_avg, acc_delta = _real(state["square_avg"]), _real(state["acc_delta"])
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(grad)
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            _add_(p, delta, -lr)   # lr may be a tensor
