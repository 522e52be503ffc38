"""``Tensor.view(dtype)``: the same bytes read as another dtype (torch's ``view.dtype`` overload).

Why an op of its own. ember's ops have one schema each, so torch's overload
``view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)`` is the record ``view_dtype``;
``Tensor.view`` (ember/ops/shape.py) sends a dtype argument here and sizes to ``view``.

What torch 2.13 does, and so this op:

* same element size: the output has the input's shape, strides and storage offset;
* a smaller element size (float32 -> int8): the last dim grows by the ratio, every other
  stride and the storage offset scale up; the last dim must have stride 1;
* a larger element size (float32 -> float64): the last dim shrinks by the ratio; its size
  and the storage offset must be divisible by the ratio, its stride must be 1 and every other
  stride divisible by the ratio (checked, and reported, in that order);
* a 0-dim tensor only changes to a dtype of the same size;
* the result shares storage and the version counter with the input (a view: ``_base`` is
  set as for every ember view), but it is not differentiable: torch's output has no
  ``grad_fn`` and ``requires_grad=False`` whatever the dtypes (even float32 -> float32),
  so an in-place write into it is not recorded by autograd (as a write through
  ``detach()``).

The checks live in :func:`dtype_view_geometry`, in element units, shared by the kernel (which
sees an array and cannot know its storage offset), the public entry (which checks the offset)
and the meta function (fake tensors, dynamo). Under ``ember.compile`` the op has no prim
decomposition (there is no bit-cast prim): inductor runs this kernel as an extern fallback
(logged), whose result it copies into a fresh buffer.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import types as _t
from . import _meta
from .registry import defop

# torch's Python argument parser reads the Python scalar types as these dtypes (``float`` is
# double whatever the default dtype)
_PY_TYPES = {builtins.float: _t.float64, builtins.int: _t.int64, builtins.bool: _t.bool_,
             builtins.complex: _t.complex128}


def _what(src, dst):
    return f"to view {src.legacy_name} as {dst.legacy_name} (different element sizes)"


def dtype_view_geometry(shape, strides, offset, src, dst):
    """``(shape, strides, offset)`` of ``dst``'s view of a ``src`` tensor with this geometry
    (all in elements of their dtype), or torch's RuntimeError. ``offset`` None skips the
    storage-offset check (the kernel, which only sees an array) and returns None for it.
    Plain Python arithmetic, so SymInt sizes (fake tensors) work: a decision on a symbol
    becomes a guard."""
    a, b = src.itemsize, dst.itemsize
    shape, strides = tuple(shape), tuple(strides)
    if a == b:
        return shape, strides, offset
    if not shape:
        raise RuntimeError(f"self.dim() cannot be 0 {_what(src, dst)}")
    if a > b:
        r = a // b
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {_what(src, dst)}, but got {strides[-1]}")
        return (shape[:-1] + (shape[-1] * r,), tuple(s * r for s in strides[:-1]) + (1,),
                None if offset is None else offset * r)
    r = b // a
    if shape[-1] % r != 0:
        raise RuntimeError(f"self.size(-1) must be divisible by {r} {_what(src, dst)}, but got {shape[-1]}")
    if offset is not None and offset % r != 0:
        raise RuntimeError(f"self.storage_offset() must be divisible by {r} {_what(src, dst)}, but got {offset}")
    if strides[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {_what(src, dst)}, but got {strides[-1]}")
    for i, s in enumerate(strides[:-1]):
        if s % r != 0:
            raise RuntimeError(f"self.stride({i}) must be divisible by {r} {_what(src, dst)}, but got {s}")
    return (shape[:-1] + (shape[-1] // r,), tuple(s // r for s in strides[:-1]) + (1,),
            None if offset is None else offset // r)


def _torch_strides(shape, strides):
    """The strides torch reports for this geometry. numpy gives a freshly made empty array
    all-zero strides where torch keeps contiguous ones (``zeros(2, 0).stride() == (1, 1)``);
    torch's checks run on its own, so an empty tensor with all-zero strides is read as
    contiguous. Anything else is already torch's."""
    if shape and 0 in shape and not any(strides):
        return _meta.contiguous_strides(shape)
    return strides


def check_dtype_arg(dtype):
    """The dtype a ``view(dtype)`` argument names (an ember dtype or a Python scalar type), or
    a clear error for one ember cannot view as."""
    d = _PY_TYPES.get(dtype, dtype) if isinstance(dtype, type) else dtype
    if not isinstance(d, _t.dtype):
        raise TypeError(f"view(): argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")
    if d in _t.QUANTIZED_DTYPES:
        raise NotImplementedError(f"ember: Tensor.view(dtype) to the quantized dtype {d} is not supported "
                                  f"(a quantized tensor needs a scale and zero point; use "
                                  f"ember.quantize_per_tensor or _make_per_tensor_quantized_tensor)")
    return d


@defop("view_dtype(Tensor self, ScalarType dtype) -> Tensor", view=True, save=(), method=False,
       function=False, tags=("nondifferentiable",))
def view_dtype(xp, a, dtype):
    src = _t.from_numpy_dtype(a.dtype)
    dtype = check_dtype_arg(dtype)
    if dtype is src:
        return a.view()
    isz = a.itemsize
    estrides = tuple(s // isz for s in a.strides)
    dtype_view_geometry(a.shape, _torch_strides(a.shape, estrides), None, src, dtype)
    if a.size == 0 or dtype.itemsize == isz or xp is np:
        # numpy reinterprets with torch's geometry once torch's checks pass: a smaller dtype
        # multiplies the (stride-1) last dim, a larger one divides it, other strides stay in bytes
        return a.view(dtype.np)
    # cupy: its view() to another element size wants a C-contiguous array; build the view on
    # the same memory with the geometry torch gives
    shape, est, _ = dtype_view_geometry(a.shape, estrides, 0, src, dtype)
    return xp.ndarray(shape, dtype=dtype.np, memptr=a.data, strides=tuple(s * dtype.itemsize for s in est))


@view_dtype.meta_fn
def _view_dtype_meta(a, dtype):
    from .shape import _geom
    dtype = check_dtype_arg(dtype)
    shape, st, off = _geom(a)
    if isinstance(a._data, _meta.FakeArray) and dtype.itemsize > a.dtype.itemsize:
        a._data.storage.alignment_read = True     # (the offset's alignment decides: see _fake.py)
    if not _meta.is_symint(off) and not any(_meta.is_symint(s) for s in tuple(shape) + tuple(st)):
        st = _torch_strides(shape, st)
    shape, st, off = dtype_view_geometry(shape, st, off, a.dtype, dtype)
    data = a._data
    storage = data.storage if isinstance(data, _meta.FakeArray) else _meta.FakeStorage(a.numel() * a.dtype.itemsize)
    return _meta.FakeArray(shape, dtype, st, off, storage)


_view_dtype_binding = view_dtype.binding


def view_as_dtype(self, dtype):
    """``self.view(dtype)``: the kernel op after the storage-offset check (only a tensor knows
    its offset; the kernel sees an array)."""
    dtype = check_dtype_arg(dtype)
    src = self.dtype
    if dtype.itemsize > src.itemsize and self.ndim and type(self._data) is not _meta.FakeArray:
        shape, st = tuple(self.shape), _torch_strides(tuple(self.shape), self.stride())
        dtype_view_geometry(shape, st, self.storage_offset(), src, dtype)
    return _view_dtype_binding(self, dtype)
