"""ASGD (averaged stochastic gradient descent), with weight decay and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from ..tensor import Tensor
from .optimizer import Optimizer, _check_unsupported, _init_step, _step_tensor

__all__ = ["ASGD"]


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_unsupported("ASGD", None, differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False),)

    _capturable_what = "params, mus, etas, and state_steps"

    _sparse_grad_error = "ASGD does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import float32, float64, get_default_dtype, tensor, where, zeros_like
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        wd, maximize = group["weight_decay"], group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                # eta and mu are float32 0-d tensors, as PyTorch's (eta is lr rounded to float32)
                _init_step(state)
                # (a tensor lr copied, not read: no .item(), no graph break under ember.compile)
                state["eta"] = lr.detach().to(float32).clone() if isinstance(lr, Tensor) else tensor(lr, dtype=float32)
                state["mu"] = tensor(1.0, dtype=float32)
                state["ax"] = zeros_like(p)
            step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
            step = _step_tensor(step_t, traced)
            grad = p.grad if not maximize else -p.grad
            if wd != 0:
                grad = grad.add(p, alpha=wd)
            if traced:
                # the eager arithmetic on 0-d float64 tensors (no .item(), no Python branch on mu)
                eta_value = eta.to(float64)
                p.mul_(1 - lambd * eta_value)
                p.add_(grad * -eta_value)
                ax.copy_(where(mu == 1, p, ax + p.sub(ax).mul_(mu)))
                dt = get_default_dtype()
                eta.copy_((lr / ((1 + lambd * lr * step) ** alpha)).to(dt))
                mu.copy_((1 / (step - t0).clamp_min(1)).to(dt))
            else:
                eta_value = eta.item()
                p.mul_(1 - lambd * eta_value)   # decay term
                p.add_(grad, alpha=-eta_value)
                if mu.item() != 1:   # averaging
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                # through a tensor of the default dtype, as PyTorch's torch.as_tensor(value): the
                # values are rounded to float32 even where eta and mu are float64 (loaded state)
                eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                mu.copy_(tensor(1 / max(1, step - t0)))
