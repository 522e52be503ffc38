"""RAdam (rectified Adam), with L2 or decoupled weight decay and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import (Optimizer, _addcmul_, _check_adam_hparams, _check_unsupported, _init_step, _real,
                        _step_tensor)

__all__ = ["RAdam"]


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_adam_hparams(lr, eps, betas, weight_decay)
        _check_unsupported("RAdam", None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False),
                          ("decoupled_weight_decay", False), ("capturable", False))

    _sparse_grad_error = "RAdam does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import where, zeros_like
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            step = _step_tensor(state["step"], traced)
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            if wd != 0:
                if decoupled:
                    p.mul_(1 - lr * wd)
                else:
                    grad = grad.add(p, alpha=wd)
            exp_avg, exp_avg_sq = _real(state["exp_avg"]), _real(state["exp_avg_sq"])
            exp_avg.lerp_(grad, 1 - beta1)
            _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)   # (betas may be tensors)
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            bias_corrected_exp_avg = exp_avg / bias_correction1
            # the maximum length of the approximated SMA, and its length at this step
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if traced:
                # no Python branch on the traced rho_t: both updates, selected element-wise (the
                # rectified one is computed with the eager order of operations; its clamp only
                # keeps the unused branch free of NaN)
                rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                        .clamp_min(0).sqrt())
                adaptive_lr = bias_correction2.sqrt() / exp_avg_sq.sqrt().add_(eps)
                update = bias_corrected_exp_avg * lr
                p.add_(where(rho_t > 5.0, update * adaptive_lr * rect, update), alpha=-1.0)
            elif rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                p.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
            else:
                p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
