"""Put a ShapeEnv's deferred runtime asserts into a graph
(``torch.fx.passes.runtime_assert``).

Why: some conditions on sizes are not guarded on when tracing (a ShapeEnv
made with ``prefer_deferred_runtime_asserts_over_guards=True``, as export
does) but recorded in ``shape_env.deferred_runtime_asserts``; the graph must
then check them itself. :func:`insert_deferred_runtime_asserts` reads the
symbols off the placeholders' example values (``meta["val"]`` or
``meta["example_value"]``: a SymInt input, or a tensor's symbolic sizes, read
with ``sym_size`` nodes), computes each condition from them with ``operator``
nodes, and checks it with :func:`_assert_scalar`, which raises
``RuntimeError("Runtime assertion failed for expression <expr> on node
'<name>'")`` as torch's ``aten._assert_scalar`` does.

As far as ember's symbolic shapes go: ember's sizes are all backed (input
sizes with example values), so there are no unbacked symbols to bind from
intermediate nodes (``unbacked_bindings``) and no value-range asserts for them;
torch's pass also rewrites size calls on intermediate tensors into arithmetic
on input sizes, which ember's make_fx already does when tracing.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Set

from ..node import Node, has_side_effect

__all__ = ["insert_deferred_runtime_asserts"]


def _assert_scalar(cond: Any, msg: str) -> None:
    """Raise ``RuntimeError(msg)`` unless ``cond`` is true (``aten._assert_scalar``)."""
    if not cond:
        raise RuntimeError(msg)


has_side_effect(_assert_scalar)


def _get_example_value(node: Node) -> Any:
    if "example_value" in node.meta:
        return node.meta["example_value"]
    return node.meta.get("val")


def _relations():
    import sympy

    return {
        sympy.Eq: operator.eq, sympy.Ne: operator.ne, sympy.Lt: operator.lt, sympy.Le: operator.le,
        sympy.Gt: operator.gt, sympy.Ge: operator.ge,
    }


class _SympyToGraph:
    """Emits nodes computing a sympy size expression from bound symbols."""

    def __init__(self, graph: Any, bound: Dict[Any, Node]) -> None:
        self.graph = graph
        self.bound = bound
        self.cache: Dict[Any, Any] = {}

    def __call__(self, expr: Any) -> Any:
        import sympy

        from ..experimental.symbolic_shapes import FloorDiv

        if expr in self.cache:
            return self.cache[expr]
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            return self.bound[expr]
        call = self.graph.call_function
        rel = _relations().get(type(expr))
        if rel is not None:
            out = call(rel, (self(expr.lhs), self(expr.rhs)))
        elif isinstance(expr, (sympy.Add, sympy.Mul)):
            fn = operator.add if isinstance(expr, sympy.Add) else operator.mul
            args = sorted(expr.args, key=lambda e: e.is_number)
            out = self(args[0])
            for a in args[1:]:
                if a.is_Rational and not a.is_Integer:
                    raise NotImplementedError(
                        f"insert_deferred_runtime_asserts: non-integer size expression {expr} in an assert")
                out = call(fn, (out, self(a)))
        elif isinstance(expr, sympy.floor):
            num, den = sympy.together(expr.args[0]).as_numer_denom()
            out = call(operator.floordiv, (self(sympy.expand(num)), self(den)))
        elif getattr(expr, "func", None) is FloorDiv:
            out = call(operator.floordiv, (self(expr.args[0]), self(expr.args[1])))
        elif isinstance(expr, sympy.Mod):
            out = call(operator.mod, (self(expr.args[0]), self(expr.args[1])))
        elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            out = call(operator.pow, (self(expr.base), int(expr.exp)))
        elif isinstance(expr, (sympy.Max, sympy.Min)):
            fn = max if isinstance(expr, sympy.Max) else min
            out = call(fn, tuple(self(a) for a in expr.args))
        elif isinstance(expr, (sympy.And, sympy.Or)):
            fn = operator.and_ if isinstance(expr, sympy.And) else operator.or_
            args = list(expr.args)
            out = self(args[0])
            for a in args[1:]:
                out = call(fn, (out, self(a)))
        elif isinstance(expr, sympy.Not):
            out = call(operator.not_, (self(expr.args[0]),))
        else:
            raise NotImplementedError(
                f"insert_deferred_runtime_asserts: cannot compute {expr} ({type(expr).__name__}) in the graph")
        self.cache[expr] = out
        return out


def insert_deferred_runtime_asserts(gm: Any, shape_env: Any, name: str, export: bool = False) -> None:
    """Insert ``shape_env.deferred_runtime_asserts`` into ``gm``'s graph (in
    place; call ``gm.recompile()`` after). The symbols come from the
    placeholders; the checks go right after them. An assert on a symbol no
    placeholder provides is left out, as torch leaves out those it cannot
    bind. ``name`` names the graph in messages; ``export`` is accepted for
    torch's signature."""
    from ..experimental.proxy_tensor import sym_size
    from ..experimental.symbolic_shapes import SymBool, SymInt
    from ...tensor import Tensor

    graph = gm.graph
    ras_by_symbol: Dict[Any, List[Any]] = {k: list(v) for k, v in
                                           getattr(shape_env, "deferred_runtime_asserts", {}).items()}
    if not any(ras_by_symbol.values()):
        return
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    first_non_placeholder = next((n for n in graph.nodes if n.op != "placeholder"), None)
    bound: Dict[Any, Node] = {}
    made: List[Node] = []

    # conditions already asserted in the graph (a second run of the pass), by their expression
    present: Set[Any] = set()
    for n in graph.nodes:
        if n.op == "call_function" and n.target is _assert_scalar and isinstance(n.args[0], Node):
            cond_val = n.args[0].meta.get("val")
            if isinstance(cond_val, SymBool):
                present.add(cond_val.expr)

    with graph.inserting_before(first_non_placeholder):
        for ph in placeholders:
            val = _get_example_value(ph)
            if isinstance(val, SymInt) and val.expr.is_Symbol and val.expr not in bound:
                bound[val.expr] = ph
            elif isinstance(val, Tensor):
                for i, size in enumerate(val.shape):
                    if isinstance(size, SymInt) and size.expr.is_Symbol and size.expr not in bound:
                        node = graph.call_function(sym_size, (ph, i))
                        node.meta["val"] = size
                        bound[size.expr] = node
                        made.append(node)
        to_graph = _SympyToGraph(graph, bound)
        added: Set[Any] = set()
        for ras in ras_by_symbol.values():
            for ra in ras:
                expr = ra.expr
                if expr in added or expr in present or not expr.free_symbols <= bound.keys():
                    continue
                added.add(expr)
                cond = to_graph(expr)
                if not isinstance(cond, Node):
                    if cond:
                        continue
                    raise RuntimeError(f"{name}: runtime assertion {expr} is statically false")
                cond.meta["val"] = SymBool(expr, shape_env)
                graph.call_function(_assert_scalar, (cond, f"Runtime assertion failed for expression {expr} on node '{cond}'"))

    for node in made:
        if not node.users:
            graph.erase_node(node)
