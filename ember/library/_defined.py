"""Operators defined from a schema string (``Library.define``), with kernels per dispatch key.

torch's low-level API separates *defining* an operator (its schema) from *implementing*
it: ``lib.impl(name, fn, dispatch_key)`` puts a kernel in one slot of the op's dispatch
table, and a call picks the slot from the inputs' device and from whether autograd must
record it. ember has no C++ dispatcher to hold such tables, so each defined op is a
:class:`DefinedOp` -- a :class:`~ember.library.CustomOpDef` (so ``ember.ops.<ns>.<op>``,
``register_fake``, ``register_autograd``, ``opcheck``, dynamo's opaque node and inductor's
extern call all work unchanged) whose implementation is looked up per call in
:data:`KERNELS` with torch's precedence:

* **autograd** (grad mode on and an input requires grad): an ``Autograd``/``Autograd<Dev>``
  kernel (``fallthrough_kernel`` there: nothing is recorded); else a backward registered
  with ``register_autograd``; else ``CompositeImplicitAutograd`` (when no backend kernel
  claims the device); else torch's *autograd fallback*: the backend kernel runs with grad
  mode on and an output without a ``grad_fn`` gets a ``WarnNotImplemented`` node, whose
  backward warns (torch's UserWarning) and passes no gradient on;
* **CompositeImplicitAutograd** without a backend kernel runs the function above autograd
  and above every mode, so it decomposes into the ember ops it calls (and those record
  autograd, run on fake tensors and are traced) -- as torch's does;
* **backend** (``_DefinedRecord.run``): ``CPU``/``CUDA``/``Meta`` kernel for the inputs' device,
  else ``CompositeExplicitAutograd``, else ``CompositeImplicitAutograd``, else torch's
  "Could not run ... with arguments from the 'CPU' backend" error;
* **fake tensors**: the ``register_fake``/``impl_abstract`` function, else a ``Meta`` kernel, else
  ``CompositeExplicitAutograd``/``CompositeImplicitAutograd`` run on fake tensors.

A kernel stack per (op, key) lets a later ``impl`` override an earlier one and
``Library._destroy`` restore it, as torch's registration handles do. Kernels may be
registered before the op is defined (torch allows that too); the op finds them when it is.
"""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._state import STATE
from ..tensor import Tensor
from ._custom_op import CustomOpDef
from ._opaque import call_opaque
from ._record import CustomOpRecord, _device_type, _keywords, _positional, checked_output
from ._schema import Schema, signature_of

#: dispatch keys a kernel can be registered to
DISPATCH_KEYS = ("CPU", "CUDA", "Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "Autograd",
                 "AutogradCPU", "AutogradCUDA")
#: torch dispatch keys ember has no slot for (registering to one is refused by name)
TORCH_ONLY_KEYS = frozenset({
    "XLA", "MPS", "XPU", "HPU", "IPU", "MTIA", "Lazy", "PrivateUse1", "Python", "PythonTLSSnapshot", "Functionalize",
    "FuncTorchBatched", "FuncTorchDynamicLayerFrontMode", "FuncTorchDynamicLayerBackMode", "BatchedNestedTensor",
    "PreDispatch", "ADInplaceOrView", "BackendSelect", "Conjugate", "Negative", "ZeroTensor", "AutocastCPU",
    "AutocastCUDA", "AutocastXPU", "AutocastMPS", "AutogradXLA", "AutogradMPS", "AutogradXPU", "AutogradHPU",
    "AutogradLazy", "AutogradMeta", "AutogradPrivateUse1", "AutogradOther", "AutogradNestedTensor",
    "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA", "QuantizedCPU", "QuantizedCUDA", "NestedTensorCPU",
    "NestedTensorCUDA", "MkldnnCPU", "CompositeExplicitAutogradNonFunctional", "Undefined", "CatchAll",
    "FPGA", "MAIA", "Vulkan", "Metal", "Dense", "Sparse", "SparseCsr", "Quantized", "NestedTensor",
})
_BACKEND_KEY = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}


def fallthrough_kernel():
    """A dummy kernel: registered with ``Library.impl``/``Library.fallback`` it makes the dispatcher
    skip that key (for ``"Autograd"``: the op records nothing for autograd)."""
    raise NotImplementedError("fallthrough_kernel() should never be called.")


#: qualname -> dispatch key -> stack of (registration token, kernel); the last entry is active
KERNELS: Dict[str, Dict[str, List[Tuple[int, Callable]]]] = {}
_tokens = itertools.count(1)


def check_dispatch_key(key: Any, where: str) -> str:
    """``key`` as a known dispatch key; torch's error for a name it does not know, ember's for
    one of torch's keys that ember has no slot for."""
    if not isinstance(key, str):
        raise TypeError(f"{where}: dispatch_key must be a string such as 'CPU' or 'CompositeImplicitAutograd', "
                        f"got {type(key).__name__}")
    if key == "":
        return "CompositeImplicitAutograd"      # torch: no key is the catch-all, i.e. CompositeImplicitAutograd
    if key in DISPATCH_KEYS:
        return key
    if key in TORCH_ONLY_KEYS:
        raise NotImplementedError(f"ember.library: {where}: the dispatch key {key!r} is not supported; ember "
                                  f"dispatches on {list(DISPATCH_KEYS)}")
    raise RuntimeError(f"could not parse dispatch key: {key}")


def add_kernel(qualname: str, key: str, fn: Callable) -> int:
    token = next(_tokens)
    KERNELS.setdefault(qualname, {}).setdefault(key, []).append((token, fn))
    return token


def remove_kernel(qualname: str, key: str, token: int) -> None:
    stack = KERNELS.get(qualname, {}).get(key)
    if stack:
        stack[:] = [e for e in stack if e[0] != token]


def active_kernel(qualname: str, key: str) -> Optional[Callable]:
    stack = KERNELS.get(qualname, {}).get(key)
    return stack[-1][1] if stack else None


def registered_keys(qualname: str) -> List[str]:
    return [k for k in DISPATCH_KEYS if active_kernel(qualname, k) is not None]


def _could_not_run(qualname: str, key: str) -> NotImplementedError:
    have = registered_keys(qualname)
    return NotImplementedError(
        f"Could not run '{qualname}' with arguments from the '{key}' backend. This could be because the operator "
        f"doesn't exist for this backend, or was omitted during the selective/custom build process (if using "
        f"custom build). '{qualname}' is only available for these backends: [{', '.join(have)}].")


_WARN_TEXT = ("{op}: an autograd kernel was not registered to the Autograd key(s) but we are trying to backprop "
              "through it. This may lead to silently incorrect behavior. This behavior is deprecated and will be "
              "removed in a future version of PyTorch. If your operator is differentiable, please ensure you have "
              "registered an autograd kernel to the correct Autograd key (e.g. DispatchKey::Autograd, "
              "DispatchKey::CompositeImplicitAutograd). If your operator is not differentiable, or to squash this "
              "warning and use the previous behavior, please register torch::CppFunction::makeFallthrough() to "
              "DispatchKey::Autograd.")


def _warn_not_implemented(qualname: str) -> None:
    warnings.warn(_WARN_TEXT.format(op=qualname), UserWarning, stacklevel=2)


def _node_type():
    from ..autograd.graph import Node

    class WarnNotImplemented(Node):
        """torch's autograd fallback node (``torch::autograd::WarnNotImplemented``): the op had no
        autograd kernel, so its backward warns and passes no gradient to the inputs."""

        def name(self):
            return "torch::autograd::WarnNotImplemented"

        def apply(self, grads):
            _warn_not_implemented(self._op_name)
            return [None] * len(self.next_edges)
    return WarnNotImplemented


_NODE: List[type] = []


def _attach_warn_fallback(qualname: str, args: Tuple[Any, ...], out: Any) -> Any:
    """torch's autograd fallback for ``out = op(*args)``: outputs made by differentiable ember
    ops inside the kernel keep their history (a pre-hook warns when backward reaches it);
    floating outputs without one get a ``WarnNotImplemented`` node over the inputs."""
    from ..autograd.graph import gradient_edge
    if not _NODE:
        _NODE.append(_node_type())
    outs = out if isinstance(out, (tuple, list)) else (out,)
    edges = []
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor):
                edges.append(gradient_edge(t) if t._requires_grad else None)
    node = None
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            continue
        if o._grad_fn is not None:
            o._grad_fn.register_prehook(lambda grads, q=qualname: _warn_not_implemented(q))
            continue
        if o._requires_grad or not (o.dtype.is_floating_point or o.dtype.is_complex):
            continue
        if node is None:
            node = _NODE[0]()
            node._op_name = qualname
            node.next_edges = tuple(edges)
            node._n_out = len(outs)
        d = o.__dict__
        d["_requires_grad"] = True
        d["_grad_fn"] = node
        if k:
            d["_output_nr"] = k
    return out


class _DefinedRecord(CustomOpRecord):
    """The dispatcher record of a :class:`DefinedOp`: its backend step picks the kernel by key."""

    def run(self, args):
        custom = self.custom
        dev = _device_type(self, args)
        fn = custom._backend_kernel(dev)
        out = call_opaque(fn, *_positional(self, args), **_keywords(self, args))
        return checked_output(custom, out, args, "kernel")


class DefinedOp(CustomOpDef):
    """An operator made by ``Library.define`` (see the module docstring); it is its own
    ``default`` overload."""

    def __init__(self, schema: Schema):
        self._fake_fn: Optional[Callable] = None
        super().__init__(schema, None, signature=signature_of(schema))

    @staticmethod
    def _record_class():
        return _DefinedRecord

    # -- the kernels ------------------------------------------------------------------
    def _kernel(self, key: str) -> Optional[Callable]:
        return active_kernel(self._qualname, key)

    def _backend_kernel(self, device_type: str) -> Callable:
        key = _BACKEND_KEY.get(device_type, device_type)
        for k in (key, "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
            fn = self._kernel(k)
            if fn is not None and fn is not fallthrough_kernel:
                return fn
        if device_type == "meta":
            if self._fake_fn is not None:
                return self._fake_fn        # (torch's register_fake also serves the Meta key)
            raise NotImplementedError(
                f"{self._qualname}: attempted to run this operator with Meta tensors, but there was no fake impl or "
                f"Meta kernel registered. You may have run into this message while using an operator with PT2 "
                f"compilation APIs (torch.compile/torch.export); in order to use this operator with those APIs "
                f"you'll need to add a fake impl. Please see the following for next steps:  "
                f"https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html")
        raise _could_not_run(self._qualname, key)

    def _implicit(self, device_type: str) -> Optional[Callable]:
        """The CompositeImplicitAutograd kernel when it serves this device (no backend kernel does)."""
        cia = self._kernel("CompositeImplicitAutograd")
        if cia is None:
            return None
        key = _BACKEND_KEY.get(device_type, device_type)
        if self._kernel(key) is not None or self._kernel("CompositeExplicitAutograd") is not None:
            return None
        return cia

    def register_kernel(self, device_types, fn: Optional[Callable] = None):
        """torch's ``register_kernel`` on an op made by ``Library.define``: the kernel goes to the
        device's backend key ("cpu" -> CPU; None -> CompositeExplicitAutograd), registered for
        the life of the process."""
        items = (device_types,) if device_types is None or isinstance(device_types, str) else tuple(device_types)
        keys = []
        for d in items:
            if d is not None and d not in _BACKEND_KEY:
                raise ValueError(f"{self._qualname}.register_kernel: unknown device type {d!r}; expected one of "
                                 f"{sorted(_BACKEND_KEY)} or None")
            keys.append("CompositeExplicitAutograd" if d is None else _BACKEND_KEY[d])

        def inner(f: Callable) -> Callable:
            if not callable(f):
                raise TypeError(f"{self._qualname}.register_kernel: expected a function, got {type(f).__name__}")
            for k in keys:
                add_kernel(self._qualname, k, f)
            return f
        return inner(fn) if fn is not None else inner

    @property
    def _fake(self) -> Optional[Callable]:
        """What fake tensors run: register_fake's function, else a Meta kernel, else a composite
        kernel (it runs its ember ops on the fake tensors)."""
        if self._fake_fn is not None:
            return self._fake_fn
        for k in ("Meta", "CompositeExplicitAutograd", "CompositeImplicitAutograd"):
            fn = self._kernel(k)
            if fn is not None and fn is not fallthrough_kernel:
                return fn
        return None

    @_fake.setter
    def _fake(self, fn: Optional[Callable]) -> None:
        self._fake_fn = fn

    def _has_autograd(self) -> bool:
        """Whether a gradient can flow through the op (opcheck's autograd test)."""
        return self._backward is not None or self._kernel("Autograd") not in (None, fallthrough_kernel) or \
            self._kernel("AutogradCPU") is not None or self._kernel("CompositeImplicitAutograd") is not None

    # -- calling ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._autocast_rules and STATE.autocast is not None:
            return self._autocast_call(args, kwargs)
        return self._plain_call(args, kwargs)

    def _plain_call(self, args, kwargs):
        if self._mutated_pos:
            self._check_mutating_call(args, kwargs)
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._qualname}() {e} (schema: {self.schema})") from None
        bound.apply_defaults()
        vals = tuple(bound.arguments[p.name] for p in self._schema.params)
        dev = _device_type(self._ember_op, vals)
        cia = self._implicit(dev)
        if STATE.grad_enabled and _requires_grad(vals):
            key = _BACKEND_KEY.get(dev, dev)
            ag = self._kernel("Autograd" + key) or self._kernel("Autograd")
            if ag is fallthrough_kernel:
                return self._below_autograd(vals)
            if ag is not None:
                return call_opaque(ag, *args, **kwargs)
            if self._backward is not None:
                return self._call_binding(vals)
            if cia is not None:
                return cia(*args, **kwargs)
            return _attach_warn_fallback(self._qualname, vals, self._below_autograd(vals))
        if cia is not None:
            return cia(*args, **kwargs)
        return self._call_binding(vals)

    def _call_binding(self, vals):
        rec = self._ember_op
        return self._binding(*_positional(rec, vals), **_keywords(rec, vals))

    def _below_autograd(self, vals):
        from ..ops.registry import below_autograd
        return below_autograd(self._ember_op, vals)

    # -- torch's OpOverload / OpOverloadPacket spellings (the op is both) ---------------------
    def name(self) -> str:
        return self._qualname

    def overloads(self):
        return ["default"]

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def _overloadname(self) -> str:
        return "default"

    @property
    def _qualified_op_name(self) -> str:
        return self._qualname

    @property
    def tags(self):
        return list(getattr(self, "_tags", ()))

    def __repr__(self):
        return f"<OpOverload(op='{self._namespace}.{self._opname}', overload='default')>"

    def __str__(self):
        return f"{self._namespace}.{self._opname}.default"


def _requires_grad(vals) -> bool:
    for a in vals:
        if isinstance(a, Tensor):
            if a._requires_grad:
                return True
        elif isinstance(a, (list, tuple)):
            if any(isinstance(t, Tensor) and t._requires_grad for t in a):
                return True
    return False
