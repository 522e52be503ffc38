"""Stochastic gradient descent with momentum, dampening, Nesterov, weight decay and maximize."""
from __future__ import annotations

from .optimizer import Optimizer, _add_, _check_foreach_fused, _check_unsupported

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_foreach_fused(foreach, fused)
        _check_unsupported("SGD", fused, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            d_p = p.grad if not maximize else -p.grad
            if weight_decay != 0:
                d_p = d_p.add(p, alpha=weight_decay)
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = d_p.clone().detach()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                if nesterov:
                    d_p = d_p.add(buf, alpha=momentum)
                else:
                    d_p = buf
            _add_(p, d_p, -lr)   # d_p may be sparse (sparse gradients)
