"""Which nested-tensor implementation takes an ember op called with a nested argument.

The dispatcher's slow path hands every op whose tensor argument is a ``NestedTensor`` to
``NestedTensor.__ember_route__`` (ember/_torch_function.py ``route``), with ``args`` holding
every parameter of the op's schema in order. Routing by op rather than by swapping code into
the public functions means a dense call pays nothing (``F.linear`` on plain tensors never gets
here) and ``F.gelu``, ``ember.gelu`` and ``x.gelu`` -- which all reach the ``gelu`` op -- share one
route.

* pointwise ops (the ``pointwise`` tag) and their in-place variants, plus ``fill_`` / ``copy_``:
  once on the packed buffer when every nested operand has the same structure and every dense
  operand broadcasts over the regular dims only; else per component (see :func:`pointwise`);
* ``linear``, ``native_layer_norm`` (what ``F.layer_norm`` calls), ``softmax``,
  ``log_softmax``, ``matmul``, ``bmm``, ``cat``: the structural implementations in ``_ops``.

Any other op returns NotImplemented: its kernel then reads the tensor's storage, which raises
torch's error naming the op (``NestedStorage``).
"""
from __future__ import annotations

from .. import _layout as L
from ..tensor import Tensor
from . import _ops as O
from ._tensor import NestedTensor, pack_like, same_structure

# in-place ops that write every element independently (they have no ``pointwise`` tag)
_ELEMENTWISE_INPLACE = frozenset(("fill_", "copy_"))


def _call(op, args):
    """``op`` through its public binding (so autograd, modes and checks run as for any call),
    with ``args`` in schema order (keyword-only parameters passed by name)."""
    from .._torch_function import args_as_called
    from ..ops.registry import _REQUIRED
    pos, kw = args_as_called(op.params, args, _REQUIRED)
    return op.binding(*pos, **kw)


def _shape_error(name, a, b):
    if a._nlayout is L.jagged:
        return RuntimeError(f"cannot call binary pointwise function {name}.Tensor with inputs of shapes "
                            f"{tuple(a.size())} and {tuple(b.size())}")
    return RuntimeError(f"{name} does not support broadcasting when given a NestedTensor")


def _per_component_dense(nt, other, name):
    """A dense ``other`` that cannot meet ``nt``'s buffer directly, as one operand per component
    (torch's rules: a scalar-like or ``(*D)`` operand broadcasts to each, ``(B, 1, *D)`` gives
    component ``i`` its row ``i``)."""
    nd, shape = nt.dim(), tuple(other.shape)
    if other.ndim == nd and shape[0] in (1, len(nt)) and shape[1] == 1:
        return [other[i if shape[0] > 1 else 0] for i in range(len(nt))]
    if other.ndim < nd - 1 or (other.ndim == nd - 1 and shape[0] == 1):
        return [other] * len(nt)
    raise RuntimeError(f"cannot call binary pointwise function {name}.Tensor with inputs of shapes "
                       f"{tuple(nt.size())} and {tuple(shape)}")


def pointwise(op, args):
    """An elementwise ``op`` (functional or in-place) with nested tensors among its arguments."""
    inplace = "inplace" in op.tags
    name = op.name.rstrip("_") if inplace else op.name
    tpos = op.tensor_pos
    nested = [i for i in tpos if isinstance(args[i], NestedTensor)]
    if inplace and 0 not in nested:
        # torch: a dense tensor cannot take a nested result in place (its messages, per layout)
        nt = next(args[i] for i in nested)
        if nt._nlayout is L.jagged:
            raise RuntimeError(f"cannot call binary pointwise function {op.name}.Tensor with inputs of shapes "
                               f"{args[0].shape} and {nt.size()}")
        raise RuntimeError("Expected both self and other to be nested, but got a non-nested self and nested other")
    tmpl = args[nested[0]]
    for i in nested[1:]:
        o = args[i]
        if len(o) != len(tmpl) or o._comp_shapes() != tmpl._comp_shapes():
            raise _shape_error(name, tmpl, o)
    fast = all(same_structure(tmpl, args[i]) for i in nested[1:])
    dense = {}
    for i in tpos:
        a = args[i]
        if isinstance(a, Tensor) and not isinstance(a, NestedTensor) and a.ndim > 0:
            rows = O._dense_operand_rows(tmpl, a, name)
            if rows is None:
                fast = False
            dense[i] = rows
    if fast:
        new = list(args)
        for i in nested:
            new[i] = args[i]._vals
        for i, rows in dense.items():
            new[i] = rows
        out = _call(op, new)
        return args[0] if inplace else tmpl._with_vals(out)
    comps = {i: args[i].unbind() for i in nested}
    parts = {i: _per_component_dense(tmpl, args[i], name) for i in dense}
    outs = []
    for k in range(len(tmpl)):
        new = list(args)
        for i, cs in comps.items():
            new[i] = cs[k]
        for i, ps in parts.items():
            new[i] = ps[k]
        outs.append(_call(op, new))
    if inplace:
        return args[0]
    return pack_like(tmpl, outs)


def _softmax(op, args):
    self, dim, dtype = args
    return O.softmax(self, dim, dtype, log=op.name == "log_softmax")


def _native_layer_norm(op, args):
    return O.native_layer_norm(*args)


def _linear(op, args):
    if not isinstance(args[0], NestedTensor):
        raise RuntimeError("linear(): a nested weight or bias is not supported")
    return O.linear(*args)


def _matmul(op, args):
    return O.matmul(args[0], args[1])


def _bmm(op, args):
    return O.bmm(args[0], args[1])


def _cat(op, args):
    if args[0] and isinstance(args[0][0], NestedTensor):
        return O.cat(list(args[0]), args[1])
    return NotImplemented


def _wrapped_dim(nt, dim):
    from ._tensor import _wrap
    return _wrap(dim, nt.dim())


def _select(op, args):
    from ._index import select
    return select(args[0], _wrapped_dim(args[0], args[1]), args[2])


def _unsqueeze(op, args):
    from ._index import unsqueeze
    from ._tensor import _wrap
    return unsqueeze(args[0], _wrap(args[1], args[0].dim() + 1))


def _slice(op, args):
    from ._index import slice_dim
    self, dim, start, end, step = args
    return slice_dim(self, _wrapped_dim(self, dim), slice(start, end, step))


_STRUCTURAL = {"select": _select, "unsqueeze": _unsqueeze, "slice": _slice,
               "softmax": _softmax, "log_softmax": _softmax, "native_layer_norm": _native_layer_norm,
               "linear": _linear, "matmul": _matmul, "bmm": _bmm, "cat": _cat}


def route(op, args):
    """The nested implementation of ``op`` on ``args`` (schema order), or NotImplemented."""
    fn = _STRUCTURAL.get(op.name)
    if fn is not None:
        return fn(op, args)
    if "pointwise" in op.tags or op.name in _ELEMENTWISE_INPLACE:
        return pointwise(op, args)
    return NotImplemented
