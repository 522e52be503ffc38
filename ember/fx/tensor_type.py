"""``TensorType`` and ``Dyn``: gradual types for tensor-shape annotations.

Why: shape checking over a traced graph needs annotations that can say "a
tensor of rank 3 whose second size is unknown". ``TensorType((1, Dyn, 3))``
says that; ``Dyn`` stands for "no information" and is consistent with
anything. :func:`is_consistent` (the ``~`` relation of gradual typing:
reflexive, symmetric, not transitive) and :func:`is_more_precise` (``<=``:
reflexive, transitive) compare such types, as torch.fx.tensor_type does.
Annotate placeholders with them: ``def forward(self, x: TensorType((2, Dyn)))``
(or ``TensorType[2, Dyn]``).
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["Dyn", "TensorType", "is_consistent", "is_more_precise"]


class TensorType:
    """A tensor type given by its dimensions (ints or :data:`Dyn`)."""

    def __init__(self, dim: Sequence[Any]) -> None:
        self.__origin__ = TensorType
        self.__args__ = dim

    @property
    def dims(self) -> Sequence[Any]:
        return self.__args__

    def __repr__(self) -> str:
        return f"TensorType[{self.dims}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__) and list(self.dims) == list(other.dims)

    __hash__ = None  # type: ignore[assignment]  # mutable-by-convention, like torch's

    @staticmethod
    def __class_getitem__(*args: Any) -> "TensorType":
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        return TensorType(tuple(args))


class _DynType:
    """The absence of type information (consistent with every type)."""

    def __init__(self) -> None:
        self.__name__ = "_DynType"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "Dyn"

    def __repr__(self) -> str:
        return "Dyn"


Dyn = _DynType()


def is_consistent(t1: Any, t2: Any) -> bool:
    """``t1 ~ t2``: equal, or either is :data:`Dyn`, or tensor types of equal
    rank whose dimensions are pairwise consistent."""
    if t1 == t2 or t1 == Dyn or t2 == Dyn:
        return True
    if isinstance(t1, TensorType) and isinstance(t2, TensorType):
        return len(t1.dims) == len(t2.dims) and all(is_consistent(a, b) for a, b in zip(t1.dims, t2.dims))
    return False


def is_more_precise(t1: Any, t2: Any) -> bool:
    """``t1 <= t2``: ``t1`` says at least as much as ``t2`` (``t2`` is
    :data:`Dyn`, or equal, or dimension-wise more precise at equal rank)."""
    if t1 == t2 or isinstance(t2, _DynType):
        return True
    if isinstance(t1, TensorType) and isinstance(t2, TensorType):
        return len(t1.dims) == len(t2.dims) and all(is_more_precise(a, b) for a, b in zip(t1.dims, t2.dims))
    return False
