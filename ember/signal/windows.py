"""``ember.signal.windows``: PyTorch's ``torch.signal.windows`` (SciPy-style window functions).

Each window is written over ``linspace`` and pointwise ember ops, so it differentiates (with
``requires_grad=True`` the result is the output of those ops, as in PyTorch) and traces like any
composite. The conventions are PyTorch's: ``sym=True`` gives the symmetric window (for filter
design), ``sym=False`` the periodic one (one sample longer with the last dropped, for spectral
analysis); length 0 is empty; the checks (non-negative ``M``, strided layout, float32/float64
dtype) raise ``ValueError`` naming the function that made them -- ``hann``, ``hamming``,
``general_hamming`` and ``nuttall`` are ``general_cosine`` windows and report under that name, as
PyTorch does.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from .. import types as _t
from ..ops import api

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _length(name, M):
    if not isinstance(M, numbers.Integral):    # (bool is an Integral: PyTorch accepts True as 1)
        raise TypeError(f"{name}(): argument 'M' must be int, not {type(M).__name__}")
    return int(M)


def _checks(name, M, dtype, layout):
    """PyTorch's common window checks; returns (M, dtype)."""
    M = _length(name, M)
    if dtype is None:
        dtype = _t.get_default_dtype()
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and layout != _strided():   # (a layout equals its name: "strided" too)
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (_t.float32, _t.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return M, dtype


def _strided():
    import ember
    return ember.strided


def _empty(dtype, device, requires_grad):
    return api.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)


def _ones(dtype, device, requires_grad):
    return api.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)


def _denominator(M, sym):
    """The sample spacing's denominator: M - 1 (symmetric) or M (periodic, one point longer)."""
    return M - 1 if sym else M


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """``exp(-|n - center| / tau)``; ``center`` defaults to the middle and only a periodic
    (``sym=False``) window may move it."""
    M, dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / tau
    k = api.linspace(-center * c, (-center + (M - 1)) * c, M, dtype=dtype, device=device,
                     requires_grad=requires_grad)
    return api.exp(-api.abs(k))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sin(pi (n + 1/2) / M)`` (the sine window)."""
    M, dtype = _checks("cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    k = api.linspace(0.5 * c, (0.5 + (M - 1)) * c, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return api.sin(k)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``exp(-(n - (M-1)/2)^2 / (2 std^2))``."""
    M, dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / (std * math.sqrt(2))
    k = api.linspace(start * c, (start + (M - 1)) * c, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return api.exp(-(k * k))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``I0(sqrt(beta^2 - k^2)) / I0(beta)`` for k from -beta to beta (``beta`` rounded to the
    dtype first, so the end points are exactly 1 / I0(beta))."""
    M, dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    b = api.tensor(beta, dtype=dtype, device=device)
    c = 2.0 * b / _denominator(M, sym)
    end = api.minimum(b, -b + (M - 1) * c)
    k = api.linspace(float(-b), float(end), M, dtype=dtype, device=device, requires_grad=requires_grad)
    return api.i0(api.sqrt(b * b - k * k)) / api.i0(b)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window ``1 - |2n / (M-1) - 1|``."""
    M, dtype = _checks("bartlett", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    c = 2 / _denominator(M, sym)
    k = api.linspace(-1, -1 + (M - 1) * c, M, dtype=dtype, device=device, requires_grad=requires_grad)
    return 1 - api.abs(k)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sum_i (-1)^i a_i cos(2 pi i n / (M-1))``: the family of hann / hamming / blackman /
    nuttall."""
    M, dtype = _checks("general_cosine", M, dtype, layout)
    if M == 0:
        return _empty(dtype, device, requires_grad)
    if M == 1:
        return _ones(dtype, device, requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("Coefficients cannot be empty")
    c = 2 * math.pi / _denominator(M, sym)
    k = api.linspace(0, (M - 1) * c, M, dtype=dtype, device=device, requires_grad=requires_grad)
    ai = api.tensor([(-1) ** i * float(w) for i, w in enumerate(a)], dtype=dtype, device=device,
                    requires_grad=requires_grad)
    i = api.arange(len(a), dtype=dtype, device=device).requires_grad_(requires_grad)
    return (ai.unsqueeze(-1) * api.cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / (M-1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_hamming`` with alpha = 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_hamming`` with alpha = 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``general_cosine`` with a = (0.42, 0.5, 0.08)."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype,
                          layout=layout, device=device, requires_grad=requires_grad)
