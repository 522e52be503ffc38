"""RMSprop with momentum, centering, weight decay and maximize."""
from __future__ import annotations

from .optimizer import Optimizer, _add_, _addcdiv_, _check_unsupported, _init_step, _real, _step_tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        _check_unsupported("RMSprop", None, differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("maximize", False)

    _sparse_grad_error = "RMSprop does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, momentum, centered, maximize = group["weight_decay"], group["momentum"], group["centered"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad if not maximize else -p.grad
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
            _step_tensor(state["step"], traced=True)   # the count itself is not used here
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            square_avg = _real(state["square_avg"])
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if centered:
                grad_avg = _real(state["grad_avg"])
                grad_avg.lerp_(grad, 1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg = avg.add_(eps)
            if momentum > 0:
                buf = _real(state["momentum_buffer"])
                buf.mul_(momentum).addcdiv_(grad, avg)
                _add_(p, buf, -lr)   # lr may be a tensor
            else:
                _addcdiv_(p, grad, avg, -lr)   # lr may be a tensor (lr=ember.tensor(...))
