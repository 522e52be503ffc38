"""``ember.func.functional_call`` / ``ember.nn.utils.stateless.functional_call`` inside a
compiled frame (MAML's inner loop, ensembling, ``functional_call`` + ``grad``).

Eager, the call swaps the given tensors into the modules' ``_parameters`` / ``_buffers``
tables, calls the module and puts the originals back (nn/utils/stateless.py). Recorded as one
graph operator it broke the graph ("cannot pass NNModuleVariable to an ember operator");
torch.compile traces through it. Here the swap is done on the trace instead: while the
module's call is inlined, ``OutputGraph.param_overrides`` maps ``(id(owner module), leaf
name)`` to the tracker passed for it, and ``NNModuleVariable`` reads a parameter or buffer
from there first (``self.weight``, ``parameters()`` walks). The mapping is undone when the
inlined call ends, as the ``finally`` of eager's swap does, also when tracing it fails.

What eager checks before the swap is decided at trace time on the module tree, which is
guarded (the key sets of every ``_parameters`` / ``_buffers`` / ``_modules`` table walked, the
identity of each submodule, that the walked parameters are distinct objects): a name the module
does not have, or a missing one under ``strict=True``, breaks the graph (eager raises there).
Code that reads a swapped module's ``_parameters`` / ``_buffers`` / ``__dict__`` itself is not
traced (the tables would show the originals): that also breaks the graph, so eager runs it.
"""
from __future__ import annotations

import inspect

from ..exc import Unsupported
from ..source import AttrSource, GetItemSource


def functional_call_targets():
    from ... import func as _func
    from ...nn.utils import stateless as _stateless
    return (_func.functional_call, _stateless.functional_call)


def is_functional_call(fn) -> bool:
    return any(fn is t for t in functional_call_targets())


def _const(v, what):
    if not v.is_python_constant():
        raise Unsupported(f"functional_call with a non-constant {what}")
    return v.as_python_constant()


def _str_dict(tx, v, what):
    """``{name: tracker}`` of a dict tracker with string keys."""
    from .lists import DictVariable
    if not isinstance(v, DictVariable):
        raise Unsupported(f"functional_call: {what} is {v}, not a dict")
    if not all(isinstance(k, str) for k in v.items):
        raise Unsupported(f"functional_call: {what} has keys that are not strings")
    return dict(v.items)


def _merged(tx, v, ember_func):
    """The name -> tracker mapping, merged as ``ember.func.functional_call`` merges a tuple/list
    of dicts (repeated keys: eager raises)."""
    from .lists import BaseListVariable, DictVariable
    if isinstance(v, DictVariable) or not ember_func:
        return _str_dict(tx, v, "the parameter and buffer dict")
    if isinstance(v, BaseListVariable) and v.python_type() in (tuple, list):
        merged = {}
        for d in v.items:
            for k, item in _str_dict(tx, d, "an element of parameter_and_buffer_dicts").items():
                if k in merged:
                    raise Unsupported(f"functional_call: {k!r} appears in several dicts (the program raises)")
                merged[k] = item
        return merged
    raise Unsupported(f"functional_call: parameter_and_buffer_dicts is {v} (the program raises)")


def _call_args(tx, v, ember_func):
    """The positional arguments of the module's call, as eager builds them: ``None`` is no
    argument for ``ember.func``'s version; a tuple (a NamedTuple too) is spread; anything else
    is the one argument."""
    from .lists import BaseListVariable
    if v is None:
        return []
    if ember_func and v.is_python_constant() and v.as_python_constant() is None:
        return []
    try:
        is_tuple = issubclass(v.python_type(), tuple)
    except (NotImplementedError, Unsupported, TypeError):
        is_tuple = False
    if is_tuple:
        if not isinstance(v, BaseListVariable):
            raise Unsupported(f"functional_call: positional arguments {v} cannot be unpacked")
        return list(v.unpack(tx))
    return [v]


def _known_names(tx, module_v):
    """``{full name: (owner tracker, leaf, store)}`` of ``named_parameters()`` then
    ``named_buffers()`` (eager's ``known``), with the module tree guarded."""
    from .builder import wrap
    from .objects import NNModuleVariable
    g = tx.output.guards
    guarded = set()

    def table(mv, store):
        src = AttrSource(mv.source, store)
        if src.expr() not in guarded:
            guarded.add(src.expr())
            g.dict_keys_match(src, list(getattr(mv.module, store).keys()))
        return src

    modules, memo = [], set()

    def walk(mv, prefix):                      # Module.named_modules (de-duplicated)
        if id(mv.module) in memo:
            return
        memo.add(id(mv.module))
        modules.append((prefix, mv))
        ms = table(mv, "_modules")
        for k, sub in mv.module._modules.items():
            sv = wrap(tx, sub, GetItemSource(ms, k))      # guards the submodule's identity
            if sub is None:
                continue
            if not isinstance(sv, NNModuleVariable):
                raise Unsupported(f"functional_call: submodule {k!r} is {sv}")
            walk(sv, prefix + ("." if prefix else "") + k)

    walk(module_v, "")
    known = {}
    for store in ("_parameters", "_buffers"):
        seen, members = set(), []
        for prefix, mv in modules:
            src = table(mv, store)
            for k, t in getattr(mv.module, store).items():
                if t is None:
                    continue
                g.add(f"{GetItemSource(src, k).expr()} is not None", f"{mv.source.expr()}.{k} is set")
                if id(t) in seen:
                    # a tied parameter: named_parameters() drops the second name, which changes
                    # which names eager accepts and which table entry it swaps
                    raise Unsupported("functional_call on a module with tied (shared) parameters or buffers")
                seen.add(id(t))
                members.append(GetItemSource(src, k))
                known.setdefault(prefix + ("." if prefix else "") + k, (mv, k, store))
        if len(members) > 1:
            g.add(f"len({{id(__m) for __m in ({', '.join(m.expr() for m in members)},)}}) == {len(members)}",
                  f"the module's {store[1:]} are distinct objects")
    return known


def call_functional_call(tx, fn, args, kwargs):
    from .objects import NNModuleVariable
    ember_func = fn is functional_call_targets()[0]
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"functional_call: {e} (the program raises)") from None
    a = bound.arguments
    names = list(inspect.signature(fn).parameters)
    module_v, dicts_v = a[names[0]], a[names[1]]
    if not isinstance(module_v, NNModuleVariable) or module_v.source is None:
        raise Unsupported(f"functional_call of {module_v}: only a module from outside the frame is traced")
    strict = bool(_const(a["strict"], "strict")) if "strict" in a else False
    if "tie_weights" in a:
        _const(a["tie_weights"], "tie_weights")      # eager ignores it (no tied weights here: below)
    swaps = _merged(tx, dicts_v, ember_func)
    call_args = _call_args(tx, a.get("args"), ember_func)
    call_kwargs = {}
    kw = a.get("kwargs")
    if kw is not None and not (kw.is_python_constant() and kw.as_python_constant() is None):
        call_kwargs = _str_dict(tx, kw, "kwargs")
    known = _known_names(tx, module_v)
    unknown = [k for k in swaps if k not in known]
    if unknown:
        raise Unsupported(f"functional_call: {type(module_v.module).__name__} has no parameter or buffer named "
                          f"{', '.join(map(repr, unknown))} (the program raises)")
    if strict and any(k not in swaps for k in known):
        raise Unsupported("functional_call(strict=True) with missing names (the program raises)")
    out = tx.output
    saved = []
    try:
        for name, value in swaps.items():
            owner, leaf, _ = known[name]
            key = (id(owner.module), leaf)
            saved.append((key, out.param_overrides.get(key)))
            out.param_overrides[key] = value
            out.param_override_owners[id(owner.module)] = out.param_override_owners.get(id(owner.module), 0) + 1
        return module_v.call_function(tx, call_args, call_kwargs)
    finally:
        for key, old in reversed(saved):
            if old is None:
                del out.param_overrides[key]
            else:
                out.param_overrides[key] = old
            n = out.param_override_owners[key[0]] - 1
            if n:
                out.param_override_owners[key[0]] = n
            else:
                del out.param_override_owners[key[0]]

