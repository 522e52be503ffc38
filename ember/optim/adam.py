"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize."""
from __future__ import annotations

from ..compiler import is_compiling
from . import _fused_native
from .optimizer import (Optimizer, _addcdiv_, _addcmul_, _check_adam_hparams, _check_foreach_fused,
                        _check_unsupported, _init_step, _real, _step_tensor)

__all__ = ["Adam", "AdamW"]


def _lerp_(avg, target, weight):
    """avg <- avg + weight * (target - avg), with the same two-branch formula as PyTorch's lerp kernel."""
    return avg.lerp_(target, weight)


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam_hparams(lr, eps, betas, weight_decay)
        _check_foreach_fused(foreach, fused)
        _check_unsupported(type(self).__name__, None, differentiable)   # fused: _fused_native
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    _setstate_defaults = (("amsgrad", False), ("maximize", False), ("decoupled_weight_decay", False),)

    _sparse_grad_error = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = self._init_group(group)
        if params:
            _adam(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, group)

    def _init_group(self, group):
        """The parameters with a gradient and their state tensors, as parallel lists (state created
        on a parameter's first step). Complex parameters, their gradients and state are listed as
        their real views (:func:`_real`), as PyTorch updates them."""
        from .. import zeros_like
        amsgrad = group["amsgrad"]
        params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                _init_step(state)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            # (the dtype test first: a compiled step traces this loop for every parameter, and
            # four calls of _real each were ~160 inlined calls of a 40-parameter step's trace)
            cplx = p.dtype.is_complex
            params.append(_real(p) if cplx else p)
            grads.append(_real(p.grad) if cplx else p.grad)
            exp_avgs.append(_real(state["exp_avg"]) if cplx else state["exp_avg"])
            exp_avg_sqs.append(_real(state["exp_avg_sq"]) if cplx else state["exp_avg_sq"])
            if amsgrad:
                max_sqs.append(_real(state["max_exp_avg_sq"]) if cplx else state["max_exp_avg_sq"])
            steps.append(state["step"])
        return params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps


def _adam(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, group):
    """One Adam/AdamW update of every parameter of ``group``, with PyTorch's formulas
    (``_single_tensor_adam``).

    Eagerly the bias corrections are Python floats computed from the step count
    (``step.item()``, as PyTorch). Under ``ember.compile`` they are 0-d float64 tensors computed
    from the step tensor (the same double-precision formulas, no ``.item()``, so the whole step is
    one graph); the element-wise ops then receive them where eager passes a Python float, which
    every op converts to the tensor's dtype first, so the updates agree."""
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    amsgrad, maximize, decoupled = group["amsgrad"], group["maximize"], group["decoupled_weight_decay"]
    traced = is_compiling()
    if not traced and group.get("fused") is not False:
        why = _fused_native.why_not((params, grads, exp_avgs, exp_avg_sqs, max_sqs)) if all(
            isinstance(v, (int, float)) for v in (lr, eps, wd, beta1, beta2)) else "a tensor hyper-parameter"
        if not why:
            return _adam_fused(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, group)
        if group.get("fused"):
            raise RuntimeError(f"Adam(fused=True) cannot run this step: {why}")
    for i, p in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
        step = _step_tensor(steps[i], traced)
        if wd != 0:
            if decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        _lerp_(exp_avg, grad, 1 - beta1)
        _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)   # (betas may be tensors)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2.sqrt() if traced else bias_correction2 ** 0.5
        if amsgrad:
            max_sq = max_sqs[i]
            max_sq.copy_(max_sq.maximum(exp_avg_sq))
            denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        # step_size is a 0-d tensor when traced or when lr is a tensor (lr=ember.tensor(...), as
        # PyTorch allows): _addcdiv_ takes both (addcdiv_'s value must be a number)
        _addcdiv_(p, exp_avg, denom, -step_size)


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True


def _adam_fused(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, group):
    """:func:`_adam` as one native pass over the group (``_fused_native``; same numbers)."""
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    flags = (4 if group["amsgrad"] else 0) | (8 if group["maximize"] else 0)
    if wd != 0:
        flags |= 1 if group["decoupled_weight_decay"] else 2
    decay = 1 - lr * wd if flags & 1 else wd
    scalars = []
    for st in steps:
        step = _step_tensor(st)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        scalars += [decay, 1 - beta1, beta2, 1 - beta2, bias_correction2 ** 0.5, eps, -(lr / bias_correction1)]
    _fused_native.adam_step(params, grads, exp_avgs, exp_avg_sqs, max_sqs, scalars, flags)
