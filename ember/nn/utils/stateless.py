"""``functional_call``: run a module with some parameters/buffers swapped for given tensors.

What tracing needs to make a module's weights graph *inputs* rather than
constants: ``functional_call(model, {"0.weight": w, ...}, (x,))`` calls
``model(x)`` with those tensors in place of the registered ones and puts the
originals back afterwards (also when the call raises). Like
``torch.func.functional_call``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple


def _owner(module, dotted: str):
    *path, leaf = dotted.split(".")
    m = module
    for p in path:
        m = getattr(m, p)
    return m, leaf


def functional_call(module, parameters_and_buffers: Dict[str, Any], args: Any = (),
                    kwargs: Optional[Dict[str, Any]] = None, *, strict: bool = False) -> Any:
    if not isinstance(args, tuple):
        args = (args,)
    known = dict(module.named_parameters())
    known.update(dict(module.named_buffers()))
    unknown = [k for k in parameters_and_buffers if k not in known]
    if unknown:
        raise RuntimeError(f"functional_call: {type(module).__name__} has no parameter or buffer named "
                           f"{', '.join(repr(k) for k in unknown)}")
    if strict:
        missing = [k for k in known if k not in parameters_and_buffers]
        if missing:
            raise RuntimeError(f"functional_call(strict=True): missing {', '.join(missing)}")
    saved: list = []
    try:
        for name, value in parameters_and_buffers.items():
            owner, leaf = _owner(module, name)
            table = owner._parameters if leaf in owner._parameters else owner._buffers
            saved.append((table, leaf, table[leaf]))
            table[leaf] = value
        return module(*args, **(kwargs or {}))
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old
