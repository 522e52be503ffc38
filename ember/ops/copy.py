"""copy_, fill_, zero_: writes of one tensor's (or a number's) values into another.

Each is the in-place variant of a functional record, so the generic in-place
path (version bump, autograd rebase, CopySlices for views) applies:

* ``_copy_from(self, src)``: ``src`` broadcast to ``self``'s shape, cast to
  ``self``'s dtype and device. ``x.copy_(src)`` is its in-place variant, named
  ``copy_`` for users (grad_fn ``CopyBackwards``).
* ``fill(self, value)``: a tensor like ``self`` filled with ``value``.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta, api
from .checked_scalar import checked_array
from ._helpers import _canonical_c, copy_preserve, empty_preserve, half_source, is_scalar, sum_to
from .registry import OPS, defop


@defop("copy(Tensor self, Tensor|Scalar src) -> Tensor", inplace=True, save=(), method=False,
       function=False, grad_fn_name="CopyBackwards", tags=("cross_device",))
def _copy_from(xp, self, src):
    dt = _t.from_numpy_dtype(self.dtype)
    if dt._limited is not None:     # float8 rounding; sub-byte dtypes refuse conversions
        from .limited_dtypes import limited_copy_source
        src = limited_copy_source(xp, self, src, dt)
    if is_scalar(src):
        return xp.full(self.shape, checked_array(xp, src, dt), dtype=dt.np)
    try:
        shape = np.broadcast_shapes(src.shape, self.shape)
    except ValueError:
        shape = None
    if shape != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(shape) if shape else list(src.shape)}")
    if type(src) is not type(self):  # cross-device
        src = xp.asarray(src.get() if hasattr(src, "get") else src)
    src = half_source(src, dt.np)
    if _canonical_c(self):
        return xp.broadcast_to(src.astype(dt.np, copy=False), self.shape).copy()
    # laid out like self (PyTorch's functional copy clones self, then writes into it)
    return copy_preserve(xp, self, xp.broadcast_to(src, self.shape), dt.np)



@_copy_from.meta_fn
def _copy_meta(self, src):
    """``self``'s shape, dtype and layout (``empty_like(self)``, as the kernel's)."""
    shape = tuple(self.shape)
    if is_scalar(src):
        _meta.check_fill_value(src, self.dtype)
    else:
        try:
            bshape = _meta.broadcast_shapes(tuple(src.shape), shape)
        except RuntimeError:
            bshape = None
        if bshape is None or len(bshape) != len(shape) or not all(
                x is y or bool(x == y) for x, y in zip(bshape, shape)):
            ints = (lambda sh: [_meta._hint(n) for n in sh])   # the eager message's sizes
            raise RuntimeError(f"output with shape {ints(shape)} doesn't match the broadcast shape "
                               f"{ints(bshape) if bshape else ints(src.shape)}")
    return _meta.preserve_out(self)


@_copy_from.derivative
def _copy_bw(ctx, g):
    self, src = ctx.args
    gs = None
    if ctx.needs_input_grad[1]:
        gs = sum_to(g, src.shape).to(dtype=src.dtype, device=src.device)
    return (g * 0 if ctx.needs_input_grad[0] else None), gs


def copy_(self, src, non_blocking=False):
    """Write ``src``'s values into ``self`` (broadcasting, casting, across devices)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' (position 1) must be Tensor, not {type(src).__name__}")
    return _copy_from.inplace_variant.binding(self, src)


@defop("fill(Tensor self, Tensor|Scalar value) -> Tensor", inplace=True, save=(), method=False,
       function=False, grad_fn_name="FillBackward0")
def _fill(xp, self, value):
    dt = _t.from_numpy_dtype(self.dtype)
    if dt._limited == "float8":
        from .limited_dtypes import float8_fill_value
        value = float8_fill_value(xp, self, value)
    if not is_scalar(value):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions.")
        with np.errstate(all="ignore"):
            # a 0-d tensor's value is cast (wraps; a bfloat16 one through float32), as PyTorch's
            value = half_source(value, dt.np).astype(dt.np)
    else:
        value = checked_array(xp, value, dt)  # a number is checked: fill_(300) of int8 raises
    if self.flags.c_contiguous and (1 not in self.shape or _canonical_c(self)):
        return xp.full(self.shape, value, dtype=dt.np)
    out = empty_preserve(xp, self)       # a tensor like self: its layout too, as PyTorch's
    xp.copyto(out, value, casting="unsafe")
    return out



@_fill.meta_fn
def _fill_meta(self, value):
    if not is_scalar(value) and value.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    if is_scalar(value):
        # (a 0-d tensor's value is data: its out-of-range error cannot be seen without it)
        _meta.check_fill_value(value, self.dtype)
    return _meta.preserve_out(self)


@_fill.derivative
def _fill_bw(ctx, g):
    self, value = ctx.args
    return (g * 0 if ctx.needs_input_grad[0] else None,
            g.sum().reshape(()) if ctx.needs_input_grad[1] else None)


def _fill_direct(self, args):
    """``fill_`` / ``zero_`` of a CPU tensor with a number: numpy fills ``self``'s memory in
    one pass, strided views included (the generic path builds a filled tensor and copies it
    in: ``zero_grad(set_to_none=False)`` over a model's gradients paid twice the memory
    traffic). Everything else -- a 0-d tensor value, float8 and sub-byte dtypes, other
    devices, sparse tensors -- takes the generic path."""
    value = args[1]
    data = self._data
    if (data.__class__ is not np.ndarray or not is_scalar(value) or self._sparse_layout
            or self.device.type != "cpu"):
        return False
    dt = self.dtype
    if dt._limited is not None:
        return False
    data[...] = checked_array(np, value, dt)    # the same check and cast as the kernel's
    return True


_fill.inplace_variant.direct = _fill_direct


def fill_(self, value):
    return _fill.inplace_variant.binding(self, value)


def zero_(self):
    return _fill.inplace_variant.binding(self, 0)


Tensor.copy_ = copy_
Tensor.fill_ = fill_
Tensor.zero_ = zero_
api.fill_ = fill_
api.zero_ = zero_
