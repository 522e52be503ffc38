"""PyTorch's window functions: ``hann_window``, ``hamming_window``, ``blackman_window``,
``bartlett_window``, ``kaiser_window``, written over ``arange`` and pointwise ops (so they trace
as ordinary graphs), with PyTorch's ``periodic`` convention (a window of ``N + 1`` points with
the last dropped) and its edge cases (length 0: empty; length 1: ``[1.]``).
"""
from __future__ import annotations

import math
import numbers

from .. import types as _t
from . import api
from .creation import _dt, _finish
from .._torch_function import PASS as _PASS, _ACTIVE as _TF, python_entry as _entry


def _prep(name, window_length, dtype, device):
    if isinstance(window_length, bool) or not isinstance(window_length, numbers.Integral):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dt = _dt(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    return int(window_length), dt


def _window(name, window_length, periodic, dtype, device, requires_grad, body):
    n, dt = _prep(name, window_length, dtype, device)
    if n == 0:
        return _finish(api.empty((0,), dtype=dt, device=device), requires_grad)
    if n == 1:
        return _finish(api.ones((1,), dtype=dt, device=device), requires_grad)
    N = n + 1 if periodic else n
    k = api.arange(N, dtype=dt, device=device)
    w = body(k, N)
    if periodic:
        w = w[:n]
    return _finish(w.contiguous(), requires_grad)


def _pinned_window(pin_memory, *args):
    from .._pinned import for_factory
    return for_factory(_window(*args), pin_memory)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """``alpha - beta cos(2 pi k / (N - 1))``."""
    if _TF[0] and (_r := _entry(hamming_window, locals())) is not _PASS:
        return _r
    return _pinned_window(pin_memory, "hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, N: api.cos(k * (2 * math.pi / (N - 1))) * (-beta) + alpha)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                pin_memory=False):
    """``0.5 - 0.5 cos(2 pi k / (N - 1))``."""
    if _TF[0] and (_r := _entry(hann_window, locals())) is not _PASS:
        return _r
    return _pinned_window(pin_memory, "hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, N: api.cos(k * (2 * math.pi / (N - 1))) * (-0.5) + 0.5)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """``0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))``."""
    if _TF[0] and (_r := _entry(blackman_window, locals())) is not _PASS:
        return _r
    def body(k, N):
        x = k * (math.pi / (N - 1))
        return api.cos(x * 4) * 0.08 - api.cos(x * 2) * 0.5 + 0.42
    return _pinned_window(pin_memory, "blackman_window", window_length, periodic, dtype, device, requires_grad, body)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """``1 - |2 k / (N - 1) - 1|``."""
    if _TF[0] and (_r := _entry(bartlett_window, locals())) is not _PASS:
        return _r
    return _pinned_window(pin_memory, "bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, N: 1 - api.abs(k * (2.0 / (N - 1)) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """``I0(beta sqrt(1 - ((k - a) / a)^2)) / I0(beta)`` with ``a = (N - 1) / 2``."""
    if _TF[0] and (_r := _entry(kaiser_window, locals())) is not _PASS:
        return _r
    def body(k, N):
        a = (N - 1) / 2.0
        r = (k - a) / a
        arg = api.sqrt(api.clamp(1 - r * r, min=0.0)) * beta
        return api.i0(arg) / float(_i0(float(beta)))
    return _pinned_window(pin_memory, "kaiser_window", window_length, periodic, dtype, device, requires_grad, body)


def _i0(x):
    """I0 of a Python float (the power series; converges for every x)."""
    total, term, k, q = 1.0, 1.0, 1, (x / 2.0) ** 2
    while True:
        term *= q / (k * k)
        total += term
        if term < total * 1e-17:
            return total
        k += 1


for _fn in (hamming_window, hann_window, blackman_window, bartlett_window, kaiser_window):
    setattr(api, _fn.__name__, _fn)
