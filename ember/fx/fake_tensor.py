"""Fake tensors: ember tensors with shape, dtype, device and strides but no data.

Inside ``with FakeTensorMode():`` every op that reaches the dispatcher's mode
stack runs only its **meta function** (``OpDef.meta``, see
``ember/ops/_meta.py``) and returns fake tensors. A fake tensor is an ordinary
``ember.Tensor`` whose backend array is a :class:`~ember.ops._meta.FakeArray`:
views of it share a fake storage and a version counter with their base, so
view/in-place semantics and the autograd engine work unchanged. Sizes may be
symbolic (:class:`~ember.fx.experimental.symbolic_shapes.SymInt`) when the
mode has a :class:`ShapeEnv`.

Anything that needs data raises :class:`DataDependentOutputError`, which names
the operator: ``nonzero``, ``masked_select``, ``unique``, ``.item()``,
``.tolist()``, ``.numpy()``, ``bool(t)``. Callers (dynamo) catch it and break
the graph there.

Real tensors used under the mode (constants, parameters) are accepted as
inputs; every output is fake. ``mode.from_tensor(t)`` makes the fake twin of
a real tensor (optionally with symbolic sizes), memoised so the same real
tensor always maps to the same fake one.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable, Optional

from .. import types as _t
from .._state import STATE
from ..ops import registry as _reg
from ..ops._meta import (DataDependentOutputError, FakeArray, FakeStorage, broadcast_shapes,
                         contiguous_strides, dense_permutation, strides_for_permutation)
from ..autograd.graph import Node
from .._fake import _numel
from ..tensor import Tensor
from .experimental.symbolic_shapes import ShapeEnv, SymInt

__all__ = ["FakeTensorMode", "DataDependentOutputError", "UnsupportedFakeOperator", "is_fake",
           "FakeArray"]

_new = object.__new__


class UnsupportedFakeOperator(NotImplementedError):
    """An op with no meta function was called on fake tensors."""

    def __init__(self, op_name: str):
        self.op = op_name
        super().__init__(f"fake tensors: operator '{op_name}' has no meta function, so it cannot run "
                         f"without data")


def is_fake(t: Any) -> bool:
    return isinstance(t, Tensor) and type(t._data) is FakeArray


def make_fake(arr: FakeArray, device) -> Tensor:
    t = _new(Tensor)
    t._data = arr
    t.dtype = _t.from_numpy_dtype(arr.dtype)
    t.device = device
    t._vc = None
    return t


class FakeTensorMode:
    """A dispatch mode in which ops run their meta functions only (see the module docstring)."""

    def __init__(self, shape_env: Optional[ShapeEnv] = None):
        self.shape_env = shape_env
        # id(real) -> (weakref to real, fake). Not a WeakKeyDictionary: its lookup compares
        # keys with ``==``, which is elementwise on tensors (the second from_tensor of a
        # tensor raised "Boolean value of Tensor ... is ambiguous").
        self._memo: "dict[int, tuple[weakref.ref, Tensor]]" = {}

    # -- the mode protocol --------------------------------------------------------
    def __enter__(self):
        STATE.modes.append(self)
        return self

    def __exit__(self, *exc):
        modes = STATE.modes
        for i in range(len(modes) - 1, -1, -1):
            if modes[i] is self:
                del modes[i]
                break
        return False

    def __ember_dispatch__(self, op, args):
        return run_meta(op, args)

    # -- making fake tensors ----------------------------------------------------------
    def from_tensor(self, t: Tensor, *, symbolic: bool = False, dynamic_dims: Optional[Iterable[int]] = None,
                    source: Optional[str] = None, leaf: bool = False, dynamic_strides: bool = False) -> Tensor:
        """The fake twin of real tensor ``t`` (same shape/dtype/device/strides/requires_grad).

        With ``symbolic=True`` (needs a ShapeEnv) its sizes in ``dynamic_dims``
        (all by default) become symbols; dense strides follow the sizes. A layout that is not
        dense (a stepped slice, the last columns of a wider matrix) keeps concrete sizes, unless
        ``dynamic_strides``: then its strides are symbols too, dense layouts' included (sources
        ``{source}.stride()[d]``; dims of size 0 or 1 and strides 0 or 1 stay ints), so one
        trace serves the next call's strides as it serves its sizes (``x[:, -k:]`` of a
        growing ``x``).

        A ``t`` that requires grad and is not a leaf (``x * 3``) gets a fake that is not a leaf
        either (its ``grad_fn`` an opaque :class:`InputHistoryBackward`), so an in-place op on
        it traces as eagerly, where one on a leaf that requires grad is refused with torch's
        error. (A view of a leaf that requires grad stays a leaf: writing into it is refused
        too.) ``leaf=True``: a leaf anyway (aot's primals, which its joint graph
        differentiates with respect to)."""
        if is_fake(t):
            return t
        hit = self._memo.get(id(t))
        if hit is not None and hit[0]() is t and (not leaf or hit[1]._grad_fn is None):
            return hit[1]
        shape = tuple(t.shape)
        estrides = tuple(t.stride())
        if symbolic:
            if self.shape_env is None:
                raise ValueError("FakeTensorMode.from_tensor(symbolic=True) needs a FakeTensorMode(shape_env=...)")
            sym_shape = self.shape_env.create_symbolic_sizes(shape, source, dynamic_dims)
            order = None if dynamic_strides else dense_permutation(shape, estrides)
            if order is not None:
                estrides = strides_for_permutation(sym_shape, order)
            elif dynamic_strides and all(st >= 0 for st in estrides):
                # (a dense transpose too: its strides' symbols are duck-shared with the sizes they
                # equal, which guards them equal at the next call, as the layout needs)
                env = self.shape_env
                estrides = tuple(env.create_symbol(st, f"{source}.stride()[{d}]" if source else None)
                                 if n > 1 else st for d, (n, st) in enumerate(zip(shape, estrides)))
            elif any(isinstance(s, SymInt) for s in sym_shape):
                # a non-dense layout (a strided view): keep its sizes concrete
                sym_shape = shape
            shape = sym_shape
        base_fake = None
        if t._base is not None and not symbolic:
            # a view: share a fake of its base's storage, at the same offset
            base_fake = self.from_tensor(t._base)
            arr = FakeArray(shape, t.dtype, estrides, t.storage_offset(), base_fake._data.storage)
        elif symbolic:
            # memory of its own, at the real offset's residue modulo 16 bytes: a dtype view
            # (``view(float64)`` of float32) depends on the offset's alignment, which the
            # guards check (``offset_residue``) -- not on the offset itself
            m, r = offset_residue(t)
            arr = FakeArray(shape, t.dtype, estrides, r, FakeStorage((_numel(shape) + r) * t._data.itemsize))
        else:
            arr = FakeArray(shape, t.dtype, estrides, 0, None)
        fake = make_fake(arr, t.device)
        if base_fake is not None:
            _reg._mark_view(fake, base_fake)
        if t.requires_grad:
            fake.requires_grad_(True)
            if not leaf and _has_history(t):
                fake._grad_fn = InputHistoryBackward(fake)
        memo, key = self._memo, id(t)

        def forget(ref):
            entry = memo.get(key)
            if entry is not None and entry[0] is ref:
                del memo[key]
        self._memo[key] = (weakref.ref(t, forget), fake)
        return fake


def offset_residue(t: Tensor):
    """``(m, r)``: a symbolic example value of ``t`` starts ``r`` elements into memory of its own,
    ``r`` the storage offset modulo ``m`` elements (16 bytes, the widest dtype a view can
    reinterpret it as); the guards require the same residue of later inputs."""
    m = max(16 // t._data.itemsize, 1)
    return m, int(t.storage_offset()) % m


class InputHistoryBackward(Node):
    """The ``grad_fn`` of the fake twin of a non-leaf tensor: the autograd history the real
    tensor had before the traced code, which the fake cannot know. Nothing differentiates a
    fake past it (dynamo's example values are never differentiated; aot differentiates with
    respect to leaf primals), so it passes no gradient on."""

    def __init__(self, fake):
        super().__init__()
        self._in_meta = ((fake._data.shape, fake.dtype, fake.device),)

    def apply(self, grads):
        return []


def _has_history(t: Tensor) -> bool:
    """Whether fakeifying ``t`` (which requires grad) gives a non-leaf: ``t`` has a grad_fn and
    is not a view of a leaf that requires grad."""
    if t.grad_fn is None:
        return False
    base = t._base
    return base is None or not base.requires_grad or base.grad_fn is not None


# a __torch_dispatch__ subclass's handler runs first, this mode still on (torch's fake mode returns
# NotImplemented for unknown subclasses): its ops on the inner tensors run here
_reg._DEFERRING_MODES.add(FakeTensorMode)


def _out_device(op, args):
    if op.device_pos is not None and args[op.device_pos] is not None:
        return _t.as_device(args[op.device_pos])
    for i in op.tensor_pos:
        a = args[i]
        if isinstance(a, Tensor):
            return a.device
    for i in op.list_pos:
        for a in args[i]:
            if isinstance(a, Tensor):
                return a.device
    return _t.cpu


def _wrap_out(op, args, res, dev):
    if isinstance(res, FakeArray):
        out = make_fake(res, dev)
        if op.is_view:
            src = args[op.tensor_pos[0]]
            # a view of a real tensor (a constant under the mode) is a fresh fake:
            # it must not share the real tensor's version counter or offsets
            if type(src._data) is FakeArray and src._data.storage is res.storage:
                _reg._mark_view(out, src)
        return out
    if type(res) is tuple:
        return tuple(_wrap_out(op, args, r, dev) for r in res)
    if isinstance(res, list):
        return [_wrap_out(op, args, r, dev) for r in res]
    return res   # a Python value (a shape, a bool) from a metadata-only op


def run_meta(op, args):
    """What fake tensors run for ``op``: its meta function, wrapped as fake tensors."""
    if "data_dependent" in op.tags:
        raise DataDependentOutputError(op.public_name)
    if op.functional is not None:        # an in-place variant: functional meta + write-back checks
        return _write_back(op, args, run_meta(op.functional, args))
    meta = op.meta
    if meta is None:
        raise UnsupportedFakeOperator(op.name)
    res = meta(*args)
    return _wrap_out(op, args, res, _out_device(op, args))


def run_meta_on_device(op, args, dev):
    """What a call on the ``meta`` device runs (the dispatcher's kernel step, reached when its
    device is meta): the meta function, its outputs on ``dev``. Unlike fake tensors under
    FakeTensorMode, meta tensors are a device of their own, so the errors say so."""
    if "data_dependent" in op.tags:
        raise NotImplementedError(f"{op.public_name}: the shape of its output depends on the data "
                                  f"of its input, and a tensor on the meta device has none")
    if op.functional is not None:
        return _write_back(op, args, run_meta_on_device(op.functional, args, dev))
    meta = op.meta
    if meta is None:
        raise NotImplementedError(f"{op.public_name}: operator '{op.name}' has no meta function, so "
                                  f"it cannot run on the meta device")
    try:
        res = meta(*args)
    except DataDependentOutputError as e:
        raise NotImplementedError(f"{e.op}: needs the data of a tensor on the meta device, which has "
                                  f"none") from None
    return _wrap_out(op, args, res, dev)


def _write_back(op, args, res):
    """An in-place variant's end: the functional result must fit ``self``; ``self`` is bumped."""
    self = args[0]
    _check_write(self, res, op)
    vc = self._vc
    if vc is None:
        vc = self._vc = [0]
    vc[0] += 1
    return self


def _check_write(self, res, op):
    if not _t.can_cast(res.dtype, self.dtype):
        raise RuntimeError(f"result type {res.dtype.legacy_name} can't be cast to the desired output "
                           f"type {self.dtype.legacy_name}")
    if tuple(res.shape) != tuple(self.shape):
        try:
            shape = broadcast_shapes(tuple(res.shape), tuple(self.shape))
        except RuntimeError:
            shape = None
        if shape is None or tuple(shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast "
                               f"shape {list(shape) if shape else list(res.shape)}")
