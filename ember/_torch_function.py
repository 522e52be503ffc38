"""PyTorch's ``__torch_function__`` protocol: Tensor subclasses and Tensor-like objects that
take over ember functions, and ``TorchFunctionMode`` contexts that see every call.

Why here and this shape. ember's generated op bindings (ops/registry.py) run a fast path when
every tensor argument's class is in :data:`FAST_CLASSES` -- ``Tensor`` and the subclasses that
opt out of the protocol (``Parameter``; ember's own internal classes, which route themselves).
Any other class fails that one set lookup (the same ~20 ns as the ``isinstance`` it replaced),
so the protocol costs plain tensors nothing; the slow path (``registry._check_args``) finds the
overloaded arguments and comes here. While a ``TorchFunctionMode`` is active the live sets are
emptied, so every call takes the slow path and reaches the mode; they are refilled when the
last mode of any thread exits (the sets are process-wide, the mode stacks per thread).

What a handler receives, as in torch: ``func`` (the public ember function -- ``ember.add`` for
``ember.add(x, y)``, ``x.add(y)`` and ``x + y`` alike: ember's methods and operators share the
function objects), ``types`` (the overloaded argument types, subclasses before their bases,
otherwise left to right), ``args`` and ``kwargs`` as the call spelled them (parameters up to
the keyword-only ones positionally, trailing defaults dropped; keyword-only ones that differ
from their defaults in ``kwargs``).

The default ``Tensor.__torch_function__`` runs ``func`` with subclass handling disabled and
turns tensor results into the subclass (``as_subclass``), so ``MyTensor + 1`` is a MyTensor.
"""
from __future__ import annotations

import threading

from ._state import STATE

# Python scalar types the bindings' fast path takes in a Tensor-or-Scalar slot.
_FAST_SCALARS = frozenset((int, float, bool))

PLAIN_CLASSES = set()      # ground truth: Tensor and the subclasses that opt out of the protocol
ROUTED_CLASSES = set()     # ember's own classes with ``__ember_route__`` (sparse, nested, ...): plain
                           # for the protocol, but their calls take the slow path, which routes them
DIRECT_CLASSES = set()     # PLAIN_CLASSES - ROUTED_CLASSES: what the fast path and _check_args pass
FAST_CLASSES = set()       # live (read by every generated binding): DIRECT_CLASSES, or empty under a mode
FAST_OR_SCALAR = set()     # live: FAST_CLASSES plus the fast scalar types
DISPATCH_CLASSES = set()   # subclasses defining ``__torch_dispatch__``: their ops reach the handler at the
                           # dispatcher's kernel step (below autograd), never the fast path


class _DisabledTorchFunction:
    """The marker a subclass sets as ``__torch_function__`` to opt out (``Parameter`` does):
    its instances behave as plain tensors and results stay plain. Calling it runs ``func``.
    Not a function: like torch's builtin it does not bind to the class it is read from, so
    ``Cls.__torch_function__ is ember._C._disabled_torch_function_impl`` holds."""
    __slots__ = ()
    __name__ = __qualname__ = "_disabled_torch_function_impl"

    def __call__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        with DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    def __repr__(self):
        return "<built-in function _disabled_torch_function_impl>"


_disabled_torch_function_impl = _DISABLED_FUNC = _DisabledTorchFunction()


_ACTIVE = [0]              # modes active in all threads (the live sets are process-wide)
_LOCK = threading.Lock()


def _refill():
    FAST_CLASSES.clear()
    FAST_OR_SCALAR.clear()
    DIRECT_CLASSES.clear()
    DIRECT_CLASSES.update(PLAIN_CLASSES - ROUTED_CLASSES - DISPATCH_CLASSES)
    if not _ACTIVE[0]:
        FAST_CLASSES.update(DIRECT_CLASSES)
        FAST_OR_SCALAR.update(DIRECT_CLASSES)
        FAST_OR_SCALAR.update(_FAST_SCALARS)


def opts_out(cls) -> bool:
    """Whether ``cls`` (a Tensor class) is outside the protocol: its ``__torch_function__`` is
    the disabled marker, or it is one of ember's own classes that does not define one itself
    (sparse/nested/masked/quantized tensors route their ops themselves; wrapping their dense
    results back into their class would be wrong)."""
    tf = getattr(cls, "__torch_function__", None)
    if tf is _DISABLED_FUNC:
        return True
    own = any("__torch_function__" in c.__dict__ for c in cls.__mro__ if c.__module__ != "ember.tensor")
    return not own and cls.__module__.startswith("ember.")


def note_tensor_class(cls) -> None:
    """Called for Tensor and each subclass as it is created (``Tensor.__init_subclass__``)."""
    if any("__torch_dispatch__" in c.__dict__ for c in cls.__mro__ if c.__module__ != "ember.tensor"):
        DISPATCH_CLASSES.add(cls)
        if "__torch_dispatch__" in cls.__dict__ and "__torch_function__" not in cls.__dict__:
            # torch's tensor metaclass does the same: a class that brings its own
            # __torch_dispatch__ and no __torch_function__ is out of the function protocol (its
            # results are what its handler makes, never re-wrapped: ``new_tensor`` stays plain)
            cls.__torch_function__ = _disabled_torch_function_impl
    if opts_out(cls):
        PLAIN_CLASSES.add(cls)
        if getattr(cls, "__ember_route__", None) is not None:
            ROUTED_CLASSES.add(cls)
        _refill()
    else:
        _route_methods(cls)


def route(op, args):
    """``__ember_route__`` of the routed classes among ``args`` (the slow path found one): the
    first result that is not NotImplemented, else NotImplemented (the op runs as for a dense
    tensor -- whose storage, for these classes, refuses the read with torch's error).

    Why a hook here and not code swapped into the public functions: ``ember.mm(sparse, x)``
    then costs dense calls nothing (sparse tensors fail the bindings' fast-path class test
    anyway), and regenerating a binding (``registry.refresh_binding``) cannot drop the route."""
    from .tensor import Tensor
    seen = []
    for a in args:
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            c = x.__class__
            if c in ROUTED_CLASSES and c not in seen and isinstance(x, Tensor):
                seen.append(c)
                r = c.__ember_route__(op, args)
                if r is not NotImplemented:
                    return r
    return NotImplemented


# ---------------------------------------------------------------------- methods of subclasses
# Methods and operators reach the protocol as in torch, with ``func`` the Tensor method
# (``Tensor.__mul__`` for ``x * 2``, ``Tensor.__getitem__`` for ``x[0]``, ``Tensor.backward``):
# a protocol subclass gets, for each Tensor method it does not define itself, a wrapper that
# hands the call to :func:`handle`. Plain tensors keep the methods as they are (no cost).
_NOT_ROUTED = {"__init__", "__new__", "__init_subclass__", "__torch_function__", "__class__",
               "__getattribute__", "__setattr__", "__delattr__", "__dict__", "__weakref__", "__slots__",
               "__hash__", "__dir__", "__sizeof__", "__getstate__", "__reduce__", "__subclasshook__",
               "__doc__", "__module__", "__array__", "__array_priority__", "__dlpack__",
               "__dlpack_device__", "__deepcopy__", "__reduce_ex__", "__setstate__", "__str__",
               "__format__", "__bool__", "__iter__", "__contains__", "__int__", "__float__",
               "__index__", "__complex__", "as_subclass", "data_ptr", "element_size", "is_contiguous",
               "storage_offset", "is_floating_point", "is_complex", "get_device", "requires_grad_",
               "retain_grad", "register_hook", "untyped_storage", "storage", "is_set_to", "is_shared"}
# operators torch reports as the method they compute (``x + 1`` -> ``Tensor.add``); the others
# (``1 - x`` -> ``Tensor.__rsub__``, ``x == y`` -> ``Tensor.__eq__``, ...) keep their own name
_OPERATOR_METHOD = {"__add__": "add", "__radd__": "add", "__mul__": "mul", "__rmul__": "mul",
                    "__sub__": "sub", "__truediv__": "div", "__matmul__": "matmul", "__neg__": "neg",
                    "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__pow__": "pow",
                    "__abs__": "abs", "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_",
                    "__itruediv__": "div_", "__mod__": "remainder"}
# tensor-valued properties whose getter is routed (torch routes every property; the metadata
# ones -- shape, dtype, device, ... -- would only cost time: their value is the base class's)
_ROUTED_PROPERTIES = ("data", "T", "mT", "H", "mH", "real", "imag")


def _route_methods(cls) -> None:
    from .tensor import Tensor
    own = set()
    for c in cls.__mro__:
        if c is Tensor:
            break
        own.update(c.__dict__)
    for name, value in list(Tensor.__dict__.items()):
        if name in own or name in _NOT_ROUTED or (name.startswith("_") and not name.startswith("__")):
            continue
        if isinstance(value, property):
            if name in _ROUTED_PROPERTIES and value.fget is not None:
                setattr(cls, name, property(_routed(value.fget), value.fset, value.fdel, value.__doc__))
        elif callable(value) and not isinstance(value, (classmethod, staticmethod, type)):
            shown = Tensor.__dict__.get(_OPERATOR_METHOD.get(name), value)
            setattr(cls, name, _routed(value, shown))


def _routed(method, shown=None):
    """``method`` of a protocol subclass: the handlers see ``shown`` (the method torch names for
    an operator) called with the same arguments."""
    func = method if shown is None else shown

    def routed(self, *args, **kwargs):
        if STATE.tf_subclass_off and not (STATE.tf_modes and not STATE.tf_off):
            return method(self, *args, **kwargs)
        types = collect_overloaded((self,) + args + tuple(kwargs.values()))
        if not types and not (STATE.tf_modes and not STATE.tf_off):
            return method(self, *args, **kwargs)
        return handle(func, types, (self,) + args, kwargs)
    routed.__name__ = getattr(method, "__name__", "method")
    routed.__qualname__ = f"Tensor.{routed.__name__}"
    routed.__doc__ = getattr(method, "__doc__", None)
    routed.__wrapped__ = method
    return routed


def overridable(x) -> bool:
    """Whether ``x`` takes part in the protocol as an argument: an instance of a Tensor
    subclass outside :data:`PLAIN_CLASSES`, or a non-Tensor with ``__torch_function__`` --
    except a PyTorch tensor (:func:`is_torch_tensor`)."""
    t = type(x)
    if t in PLAIN_CLASSES:
        return False
    return hasattr(t, "__torch_function__") and t not in _FAST_SCALARS and not is_torch_tensor(x)


def takes_over(x) -> bool:
    """Whether a non-ember-Tensor argument in a tensor slot hands the call to its own protocol
    (``__ember_function__`` or ``__torch_function__``) instead of being refused as a bad argument.
    A PyTorch tensor does not: see :func:`is_torch_tensor`."""
    t = type(x)
    return hasattr(t, "__ember_function__") or (hasattr(t, "__torch_function__") and not is_torch_tensor(x))


# ---------------------------------------------------------------------- real PyTorch tensors
# A real ``torch.Tensor`` has a ``__torch_function__`` too, so the protocol would take it for a
# Tensor-like and call torch's handler -- which runs ``func`` (an ember function) again under
# *torch's* disabling, which ember cannot see: infinite recursion. The reverse (``torch.add(t,
# e)``, ``t == e``) has torch calling ember's handler with a torch function, which runs it
# again under ember's disabling, which torch cannot see. Neither side can compute on the
# other's tensors, so both are refused with a TypeError that says how to convert.
_TORCH_TENSOR_TYPES = {}   # type -> whether it is a PyTorch tensor class (a few entries: cached)


def is_torch_tensor(x) -> bool:
    """Whether ``x`` is a real PyTorch tensor (``torch.Tensor`` or a subclass: ``Parameter``,
    FakeTensor, ...). Decided from the class's MRO by name, so torch is never imported (and an
    ``import ember as torch`` alias in ``sys.modules`` cannot fool it)."""
    t = type(x)
    r = _TORCH_TENSOR_TYPES.get(t)
    if r is None:
        r = _TORCH_TENSOR_TYPES[t] = any(
            (c.__module__, c.__name__) in (("torch._C", "TensorBase"), ("torch", "Tensor"))
            for c in getattr(t, "__mro__", ()))
    return r


def torch_tensor_hint(x) -> str:
    """What a message refusing ``x`` adds when it is a PyTorch tensor ('' otherwise)."""
    if not is_torch_tensor(x):
        return ""
    return ("; ember and PyTorch tensors don't mix -- convert it with "
            "ember.from_numpy(t.detach().cpu().numpy()) or ember.tensor(t.tolist())")


def type_name(x) -> str:
    """``x``'s type as the argument-type messages show it: the bare name (torch's style), but
    ``torch.Tensor`` / ``torch.nn.parameter.Parameter`` for a PyTorch tensor, which would
    otherwise read as 'not Tensor'."""
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}" if is_torch_tensor(x) else t.__name__


def _is_torch_callable(func) -> bool:
    """Whether ``func`` is one of PyTorch's own (``torch.add``, ``torch.Tensor.eq``,
    ``torch.nn.functional.relu``): what torch passes an ember handler for ``torch.add(t, e)``."""
    for obj in (func, getattr(func, "__objclass__", None), getattr(func, "__self__", None)):
        if obj is None:
            continue
        mod = getattr(obj, "__module__", None)
        if not isinstance(mod, str) and not isinstance(obj, type):
            mod = getattr(type(obj), "__module__", None)
        if isinstance(mod, str) and (mod == "torch" or mod.startswith("torch.")):
            return True
    return False


def _torch_callable_name(func) -> str:
    owner = getattr(func, "__objclass__", None)
    name = getattr(func, "__name__", None) or repr(func)
    if owner is not None:
        return f"torch.Tensor.{name}"
    mod = getattr(func, "__module__", None)
    return f"{mod}.{name}" if isinstance(mod, str) and mod.startswith("torch.") else f"torch.{name}"


# ---------------------------------------------------------------------- disabling
class DisableTorchFunctionSubclass:
    """Inside: subclasses' ``__torch_function__`` is not called (modes still are)."""

    def __enter__(self):
        self._prev = STATE.tf_subclass_off
        STATE.tf_subclass_off = True
        return self

    def __exit__(self, *exc):
        STATE.tf_subclass_off = self._prev
        return False


class DisableTorchFunction:
    """Inside: neither subclasses' ``__torch_function__`` nor modes are called."""

    def __enter__(self):
        self._prev = (STATE.tf_subclass_off, STATE.tf_off)
        STATE.tf_subclass_off = STATE.tf_off = True
        return self

    def __exit__(self, *exc):
        STATE.tf_subclass_off, STATE.tf_off = self._prev
        return False


def is_torch_function_enabled() -> bool:
    return not STATE.tf_off


def wants_override() -> bool:
    """Whether an active mode must see the current call (the slow path asks)."""
    return bool(STATE.tf_modes) and not STATE.tf_off


# ---------------------------------------------------------------------- recorders
RECORDERS: list = []       # tracers taking the Python-level calls (make_fx's user-facing traces)


def push_recorder(rec) -> None:
    """While ``rec`` is the innermost dispatch mode, :func:`python_entry` offers it each call
    (``rec.record_python(func, args, kwargs)``: the result, or NotImplemented to run as usual)."""
    with _LOCK:
        RECORDERS.append(rec)
        _ACTIVE[0] += 1
        _refill()


def record_detach(t):
    """``t.detach()`` while a recorder is the innermost dispatch mode: its ``record_detach(t)``
    (the alias, recorded as ``aten.detach``), else None."""
    modes = STATE.modes
    if RECORDERS and modes and modes[-1] is RECORDERS[-1]:
        return RECORDERS[-1].record_detach(t)
    return None


def pop_recorder(rec) -> None:
    with _LOCK:
        if rec in RECORDERS:
            RECORDERS.remove(rec)
            _ACTIVE[0] -= 1
            _refill()


# ---------------------------------------------------------------------- modes
def push_mode(mode) -> None:
    with _LOCK:
        STATE.tf_modes.append(mode)
        _ACTIVE[0] += 1
        _refill()


def pop_mode():
    with _LOCK:
        if not STATE.tf_modes:
            raise RuntimeError("trying to pop from an empty torch function mode stack")
        mode = STATE.tf_modes.pop()
        _ACTIVE[0] -= 1
        _refill()
    return mode


def mode_stack() -> list:
    return list(STATE.tf_modes)


# ---------------------------------------------------------------------- Python-level entries
PASS = object()            # python_entry's "nobody took the call": the function runs itself


def python_entry(func, loc, subject=None):
    """The protocol for a function of ember's API written in Python over the ops: the factories
    (``zeros``, ``arange``, ``tensor``, ...: no tensor argument, so the dispatcher's check never
    sees them), the ``*_like`` ones and the random in-place methods (which reach an internal op).
    Each calls this as its first statement when a mode is active or an argument's class is not a
    plain tensor (a global/class test: free otherwise), with ``locals()`` -- its parameters --, so
    the mode or subclass sees ``func`` called with the arguments the caller gave (values still
    at their defaults left out), as torch's do. A ``__torch_dispatch__`` wrapper as ``subject`` (the
    tensor argument of a ``*_like`` function or random in-place method) gets the call in its
    handler, as torch's dispatcher sends it ``aten.zeros_like`` / ``aten.uniform_``. Returns PASS
    when nobody overrides."""
    from .tensor import Tensor
    code = func.__code__
    names = code.co_varnames
    n, k = code.co_argcount, code.co_kwonlyargcount
    args = [loc[names[i]] for i in range(n)]
    defaults = func.__defaults__ or ()
    while args and len(args) > n - len(defaults) and args[-1] is defaults[len(args) - 1 - (n - len(defaults))]:
        args.pop()
    at = n + k
    if code.co_flags & 0x04:             # *args
        args.extend(loc[names[at]])
        at += 1
    kwdefaults = func.__kwdefaults__ or {}
    kwargs = {name: loc[name] for name in names[n:n + k] if loc[name] is not kwdefaults.get(name, PASS)}
    if code.co_flags & 0x08:             # **kwargs
        kwargs.update(loc[names[at]])
    if RECORDERS and STATE.modes and STATE.modes[-1] is RECORDERS[-1]:
        # a user-facing make_fx trace records the call whole, as torch's graphs hold it
        r = RECORDERS[-1].record_python(func, tuple(args), kwargs)
        if r is not NotImplemented:
            return r
    types = collect_overloaded([a for a in args if isinstance(a, Tensor)])
    if not types and not (STATE.tf_modes and not STATE.tf_off):
        if subject.__class__ in ROUTED_CLASSES:
            # a class routing ember's ops itself (nested) may take the Python-level ones too
            take = getattr(subject.__class__, "__ember_route_python__", None)
            r = NotImplemented if take is None else take(func, tuple(args), kwargs)
            return PASS if r is NotImplemented else r
        if subject.__class__ in DISPATCH_CLASSES:
            from .ops.registry import python_dispatch
            return python_dispatch(func.__name__, func, tuple(args), kwargs)
        return PASS
    # the public object (``ember.arange`` is ember/ops/_out.py's out= wrapper around it)
    return handle(getattr(func, "_ember_public", func), types, tuple(args), kwargs)


# ---------------------------------------------------------------------- calling handlers
def collect_overloaded(values) -> list:
    """The overloaded argument types among ``values`` (tensors, lists of them, Tensor-likes),
    in torch's order: a subclass goes before its base classes, otherwise first seen first."""
    types = []
    off = STATE.tf_subclass_off

    def add(x):
        t = type(x)
        if t in types or off or not overridable(x):
            return
        for k, seen in enumerate(types):
            if issubclass(t, seen):
                types.insert(k, t)
                return
        types.append(t)

    for v in values:
        if isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        else:
            add(v)
    return types


def handle(func, types, args, kwargs):
    """Run ``func`` through the protocol: the innermost active mode first (popped while its
    handler runs, so calls it makes run normally), then each overloaded type's handler until
    one returns something other than NotImplemented."""
    if kwargs is None:
        kwargs = {}
    if STATE.tf_modes and not STATE.tf_off:
        mode = pop_mode()
        try:
            r = mode.__torch_function__(func, tuple(types), tuple(args), dict(kwargs))
        finally:
            push_mode(mode)
        if r is not NotImplemented:
            return r
    for t in types:
        r = t.__torch_function__(func, tuple(types), tuple(args), dict(kwargs))
        if r is not NotImplemented:
            return r
    raise TypeError(f"Multiple dispatch failed for '{resolve_name(func)}'; all __torch_function__ "
                    "handlers returned NotImplemented:\n\n"
                    + "".join(f"  - tensor subclass {t}\n" for t in types))


def resolve_name(func) -> str:
    """``ember.add`` / ``ember.Tensor.add`` / ``ember.nn.functional.relu``: the name a
    message shows for ``func``."""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    mod = getattr(func, "__module__", None) or "ember"
    if qual.startswith("Tensor."):
        mod = "ember"
    return f"{mod}.{qual}"


def convert(ret, cls):
    """``ret`` with its plain tensors turned into ``cls`` (the default handler's last step)."""
    from .tensor import Tensor
    if cls is Tensor:
        return ret
    if isinstance(ret, Tensor):
        return ret if isinstance(ret, cls) else ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        items = [convert(r, cls) for r in ret]
        return type(ret)(*items) if hasattr(ret, "_fields") else type(ret)(items)
    return ret


def default_torch_function(cls, func, types, args=(), kwargs=None):
    """``Tensor.__torch_function__``: run ``func`` with subclass handling off, then make the
    tensor results ``cls`` instances -- unless a type in ``types`` is not a base of ``cls``
    (another subclass should decide: NotImplemented)."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    if _is_torch_callable(func):
        # PyTorch handing us its own function (``torch.add(t, e)``, ``t == e``): running it would
        # come straight back here (see is_torch_tensor). For an operator torch turns this
        # TypeError into NotImplemented, so Python tries ember's reflected one, which refuses
        # the torch tensor with the argument's name.
        shown = "ember" if cls.__module__ == "ember.tensor" else cls.__module__
        raise TypeError(f"{_torch_callable_name(func)}() got an ember tensor ({shown}."
                        f"{cls.__qualname__}); ember and PyTorch tensors don't mix -- convert it with "
                        "torch.from_numpy(e.detach().numpy()) or torch.tensor(e.tolist())")
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if func in _NOWRAP:
            return ret
        return convert(ret, cls)


_NOWRAP = set()            # functions whose results stay as they are (torch: Tensor._base/.grad getters)


def args_as_called(params, values, required):
    """``(args, kwargs)`` for a handler from a binding's full positional ``values``: parameters
    before the keyword-only ones positionally (trailing ones at their defaults dropped),
    keyword-only ones in kwargs when they differ from their defaults."""
    pos, kw = [], {}
    for p, v in zip(params, values):
        if p.kwonly:
            if p.default is required or not _same(v, p.default):
                kw[p.name] = v
        else:
            pos.append((p, v))
    while pos and pos[-1][0].default is not required and _same(pos[-1][1], pos[-1][0].default):
        pos.pop()
    return tuple(v for _, v in pos), kw


def _same(v, default):
    if v is default:
        return True
    if type(v) is type(default) and type(v) in (int, float, bool, str, tuple):
        return v == default
    return False
