"""``Proxy``: the stand-in value that records what a program does to it.

Why: symbolic tracing runs the user's Python once with Proxies in place of
tensors. Every operator, method call, attribute read and ember function call
on a Proxy appends a node to the graph instead of computing. Three entry
points cover all of that:

- Python's operator protocol (``__add__``, ``__getitem__``, ...), defined
  below from one table;
- ``__getattr__`` -> :class:`Attribute` (a method call when called, a
  ``getattr`` node otherwise);
- ember's function-override protocol: every public ember function that sees
  an argument whose type defines ``__ember_function__`` hands the call to
  ``type(arg).__ember_function__(func, types, args, kwargs)`` (ember's
  equivalent of ``__torch_function__``).

Control flow is the one thing a Proxy cannot record: ``__bool__``,
``__iter__`` (except tuple unpacking) and ``__len__`` raise
:class:`TraceError` naming the user's source line.
"""

from __future__ import annotations

import copy
import dis
import operator
import os
import sys
from typing import Any, Dict, Optional, Tuple

from . import traceback as fx_traceback
from .node import Node

__all__ = ["Proxy", "Attribute", "TraceError", "TracerBase", "GraphAppendingTracer", "user_frame_summary"]

_FX_DIR = os.path.dirname(os.path.abspath(__file__))
_EMBER_DIR = os.path.dirname(_FX_DIR)


class TraceError(RuntimeError):
    """A traced program did something that cannot be recorded in a graph
    (typically: Python control flow on a traced value)."""


def user_frame_summary(skip_ember: bool = True) -> Tuple[str, int, str, str]:
    """(filename, lineno, function, source line) of the innermost frame that
    is not inside ember itself -- i.e. the user's code that triggered us."""
    import linecache

    f = sys._getframe(1)
    fallback = None
    while f is not None:
        fname = os.path.abspath(f.f_code.co_filename)
        inside = fname.startswith(_EMBER_DIR + os.sep) if skip_ember else fname.startswith(_FX_DIR + os.sep)
        if fallback is None and not fname.startswith(_FX_DIR + os.sep):
            fallback = f
        if not inside:
            break
        f = f.f_back
    f = f or fallback
    if f is None:
        return ("<unknown>", 0, "<unknown>", "")
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name, line)


def _control_flow_error(what: str, proxy: "Proxy") -> TraceError:
    fname, lineno, func, line = user_frame_summary()
    src = f"\n    {line}" if line else ""
    return TraceError(
        f"fx tracing: {what} a traced value ({proxy!r}) at {fname}:{lineno} in {func}(){src}\n"
        "Symbolically traced values cannot be used as inputs to control flow. "
        "Pass the deciding argument through concrete_args, or make the "
        "function/module a leaf so it is called rather than traced."
    )


class TracerBase:
    """The minimal tracer interface a Proxy needs: building nodes and
    turning Python values into node arguments. :class:`ember.fx.Tracer`
    extends it with module handling; :class:`GraphAppendingTracer` lets one
    wrap existing graph nodes in Proxies to write graph-building code with
    ordinary operators."""

    graph: Any
    record_stack_traces: bool = False

    def create_node(self, kind: str, target: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                    name: Optional[str] = None, type_expr: Optional[Any] = None) -> Node:
        node = self.graph.create_node(kind, target, args, kwargs, name, type_expr)
        if fx_traceback.should_preserve_node_meta:
            # a pass re-creating nodes hands their metadata on (fx.traceback)
            current = fx_traceback.current_meta
            stack = current.get("stack_trace")
            if stack:
                node.meta["stack_trace"] = stack
            for field in fx_traceback.COPY_META_FIELDS:
                if field in current:
                    node.meta[field] = copy.copy(current[field])
        if self.record_stack_traces and not node.meta.get("stack_trace"):
            fname, lineno, func, line = user_frame_summary()
            node.meta["stack_trace"] = f'  File "{fname}", line {lineno}, in {func}\n    {line}\n'
        return node

    def proxy(self, node: Node) -> "Proxy":
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                     name: Optional[str] = None, type_expr: Optional[Any] = None,
                     proxy_factory_fn=None) -> "Proxy":
        """Record ``kind``/``target`` applied to (proxy-containing) args and
        return a Proxy for the result."""
        args_ = self.create_arg(tuple(args))
        kwargs_ = self.create_arg(dict(kwargs or {}))
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return proxy_factory_fn(node) if proxy_factory_fn is not None else self.proxy(node)

    def create_arg(self, a: Any) -> Any:
        """Lower a Python value into a node argument (Proxies -> nodes)."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple):
            t = tuple(self.create_arg(x) for x in a)
            return type(a)(*t) if hasattr(a, "_fields") else t
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {self.create_arg(k) if isinstance(k, Proxy) else k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        return a

    def iter(self, obj: "Proxy"):
        raise _control_flow_error("iterating over", obj)

    def to_bool(self, obj: "Proxy") -> bool:
        raise _control_flow_error("branching on (bool() of)", obj)

    def len(self, obj: "Proxy") -> int:
        raise _control_flow_error("taking len() of", obj)


class GraphAppendingTracer(TracerBase):
    """Appends to an existing graph; used when a Proxy is built directly
    from a node (``Proxy(node)``) to write rewrites with operators."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph


def _find_tracer(args: Any, kwargs: Any) -> Optional[TracerBase]:
    found = []

    def visit(a: Any) -> None:
        if isinstance(a, Proxy):
            found.append(a.tracer)
        elif isinstance(a, (tuple, list)):
            for x in a:
                visit(x)
                if found:
                    return
        elif isinstance(a, dict):
            for x in a.values():
                visit(x)
                if found:
                    return

    visit(args)
    if not found:
        visit(kwargs)
    return found[0] if found else None


def _is_tensor_method(func: Any) -> Optional[str]:
    """If ``func`` is a method of ``ember.Tensor`` (the unbound function or
    a property getter), return its name."""
    tensor_mod = sys.modules.get("ember.tensor")
    Tensor = getattr(tensor_mod, "Tensor", None) if tensor_mod is not None else None
    name = getattr(func, "__name__", None)
    if Tensor is None or name is None:
        return None
    for klass in Tensor.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if attr is func or getattr(attr, "__func__", None) is func:
                return name
            if isinstance(attr, property) and attr.fget is func:
                return name
            break
    return None


class Proxy:
    """A traced value: operations on it become graph nodes."""

    def __init__(self, node: Node, tracer: Optional[TracerBase] = None) -> None:
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> "Attribute":
        # Dunder lookups come from Python/libraries probing capabilities
        # (copy, pickle, numpy); they are not user attribute reads.
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        if k in ("node", "tracer"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __call__(self, *args: Any, **kwargs: Any) -> "Proxy":
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        # ``a, b = proxy`` is fine: the bytecode tells us how many items the
        # caller wants, so we can hand out getitem proxies.
        frame = sys._getframe(1)
        n = _unpack_count(frame)
        if n is not None:
            return iter([self[i] for i in range(n)])
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        return self.tracer.len(self)

    def __index__(self) -> int:
        raise _control_flow_error("using as a Python int (__index__)", self)

    def __setitem__(self, key: Any, value: Any) -> None:
        node = self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {}).node
        node.meta["is_impure"] = True

    def __deepcopy__(self, memo):
        raise TraceError("fx tracing: a traced value (Proxy) cannot be deep-copied during tracing")

    def keys(self):
        return self.tracer.create_proxy("call_method", "keys", (self,), {})

    __hash__ = object.__hash__

    @classmethod
    def __ember_function__(cls, func: Any, types: Tuple[type, ...], args: Tuple[Any, ...] = (), kwargs: Optional[Dict[str, Any]] = None) -> "Proxy":
        """ember's override protocol: record ``func(*args, **kwargs)``.

        Tensor methods arrive as the unbound ``ember.Tensor.<name>`` and are
        recorded as ``call_method``; everything else as ``call_function``.
        """
        kwargs = dict(kwargs or {})
        tracer = _find_tracer(args, kwargs)
        if tracer is None:
            raise TraceError(f"fx: __ember_function__ for {func!r} called without any Proxy argument")
        op = getattr(func, "_ember_op", None)
        if op is not None:
            args, kwargs = _normalize_op_args(op, tuple(args), kwargs)
            if not getattr(op, "function", True) and getattr(op, "method", False):
                # a Tensor-only method (e.g. ``add_``): record it as one
                return tracer.create_proxy("call_method", op.public_name, args, kwargs)
            return tracer.create_proxy("call_function", func, args, kwargs)
        method = _is_tensor_method(func)
        if method is not None:
            return tracer.create_proxy("call_method", method, args, kwargs)
        return tracer.create_proxy("call_function", func, args, kwargs)


def _same_default(v: Any, d: Any) -> bool:
    if v is d:
        return True
    if isinstance(v, Proxy) or type(v) is not type(d):
        return False
    try:
        return bool(v == d)
    except Exception:
        return False


def _normalize_op_args(op: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """ember's dispatcher hands overrides the fully bound argument tuple
    (defaults and keyword-only arguments included, in schema order). Turn
    it back into what a user would write -- positional arguments up to the
    last non-default one, keyword-only ones as kwargs when not defaulted --
    so graphs read like the source and regenerated code calls the binding
    correctly."""
    params = getattr(op, "params", None)
    if params is None or kwargs or len(args) != len(params):
        return args, kwargs
    required = getattr(sys.modules.get("ember.ops.registry"), "_REQUIRED", None)
    pos: list = []
    kw: Dict[str, Any] = {}
    for p, v in zip(params, args):
        has_default = p.default is not required
        if p.kwonly:
            if not (has_default and _same_default(v, p.default)):
                kw[p.name] = v
        else:
            pos.append((v, has_default and _same_default(v, p.default)))
    while pos and pos[-1][1]:
        pos.pop()
    return tuple(v for v, _ in pos), kw


class Attribute(Proxy):
    """``proxy.name``: becomes ``call_method`` if called, otherwise a
    ``getattr`` node, created lazily on first use."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Optional[Node] = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        if self._node is None:
            import builtins

            self._node = self.tracer.create_proxy("call_function", builtins.getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _unpack_count(frame) -> Optional[int]:
    """If ``frame`` is executing ``UNPACK_SEQUENCE n``, return n."""
    try:
        for inst in dis.get_instructions(frame.f_code):
            if inst.offset == frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return inst.argval
                return None
    except Exception:
        return None
    return None


# -- operator protocol -------------------------------------------------------
_BINARY = [
    "add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift",
    "and_", "or_", "xor", "matmul",
]
_COMPARE = ["eq", "ne", "lt", "gt", "le", "ge"]
_UNARY = ["neg", "pos", "invert", "abs"]


def _install_magic() -> None:
    def make_forward(fn):
        def method(self, *rest):
            return self.tracer.create_proxy("call_function", fn, (self,) + rest, {})
        return method

    def make_reflected(fn):
        def method(self, other):
            return self.tracer.create_proxy("call_function", fn, (other, self), {})
        return method

    for name in _BINARY + _COMPARE + _UNARY + ["getitem"]:
        fn = getattr(operator, name)
        dunder = f"__{name.rstrip('_')}__"
        m = make_forward(fn)
        m.__name__ = dunder
        setattr(Proxy, dunder, m)
    for name in _BINARY:
        fn = getattr(operator, name)
        dunder = f"__r{name.rstrip('_')}__"
        m = make_reflected(fn)
        m.__name__ = dunder
        setattr(Proxy, dunder, m)


_install_magic()
