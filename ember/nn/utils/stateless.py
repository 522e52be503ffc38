"""``functional_call``: run a module with some parameters/buffers swapped for given tensors.

What tracing needs to make a module's weights graph *inputs* rather than
constants: ``functional_call(model, {"0.weight": w, ...}, (x,))`` calls
``model(x)`` with those tensors in place of the registered ones and puts the
originals back afterwards (also when the call raises). Like
``torch.func.functional_call``:

- ``tie_weights=True``: a tensor registered under several names (tied weights) given under one
  of them replaces it under all of them; two different values for one tied tensor are an error.
- ``strict=True``: the names must be exactly the module's parameters and buffers (tied names
  count as given when their tensor is), reported as torch's "Error(s) in reparametrizing".
- a name the module doesn't have (without ``strict``) is set as a plain attribute of its owner
  for the call and removed afterwards.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

_MISSING = object()


def _owner(module, dotted: str):
    *path, leaf = dotted.split(".")
    m = module
    for p in path:
        m = getattr(m, p)
    return m, leaf


def _all_named_tensors(module):
    """Every parameter and buffer name, tied ones under each of their names."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(dict(module.named_buffers(remove_duplicate=False)))
    return named


def _untie(module, given):
    """``given`` with each tied tensor's value copied to all of that tensor's names."""
    named = _all_named_tensors(module)
    names_of = {}
    for name, t in named.items():
        names_of.setdefault(id(t), []).append(name)
    tied = {tid: names for tid, names in names_of.items() if len(names) > 1}
    given_for = {}
    for name in given:
        if name in named and id(named[name]) in tied:
            given_for.setdefault(id(named[name]), []).append(name)
    for names in given_for.values():
        if len({id(given[n]) for n in names}) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
    untied = dict(given)
    for tid, names in given_for.items():
        for tied_name in tied[tid]:
            untied[tied_name] = given[names[0]]
    return untied


def _check_strict(module, given):
    valid = set(_all_named_tensors(module))
    keys = set(given)
    missing, unexpected = sorted(valid - keys), sorted(keys - valid)
    msgs = []
    if unexpected:
        msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if msgs:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(), "\n\t".join(msgs)))


def _swap(owner, leaf, value):
    """Put ``value`` under ``owner.<leaf>``; returns how to undo it."""
    for table in (owner._parameters, owner._buffers):
        if leaf in table:
            old = table[leaf]
            table[leaf] = value
            return lambda: table.__setitem__(leaf, old)
    old = owner.__dict__.get(leaf, _MISSING)
    object.__setattr__(owner, leaf, value)
    if old is _MISSING:
        return lambda: object.__delattr__(owner, leaf)
    return lambda: object.__setattr__(owner, leaf, old)


def functional_call(module, parameters_and_buffers: Dict[str, Any], args: Any = None,
                    kwargs: Optional[Dict[str, Any]] = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    given = _untie(module, parameters_and_buffers) if tie_weights else dict(parameters_and_buffers)
    if strict:
        _check_strict(module, given)
    undo: list = []
    try:
        for name, value in given.items():
            owner, leaf = _owner(module, name)
            undo.append(_swap(owner, leaf, value))
        return module(*args, **(kwargs or {}))
    finally:
        for restore in reversed(undo):
            restore()
