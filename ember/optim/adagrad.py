"""Adagrad with learning-rate decay, weight decay, an initial accumulator value and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from .optimizer import (Optimizer, _add_, _addcdiv_, _check_foreach_fused, _check_unsupported, _get_value,
                        _init_step, _real, _step_tensor)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _check_foreach_fused(foreach, fused)
        _check_unsupported("Adagrad", fused, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # as PyTorch: the state of every parameter is created here, not on its first step
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        from .. import full_like
        state = self.state[p]
        _init_step(state)
        init = group["initial_accumulator_value"]
        # complex: both parts of the accumulator start at the value (PyTorch's complex(init, init))
        state["sum"] = full_like(p, complex(init, init) if p.is_complex() else init)
        return state

    _setstate_defaults = (("foreach", None), ("maximize", False), ("differentiable", False), ("fused", None),)

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        lr, lr_decay, wd, eps, maximize = (group["lr"], group["lr_decay"], group["weight_decay"], group["eps"],
                                           group["maximize"])
        traced = is_compiling()
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:   # a parameter whose state was not created by the constructor
                state = self._init_state(p, group)
            step = _step_tensor(state["step"], traced)
            grad = p.grad if not maximize else -p.grad
            p, grad = _real(p), _real(grad)   # complex: updated as (real, imag) pairs, as PyTorch
            if wd != 0:
                if grad.is_sparse:
                    raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                grad = grad.add(p, alpha=wd)
            clr = lr / (1 + (step - 1) * lr_decay)
            if grad.is_sparse:
                _sparse_update(p, grad, state["sum"], _get_value(clr), eps)
                continue
            state_sum = _real(state["sum"])
            state_sum.addcmul_(grad, grad, value=1)
            std = state_sum.sqrt().add_(eps)
            _addcdiv_(p, grad, std, -clr)


def _sparse_update(p, grad, state_sum, clr, eps):
    """Adagrad's step for a sparse gradient (PyTorch's sparse branch): only the rows the gradient
    holds change, the accumulator by the squared values, the parameter by ``-clr * value / std``
    with ``std`` the accumulator's square root at those rows (duplicates summed first)."""
    from .. import sparse_coo_tensor
    grad = grad.coalesce()
    indices, values = grad._indices(), grad._values()
    _add_(state_sum, sparse_coo_tensor(indices, values.pow(2), grad.shape), 1)
    std_values = state_sum.sparse_mask(grad)._values().sqrt_().add_(eps)
    _add_(p, sparse_coo_tensor(indices, values / std_values, grad.shape), -clr)
