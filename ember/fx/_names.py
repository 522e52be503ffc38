"""Naming helpers shared by the graph, the printer and the code generator.

Why a separate module: three places must agree on how things are *named* --
node names in a :class:`~ember.fx.Graph` (``mul``, ``mul_1``, ...), the way a
call target is printed (``operator.mul``, ``ember.relu``), and the global names
the generated Python source uses. Keeping the rules in one place is what makes
``print(graph)`` and ``gm.code`` line up with each other (and with torch.fx).
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re
import sys
import types
from typing import Any, Callable, Dict, Optional, Set

__all__ = [
    "Namespace",
    "sanitize_identifier",
    "snake_case",
    "target_to_name",
    "qualified_name",
    "pretty_target",
    "type_repr",
    "is_ember_object",
]

_NON_IDENT = re.compile(r"[^0-9a-zA-Z_]+")
_SUFFIX = re.compile(r"(.*)_(\d+)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")

# Names that generated code relies on as globals: a node may never take them,
# or it would shadow them inside ``forward``.
RESERVED_GLOBALS = frozenset({"inf", "nan", "NoneType", "ember", "device", "self"})


@functools.lru_cache(maxsize=4096)   # (pure; called for every node a trace creates)
def sanitize_identifier(candidate: str) -> str:
    """Turn an arbitrary string (``layer1.0.conv``, ``*args``) into a Python
    identifier the way torch.fx does: every run of illegal characters becomes
    one ``_``; an empty result becomes ``_unnamed``; a leading digit gets a
    ``_`` prefix."""
    candidate = _NON_IDENT.sub("_", candidate)
    if not candidate:
        return "_unnamed"
    if candidate[0].isdigit():
        candidate = "_" + candidate
    return candidate


@functools.lru_cache(maxsize=4096)   # (pure; called for every node a trace creates)
def snake_case(name: str) -> str:
    """``MyModule`` -> ``my_module``; already snake names are unchanged."""
    return _CAMEL.sub(r"_\1", name).lower()


def _is_magic(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def target_to_name(target: Any) -> str:
    """The *hint* a new node's name is derived from.

    ``operator.mul`` -> ``mul``; method ``__add__`` -> ``add``; module path
    ``layer1.0.conv`` -> ``layer1_0_conv`` (sanitisation happens in
    :meth:`Namespace.create_name`); a class ``Linear`` -> ``linear``.
    """
    if callable(target) and not isinstance(target, str):
        name = getattr(target, "__name__", None) or type(target).__name__
    else:
        name = str(target)
    if _is_magic(name):
        name = name[2:-2]
    return snake_case(name)


class Namespace:
    """Hands out unique, legal Python identifiers.

    The rule mirrors torch.fx: a candidate ``foo`` is used as is when free;
    otherwise (or when it would shadow a keyword, a builtin or one of the
    globals the generated code needs) ``foo_1``, ``foo_2``, ... are tried,
    continuing from the last number handed out for that base. A candidate
    that already ends in ``_<n>`` is treated as base ``foo`` number ``n``.
    Objects may be associated with a name so that asking again for the same
    object returns the same name (used for globals in generated code).
    """

    def __init__(self) -> None:
        self._used: Set[str] = set()
        self._base_count: Dict[str, int] = {}
        self._obj_to_name: Dict[int, str] = {}
        self._objs: Dict[int, Any] = {}  # keep objects alive while id-keyed

    def create_name(self, candidate: str, obj: Optional[Any] = None) -> str:
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)]
        candidate = sanitize_identifier(candidate)
        m = _SUFFIX.match(candidate)
        if m is None:
            base, num = candidate, None
        else:
            base, num = m.group(1), int(m.group(2))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self._base_count.get(base, 0)
        while candidate in self._used or self._is_illegal(candidate, obj):
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        if obj is not None:
            self._obj_to_name[id(obj)] = candidate
            self._objs[id(obj)] = obj
        return candidate

    def associate_name_with_obj(self, name: str, obj: Any) -> None:
        self._obj_to_name[id(obj)] = name
        self._objs[id(obj)] = obj

    def mark_used(self, name: str) -> None:
        self._used.add(name)

    def is_used(self, name: str) -> bool:
        return name in self._used

    def release(self, name: str) -> None:
        """Forget ``name`` (after its node was erased) so it may be reused."""
        self._used.discard(name)

    @staticmethod
    def _is_illegal(name: str, obj: Any) -> bool:
        if keyword.iskeyword(name):
            return True
        if name in builtins.__dict__:
            return obj is not builtins.__dict__[name]
        if name in RESERVED_GLOBALS:
            return True
        return False


def is_ember_object(obj: Any) -> bool:
    """True for functions/classes defined inside the ``ember`` package."""
    mod = getattr(obj, "__module__", None)
    return isinstance(mod, str) and (mod == "ember" or mod.startswith("ember."))


def _public_module_candidates(module: str):
    """``ember.ops._generated`` -> ``ember.ops``, ``ember``; private path
    components are dropped because the user never imports them."""
    parts = module.split(".")
    public = [p for p in parts if not p.startswith("_")]
    seen = []
    for i in range(len(public), 0, -1):
        cand = ".".join(public[:i])
        if cand not in seen:
            seen.append(cand)
    return seen


def _op_binding_name(ember: Any, op: Any) -> str:
    """How an ember op's binding is spelled when ``ember.<name>`` is another function (``ember.cat``
    is the entry point that checks its arguments and calls the ``cat`` op's binding): that public
    name where the entry takes the op's arguments by the same names (so the code calls the same op),
    else ``ember.ops.aten.<op>.default``, the overload that runs the binding itself."""
    public = getattr(ember, op.public_name, None)
    if public is not None and _takes_op_args(public, op):
        return f"ember.{op.public_name}"
    return f"ember.ops.aten.{op.name}.default"


def _takes_op_args(fn: Any, op: Any) -> bool:
    import inspect
    if not isinstance(fn, types.FunctionType) or not is_ember_object(fn):
        return False
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    mine = [p.name for p in op.params if not p.kwonly]
    names = {p.name for p in params}
    return positional[:len(mine)] == mine and all(p.name in names for p in op.params if p.kwonly)


_PUBLIC_NAMES: Dict[int, str] = {}


def _ember_public_name(ember: Any, func: Any) -> Optional[str]:
    """The ``ember.<name>`` a private ember function is published as (``_cat_entry`` -> ``cat``;
    of several aliases the one its own name contains, then the shortest)."""
    hit = _PUBLIC_NAMES.get(id(func))
    if hit is not None and getattr(ember, hit, None) is func:
        return hit
    names = [k for k, v in list(vars(ember).items()) if v is func and not k.startswith("_")]
    if not names:
        return None
    own = getattr(func, "__name__", "")
    best = min(names, key=lambda k: (k not in own, len(k), k))
    _PUBLIC_NAMES[id(func)] = best
    return best


def qualified_name(func: Callable[..., Any]) -> str:
    """The dotted name a callable is printed and emitted as.

    Order of preference:

    1. builtins print bare (``getattr``) -- they need no import;
    2. an explicit ``__fx_name__`` attribute (ember's generated bindings set it);
    3. ``ember.<name>`` when ``ember.<name> is func``;
    4. for ember objects living in a private module, the first public module
       on the way up that exposes the same object (``ember.nn.functional``);
    5. ``module.qualname``.
    """
    name = getattr(func, "__name__", None)
    if name is not None and getattr(builtins, name, None) is func:
        return name
    fx_name = getattr(func, "__fx_name__", None)
    if isinstance(fx_name, str):
        return fx_name
    if name is None:
        name = type(func).__name__
    qual = getattr(func, "__qualname__", name)
    module = getattr(func, "__module__", None)
    if is_ember_object(func):
        ember = sys.modules.get("ember")
        if ember is not None and "." not in qual and getattr(ember, name, None) is func:
            return f"ember.{name}"
        op = getattr(func, "_ember_op", None)
        if ember is not None and op is not None and getattr(op, "binding", None) is func:
            return _op_binding_name(ember, op)
        # Tensor methods keep their class: ember.Tensor.add
        if qual.startswith("Tensor."):
            return f"ember.{qual}"
        public = _ember_public_name(ember, func) if ember is not None and "." not in qual and \
            name.startswith("_") else None
        if public is not None:              # ember.cat is ember.ops.shape._cat_entry: torch.cat's spelling
            return f"ember.{public}"
        for cand in _public_module_candidates(module):
            mod = sys.modules.get(cand)
            if mod is not None and "." not in qual and getattr(mod, name, None) is func:
                return f"{cand}.{name}"
    if name == "<lambda>":
        raise RuntimeError(
            "fx: cannot give a lambda a qualified name for printing/codegen; "
            "define it with `def` at module level"
        )
    if module is None:
        raise RuntimeError(f"fx: cannot find the module of {func!r}")
    return f"{module}.{qual}"


def pretty_target(target: Any) -> str:
    """How a node target appears in ``print(graph)``: strings as is,
    ``builtins.getattr``, ``operator.mul``, else :func:`qualified_name`."""
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None)
    module = getattr(target, "__module__", None)
    if name is not None:
        if module == "builtins":
            return f"builtins.{name}"
        if module in ("_operator", "operator"):
            return f"operator.{name}"
    return qualified_name(target)


def type_repr(obj: Any) -> str:
    """A short repr for type annotations (``int``, ``ember.tensor.Tensor``)."""
    if isinstance(obj, type) and not isinstance(obj, types.GenericAlias):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        if is_ember_object(obj):
            return qualified_name(obj)  # ember.Tensor, not ember.tensor.Tensor
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)
