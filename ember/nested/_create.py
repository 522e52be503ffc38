"""Making nested tensors and turning them back into dense ones.

``nested_tensor`` copies (the result is a new leaf, as torch's);
``as_nested_tensor`` keeps autograd to the given components (one ``cat``);
``nested_tensor_from_jagged`` and ``narrow`` are views over a dense buffer (no
copy; gradients reach that buffer); ``to_padded_tensor`` is one
``index_select`` from the buffer plus a padding element, so it is
differentiable and never reads rows outside the components.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import _layout as L
from .. import types as _t
from ..tensor import Tensor, _make
from ._tensor import NestedTensor, pack, wrap


def _api():
    from ..ops import api
    return api


def _layout_arg(layout):
    lay = L.strided if layout is None else L.as_layout(layout)
    if lay is not L.strided and lay is not L.jagged:
        raise RuntimeError(f"Specified layout is unsupported for nested tensors: {lay}")
    return lay


def _check_components(ts, fn):
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"{fn}(): expected a list of tensors, got {type(ts).__name__}")
    if len(ts) == 0:
        raise RuntimeError(f"ember.nested.{fn}: an empty list of components is not supported")
    nds = [t.ndim for t in ts]
    for i, n in enumerate(nds):
        if n != nds[0]:
            raise RuntimeError(f"All Tensors given to nested_tensor must have the same dimension. Found "
                               f"dimension {n} for Tensor at index {i} and dimension {nds[0]} for Tensor at "
                               f"index 0.")
    for i, t in enumerate(ts):
        if isinstance(t, NestedTensor):
            raise RuntimeError(f"ember.nested.{fn}: component {i} is itself a nested tensor")
        if t.device != ts[0].device:
            raise RuntimeError(f"ember.nested.{fn}: all components must be on the same device, got "
                               f"{ts[0].device} at index 0 and {t.device} at index {i}")


def _jagged_ok(ts):
    if ts[0].ndim == 0 or len({tuple(t.shape[1:]) for t in ts}) != 1:
        raise RuntimeError("Cannot represent given tensor list as a nested tensor with the jagged layout. "
                           "Note that the jagged layout only allows for a single ragged dimension. For "
                           "example: (B, *, D_0, D_1, ..., D_N), with ragged * dim.")


def _as_components(ts, dtype, device, copy, layout=L.strided):
    api = _api()
    out = []
    for t in ts:
        if not isinstance(t, Tensor):
            t = api.tensor(t, dtype=dtype, device=device)
        elif copy:
            t = t.detach()
        if dtype is not None and t.dtype is not dtype:
            t = t.to(dtype)
        if device is not None and t.device != _t.as_device(device):
            t = t.to(device)
        out.append(t)
    if dtype is None and len({t.dtype for t in out}) > 1:
        # torch: the jagged layout refuses mixed dtypes, the strided one takes the first's
        if layout is L.jagged:
            raise RuntimeError("When constructing a nested tensor, all tensors in list must have the same dtype")
        out = [t.to(out[0].dtype) for t in out]
    return out


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A new nested tensor (a copy, a leaf) of the given tensors / nested lists."""
    lay = _layout_arg(layout)
    if pin_memory:
        raise NotImplementedError("ember.nested: nested_tensor(..., pin_memory=True) is not supported")
    if not isinstance(tensor_list, (list, tuple)):
        raise TypeError(f"nested_tensor(): argument 'tensor_list' must be a list of tensors or lists, got "
                        f"{type(tensor_list).__name__}")
    comps = _as_components(tensor_list, dtype, device, copy=True, layout=lay)
    _check_components(comps, "nested_tensor")
    if lay is L.jagged:
        _jagged_ok(comps)
    nt = pack([c.clone() if len(comps) == 1 else c for c in comps], lay)
    nt = wrap(nt._vals.detach(), nt._starts, nt._lens, nt._stored, None, lay, packed=nt._packed, jid=nt._jid)
    if requires_grad:
        nt.requires_grad_(True)
    return nt


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    """A nested tensor of ``ts`` (a list of tensors, or a dense tensor split along dim 0) that keeps
    autograd to them; a nested tensor comes back as is (converted when asked)."""
    lay = _layout_arg(layout)
    if isinstance(ts, NestedTensor):
        if lay is not ts.layout and layout is not None:
            raise NotImplementedError(f"ember.nested.as_nested_tensor: converting layout {ts.layout} to {lay} "
                                      f"is not supported")
        return ts.to(dtype=dtype, device=device) if (dtype or device) else ts
    if isinstance(ts, Tensor):
        if ts.ndim == 0:
            raise RuntimeError("as_nested_tensor(): a 0-d tensor has no components (expected dim >= 1)")
        comps = list(ts.unbind(0))
    else:
        comps = ts
    comps = _as_components(comps, dtype, device, copy=False, layout=lay)
    _check_components(comps, "as_nested_tensor")
    if lay is L.jagged:
        _jagged_ok(comps)
    return pack(comps, lay)


def _int_array(t, what):
    if isinstance(t, Tensor):
        if t.dtype.is_floating_point or t.dtype.is_complex:
            raise RuntimeError(f"nested_tensor_from_jagged(): {what} must be an integer tensor, got {t.dtype}")
        return np.asarray(t.detach().numpy(), dtype=np.int64).reshape(-1)
    raise TypeError(f"nested_tensor_from_jagged(): {what} must be a tensor, got {type(t).__name__}")


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None, min_seqlen=None,
                              max_seqlen=None):
    """A jagged view over ``values`` (``(sum_i len_i, *D)``): component ``i`` is rows
    ``offsets[i] : offsets[i] + lengths[i]`` (``lengths`` defaults to ``diff(offsets)``)."""
    if not isinstance(values, Tensor) or isinstance(values, NestedTensor):
        raise TypeError(f"nested_tensor_from_jagged(): values must be a dense tensor, got {type(values).__name__}")
    if values.ndim < 1:
        raise RuntimeError("nested_tensor_from_jagged(): values must have at least one dimension")
    jd = 1 if jagged_dim is None else int(jagged_dim)
    if jd < 1:
        raise ValueError(f"Expected jagged_dim >=1, but got {jd}.")
    if jd > values.ndim:
        raise IndexError(f"nested_tensor_from_jagged(): jagged_dim={jd} is out of range for values of "
                         f"{values.ndim} dims (expected 1 <= jagged_dim <= {values.ndim})")
    if jd > 1:
        # the ragged rows are values' dim jd - 1: the buffer holds them first (a view), the
        # permutation puts them back, so values() gives back ``values`` itself (torch's)
        r = jd - 1
        nt = nested_tensor_from_jagged(values.movedim(r, 0), offsets, lengths, None, min_seqlen, max_seqlen)
        perm = tuple(c + 1 if c < r else 0 if c == r else c for c in range(values.ndim))
        return wrap(nt._vals, nt._starts, nt._lens, nt._stored, perm, L.jagged, packed=True,
                    offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): offsets or lengths is required")
        lens = _int_array(lengths, "lengths")
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        offsets_t, lengths_t = None, None
    else:
        offs = _int_array(offsets, "offsets")
        if offs.shape[0] < 2:
            raise RuntimeError(f"nested_tensor_from_jagged(): offsets must hold at least 2 entries, got "
                               f"{offs.shape[0]}")
        starts = offs[:-1]
        lens = np.diff(offs) if lengths is None else _int_array(lengths, "lengths")
        if lens.shape[0] != starts.shape[0]:
            raise RuntimeError(f"nested_tensor_from_jagged(): lengths has {lens.shape[0]} entries, expected "
                               f"{starts.shape[0]} (one per component)")
        offsets_t, lengths_t = offsets, lengths
    n = values.shape[0]
    if np.any(lens < 0) or np.any(starts < 0) or np.any(starts + lens > n):
        raise RuntimeError(f"nested_tensor_from_jagged(): offsets/lengths address rows outside values "
                           f"(which has {n} rows)")
    stored = [(int(k),) + tuple(values.shape[1:]) for k in lens]
    return wrap(values, starts, lens, stored, None, L.jagged, packed=True, offsets_t=offsets_t,
                lengths_t=lengths_t)


def narrow(tensor, dim, start, length, layout=L.strided):
    """Component ``b`` is ``tensor[b].narrow(dim - 1, start[b], length[b])`` (start / length: ints or
    per-component tensors). jagged: a view over ``tensor`` (no copy); strided: a copy."""
    lay = _layout_arg(layout)
    if not isinstance(tensor, Tensor) or isinstance(tensor, NestedTensor):
        raise TypeError("narrow(): tensor must be a dense tensor")
    if tensor.ndim < 2:
        raise RuntimeError(f"narrow(): expected a tensor of at least 2 dims, got {tensor.ndim}")
    dim = dim % tensor.ndim if -tensor.ndim <= dim < tensor.ndim else None
    if dim is None or dim == 0:
        raise RuntimeError("narrow(): dim must be a dimension after the batch dimension 0")
    b = tensor.shape[0]
    st = np.broadcast_to(_int_array(start, "start") if isinstance(start, Tensor) else np.int64(start), (b,))
    ln = np.broadcast_to(_int_array(length, "length") if isinstance(length, Tensor) else np.int64(length), (b,))
    size = tensor.shape[dim]
    if np.any(st < 0) or np.any(ln < 0) or np.any(st + ln > size):
        raise RuntimeError(f"narrow(): start + length exceeds dimension size ({size})")
    if lay is L.strided:
        comps = [tensor[i].narrow(dim - 1, int(st[i]), int(ln[i])) for i in range(b)]
        return pack(comps, L.strided)
    if dim != 1:
        raise RuntimeError("narrow(): jagged layout only supports dim=1")
    rest = tuple(tensor.shape[2:])
    vals = tensor.reshape((b * size,) + rest)
    starts = np.arange(b, dtype=np.int64) * size + st
    offs = _make(np.concatenate([starts, [starts[-1] + ln[-1]]]).astype(np.int64), tensor.device, _t.int64)
    lens_t = _make(np.array(ln, dtype=np.int64), tensor.device, _t.int64)
    stored = [(int(k),) + rest for k in ln]
    return wrap(vals, starts, np.array(ln), stored, None, L.jagged, packed=True, offsets_t=offs, lengths_t=lens_t)


def to_padded_tensor(input, padding, output_size=None):
    """A dense ``(B, *max sizes)`` tensor: each component in its corner, ``padding`` elsewhere."""
    if not isinstance(input, NestedTensor):
        raise NotImplementedError("Could not run 'aten::to_padded_tensor' with arguments from the "
                                  f"'{input.device.type.upper()}' backend (input is not a nested tensor)")
    if not isinstance(padding, numbers.Number):
        raise TypeError(f"to_padded_tensor(): argument 'padding' must be a number, got {type(padding).__name__}")
    api = _api()
    shapes = input._comp_shapes()
    b, cd = len(shapes), input._cdim
    mx = [max((s[d] for s in shapes), default=0) for d in range(cd)]
    if output_size is not None:
        output_size = [int(x) for x in output_size]
        if len(output_size) != cd + 1:
            raise RuntimeError(f"Length of output_size does not match NestedTensor dims. Broadcasting is not "
                               f"supported. (got {len(output_size)}, expected {cd + 1})")
        if output_size[0] < b or any(o < m for o, m in zip(output_size[1:], mx)):
            raise RuntimeError("Value in output_size is less than NestedTensor padded size. Truncation is not "
                               "supported.")
        full = output_size
        if input._nlayout is L.jagged:
            # torch's jagged to_padded_tensor takes only the ragged dim's size from output_size
            r = input._ragged_idx
            full = [b] + [output_size[r] if d + 1 == r else m for d, m in enumerate(mx)]
    else:
        full = [b] + mx
    vals = input._vals
    if input._packed and input._perm is None and list(full[2:]) == list(vals.shape[1:]):
        return _pad_rows(input, full, padding)
    rows_inner = int(np.prod(vals.shape[1:])) if input._packed else 1
    flat = vals.reshape(-1)
    pad_at = flat.shape[0]
    idx = np.full(full, pad_at, dtype=np.int64)
    for i, (s0, stored) in enumerate(zip(input._starts, input._stored)):
        part = np.arange(int(np.prod(stored)), dtype=np.int64).reshape(stored) + int(s0) * rows_inner
        if input._perm is not None:
            part = part.transpose(input._perm)
        idx[(i,) + tuple(slice(0, k) for k in part.shape)] = part
    src = api.cat([flat, api.full((1,), padding, dtype=vals.dtype, device=vals.device)], 0)
    out = src.index_select(0, _make(idx.reshape(-1), vals.device, _t.int64))
    return out.reshape(tuple(full))


def _pad_rows(input, full, padding):
    """to_padded_tensor of a packed, untransposed tensor whose regular dims need no padding: one
    row gather (index arrays built without a loop over the components)."""
    api = _api()
    vals, lens, starts = input._vals, input._lens, input._starts
    b, width = full[0], full[1]
    total = int(lens.sum())
    first = np.repeat(np.cumsum(lens) - lens, lens)                  # where each row's component begins
    pos = np.arange(total, dtype=np.int64) - first                      # the row's position in it
    comp = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    src = np.repeat(starts, lens) + pos
    idx = np.full((b, width), vals.shape[0], dtype=np.int64)            # the padding row by default
    idx[comp, pos] = src
    pad = api.full((1,) + tuple(vals.shape[1:]), padding, dtype=vals.dtype, device=vals.device)
    rows = api.cat([vals, pad], 0).index_select(0, _make(idx.reshape(-1), vals.device, _t.int64))
    return rows.reshape(tuple(full))


def masked_select(tensor, mask):
    """The elements of dense ``tensor`` where the dense ``(B, L)``-prefix ``mask`` holds, as a jagged
    nested tensor (component ``b`` = ``tensor[b][mask[b]]``), torch's ``nested.masked_select``."""
    if not isinstance(tensor, Tensor) or not isinstance(mask, Tensor):
        raise TypeError("masked_select(): tensor and mask must be tensors")
    if mask.dtype is not _t.bool_:
        raise RuntimeError(f"masked_select(): mask must be a bool tensor, got {mask.dtype}")
    if tensor.ndim < 2 or tuple(mask.shape) != tuple(tensor.shape[:mask.ndim]) or mask.ndim != 2:
        raise RuntimeError(f"masked_select(): mask of shape {list(mask.shape)} must be 2-d and match the leading "
                           f"dims of tensor of shape {list(tensor.shape)}")
    m = np.asarray(mask.numpy())
    b, n = m.shape
    rows = np.nonzero(m.reshape(-1))[0].astype(np.int64)
    rest = tuple(tensor.shape[2:])
    vals = tensor.reshape((b * n,) + rest).index_select(0, _make(rows, tensor.device, _t.int64))
    lens = m.sum(axis=1).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return wrap(vals, starts, lens, [(int(k),) + rest for k in lens], None, L.jagged, packed=True)
