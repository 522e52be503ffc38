"""Top-level functions PyTorch exposes that ember lacked, each as PyTorch 2.13 behaves:

* ``detach_``; the ``*_copy`` variants of view ops not covered in ``scatter_views``
  (``view_as_real_copy``, ``view_as_complex_copy``, ``_conj_copy``, ``_neg_view_copy``,
  ``_reshape_alias_copy``): the view followed by a contiguous copy;
* the ATen spellings of in-place functional ops (``dropout_``, ``alpha_dropout_``,
  ``feature_dropout_``, ``feature_alpha_dropout_``, ``rrelu_``, ``as_strided_``, ``addmv_``);
* ``embedding_bag`` (ATen signature: int mode, four results), ``conv_tbc`` (time-batch-channel
  1-d convolution, as fairseq uses), ``norm_except_dim`` (weight norm's norm),
  ``segment_reduce`` (reductions over consecutive segments given by lengths or offsets),
  ``native_norm`` (a sparse-only kernel in PyTorch: dense input raises as there);
* ``set_default_tensor_type`` (deprecated, still works) and ``to_dlpack``.

Why here and not as registry records: every one is a composition of existing ember ops, so it
inherits their kernels, meta functions and derivatives (gradients, fake tensors, compile).
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._exports import Exports
from .scatter_views import _copy_variant

_export = Exports()


def _F():
    from ..nn import functional
    return functional


def _check_tensor(fn, name, v, pos):
    if not isinstance(v, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type(v).__name__}")


# ---------------------------------------------------------------------- detach_ and *_copy
@_export
def detach_(input):
    """``ember.detach_(t)``: ``t.detach_()`` (detaches ``t`` from its graph in place)."""
    _check_tensor("detach_", "input", input, 1)
    return input.detach_()


def _reshape_alias(input, size, stride):
    return input.as_strided(tuple(size), tuple(stride), input.storage_offset())


for _name, _view in (("view_as_real_copy", lambda input: api.view_as_real(input)),
                     ("view_as_complex_copy", lambda input: api.view_as_complex(input)),
                     ("_conj_copy", lambda input: input.conj()),
                     ("_neg_view_copy", lambda input: api.neg(input)),
                     ("_reshape_alias_copy", _reshape_alias)):
    _export.functions[_name] = _copy_variant(_name, _view)


# ---------------------------------------------------------------------- in-place ATen spellings
def _inplace_from(input, result):
    """``input`` takes ``result``'s values in place (autograd records the copy)."""
    if result is not input:
        input.copy_(result)
    return input


@_export
def dropout_(input, p, train):
    """``torch.dropout_(input, p, train)``: dropout in place."""
    _check_tensor("dropout_", "input", input, 1)
    return _F().dropout(input, p, train, inplace=True)


@_export
def alpha_dropout_(input, p, train):
    _check_tensor("alpha_dropout_", "input", input, 1)
    return _F().alpha_dropout(input, p, train, inplace=True)


@_export
def feature_alpha_dropout_(input, p, train):
    _check_tensor("feature_alpha_dropout_", "input", input, 1)
    return _F().feature_alpha_dropout(input, p, train, inplace=True)


@_export
def feature_dropout_(input, p, train):
    """Whole channels (dim 1) zeroed in place with probability ``p``, the rest scaled by 1/(1-p)."""
    _check_tensor("feature_dropout_", "input", input, 1)
    from .._aten_aliases import feature_dropout
    return _inplace_from(input, feature_dropout(input, p, train))


@_export
def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    _check_tensor("rrelu_", "input", input, 1)
    if generator is not None:
        raise NotImplementedError("ember.rrelu_: the generator= argument is not supported (ember's rrelu draws "
                                  "from the default generator)")
    return _F().rrelu(input, lower, upper, training, inplace=True)


@_export
def as_strided_(input, size, stride, storage_offset=None):
    _check_tensor("as_strided_", "input", input, 1)
    return input.as_strided_(size, stride, storage_offset)


@_export
def addmv_(input, mat, vec, *, beta=1, alpha=1):
    _check_tensor("addmv_", "input", input, 1)
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


# ---------------------------------------------------------------------- embedding_bag
_MODES = {0: "sum", 1: "mean", 2: "max"}


@_export
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """ATen's ``embedding_bag``: ``(output, offset2bag, bag_size, max_indices)``.

    ``output`` is ``F.embedding_bag``'s (with its gradients). The other three are what PyTorch's
    CPU kernel returns for its backward: the bag of each index (empty on the kernel's fast sum
    path: float32/float16/bfloat16 weights without padding_idx), the number of non-padding
    indices per bag (zeros for sum), and for max the row index that gave each maximum (else a
    copy of bag_size)."""
    _check_tensor("embedding_bag", "weight", weight, 1)
    _check_tensor("embedding_bag", "indices", indices, 2)
    _check_tensor("embedding_bag", "offsets", offsets, 3)
    if mode not in _MODES:
        raise ValueError(f"embedding_bag(): mode has to be 0 (sum), 1 (mean) or 2 (max), got {mode!r}")
    if indices.dim() != 1:
        raise ValueError(f"input has to be 1D Tensor, but got Tensor of dimension {indices.dim()}")
    mname = _MODES[mode]
    if per_sample_weights is not None and mname != "sum":
        raise RuntimeError("embedding_bag: per_sample_weights only supported with mode='sum'")
    n_rows = weight.shape[0]
    if padding_idx is not None and padding_idx < 0:
        padding_idx = padding_idx + n_rows           # as PyTorch: a negative padding_idx counts from the end
    if padding_idx is not None and not 0 <= padding_idx < n_rows:
        raise RuntimeError(f"padding_idx must be within the number of embeddings, -{n_rows} through {n_rows - 1}, "
                           f"but got {padding_idx - n_rows if padding_idx < 0 else padding_idx}")
    out = _F().embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, mname, sparse,
                             per_sample_weights, include_last_offset, padding_idx)
    idx = indices.detach().long()
    offs = offsets.detach().long()
    n = idx.shape[0]
    num_bags = out.shape[0]
    pos = api.arange(n, device=idx.device)
    bag_of = (api.searchsorted(offs, pos, right=True) - 1).clamp(min=0)
    fast = (mname == "sum" and padding_idx is None
            and weight.dtype in (_t.float32, _t.float16, _t.bfloat16))
    offset2bag = api.empty((0,), dtype=_t.int64, device=idx.device) if fast else bag_of
    if mname == "sum":       # (PyTorch's sum kernel leaves one zero per offset, include_last_offset or not)
        bag_size = api.zeros((offs.shape[0],), dtype=_t.int64, device=idx.device)
    else:
        keep = (idx != padding_idx) if padding_idx is not None else api.ones((n,), dtype=_t.bool_,
                                                                             device=idx.device)
        valid = keep & (bag_of < num_bags)
        bag_size = api.zeros((num_bags,), dtype=_t.int64, device=idx.device).index_add(
            0, bag_of.clamp(max=max(num_bags - 1, 0)), valid.long()) if n and num_bags else \
            api.zeros((num_bags,), dtype=_t.int64, device=idx.device)
    if mname == "max":
        max_indices = _max_rows(weight.detach(), idx, bag_of, num_bags, padding_idx)
    else:
        max_indices = bag_size.clone()
    return out, offset2bag, bag_size, max_indices


def _max_rows(weight, idx, bag_of, num_bags, padding_idx):
    """For each bag and column, the index (a row of ``weight``) whose value is the bag's maximum
    (the first such in the bag); 0 for an empty bag."""
    w = weight.numpy(force=True)
    ix = idx.numpy(force=True)
    bags = bag_of.numpy(force=True)
    res = np.zeros((num_bags, w.shape[1]), dtype=np.int64)
    best = np.full((num_bags, w.shape[1]), -np.inf, dtype=np.float64)
    seen = np.zeros(num_bags, dtype=bool)
    for i, (row, b) in enumerate(zip(ix, bags)):
        if b >= num_bags or (padding_idx is not None and row == padding_idx):
            continue
        vals = w[row].astype(np.float64)
        better = vals > best[b] if seen[b] else np.ones_like(vals, dtype=bool)
        res[b][better] = row
        best[b][better] = vals[better]
        seen[b] = True
    return api.tensor(res, device=weight.device)


# ---------------------------------------------------------------------- conv_tbc
@_export
def conv_tbc(input, weight, bias, pad=0):
    """A 1-d convolution over (time, batch, channel) input with a (kernel, in, out) weight:
    ``conv1d`` on the (batch, channel, time) view, result back in (time, batch, out) order."""
    _check_tensor("conv_tbc", "input", input, 1)
    _check_tensor("conv_tbc", "weight", weight, 2)
    _check_tensor("conv_tbc", "bias", bias, 3)
    if input.dim() != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.dim() != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.dim() != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    out = _F().conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, int(pad))
    return out.permute(2, 0, 1).contiguous()


# ---------------------------------------------------------------------- norms
@_export
def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):
    """PyTorch implements ``native_norm`` for sparse tensors only; ember has no sparse tensors."""
    _check_tensor("native_norm", "input", input, 1)
    name = "aten::native_norm" if dim is None else "aten::native_norm.ScalarOpt_dim_dtype"
    raise NotImplementedError(f"Could not run '{name}' with arguments from the '{input.device.type.upper()}' "
                              "backend: PyTorch implements native_norm for sparse tensors only; for a dense "
                              "tensor use ember.linalg.vector_norm or Tensor.norm")


@_export
def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm over every dim but ``dim`` (kept, the others size 1), weight norm's norm;
    ``dim=-1``: the norm of the whole tensor (0-d)."""
    _check_tensor("norm_except_dim", "v", v, 1)
    from ..linalg import vector_norm
    if dim == -1:
        return vector_norm(v, pow)
    nd = v.dim()
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < max(nd, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, {max(nd, 1) - 1}], "
                         f"but got {dim})")
    others = tuple(i for i in range(nd) if i != d)
    if not others:                 # a 1-d tensor: the norm of each single element
        return v.abs()
    return vector_norm(v, pow, dim=others, keepdim=True)


# ---------------------------------------------------------------------- segment_reduce
_SEGMENT_REDUCE = ("sum", "prod", "mean", "max", "min")


@_export
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce consecutive segments of ``data`` along ``axis``. ``lengths`` (or ``offsets``, one
    more than the segments) gives the segments; its leading dims match ``data``'s before
    ``axis``. An empty segment gives ``initial`` if given, else the reduction's identity (sum 0,
    prod 1, max -inf, min inf, mean nan). Written in ember ops (scatter_reduce), so it has
    gradients."""
    _check_tensor("segment_reduce", "data", data, 1)
    red = {"amax": "max", "amin": "min"}.get(reduce, reduce)
    if red not in _SEGMENT_REDUCE:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for '{data.dtype.legacy_name}'")
    ax = axis + data.dim() if axis < 0 else axis
    if lengths is not None:
        _check_tensor("segment_reduce", "lengths", lengths, 3)
        lens = lengths.detach().long()
        if lens.dim() - 1 != ax:
            raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}.")
        if bool((lens < 0).any()):
            raise RuntimeError("lengths contains negative value!")
        offs = api.cat([api.zeros(tuple(lens.shape[:-1]) + (1,), dtype=_t.int64, device=lens.device),
                        lens.cumsum(-1)], -1)
    else:
        _check_tensor("segment_reduce", "offsets", offsets, 4)
        offs = offsets.detach().long()
        if offs.dim() - 1 != ax:
            raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of offsets but got {axis}.")
        lens = offs[..., 1:] - offs[..., :-1]
    n_axis = data.shape[ax]
    if not unsafe and bool((lens.sum(-1) != n_axis).any()):
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                           "data.size(lengths.dim()-1) when !unsafe.")
    n_seg = lens.shape[-1]
    # segment id of each position along axis, per leading index: searchsorted over the offsets
    pos = api.arange(n_axis, device=data.device).expand(tuple(offs.shape[:-1]) + (n_axis,)).contiguous()
    seg = api.searchsorted(offs[..., 1:].contiguous(), pos, right=True).clamp(max=max(n_seg - 1, 0))
    trailing = tuple(data.shape[ax + 1:])
    seg_full = seg.reshape(tuple(seg.shape) + (1,) * len(trailing)).expand(tuple(data.shape))
    out_shape = tuple(data.shape[:ax]) + (n_seg,) + trailing
    ident = {"sum": 0.0, "prod": 1.0, "mean": 0.0, "max": float("-inf"), "min": float("inf")}[red]
    base = api.full(out_shape, ident, dtype=data.dtype, device=data.device)
    if n_axis and n_seg:
        scat = {"sum": "sum", "prod": "prod", "mean": "sum", "max": "amax", "min": "amin"}[red]
        res = base.scatter_reduce(ax, seg_full.contiguous(), data, scat, include_self=True)
    else:
        res = base
    cnt = lens.reshape(tuple(lens.shape) + (1,) * len(trailing)).expand(out_shape)
    empty = cnt == 0
    if red == "mean":
        if initial is not None:
            res = (res + initial) / cnt.to(data.dtype)       # (as PyTorch: initial joins the sum, not the count)
        else:
            res = res / cnt.to(data.dtype)
    elif initial is not None:
        if red == "sum":
            res = res + initial
        elif red == "prod":
            res = res * initial
        elif red == "max":
            res = api.maximum(res, api.full((), initial, dtype=data.dtype, device=data.device))
        else:
            res = api.minimum(res, api.full((), initial, dtype=data.dtype, device=data.device))
    if initial is not None:
        res = api.where(empty, api.full((), initial, dtype=data.dtype, device=data.device), res)
    elif red == "mean":
        res = api.where(empty, api.full((), float("nan"), dtype=data.dtype, device=data.device), res)
    return res


# ---------------------------------------------------------------------- legacy defaults, dlpack
@_export
def set_default_tensor_type(t):
    """Deprecated in PyTorch (2.1+; warns): the default floating dtype from a legacy tensor type
    (``ember.DoubleTensor`` or the string ``'torch.DoubleTensor'`` / ``'ember.DoubleTensor'``).
    CUDA tensor types set the default device too in PyTorch; ember refuses them (use
    ``set_default_dtype`` and ``.to('cuda')``)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    if isinstance(t, str):
        mod, _, name = t.rpartition(".")
        if mod not in ("torch", "ember", "torch.cuda", "ember.cuda"):
            raise ModuleNotFoundError(f"No module named '{mod or name}'")
        if mod.endswith("cuda"):
            raise NotImplementedError("ember.set_default_tensor_type: CUDA tensor types (default device) are not "
                                      "supported; use ember.set_default_dtype and move tensors with .to('cuda')")
        from .torch_compat import LEGACY_TENSOR_TYPES
        if name not in LEGACY_TENSOR_TYPES:
            raise TypeError(f"invalid type: '{t}'")
        t = LEGACY_TENSOR_TYPES[name]
    dt = getattr(t, "dtype", None)
    if not isinstance(dt, _t.dtype) or not isinstance(t, type):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    if not dt.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _t.set_default_dtype(dt)


@_export
def to_dlpack(tensor):
    """``ember.to_dlpack(t)``: a DLPack capsule over ``t``'s memory (``ember.utils.dlpack``)."""
    from ..utils.dlpack import to_dlpack as _to
    return _to(tensor)


_export.install()
