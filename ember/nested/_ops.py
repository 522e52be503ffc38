"""Operations on nested tensors, in ordinary ember ops (so autograd comes for free).

Rule of thumb: if an op touches only regular dims that the packed buffer
``_vals`` stores as its own dims, it runs once on ``_vals`` (pointwise ops
always do: the structure is unchanged); otherwise it runs per component and
the results are packed again (``pack_like``: one ``cat``).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import _layout as L
from .. import types as _t
from ..tensor import Tensor, _make
from ._tensor import NestedTensor, _wrap, pack, pack_like, same_structure, wrap


def _api():
    from ..ops import api
    return api


def _F():
    from ..nn import functional
    return functional


# ---------------------------------------------------------------------- pointwise
def map_values(nt, fn):
    """``fn`` applied to the buffer (an elementwise ``fn``: the structure stays)."""
    return nt._with_vals(fn(nt._vals))


def unary(name):
    def method(self, *args, **kwargs):
        return map_values(self, lambda v: getattr(v, name)(*args, **kwargs))
    method.__name__ = name
    method.__doc__ = f"``{name}`` of every element (runs once on the packed buffer)."
    return method


def _dense_operand_rows(nt, other, opname):
    """A dense ``other`` as an operand for ``nt._vals`` (broadcasting as against each component),
    or None when it must be applied per component."""
    nd = nt.dim()
    if other.ndim == 0:
        return other
    if nt._nlayout is not L.jagged:
        raise RuntimeError("Expected both self and other to be nested, but got a nested self and non-nested other")
    shape = tuple(other.shape)
    if not nt._packed or nt._perm is not None:
        return None
    if other.ndim < nd - 1 or (other.ndim == nd - 1 and shape[0] == 1):
        return other                 # broadcasts over the regular (trailing) dims only
    if other.ndim == nd and shape[0] in (1, len(nt)) and shape[1] == 1:
        # (B, 1, *D): one row per component, repeated over that component's rows
        rows = np.repeat(np.arange(len(nt), dtype=np.int64), nt._lens) if shape[0] > 1 else \
            np.zeros(int(nt._lens.sum()), np.int64)
        per = other.reshape((shape[0],) + shape[2:])
        if not nt._gapless():
            return None
        return per.index_select(0, _make(rows, other.device, _t.int64))
    raise RuntimeError(f"cannot call binary pointwise function {opname}.Tensor with inputs of shapes "
                       f"{nt.size()} and {_t.Size(shape)}")


def binary(name, fn, a, b):
    """``fn(a, b)`` elementwise where one or both are nested (numbers / dense tensors broadcast
    against every component as torch allows)."""
    na, nb = isinstance(a, NestedTensor), isinstance(b, NestedTensor)
    if na and nb:
        if len(a) != len(b) or a._comp_shapes() != b._comp_shapes():
            if a._nlayout is L.jagged:
                raise RuntimeError(f"cannot call binary pointwise function {name}.Tensor with inputs of shapes "
                                   f"{tuple(a.size())} and {tuple(b.size())}")
            raise RuntimeError(f"{name} does not support broadcasting when given a NestedTensor")
        if same_structure(a, b):
            return a._with_vals(fn(a._vals, b._vals))
        return pack_like(a, [fn(x, y) for x, y in zip(a.unbind(), b.unbind())])
    nt = a if na else b
    other = b if na else a
    if isinstance(other, numbers.Number) or (isinstance(other, Tensor) and other.ndim == 0 and
                                             not isinstance(other, NestedTensor)):
        return map_values(nt, (lambda v: fn(v, other)) if na else (lambda v: fn(other, v)))
    if not isinstance(other, Tensor):
        return NotImplemented
    rows = _dense_operand_rows(nt, other, name)
    if rows is not None:
        return map_values(nt, (lambda v: fn(v, rows)) if na else (lambda v: fn(rows, v)))
    nd, shape = nt.dim(), tuple(other.shape)
    if other.ndim == nd and shape[0] in (1, len(nt)) and shape[1] == 1:
        # (B, 1, *D) against a transposed / holey tensor: component i meets other[i]
        parts = [other[i if shape[0] > 1 else 0] for i in range(len(nt))]
    elif other.ndim < nd - 1 or (other.ndim == nd - 1 and shape[0] == 1):
        parts = [other] * len(nt)
    else:
        raise RuntimeError(f"cannot call binary pointwise function {name}.Tensor with inputs of shapes "
                           f"{nt.size()} and {_t.Size(shape)}")
    comps = [fn(c, o) if na else fn(o, c) for c, o in zip(nt.unbind(), parts)]
    return pack_like(nt, comps)


# ---------------------------------------------------------------------- dims
def _regular_dim(nt, dim, opname):
    """The component dim of nested dim ``dim`` (after wrapping); dim 0 is refused."""
    d = _wrap(dim, nt.dim())
    if d == 0:
        raise RuntimeError(f"Cannot apply {opname} across nested dimension 0")
    return d - 1


def _fast_dim(nt, c):
    """The ``_vals`` dim holding component dim ``c``, or None when ``c`` is ragged / not stored as
    its own buffer dim (then the op runs per component)."""
    if not nt._packed:
        return None
    s = nt._perm_stored(c)
    return s if s >= 1 else None


def softmax(nt, dim, dtype=None, *, log=False):
    name = "log_softmax" if log else "softmax"
    if nt._nlayout is L.jagged and _wrap(dim, nt.dim()) == 0:
        raise RuntimeError(f"{name}(): not supported when reducing across the batch dimension for NestedTensor")
    c = _regular_dim(nt, dim, name)
    s = _fast_dim(nt, c)
    f = (lambda v, k: v.log_softmax(k, dtype=dtype)) if log else (lambda v, k: v.softmax(k, dtype=dtype))
    if s is not None:
        return nt._with_vals(f(nt._vals, s)) if dtype is None else _retyped(nt, f(nt._vals, s))
    return pack_like(nt, [f(x, c) for x in nt.unbind()])


def _retyped(nt, vals):
    return wrap(vals, nt._starts, nt._lens, nt._stored, nt._perm, nt._nlayout, packed=nt._packed, jid=nt._jid,
                offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)


def reduce(nt, opname, dim=None, keepdim=False, dtype=None):
    """``sum`` / ``mean`` over one nested dim (or all elements with ``dim=None``)."""
    api = _api()
    if dim is None:
        rows = _make(nt._row_index(), nt.device, _t.int64)
        picked = nt._vals.index_select(0, rows)
        return getattr(picked, opname)(dtype=dtype)
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            raise NotImplementedError(f"ember.nested: {opname} over several dims at once is not supported")
        dim = dim[0]
    d = _wrap(dim, nt.dim())
    if d == 0 and nt._nlayout is L.jagged:
        raise RuntimeError(f"{opname}(): reducing along the batch dimension but not the ragged dimension is not "
                           f"supported for nested tensors")
    if d == 0:
        raise RuntimeError(f"NestedTensor can only be reduced across the last dimension for now got dimension "
                           f"0 instead.")
    if nt._nlayout is L.strided and not keepdim:
        raise RuntimeError("NestedTensor always requires keepdim=True for now.")
    c = d - 1
    if nt._nlayout is L.jagged and d == nt._ragged_idx:
        # reducing the ragged dim: every component gives one regular row -> a dense tensor
        outs = [getattr(x, opname)(c, keepdim=keepdim, dtype=dtype) for x in nt.unbind()]
        return api.stack(outs, 0)
    s = _fast_dim(nt, c)
    if s is not None:
        out = getattr(nt._vals, opname)(s, keepdim=keepdim, dtype=dtype)
        stored = [st[:s] + ((1,) if keepdim else ()) + st[s + 1:] for st in nt._stored]
        perm = nt._perm
        if perm is not None and not keepdim:
            perm = tuple(p - (p > s) for p in perm if p != s)
        return wrap(out, nt._starts, nt._lens, stored, perm, nt._nlayout, packed=True, jid=nt._jid,
                    offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)
    return pack_like(nt, [getattr(x, opname)(c, keepdim=keepdim, dtype=dtype) for x in nt.unbind()])


def transpose(nt, dim0, dim1):
    nd = nt.dim()
    d0, d1 = _wrap(dim0, nd), _wrap(dim1, nd)
    if d0 == 0 or d1 == 0:
        if nt._nlayout is L.jagged:
            raise ValueError("Transpose is not supported on the batch dimension for jagged NT")
        raise RuntimeError("Nested tensor dimension 0 cannot be transposed")
    perm = list(nt._perm if nt._perm is not None else range(nt._cdim))
    perm[d0 - 1], perm[d1 - 1] = perm[d1 - 1], perm[d0 - 1]
    return wrap(nt._vals, nt._starts, nt._lens, nt._stored, perm, nt._nlayout, packed=nt._packed, jid=nt._jid,
                offsets_t=nt._offsets_t, lengths_t=nt._lengths_t)


def contiguous(nt, memory_format=None):
    """A copy without holes; jagged keeps its ragged dim stored first (a transposed one stays
    transposed over a fresh buffer), strided is packed in the logical order."""
    if nt.is_contiguous():
        return nt
    if nt._nlayout is L.jagged:
        # a copy whose values() (the logical order) are contiguous; the buffer stays rows-first
        r = nt._ragged_idx - 1
        rows = pack([c.movedim(r, 0) for c in nt.unbind()], L.jagged, jid=nt._jid)   # (sum j, other dims)
        if r == 0:
            return rows
        logical = rows._vals.movedim(0, r).contiguous()               # = values() layout
        perm = tuple(c + 1 if c < r else 0 if c == r else c for c in range(nt._cdim))
        return wrap(logical.movedim(r, 0), rows._starts, rows._lens, rows._stored, perm, L.jagged, packed=True,
                    jid=nt._jid)
    return pack(nt.unbind(), L.strided)


def _sizes_arg(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return tuple(args)


def reshape(nt, *shape, view=False):
    """torch's nested reshape: dim 0 is the batch; ``-1`` keeps a component's own size at that
    position (how an irregular dim is written), other entries are explicit sizes."""
    shape = _sizes_arg(shape)
    what = "view" if view else "reshape"
    if not shape or int(shape[0]) != len(nt):
        raise RuntimeError(f"{what}: For now nested {what} cannot change or infer the implicit batch "
                           f"dimension (got {list(shape)} for a nested tensor of {len(nt)} components)")
    if view and not nt.is_contiguous():
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    new = []
    for old in nt._comp_shapes():
        s = []
        for j, x in enumerate(shape[1:]):
            x = int(x)
            if x == -1:
                if j >= len(old):
                    raise RuntimeError(f"{what}: -1 at dim {j + 1} has no size to keep in a component of "
                                       f"shape {list(old)}")
                x = old[j]
            s.append(x)
        if int(np.prod(s)) != int(np.prod(old)):
            raise RuntimeError(f"shape '{list(shape)}' is invalid for a component of shape {list(old)}")
        new.append(tuple(s))
    return pack_like(nt, [c.reshape(s) for c, s in zip(nt.unbind(), new)], keep_ragged=False) \
        if not (nt.is_contiguous() and nt._perm is None) else _reinterpret(nt, new)


def _reinterpret(nt, new_shapes):
    """The contiguous ``nt`` with each component's elements read in ``new_shapes`` (no copy)."""
    flat = nt._vals.reshape(-1)
    lens = np.array([int(np.prod(s)) for s in new_shapes], dtype=np.int64)
    if nt._nlayout is L.jagged or len({s[1:] for s in new_shapes}) == 1 and all(len(s) >= 1 for s in new_shapes):
        inner = new_shapes[0][1:]
        if len({s[1:] for s in new_shapes}) != 1:
            return pack(list(c.reshape(s) for c, s in zip(nt.unbind(), new_shapes)), nt._nlayout)
        vals = flat.reshape((-1,) + tuple(inner))
        rl = np.array([s[0] for s in new_shapes], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(rl)[:-1]]).astype(np.int64)
        keep = nt._jid if nt._nlayout is L.jagged and np.array_equal(rl, nt._lens) else None
        return wrap(vals, starts, rl, new_shapes, None, nt._nlayout, packed=True, jid=keep)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return wrap(flat, starts, lens, new_shapes, None, nt._nlayout, packed=False)


# ---------------------------------------------------------------------- linear algebra
def matmul(a, b):
    na, nb = isinstance(a, NestedTensor), isinstance(b, NestedTensor)
    if na and nb:
        if len(a) != len(b):
            raise RuntimeError(f"matmul(): nested tensors with {len(a)} and {len(b)} components")
        comps = [x.matmul(y) for x, y in zip(a.unbind(), b.unbind())]
        try:
            return pack_like(a, comps, keep_ragged=False)
        except RuntimeError:
            raise RuntimeError(f"matmul(): not supported between inputs of shapes {tuple(a.size())} and "
                               f"{tuple(b.size())} (the result is ragged in more than one dim)") from None
    if not na:
        raise RuntimeError("matmul(): a dense tensor @ a nested tensor is not supported for nested tensors "
                           "(expected nested @ nested or nested @ dense)")
    if a._nlayout is not L.jagged:
        raise RuntimeError("Expected both to be nested, but got a nested self and non-nested other")
    if not isinstance(b, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be a Tensor, got {type(b).__name__}")
    if b.ndim > 2:
        raise RuntimeError(f"matmul(): not supported between inputs of shapes {tuple(a.size())} and "
                           f"{_t.Size(b.shape)}")
    if a.dim() < 2 and b.ndim == 2:
        raise RuntimeError("matmul(): a 1-d nested operand is not supported")
    last = a._cdim - 1
    s = _fast_dim(a, last)
    if s == a._vals.ndim - 1 and (b.ndim == 2 or a._cdim > 1):
        out = a._vals.matmul(b)
        if b.ndim == 1:
            stored = [st[:-1] for st in a._stored]
            return wrap(out, a._starts, a._lens, stored, _drop_last(a._perm), a._nlayout, packed=True, jid=a._jid,
                        offsets_t=a._offsets_t, lengths_t=a._lengths_t)
        stored = [st[:-1] + (b.shape[1],) for st in a._stored]
        return wrap(out, a._starts, a._lens, stored, a._perm, a._nlayout, packed=True, jid=a._jid,
                    offsets_t=a._offsets_t, lengths_t=a._lengths_t)
    return pack_like(a, [x.matmul(b) for x in a.unbind()])


def _drop_last(perm):
    if perm is None:
        return None
    k = len(perm) - 1
    return tuple(p for p in perm if p != k)


def bmm(a, b):
    if not (isinstance(a, NestedTensor) and isinstance(b, NestedTensor)):
        raise RuntimeError("bmm(): expected both arguments to be nested tensors (or both dense)")
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor (got {a.dim()}-d and {b.dim()}-d nested tensors)")
    return matmul(a, b)


def linear(input, weight, bias=None):
    """``F.linear`` of a nested input with a dense weight: one call on the buffer when the last dim
    is the buffer's last dim (jagged ``(B, j, D)``)."""
    F = _F()
    if isinstance(weight, NestedTensor) or isinstance(bias, NestedTensor):
        raise RuntimeError("linear(): a nested weight or bias is not supported")
    s = _fast_dim(input, input._cdim - 1)
    if s is not None and s == input._vals.ndim - 1:
        out = F.linear(input._vals, weight, bias)
        k = 1 if weight.ndim == 1 else weight.shape[0]
        if weight.ndim == 1:
            stored = [st[:-1] for st in input._stored]
            perm = _drop_last(input._perm)
        else:
            stored = [st[:-1] + (k,) for st in input._stored]
            perm = input._perm
        return wrap(out, input._starts, input._lens, stored, perm, input._nlayout, packed=True, jid=input._jid,
                    offsets_t=input._offsets_t, lengths_t=input._lengths_t)
    return pack_like(input, [F.linear(x, weight, bias) for x in input.unbind()])


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``(out, mean, rstd)`` of a nested input, each a nested tensor of the input's components
    (mean / rstd keep the normalized dims as size 1, as the dense op's): once on the buffer when
    the normalized dims are its trailing dims, else per component."""
    api = _api()
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(int(x) for x in normalized_shape)
    k = len(normalized_shape)
    if input._nlayout is L.strided and (weight is None or bias is None):
        raise ValueError("NestedTensor layer_norm requires weight and bias")
    if k == 0 or k > input._cdim:
        raise RuntimeError(f"layer_norm(): normalized_shape {list(normalized_shape)} does not fit a nested "
                           f"tensor of dim {input.dim()}")
    cd = input._cdim
    dims = [input._perm_stored(c) for c in range(cd - k, cd)]
    if input._packed and 0 not in dims and dims == list(range(input._vals.ndim - k, input._vals.ndim)):
        out, mean, rstd = api.native_layer_norm(input._vals, normalized_shape, weight, bias, eps)
        stats = [st[:len(st) - k] + (1,) * k for st in input._stored]
        return (input._with_vals(out),
                wrap(mean, input._starts, input._lens, stats, input._perm, input._nlayout, packed=True,
                     jid=input._jid, offsets_t=input._offsets_t, lengths_t=input._lengths_t),
                wrap(rstd, input._starts, input._lens, stats, input._perm, input._nlayout, packed=True,
                     jid=input._jid, offsets_t=input._offsets_t, lengths_t=input._lengths_t))
    if input._nlayout is L.jagged and input._ragged_idx - 1 >= cd - k:
        raise RuntimeError("layer_norm(): normalizing over the ragged dimension of a jagged nested tensor is "
                           "not supported")
    res = [api.native_layer_norm(x, normalized_shape, weight, bias, eps) for x in input.unbind()]
    return tuple(pack_like(input, [r[j] for r in res]) for j in range(3))


def dropout(input, p=0.5, training=True, inplace=False):
    F = _F()
    if inplace:
        raise NotImplementedError("ember.nested: dropout(..., inplace=True) of a nested tensor is not supported")
    if not training or p == 0.0:
        return input
    return map_values(input, lambda v: F.dropout(v, p, training))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """Attention of each sequence with itself: component ``i`` of the result is
    ``sdpa(query[i], key[i], value[i])`` (no padding is ever attended)."""
    F = _F()
    jagged = isinstance(query, NestedTensor) and query._nlayout is L.jagged
    if not all(isinstance(t, NestedTensor) for t in (query, key, value)):
        if jagged:
            raise ValueError(f"Expected query, key, and value to be nested tensors, but got query.is_nested: "
                             f"{query.is_nested}, key.is_nested: {key.is_nested}, and value.is_nested: "
                             f"{value.is_nested} instead.")
        raise RuntimeError("scaled_dot_product_attention(): query, key and value must all be nested tensors "
                           "(or all dense)")
    if attn_mask is not None:
        # torch 2.13 has no attention mask for nested inputs (each sequence attends to itself;
        # is_causal is the mask it takes): its errors, per layout
        if jagged:
            raise ValueError("Masks are not yet supported!")
        raise RuntimeError("Scaled_dot_product_attention: Nested tensors for query / key are not supported when "
                           "an explicit attn_mask is set")
    if not (len(query) == len(key) == len(value)):
        raise RuntimeError("scaled_dot_product_attention(): query, key and value have different batch sizes")
    if query.dim() != 4:
        raise RuntimeError(f"scaled_dot_product_attention(): expected 4-d nested query (B, H, L, E), got "
                           f"{query.dim()}-d")
    comps = []
    for q, k, v in zip(query.unbind(), key.unbind(), value.unbind()):
        o = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), dropout_p=dropout_p,
                                           is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        comps.append(o.squeeze(0))
    return pack_like(query, comps)


def cat(tensors, dim=0):
    if not all(isinstance(t, NestedTensor) for t in tensors):
        raise RuntimeError("cat(): expected all inputs to be nested tensors (or all dense)")
    first = tensors[0]
    d = _wrap(dim, first.dim())
    if d == 0:
        raise NotImplementedError("ember.nested: cat along the batch dimension 0 is not supported")
    n = len(first)
    if any(len(t) != n for t in tensors):
        raise RuntimeError("cat(): nested tensors must have the same number of components")
    api = _api()
    comps = [api.cat([t.unbind()[i] for t in tensors], d - 1) for i in range(n)]
    return pack_like(first, comps, keep_ragged=d != first._ragged_idx)


def to(nt, dtype=None, device=None):
    out = nt
    if device is not None and _t.as_device(device) != nt.device:
        out = _retyped(out, out._vals.to(device))
    if dtype is not None and dtype is not out.dtype:
        out = _retyped(out, out._vals.to(dtype))
    return out
