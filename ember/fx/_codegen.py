"""Python source generation for a :class:`~ember.fx.Graph`.

Why generate source at all (rather than interpret): the source *is* the
readable artefact -- ``gm.code`` is what a user reads to see what was traced,
and executing it is also the fastest way to run a graph in Python. The style
follows torch.fx so that the two can be compared line by line:

- one statement per node, named after the node (``add = mul + 3``);
- Python operators for ``operator.*`` targets, ``x.attr`` for
  ``getattr(x, "attr")``, ``x.relu()`` for methods, ``self.linear(x)`` for
  submodules, ``ember.relu(x)`` for ember functions;
- after the last use of a value, ``;  x = None`` frees it, so intermediate
  tensors die as early as in eager mode.
"""

from __future__ import annotations

import builtins
import inspect
import math
import operator
import sys
import types
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from ._names import Namespace, is_ember_object, qualified_name, snake_case
from .node import Node, map_arg

__all__ = ["CodeGen", "PythonCode", "generate_python", "format_target", "MAGIC_METHODS", "INPLACE_METHODS"]


class PythonCode(NamedTuple):
    """Generated source plus the globals it must be executed with."""

    src: str
    globals: Dict[str, Any]


# operator function name -> template; one statement per node means the
# operands are always simple names or literals, so the only parenthesisation
# needed is of negative literals (``-2.0 ** x`` is ``-(2.0 ** x)``): see
# ``_operand``.
MAGIC_METHODS: Dict[str, str] = {
    "add": "{} + {}",
    "sub": "{} - {}",
    "mul": "{} * {}",
    "floordiv": "{} // {}",
    "truediv": "{} / {}",
    "mod": "{} % {}",
    "pow": "{} ** {}",
    "lshift": "{} << {}",
    "rshift": "{} >> {}",
    "and_": "{} & {}",
    "or_": "{} | {}",
    "xor": "{} ^ {}",
    "getitem": "{}[{}]",
    "matmul": "{} @ {}",
    "eq": "{} == {}",
    "ne": "{} != {}",
    "lt": "{} < {}",
    "gt": "{} > {}",
    "le": "{} <= {}",
    "ge": "{} >= {}",
    "neg": "-{}",
    "pos": "+{}",
    "invert": "~{}",
}
UNARY = {"neg", "pos", "invert"}

INPLACE_METHODS: Dict[str, str] = {
    "iadd": "{} += {}",
    "isub": "{} -= {}",
    "imul": "{} *= {}",
    "itruediv": "{} /= {}",
    "ifloordiv": "{} //= {}",
    "imod": "{} %= {}",
    "ipow": "{} **= {}",
    "iand": "{} &= {}",
    "ior": "{} |= {}",
    "ixor": "{} ^= {}",
    "ilshift": "{} <<= {}",
    "irshift": "{} >>= {}",
    "imatmul": "{} @= {}",
}


def format_target(base: str, target: str) -> str:
    """``self`` + ``seq.0.conv`` -> ``getattr(self.seq, "0").conv``."""
    r = base
    for part in target.split("."):
        if part.isidentifier():
            r = f"{r}.{part}"
        else:
            r = f'getattr({r}, "{part}")'
    return r


_LITERAL_TYPES = (bool, int, str, bytes, type(None), type(Ellipsis), complex)


def _device_from_call(type: str, index: Any = None) -> Any:
    """``device(type='cuda', index=0)`` in generated code (a device's repr) -> ``ember.device``."""
    from ..types import device
    return device(type if index is None else f"{type}:{index}")


class _Emitter:
    """Turns argument values into source text, registering globals."""

    def __init__(self, namespace: Namespace) -> None:
        self.ns = namespace
        self.globals: Dict[str, Any] = {
            "inf": math.inf,
            "nan": math.nan,
            "NoneType": type(None),
        }
        ember = sys.modules.get("ember")
        if ember is not None:
            self.globals["ember"] = ember

    def add_global(self, name_hint: str, obj: Any) -> str:
        if getattr(builtins, getattr(obj, "__name__", "") or "", None) is obj and isinstance(
            obj, (types.BuiltinFunctionType, type)
        ):
            return obj.__name__
        if is_ember_object(obj) and callable(obj):
            try:
                q = qualified_name(obj)
            except RuntimeError:
                q = None
            if q is not None and q.startswith("ember.") and (self._resolves(q, obj) or self._stands_for(q, obj)):
                return q
        name = self.ns.create_name(name_hint, obj)
        if name in self.globals and self.globals[name] is not obj:
            name = self.ns.create_name(name_hint + "_", None)
        self.globals[name] = obj
        return name

    @staticmethod
    def _resolves(dotted: str, obj: Any) -> bool:
        cur: Any = sys.modules.get("ember")
        for part in dotted.split(".")[1:]:
            cur = getattr(cur, part, None)
            if cur is None:
                return False
        return cur is obj

    @classmethod
    def _stands_for(cls, dotted: str, obj: Any) -> bool:
        """Whether the name ``qualified_name`` gave an ember op's binding runs that op: the public
        entry point taking its arguments (``ember.cat``) or its ``ember.ops.aten`` overload."""
        op = getattr(obj, "_ember_op", None)
        if op is None or getattr(op, "binding", None) is not obj:
            return False
        cur: Any = sys.modules.get("ember")
        for part in dotted.split(".")[1:]:
            cur = getattr(cur, part, None)
            if cur is None:
                return False
        if getattr(cur, "op", None) is op and getattr(cur, "_overloadname", None) == "default":
            return True
        return dotted == f"ember.{op.public_name}"

    def callable_name(self, fn: Any) -> str:
        try:
            hint = qualified_name(fn)
        except RuntimeError:
            hint = snake_case(getattr(fn, "__name__", type(fn).__name__))
        return self.add_global(hint, fn)

    def emit(self, a: Any) -> str:
        if isinstance(a, Node):
            return a.name
        if isinstance(a, tuple):
            inner = ", ".join(self.emit(x) for x in a)
            if hasattr(a, "_fields"):
                return f"{self.callable_name(type(a))}({inner})"
            return "(" + inner + ("," if len(a) == 1 else "") + ")"
        if isinstance(a, list):
            return "[" + ", ".join(self.emit(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.emit(k)}: {self.emit(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({self.emit(a.start)}, {self.emit(a.stop)}, {self.emit(a.step)})"
        if isinstance(a, float):
            if math.isinf(a):
                return "inf" if a > 0 else "-inf"
            if math.isnan(a):
                return "nan"
            return repr(a)
        if isinstance(a, _LITERAL_TYPES):
            return repr(a)
        if isinstance(a, (types.FunctionType, types.BuiltinFunctionType, type)) or (
            callable(a) and hasattr(a, "__qualname__")
        ):
            return self.callable_name(a)
        if type(a).__name__ == "device" and type(a).__module__ == "ember.types":
            # torch's spelling, ``device(type='cpu')``: the global ``device`` (reserved for it)
            # builds the device back from that call
            self.globals.setdefault("device", _device_from_call)
            if self.globals["device"] is _device_from_call:
                return repr(a)
        # Anything else (dtypes, devices, opaque constants): a global holding
        # the object itself, named after its repr where that is readable.
        r = repr(a)
        if r.startswith("ember.") and self._resolves(r, a):
            return r
        hint = r if r.isidentifier() else "_" + snake_case(type(a).__name__) + "_constant"
        return self.add_global(hint, a)

    def emit_call_args(self, args, kwargs) -> str:
        parts = [self.emit(a) for a in args]
        parts += [f"{k} = {self.emit(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)


def _operand(em: "_Emitter", a: Any) -> str:
    """An operator's operand as source: a negative literal parenthesised, since ``**`` binds
    tighter than unary minus (``operator.pow(-2.0, x)`` as ``-2.0 ** x`` would be
    ``-(2.0 ** x)``)."""
    s = em.emit(a)
    return f"({s})" if s.startswith("-") else s


class CodeGen:
    """How a graph becomes the source of a Python function; subclass to change it.

    Why a class with hooks rather than one function: some graphs need a
    different calling convention than "one parameter per placeholder" (take
    one list and unpack it, return a list, ...). A subclass installed with
    :meth:`ember.fx.Graph.set_codegen` overrides only the parts that differ:

    - :meth:`gen_fn_def` -- the ``def`` line(s), given the parameter strings
      (``free_vars``, without ``self``) and the return annotation;
    - :meth:`generate_output` -- the ``return`` statement for the output value;
    - :meth:`additional_globals` -- extra ``(name, object)`` pairs the
      generated source refers to;
    - :meth:`process_inputs` / :meth:`process_outputs` -- turn the new calling
      convention's inputs into the graph's placeholder values and the graph's
      output into the new convention's result, so that running the graph node
      by node (:class:`~ember.fx.Interpreter`) agrees with the generated code.

    The hook names and signatures are torch.fx's, so a torch CodeGen subclass
    ports by changing its imports.
    """

    #: the parameter naming the root module in the generated ``def``
    _root_module = "self"

    def __init__(self) -> None:
        self._body_transformer: Optional[Callable[[List[str]], List[str]]] = None
        self._func_name: str = "forward"

    def gen_fn_def(self, free_vars: List[str], maybe_return_annotation: str, *, expanded_def: bool = False) -> str:
        """``def forward(self, <free_vars>)<annotation>:``; ``self`` is added
        when ``free_vars`` does not start with it."""
        root = self._root_module
        if not free_vars or free_vars[0] != root:
            free_vars.insert(0, root)
        if expanded_def:
            args = "".join(f"    {a},\n" for a in free_vars)
            return f"def {self._func_name}(\n{args}){maybe_return_annotation}:"
        return f"def {self._func_name}({', '.join(free_vars)}){maybe_return_annotation}:"

    def generate_output(self, output_args: Any, *, descs: Any = None, repr_fn: Optional[Callable[[Any], str]] = None) -> str:
        """The (unindented) ``return`` statement for ``output_args``."""
        return f"return {(repr_fn or repr)(output_args)}"

    def process_inputs(self, *args: Any) -> Any:
        """Map a call's arguments to the graph's placeholder values."""
        return args

    def process_outputs(self, outputs: Any) -> Any:
        """Map the graph's output value to what the generated function returns."""
        return outputs

    def additional_globals(self) -> List[Tuple[str, Any]]:
        """Extra ``(name, object)`` globals the generated source uses."""
        return []

    def _gen_python_code(self, graph: Any, root_module: str = "self") -> PythonCode:
        return generate_python(graph, root_module, codegen=self)


class _PyTreeInfo(NamedTuple):
    """What :class:`_PyTreeCodeGen` needs: the original parameter names and
    the pytree structure of the inputs and of the output."""

    orig_args: List[str]
    in_spec: Any
    out_spec: Any


class _PyTreeCodeGen(CodeGen):
    """Code for a graph traced with :data:`~ember.fx.PH` in ``concrete_args``:
    ``forward`` takes the original (structured) arguments, flattens them to the
    graph's placeholders with ``fx_pytree.tree_flatten_spec`` and rebuilds the
    output structure with ``pytree.tree_unflatten``. The specs are read from
    the GraphModule (``self._in_spec`` / ``self._out_spec``), as in torch.fx."""

    def __init__(self, pytree_info: _PyTreeInfo) -> None:
        super().__init__()
        self.pytree_info = pytree_info

    def process_inputs(self, *inputs: Any) -> Any:
        from ember.utils import _pytree as pytree

        return pytree.tree_leaves(inputs)

    def process_outputs(self, out: Any) -> Any:
        from ember.utils import _pytree as pytree

        if self.pytree_info is None or self.pytree_info.out_spec is None:
            return out
        if not isinstance(out, (list, tuple)):
            out = [out]
        return pytree.tree_unflatten(out, self.pytree_info.out_spec)

    def gen_fn_def(self, free_vars: List[str], maybe_return_annotation: str, *, expanded_def: bool = False) -> str:
        if self.pytree_info is None:
            return super().gen_fn_def(free_vars, maybe_return_annotation, expanded_def=expanded_def)
        orig = list(self.pytree_info.orig_args)
        fn_def = super().gen_fn_def(list(orig), maybe_return_annotation)
        if free_vars:
            # parameter strings may carry `` : type`` and `` = default``
            names = [v.split(":")[0].split("=")[0].strip() for v in free_vars]
            fn_def += (
                f"\n    {', '.join(names)}, = fx_pytree.tree_flatten_spec([{', '.join(orig)}], "
                f"{self._root_module}._in_spec)"
            )
        return fn_def

    def generate_output(self, output_args: Any, *, descs: Any = None, repr_fn: Optional[Callable[[Any], str]] = None) -> str:
        r = repr_fn or repr
        if self.pytree_info is not None and self.pytree_info.out_spec is not None:
            return f"return pytree.tree_unflatten({r(output_args)}, {self._root_module}._out_spec)"
        return super().generate_output(output_args, repr_fn=repr_fn)

    def additional_globals(self) -> List[Tuple[str, Any]]:
        from ember.utils import _pytree as pytree

        from . import _pytree as fx_pytree

        return [("fx_pytree", fx_pytree), ("pytree", pytree)]


def _call_with_supported_kwargs(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a (possibly user-overridden) hook, passing only the keyword
    arguments its signature accepts."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return method(*args, **kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return method(*args, **kwargs)
    return method(*args, **{k: v for k, v in kwargs.items() if k in params})


_DEFAULT_CODEGEN_METHODS = ("gen_fn_def", "generate_output", "additional_globals")


def generate_python(graph: Any, root_module: str = "self", fn_name: str = "forward", codegen: Optional["CodeGen"] = None) -> PythonCode:
    """Generate ``def forward(self, ...)`` source for ``graph`` (through the
    hooks of ``codegen``, default: the graph's own :class:`CodeGen`)."""
    if codegen is None:
        codegen = getattr(graph, "_codegen", None)
    # the default hooks are inlined below (the compiler generates code for
    # many graphs); a subclass overriding any of them goes through the hooks
    custom = codegen is not None and (
        getattr(codegen, "_body_transformer", None) is not None
        or any(getattr(type(codegen), m) is not getattr(CodeGen, m) for m in _DEFAULT_CODEGEN_METHODS)
    )
    ns = Namespace()
    ns.mark_used(root_module)
    nodes = list(graph.nodes)
    for n in nodes:
        ns.mark_used(n.name)
    em = _Emitter(ns)

    # Last-use analysis: walking backwards, the first time we meet a read of
    # ``n`` is its last use in program order.
    last_use: Dict[Node, Node] = {}
    frees: Dict[Node, List[Node]] = {}

    for user in reversed(nodes):
        def reg(n: Node, user: Node = user) -> Node:
            if n not in last_use:
                last_use[n] = user
                frees.setdefault(user, []).append(n)
            return n

        map_arg(user.args, reg)
        map_arg(user.kwargs, reg)

    params: List[str] = []
    lines: List[str] = []
    ret_ann = ""
    for node in nodes:
        stmt = None
        if node.op == "placeholder":
            target = node.target
            bare = target.lstrip("*")
            ann = _annotation(node.type, em)
            if node.args:
                params.append(f"{target}{ann} = {em.emit(node.args[0])}")
            else:
                params.append(f"{target}{ann}")
            if node.name != bare:
                stmt = f"{node.name} = {bare}"
        elif node.op == "get_attr":
            stmt = f"{node.name} = {format_target(root_module, node.target)}"
        elif node.op == "call_method":
            if not node.args:
                raise RuntimeError(f"fx codegen: call_method node {node.name} has no receiver argument")
            stmt = (
                f"{node.name} = {format_target(em.emit(node.args[0]), node.target)}"
                f"({em.emit_call_args(node.args[1:], node.kwargs)})"
            )
        elif node.op == "call_module":
            stmt = (
                f"{node.name} = {format_target(root_module, node.target)}"
                f"({em.emit_call_args(node.args, node.kwargs)})"
            )
        elif node.op == "call_function":
            stmt = _emit_call_function(node, em)
        elif node.op == "output":
            ret_ann = _annotation(node.type, em)
            if custom:
                stmt = _call_with_supported_kwargs(codegen.generate_output, node.args[0], repr_fn=em.emit)
            else:
                stmt = f"return {em.emit(node.args[0])}"
        else:
            raise RuntimeError(f"fx codegen: unknown op {node.op!r}")

        if node.op not in ("placeholder", "output"):
            dead = list(frees.get(node, []))
            if not node.users:
                dead.append(node)
            if dead:
                stmt += ";  " + " = ".join(d.name for d in dead) + " = None"
        if stmt is not None:
            lines.append(stmt)

    if not lines:
        lines.append("pass")
    ret = f" -> {ret_ann[3:]}" if ret_ann else ""
    if not custom:
        body = "".join(f"    {ln}\n" for ln in lines)
        src = f"\n\n\ndef {fn_name}({', '.join([root_module] + params)}){ret}:\n{body}    "
        return PythonCode(src, em.globals)

    # A user CodeGen: run its hooks (torch.fx's order: body transformer,
    # additional globals, then the def line).
    body_lines = [ln + "\n" for ln in lines]
    if codegen._body_transformer is not None:
        body_lines = codegen._body_transformer(body_lines)
    for name, value in codegen.additional_globals():
        em.add_global(name, value)
    saved_root, saved_name = codegen._root_module, codegen._func_name
    codegen._root_module = root_module
    if fn_name != "forward":
        codegen._func_name = fn_name
    try:
        prologue = _call_with_supported_kwargs(codegen.gen_fn_def, params, ret, expanded_def=False)
    finally:
        codegen._root_module, codegen._func_name = saved_root, saved_name
    code = "".join(body_lines).lstrip("\n").split("\n")
    body = "\n".join("    " + ln for ln in code)
    return PythonCode(f"\n\n\n{prologue}\n{body}", em.globals)


def _annotation(t: Any, em: _Emitter) -> str:
    """`` : int`` / `` : ember.Tensor`` for plain class annotations. Other
    annotations (typing generics, strings) are left out of the source: they
    do not affect execution and are not always re-creatable by name."""
    if t is None or not isinstance(t, type) or isinstance(t, types.GenericAlias):
        return ""
    return f" : {em.callable_name(t)}"


def _emit_call_function(node: Node, em: _Emitter) -> str:
    target = node.target
    args, kwargs = node.args, node.kwargs
    mod = getattr(target, "__module__", None)
    fname = getattr(target, "__name__", None)
    if (
        mod in ("_operator", "operator")
        and getattr(operator, fname or "", None) is target
        and not kwargs
    ):
        if fname in MAGIC_METHODS:
            arity = 1 if fname in UNARY else 2
            if len(args) == arity:
                return f"{node.name} = {MAGIC_METHODS[fname].format(*(_operand(em, a) for a in args))}"
        if fname in INPLACE_METHODS and len(args) == 2 and isinstance(args[0], Node):
            # Python's augmented assignment rebinds; emit it so the result
            # name refers to the (possibly mutated) receiver.
            a0, a1 = em.emit(args[0]), em.emit(args[1])
            return f"{node.name} = {a0};  {INPLACE_METHODS[fname].format(node.name, a1)}"
    if (
        target is builtins.getattr
        and len(args) == 2
        and not kwargs
        and isinstance(args[1], str)
        and args[1].isidentifier()
    ):
        return f"{node.name} = {format_target(em.emit(args[0]), args[1])}"
    fn = em.callable_name(target)
    return f"{node.name} = {fn}({em.emit_call_args(args, kwargs)})"
