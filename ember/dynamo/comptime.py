"""``torch._dynamo.comptime``: run Python at *trace* time, with a view of the trace.

``comptime(fn)`` in compiled code calls ``fn(ctx)`` while dynamo traces that line (once per
compile, not per run) and puts nothing in the graph; run eagerly it calls ``fallback_fn()``
instead (default: nothing). ``ctx`` (``ComptimeContext``) shows the trace: ``print_graph()``
(the FX graph built so far), ``graph()``, ``get_local(name)`` (a ``ComptimeVar``:
``as_fake()`` / ``size()`` / ``is_dynamic()`` / ``as_python_constant()``), ``print_locals()``,
``print_guards()``, ``print(v)``, ``graph_break()``, ``assert_static(v)``, ``sleep(s)``,
``parent()``. Shortcuts: ``comptime.print_graph()``, ``comptime.graph_break()``,
``comptime.breakpoint()`` (pdb at trace time, ``ctx`` in scope), ``comptime.print_locals()``,
``comptime.print_guards()``, ``comptime.sleep(s)``.

Handled by the tracer as a builtin (``ember/dynamo/variables/builtin.py``'s handler table);
``fn`` must be a Python function (it is called with the context, not traced)."""
from __future__ import annotations

import builtins
import time

__all__ = ["comptime", "ComptimeContext", "ComptimeVar"]


class ComptimeVar:
    """A value of the frame being traced, as dynamo holds it."""

    def __init__(self, tracker):
        self._v = tracker

    def as_proxy(self):
        from .variables.tensor import TensorVariable
        if isinstance(self._v, TensorVariable):
            return self._v.node
        raise ValueError(f"{self._v} is not a graph value")

    def is_proxy(self) -> bool:
        from .variables.tensor import TensorVariable
        return isinstance(self._v, TensorVariable)

    def as_fake(self):
        """The example value (a fake tensor) dynamo traces the tensor with."""
        if not self.is_proxy():
            raise ValueError(f"{self._v} is not a tensor of the graph")
        return self._v.example

    def size(self, dim=None):
        fake = self.as_fake()
        return fake.size() if dim is None else fake.size(dim)

    def python_type(self):
        return self._v.python_type()

    def is_python_constant(self) -> bool:
        return self._v.is_python_constant()

    def as_python_constant(self):
        if not self._v.is_python_constant():
            raise ValueError(f"{self._v} is not a constant at trace time")
        return self._v.as_python_constant()

    def is_dynamic(self) -> bool:
        """Whether a tensor has symbolic sizes (or a number is symbolic) in this trace."""
        if self.is_proxy():
            return any(not isinstance(s, int) for s in self.as_fake().shape)
        return not self._v.is_python_constant() or not isinstance(self._v.as_python_constant(), (int, float, bool))

    def __repr__(self):
        return f"ComptimeVar({self._v!r})"


class ComptimeContext:
    """The trace as ``comptime`` functions see it (see the module docstring)."""

    def __init__(self, tx):
        self._tx = tx

    def get_local(self, name: str, *, stacklevel: int = 0) -> ComptimeVar:
        tx = self._at(stacklevel)
        if name not in tx.locals:
            raise KeyError(f"comptime: no local {name!r} in {tx.code.co_name} (locals: {', '.join(tx.locals)})")
        v = tx.locals[name]
        if hasattr(v, "contents") and hasattr(v, "set"):        # a cell (the frame's or a closure's)
            v = v.contents
        return ComptimeVar(v.realize() if hasattr(v, "realize") else v)

    def graph_break(self, msg: str = "ComptimeContext.graph_break") -> None:
        from .exc import Unsupported
        raise Unsupported(msg)

    def graph(self):
        return self._tx.output.graph

    def assert_static(self, val: ComptimeVar) -> None:
        if val.is_dynamic():
            raise AssertionError("expected static but got dynamic")

    def print_graph(self, *, verbose: bool = True, file=None) -> None:
        print(self._tx.output.graph.python_code("self").src, file=file)

    def parent(self) -> "ComptimeContext":
        parent = getattr(self._tx, "parent", None)
        if parent is None:
            raise ValueError("comptime: the traced frame has no caller in this trace")
        return ComptimeContext(parent)

    def _at(self, stacklevel):
        tx = self._tx
        for _ in range(stacklevel):
            tx = getattr(tx, "parent", None)
            if tx is None:
                raise ValueError(f"comptime: stacklevel {stacklevel} is beyond the traced frames")
        return tx

    def print(self, val, *, file=None) -> None:
        print(repr(val), file=file)

    def print_locals(self, *, file=None, stacklevel: int = 0) -> None:
        for k, v in self._at(stacklevel).locals.items():
            print(f"{k} = {v!r}", file=file)

    def print_guards(self, *, file=None) -> None:
        print(str(self._tx.output.guards), file=file)

    def print_value_stack(self, *, file=None, stacklevel: int = 0) -> None:
        for v in self._at(stacklevel).stack:
            print(f"- {v!r}", file=file)

    def sleep(self, sec) -> None:
        time.sleep(sec)


class _Comptime:
    """``comptime(fn, fallback_fn)``: see the module docstring."""

    def __call__(self, fn, fallback_fn=lambda: None):
        return fallback_fn()

    # shortcuts (each a function the tracer handles by name; eagerly they do nothing)
    @staticmethod
    def graph_break() -> None:
        return None

    @staticmethod
    def print_graph() -> None:
        return None

    @staticmethod
    def print_locals(*, stacklevel: int = 0) -> None:
        return None

    @staticmethod
    def print_guards() -> None:
        return None

    @staticmethod
    def breakpoint() -> None:
        return None

    @staticmethod
    def sleep(sec) -> None:
        return None

    @staticmethod
    def print(e) -> None:
        print(e)

    def __hash__(self):
        return id(self)


comptime = _Comptime()


# ----------------------------------------------------------------------------- trace-time handlers
def _const(v, what):
    if not v.is_python_constant():
        raise ValueError(f"comptime: {what} must be a constant at trace time")
    return v.as_python_constant()


def _call(tx, args, kwargs):
    from .variables.constant import ConstantVariable
    from .exc import Unsupported
    fn = args[0] if args else kwargs.get("fn")
    if fn is None:
        raise Unsupported("comptime() without a function")
    _real_function(fn)(ComptimeContext(tx))
    return ConstantVariable(None)


def _real_function(fn):
    """The Python function a tracker stands for: an outside function as it is; a ``lambda`` /
    nested ``def`` made in the traced code rebuilt from its code, globals and constant
    closure cells (one closing over a tensor or another traced value cannot be rebuilt)."""
    import types
    from .exc import Unsupported
    from .variables.functions import NestedFunctionVariable, UserFunctionVariable
    if isinstance(fn, UserFunctionVariable):
        return fn.fn
    if isinstance(fn, NestedFunctionVariable):
        cells = []
        for c in (fn.closure.items if fn.closure is not None else []):
            v = c.contents if hasattr(c, "contents") else c
            v = v.realize() if hasattr(v, "realize") else v
            if v is None or not v.is_python_constant():
                raise Unsupported(f"comptime: the function closes over {v}, which is not a constant at trace time")
            cells.append(types.CellType(v.as_python_constant()))
        return types.FunctionType(fn.code, fn.f_globals, fn.name if isinstance(fn.name, str) else "comptime_fn",
                                  None, tuple(cells) or None)
    if fn.is_python_constant() and callable(fn.as_python_constant()):
        return fn.as_python_constant()
    raise Unsupported(f"comptime({fn}): the function must be a Python function")


def _shortcut(action):
    def handler(tx, args, kwargs):
        from .variables.constant import ConstantVariable
        action(ComptimeContext(tx), args, kwargs)
        return ConstantVariable(None)
    return handler


def _breakpoint(ctx, args, kwargs):
    builtins.breakpoint()


def _print(ctx, args, kwargs):
    print(repr(args[0]) if args else None)


def register(handlers, attrs):
    """Install the trace-time handlers into the tracer's builtin table (called by builtin.py)."""
    handlers[comptime] = _call
    table = {
        _Comptime.graph_break: _shortcut(lambda c, a, k: c.graph_break()),
        _Comptime.print_graph: _shortcut(lambda c, a, k: c.print_graph()),
        _Comptime.print_locals: _shortcut(lambda c, a, k: c.print_locals(
            stacklevel=_const(k["stacklevel"], "stacklevel") if "stacklevel" in k else 0)),
        _Comptime.print_guards: _shortcut(lambda c, a, k: c.print_guards()),
        _Comptime.breakpoint: _shortcut(_breakpoint),
        _Comptime.sleep: _shortcut(lambda c, a, k: c.sleep(_const(a[0], "sec"))),
        _Comptime.print: _shortcut(_print),
    }
    handlers.update(table)
    attrs[comptime] = {name: getattr(_Comptime, name) for name in
                       ("graph_break", "print_graph", "print_locals", "print_guards", "breakpoint", "sleep", "print")}
