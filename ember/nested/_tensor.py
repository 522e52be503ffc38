"""The nested tensor: one packed dense buffer plus where each component sits in it.

A ``NestedTensor`` (``torch.nested``'s tensor) is an ``ember.Tensor`` subclass
holding ``B`` components whose sizes differ. It stores

* ``_vals``: a dense ember tensor holding every component's elements. It is the
  only thing autograd sees: every nested op is "compute on ``_vals`` (or on the
  components sliced out of it) with ordinary ember ops, wrap the result", so
  gradients reach the components given to ``as_nested_tensor`` and the
  ``values`` given to ``nested_tensor_from_jagged`` through the dense ops' own
  formulas, and ``requires_grad`` / ``grad_fn`` / ``grad`` are ``_vals``'s;
* ``_starts`` / ``_lens``: where component ``i`` starts in ``_vals``'s dim 0
  and how many rows it takes (rows may leave gaps: ``narrow`` and
  ``nested_tensor_from_jagged(..., lengths=)`` make such views);
* ``_stored``: each component's shape as stored (row-major, contiguous in its
  rows); ``_perm``: the permutation (None: identity) from the stored component
  to the logical one -- ``transpose`` only changes ``_perm`` (a jagged ``(B, j, H, D)``
  transposed to ``(B, H, j, D)`` keeps its buffer; its ``values()`` is the buffer permuted,
  ``(H, sum j, D)``, as torch's).

Two storage forms: *packed* (every stored shape is ``(len_i, *_vals.shape[1:])``:
the jagged layout, and strided tensors ragged in their first dim only), where
ops on regular dims run once on ``_vals``; and *flat* (``_vals`` is 1-d, rows
are elements, stored shapes arbitrary), where such ops run per component.

``_data`` is a ``NestedStorage``: a dense kernel handed a nested tensor fails
naming the op instead of computing on the buffer (see ``NestedStorage``).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import _layout as L
from .. import types as _t
from .._refusing_storage import RefusingStorage
from .._state import STATE
from ..tensor import Tensor, _make


def _api():
    from ..ops import api
    return api


# ---------------------------------------------------------------------- the ragged size
class RaggedSize:
    """The symbolic size of a jagged dimension (torch prints it ``j1``): equal only to itself."""

    __slots__ = ("id",)
    _counter = itertools.count(1)

    def __init__(self):
        self.id = next(RaggedSize._counter)

    def __repr__(self):
        return f"j{self.id}"

    __str__ = __repr__

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return object.__hash__(self)

    def __int__(self):
        raise RuntimeError(f"the ragged size {self!r} of a jagged nested tensor has no single integer value")

    __index__ = __int__


# ---------------------------------------------------------------------- storage that refuses reads
def _running_op_name():
    try:
        from ..sparse._storage import _running_op
        op = _running_op()
    except Exception:  # noqa: BLE001 -- only used to name the op in an error
        op = None
    return None if op is None else op.name


class NestedStorage(RefusingStorage):
    """The ``_data`` of a nested tensor: every read raises, naming the dense op that tried."""

    __slots__ = ("_layout",)

    def __init__(self, layout):
        self._layout = layout

    def _fail(self, what):
        name = _running_op_name()
        if name is None:
            raise NotImplementedError(
                f"ember.nested: {what} is not supported for a nested tensor (layout {self._layout}): "
                f"it has no dense storage; use .unbind(), .values() or ember.nested.to_padded_tensor() first")
        if self._layout is L.jagged:
            raise NotImplementedError(f"aten.{name}.default is not implemented for nested tensors "
                                      f"(ember.nested, layout ember.jagged)")
        raise NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the 'NestedTensorCPU' backend. "
            f"ember.nested has no implementation of '{name}' for nested tensors; use .unbind() or "
            f"ember.nested.to_padded_tensor() first.")

    def __repr__(self):
        return f"<nested storage of layout {self._layout}>"



# ---------------------------------------------------------------------- the tensor
class NestedTensor(Tensor):
    """A tensor of ``B`` components of differing sizes (see the module doc)."""

    is_nested = True

    @classmethod
    def __ember_route__(cls, op, args):
        """Any ember op called with a nested argument: the dispatcher's slow path hands it here
        (ember/_torch_function.py ``route``; no code swapped into the bindings or into
        ``nn.functional``, so dense calls pay nothing). ``_route`` picks the nested
        implementation; ops it has none for return NotImplemented and fail reading the
        storage with torch's error."""
        from ._route import route
        return route(op, args)

    @classmethod
    def __ember_route_python__(cls, func, args, kwargs):
        """The Python-level functions whose tensor argument is a nested tensor (the ``*_like``
        factories, the random in-place methods: ember/_torch_function.py ``python_entry``):
        each acts elementwise, so it runs once on the values buffer, under this structure."""
        name = getattr(func, "__name__", "")
        nt = args[0]
        if name.endswith("_like"):
            kw = {k: v for k, v in kwargs.items() if k not in ("requires_grad", "memory_format", "layout")}
            out = nt._with_vals(func(nt._vals, *args[1:], **kw))
            if kwargs.get("requires_grad"):
                out.requires_grad_(True)
            return out
        if name in ("uniform_", "normal_", "random_", "bernoulli_", "exponential_"):
            func(nt._vals, *args[1:], **kwargs)
            return nt
        return NotImplemented

    # -- metadata ---------------------------------------------------------------
    @property
    def layout(self):
        return self._nlayout

    @property
    def is_sparse(self):
        return False

    def _comp_shapes(self):
        """The logical shape of each component."""
        p = self._perm
        if p is None:
            return self._stored
        return tuple(tuple(s[i] for i in p) for s in self._stored)

    def dim(self):
        return self._cdim + 1

    ndimension = dim

    @property
    def ndim(self):
        return self._cdim + 1

    def _ragged_dims(self):
        """Nested dims (>= 1) whose size differs between components (jagged: its one ragged dim)."""
        if self._nlayout is L.jagged:
            return (self._ragged_idx,)
        shapes = self._comp_shapes()
        return tuple(d + 1 for d in range(self._cdim) if len({s[d] for s in shapes}) > 1)

    @property
    def _ragged_idx(self):
        """The nested dim holding the stored dim 0 (the ragged dim of a jagged tensor)."""
        return 1 + (self._perm.index(0) if self._perm is not None else 0)

    def size(self, dim=None):
        if dim is None:
            if self._nlayout is L.jagged:
                return self._jagged_shape()
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. Please file an issue.")
        d = _wrap(dim, self.dim())
        if d == 0:
            return len(self._lens)
        if self._nlayout is L.jagged:
            return self._jagged_shape()[d]
        sizes = {s[d - 1] for s in self._comp_shapes()}
        if len(sizes) != 1:
            raise RuntimeError(f"Given dimension {d} is irregular and does not have a size.")
        return sizes.pop()

    @property
    def shape(self):
        return self.size()

    def _jagged_shape(self):
        shapes = self._comp_shapes()
        out = [len(self._lens)]
        r = self._ragged_idx
        for d in range(1, self._cdim + 1):
            if d == r:
                out.append(self._jid)
            else:
                out.append(shapes[0][d - 1] if shapes else self._vals.shape[self._perm_stored(d - 1)])
        return _t.Size(out)

    def _perm_stored(self, c):
        return c if self._perm is None else self._perm[c]

    def numel(self):
        return int(sum(math.prod(s) for s in self._stored))

    nelement = numel

    def is_contiguous(self, memory_format=None):
        # torch: a jagged tensor made with lengths= is never contiguous, even without holes, and
        # otherwise it is when its values() are (a transpose or a select / slice view is not;
        # one made with jagged_dim=2 from contiguous values is)
        if self._lengths_t is not None or not self._gapless():
            return False
        if self._nlayout is L.jagged:
            return self.values().is_contiguous()
        return self._perm is None and self._vals.is_contiguous()

    def _gapless(self):
        if len(self._lens) == 0:
            return True
        ends = self._starts + self._lens
        return bool(self._starts[0] == 0 and np.all(self._starts[1:] == ends[:-1])
                    and ends[-1] == self._vals.shape[0])

    def stride(self, dim=None):
        raise RuntimeError("ember.nested: a nested tensor has no single strides (each component has its own); "
                           "functions that read them are not supported for nested tensors: apply them to "
                           ".values() or to each component")

    def data_ptr(self):
        return self._vals.data_ptr()

    def numpy(self, *, force=False):
        raise TypeError("ember.nested: can't convert a nested tensor to numpy; use .unbind() or "
                        "ember.nested.to_padded_tensor() first")

    def __array__(self, *args, **kwargs):
        self.numpy()

    def __len__(self):
        return len(self._lens)

    def __getitem__(self, index):
        """``nt[i]`` (component ``i``), ``nt[i, ...]`` (indexing into it), ``nt[..., k]`` /
        ``nt[..., a:b]`` / ``nt[..., None]`` on regular dims: what torch accepts (see _index)."""
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            return self._component_at(int(index))
        from ._index import getitem
        return getitem(self, index)

    def _component_at(self, index):
        b = len(self._lens)
        if not -b <= index < b:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {b}")
        return self._component(index % b)

    def __iter__(self):
        return iter(self.unbind())

    def __bool__(self):
        raise RuntimeError("ember.nested: the truth value of a nested tensor is ambiguous")

    def item(self):
        raise RuntimeError("ember.nested: item() of a nested tensor is not supported")

    def tolist(self):
        return [c.tolist() for c in self.unbind()]

    def __repr__(self, *, tensor_contents=None):
        from ._print import nested_repr
        return nested_repr(self)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        # plain ember tensors pickle (ember/_torch_pickle.py); a nested tensor's components do not
        # go through that path yet: ember.save / ember.load store them (ember's JSON format)
        raise NotImplementedError("pickling a nested tensor is not supported by ember yet (nested tensors are not "
                                  "picklable); use ember.save / ember.load, which store them")

    def __deepcopy__(self, memo):
        out = self.clone()
        if self.requires_grad and self.is_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    # -- autograd: it is _vals's ---------------------------------------------------
    @property
    def requires_grad(self):
        return self._vals.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._vals.requires_grad = flag
        self._requires_grad = self._vals._requires_grad

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        return self._vals.grad_fn

    @property
    def is_leaf(self):
        return self._vals.is_leaf

    @property
    def grad(self):
        g = self._vals.grad
        return None if g is None else self._with_vals(g)

    @grad.setter
    def grad(self, value):
        if value is None:
            self._vals.grad = None
            return
        if not isinstance(value, NestedTensor) or not same_structure(self, value):
            raise RuntimeError("ember.nested: the assigned grad must be a nested tensor of the same structure")
        self._vals.grad = value._vals

    def retain_grad(self):
        self._vals.retain_grad()

    @property
    def data(self):
        """The same components without autograd history (over the same buffer)."""
        return self._with_vals(self._vals.data)

    @data.setter
    def data(self, value):
        raise NotImplementedError("ember.nested: assigning .data of a nested tensor is not supported")

    def share_memory_(self):
        raise NotImplementedError("ember.nested: share_memory_ of a nested tensor is not supported")

    def cuda(self, *args, **kwargs):
        raise NotImplementedError("ember.nested: nested tensors are CPU only in ember")

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if not self.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not isinstance(gradient, NestedTensor) or not same_structure(self, gradient):
            raise RuntimeError("ember.nested: backward()'s gradient must be a nested tensor with the same "
                               "structure as the output")
        self._vals.backward(gradient._vals, retain_graph=retain_graph, create_graph=create_graph,
                            inputs=inputs)

    # -- structure accessors ---------------------------------------------------
    def _need_jagged(self, what):
        if self._nlayout is not L.jagged:
            raise RuntimeError(f"{what}() is only supported for nested tensors with layout ember.jagged "
                               f"(this one has layout {self._nlayout})")

    def values(self):
        """The buffer in the logical dim order, the ragged rows at dim ``ragged_idx - 1`` (as
        torch's: a transpose permutes it, a ``jagged_dim=2`` tensor gives back the values it
        was made from); a view, so gradients and writes reach the buffer."""
        self._need_jagged("values")
        if self._perm is None:
            return self._vals
        return self._vals.permute(self._perm)

    def _values(self):
        return self._vals

    def offsets(self):
        self._need_jagged("offsets")
        if self._offsets_t is None:
            if self._gapless():
                offs = np.concatenate([[0], np.cumsum(self._lens)]).astype(np.int64)
            else:
                offs = np.concatenate([self._starts, [self._starts[-1] + self._lens[-1]]]).astype(np.int64)
            self._offsets_t = _make(offs, self._vals.device, _t.int64)
        return self._offsets_t

    def lengths(self):
        self._need_jagged("lengths")
        return self._lengths_t

    def _row_index(self):
        """Row numbers of ``_vals`` that belong to components, in order (an int64 numpy array)."""
        if self._gapless():
            return np.arange(self._vals.shape[0], dtype=np.int64)
        return np.concatenate([np.arange(s, s + n, dtype=np.int64) for s, n in zip(self._starts, self._lens)]
                              or [np.zeros(0, np.int64)])

    def _component(self, i):
        s, n = int(self._starts[i]), int(self._lens[i])
        c = self._vals[s:s + n]
        if not self._packed:
            c = c.reshape(self._stored[i])
        if self._perm is not None:
            c = c.permute(self._perm)
        return c

    def unbind(self, dim=0):
        if _wrap(dim, self.dim()) != 0:
            raise RuntimeError(f"unbind(): nested tensor can only be unbound along dimension 0 (got {dim})")
        return tuple(self._component(i) for i in range(len(self._lens)))

    def _with_vals(self, vals):
        """This structure over another buffer of the same row count (a pointwise result)."""
        if tuple(vals.shape[:1]) != tuple(self._vals.shape[:1]) or (
                self._packed and tuple(vals.shape) != tuple(self._vals.shape)):
            raise RuntimeError(f"ember.nested: internal error: values of shape {list(vals.shape)} do not fit "
                               f"a structure over values of shape {list(self._vals.shape)}")
        return wrap(vals, self._starts, self._lens, self._stored, self._perm, self._nlayout, packed=self._packed,
                    jid=self._jid, offsets_t=self._offsets_t, lengths_t=self._lengths_t)


def _wrap(dim, ndim):
    if not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def wrap(vals, starts, lens, stored, perm, layout, *, packed, jid=None, offsets_t=None, lengths_t=None):
    """A nested tensor over ``vals`` (no copy; autograd is ``vals``'s)."""
    t = object.__new__(NestedTensor)
    t._data = NestedStorage(layout)
    t.dtype = vals.dtype
    t.device = vals.device
    t._vc = None
    t._vals = vals
    t._requires_grad = vals._requires_grad
    t._starts = np.asarray(starts, dtype=np.int64)
    t._lens = np.asarray(lens, dtype=np.int64)
    t._stored = tuple(tuple(int(x) for x in s) for s in stored)
    t._perm = None if perm is None or tuple(perm) == tuple(range(len(perm))) else tuple(perm)
    t._nlayout = layout
    t._packed = bool(packed)
    t._cdim = vals.ndim if packed else (len(t._stored[0]) if t._stored else 1)
    if t._perm is not None and len(t._perm) != t._cdim:
        raise RuntimeError("ember.nested: internal error: permutation does not match the component dims")
    if layout is L.jagged and jid is None:
        jid = RaggedSize()
    t._jid = jid
    t._offsets_t = offsets_t
    t._lengths_t = lengths_t
    return t


def same_structure(a, b):
    """Whether two nested tensors place equally shaped components at the same rows of equally
    shaped buffers (then a pointwise op may run once on the two buffers)."""
    return (a._packed == b._packed and a._perm == b._perm and a._stored == b._stored
            and np.array_equal(a._starts, b._starts) and np.array_equal(a._lens, b._lens)
            and tuple(a._vals.shape) == tuple(b._vals.shape))


def pack(comps, layout, *, jid=None, perm=None):
    """A contiguous nested tensor holding the (logical) components ``comps`` (autograd flows to
    them through one ``cat``). With ``perm`` the buffer stores each component permuted back, so a
    transposed structure (SDPA's output) keeps its ``values()`` layout."""
    api = _api()
    comps = list(comps)
    if perm is not None and tuple(perm) == tuple(range(len(perm))):
        perm = None
    if perm is not None:
        inv = tuple(np.argsort(perm))
        stored_t = [c.permute(inv) for c in comps]
    else:
        stored_t = comps
    stored = [tuple(c.shape) for c in stored_t]
    if not comps:
        raise RuntimeError("ember.nested: internal error: packing no components")
    nd = {len(s) for s in stored}
    if len(nd) != 1:
        raise RuntimeError("ember.nested: components of different dimensionality")
    packed = nd.pop() >= 1 and len({s[1:] for s in stored}) == 1
    if packed:
        vals = api.cat([c.contiguous() for c in stored_t], 0) if len(stored_t) > 1 else stored_t[0].contiguous()
        lens = np.array([s[0] for s in stored], dtype=np.int64)
    else:
        if perm is not None:
            raise RuntimeError("ember.nested: internal error: a permuted structure must be packed")
        flat = [c.reshape(-1) for c in stored_t]
        vals = api.cat(flat, 0) if len(flat) > 1 else flat[0].contiguous()
        lens = np.array([math.prod(s) for s in stored], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    if layout is L.jagged and not packed:
        raise RuntimeError("Cannot represent given tensor list as a nested tensor with the jagged layout. "
                           "Note that the jagged layout only allows for a single ragged dimension. For example: "
                           "(B, *, D_0, D_1, ..., D_N), with ragged * dim.")
    return wrap(vals, starts, lens, stored, perm, layout, packed=packed, jid=jid)


def pack_like(template, comps, *, keep_ragged=True):
    """Components computed from ``template``'s (same ragged dim, maybe other regular sizes), as a
    nested tensor of ``template``'s layout and permutation (its ragged size kept when asked)."""
    perm = template._perm
    if perm is not None and any(c.ndim != len(perm) for c in comps):
        perm = None
    jid = template._jid if keep_ragged else None
    try:
        return pack(comps, template._nlayout, jid=jid, perm=perm)
    except RuntimeError:
        if perm is None:
            raise
        return pack(comps, template._nlayout, jid=None, perm=None)


def grad_enabled_for(t):
    return t._vals._requires_grad and STATE.grad_enabled



