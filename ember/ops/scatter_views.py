"""PyTorch's out-of-place view scatters, its ``*_copy`` view variants and the ``unsafe_*``
splits, over existing ember ops:

* ``select_scatter``, ``slice_scatter``, ``diagonal_scatter``, ``as_strided_scatter`` (functions
  and methods): a clone of ``input`` with ``src`` written into the view. Written as a clone and
  an in-place ``copy_`` into its view, so autograd's view/in-place machinery gives the
  gradients (``input``: the gradient with the view region zeroed; ``src``: the view region of
  the gradient) and the compiler functionalises it as any in-place write;
* ``view_copy``, ``permute_copy``, ``transpose_copy``, ``t_copy``, ``unsqueeze_copy``,
  ``squeeze_copy``, ``expand_copy``, ``diagonal_copy``, ``select_copy``, ``slice_copy``,
  ``unbind_copy``, ``split_copy``, ``split_with_sizes_copy``, ``detach_copy``, ``alias_copy``,
  ``unfold_copy``, ``as_strided_copy``, ``narrow_copy`` (also a method): the view followed by a
  contiguous clone;
* ``unsafe_chunk``, ``unsafe_split``, ``unsafe_split_with_sizes`` (functions and methods):
  ``chunk`` / ``split`` / ``split_with_sizes``.
"""
from __future__ import annotations

import numbers

from ..tensor import Tensor
from . import api
from ._exports import Exports
from ._helpers import wrap_dim

_export = Exports(methods_by_default=False)
_EXPORTS, _METHODS = _export.functions, _export.methods


# ---------------------------------------------------------------------- scatters
def _scatter_into(fname, input, src, view_fn):
    if not isinstance(src, Tensor):
        raise TypeError(f"{fname}(): argument 'src' (position 2) must be Tensor, not {type(src).__name__}")
    out = input.clone()
    view = view_fn(out)
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"{fname}: expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(view.shape)}")
    view.copy_(src)
    return out


@_export(method=True)
def select_scatter(input, src, dim, index):
    """``input`` with ``src`` embedded at ``index`` along ``dim`` (``src`` has ``input``'s shape
    without ``dim``)."""
    return _scatter_into("select_scatter", input, src, lambda t: t.select(dim, index))


def _slice(t, dim, start, end, step):
    if step is None:
        step = 1
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = wrap_dim(dim, t.ndim)
    idx = [slice(None)] * t.ndim
    idx[d] = slice(start, end, step)
    return t[tuple(idx)]


@_export(method=True)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``src`` embedded at ``start:end:step`` along ``dim``."""
    return _scatter_into("slice_scatter", input, src, lambda t: _slice(t, dim, start, end, step))


@_export(method=True)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with ``src`` embedded along the diagonal ``offset`` of dims ``dim1``, ``dim2``."""
    return _scatter_into("diagonal_scatter", input, src, lambda t: t.diagonal(offset, dim1, dim2))


@_export(method=True)
def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """``input`` (taken as contiguous) with ``src`` written into its ``as_strided(size, stride,
    storage_offset)`` view."""
    def view(t):
        return t.as_strided(tuple(size), tuple(stride), storage_offset)
    if not isinstance(src, Tensor):
        raise TypeError(f"as_strided_scatter(): argument 'src' (position 2) must be Tensor, not "
                        f"{type(src).__name__}")
    out = input.contiguous().clone() if not input.is_contiguous() else input.clone()
    v = view(out)
    if tuple(v.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(v.shape)}")
    v.copy_(src)
    return out


# ---------------------------------------------------------------------- *_copy
def _copy(t):
    c = t.contiguous()
    return t.clone() if c is t else c


def _copy_variant(name, view):
    def fn(input, *args, out=None, **kwargs):
        if out is not None:
            raise TypeError(f"{name}(): the out= argument is not supported by ember")
        res = view(input, *args, **kwargs)
        if isinstance(res, (tuple, list)):
            return tuple(_copy(r) for r in res)
        return _copy(res)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}``: the view op followed by a contiguous copy (never aliases ``input``)."
    return fn


def _view(input, *size):
    return input.view(*size)


def _expand(input, size, *, implicit=False):
    return input.expand(tuple(size)) if isinstance(size, (tuple, list)) else input.expand(size)


def _squeeze(input, dim=None):
    return input.squeeze() if dim is None else input.squeeze(dim)


def _unfold(input, dimension, size, step):
    return input.unfold(dimension, size, step)


def _as_strided(input, size, stride, storage_offset=None):
    return input.as_strided(tuple(size), tuple(stride), storage_offset)


_COPIES = {
    "view_copy": _view,
    "permute_copy": lambda input, dims: input.permute(tuple(dims)),
    "transpose_copy": lambda input, dim0, dim1: input.transpose(dim0, dim1),
    "t_copy": lambda input: input.t(),
    "unsqueeze_copy": lambda input, dim: input.unsqueeze(dim),
    "squeeze_copy": _squeeze,
    "expand_copy": _expand,
    "diagonal_copy": lambda input, offset=0, dim1=0, dim2=1: input.diagonal(offset, dim1, dim2),
    "select_copy": lambda input, dim, index: input.select(dim, index),
    "slice_copy": lambda input, dim=0, start=None, end=None, step=1: _slice(input, dim, start, end, step),
    "unbind_copy": lambda input, dim=0: api.unbind(input, dim),
    "split_copy": lambda input, split_size, dim=0: api.split(input, split_size, dim),
    "split_with_sizes_copy": lambda input, split_sizes, dim=0: api.split_with_sizes(input, list(split_sizes), dim),
    "detach_copy": lambda input: input.detach(),
    "alias_copy": lambda input: input,
    "unfold_copy": _unfold,
    "as_strided_copy": _as_strided,
    "narrow_copy": lambda input, dim, start, length: input.narrow(dim, start, length),
}

for _name, _view_fn in _COPIES.items():
    _EXPORTS[_name] = _copy_variant(_name, _view_fn)
_METHODS["narrow_copy"] = _EXPORTS["narrow_copy"]


# ---------------------------------------------------------------------- unsafe splits
@_export(method=True)
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` (PyTorch's variant skips the views' aliasing checks; ember's are the same)."""
    return tuple(api.chunk(input, chunks, dim))


@_export(method=True)
def unsafe_split(input, split_size, dim=0):
    """``split`` (PyTorch's variant skips the views' aliasing checks)."""
    if isinstance(split_size, numbers.Integral):
        return tuple(api.split(input, split_size, dim))
    return tuple(api.split(input, list(split_size), dim))


@_export(method=True)
def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """``split_with_sizes`` (PyTorch's variant skips the views' aliasing checks)."""
    return tuple(api.split_with_sizes(input, list(split_sizes), dim))


# ---------------------------------------------------------------------- exports
_export.install()
