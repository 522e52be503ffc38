"""Sampling ops with no prim form: ``randperm`` and ``multinomial``.

Both draw from ember's generator in their eager kernels (``randperm`` PyTorch's shuffle of the
Mersenne Twister's words, ``ember/_mt19937.py``; ``multinomial`` PyTorch's exponential race or cumulative
search over the same stream). They are ops, kept
whole (``ember.prims.coverage.EXTERN``), so a compiled graph runs the kernel at every call and
draws fresh numbers, the same ones eager draws. (Built from raw arrays, as they were, a traced
graph held the first call's draw as a constant.)
"""
from __future__ import annotations

import numpy as np

from .. import _mt19937 as _mt
from .. import types as _t
from ..tensor import Tensor
from . import _meta, api
from .creation import _dt, _finish, _gen
from .registry import defop
from .._torch_function import PASS as _PASS, _ACTIVE as _TF, python_entry as _entry


@defop("randperm(int n, ScalarType dtype, Generator? generator=None) -> Tensor", method=False, function=False,
       tags=("random", "nondeterministic", "nondifferentiable"), save=())
def _randperm_op(xp, n, dtype, generator=None):
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    g = _gen(generator)
    perm = _mt.randperm(g._mt, n) if n < _mt.RANDPERM_MAX else g._np.permutation(n)
    return xp.asarray(perm.astype(_t.as_dtype(dtype).np))


@_randperm_op.meta_fn
def _randperm_meta(n, dtype, generator=None):
    return _meta.out((int(n),), _t.as_dtype(dtype))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(randperm, locals())) is not _PASS:
        return _r
    # an op (kept whole: ember.prims.coverage.EXTERN), so a compiled graph draws it at every call
    dt = _dt(dtype, _t.int64)
    t = _randperm_op.binding(int(n), dt, generator)
    return _finish(t.to(device) if device is not None else t, requires_grad)


@defop("multinomial(Tensor self, int num_samples, bool replacement=False, Generator? generator=None) -> Tensor",
       method=False, function=False, tags=("random", "nondeterministic", "nondifferentiable"), save=())
def _multinomial_op(xp, p, num_samples, replacement=False, generator=None):
    p = np.asarray(p.get() if hasattr(p, "get") else p)     # (cupy: to the host)
    n = int(num_samples)
    rows = p.reshape(1, -1) if p.ndim == 1 else p
    g = _gen(generator)._mt
    _mt.multinomial_row_errors(g, rows, n, bool(replacement))
    if rows.shape[0] == 0:
        out = np.empty((0, n), dtype=np.int64)
    else:
        out = _mt.multinomial(g, rows, n, bool(replacement))
    return xp.asarray(out.reshape(p.shape[:-1] + (n,)))


@_multinomial_op.meta_fn
def _multinomial_meta(p, num_samples, replacement=False, generator=None):
    return _meta.out(tuple(p.shape[:-1]) + (int(num_samples),), _t.int64)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """PyTorch's CPU ``multinomial``, the same draws for the same seed (``ember._mt19937.multinomial``)."""
    # an op (kept whole: ember.prims.coverage.EXTERN), so a compiled graph draws it at every call
    _mt.multinomial_checks(input, int(num_samples), bool(replacement), input.dtype.legacy_name, input.dim())
    return _multinomial_op.binding(input.detach(), num_samples, replacement, generator)


api.randperm = randperm
api.multinomial = multinomial
Tensor.multinomial = multinomial
