"""``CustomOpDef``: the object ``@ember.library.custom_op`` returns, and the table of custom ops.

It is what the user holds: callable like the function it wraps, and the place where the
fake implementation, the backward formula and per-device kernels are registered. The
dispatcher-facing half is its :class:`~ember.library._record.CustomOpRecord`
(``op._ember_op``); calling the op calls that record's generated binding.

Ops are also reachable by name, ``ember.ops.<namespace>.<opname>`` (torch's
``torch.ops.mylib.foo``), through :class:`OpNamespace`. Defining a name again replaces the
earlier op (as torch allows), so re-running a notebook cell or a test works.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Dict, Optional, Sequence, Union

from .._state import STATE
from ..tensor import Tensor
from ._autograd import CustomOpBackward
from ._record import CustomOpRecord
from ._schema import Schema

log = logging.getLogger("ember.library")

#: "namespace::opname" -> CustomOpDef
OPS: Dict[str, "CustomOpDef"] = {}

_DEVICE_TYPES = ("cpu", "cuda")


def _device_types(device_types: Union[None, str, Sequence[str]], qualname: str):
    if device_types is None:
        return (None,)
    items = (device_types,) if isinstance(device_types, str) else tuple(device_types)
    for d in items:
        if d not in _DEVICE_TYPES:
            raise ValueError(f"{qualname}: unknown device type {d!r}; ember runs kernels on {list(_DEVICE_TYPES)}")
    return items


class CustomOpDef:
    """A custom operator (see :func:`ember.library.custom_op`)."""

    # dynamo recognises custom ops by this flag on their type (ember/dynamo/variables/custom_op.py)
    _ember_custom_op = True

    def __init__(self, schema: Schema, fn: Optional[Callable], device_types=None, *,
                 signature: Optional[inspect.Signature] = None):
        # (fn is None for an op defined from a schema string, ``Library.define``: its kernels
        # come later, per dispatch key; ``signature`` is then the schema's)
        self._schema = schema
        self._qualname = schema.qualname
        self._namespace, self._opname = schema.namespace, schema.opname
        self._init_fn = fn
        self._impls: Dict[Optional[str], Callable] = {} if fn is None else \
            {d: fn for d in _device_types(device_types, self._qualname)}
        self._fake: Optional[Callable] = None
        self._backward: Optional[Callable] = None
        self._setup_context: Optional[Callable] = None
        self._mutated_pos = tuple(i for i, p in enumerate(schema.params) if p.mutated)
        # rules for other subsystems (ember/library/_extensions.py)
        self._autocast_rules: Dict[str, Any] = {}
        self._vmap_rule: Optional[Callable] = None
        self._dispatch_rules: Dict[type, Callable] = {}
        self._node_cls = type(f"GeneratedBackwardFor_{self._namespace}_{self._opname}_defaultBackward",
                              (CustomOpBackward,), {"_custom": self})
        self._node_cls.__module__ = __name__
        self._ember_op = self._record_class()(self, schema.ember_schema())
        self._binding = self._ember_op.binding
        # what graphs print and generated code spells (torch: torch.ops.mylib.foo.default)
        self.__fx_name__ = f"ember.ops.{self._namespace}.{self._opname}"
        self._binding.__fx_name__ = self.__fx_name__
        self.__name__ = self._qualname
        self.__qualname__ = self._opname
        self.__doc__ = None if fn is None else fn.__doc__
        self.__signature__ = inspect.signature(fn) if signature is None else signature
        if self._qualname in OPS:
            log.info("custom op %s defined again: the new definition replaces the old one", self._qualname)
        OPS[self._qualname] = self

    @staticmethod
    def _record_class():
        return CustomOpRecord

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._autocast_rules and STATE.autocast is not None:
            return self._autocast_call(args, kwargs)
        if self._mutated_pos:
            self._check_mutating_call(args, kwargs)
        return self._binding(*args, **kwargs)

    def _autocast_call(self, args, kwargs):
        """A call inside an autocast region, with ``register_autocast`` rules: the rule's device's
        floating inputs cast to its dtype, the op run with that device's autocast off."""
        from ._extensions import autocast_cast
        regions = STATE.autocast
        hit = next(((d, dt) for d, dt in self._autocast_rules.items() if d in regions), None)
        if hit is None:
            return self._plain_call(args, kwargs)
        dev, dtype = hit
        args = autocast_cast(tuple(args), dev, dtype)
        kwargs = {k: autocast_cast(v, dev, dtype) for k, v in kwargs.items()}
        rest = {d: v for d, v in regions.items() if d != dev}
        STATE.autocast = rest or None
        try:
            return self._plain_call(args, kwargs)
        finally:
            STATE.autocast = regions

    def _plain_call(self, args, kwargs):
        if self._mutated_pos:
            self._check_mutating_call(args, kwargs)
        return self._binding(*args, **kwargs)

    def _check_mutating_call(self, args, kwargs):
        from ..fx.experimental.proxy_tensor import DispatchTracer
        if any(isinstance(m, DispatchTracer) and m.functionalize for m in STATE.modes):
            # (aot's joint trace: a mutation the tracer cannot see would be lost from the graph)
            raise NotImplementedError(
                f"{self._qualname} mutates {', '.join(self._schema.mutated)} (mutates_args): functionalizing a "
                f"mutating custom op is not supported, so this graph runs eagerly")
        if not STATE.grad_enabled:
            return
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError:
            return          # the binding raises the usual argument error
        for name in self._schema.mutated:
            a = bound.arguments.get(name)
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, Tensor) and t._requires_grad:
                    raise RuntimeError(
                        f"{self._qualname} mutates its argument '{name}', which requires grad: autograd through a "
                        f"mutating custom op is not supported (mutate a tensor that does not require grad, or "
                        f"return a new tensor instead)")

    # -- registration -------------------------------------------------------------------
    def register_fake(self, fn: Callable) -> Callable:
        """The fake implementation: same signature as the op, called with fake tensors
        (metadata only) under a FakeTensorMode; it returns tensors of the output's shape,
        dtype and device made with ember ops (``x.new_empty(...)``, ``ember.empty_like``).
        Needed under ``ember.compile`` and make_fx."""
        if not callable(fn):
            raise TypeError(f"{self._qualname}.register_fake: expected a function, got {type(fn).__name__}")
        self._fake = fn
        return fn

    def register_autograd(self, backward: Callable, /, *, setup_context: Optional[Callable] = None) -> None:
        """``backward(ctx, *grads)`` -> one gradient per input (None for non-tensor inputs);
        ``setup_context(ctx, inputs, output)`` runs in the forward and saves what backward needs."""
        if not callable(backward):
            raise TypeError(f"{self._qualname}.register_autograd: backward must be a function, got "
                            f"{type(backward).__name__}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"{self._qualname}.register_autograd: setup_context must be a function, got "
                            f"{type(setup_context).__name__}")
        self._backward = backward
        self._setup_context = setup_context

    def register_kernel(self, device_types: Union[str, Sequence[str]], fn: Optional[Callable] = None):
        """An implementation for the given device type(s) (``"cpu"``, ``"cuda"``); decorator form
        when ``fn`` is omitted."""
        kinds = _device_types(device_types, self._qualname)
        if None in kinds:
            raise ValueError(f"{self._qualname}.register_kernel: give the device type(s), e.g. 'cpu'")

        def inner(f):
            for d in kinds:
                self._impls[d] = f
            return f
        return inner(fn) if fn is not None else inner

    def register_vmap(self, fn: Optional[Callable] = None):
        """The batching rule ``ember.func.vmap(op)`` uses (see ``ember.library.register_vmap``)."""
        from ._extensions import register_vmap
        return register_vmap(self, fn) if fn is not None else register_vmap(self)

    def register_autocast(self, device_type: str, cast_inputs: Any) -> None:
        """Autocast's rule for this op (see ``ember.library.register_autocast``)."""
        from ._extensions import register_autocast
        register_autocast(self, device_type, cast_inputs)

    def register_torch_dispatch(self, torch_dispatch_class: Any, fn: Optional[Callable] = None):
        """A TorchDispatchMode class's rule for this op (see ``ember.library.register_torch_dispatch``)."""
        from ._extensions import register_torch_dispatch
        if fn is None:
            return register_torch_dispatch(self, torch_dispatch_class)
        return register_torch_dispatch(self, torch_dispatch_class, fn)

    # -- what the record uses ----------------------------------------------------------------
    def _impl_for(self, device_type: str) -> Callable:
        fn = self._impls.get(device_type) or self._impls.get(None)
        if fn is None:
            have = sorted(d for d in self._impls if d is not None)
            raise NotImplementedError(f"{self._qualname} has no implementation for device type '{device_type}' "
                                      f"(it has: {have}); add one with {self._opname}.register_kernel("
                                      f"'{device_type}')")
        return fn

    def _check_output(self, out: Any, args, what: str) -> Any:
        """``out`` in the structure the schema declares (a tuple stays a tuple, a list a list)."""
        rets = self._schema.returns

        def bad(expected):
            return RuntimeError(f"{self._qualname}: the {what} returned {_describe(out)}, but the schema "
                                f"({self._schema.text}) says it returns {expected}")
        if not rets:
            if out is not None:
                raise bad("nothing (None)")
            return None
        if rets == ("Tensor[]",):
            if not isinstance(out, (list, tuple)) or not all(isinstance(o, Tensor) for o in out):
                raise bad("a list of Tensors")
            return list(out)
        if len(rets) == 1 and not self._schema.returns_tuple:
            if not isinstance(out, Tensor):
                raise bad("a Tensor")
            return out
        if not isinstance(out, (tuple, list)) or len(out) != len(rets) or \
                not all(isinstance(o, Tensor) for o in out):
            raise bad(f"a tuple of {len(rets)} Tensors")
        return tuple(out)

    # -- introspection ------------------------------------------------------------------------
    @property
    def schema(self) -> str:
        return self._schema.text

    @property
    def default(self) -> "CustomOpDef":
        """torch's overload spelling, ``ember.ops.mylib.foo.default``: the op itself."""
        return self

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"


def _describe(out: Any) -> str:
    if isinstance(out, Tensor):
        return f"a Tensor of shape {list(out.shape)}"
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)} ({', '.join(type(o).__name__ for o in out)})"
    return type(out).__name__


def lookup(op: Any) -> CustomOpDef:
    """A custom op from its object or its ``"namespace::opname"``."""
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, str):
        hit = OPS.get(op)
        if hit is None:
            known = ", ".join(sorted(OPS)) or "none defined yet"
            raise ValueError(f"no custom op named {op!r} (custom ops: {known}); define it with "
                             f"@ember.library.custom_op({op!r}, mutates_args=...)")
        return hit
    raise TypeError(f"expected a custom op (the object @custom_op returned, or its 'namespace::opname'), got "
                    f"{type(op).__name__}")


class OpNamespace:
    """``ember.ops.<namespace>``: the custom ops of one namespace as attributes."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, opname: str) -> CustomOpDef:
        if opname.startswith("__"):
            raise AttributeError(opname)
        hit = OPS.get(f"{self._name}::{opname}")
        if hit is None:
            have = sorted(q.split("::")[1] for q in OPS if q.startswith(self._name + "::"))
            raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute '{opname}' (its ops: "
                                 f"{have})")
        return hit

    def __repr__(self):
        return f"<ember.ops namespace {self._name!r}>"


_NAMESPACES: Dict[str, OpNamespace] = {}


def namespace(name: str) -> Optional[OpNamespace]:
    """The namespace object of ``ember.ops.<name>``, None when no custom op lives there."""
    if not any(q.startswith(name + "::") for q in OPS):
        return None
    ns = _NAMESPACES.get(name)
    if ns is None:
        ns = _NAMESPACES[name] = OpNamespace(name)
    return ns
