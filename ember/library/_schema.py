"""The schema of a custom operator: from the function's type annotations, or from a string.

Why a schema at all: the dispatcher generates the op's binding (its exact signature, which
arguments are tensors) from a schema record (``ember/ops/registry.py``), autograd needs to
know which arguments take a gradient, and compile needs to know which arguments the op
writes to. torch infers the same thing from the same annotations; its spellings are used
for what the user sees (``op.schema``: ``mylib::foo(Tensor(a0!) x, int n) -> Tensor``).

A :class:`Schema` holds both spellings: ``ember_params`` is the parameter list in
ember's registry syntax (no alias annotations, which ember's parser would read as a
non-tensor type), ``text`` is torch's.
"""
from __future__ import annotations

import ast
import collections.abc
import inspect
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union
from ..ops.registry import _split_params

_NAME_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")

# ember registry type (also torch's schema type) -> what a caller may pass
_SCALAR_TYPES = {"int": int, "float": float, "bool": bool, "str": str}
_TENSORISH = ("Tensor", "Tensor?", "Tensor[]")


@dataclass(frozen=True)
class Param:
    name: str
    type: str                 # registry/torch type: Tensor, Tensor?, Tensor[], int, int[]?, ...
    default: Any              # inspect.Parameter.empty when required
    kwonly: bool
    mutated: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.type in _TENSORISH

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


@dataclass(frozen=True)
class Schema:
    namespace: str
    opname: str
    params: Tuple[Param, ...]
    returns: Tuple[str, ...]          # () for None, ("Tensor",), ("Tensor", "Tensor"), ("Tensor[]",)
    returns_tuple: bool               # declared tuple[...] (a 1-tuple stays a tuple)

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.opname}"

    @property
    def mutated(self) -> Tuple[str, ...]:
        return tuple(p.name for p in self.params if p.mutated)

    def ember_schema(self) -> str:
        """The record's schema in ember's registry syntax (see ``registry.parse_schema``)."""
        parts, star = [], False
        for p in self.params:
            if p.kwonly and not star:
                parts.append("*")
                star = True
            s = f"{p.type} {p.name}"
            if p.has_default:
                s += f"={_default_src(p.default)}"
            parts.append(s)
        return f"{self.opname}({', '.join(parts)}) -> {self._returns_text()}"

    @property
    def text(self) -> str:
        """torch's spelling: ``mylib::foo(Tensor(a0!) x, *, int n=3) -> Tensor``."""
        parts, star = [], False
        for i, p in enumerate(self.params):
            if p.kwonly and not star:
                parts.append("*")
                star = True
            typ = p.type
            if p.mutated:
                base, opt = (typ[:-1], "?") if typ.endswith("?") else (typ, "")
                typ = f"{base}(a{i}!){opt}"
            s = f"{typ} {p.name}"
            if p.has_default:
                s += f"={_default_src(p.default)}"
            parts.append(s)
        return f"{self.qualname}({', '.join(parts)}) -> {self._returns_text()}"

    def __str__(self) -> str:
        """torch's ``str(op._schema)``: the schema text."""
        return self.text

    def _returns_text(self) -> str:
        if not self.returns:
            return "()"
        if len(self.returns) == 1 and not self.returns_tuple:
            return self.returns[0]
        return "(" + ", ".join(self.returns) + ")"


def split_name(name: Any) -> Tuple[str, str]:
    """``"mylib::foo"`` -> ``("mylib", "foo")``; anything else is an error saying what is expected."""
    if not isinstance(name, str):
        raise TypeError(f"custom_op: the name must be a string 'namespace::opname', got {type(name).__name__}")
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"custom_op: the name must look like 'namespace::opname' with both parts Python "
                         f"identifiers (e.g. 'mylib::my_linear'); got {name!r}")
    return m.group(1), m.group(2)


# ---------------------------------------------------------------------------- annotations
def _tensor_cls():
    from ..tensor import Tensor
    return Tensor


def _dtype_device():
    from ..types import device, dtype
    return dtype, device


def _valid_types_text() -> str:
    return ("Tensor, Optional[Tensor], list[Tensor] (or Sequence/List), int, float, bool, str, "
            "Optional[int/float/bool/str], list[int] / list[float] / list[bool] (or Sequence/List) and "
            "their Optional, ember.dtype, ember.device and their Optional")


def _strip_optional(ann: Any) -> Tuple[Any, bool]:
    origin = typing.get_origin(ann)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(ann)) == 2:
            return args[0], True
    return ann, False


def _list_item(ann: Any) -> Optional[Any]:
    """The item type of ``list[X]`` / ``Sequence[X]`` / ``List[X]``; None for anything else."""
    origin = typing.get_origin(ann)
    if origin in (list, collections.abc.Sequence):
        args = typing.get_args(ann)
        if len(args) == 1:
            return args[0]
    return None


def _param_type(ann: Any) -> Optional[str]:
    """The schema type of a parameter annotation, or None when it is not supported."""
    Tensor = _tensor_cls()
    dtype, device = _dtype_device()
    inner, optional = _strip_optional(ann)
    q = "?" if optional else ""
    if inner is Tensor:
        return "Tensor" + q
    item = _list_item(inner)
    if item is not None:
        if item is Tensor:
            return None if optional else "Tensor[]"
        for name, py in _SCALAR_TYPES.items():
            if item is py and name != "str":
                return f"{name}[]{q}"
        return None
    for name, py in _SCALAR_TYPES.items():
        if inner is py:
            return name + q
    if inner is dtype:
        return "ScalarType" + q
    if inner is device:
        return "Device" + q
    return None


def _return_types(ann: Any, fn_desc: str) -> Tuple[Tuple[str, ...], bool]:
    Tensor = _tensor_cls()
    if ann is None or ann is type(None):
        return (), False
    if ann is Tensor:
        return ("Tensor",), False
    if typing.get_origin(ann) is tuple:
        args = typing.get_args(ann)
        if args and Ellipsis not in args and all(a is Tensor for a in args):
            return ("Tensor",) * len(args), True
    if _list_item(ann) is Tensor:
        return ("Tensor[]",), False
    raise ValueError(f"infer_schema({fn_desc}): the return type {_ann_text(ann)} is not supported; a custom op "
                     f"returns Tensor, tuple[Tensor, ...] of a fixed length, list[Tensor], or None (an op that "
                     f"only mutates its arguments)")


def _ann_text(ann: Any) -> str:
    if isinstance(ann, type):
        return ann.__qualname__ if ann.__module__ == "builtins" else f"{ann.__module__}.{ann.__qualname__}"
    return repr(ann)


def _check_default(p_name: str, typ: str, default: Any, fn_desc: str) -> Any:
    """The default as stored in the schema; an error names the parameter when it cannot be."""
    if default is inspect.Parameter.empty:
        return default
    if default is None:
        if not typ.endswith("?"):
            raise ValueError(f"infer_schema({fn_desc}): parameter {p_name} defaults to None, so its type must be "
                             f"Optional[...]; got {typ}")
        return None
    base = typ.rstrip("?")
    ok = False
    if base in ("int", "float", "bool", "str"):
        want = _SCALAR_TYPES[base]
        ok = type(default) is want or (base == "float" and type(default) is int)
        if ok and base == "float" and not math.isfinite(default):
            raise ValueError(f"infer_schema({fn_desc}): parameter {p_name} has the non-finite default "
                             f"{default!r}, which a schema cannot spell; use None and set it in the body")
    elif base in ("int[]", "float[]", "bool[]") and isinstance(default, (list, tuple)):
        want = _SCALAR_TYPES[base[:-2]]
        ok = all(type(v) is want or (want is float and type(v) is int) for v in default)
        default = tuple(default)
    if not ok:
        raise ValueError(f"infer_schema({fn_desc}): parameter {p_name} of type {typ} has the default "
                         f"{default!r} ({type(default).__name__}), which is not supported; defaults may be None "
                         f"(for Optional types), a number/bool/str of the parameter's type, or a list of those")
    return default


def _default_src(v: Any) -> str:
    src = repr(v)
    ast.literal_eval(src)      # (checked: ember's registry parses defaults with literal_eval)
    return src


def _mutated_names(mutates_args: Any, params: List[Tuple[str, str]], fn_desc: str) -> set:
    tensor_names = [n for n, t in params if t in _TENSORISH]
    if isinstance(mutates_args, str):
        if mutates_args == "unknown":
            return set(tensor_names)
        raise ValueError(f"infer_schema({fn_desc}): mutates_args must be 'unknown' or an iterable of argument "
                         f"names (e.g. ('x',) or ()), got the string {mutates_args!r}")
    try:
        names = list(mutates_args)
    except TypeError:
        raise TypeError(f"infer_schema({fn_desc}): mutates_args must be 'unknown' or an iterable of argument "
                        f"names, got {type(mutates_args).__name__}") from None
    known = {n for n, _ in params}
    missing = [n for n in names if n not in known]
    if missing:
        raise ValueError(f"infer_schema({fn_desc}): {sorted(missing)} in mutates_args were not found in the "
                         f"custom op's signature. mutates_args should contain the names of all args that the "
                         f"custom op mutates, or just the string 'unknown' if you don't know.")
    not_tensor = [n for n in names if n not in tensor_names]
    if not_tensor:
        what = "is not a Tensor argument" if len(not_tensor) == 1 else "are not Tensor arguments"
        raise ValueError(f"infer_schema({fn_desc}): mutates_args names {sorted(not_tensor)}, which {what}; only "
                         f"tensors can be mutated")
    return set(names)


def _describe(fn: Callable) -> str:
    try:
        sig = str(inspect.signature(fn))
    except (TypeError, ValueError):
        sig = "(...)"
    return f"{getattr(fn, '__qualname__', fn)}{sig}"


def infer_schema(fn: Callable, *, mutates_args: Union[str, Iterable[str]], op_name: str = "mylib::op") -> Schema:
    """The schema of ``fn`` from its type annotations (see the module docstring).

    Every parameter must be annotated with one of the supported types and the return
    type must be given; positional-only parameters, ``*args`` and ``**kwargs`` are refused
    (the schema names every argument). Errors name the parameter and what was expected."""
    ns, opname = split_name(op_name)
    desc = _describe(fn)
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - an annotation that does not evaluate (a forward reference)
        raise ValueError(f"infer_schema({desc}): the type annotations cannot be evaluated ({type(e).__name__}: "
                         f"{e})") from e
    raw: List[Tuple[str, str, Any, bool]] = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"infer_schema({desc}): parameter {p.name} is {p.kind.description}; custom ops do not "
                             f"support positional-only args, *args or **kwargs (the schema names every argument)")
        if p.name not in hints:
            raise ValueError(f"infer_schema({desc}): parameter {p.name} must have a type annotation (one of: "
                             f"{_valid_types_text()})")
        typ = _param_type(hints[p.name])
        if typ is None:
            raise ValueError(f"infer_schema({desc}): parameter {p.name} has unsupported type "
                             f"{_ann_text(hints[p.name])}. The valid types are: {_valid_types_text()}")
        raw.append((p.name, typ, _check_default(p.name, typ, p.default, desc), p.kind == p.KEYWORD_ONLY))
    if "return" not in hints:
        raise ValueError(f"infer_schema({desc}): the function must have a return type annotation (Tensor, "
                         f"tuple[Tensor, ...], list[Tensor] or None)")
    returns, as_tuple = _return_types(hints["return"], desc)
    mutated = _mutated_names(mutates_args, [(n, t) for n, t, _, _ in raw], desc)
    params = tuple(Param(n, t, d, kw, n in mutated) for n, t, d, kw in raw)
    return Schema(ns, opname, params, returns, as_tuple)


# ---------------------------------------------------------------------------- schema strings
_ALIAS_RE = re.compile(r"\((\w+)(!?)\)")
_KNOWN_TYPES = {"Tensor", "Tensor?", "Tensor[]", "int", "int?", "SymInt", "SymInt?", "float", "float?", "bool",
                "bool?", "str", "str?", "int[]", "int[]?", "SymInt[]", "SymInt[]?", "float[]", "float[]?",
                "bool[]", "bool[]?", "ScalarType", "ScalarType?", "Device", "Device?"}


def parse_schema(fn: Callable, schema: str, *, mutates_args: Union[str, Iterable[str]], op_name: str) -> Schema:
    """A schema from torch's string form ``"(Tensor(a!) x, int n=2) -> (Tensor, Tensor)"``.

    Its parameter names must be ``fn``'s, in order (the implementation is called with them);
    ``(a!)`` marks a mutated tensor, and must agree with ``mutates_args`` unless that is
    ``"unknown"``."""
    ns, opname = split_name(op_name)
    desc = f"schema {schema!r} of {op_name}"
    parsed, returns, as_tuple = _parse_signature(schema, desc)
    fn_params = [p for p in inspect.signature(fn).parameters.values()]
    names = [p.name for p in parsed]
    if names != [p.name for p in fn_params]:
        raise ValueError(f"{desc}: the parameter names {names} must be the implementation's "
                         f"{[p.name for p in fn_params]}, in order")
    if mutates_args != "unknown":
        declared = _mutated_names(mutates_args, [(p.name, p.type) for p in parsed], desc)
        marked = {p.name for p in parsed if p.mutated}
        if declared != marked:
            raise ValueError(f"{desc}: the schema marks {sorted(marked)} as mutated (Tensor(a!)) but mutates_args "
                             f"says {sorted(declared)}; make them agree (or pass mutates_args='unknown')")
    else:
        parsed = [Param(p.name, p.type, p.default, p.kwonly, p.mutated or p.is_tensor) for p in parsed]
    return Schema(ns, opname, tuple(parsed), returns, as_tuple)


def parse_definition(namespace: str, schema: Any) -> Schema:
    """The schema of ``Library(namespace).define(schema)``: torch's full form with the op's
    name in front, ``"foo(Tensor(a!) x, *, int n=2) -> Tensor"``; ``(a!)`` marks what the op
    mutates. Overload names (``foo.out(...)``) are refused: ember ops have one overload,
    ``default``."""
    if not isinstance(schema, str):
        raise TypeError(f"define(): the schema must be a string like 'foo(Tensor x) -> Tensor', got "
                        f"{type(schema).__name__}")
    s = schema.strip()
    cut = s.find("(")
    name = s[:cut].strip() if cut > 0 else ""
    if "::" in name:
        given_ns, _, name = name.partition("::")
        if given_ns != namespace:
            raise ValueError(f"define({schema!r}): the schema names namespace {given_ns!r}, but this library's "
                             f"namespace is {namespace!r}")
    if "." in name:
        raise NotImplementedError(f"ember.library: overload names ({name!r} in {schema!r}) are not supported; "
                                  f"an ember op has the one overload 'default' (define it as "
                                  f"{name.split('.')[0] + '_' + name.split('.', 1)[1]!r} instead)")
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise ValueError(f"define({schema!r}): expected 'opname(params) -> returns' with opname a Python "
                         f"identifier")
    split_name(f"{namespace}::{name}")
    parsed, returns, as_tuple = _parse_signature(s[cut:], f"schema {schema!r}")
    return Schema(namespace, name, tuple(parsed), returns, as_tuple)


def _parse_signature(schema: str, desc: str) -> Tuple[List[Param], Tuple[str, ...], bool]:
    """Parameters and returns of ``"(params) -> returns"``."""
    s = schema.strip()
    if not s.startswith("("):
        raise ValueError(f"{desc}: expected '(params) -> returns' (the name comes from the op's name)")
    depth, end = 0, None
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    if end is None or not s[end + 1:].strip().startswith("->"):
        raise ValueError(f"{desc}: expected '(params) -> returns'")
    params_src, ret_src = s[1:end], s[end + 1:].strip()[2:].strip()
    parsed: List[Param] = []
    kwonly = False
    pieces = [x.strip() for x in _split_params(params_src) if x.strip()]
    for piece in pieces:
        if piece == "*":
            kwonly = True
            continue
        decl, _, dflt = piece.partition("=")
        try:
            typ, pname = decl.strip().rsplit(None, 1)
        except ValueError:
            raise ValueError(f"{desc}: cannot read the parameter {piece!r} (expected 'Type name')") from None
        mutated = any(bang for _, bang in _ALIAS_RE.findall(typ))
        typ = _ALIAS_RE.sub("", typ).replace(" ", "")
        if typ not in _KNOWN_TYPES:
            raise ValueError(f"{desc}: parameter {pname} has the unsupported type {typ!r}; supported: "
                             f"{', '.join(sorted(_KNOWN_TYPES))}")
        typ = typ.replace("SymInt", "int")
        default = inspect.Parameter.empty
        if dflt.strip():
            txt = dflt.strip()
            default = None if txt == "None" else (txt == "True" if txt in ("True", "False") else
                                                   _literal(txt, pname, desc))
            default = _check_default(pname, typ, default, desc)
        parsed.append(Param(pname, typ, default, kwonly, mutated))
    names = [p.name for p in parsed]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{desc}: parameter name(s) {dup} appear more than once")
    rets = ret_src.strip()
    if re.search(r"Tensor(\[\])?\(\w+!?\)", rets):
        raise NotImplementedError(f"{desc}: returns {rets!r}; ember.library: outputs that alias an input "
                                  f"(Tensor(a)) are not supported -- an op returns new tensors")
    if rets == "()":
        returns, as_tuple = (), False
    elif rets.startswith("("):
        returns, as_tuple = tuple(r.strip() for r in rets[1:-1].split(",") if r.strip()), True
    else:
        returns, as_tuple = (rets,), False
    if any(r not in ("Tensor", "Tensor[]") for r in returns) or ("Tensor[]" in returns and len(returns) > 1):
        raise ValueError(f"{desc}: returns {rets!r}; a custom op returns Tensor, (Tensor, ...), Tensor[] or ()")
    return parsed, returns, as_tuple


def signature_of(schema: Schema) -> inspect.Signature:
    """The Python signature a call of an op with this schema binds against (what
    ``inspect.signature(op)`` shows for an op defined from a schema string)."""
    out = []
    for p in schema.params:
        kind = inspect.Parameter.KEYWORD_ONLY if p.kwonly else inspect.Parameter.POSITIONAL_OR_KEYWORD
        out.append(inspect.Parameter(p.name, kind, default=p.default))
    return inspect.Signature(out)


def _literal(txt: str, pname: str, desc: str) -> Any:
    try:
        v = ast.literal_eval(txt)
    except (ValueError, SyntaxError):
        raise ValueError(f"{desc}: cannot read the default {txt!r} of parameter {pname}") from None
    return tuple(v) if isinstance(v, list) else v
