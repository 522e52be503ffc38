"""Rprop (resilient backpropagation), with maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import Optimizer, _check_unsupported, _init_step, _real, _step_tensor

__all__ = ["Rprop"]


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _check_unsupported("Rprop", None, differentiable)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False),)

    _sparse_grad_error = "Rprop does not support sparse gradients"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        maximize = group["maximize"]
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["prev"] = zeros_like(p)
                # every element (both parts of a complex one: PyTorch's complex(lr, lr)) starts at
                # lr; filled from a tensor lr without reading it (no .item(): no graph break)
                state["step_size"] = zeros_like(p.grad)
                _real(state["step_size"]).fill_(group["lr"])
            _step_tensor(state["step"], traced)   # the count itself is not used here
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            prev, step_size = _real(state["prev"]), _real(state["step_size"])
            sign = grad.mul(prev).sign()
            # masked fills (PyTorch's sign[sign.gt(0)] = etaplus, ...): no data-dependent shapes
            sign.masked_fill_(sign.gt(0), etaplus)
            sign.masked_fill_(sign.lt(0), etaminus)
            sign.masked_fill_(sign.eq(0), 1)
            # update the step sizes; where the gradient changed sign, dfdx = 0 (no step this time)
            step_size.mul_(sign).clamp_(step_size_min, step_size_max)
            grad = grad.clone()
            grad.masked_fill_(sign.eq(etaminus), 0)
            p.addcmul_(grad.sign(), step_size, value=-1)
            prev.copy_(grad)
