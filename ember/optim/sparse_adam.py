"""SparseAdam: Adam for parameters whose gradients are sparse (``nn.Embedding(sparse=True)``).

Only the rows a step's gradient specifies are touched: their moment estimates are updated
and the parameter moves there, every other row (and its moments) stays as it was -- PyTorch's
"lazy" Adam. Parameters must be dense and their gradients sparse COO (PyTorch's errors
otherwise). The update follows ``torch.optim.SparseAdam`` step for step: the gradient is
coalesced, the moments are read at its positions, ``m += (1 - b1) (g - m)``,
``v += (1 - b2) (g^2 - v)``, and the parameter takes ``-lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``
at those positions.
"""
from __future__ import annotations

import math

import numpy as np

from .optimizer import Optimizer

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)
        sparse_params = []
        complex_params = []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p._sparse_layout:
                    sparse_params.append([gi, pi])
                if p.is_complex():
                    complex_params.append([gi, pi])
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires dense parameter tensors")
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not support complex "
                             f"parameters")

    _setstate_defaults = (("maximize", False),)

    def step(self, closure=None):
        return self._run_step(closure)

    def _update_group(self, group):
        from .. import zeros_like
        from ..sparse._ops import coalesce
        lr, (beta1, beta2), eps, maximize = group["lr"], group["betas"], group["eps"], group["maximize"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if not g._sparse_layout or g.layout != "sparse_coo":
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            g = coalesce(g)
            st = g._st
            if st.nnz == 0:
                continue
            gv = np.asarray(g._vals._data)
            if maximize:
                gv = -gv
            ix = tuple(st.indices)       # the gradient's positions over the sparse dims (any strides)
            m, v, pd = state["exp_avg"]._data, state["exp_avg_sq"]._data, p._data
            old_m, old_v = m[ix], v[ix]
            upd_m = (gv - old_m) * (1 - beta1)
            upd_v = (gv * gv - old_v) * (1 - beta2)
            m[ix] = old_m + upd_m
            v[ix] = old_v + upd_v
            numer = upd_m + old_m
            denom = np.sqrt(upd_v + old_v) + eps
            step = state["step"]
            step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
            pd[ix] = pd[ix] + (-step_size * (numer / denom)).astype(pd.dtype, copy=False)
            for t in (p, state["exp_avg"], state["exp_avg_sq"]):
                t._bump_version()
