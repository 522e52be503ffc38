"""``ember.parse_schema`` and the schema objects it returns (torch's ``FunctionSchema``,
``Argument``, ``_AliasInfo``).

Why: code that inspects operators -- custom-op registration helpers, dispatch-mode tools, export
passes -- parses torch's schema strings (``"aten::add.Tensor(Tensor self, Tensor other, *,
Scalar alpha=1) -> Tensor"``) and reads names, types, defaults, keyword-only flags and alias
annotations from the result. ember's own op registry speaks a different, smaller syntax, so this
module reads torch's syntax itself: a recursive-descent parser over the argument list, with
torch's normalisations (``int[1] d=0`` prints as ``[0]``, ``Scalar`` is the type ``number``,
``ScalarType``/``Layout``/``MemoryFormat`` are ``int``).
"""
from __future__ import annotations

import ast
import re

__all__ = ["parse_schema", "FunctionSchema", "Argument", "AliasInfo", "SchemaType"]

# torch's schema base types -> the type name torch's Argument.type prints
_BASE_TYPES = {"Tensor": "Tensor", "int": "int", "SymInt": "int", "float": "float", "bool": "bool",
               "str": "str", "Scalar": "number", "ScalarType": "int", "Layout": "int", "MemoryFormat": "int",
               "Device": "Device", "Generator": "Generator", "Storage": "Storage", "Stream": "Stream",
               "complex": "complex", "Any": "Any", "SymBool": "bool", "Dimname": "str", "QScheme": "QScheme",
               "t": "t", "GraphModule": "GraphModule"}
# memory formats and layouts written by name as defaults: torch stores their enum values
_ENUM_DEFAULTS = {"contiguous_format": 0, "preserve_format": 1, "channels_last": 2, "channels_last_3d": 3,
                  "strided": 0, "sparse_coo": 1, "sparse_csr": 2, "Mean": 1, "Sum": 2, "None": None,
                  "long": 4, "float": 6, "double": 7}
_LISTABLE = {"int", "SymInt", "float", "bool", "Tensor", "Scalar", "str", "Device", "complex", "Dimname",
             "SymBool", "t", "Any", "ScalarType"}


class SchemaType:
    """An argument's type: ``str()`` is torch's spelling (``Tensor``, ``List[int]``,
    ``Optional[float]``, ``number`` for Scalar, ``List[Optional[Tensor]]`` for ``Tensor?[]``,
    ``Dict[str, t]`` for ``Dict(str, t)``)."""

    __slots__ = ("base", "is_list", "optional", "elem_optional", "_text")

    def __init__(self, base, is_list=False, optional=False, elem_optional=False, text=None):
        self.base, self.is_list, self.optional, self.elem_optional = base, is_list, optional, elem_optional
        t = text if text is not None else _BASE_TYPES[base]
        if elem_optional:
            t = f"Optional[{t}]"
        if is_list:
            t = f"List[{t}]"
        self._text = f"Optional[{t}]" if optional else t

    def __str__(self):
        return self._text

    def __repr__(self):
        return self._text

    def __eq__(self, other):
        return isinstance(other, SchemaType) and str(self) == str(other)

    def __hash__(self):
        return hash(self._text)


class AliasInfo:
    """An alias annotation (``Tensor(a!)``, ``Tensor(a -> *)``): the alias sets before and after
    the call, and whether the op writes to the tensor."""

    __slots__ = ("before_set", "after_set", "is_write")

    def __init__(self, before_set, after_set, is_write):
        self.before_set, self.after_set, self.is_write = set(before_set), set(after_set), is_write

    def _text(self):
        before = "|".join(sorted(self.before_set))
        text = before + ("!" if self.is_write else "")
        if self.after_set != self.before_set:
            text += " -> " + "|".join(sorted(self.after_set))
        return f"({text})"

    def __eq__(self, other):
        return isinstance(other, AliasInfo) and (self.before_set, self.after_set, self.is_write) == \
            (other.before_set, other.after_set, other.is_write)

    __hash__ = None


_NO_DEFAULT = object()


class Argument:
    """One argument (or return) of a schema: ``name``, ``type``, ``default_value``
    (``None`` when there is none: see ``has_default_value()``), ``kwarg_only``, ``N`` (a fixed
    list length, ``int[2]``), ``alias_info``, ``is_out`` / ``is_write``."""

    __slots__ = ("name", "type", "real_type", "N", "_default", "kwarg_only", "alias_info", "is_out", "_type_text",
                 "_default_text")

    def __init__(self, name, type, N, default, kwarg_only, alias_info, type_text, default_text, is_out=False):
        self.name, self.type, self.real_type, self.N = name, type, type, N
        self._default, self.kwarg_only, self.alias_info = default, kwarg_only, alias_info
        self.is_out = is_out
        self._type_text, self._default_text = type_text, default_text

    @property
    def default_value(self):
        return None if self._default is _NO_DEFAULT else self._default

    def has_default_value(self):
        return self._default is not _NO_DEFAULT

    @property
    def is_write(self):
        return self.alias_info is not None and self.alias_info.is_write

    def _text(self):
        text = self._type_text
        if self.name:
            text += " " + self.name
        if self._default_text is not None:
            text += "=" + self._default_text
        return text

    def __eq__(self, other):
        return isinstance(other, Argument) and self._text() == other._text() and self.kwarg_only == other.kwarg_only

    __hash__ = None


class FunctionSchema:
    """A parsed operator schema: ``name`` (with its namespace), ``overload_name``, ``arguments``,
    ``returns``, ``is_mutable``; ``str()`` is the schema text (torch's normal form)."""

    __slots__ = ("name", "overload_name", "arguments", "returns", "_vararg", "_varret", "_returns_tuple")

    def __init__(self, name, overload_name, arguments, returns, vararg=False, varret=False, returns_tuple=False):
        self.name, self.overload_name = name, overload_name
        self.arguments, self.returns = list(arguments), list(returns)
        self._vararg, self._varret, self._returns_tuple = vararg, varret, returns_tuple

    @property
    def is_mutable(self):
        return any(a.is_write for a in self.arguments)

    def _is_view_op(self):
        return any(a.alias_info is not None and not a.alias_info.is_write for a in self.arguments)

    def __str__(self):
        parts, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(a._text())
        if self._vararg:
            parts.append("...")
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        if self._varret:
            rets = "..."
        elif len(self.returns) == 1 and not self._returns_tuple:
            rets = self.returns[0]._text()
        else:
            rets = "(" + ", ".join(r._text() for r in self.returns) + ")"
        return f"{name}({', '.join(parts)}) -> {rets}"

    def __repr__(self):
        return str(self)

    def __eq__(self, other):
        return isinstance(other, FunctionSchema) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def is_backward_compatible_with(self, old):
        """Whether calls written for ``old`` still work: same name and returns, ``old``'s arguments
        first in the same order and types, any new ones with defaults."""
        if not isinstance(old, FunctionSchema):
            raise TypeError("is_backward_compatible_with(): expected a FunctionSchema")
        if (self.name, self.overload_name) != (old.name, old.overload_name) or \
                [str(r.type) for r in self.returns] != [str(r.type) for r in old.returns]:
            return False
        if len(self.arguments) < len(old.arguments):
            return False
        for new, o in zip(self.arguments, old.arguments):
            if new.name != o.name or new.type != o.type or new.kwarg_only != o.kwarg_only:
                return False
        return all(a.has_default_value() for a in self.arguments[len(old.arguments):])


# ---------------------------------------------------------------------- parsing
class _SchemaError(RuntimeError):
    pass


def _err(text, pos, what):
    return RuntimeError(f"\n{what}:\n{text}\n{' ' * pos}~ <--- HERE\n")


_TYPE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)")
_ALIAS_RE = re.compile(r"\(\s*([A-Za-z*|]+)\s*(!?)\s*(?:->\s*([A-Za-z*|]+)\s*)?\)")


def _split_top(text, sep=","):
    """Split ``text`` at top-level ``sep`` (not inside brackets, parentheses or quotes)."""
    parts, depth, cur, quote = [], 0, [], None
    escaped = False
    for ch in text:
        if quote:
            cur.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


# type variables and opaque types torch's own schemas use (``Dict(str, t)``, ``t1``, ``AnyEnumType``)
_OPAQUE_TYPES = {"t1", "t2", "tVal", "AnyEnumType", "AnyClassType", "Capsule", "QScheme"}
# ``Name(inner)`` containers: torch prints them ``Name[inner]``
_CONTAINERS = ("Dict", "Future", "RRef", "Await")


def _type_head(text, full, pos):
    """(the type's printed name, its base for SchemaType or None, the rest) of the leading type
    name: a base type, an opaque type, a ``__torch__.`` class, or a container ``Dict(K, V)``."""
    if text.startswith("("):              # a tuple type: (Tensor, tVal)
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        printed = [_type_head(x.strip(), full, pos)[0] for x in _split_top(text[1:i])]
        return f"Tuple[{', '.join(printed)}]", None, text[i + 1:]
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", text)
    if not m:
        raise _err(full, pos, "unknown type specifier. Common valid schema types include Tensor, SymInt, int, float, "
                              "bool, Scalar")
    word, rest = m.group(0), text[m.end():]
    if word in _CONTAINERS and rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        inner = [x.strip() for x in _split_top(rest[1:i])]
        printed = [_type_head(x, full, pos)[0] for x in inner]
        return f"{word}[{', '.join(printed)}]", None, rest[i + 1:]
    if word in _BASE_TYPES:
        return _BASE_TYPES[word], word, rest
    if word in _OPAQUE_TYPES or word.startswith("__torch__."):
        return word, None, rest
    raise _err(full, pos, "unknown type specifier. Common valid schema types include Tensor, SymInt, int, float, "
                          "bool, Scalar")


def _parse_type(text, full, pos):
    """(SchemaType, N, alias info, the canonical type text, the rest of ``text``)."""
    printed, base, rest = _type_head(text, full, pos)
    alias = None
    am = _ALIAS_RE.match(rest)
    if am:
        before = am.group(1).split("|")
        after = am.group(3).split("|") if am.group(3) else before
        alias = AliasInfo(before, after, am.group(2) == "!")
        rest = rest[am.end():]
    elem_optional = False
    if re.match(r"\?\[\d*\]", rest):          # Tensor?[]: a list of optional tensors
        elem_optional, rest = True, rest[1:]
    is_list, n, optional = False, None, False
    lm = re.match(r"\[(\d*)\]", rest)
    if lm:
        if base is not None and base not in _LISTABLE:
            raise _err(full, pos, "lists are only supported for float, int and complex types")
        is_list, n = True, (int(lm.group(1)) if lm.group(1) else None)
        rest = rest[lm.end():]
        if alias is not None:          # Tensor(a!)[]: the elements alias; the list itself is in no set
            alias = AliasInfo((), (), alias.is_write)
        am2 = _ALIAS_RE.match(rest)       # Tensor[](a) is not torch's spelling, but Tensor(a)[] is
        if am2 and alias is None:
            alias = AliasInfo(am2.group(1).split("|"), am2.group(1).split("|"), am2.group(2) == "!")
            rest = rest[am2.end():]
    if rest.startswith("?"):
        optional = True
        rest = rest[1:]
    type_text = text[:len(text) - len(rest)]
    typ = SchemaType(base, is_list, optional, elem_optional, text=None if base is not None else printed)
    return typ, n, alias, type_text.strip(), rest


def _parse_default(txt, typ, n, full, pos):
    """(the Python value, torch's normal text) of a default."""
    t = txt.strip()
    if t == "None":
        return None, "None"
    if t in ("True", "False"):
        v = t == "True"
        if typ.is_list and n:
            return [v] * n, "[" + ", ".join([t] * n) + "]"
        return v, t
    if t.startswith(("'", '"')):
        return ast.literal_eval(t), '"' + t[1:-1] + '"'
    if t.startswith("["):
        items = [x.strip() for x in _split_top(t[1:-1])] if t[1:-1].strip() else []
        vals = [_parse_default(x, SchemaType(typ.base), None, full, pos)[0] for x in items]
        return vals, "[" + ", ".join(items) + "]"
    if t in _ENUM_DEFAULTS:
        v = _ENUM_DEFAULTS[t]
        return v, str(v)
    if t in ("inf", "-inf", "nan"):
        raise _err(full, pos, "expected number but found 'ident' here")
    try:
        v = int(t)
    except ValueError:
        try:
            v = float(t)
        except ValueError:
            raise _err(full, pos, f"expected a default value, got {t!r}") from None
    if typ.is_list and n:         # int[2] x=1 is [1, 1]; torch prints an int[N>1]'s as written
        if typ.base == "int" and n > 1:
            return [v] * n, t
        return [v] * n, "[" + ", ".join([t] * n) + "]"
    if typ.base in ("float",) and isinstance(v, int):
        return float(v), t
    return v, t


def _parse_args(body, full, offset, *, returns=False):
    args, kw = [], False
    seen_default = False
    for raw in _split_top(body):
        piece = raw.strip()
        pos = offset + body.find(raw) + (len(raw) - len(raw.lstrip()))
        if piece == "*":
            kw = True
            continue
        if piece == "...":
            continue
        default = _NO_DEFAULT
        default_text = None
        if "=" in piece and not returns:
            piece, dtext = piece.split("=", 1)
            piece = piece.strip()
        else:
            dtext = None
        typ, n, alias, type_text, rest = _parse_type(piece, full, pos)
        name = rest.strip()
        if dtext is not None:
            default, default_text = _parse_default(dtext, typ, n, full, pos)
            seen_default = True
        elif seen_default and not kw and not returns:
            raise RuntimeError(f"Non-default positional argument follows default argument. Parameter {name} in "
                               f"{full}")
        is_out = kw and alias is not None and alias.is_write
        args.append(Argument(name, typ, n, default, kw, alias, type_text, default_text, is_out=is_out))
    return args


def parse_schema(schema: str) -> FunctionSchema:
    """Parse an operator schema in torch's syntax (``ns::name.overload(args) -> returns``)."""
    if not isinstance(schema, str):
        raise TypeError(f"parse_schema(): argument 'schema' (position 1) must be str, not {type(schema).__name__}")
    text = schema.strip()
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)(?:\.([A-Za-z0-9_]+))?\s*\(", text)
    if not m:
        raise _err(text, 0, "expected ident but found something else here")
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                break
    else:
        raise _err(text, len(text), "expected ')' but found 'eof' here")
    if depth != 0:
        raise _err(text, len(text), "expected ')' but found 'eof' here")
    body = text[m.end():i]
    arguments = _parse_args(body, text, m.end())
    vararg = body.strip().endswith("...")
    tail = text[i + 1:].strip()
    if not tail.startswith("->"):
        raise _err(text, i + 1, "expected '->' but found something else here")
    rets_text = tail[2:].strip()
    varret = rets_text == "..."
    returns_tuple = rets_text.startswith("(")
    if varret:
        returns = []
    elif returns_tuple:
        returns = _parse_args(rets_text[1:-1], text, len(text) - len(rets_text) + 1, returns=True)
    else:
        returns = _parse_args(rets_text, text, len(text) - len(rets_text), returns=True)
    return FunctionSchema(m.group(1), m.group(2) or "", arguments, returns, vararg, varret, returns_tuple)
