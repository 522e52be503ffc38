"""Factory functions recorded whole in a user's ``make_fx`` graph, as torch records them.

Why. ember writes its factories (``zeros``, ``ones_like``, ``arange``, ``new_full``, ...) in
Python over a few ops (``full``, ``empty``; ``arange`` even fills a constant from numpy), so a
trace sees ``aten.full.default`` -- or a baked constant -- where torch's make_fx records
``aten.zeros_like.default(x_1, pin_memory=False)`` or ``aten.arange.start(1, 5, device=cpu,
pin_memory=False)``. These functions reach ``_torch_function.python_entry`` first thing; while a
user-facing make_fx trace runs, that entry asks the tracer (``DispatchTracer.record_python``),
which calls :func:`torch_call` here for the overload and the arguments torch's Python binding
would hand its dispatcher, runs the function below the tracer and records one node.

The node's target is a :class:`~ember.ops._aten_namespace.PythonOverload`
(``ember.ops.aten.zeros_like.default``) that runs ember's function with torch's arguments.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

# functions of no tensor argument: torch's binding fills in the device and pin_memory=False
_PLAIN = {"zeros": "default", "ones": "default", "empty": "memory_format", "rand": "default",
          "randn": "default"}
# ``*_like`` functions: torch's binding adds pin_memory=False only
_LIKE = ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like")
_NEW = ("new_zeros", "new_ones", "new_empty", "new_full")

# arguments whose presence (at a non-default value) makes the call one this module does not
# record whole: the call's own ops are traced as before
_REFUSE = ("out", "generator", "requires_grad", "names")


def _device(d: Any) -> Any:
    from ...types import device
    if d is None:
        return device("cpu")
    return d if isinstance(d, device) else device(d)


def _sizes(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[list]:
    if "size" in kwargs:
        if args:
            return None
        s = kwargs["size"]
    elif len(args) == 1 and isinstance(args[0], (tuple, list)) or (len(args) == 1 and type(args[0]).__name__ == "Size"):
        s = args[0]
    else:
        s = args
    try:
        return list(s)
    except TypeError:
        return [s]


def _options(kwargs: Dict[str, Any], plain: bool) -> Optional[Dict[str, Any]]:
    out = {}
    for k in ("dtype", "layout"):
        if kwargs.get(k) is not None:
            out[k] = kwargs[k]
    if plain:
        out["device"] = _device(kwargs.get("device"))
    elif kwargs.get("device") is not None:
        out["device"] = _device(kwargs["device"])
    out["pin_memory"] = False
    if kwargs.get("memory_format") is not None:
        out["memory_format"] = kwargs["memory_format"]
    return out


def torch_call(name: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
    """``(overload name, args, kwargs)`` torch's make_fx records for ember's Python factory
    ``name`` called with ``args``/``kwargs`` (as called), or None when it is not one recorded
    whole (or the call passes what torch records otherwise: ``out=``, a generator, ...)."""
    for k in _REFUSE:
        if kwargs.get(k) not in (None, False):
            return None
    if kwargs.get("pin_memory"):
        return None
    known = {"dtype", "layout", "device", "pin_memory", "memory_format", "requires_grad", "out", "generator",
             "size"}
    if any(k not in known for k in kwargs):
        return None
    if name in _PLAIN:
        sizes = _sizes(args, kwargs)
        if sizes is None or any(s is None for s in sizes):
            return None
        return _PLAIN[name], (sizes,), _options(kwargs, True)
    if name == "full":
        if len(args) != 2 or "size" in kwargs:
            return None
        size = args[0]
        size = [size] if not isinstance(size, (tuple, list)) and type(size).__name__ != "Size" else list(size)
        return "default", (size, args[1]), _options(kwargs, True)
    if name == "arange":
        if not 1 <= len(args) <= 3 or "size" in kwargs:
            return None
        return ("default", "start", "start_step")[len(args) - 1], tuple(args), _options(kwargs, True)
    if name == "eye":
        if not 1 <= len(args) <= 2:
            return None
        return ("default", "m")[len(args) - 1], tuple(args), _options(kwargs, True)
    if name == "linspace":
        if len(args) != 3:
            return None
        return "default", tuple(args), _options(kwargs, True)
    if name == "scalar_tensor":
        if len(args) != 1:
            return None
        return "default", tuple(args), _options(kwargs, True)
    if name in _LIKE:
        want = 2 if name == "full_like" else 1
        if len(args) != want or "size" in kwargs:
            return None
        return "default", tuple(args), _options(kwargs, False)
    if name in _NEW:
        if not args:
            return None
        self, rest = args[0], args[1:]
        if name == "new_full":
            if len(rest) != 2:
                return None
            size, extra = rest[0], (rest[1],)
            size = list(size) if isinstance(size, (tuple, list)) or type(size).__name__ == "Size" else [size]
        else:
            size, extra = _sizes(rest, kwargs), ()
            if size is None:
                return None
        opts = {k: v for k, v in _options(kwargs, False).items() if k != "layout" or "layout" in kwargs}
        return "default", (self, size) + extra, opts
    return None


def runner(name: str, fn: Any):
    """What the recorded overload runs: ember's ``fn`` with torch's arguments (the size as one
    list, ``pin_memory=False`` and a strided ``layout`` accepted and dropped where ``fn`` has no
    such parameter)."""
    import inspect
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes = set(params)

    def run(*args, **kwargs):
        for k in ("pin_memory", "layout", "memory_format"):
            if k in kwargs and k not in takes:
                v = kwargs.pop(k)
                if k == "pin_memory" and v:
                    raise NotImplementedError(f"ember.ops.aten.{name}: pin_memory=True is not supported")
                if k == "layout" and v is not None and str(v) not in ("ember.strided", "strided"):
                    raise NotImplementedError(f"ember.ops.aten.{name}: layout={v!r} is not supported")
        if name in _NEW:
            self, size = args[0], args[1]
            return fn(self, *([tuple(size)] if name == "new_full" else tuple(size)), *args[2:], **kwargs)
        if name in _PLAIN:
            return fn(*tuple(args[0]), *args[1:], **kwargs)
        return fn(*args, **kwargs)
    run.__name__ = name
    return run


# every name this module records (``ember.ops.aten.<name>`` resolves them in a fresh process)
KNOWN = frozenset(_PLAIN) | frozenset(_LIKE) | frozenset(_NEW) | frozenset(
    ("full", "arange", "eye", "linspace", "scalar_tensor", "detach"))


def _detach(self):
    return self.detach()


def _function(name: str) -> Any:
    from ...ops import creation
    from ...tensor import Tensor
    if name == "detach":
        return _detach
    if name in _NEW:
        return getattr(Tensor, name)
    if name == "full":
        return creation._full_entry
    return getattr(creation, name)


def overload_for(name: str, overload: str) -> Any:
    """The PythonOverload ``ember.ops.aten.<name>.<overload>`` a recorded factory call targets,
    running ember's function with torch's arguments (see :func:`runner`)."""
    from ...ops._aten_namespace import aten, python_overload
    from ...ops.registry import OPS
    op = OPS.get(name)
    if op is not None and getattr(op, "binding", None) is not None:
        # an op of ember's own (``full``, ``empty``): its aten overload takes torch's arguments
        return getattr(getattr(aten, name), overload)
    fn = _function(name)
    ov = python_overload(name, fn, overload)
    if not getattr(ov._fn, "_torch_args", False):
        run = runner(name, fn)
        run._torch_args = True
        ov._fn = run
    return ov
