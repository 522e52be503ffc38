"""``Graph``: an ordered list of :class:`~ember.fx.Node` plus editing tools.

Why this shape: every compiler stage in ember (dynamo, aot, inductor) hands
graphs to the next one, and most passes are small rewrites ("insert a node
before this one, redirect the users, erase the old one"). The API is
therefore centred on safe local edits -- an insertion point managed by
``inserting_before/after``, ``erase_node`` that refuses to orphan users, and a
``lint`` that checks every invariant a rewrite might break.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from ._codegen import CodeGen, PythonCode, generate_python
from ._names import Namespace, target_to_name
from .node import OPCODES, Argument, Node, Target, map_arg

__all__ = ["Graph", "GraphLintError"]


class GraphLintError(RuntimeError):
    """Raised by :meth:`Graph.lint` when a graph invariant is violated."""


class _NodeList:
    """Live view of a graph's nodes; safe to iterate while erasing the
    current node (erased nodes keep their forward pointer)."""

    def __init__(self, graph: "Graph", direction: str = "_next") -> None:
        self._graph = graph
        self._dir = direction

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = getattr(root, self._dir)
        while cur is not root:
            if not cur._erased:
                yield cur
            # An erased node keeps pointing at its old neighbours, so erasing
            # the node just yielded does not end the iteration.
            cur = getattr(cur, self._dir)

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, "_prev" if self._dir == "_next" else "_next"))

    def __getitem__(self, idx):
        return list(self)[idx]

    def __repr__(self) -> str:
        return f"[{', '.join(n.name for n in self)}]"


class Graph:
    """A program as a list of nodes: inputs (placeholders), computation
    (get_attr / call_*), and one ``output``."""

    def __init__(self, owning_module: Optional[Any] = None, tracer_cls: Optional[type] = None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._namespace = Namespace()
        self._insert: Callable[[Node], None] = self._root.prepend
        self._owning_module = owning_module
        self._tracer_cls = tracer_cls
        #: call targets that dead-code elimination must keep (see Node.is_impure)
        self.impure_targets: Set[Any] = set()
        self._codegen: CodeGen = CodeGen()

    # -- basic properties --------------------------------------------------
    @property
    def nodes(self) -> _NodeList:
        """All nodes in program order (a live view)."""
        return _NodeList(self)

    @property
    def owning_module(self) -> Optional[Any]:
        """The GraphModule this graph belongs to, if any."""
        return self._owning_module

    @owning_module.setter
    def owning_module(self, mod: Optional[Any]) -> None:
        self._owning_module = mod

    def find_nodes(self, *, op: str, target: Optional[Target] = None) -> List[Node]:
        """Nodes with the given ``op`` (and ``target``, when given)."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    @property
    def output_node(self) -> Node:
        for n in reversed(self.nodes):
            if n.op == "output":
                return n
        raise RuntimeError("fx: graph has no output node")

    # -- node creation -----------------------------------------------------
    def _target_to_str(self, target: Target) -> str:
        return target_to_name(target)

    def create_node(
        self,
        op: str,
        target: Target,
        args: Optional[Tuple[Argument, ...]] = None,
        kwargs: Optional[Dict[str, Argument]] = None,
        name: Optional[str] = None,
        type_expr: Optional[Any] = None,
        *,
        _trusted: bool = False,
    ) -> Node:
        """Create a node and insert it at the current insertion point.

        ``name`` is a hint: it is made unique within this graph (``mul``,
        ``mul_1``, ...). Without a hint the name is derived from ``target``.
        ``_trusted``: the caller built ``args``/``kwargs`` from this graph's live nodes (a
        cache rebuilding a stored graph), so the per-argument ownership check is skipped.
        """
        if op not in OPCODES:
            raise ValueError(f"fx: unknown op {op!r}; expected one of {OPCODES}")
        args = () if args is None else tuple(args)
        kwargs = {} if kwargs is None else dict(kwargs)
        for a in (() if _trusted else _flatten_nodes((args, kwargs))):
            if a.graph is not self:
                raise RuntimeError(
                    f"fx: argument node {a.name!r} belongs to another graph; "
                    "use node_copy/graph_copy to bring it into this graph"
                )
            if a._erased:
                raise RuntimeError(f"fx: argument node {a.name!r} has been erased")
        candidate = name if name is not None else self._target_to_str(target)
        unique = self._namespace.create_name(candidate, None)
        n = Node(self, unique, op, target, args, kwargs, type_expr)
        self._insert(n)
        self._len += 1
        owner = self._owning_module
        if owner is not None:
            hooks = getattr(owner, "__dict__", {}).get("_create_node_hooks")
            if hooks:
                for hook in list(hooks):
                    hook(n)
        return n

    def placeholder(self, name: str, type_expr: Optional[Any] = None, default_value: Any = inspect.Signature.empty) -> Node:
        """A graph input called ``name``; ``default_value`` makes it optional."""
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Optional[Any] = None) -> Node:
        """Fetch the attribute at dotted path ``qualified_name`` of the owning module."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_function(self, the_function: Callable[..., Any], args=None, kwargs=None, type_expr=None) -> Node:
        """Call a free function (``operator.add``, ``ember.relu``, ...)."""
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        """Call method ``method_name`` on ``args[0]``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_module(self, module_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        """Call the submodule at dotted path ``module_name``."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def output(self, result: Argument, type_expr: Optional[Any] = None) -> Node:
        """The graph's return value."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    # -- insertion point ---------------------------------------------------
    @contextlib.contextmanager
    def _insert_point(self, fn: Callable[[Node], None]):
        saved = self._insert
        self._insert = fn
        try:
            yield
        finally:
            self._insert = saved

    def inserting_before(self, n: Optional[Node] = None):
        """Context manager: new nodes go right before ``n`` (default: at the
        start of the graph)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("fx: inserting_before: node belongs to another graph")
        return self._insert_point(n.prepend)

    def inserting_after(self, n: Optional[Node] = None):
        """Context manager: new nodes go right after ``n`` (default: at the
        end of the graph).

        Deliberate difference from torch.fx: successive creations inside one
        ``inserting_after`` block come out in creation order (torch.fx puts
        each one directly after ``n``, reversing them), so building a chain
        ``a = ...; b = f(a)`` never yields a use before its definition."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("fx: inserting_after: node belongs to another graph")
        # Insert after n == insert before n's successor *at the time of each
        # insertion*: track the last inserted node so a sequence of creations
        # comes out in order.
        state = {"last": n}

        def insert(new: Node) -> None:
            state["last"].append(new)
            state["last"] = new

        return self._insert_point(insert)

    # -- erasure -------------------------------------------------------------
    def erase_node(self, to_erase: Node) -> None:
        """Remove a node that nobody uses any more."""
        if to_erase.graph is not self:
            raise RuntimeError(f"fx: erase_node: node {to_erase.name!r} belongs to another graph")
        if to_erase._erased:
            raise RuntimeError(f"fx: erase_node: node {to_erase.name!r} was already erased")
        if to_erase.users:
            users = ", ".join(u.name for u in to_erase.users)
            raise RuntimeError(
                f"fx: cannot erase node {to_erase.name!r}: it still has users [{users}]; "
                "call replace_all_uses_with first"
            )
        owner = self._owning_module
        if owner is not None:
            hooks = getattr(owner, "__dict__", {}).get("_erase_node_hooks")
            if hooks:
                for hook in list(hooks):
                    hook(to_erase)
        to_erase._set_args_kwargs((), {})
        prv, nxt = to_erase._prev, to_erase._next
        to_erase._remove_from_list()
        # keep the old neighbours so a live iterator can continue past it
        to_erase._prev, to_erase._next = prv, nxt
        to_erase._erased = True
        self._len -= 1

    # -- copying -------------------------------------------------------------
    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x) -> Node:
        """Copy ``node`` (possibly from another graph) into this graph.

        ``arg_transform`` maps each input node of the original to the value the
        copy should read (typically the copy of that input)."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = copy.copy(node.meta)
        return new

    def graph_copy(self, g: "Graph", val_map: Dict[Node, Node], return_output_node: bool = False) -> Any:
        """Append a copy of every node of ``g`` except its output.

        ``val_map`` is filled with original -> copy and may be pre-seeded
        (e.g. to substitute placeholders). Returns the copied output value
        (or ``None`` when ``g`` has no output)."""
        for n in g.nodes:
            if n in val_map:
                continue
            if n.op == "output":
                out = map_arg(n.args[0], lambda x: val_map[x])
                if return_output_node:
                    return self.output(out, n.type), out
                return out
            val_map[n] = self.node_copy(n, lambda x: val_map[x])
        return None

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Graph":
        g = Graph(tracer_cls=self._tracer_cls)
        memo[id(self)] = g
        vm: Dict[Node, Node] = {}
        out = g.graph_copy(self, vm, return_output_node=True)
        if out is not None:
            out_node = out[0]
            out_node.meta = copy.copy(self.output_node.meta)
        g.impure_targets = set(self.impure_targets)
        g._codegen = copy.deepcopy(self._codegen, memo)
        return g

    # -- passes ---------------------------------------------------------------
    def eliminate_dead_code(self, is_impure_node: Optional[Callable[[Node], bool]] = None) -> bool:
        """Erase nodes without users that are not impure. Returns True if the
        graph changed. See :meth:`Node.is_impure` for what is kept."""
        from .passes.dce import eliminate_dead_code

        return eliminate_dead_code(self, is_impure_node)

    def lint(self) -> None:
        """Check every invariant; raise :class:`GraphLintError` on the first
        violation. Cheap enough to call after every pass in tests."""
        seen_names: Set[str] = set()
        defined: Set[Node] = set()
        outputs = []
        # linked list integrity
        count = 0
        cur = self._root
        while True:
            nxt = cur._next
            if nxt._prev is not cur:
                raise GraphLintError(f"fx lint: broken node list around {cur.name!r}")
            cur = nxt
            if cur is self._root:
                break
            count += 1
            if count > self._len + 1:
                raise GraphLintError("fx lint: node list is cyclic or longer than recorded")
        if count != self._len:
            raise GraphLintError(f"fx lint: graph records {self._len} nodes but holds {count}")

        for node in self.nodes:
            if node.graph is not self:
                raise GraphLintError(f"fx lint: node {node.name!r} does not point back to this graph")
            if node.op not in OPCODES:
                raise GraphLintError(f"fx lint: node {node.name!r} has unknown op {node.op!r}")
            if node.name in seen_names:
                raise GraphLintError(f"fx lint: duplicate node name {node.name!r}")
            seen_names.add(node.name)
            if node.op in ("placeholder", "get_attr", "call_method", "call_module") and not isinstance(node.target, str):
                raise GraphLintError(f"fx lint: node {node.name!r} ({node.op}) needs a string target")
            if node.op == "call_function" and not callable(node.target):
                raise GraphLintError(f"fx lint: node {node.name!r} has a non-callable target")
            for inp in _flatten_nodes((node.args, node.kwargs)):
                if inp.graph is not self:
                    raise GraphLintError(
                        f"fx lint: node {node.name!r} reads {inp.name!r}, which belongs to another graph"
                    )
                if inp._erased:
                    raise GraphLintError(f"fx lint: node {node.name!r} reads erased node {inp.name!r}")
                if inp not in defined:
                    raise GraphLintError(
                        f"fx lint: node {node.name!r} uses {inp.name!r} before its definition"
                    )
                if node not in inp.users:
                    raise GraphLintError(
                        f"fx lint: {inp.name!r} is read by {node.name!r} but does not list it as a user"
                    )
            for user in node.users:
                if user.graph is not self:
                    raise GraphLintError(
                        f"fx lint: node {node.name!r} has user {user.name!r} from another graph"
                    )
                if user._erased:
                    raise GraphLintError(f"fx lint: node {node.name!r} has erased user {user.name!r}")
                if node not in user._input_nodes:
                    raise GraphLintError(
                        f"fx lint: node {node.name!r} lists {user.name!r} as a user, but it does not read it"
                    )
            if node.op == "output":
                outputs.append(node)
            defined.add(node)
        if not outputs:
            raise GraphLintError("fx lint: graph has no output node")
        if len(outputs) > 1:
            raise GraphLintError(f"fx lint: graph has {len(outputs)} output nodes")

        owner = self._owning_module
        if owner is not None:
            for node in self.nodes:
                if node.op in ("get_attr", "call_module"):
                    if not _has_path(owner, node.target):
                        raise GraphLintError(
                            f"fx lint: node {node.name!r} refers to {node.target!r}, "
                            "which the owning module does not have"
                        )

    # -- printing / codegen -------------------------------------------------
    def python_code(self, root_module: str = "self") -> PythonCode:
        """Source of ``def forward(<root_module>, ...)`` plus its globals
        (shaped by this graph's :class:`CodeGen`, see :meth:`set_codegen`)."""
        return generate_python(self, root_module, codegen=self._codegen)

    def set_codegen(self, codegen: CodeGen) -> None:
        """Generate this graph's Python through ``codegen`` (a
        :class:`~ember.fx.CodeGen` subclass changing the calling convention).
        A GraphModule picks it up on its next ``recompile()``."""
        if not isinstance(codegen, CodeGen):
            raise TypeError(f"fx: set_codegen expects an ember.fx.CodeGen, got {type(codegen).__name__}")
        self._codegen = codegen

    def process_inputs(self, *args: Any) -> Any:
        """Map arguments of the generated function to placeholder values
        (the codegen's ``process_inputs``)."""
        return self._codegen.process_inputs(*args)

    def process_outputs(self, out: Any) -> Any:
        """Map the graph's output value to the generated function's result."""
        return self._codegen.process_outputs(out)

    @contextlib.contextmanager
    def on_generate_code(self, make_transformer: Callable[[Optional[Callable[[List[str]], List[str]]]], Callable[[List[str]], List[str]]]):
        """Within the block, generated code's body lines (a list of strings,
        one per statement) pass through ``make_transformer(previous)``; the
        previous transformer (or None) is restored on exit. Call
        ``gm.recompile()`` inside the block to apply it."""
        saved = self._codegen._body_transformer
        try:
            self._codegen._body_transformer = make_transformer(saved)
            yield
        finally:
            self._codegen._body_transformer = saved

    def print_tabular(self) -> None:
        """Print the nodes as a table (opcode, name, target, args, kwargs)."""
        from .passes.tabular import format_tabular

        print(format_tabular(self))

    def __str__(self) -> str:
        lines = ["graph():"]
        for n in self.nodes:
            lines.append("    " + n.format_node())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ember.fx.Graph with {len(self)} nodes>"

    def __len__(self) -> int:
        return self._len


def _flatten_nodes(a: Any) -> List[Node]:
    out: List[Node] = []
    map_arg(a, lambda n: out.append(n) or n)
    return out


def _has_path(obj: Any, target: str) -> bool:
    cur = obj
    for part in target.split("."):
        if not hasattr(cur, part):
            return False
        cur = getattr(cur, part)
    return True
