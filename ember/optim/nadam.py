"""NAdam (Adam with Nesterov momentum), with momentum decay, L2 or decoupled weight decay and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import (Optimizer, _addcdiv_, _addcmul_, _check_adam_hparams, _check_unsupported, _init_step,
                        _real, _step_tensor)

__all__ = ["NAdam"]


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_adam_hparams(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _check_unsupported("NAdam", None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    _setstate_defaults = (("maximize", False), ("foreach", None), ("capturable", False),
                          ("differentiable", False), ("decoupled_weight_decay", False))

    _capturable_what = "params, mu_products and state_steps"

    _sparse_grad_error = "NAdam does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import float32, float64, tensor, zeros_like
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        momentum_decay, decoupled = group["momentum_decay"], group["decoupled_weight_decay"]
        maximize = group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["mu_product"] = tensor(1.0, dtype=float32)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            step = _step_tensor(state["step"], traced)
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            exp_avg, exp_avg_sq, mu_product = _real(state["exp_avg"]), _real(state["exp_avg_sq"]), state["mu_product"]
            bias_correction2 = 1 - beta2 ** step
            if wd != 0:
                if decoupled:
                    p.mul_(1 - lr * wd)
                else:
                    grad = grad.add(p, alpha=wd)
            # the momentum cache mu^t and mu^{t+1}
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            if traced:
                # eager multiplies by the Python float mu, which the op rounds to mu_product's dtype
                # first; a float64 0-d tensor would instead make it a float64 product
                mu_product.mul_(mu.to(mu_product.dtype))
                mu_prod = mu_product.to(float64)
            else:
                mu_product.mul_(mu)
                mu_prod = mu_product.item()
            exp_avg.lerp_(grad, 1 - beta1)
            _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)   # (betas may be tensors)
            denom = exp_avg_sq.div(bias_correction2).sqrt()
            mu_product_next = mu_prod * mu_next
            denom.add_(eps)
            _addcdiv_(p, grad, denom, -lr * (1.0 - mu) / (1.0 - mu_prod))
            _addcdiv_(p, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))
