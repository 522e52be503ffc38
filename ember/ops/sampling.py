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
    _mt.randperm_checks(n, _t.as_dtype(dtype))
    perm = _mt.randperm(_gen(generator)._mt, n)
    return xp.asarray(perm.astype(_t.as_dtype(dtype).np))


@_randperm_op.meta_fn
def _randperm_meta(n, dtype, generator=None):
    _mt.randperm_checks(int(n), _t.as_dtype(dtype))
    return _meta.out((int(n),), _t.as_dtype(dtype))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    if _TF[0] and (_r := _entry(randperm, locals())) is not _PASS:
        return _r
    # an op (kept whole: ember.prims.coverage.EXTERN), so a compiled graph draws it at every call
    dt = _dt(dtype, _t.int64)
    import operator
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not {type(n).__name__}") from None
    _mt.randperm_checks(n, dt)
    t = _randperm_op.binding(n, dt, generator)
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


# ---------------------------------------------------------------------- serial random fills
_MT_KINDS = ("cauchy", "log_normal", "geometric")


def _mt_values(kind, stream, n, a, b):
    if kind == "cauchy":
        return _mt.cauchy(stream, n, a, b)
    if kind == "log_normal":
        return _mt.log_normal(stream, n, a, b)
    if kind == "geometric":
        return _mt.geometric(stream, n, a)
    raise ValueError(f"unknown random kind {kind!r}")


@defop("_random_mt(Tensor self, str kind, float a=0.0, float b=0.0, Generator? generator=None) -> Tensor",
       method=False, function=False, tags=("random", "nondeterministic", "nondifferentiable"), save=())
def _random_mt_op(xp, self, kind, a=0.0, b=0.0, generator=None):
    """A fresh array like ``self`` (its dtype and shape) of one of PyTorch's serial random kernels
    (``cauchy_``, ``log_normal_``, ``geometric_``): double values from ember's Mersenne Twister
    drawn in ``self``'s memory order, as PyTorch's iterator fills a strided tensor, cast to the
    dtype (Half/BFloat16 by way of float, as PyTorch's cast of a double)."""
    from .creation import _memory_order
    shape = tuple(self.shape)
    n = int(np.prod(shape, dtype=np.int64))
    vals = _mt_values(kind, _gen(generator)._mt, n, float(a), float(b))
    flags = getattr(self, "flags", None)
    order = None if flags is None or flags.c_contiguous or self.ndim < 2 else _memory_order(self)
    if order is None:
        arr = vals.reshape(shape)
    else:
        arr = np.transpose(vals.reshape(tuple(shape[d] for d in order)), np.argsort(order))
    dt = np.dtype(self.dtype)
    if dt.kind == "f" and dt.itemsize < 4 or dt.name == "bfloat16":
        arr = arr.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        return xp.asarray(np.ascontiguousarray(arr).astype(dt))


@_random_mt_op.meta_fn
def _random_mt_meta(self, kind, a=0.0, b=0.0, generator=None):
    if kind not in _MT_KINDS:
        raise ValueError(f"unknown random kind {kind!r}")
    return _meta.out(tuple(self.shape), self.dtype)


def random_mt_fill(self, kind, a=0.0, b=0.0, generator=None):
    """Fill ``self`` in place with the ``_random_mt`` op's draws (kept whole, so a compiled graph
    draws afresh at every call, from ember's generator)."""
    return self.copy_(_random_mt_op.binding(self.detach(), kind, float(a), float(b), generator))


api.randperm = randperm
api.multinomial = multinomial
Tensor.multinomial = multinomial
