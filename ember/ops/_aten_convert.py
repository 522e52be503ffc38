"""ember binding calls <-> torch aten overload calls, for the graphs users see.

Why. ``make_fx`` and ``ember.export`` record each op as a call of its ember binding
(``ember.sum(x, 1)``); torch's graphs carry the aten overload torch's argument parser picked
(``aten.sum.dim_IntList(x, [1])``), and users' passes test ``node.target is aten.add.Tensor`` or
read ``node.target.tags``. :func:`to_aten` turns a recorded binding call into the overload call
torch would record: the overload chosen by the arguments' kinds (Tensor, number, int list, a
``dim`` given or not), the arguments in that schema's form (an int for an ``int[1]`` parameter
becomes ``[dim]``, keyword-only arguments are kwargs, arguments at their schema default are left
out as torch leaves them out). :func:`to_binding` is the reverse, for ember's own consumers of
such graphs (the onnx translation table, decompositions): the binding and ember's arguments.
Ops torch has no overload for (ember's own ops, prims) stay bindings. ``convert_graph`` /
``graph_to_bindings`` rewrite every node of a graph.

Both directions bind arguments by name through ember's op record (``OpDef.params``) and the
overload's schema (``OpOverload._schema``), so a converted node runs the same op on the same
values: ``OpOverload.__call__`` binds torch's form back onto ember's op.
"""
from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Tuple

from .registry import _REQUIRED

# ember ops that torch spells as an overload of another packet (``max_dim`` is ``aten.max.dim``);
# the inverse of ``_aten_namespace._REDIRECT``
_PACKET_OF: Dict[str, list] = {}

# torch's argument parser takes a Python number for a Tensor parameter of these ops (the Scalar
# overloads are not bound in Python): ``x * 2`` is ``aten.mul.Tensor(x, 2)``
_NUMBERS_AS_TENSORS = frozenset((
    "add", "add_", "div", "div_", "divide", "divide_", "mul", "mul_", "multiply", "multiply_", "sub", "sub_",
    "subtract", "subtract_", "true_divide", "true_divide_", "floor_divide", "floor_divide_", "to", "_to_copy",
    "copy_", "_conj"))

# ops whose torch overloads taking a ``dim`` record the default correction as ``correction=1``
_CORRECTION_OPS = frozenset(("var", "std", "var_mean", "std_mean"))

# graph nodes that compute sizes (SymInt values), not tensors
_SIZE_TARGETS = None

# memo: op name -> the overloads that run it (see ``_candidates``)
_CANDIDATES: Dict[str, list] = {}


def _size_targets():
    global _SIZE_TARGETS
    if _SIZE_TARGETS is None:
        from ..fx.experimental.proxy_tensor import sym_size
        _SIZE_TARGETS = frozenset((sym_size, operator.add, operator.mul, operator.sub, operator.floordiv,
                                   operator.mod, operator.pow, operator.neg, max, min))
    return _SIZE_TARGETS


def _packet_of():
    if not _PACKET_OF:
        from ._aten_namespace import _REDIRECT
        for (packet, overload), target in _REDIRECT.items():
            _PACKET_OF.setdefault(target, []).append((packet, overload))
    return _PACKET_OF


def _candidates(op) -> list:
    """The aten overloads (OpOverload objects) that run ``op``: its own packet's, then those of
    other packets redirected to it; out= and unsupported overloads left out."""
    c = _CANDIDATES.get(op.name)
    if c is not None:
        return c
    from ._aten_namespace import aten, torch_overloads
    out = []
    names = [(op.name, o) for o in torch_overloads(op.name)] + _packet_of().get(op.name, [])
    for pname, oname in names:
        try:
            ov = getattr(getattr(aten, pname), oname)
        except AttributeError:
            continue
        if ov._run is None or ov.op is not op:
            continue
        sch = ov._schema
        if any(a.is_out or (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)
               for a in sch.arguments):
            continue
        out.append(ov)
    _CANDIDATES[op.name] = out
    return out


def _op_of(target) -> Optional[Any]:
    op = getattr(target, "_ember_op", None)
    if op is not None and getattr(op, "binding", None) is target:
        return op
    return None


def _is_tensor(v) -> bool:
    from ..fx.node import Node
    from ..tensor import Tensor
    if isinstance(v, Tensor):
        return True
    if isinstance(v, Node):
        if v.op == "call_function" and v.target in _size_targets():
            return False
        val = v.meta.get("val")
        if val is not None and not isinstance(val, Tensor):
            return False
        return True
    return False


def _is_size(v) -> bool:
    from ..fx.node import Node
    return isinstance(v, Node) and not _is_tensor(v)


def _is_int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or _is_size(v)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, complex)) or _is_size(v)


def _fit(arg, v, numbers_as_tensors):
    """``(ok, value in the schema's form)`` for value ``v`` passed to schema argument ``arg``."""
    t = arg.type
    if v is None:
        return t.optional, v
    base = t.base
    if t.is_list:
        if isinstance(v, (list, tuple)):
            items = list(v)
        elif arg.N is not None and base in ("int", "SymInt") and _is_int(v):
            items = [v]             # ``int[1] dim``: torch's parser takes an int
        else:
            return False, v
        if base == "Tensor":
            return all(_is_tensor(x) or (x is None and t.elem_optional) for x in items), items
        if base in ("int", "SymInt"):
            return all(_is_int(x) for x in items), items
        if base == "float":
            return all(_is_number(x) and not isinstance(x, complex) for x in items), items
        if base == "bool":
            return all(isinstance(x, bool) for x in items), items
        if base == "Scalar":
            return all(_is_number(x) for x in items), items
        return False, v
    if base == "Tensor":
        return (_is_tensor(v) or (numbers_as_tensors and _is_number(v))), v
    if base == "Scalar":
        return _is_number(v) and not _is_tensor(v), v
    if base in ("int", "SymInt"):
        return _is_int(v), v
    if base in ("float",):
        return (isinstance(v, (int, float)) and not isinstance(v, bool)) or _is_size(v), v
    if base in ("bool", "SymBool"):
        return isinstance(v, bool), v
    if base == "str":
        return isinstance(v, str), v
    if base == "ScalarType":
        from ..types import dtype
        return isinstance(v, dtype), v
    if base == "Device":
        return isinstance(v, str) or type(v).__name__ == "device", v
    if base == "MemoryFormat" and isinstance(v, str):
        # ember's ops take the format's name; torch's graphs hold the object (``torch.contiguous_format``)
        from .._memory_format import memory_format
        try:
            return True, memory_format(v)
        except ValueError:
            return True, v
    if base in ("Layout", "MemoryFormat"):
        return True, v
    if base == "Any":
        return True, v
    return False, v


def _same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) in (int, float, bool, str) and type(b) in (int, float, bool, str):
        return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                                 and not isinstance(a, bool) and not isinstance(b, bool) and a == b)
    return False


def _ember_values(op, args, kwargs) -> Optional[Dict[str, Any]]:
    """ember param name -> value of a recorded binding call (defaults filled)."""
    params = op.params
    vals: Dict[str, Any] = {}
    pos = [p for p in params if not p.kwonly]
    if len(args) > len(pos):
        return None
    for p, v in zip(pos, args):
        vals[p.name] = v
    names = {p.name for p in params}
    for k, v in kwargs.items():
        if k not in names or k in vals:
            return None
        vals[k] = v
    for p in params:
        if p.name not in vals:
            if p.default is _REQUIRED:
                return None
            vals[p.name] = p.default
    return vals


def _ember_name(arg_name, params_by_name):
    from ._aten_namespace import _ALIASES
    if arg_name in params_by_name:
        return arg_name
    for n in _ALIASES.get(arg_name, ()):
        if n in params_by_name:
            return n
    return None


def _try(ov, op, vals, numbers_as_tensors):
    """(positional, kwargs) of ``ov`` for ember's values ``vals``, or None when it does not fit."""
    from ._aten_namespace import _DROPPABLE
    sch = ov._schema
    params = {p.name: p for p in op.params}
    covered = set()
    pos, kw = [], {}
    # (value, is_default) for positional args: trailing defaults are left out
    for a in sch.arguments:
        en = _ember_name(a.name, params)
        if en is None:
            if a.has_default_value() and a.name in _DROPPABLE:
                continue
            return None
        covered.add(en)
        v = vals[en]
        if isinstance(v, tuple) and not a.type.is_list and a.type.base not in ("Any",):
            return None
        ok, v = _fit(a, v, numbers_as_tensors and a is not sch.arguments[0])
        if not ok:
            return None
        is_default = a.has_default_value() and _same(v, a.default_value)
        if a.kwarg_only:
            if not is_default:
                kw[a.name] = v
        else:
            if not a.has_default_value() and is_default:
                is_default = False
            pos.append((v, is_default))
    for n, p in params.items():
        if n not in covered and not (p.default is not _REQUIRED and _same(vals[n], p.default)):
            return None
    while pos and pos[-1][1]:
        pos.pop()
    args = tuple(v for v, _ in pos)
    if ov._overloadname == "default" and ov._run is not None and not hasattr(ov._run, "positional"):
        # ``.default`` runs ember's binding with the arguments as given: torch's positional order
        # must be the binding's
        eparams = [p for p in op.params if not p.kwonly]
        tpos = [a for a in sch.arguments if not a.kwarg_only]
        for i in range(len(args)):
            if i >= len(eparams) or _ember_name(tpos[i].name, params) != eparams[i].name:
                return None
        if any(_ember_name(k, params) != k for k in kw):     # keywords by ember's names
            return None
    return args, kw


def _score(ov, args, kw):
    """Preference among fitting overloads: torch's own schemas before a ``.default`` that only
    carries ember's schema (torch has no such overload: ``var(self, dim, *, correction)`` is
    torch's ``var.correction``), then the one passing fewest arguments, then fewest schema
    arguments (``sum.default`` over ``sum.dim_IntList`` for ``x.sum()``)."""
    return (isinstance(ov._tag_idx, tuple), len(args) + len(kw), len(ov._schema.arguments))


def to_aten(target, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
    """``(overload, args, kwargs)`` torch would record for the binding call
    ``target(*args, **kwargs)``, or None when ``target`` is no op binding with an aten overload
    for these arguments."""
    op = _op_of(target)
    if op is None or op.name.startswith("prims.") or "::" in op.name:
        return None
    if op.name == "_reshape_alias" and len(args) == 3 and not kwargs:
        # torch's reshape of a viewable strided tensor under a tracer is ``view`` with the size
        # (its ``_reshape_alias`` is for plain eager tensors): the same strides come out
        from ._aten_namespace import aten
        return aten.view.default, (args[0], list(args[1])), {}
    cands = _candidates(op)
    if not cands:
        return None
    vals = _ember_values(op, tuple(args), dict(kwargs))
    if vals is None:
        return None
    if op.name in _CORRECTION_OPS and vals.get("dim") is not None and vals.get("correction") is None:
        # torch's ``var(x, dim)`` is ``var.dim(x, dim, unbiased=True)``, recorded as
        # ``var.correction(x, dim, correction=1)``: the default correction spelled out
        vals["correction"] = 1
    best = None
    for numbers in ((True,) if op.name in _NUMBERS_AS_TENSORS else (False, True)):
        for ov in cands:
            r = _try(ov, op, vals, numbers)
            if r is None:
                continue
            s = _score(ov, *r)
            if best is None or s < best[0]:
                best = (s, ov, r)
        if best is not None:
            break
    if best is None:
        return None
    return best[1], best[2][0], best[2][1]


def is_aten_overload(target) -> bool:
    from ._aten_namespace import OpOverload
    return isinstance(target, OpOverload)


def to_binding(target, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
    """The reverse of :func:`to_aten`: ``(binding, args, kwargs)`` of ember's op for a call of the
    aten overload ``target`` (ember's normal form: positional up to the last non-default
    argument, keyword-only ones as kwargs). None when ``target`` is no ember-run overload."""
    from ._aten_namespace import OpOverload
    from ..fx.proxy import _normalize_op_args
    if not isinstance(target, OpOverload) or target.op is None or target._run is None:
        return None
    op = target.op
    run = target._run
    if not hasattr(run, "positional"):          # ``.default`` runs the binding as is
        return op.binding, tuple(args), dict(kwargs)
    bound: Dict[str, Any] = {}
    for name, v in zip(run.positional, args):
        bound[name] = v
    bound.update(kwargs)
    vals = {}
    for k, v in bound.items():
        en = run.names.get(k)
        if en is None:
            continue
        vals[en] = v
    full = []
    for p in op.params:
        if p.name in vals:
            full.append(vals[p.name])
        elif p.default is not _REQUIRED:
            full.append(p.default)
        else:
            return None
    a, kw = _normalize_op_args(op, tuple(full), {})
    return op.binding, a, kw


def _rewrite_graph(graph, convert) -> int:
    """Rewrite every ``call_function`` node whose target ``convert(target, args, kwargs)`` maps
    (to ``(new_target, args, kwargs)``, else None), in place; returns how many nodes changed. A
    target the graph marks impure stays impure under its new name."""
    n = 0
    impure = getattr(graph, "impure_targets", None)
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        r = convert(node.target, node.args, node.kwargs)
        if r is None:
            continue
        target, a, kw = r
        if impure is not None and node.target in impure:
            impure.add(target)
        node.target, node.args, node.kwargs = target, a, kw
        n += 1
    return n


def convert_graph(graph) -> int:
    """Rewrite every ``call_function`` node of ``graph`` that calls an ember op binding with an aten
    overload into that overload's call (in place); returns how many nodes changed."""
    return _rewrite_graph(graph, to_aten)


def graph_to_bindings(graph) -> int:
    """The reverse of :func:`convert_graph`: aten-overload nodes back to ember binding calls."""
    return _rewrite_graph(graph, to_binding)


def torch_node_name(node) -> Optional[str]:
    """The name torch's tracers give ``node`` (before making it unique): an aten overload call is
    named after its overload packet (``aten.max.dim`` -> ``max``, made ``max_1`` since ``max`` is a
    builtin); None where torch's rule is the target's own name (kept as ember made it)."""
    if node.op != "call_function":
        return None
    pkt = getattr(node.target, "overloadpacket", None)
    name = getattr(pkt, "__name__", None)
    return name if isinstance(name, str) else None


def rename_like_torch(graph, placeholder_names: Optional[Dict[Any, str]] = None) -> Dict[str, str]:
    """Name ``graph``'s nodes as torch's make_fx / export do: op calls after their overload packet,
    numbered in graph order (``add``, ``add_1``, ``max_1``, ``sum_1``); other nodes keep the base
    of their name; placeholders in ``placeholder_names`` (node -> name) get that name (and target).
    Returns old name -> new name for the nodes that changed."""
    from ..fx._names import Namespace, _SUFFIX
    ns = Namespace()
    renamed: Dict[str, str] = {}
    pnames = placeholder_names or {}
    for node in graph.nodes:
        if node.op == "placeholder" and node not in pnames:
            ns.mark_used(node.name)             # kept as is (export's ``input``: a builtin's name)
            continue
        if node.op == "placeholder":
            cand = pnames[node]
        elif node.op == "output":
            cand = "output"
        else:
            cand = torch_node_name(node)
            if cand is None:
                m = _SUFFIX.match(node.name)
                cand = m.group(1) if m is not None and node.op != "get_attr" else node.name
        new = ns.create_name(cand, None)
        if new != node.name:
            renamed[node.name] = new
            node.name = new
            if node.op == "placeholder":
                node.target = new
    graph._namespace = ns
    return renamed
