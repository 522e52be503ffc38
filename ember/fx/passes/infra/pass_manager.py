"""Running a list of passes in a valid order (``torch.fx.passes.infra.pass_manager``).

Why constraints are pairwise functions: a pass author knows "run my pass
before that one" and nothing about the full list; :class:`PassManager` turns
those local facts into an order (a topological sort) or reports a cycle, and
then runs the passes, repeatedly if asked, until a round changes nothing.
"""

from __future__ import annotations

import collections
import functools
import inspect
import logging
from typing import Any, Callable, List, Optional

from .pass_base import PassResult

__all__ = ["pass_result_wrapper", "this_before_that_pass_constraint", "PassManager"]

logger = logging.getLogger(__name__)
logger.setLevel(logging.WARNING)

Constraint = Callable[[Callable[..., Any], Callable[..., Any]], bool]


def _pass_name(fn: Any) -> str:
    return fn.__name__ if inspect.isfunction(fn) else type(fn).__name__


def pass_result_wrapper(fn: Optional[Callable[..., Any]]) -> Optional[Callable[..., Any]]:
    """Adapt a pass that returns None or a module into one returning a
    :class:`PassResult` (``modified`` is then assumed True)."""
    if fn is None:
        return None

    @functools.wraps(fn)
    def wrapped_fn(gm: Any) -> Optional[PassResult]:
        from ....nn import Module

        res = fn(gm)
        if res is None:
            return PassResult(gm, True)
        if isinstance(res, PassResult):
            return res
        if isinstance(res, Module):
            return PassResult(res, True)
        return None

    if not inspect.isfunction(fn):
        wrapped_fn.__name__ = type(fn).__name__
    return wrapped_fn


def _validate_pass_schedule_constraint(constraint: Constraint, passes: List[Callable[..., Any]]) -> None:
    for i, a in enumerate(passes):
        for j, b in enumerate(passes[i + 1:]):
            if constraint(a, b):
                continue
            raise RuntimeError(
                f"pass schedule constraint violated. Expected {a} before {b}"
                f" but found {a} at index {i} and {b} at index {j} in pass list."
            )


def _topological_sort_passes(passes: List[Callable[..., Any]], constraints: List[Constraint]) -> List[Callable[..., Any]]:
    """Order ``passes`` so that every constraint holds; a constraint
    ``c(a, b)`` returning False means ``b`` must run before ``a``."""
    if not constraints:
        return passes
    must_follow = {p: [] for p in passes}   # p -> passes waiting for p
    waiting = dict.fromkeys(passes, 0)
    ready: collections.deque = collections.deque()
    for a in passes:
        for b in passes:
            if a == b:
                continue
            for constraint in constraints:
                if not constraint(a, b):
                    must_follow[b].append(a)
                    waiting[a] += 1
        if waiting[a] == 0:
            ready.append(a)
    done = dict.fromkeys(passes, False)
    order: List[Callable[..., Any]] = []
    while ready:
        p = ready.popleft()
        order.append(p)
        done[p] = True
        for n in must_follow[p]:
            if not done[n]:
                waiting[n] -= 1
                if waiting[n] == 0:
                    ready.append(n)
    cyclic = [p for p, w in waiting.items() if w != 0]
    if cyclic:
        raise RuntimeError(f"Circular dependency detected within the following passes: {cyclic}")
    return order


def this_before_that_pass_constraint(this: Callable[..., Any], that: Callable[..., Any]) -> Constraint:
    """A constraint requiring ``this`` to run before ``that``."""

    def depends_on(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
        return a != that or b != this

    return depends_on


class PassManager:
    """Collects passes and ordering constraints and runs them.

    ``steps``: how many rounds at most (a round that modifies nothing ends
    the run); ``run_checks_after_each_pass``: call :meth:`check` (see
    :meth:`add_checks`) after each pass; ``suppress_check_failures`` is kept
    for torch's signature.
    """

    _validated: bool = False
    steps: int = 1

    def __init__(
        self,
        passes: Optional[List[Callable[..., Any]]] = None,
        constraints: Optional[List[Constraint]] = None,
        steps: Optional[int] = None,
        run_checks_after_each_pass: bool = False,
        suppress_check_failures: bool = False,
    ) -> None:
        self.passes = passes or []
        self.constraints = constraints or []
        if steps:
            self.steps = steps
        self.run_checks_after_each_pass = run_checks_after_each_pass
        self.suppress_check_failures = suppress_check_failures

    def add_pass(self, _pass: Callable[..., Any]) -> None:
        """Append a pass."""
        self.passes.append(_pass)
        self._validated = False

    def add_constraint(self, constraint: Constraint) -> None:
        """Add an ordering constraint (see :func:`this_before_that_pass_constraint`)."""
        self.constraints.append(constraint)
        self._validated = False

    def validate_constraints(self) -> None:
        """Raise RuntimeError if the current pass order breaks a constraint."""
        if self._validated:
            return
        for constraint in self.constraints:
            _validate_pass_schedule_constraint(constraint, self.passes)
        self._validated = True

    def solve_constraints(self) -> None:
        """Reorder the passes to satisfy every constraint."""
        self.passes = _topological_sort_passes(self.passes, self.constraints)
        self._validated = True

    def add_checks(self, check: Callable[[Any], None]) -> None:
        """Install ``check(module)``, run before the passes and (optionally)
        after each one."""
        if len(inspect.signature(check).parameters) != 1:
            raise TypeError("PassManager check function should only take in one variable, a module")
        self.check = check  # type: ignore[method-assign]

    def check(self, module: Any) -> None:
        """No checks by default."""

    def __call__(self, module: Any) -> PassResult:
        from ...graph_module import GraphModule

        if not self._validated:
            self.solve_constraints()
        self.check(module)
        overall_modified = False
        for _ in range(self.steps):
            modified = False
            for i, fn in enumerate(self.passes):
                name = _pass_name(fn)
                logger.debug("Running pass '%s'", name)
                try:
                    res = fn(module)
                    if not isinstance(res, PassResult) and not hasattr(res, "graph_module"):
                        raise TypeError(
                            f"The result of the pass {name} should be type PassResult."
                            "Please wrap it with pass_result_wrapper()"
                        )
                    module = res.graph_module
                    modified = modified or res.modified
                    if isinstance(module, GraphModule):
                        module.recompile()
                    if self.run_checks_after_each_pass:
                        self.check(module)
                except Exception as e:
                    prev = [_pass_name(p) for p in self.passes[:i]]
                    raise Exception(
                        f"An error occurred when running the '{name}' pass after the following passes: {prev}"
                    ) from e
            overall_modified = overall_modified or modified
            if not modified:
                break
        return PassResult(module, overall_modified)
