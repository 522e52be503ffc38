"""Two ways to build ``dynamic_shapes=`` without writing the spec tree by hand (torch's API).

* :class:`AdditionalInputs`: more example inputs of the same structure; every tensor
  dimension whose size differs between them (or from the export's example) becomes
  ``Dim.DYNAMIC``, the others static.
* :class:`ShapesCollection`: specs keyed by the *tensor objects* passed to ``export``
  (``sc[x] = {0: batch}``), placed into the spec tree where those tensors occur.

Both are passed as ``dynamic_shapes=`` to ``ember.export.export`` (or turned into the spec
tree by their ``dynamic_shapes(model, args, kwargs)``)."""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Tuple

from .dynamic_shapes import Dim
from .errors import UserError

__all__ = ["AdditionalInputs", "ShapesCollection"]


def _bind(m, args, kwargs) -> Dict[str, Any]:
    """argument name -> value as ``m.forward`` binds them (``**kwargs`` flattened, as export)."""
    sig = inspect.signature(m.forward)
    bound = sig.bind(*args, **(kwargs or {}))
    out = {}
    for name, value in bound.arguments.items():
        if sig.parameters[name].kind == inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


def _path(path) -> str:
    return path[0] + "".join(f"[{p!r}]" for p in path[1:])


class AdditionalInputs:
    """Example inputs besides export's: the dims that vary across all of them are dynamic."""

    def __init__(self):
        self._examples: List[Tuple[tuple, Optional[dict]]] = []

    def add(self, args: tuple, kwargs: Optional[dict] = None) -> None:
        """One more example: ``args`` a tuple of positional inputs, ``kwargs`` a dict or None."""
        if not isinstance(args, tuple):
            raise AssertionError(f"Representative args {args} must be a tuple")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise AssertionError(f"Representative kwargs {kwargs} must be None or a dict")
        self._examples.append((args, kwargs))

    def dynamic_shapes(self, m, args: tuple, kwargs: Optional[dict] = None) -> Dict[str, Any]:
        """The spec tree for ``m`` exported on ``(args, kwargs)``: ``Dim.DYNAMIC`` where sizes differ
        between it and the added inputs, None where they agree."""
        from ..tensor import Tensor
        bound = [_bind(m, args, kwargs)] + [_bind(m, a, k) for a, k in self._examples]

        def merge(values, path):
            first = values[0]
            if isinstance(first, Tensor):
                for v in values[1:]:
                    if not isinstance(v, Tensor) or v.ndim != first.ndim:
                        got = f"a {v.ndim}-d tensor" if isinstance(v, Tensor) else type(v).__name__
                        raise UserError(f"AdditionalInputs: the input at {_path(path)} is a {first.ndim}-d tensor "
                                        f"in the example but {got} in an additional input")
                return tuple(Dim.DYNAMIC if len({v.shape[d] for v in values}) > 1 else None
                             for d in range(first.ndim))
            if isinstance(first, (tuple, list)):
                if any(type(v) is not type(first) or len(v) != len(first) for v in values):
                    raise UserError(f"AdditionalInputs: the input at {_path(path)} has a different structure in "
                                    f"an additional input (expected a {type(first).__name__} of {len(first)})")
                return type(first)(merge([v[i] for v in values], path + [i]) for i in range(len(first)))
            if isinstance(first, dict):
                if any(not isinstance(v, dict) or set(v) != set(first) for v in values):
                    raise UserError(f"AdditionalInputs: the input at {_path(path)} has different keys in an "
                                    f"additional input (expected {sorted(first, key=str)})")
                return {k: merge([v[k] for v in values], path + [k]) for k in first}
            if any(type(v) is not type(first) or v != first for v in values):
                raise NotImplementedError(f"ember.export: AdditionalInputs: the non-tensor input at {_path(path)} "
                                          f"differs between the inputs ({', '.join(repr(v) for v in values)}); "
                                          f"ember specializes Python values, dynamic ints are not supported")
            return None

        names = list(bound[0])
        for b in bound[1:]:
            if list(b) != names:
                raise UserError(f"AdditionalInputs: an additional input binds the arguments {list(b)}, the "
                                f"example binds {names}")
        return {k: merge([b[k] for b in bound], [k]) for k in names}

    def verify(self, ep) -> None:
        """Every added input is accepted by exported program ``ep`` (raises the guard that fails)."""
        from ..utils._pytree import tree_flatten
        for args, kwargs in self._examples:
            leaves, spec = tree_flatten((args, kwargs or {}))
            if spec != ep._in_spec:
                raise AssertionError(f"AdditionalInputs.verify: an input's structure {spec} differs from the "
                                     f"exported program's {ep._in_spec}")
            ep._check_inputs(leaves)


class ShapesCollection:
    """``dynamic_shapes`` keyed by tensor object: ``sc[x] = {0: Dim("b")}``."""

    def __init__(self):
        self._shapes: Dict[int, Tuple[Any, Any]] = {}     # id(tensor) -> (tensor, spec)

    def _check(self, t):
        from ..tensor import Tensor
        if not isinstance(t, Tensor):
            raise AssertionError(f"Cannot assign shape to non-tensor or non-_IntWrapper type {type(t)}")

    def __setitem__(self, t, shape) -> None:
        self._check(t)
        self._shapes[id(t)] = (t, shape)

    def __getitem__(self, t):
        """The spec of ``t``; a new empty dict (to fill: ``sc[x][0] = dim``) if none yet."""
        self._check(t)
        if id(t) not in self._shapes:
            self._shapes[id(t)] = (t, {})
        return self._shapes[id(t)][1]

    def __contains__(self, t) -> bool:
        return id(t) in self._shapes and self._shapes[id(t)][0] is t

    def __len__(self) -> int:
        return len(self._shapes)

    def dynamic_shapes(self, m, args: tuple, kwargs: Optional[dict] = None) -> Dict[str, Any]:
        """The spec tree for ``m`` on ``(args, kwargs)``: each tensor's assigned spec where it occurs."""
        from ..tensor import Tensor
        found = set()

        def walk(v):
            if isinstance(v, Tensor):
                hit = self._shapes.get(id(v))
                if hit is not None and hit[0] is v:
                    found.add(id(v))
                    return hit[1]
                return None
            if isinstance(v, (tuple, list)):
                return type(v)(walk(x) for x in v)
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            return None
        out = {k: walk(v) for k, v in _bind(m, args, kwargs).items()}
        if set(self._shapes) - found:
            raise ValueError("Some tensors that were assigned shapes were not found in args. Maybe such tensors "
                             "were copied when passing them as args? Maybe such tensors are contained in classes "
                             "that were not registered with pytree?")
        return out
