"""``ember.library.Library`` and the module-level low-level API (``define``, ``impl``,
``impl_abstract``, ``get_kernel``) -- torch.library's layer below ``custom_op``.

A ``Library`` is a set of registrations in one namespace: ``"DEF"`` (the one library that
defines the namespace's operators; a second live one is torch's error), ``"FRAGMENT"`` (defines
more operators in a namespace, as often as wanted) and ``"IMPL"`` (only kernels). What it
registered lives as long as it does: ``_destroy()`` -- or the library being garbage
collected, as in torch -- removes its definitions and kernels (a kernel it overrode becomes
active again). The module-level functions use a library kept alive for the process.

The operators and their per-key kernels are ``ember/library/_defined.py``.
"""
from __future__ import annotations

import inspect
import re
import warnings
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _custom_op
from ._custom_op import CustomOpDef
from ._defined import (DefinedOp, _BACKEND_KEY, active_kernel, add_kernel, check_dispatch_key, fallthrough_kernel,
                       remove_kernel)
from ._schema import parse_definition, split_name

_KINDS = ("DEF", "IMPL", "FRAGMENT")
_ALIAS_ANALYSIS = ("", "FROM_SCHEMA", "CONSERVATIVE")

#: namespace -> (weakref to its live DEF library, where it was made)
_DEF_LIBS: dict = {}
#: qualname -> where the op was defined (for torch's duplicate-definition message)
_DEFINED_AT: dict = {}
#: libraries made by the module-level functions: they live as long as the process
_keep_alive: List["Library"] = []


def _caller() -> str:
    """file:line of the user's code that called into this module."""
    for fr in inspect.stack(0)[2:]:
        if not fr.filename.startswith(__file__.rsplit("/", 1)[0]):
            return f"{fr.filename}:{fr.lineno}"
    return "<unknown>"


class Library:
    """``Library(ns, kind, dispatch_key="")``: see the module docstring. ``dispatch_key`` is the
    default key of this library's ``impl`` calls."""

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if not isinstance(ns, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", ns):
            raise ValueError(f"Library: ns must be a namespace name (a Python identifier such as 'mylib'), "
                             f"got {ns!r}")
        if dispatch_key:
            check_dispatch_key(dispatch_key, f"Library({ns!r}, {kind!r})")
        where = _caller()
        if kind == "DEF":
            prev = _DEF_LIBS.get(ns)
            if ns in ("aten", "prims", "prim") or (prev is not None and prev[0]() is not None):
                before = prev[1] if prev is not None else "ember's operator registry"
                raise RuntimeError(
                    f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; please put all of "
                    f"your definitions in a single TORCH_LIBRARY block.  If you were trying to specify "
                    f"implementations, consider using TORCH_LIBRARY_IMPL (which can be duplicated).  If you really "
                    f"intended to define operators for a single namespace in a distributed way, you can use "
                    f"TORCH_LIBRARY_FRAGMENT to explicitly indicate this.  Previous registration of TORCH_LIBRARY "
                    f"was registered at {before}; latest registration was registered at {where}")
            _DEF_LIBS[ns] = (weakref.ref(self), where)
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._where = where
        # ("def", qualname, op) and ("impl", qualname, key, token); shared with the finalizer
        self._registrations: List[Tuple] = []
        self._finalizer = weakref.finalize(self, _undo, self._registrations)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    # -- defining ----------------------------------------------------------------------
    def define(self, schema: str, alias_analysis: str = "", *, tags: Any = ()) -> str:
        """Define the operator ``schema`` (``"foo(Tensor x, int n=2) -> Tensor"``) in this namespace;
        returns its name. Call it as ``ember.ops.<ns>.foo(...)`` once a kernel is registered."""
        self._check_alive("define")
        if self.kind == "IMPL":
            name = schema.split("(", 1)[0].strip() if isinstance(schema, str) else schema
            raise RuntimeError(f'def("{name}"): Cannot define an operator inside of a TORCH_LIBRARY_IMPL block.  '
                               f"All def()s should be placed in the (unique) TORCH_LIBRARY block for their "
                               f"namespace.  (Error occurred while processing TORCH_LIBRARY_IMPL block at "
                               f"{self._where})")
        if alias_analysis not in _ALIAS_ANALYSIS:
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        _check_tags(tags)
        _refuse_builtin_namespace(self.ns, "define")
        sch = parse_definition(self.ns, schema)
        q = sch.qualname
        old = _custom_op.OPS.get(q)
        if old is not None and not getattr(old, "_destroyed", False):
            raise RuntimeError(
                f"Tried to register an operator ({sch.text}) with the same name and overload name multiple "
                f"times. Each overload's schema should only be registered with a single call to def(). "
                f"Duplicate registration: registered at {_caller()}. Original registration: registered at "
                f"{_DEFINED_AT.get(q, 'ember.library.custom_op')}")
        op = DefinedOp(sch)
        op._tags = tuple(tags) if isinstance(tags, (tuple, list)) else (tags,)
        _DEFINED_AT[q] = _caller()
        self._registrations.append(("def", q, op))
        return sch.opname

    # -- kernels -------------------------------------------------------------------------
    def impl(self, op_name: Any, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False,
             allow_override: bool = True) -> None:
        """Register ``fn`` as the kernel of ``op_name`` (``"foo"``, ``"ns::foo"`` or the op object) for
        ``dispatch_key`` ("CPU", "CUDA", "Meta", "CompositeImplicitAutograd",
        "CompositeExplicitAutograd", "Autograd"; none: this library's key, else
        CompositeImplicitAutograd). ``fallthrough_kernel`` for "Autograd" makes the op record no
        autograd."""
        self._check_alive("impl")
        if not callable(fn):
            raise TypeError(f"Input function is required to be a callable but found type {type(fn)}")
        if with_keyset:
            raise NotImplementedError("ember.library: Library.impl(..., with_keyset=True) is not supported (ember "
                                      "has no DispatchKeySet to pass to the kernel)")
        key = check_dispatch_key(dispatch_key or self.dispatch_key, "Library.impl")
        _refuse_builtin_namespace(self.ns, "impl")
        q = self._qualname(op_name, "impl")
        if fn is fallthrough_kernel and not key.startswith("Autograd"):
            raise NotImplementedError(f"ember.library: fallthrough_kernel is supported for the Autograd keys only, "
                                      f"not {key!r}")
        existing = _custom_op.OPS.get(q)
        if existing is not None and not isinstance(existing, DefinedOp):
            raise NotImplementedError(f"ember.library: Library.impl on {q}, which custom_op made: use "
                                      f"{existing._opname}.register_kernel(device_types) (or register_autograd / "
                                      f"register_fake) for such ops")
        if active_kernel(q, key) is not None:
            if not allow_override:
                raise RuntimeError(f"Library.impl: {q} already has a kernel registered for the dispatch key "
                                   f"{key} and allow_override=False")
            warnings.warn(f"Overriding a previously registered kernel for the same operator and the same dispatch "
                          f"key\n  operator: {q}\n  dispatch key: {key}\n  new kernel: registered at {_caller()}",
                          UserWarning, stacklevel=2)
        token = add_kernel(q, key, fn)
        self._registrations.append(("impl", q, key, token))

    def fallback(self, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        """torch: one kernel for every operator at a dispatch key. Not supported by ember."""
        self._check_alive("fallback")
        if self.ns != "_":
            raise RuntimeError(f'Fallback can only be registered using library fragment on the global namespace '
                               f'"_" but it is {self.ns}')
        raise NotImplementedError("ember.library: Library.fallback (a kernel for every operator at one dispatch "
                                  "key) is not supported; ember's dispatcher has no per-key fallback table")

    def _register_fake(self, op_name: Any, fn: Callable, _stacklevel: int = 1, *, allow_override: bool = True):
        from . import register_fake
        return register_fake(self._qualname(op_name, "register_fake"), fn)

    def _destroy(self) -> None:
        """Remove everything this library registered (its definitions and kernels)."""
        self._finalizer()
        if self.kind == "DEF":
            prev = _DEF_LIBS.get(self.ns)
            if prev is not None and prev[0]() is self:
                del _DEF_LIBS[self.ns]
        self._destroyed = True

    # -- helpers -----------------------------------------------------------------------------
    def _check_alive(self, what: str) -> None:
        if getattr(self, "_destroyed", False):
            raise RuntimeError(f"Library.{what}: this library ({self!r}) was destroyed (_destroy())")

    def _qualname(self, op_name: Any, api: str) -> str:
        if isinstance(op_name, CustomOpDef):
            q = op_name._qualname
        elif isinstance(op_name, str):
            name = op_name
            if name.endswith(".default"):
                name = name[:-len(".default")]
            if "." in name.split("::")[-1]:
                raise NotImplementedError(f"ember.library: overload names ({op_name!r}) are not supported; an ember "
                                          f"op has the one overload 'default'")
            q = name if "::" in name else f"{self.ns}::{name}"
            split_name(q)
        else:
            raise TypeError(f"Library.{api}: op_name must be the operator's name ('foo' or 'ns::foo') or the op "
                            f"object, got {type(op_name).__name__}")
        if q.split("::")[0] != self.ns:
            raise ValueError(f"Library.{api}: {q} is not in this library's namespace {self.ns!r}")
        return q


def _undo(registrations: List[Tuple]) -> None:
    """Remove a library's registrations, newest first (the finalizer: also on garbage collection)."""
    while registrations:
        reg = registrations.pop()
        if reg[0] == "impl":
            _, q, key, token = reg
            remove_kernel(q, key, token)
        else:
            _, q, op = reg
            op._destroyed = True
            if _custom_op.OPS.get(q) is op:
                del _custom_op.OPS[q]
                _DEFINED_AT.pop(q, None)


def _check_tags(tags: Any) -> None:
    items = tags if isinstance(tags, (tuple, list)) else (tags,)
    if items:
        raise NotImplementedError(f"ember.library: operator tags (define(..., tags={tags!r})) are not supported; "
                                  f"ember has no torch.Tag -- pass tags=()")


def _refuse_builtin_namespace(ns: str, what: str) -> None:
    """ember's own operators are registry records with array kernels, not dispatch tables: a
    kernel registered for one of them would never run (a silent no-op), so it is refused."""
    if ns in ("aten", "prims", "prim"):
        raise NotImplementedError(f"ember.library: Library.{what} in the namespace {ns!r} is not supported "
                                  f"(ember's built-in operators cannot be redefined or given new kernels); use "
                                  f"a namespace of your own")


# ---------------------------------------------------------------------------- module level
def _library_for(namespace: str, lib: Optional[Library]) -> Library:
    if lib is not None:
        if not isinstance(lib, Library):
            raise TypeError(f"lib must be an ember.library.Library, got {type(lib).__name__}")
        return lib
    use = Library(namespace, "FRAGMENT")
    _keep_alive.append(use)
    return use


def define(qualname: Any, schema: str, *args: Any, lib: Optional[Library] = None, tags: Any = ()):
    """Define the operator ``qualname`` ("ns::foo") with ``schema`` ("(Tensor x) -> Tensor"), in
    ``lib`` or in a library that lives as long as the process. The legacy form
    ``define(lib, "foo(Tensor x) -> Tensor", alias_analysis="")`` returns a decorator that defines
    the op and registers the function as its CompositeImplicitAutograd kernel."""
    if isinstance(qualname, Library):
        legacy_lib, alias_analysis = qualname, (args[0] if args else "")

        def wrap(f):
            name = legacy_lib.define(schema, alias_analysis)
            legacy_lib.impl(name, f)
            return f
        return wrap
    if args:
        raise TypeError(f"define() takes 2 positional arguments (qualname, schema) but {2 + len(args)} were given")
    ns, name = split_name(qualname)
    if not isinstance(schema, str):
        raise TypeError(f"define({qualname!r}, ...): schema must be a string like '(Tensor x) -> Tensor', got "
                        f"{type(schema).__name__}")
    _library_for(ns, lib).define(name + schema.strip(), tags=tags)


def _keys_for(types: Union[str, Sequence[str]]) -> List[str]:
    items = (types,) if isinstance(types, str) else tuple(types)
    keys = []
    for t in items:
        if not isinstance(t, str):
            raise TypeError(f"impl: types must be device type(s) ('cpu', 'cuda', 'meta', 'default') or dispatch "
                            f"key(s), got {type(t).__name__}")
        if t == "default":
            keys.append("CompositeExplicitAutograd")
        elif t in _BACKEND_KEY:
            keys.append(_BACKEND_KEY[t])
        else:
            keys.append(check_dispatch_key(t, "impl"))
    return keys


def impl(qualname: Any, types: Union[str, Sequence[str]] = "", func: Optional[Callable] = None, *,
         lib: Optional[Library] = None):
    """Register ``func`` as the kernel of ``qualname`` for the device type(s) ``types`` ("cpu",
    "cuda", "meta", "default" = CompositeExplicitAutograd) or dispatch key(s). Returns None, or
    without ``func`` a decorator that registers and returns None (as torch's does). The legacy
    form ``impl(lib, name, dispatch_key)`` returns a decorator that returns the function."""
    if isinstance(qualname, Library):
        legacy_lib, name, key = qualname, types, func if func is not None else ""

        def wrap(f):
            legacy_lib.impl(name, f, key)
            return f
        return wrap
    if not isinstance(qualname, str):
        raise TypeError(f"impl: qualname must be 'namespace::opname', got {type(qualname).__name__}")
    ns, _ = split_name(qualname)
    keys = _keys_for(types)

    def register(f: Callable) -> None:
        use = _library_for(ns, lib)
        for k in keys:
            use.impl(qualname, f, k)
    if func is None:
        return register
    register(func)
    return None


def impl_abstract(qualname: Any, func: Optional[Callable] = None, *, lib: Optional[Library] = None,
                  _stacklevel: int = 1):
    """Deprecated name of :func:`register_fake` (warns as torch does)."""
    warnings.warn("`torch.library.impl_abstract` was renamed to `torch.library.register_fake`. Please use that "
                  "instead; we will remove `torch.library.impl_abstract` in a future version of PyTorch.",
                  FutureWarning, stacklevel=2 + _stacklevel - 1)
    from . import register_fake
    return register_fake(qualname, func, lib=lib)


class KernelFunction:
    """What ``get_kernel`` returns (torch's ``SafeKernelFunction``): the kernel a dispatch key runs,
    callable boxed as ``call_boxed(keyset, *args, **kwargs)`` (``keyset`` is accepted for torch's
    signature; ember has no dispatch key sets)."""

    def __init__(self, fn: Callable, qualname: str, key: str):
        self._fn = fn
        self._qualname = qualname
        self._key = key

    def call_boxed(self, keyset: Any, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"SafeKernelFunction(op='{self._qualname}', dispatch_key='{self._key}')"


def get_kernel(op: Any, dispatch_key: str) -> KernelFunction:
    """The kernel ``op`` runs at ``dispatch_key`` (a backend key also finds the composite kernels
    that serve it)."""
    if isinstance(op, CustomOpDef):
        q = op._qualname
    elif isinstance(op, str):
        q = op[:-len(".default")] if op.endswith(".default") else op
    else:
        raise TypeError(f"get_kernel: op must be 'namespace::opname' or an op object, got {type(op).__name__}")
    key = getattr(dispatch_key, "name", dispatch_key)
    key = check_dispatch_key(key, "get_kernel")
    custom = _custom_op.OPS.get(q)
    if custom is None:
        if q.startswith("aten::"):
            raise NotImplementedError(f"ember.library: get_kernel of ember's built-in operator {q} is not "
                                      f"supported (its kernels are array functions, not dispatcher kernels)")
        raise RuntimeError(f"operator {q} does not exist")
    if not isinstance(custom, DefinedOp):
        if key in ("CPU", "CUDA"):
            return KernelFunction(custom._impl_for(key.lower()), q, key)
        raise RuntimeError(f"no kernel for {key} for {q}")
    fn = active_kernel(q, key)
    if fn is None and key in ("CPU", "CUDA", "Meta"):
        try:
            fn = custom._backend_kernel(key.lower())
        except NotImplementedError:
            fn = None
    if fn is None:
        raise RuntimeError(f"no kernel for {key} for {q}")
    return KernelFunction(fn, q, key)


__all__ = ["Library", "define", "impl", "impl_abstract", "fallthrough_kernel", "get_kernel"]
