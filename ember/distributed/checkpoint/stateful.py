"""``Stateful``: anything with ``state_dict()`` and ``load_state_dict()`` (modules, optimizers,
your own app state). ``save`` stores a top-level Stateful value's ``state_dict()``; ``load``
fills that state_dict in place and hands it to ``load_state_dict`` (torch's protocol)."""
from __future__ import annotations

from typing import Any, Dict, Protocol, runtime_checkable

__all__ = ["Stateful"]


@runtime_checkable
class Stateful(Protocol):
    def state_dict(self) -> Dict[str, Any]:
        ...

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        ...


def to_state_dicts(state_dict):
    """A shallow copy of ``state_dict`` with each top-level Stateful replaced by its state_dict()."""
    if not isinstance(state_dict, dict):
        raise TypeError(f"ember.distributed.checkpoint: state_dict must be a dict, got {type(state_dict).__name__}")
    return {k: (v.state_dict() if isinstance(v, Stateful) else v) for k, v in state_dict.items()}
