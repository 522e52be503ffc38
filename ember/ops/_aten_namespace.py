"""``ember.ops.aten``: ember's registered ops under torch's ``torch.ops.aten`` spelling.

Why. Code written against torch's dispatcher names ops by overload: ``torch.ops.aten.add.Tensor``,
``aten.sum.dim_IntList``, ``aten.div.Tensor_mode``; decompositions, pattern matchers and
``__torch_dispatch__`` handlers compare ``func`` with them and read ``func._schema``, ``func.tags``,
``func.overloadpacket``. ``ember.ops.aten.<op>`` is an :class:`OpOverloadPacket` whose overloads
are torch's (the table ``_aten_schemas.json``, generated from torch once by
``_aten_schemas_gen.py``: ember never imports torch). Each :class:`OpOverload` carries torch's
schema (a ``FunctionSchema``) and tags, and calling it runs ember's op with that overload's
argument conventions: its arguments are bound by the overload's schema and passed to ember's op
by name (``aten.add.Scalar(t, 2)``, ``aten.sum.dim_IntList(t, [0], True)``, ``.out`` overloads
through ember's ``out=``). An overload whose arguments ember's op cannot take (named dimensions,
a TorchScript ``int + int``) raises NotImplementedError naming it.

``.default`` is ember's op itself in every packet: the dispatcher hands it to
``__torch_dispatch__`` handlers with ember's arguments (``ops/registry._subclass_dispatch``), so
it calls ember's binding as is; its schema is torch's ``default`` one where ember's op takes
those arguments, else ember's own schema in torch's syntax.
"""
from __future__ import annotations

import json
import os
from typing import Dict

from .registry import OPS, K_OTHER, K_TENSOR, K_TENSOR_LIST, K_TENSOR_OR_SCALAR, _REQUIRED

_TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_aten_schemas.json")
_TABLE = None


def _table():
    """torch's aten overload table: ``{"ops": {op: {overload: [schema tail, [tag index...]]}},
    "tags": [names]}`` (read on first use)."""
    global _TABLE
    if _TABLE is None:
        with open(_TABLE_PATH) as f:
            _TABLE = json.load(f)
    return _TABLE


def torch_overloads(name: str) -> Dict[str, list]:
    """torch's overloads of ``aten::<name>`` (``{}`` when torch has no such op), in torch's order."""
    return _table()["ops"].get(name, {})


def torch_schema_text(name: str, overload: str) -> str:
    """torch's schema string of ``aten::<name>.<overload>``."""
    tail = _table()["ops"][name][overload][0]
    return f"aten::{name}" + ("" if overload == "default" else f".{overload}") + tail


def _tags_of(indices):
    from .._generic_stream import Tag
    names = _table()["tags"]
    return [Tag[names[i]] for i in indices]


# ember's op tags that are torch tags too (an ember-only overload's ``tags``)
_EMBER_TAGS = ("pointwise", "inplace", "reduction", "nondeterministic_seeded", "dynamic_output_shape",
               "data_dependent_output")


def _ember_schema_text(op) -> str:
    """ember's schema of ``op`` in torch's syntax: ``Tensor|Scalar`` is ``Tensor``, ``Any`` stays,
    several returns are a tuple."""
    params = op.schema[op.schema.index("(") + 1:]
    depth = 0
    for i, ch in enumerate(params):
        depth += ch in "(["
        depth -= ch in ")]"
        if depth < 0:
            break
    params = params[:i].replace("Tensor|Scalar", "Tensor")
    rets = op.returns.replace("Tensor|Scalar", "Tensor")
    if "," in rets and not rets.startswith("("):
        rets = f"({rets})"
    name = op.name
    return f"aten::{name}({params}) -> {rets}"


def _parse(text):
    from .._function_schema import parse_schema
    return parse_schema(text)


# -------------------------------------------------------------------- argument conventions
# A torch overload runs another ember op than the packet's (``max.dim`` is ember's ``max_dim``).
_REDIRECT = {
    ("max", "dim"): "max_dim", ("min", "dim"): "min_dim", ("max", "other"): "maximum",
    ("min", "other"): "minimum", ("median", "dim"): "median_dim", ("nanmedian", "dim"): "nanmedian_dim",
    ("view", "dtype"): "view_dtype", ("max", "dim_max"): "max_dim", ("min", "dim_min"): "min_dim",
}
# torch's argument name -> ember's, where ember's op names a parameter differently
_ALIASES = {"self": ("input",), "input": ("self",), "other": ("exponent",), "exponent": ("other",)}

# torch arguments ember's ops leave out, which a call may pass with their default value
_DROPPABLE = frozenset(("layout", "pin_memory", "non_blocking", "memory_format"))

# schema base types and the ember parameter kinds that take them
_TENSORISH = {K_TENSOR, K_TENSOR_OR_SCALAR}
_NUMBERS = {"Scalar", "int", "SymInt", "float", "bool", "complex", "SymBool"}


def _fits(arg, param) -> bool:
    """Whether ember's parameter ``param`` takes what torch's argument ``arg`` passes."""
    t = arg.type
    if t.base is None or t.base in ("Dimname", "Storage", "Stream", "Any", "t", "GraphModule"):
        return t.base == "Any" and param.kind == K_OTHER
    if t.base == "Tensor":
        if t.is_list:
            return param.kind == K_TENSOR_LIST or (param.kind == K_OTHER and param.type.rstrip("?") in ("Any",))
        return param.kind in _TENSORISH
    if t.is_list:
        return param.kind == K_OTHER
    if t.base in _NUMBERS:
        return param.kind in (K_TENSOR_OR_SCALAR, K_OTHER)
    return param.kind == K_OTHER


class _Plan:
    """How one torch overload's call becomes a call of ember's op: positional names, the torch
    name -> ember name map, required arguments, the out arguments."""

    __slots__ = ("fn", "positional", "names", "required", "outs", "schema_text", "qualname", "dropped", "out_kw")

    def __init__(self, fn, positional, names, required, outs, schema_text, qualname, dropped, out_kw):
        self.fn, self.positional, self.names, self.required = fn, positional, names, required
        self.outs, self.schema_text, self.qualname = outs, schema_text, qualname
        self.dropped = dropped      # torch arguments ember's op lacks: {name: default}, only defaults run
        self.out_kw = out_kw        # whether ember's binding takes out= itself

    def __call__(self, *args, **kwargs):
        if len(args) > len(self.positional):
            raise RuntimeError(f"{self.qualname}() expected at most {len(self.positional)} argument(s) but received "
                               f"{len(args)} argument(s). Declaration: {self.schema_text}")
        kw = {}
        for name, a in zip(self.positional, args):
            kw[name] = a
        out = None
        for k, v in kwargs.items():
            if k in self.outs:
                out = out or {}
                out[k] = v
                continue
            if k not in self.names:
                raise RuntimeError(f"Unknown keyword argument '{k}' for operator '{self.qualname}'. Schema: "
                                   f"{self.schema_text}")
            if k in kw:
                raise RuntimeError(f"Argument '{k}' specified both as positional and keyword argument. Schema: "
                                   f"{self.schema_text}")
            kw[k] = v
        for r in self.required:
            if r not in kw:
                raise RuntimeError(f"{self.qualname.split('.')[0]}() is missing value for argument '{r}'. Declaration: "
                                   f"{self.schema_text}")
        call = {}
        for k, v in kw.items():
            if k in self.dropped:
                if not _is_default(k, v, self.dropped[k]):
                    raise NotImplementedError(f"ember.ops.aten.{self.qualname[6:]}: ember's op takes no '{k}' "
                                              f"argument; only its default ({self.dropped[k]!r}) runs, got {v!r}")
                continue
            call[self.names[k]] = v
        if self.outs:
            missing = [o for o in self.outs if not out or o not in out]
            if missing:
                raise RuntimeError(f"{self.qualname.split('.')[0]}() is missing value for argument '{missing[0]}'. Declaration: "
                                   f"{self.schema_text}")
            o = out[self.outs[0]] if len(self.outs) == 1 else tuple(out[o] for o in self.outs)
            if not self.out_kw:
                from ._out import call_with_out
                return call_with_out(self.qualname[6:].split(".")[0], self.fn, (), call, o,
                                     None if len(self.outs) == 1 else len(self.outs))
            call["out"] = o
        return self.fn(**call)


def _is_default(name, value, default):
    """Whether ``value`` for torch's argument ``name`` (one ember's op lacks) is what ember does
    anyway: the schema's default, or torch's spelling of it (``layout=torch.strided``,
    ``pin_memory=False``, ``memory_format=torch.preserve_format``)."""
    if value is None or value is default or (type(value) is type(default) and value == default):
        return True
    if name == "layout":
        return str(value) == "ember.strided"
    if name in ("pin_memory", "non_blocking"):
        return value is False
    if name == "memory_format":
        return str(value) == "ember.preserve_format"
    return False


def _plan(op, schema, qualname):
    """A :class:`_Plan` running ember's ``op`` for torch's overload ``schema``, or the reason it
    cannot (a string)."""
    params = {p.name: p for p in op.params}
    names, positional, required, outs, dropped = {}, [], [], [], {}
    for a in schema.arguments:
        if a.is_out or (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write):
            outs.append(a.name)
            continue
        p = params.get(a.name)
        if p is None:
            p = next((params[n] for n in _ALIASES.get(a.name, ()) if n in params), None)
        if p is None and a.has_default_value() and a.name in _DROPPABLE:
            dropped[a.name] = a.default_value
            names[a.name] = None
            if not a.kwarg_only:
                positional.append(a.name)
            continue
        if p is None:
            return f"ember's {op.name} has no argument '{a.name}'"
        if not _fits(a, p):
            return f"ember's {op.name} takes no {a.type} for '{a.name}'"
        names[a.name] = p.name
        if not a.kwarg_only:
            positional.append(a.name)
        if not a.has_default_value():
            required.append(a.name)
    covered = {v for v in names.values() if v is not None}
    for p in op.params:
        if p.name not in covered and p.default is _REQUIRED:
            return f"ember's {op.name} needs '{p.name}', which the overload does not pass"
    code = op.binding.__code__
    out_kw = "out" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    if outs and (not schema.returns or len(outs) != len(schema.returns)):
        return "the overload's outs are not its returns"
    return _Plan(op.binding, tuple(positional), names, tuple(required), tuple(outs), str(schema), qualname,
                 dropped, out_kw)


def _default_runner(op, plan):
    """What ``aten.<op>.default`` runs: ember's binding as is (the dispatcher hands handlers the
    overload with ember's own arguments), accepting besides torch's arguments that ember's op
    lacks (``layout=``, ``pin_memory=``, ...) at their default values."""
    if not plan.dropped:
        return op.binding
    binding, dropped = op.binding, plan.dropped

    def run(*args, **kwargs):
        for k in [k for k in kwargs if k in dropped]:
            v = kwargs.pop(k)
            if not _is_default(k, v, dropped[k]):
                raise NotImplementedError(f"ember.ops.aten.{op.name}.default: ember's op takes no '{k}' argument; "
                                          f"only its default ({dropped[k]!r}) runs, got {v!r}")
        return binding(*args, **kwargs)
    run.__name__ = op.name
    return run


class OpOverload:
    """One overload of an aten op (``aten.add.Tensor``): callable, with torch's ``_schema``
    (a FunctionSchema), ``tags``, ``name()``, ``overloadpacket``. ``op`` is ember's op it runs
    (``None`` when ember has no implementation of the overload)."""

    __slots__ = ("op", "_overloadpacket", "__name__", "__qualname__", "_overloadname", "_opname", "_schema_text",
                 "_schema_obj", "_tag_idx", "_run", "_why", "__weakref__")

    def __init__(self, packet, overload, op, schema_text, tag_idx, run, why=None):
        self.op = op
        self._overloadpacket = packet
        self._opname = packet.__name__
        self._overloadname = overload
        self.__name__ = f"{self._opname}.{overload}"
        self.__qualname__ = f"aten::{self._opname}" + ("" if overload == "default" else f".{overload}")
        self._schema_text, self._schema_obj, self._tag_idx = schema_text, None, tag_idx
        self._run, self._why = run, why

    @property
    def overloadpacket(self):
        return self._overloadpacket

    @property
    def namespace(self) -> str:
        return "aten"

    @property
    def _schema(self):
        if self._schema_obj is None:
            self._schema_obj = _parse(self._schema_text)
        return self._schema_obj

    @property
    def tags(self):
        if isinstance(self._tag_idx, tuple):        # ember's own tags (an overload torch lacks)
            from .._generic_stream import Tag
            return [Tag[n] for n in self._tag_idx]
        return _tags_of(self._tag_idx)

    @property
    def is_view(self) -> bool:
        return self._schema._is_view_op()

    def name(self) -> str:
        return self.__qualname__

    @property
    def __fx_name__(self) -> str:
        """How generated code and printed graphs spell it: ``ember.ops.aten.sum.dim_IntList``."""
        return f"ember.ops.aten.{self._opname}.{self._overloadname}"

    def __call__(self, *args, **kwargs):
        run = self._run
        if run is None:
            raise NotImplementedError(f"ember.ops.aten.{self.__name__} ({self._schema_text}): ember has no "
                                      f"implementation of this overload: {self._why}")
        return run(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='aten.{self._opname}', overload='{self._overloadname}')>"

    def __str__(self):
        return f"aten.{self.__name__}"

    def __reduce__(self):
        return (_overload_by_name, (self._opname, self._overloadname))


def _overload_by_name(name, overload):
    return getattr(getattr(aten, name), overload)


class OpOverloadPacket:
    """An op with its overloads: ``ember.ops.aten.add`` (``.Tensor``, ``.Scalar``, ``.out``, ...,
    ``.default``). Calling the packet runs ember's op (its binding sorts out the arguments)."""

    __slots__ = ("op", "__name__", "_qualified_op_name", "_overloads", "_cache", "__weakref__")

    def __init__(self, op):
        self.op = op
        self.__name__ = op.name
        self._qualified_op_name = f"aten::{op.name}"
        names = list(torch_overloads(op.name))
        if "default" not in names:
            names.append("default")
        self._overloads = names
        self._cache = {}

    @property
    def default(self):
        return self._overload("default")

    def overloads(self):
        return list(self._overloads)

    @property
    def _schema(self):
        return self.default._schema

    def _overload(self, name):
        o = self._cache.get(name)
        if o is None:
            o = self._cache[name] = self._make(name)
        return o

    def _make(self, name):
        op, table = self.op, torch_overloads(self.op.name)
        if name == "default":
            entry = table.get("default")
            text, tags = None, None
            if entry is not None:
                text = torch_schema_text(op.name, "default")
                if isinstance(_plan(op, _parse(text), f"aten::{op.name}"), str):
                    text = None                    # torch's default is another op (add(Scalar a, Scalar b))
                else:
                    tags = entry[1]
            run = op.binding
            if text is None:
                text = _ember_schema_text(op)
                tags = tuple(t for t in _EMBER_TAGS if t in op.tags)
            else:
                run = _default_runner(op, _plan(op, _parse(text), f"aten::{op.name}"))
            return OpOverload(self, "default", op, text, tags, run)
        text = torch_schema_text(op.name, name)
        qual = f"aten::{op.name}.{name}"
        target = op
        redirect = _REDIRECT.get((op.name, name))
        if redirect is not None and OPS.get(redirect) is not None:
            target = OPS[redirect]
        plan = _plan(target, _parse(text), qual)
        if isinstance(plan, str):
            return OpOverload(self, name, None, text, table[name][1], None, plan)
        return OpOverload(self, name, target, text, table[name][1], plan)

    def __getattr__(self, name):
        if name.startswith("__") or name not in self._overloads:
            raise AttributeError(f"The underlying op of 'aten.{self.__name__}' has no overload name '{name}'")
        return self._overload(name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._overloads))

    def __call__(self, *args, **kwargs):
        return self.op.binding(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverloadPacket(op='aten.{self.op.name}')>"

    def __str__(self):
        return f"aten.{self.op.name}"


class PythonOverload:
    """``aten.<name>.default`` for what torch dispatches as an op but ember runs as Python over its
    ops (``Tensor.item()`` -- torch's ``_local_scalar_dense`` --, ``zeros_like``, ``uniform_`` ...):
    not an op record, so no dispatcher path reaches it; it exists for ``__torch_dispatch__``
    wrapper subclasses, whose handler gets it (``ops/registry._python_dispatch``). Calling it runs
    the Python function."""

    op = None

    def __init__(self, name: str, fn, overload: str = "default", packet=None):
        self._overloadname = overload
        self.__name__ = f"{name}.{overload}"
        self._fn = fn
        self.overloadpacket = packet if packet is not None else _PythonPacket(name, self)

    def name(self) -> str:
        return f"aten::{self.overloadpacket.__name__}" + ("" if self._overloadname == "default"
                                                         else f".{self._overloadname}")

    @property
    def __fx_name__(self) -> str:
        """How generated code and printed graphs spell it: ``ember.ops.aten.zeros_like.default``."""
        return f"ember.ops.aten.{self.__name__}"

    @property
    def _schema(self):
        return _parse(torch_schema_text(self.overloadpacket.__name__, self._overloadname))

    @property
    def tags(self):
        entry = torch_overloads(self.overloadpacket.__name__).get(self._overloadname)
        return _tags_of(entry[1]) if entry is not None else []

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"<OpOverload(op='aten.{self.overloadpacket.__name__}', overload='{self._overloadname}')>"

    def __str__(self):
        return f"aten.{self.__name__}"

    def __reduce__(self):
        return (_python_overload_by_name, (self.overloadpacket.__name__, self._overloadname))


class _PythonPacket:
    def __init__(self, name, default):
        self.__name__ = name
        self.default = default
        self._more = {}

    def __call__(self, *args, **kwargs):
        return self.default(*args, **kwargs)

    def __getattr__(self, overload):
        more = self.__dict__.get("_more", {})
        if overload in more:
            return more[overload]
        name = self.__dict__.get("__name__")
        if not overload.startswith("__") and name is not None and (name, overload) in _factory_overloads():
            from ..fx.experimental._factory_calls import overload_for
            return overload_for(name, overload)
        raise AttributeError(f"The underlying op of 'aten.{self.__dict__.get('__name__')}' has no overload name "
                             f"'{overload}'")

    def __str__(self):
        return f"aten.{self.__name__}"


def _factory_overloads():
    """(name, overload) of the factories user graphs record whole (``ember.fx.experimental.
    _factory_calls``): torch's overloads of those ops."""
    global _FACTORY_OVERLOADS
    if _FACTORY_OVERLOADS is None:
        from ..fx.experimental._factory_calls import KNOWN
        _FACTORY_OVERLOADS = frozenset((n, o) for n in KNOWN for o in torch_overloads(n))
    return _FACTORY_OVERLOADS


_FACTORY_OVERLOADS = None


def _python_overload_by_name(name, overload):
    if name not in _PYTHON_OVERLOADS:
        # a recorded factory (``aten.zeros_like.default``) of a graph loaded in a fresh process
        from ..fx.experimental._factory_calls import overload_for
        return overload_for(name, overload)
    return getattr(_PYTHON_OVERLOADS[name].overloadpacket, overload)


_PYTHON_OVERLOADS: Dict[str, PythonOverload] = {}


def python_overload(name: str, fn, overload: str = "default") -> PythonOverload:
    """The one :class:`PythonOverload` named ``name`` (and ``overload``; made on first use,
    running ``fn``)."""
    o = _PYTHON_OVERLOADS.get(name)
    if o is None:
        o = _PYTHON_OVERLOADS[name] = PythonOverload(name, fn) if overload == "default" else None
        if o is None:
            # the packet's default comes with its first other overload (``arange.start``)
            del _PYTHON_OVERLOADS[name]
            o = _PYTHON_OVERLOADS[name] = PythonOverload(name, fn)
    if overload == "default":
        return o
    pkt = o.overloadpacket
    more = pkt._more
    if overload not in more:
        more[overload] = PythonOverload(name, fn, overload, pkt)
    return more[overload]


local_scalar_dense = python_overload("_local_scalar_dense", lambda t: t.item())

_PACKETS: Dict[str, OpOverloadPacket] = {}


def packet(op) -> OpOverloadPacket:
    p = _PACKETS.get(op.name)
    if p is None or p.op is not op:
        p = _PACKETS[op.name] = OpOverloadPacket(op)
    return p


class AtenNamespace:
    """``ember.ops.aten``: ``ember.ops.aten.<op>`` for every registered op with a binding."""

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name in _PYTHON_OVERLOADS:
            return _PYTHON_OVERLOADS[name].overloadpacket
        op = OPS.get(name)
        if op is None and not name.startswith("__") and (name, "default") in _factory_overloads():
            # a factory recorded whole in a user's graph (``aten.zeros_like``), read first here
            from ..fx.experimental._factory_calls import overload_for
            return overload_for(name, "default").overloadpacket
        if op is None or getattr(op, "binding", None) is None or name.startswith("__"):
            raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
        return packet(op)

    def __dir__(self):
        return sorted(n for n, op in OPS.items() if "::" not in n and getattr(op, "binding", None) is not None)

    def __repr__(self):
        return "<ember.ops.aten>"


aten = AtenNamespace()
