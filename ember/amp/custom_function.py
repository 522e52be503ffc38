"""``custom_fwd`` / ``custom_bwd``: autocast-aware decorators for ``autograd.Function`` methods.

A custom Function's forward may need a fixed precision (``cast_inputs``: inside an autocast
region its floating inputs are cast to that dtype and the body runs with autocast off), and its
backward must see the same autocast state the forward saw, even though the engine runs it
after the region has been left. The forward records that state on ``ctx`` (``_dtype``,
``_fwd_used_autocast``, torch's attribute names) and the backward re-enters it.
"""
from __future__ import annotations

import collections.abc
import functools

import numpy as np

from .. import types as _t
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled


def _check_device_type_arg(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def _cast(value, device_type: str, dtype):
    """``value`` with every eligible tensor (floating, not float64, on ``device_type``) cast to
    ``dtype``; containers are rebuilt, strings / bytes / arrays / other objects pass through."""
    from ..tensor import Tensor
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype is not _t.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        items = (_cast(v, device_type, dtype) for v in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorate a custom Function's ``forward`` (see the module); usable with or without a call."""
    _check_device_type_arg(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorate a custom Function's ``backward``: it runs in the autocast state its forward had."""
    _check_device_type_arg(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
