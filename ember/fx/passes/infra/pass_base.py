"""The shape of a pass (``torch.fx.passes.infra.pass_base``).

Why a result object: a pass manager repeats its passes until nothing
changes, so every pass must say whether it modified the module, and may hand
back a different module than it got.
"""

from __future__ import annotations

import abc
from collections import namedtuple
from typing import Any, Optional

__all__ = ["PassResult", "PassBase"]


class PassResult(namedtuple("PassResult", ["graph_module", "modified"])):
    """``(graph_module, modified)``: what a pass produced and whether it
    changed anything."""

    __slots__ = ()

    def __new__(cls, graph_module: Any, modified: bool) -> "PassResult":
        return super().__new__(cls, graph_module, modified)


class PassBase(abc.ABC):
    """A pass as an object: ``requires`` (precondition check), ``call`` (the
    pass; must be implemented) and ``ensures`` (postcondition check) run in
    that order when the instance is called on a GraphModule."""

    def __call__(self, graph_module: Any) -> Optional[PassResult]:
        self.requires(graph_module)
        res = self.call(graph_module)
        self.ensures(graph_module)
        return res

    @abc.abstractmethod
    def call(self, graph_module: Any) -> Optional[PassResult]:
        """Run the pass on ``graph_module``."""

    def requires(self, graph_module: Any) -> None:  # noqa: B027
        """Check preconditions before :meth:`call` (optional)."""

    def ensures(self, graph_module: Any) -> None:  # noqa: B027
        """Check postconditions after :meth:`call` (optional)."""
