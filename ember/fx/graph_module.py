"""``GraphModule``: an ``ember.nn.Module`` whose ``forward`` is generated
from a :class:`~ember.fx.Graph`.

Why a module: a traced program must be usable wherever the original was
(called, trained, nested in other modules), and it must carry the
parameters/submodules its ``get_attr``/``call_module`` nodes refer to. So a
GraphModule copies exactly those from the root it was built from, then
generates Python source for the graph (``gm.code``), compiles it and installs
it as ``forward``. Each instance gets its own subclass so installing
``forward`` on the class never affects another GraphModule.

The generated source is registered with ``linecache`` under a unique file
name, so tracebacks through ``forward`` show the generated lines.

Code generation is **lazy**: assigning a graph (construction included) only
marks the code stale; the source is generated and compiled the first time
``forward`` is looked up (a call, ``gm.forward``, ``type(gm).forward``) or
``gm.code`` is read. Most GraphModules the compile pipeline builds (make_fx's
joint graph, the partitioner's forward/backward graphs, graphs rebuilt by the
aot cache) go straight to a graph compiler that reads ``gm.graph`` and never
run them; generating their Python was a measurable part of a compile.
``recompile()`` still generates at once (callers use its ``PythonCode``).
"""

from __future__ import annotations

import copy
import itertools
import linecache
import weakref
from typing import Any, Dict, Optional, Union

from ember.nn.modules.module import Module

from ._codegen import PythonCode
from .graph import Graph

__all__ = ["GraphModule", "reduce_graph_module"]

_src_counter = itertools.count()


def _exec_forward(src: str, globals_: Dict[str, Any]) -> Any:
    key = f"<eval_with_key>.{next(_src_counter)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    g = dict(globals_)
    exec(compile(src, key, "exec"), g)
    return g["forward"]


def _tensor_types():
    from ._symbolic_trace import _tensor_classes

    return _tensor_classes()


def _is_buffer(mod: Any, field: str) -> bool:
    bufs = getattr(mod, "_buffers", None)
    if isinstance(bufs, dict):
        return field in bufs
    try:
        return any(n == field for n, _ in mod.named_buffers(recurse=False))
    except Exception:
        return False


def _copy_attr(from_module: Any, to_module: Any, target: str) -> None:
    """Make ``to_module.<target>`` refer to ``from_module.<target>``,
    creating empty intermediate Modules as needed."""
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return  # the whole subtree is already shared
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    Tensor, Parameter = _tensor_types()
    if (
        Tensor is not None
        and isinstance(orig, Tensor)
        and not (Parameter is not None and isinstance(orig, Parameter))
        and _is_buffer(from_module, field)
    ):
        to_module.register_buffer(field, orig)
    else:
        _setattr(to_module, field, orig)


def _setattr(mod: Any, field: str, value: Any) -> None:
    Tensor, Parameter = _tensor_types()
    if isinstance(value, Module) or (Parameter is not None and isinstance(value, Parameter)):
        setattr(mod, field, value)
    else:
        # plain tensors/constants: not registered as state
        object.__setattr__(mod, field, value)


def _assign_attr(value: Any, to_module: Any, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    Tensor, Parameter = _tensor_types()
    if (
        Tensor is not None
        and isinstance(value, Tensor)
        and not (Parameter is not None and isinstance(value, Parameter))
    ):
        to_module.register_buffer(field, value)
    else:
        _setattr(to_module, field, value)


class _LazyForward:
    """``forward`` of a GraphModule whose code is stale: generates it on first lookup.

    A non-data descriptor on the per-instance class: looking it up
    (through the instance or the class) runs ``recompile()``, which replaces it
    on the class with the generated function, and returns that function
    (bound when looked up through the instance)."""

    def __init__(self, gm: "GraphModule") -> None:
        self._gm = weakref.ref(gm)

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        gm = obj if obj is not None else self._gm()
        if gm is None:
            raise RuntimeError("fx: the GraphModule of this class no longer exists")
        if type(gm).__dict__.get("forward") is self:
            gm.recompile()
        fn = type(gm).__dict__["forward"]
        return fn if obj is None else fn.__get__(obj, cls)


class GraphModule(Module):
    """A Module generated from a Graph. ``root`` is an ``ember.nn.Module``
    (attributes are copied from it) or a dict mapping each ``get_attr`` /
    ``call_module`` target to its value."""

    # the graphs ember runs inside compile/aot/export are GraphModules: a global module hook
    # (register_module_forward_hook) watches the user's modules, not these
    _no_global_hooks = True

    def __new__(cls, *args: Any, **kwargs: Any) -> "GraphModule":
        base = cls
        while base.__dict__.get("_fx_per_instance_class", False):
            base = base.__bases__[0]

        class GraphModuleImpl(base):  # type: ignore[valid-type, misc]
            _fx_per_instance_class = True

        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Union[Module, Dict[str, Any]], graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        type(self).__name__ = class_name
        type(self).__qualname__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(
                            f"fx: node {node.name!r} refers to {node.target!r}, which is missing from the root dict"
                        )
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise TypeError(f"fx: GraphModule root must be an ember Module or a dict, got {type(root).__name__}")
        object.__setattr__(self, "meta", {})
        self.graph = graph

    # -- graph and code --------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """The underlying graph; assigning one recompiles."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"fx: GraphModule.graph must be a Graph, got {type(g).__name__}")
        object.__setattr__(self, "_graph", g)
        g.owning_module = self
        self._set_pytree_specs()
        # generated on first use (see the module docstring)
        self.__dict__.pop("_code", None)
        type(self).forward = _LazyForward(self)

    @property
    def code(self) -> str:
        """The Python source of ``forward`` (generated on first use, regenerated by :meth:`recompile`)."""
        if "_code" not in self.__dict__:
            self.recompile()
        return self.__dict__["_code"]

    def _set_pytree_specs(self) -> None:
        # a graph traced with PH in concrete_args: its code reads the input and
        # output structures from self._in_spec / self._out_spec (torch.fx's names)
        info = getattr(self._graph._codegen, "pytree_info", None)
        if info is not None:
            object.__setattr__(self, "_in_spec", info.in_spec)
            object.__setattr__(self, "_out_spec", info.out_spec)

    def recompile(self) -> PythonCode:
        """Regenerate ``forward`` from the graph; call after editing the graph."""
        self._set_pytree_specs()
        pc = self._graph.python_code(root_module="self")
        object.__setattr__(self, "_code", pc.src)
        type(self).forward = _exec_forward(pc.src, pc.globals)
        return pc

    def print_readable(self, print_output: bool = True) -> str:
        """The module (and nested GraphModules) as a readable class listing."""
        s = self._readable(type(self).__name__)
        if print_output:
            print(s)
        return s

    def _readable(self, name: str) -> str:
        lines = [f"class {name}(ember.nn.Module):"]
        for sub_name, sub in self.named_children() if hasattr(self, "named_children") else []:
            if isinstance(sub, GraphModule):
                nested = sub._readable(sub_name)
                lines += ["    " + ln if ln else ln for ln in nested.split("\n")]
                lines.append("")
        body = self.code.strip("\n").rstrip()
        lines += ["    " + ln if ln.strip() else "" for ln in body.split("\n")]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return "\n".join([super().__str__(), self.code, "# To see more debug info, please use `graph_module.print_readable()`"])

    # -- submodule management -------------------------------------------------------
    def add_submodule(self, target: str, m: Module) -> bool:
        """Install ``m`` at dotted path ``target``, creating parents."""
        *prefix, field = target.split(".")
        mod: Any = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                setattr(mod, item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        setattr(mod, field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Remove the submodule at ``target``; False if there is none."""
        *prefix, field = target.split(".")
        mod: Any = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if not isinstance(mod, Module):
                return False
        if not isinstance(getattr(mod, field, None), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Drop submodules no ``call_module``/``get_attr`` node refers to. A called module keeps
        its whole subtree (its forward uses its children), as torch's; a ``get_attr`` keeps the
        modules on its path."""
        used = set()
        called = []
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                for i in range(1, len(parts) + 1):
                    used.add(".".join(parts[:i]))
                if node.op == "call_module":
                    called.append(node.target + ".")
        for name, _ in list(self.named_modules()):
            if name and name not in used and not name.startswith(tuple(called)):
                self.delete_submodule(name)

    # -- graph edit hooks (torch's private API; GraphTransformObserver uses them) ----------
    def _hook_list(self, name: str) -> list:
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = []
            object.__setattr__(self, name, hooks)
        return hooks

    def _register_create_node_hook(self, f: Any) -> None:
        """``f(node)`` runs after each node is created in this module's graph."""
        if not callable(f):
            raise AssertionError("create_node hook must be a callable.")
        self._hook_list("_create_node_hooks").append(f)

    def _unregister_create_node_hook(self, f: Any) -> None:
        hooks = self._hook_list("_create_node_hooks")
        if f not in hooks:
            raise AssertionError("f is not registered as a create_node hook.")
        hooks.remove(f)

    def _register_erase_node_hook(self, f: Any) -> None:
        """``f(node)`` runs before each node of this module's graph is erased."""
        if not callable(f):
            raise AssertionError("erase_node hook must be a callable.")
        self._hook_list("_erase_node_hooks").append(f)

    def _unregister_erase_node_hook(self, f: Any) -> None:
        hooks = self._hook_list("_erase_node_hooks")
        if f not in hooks:
            raise AssertionError("f is not registered as a erase_node hook.")
        hooks.remove(f)

    def _register_replace_node_hook(self, f: Any) -> None:
        """``f(old=node, new=name, user=node)`` runs when ``user`` stops reading
        ``old`` for the node named ``new``."""
        if not callable(f):
            raise AssertionError("replace_node hook must be a callable.")
        self._hook_list("_replace_hooks").append(f)

    def _unregister_replace_node_hook(self, f: Any) -> None:
        hooks = self._hook_list("_replace_hooks")
        if f not in hooks:
            raise AssertionError("f is not registered as a replace_node hook.")
        hooks.remove(f)

    def _register_deepcopy_hook(self, f: Any) -> None:
        """``f(copy)`` runs on each deep copy of this module."""
        if not callable(f):
            raise AssertionError("deepcopy hook must be a callable.")
        self._hook_list("_deepcopy_hooks").append(f)

    def _unregister_deepcopy_hook(self, f: Any) -> None:
        hooks = self._hook_list("_deepcopy_hooks")
        if f not in hooks:
            raise AssertionError("f is not registered as a deepcopy hook.")
        hooks.remove(f)

    # -- copying -------------------------------------------------------------------------
    def _deepcopy_init(self) -> Any:
        """The initializer :meth:`__deepcopy__` runs on the copy (a subclass whose
        ``__init__`` takes other arguments keeps GraphModule's)."""
        return GraphModule.__init__

    def __deepcopy__(self, memo: Dict[int, Any]) -> "GraphModule":
        """A copy of the same class (a GraphModule subclass stays one) with deep
        copies of the state the graph uses, ``meta``, the state-dict and graph
        hooks; other instance attributes are not copied (as torch) unless listed
        in ``meta["_user_preserved_attributes"]`` (``{name: value}``), which are
        set on the copy."""
        res = type(self).__new__(type(self))
        memo[id(self)] = res
        holder = _CodeOnlyModule(copy.deepcopy(self.__dict__, memo))
        self._deepcopy_init()(res, holder, holder.__dict__["_graph"], _class_name(self))
        for attr in _PRESERVED_ON_DEEPCOPY:
            if attr in self.__dict__:
                object.__setattr__(res, attr, copy.deepcopy(self.__dict__[attr], memo))
        object.__setattr__(res, "meta", copy.deepcopy(getattr(self, "meta", {}), memo))
        for name, value in res.meta.get(_USER_PRESERVED_ATTRIBUTES_KEY, {}).items():
            setattr(res, name, value)
        for hook in getattr(self, "_deepcopy_hooks", ()):
            hook(res)
        return res

    def __copy__(self) -> "GraphModule":
        """A GraphModule sharing this one's graph, submodules and parameters."""
        new = GraphModule(self, self.graph, _class_name(self))
        object.__setattr__(new, "meta", getattr(self, "meta", {}))
        return new

    def __reduce__(self):
        """Pickle the generated code, not the Graph: unpickling re-traces the
        code (every submodule a leaf) and rebuilds a GraphModule (of class
        GraphModule, as torch's) with this module's other attributes."""
        body = {k: v for k, v in self.__dict__.items() if k not in _PRESERVED_ON_DEEPCOPY[4:]}
        pc = self.recompile()
        body["_code"] = pc.src
        import_block, extra = _format_import_block(pc.globals)
        if extra:
            body["_fx_pickled_globals"] = extra
        node_stack_traces = {n.name: n.meta["stack_trace"] for n in self._graph.nodes if "stack_trace" in n.meta}
        if node_stack_traces:
            body["_graphmodule_graph_node_meta_stack_trace"] = node_stack_traces
        del body["_graph"]
        return (reduce_graph_module, (body, import_block))


_USER_PRESERVED_ATTRIBUTES_KEY = "_user_preserved_attributes"
_PRESERVED_ON_DEEPCOPY = (
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
    "_replace_hooks", "_create_node_hooks", "_erase_node_hooks", "_deepcopy_hooks",
)


def _class_name(gm: Any) -> str:
    return type(gm).__name__


class _CodeOnlyModule(Module):
    """A Module whose instance dictionary is ``body`` (a GraphModule's, less its
    graph): the root that deepcopy and unpickling rebuild a GraphModule from."""

    def __init__(self, body: Dict[str, Any]) -> None:
        super().__init__()
        self.__dict__ = body


def _format_import_block(globals_: Dict[str, Any]):
    """Python statements re-creating the generated code's globals by import
    (``from operator import add as add``), and ``{name: object}`` for those
    that cannot be imported by name (pickled by value instead)."""
    import importlib
    import types

    lines = []
    extra: Dict[str, Any] = {}
    for name, obj in sorted(globals_.items()):
        if name == "__builtins__":
            continue
        if isinstance(obj, types.ModuleType):
            lines.append(f"import {obj.__name__}")
            if name != obj.__name__:
                lines.append(f"{name} = {obj.__name__}")
            continue
        module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        found = None
        if isinstance(module, str) and isinstance(qual, str) and "<locals>" not in qual:
            try:
                found = importlib.import_module(module)
                for part in qual.split("."):
                    found = getattr(found, part)
            except (ImportError, AttributeError):
                found = None
        if found is obj:
            if "." in qual:
                lines.append(f"import {module}")
                lines.append(f"{name} = {module}.{qual}")
            else:
                lines.append(f"from {module} import {qual} as {name}")
        else:
            extra[name] = obj
    return "\n".join(lines) + "\n", extra


def _forward_from_src(src: str, globals_: Dict[str, Any]) -> Any:
    return _exec_forward(src, globals_)


def reduce_graph_module(body: Dict[str, Any], import_block: str) -> Module:
    """Unpickle a GraphModule: run ``import_block`` and the code in ``body``
    (``_code``, or ``code`` from older pickles), then rebuild (see
    :func:`_deserialize_graph_module`)."""
    fn_src = body.get("_code") or body["code"]
    globals_ = dict(body.pop("_fx_pickled_globals", {}) or {})
    exec(compile(import_block, "<fx import block>", "exec"), globals_)
    forward = _forward_from_src(fn_src, globals_)
    return _deserialize_graph_module(forward, body)


def _deserialize_graph_module(forward: Any, body: Dict[str, Any], graph_module_cls: Optional[type] = None) -> Module:
    """A GraphModule traced from ``forward`` run on a module holding ``body``
    (submodules are not traced into), with ``body``'s attributes the graph
    does not use set on it as well."""
    from ._symbolic_trace import Tracer

    tracer_cls = body.get("_tracer_cls") or Tracer

    class KeepModules(tracer_cls):  # type: ignore[misc, valid-type]
        def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
            return True

    body.pop("_code", None)
    stack_traces = body.pop("_graphmodule_graph_node_meta_stack_trace", None)
    com = _CodeOnlyModule(body)
    type(com).forward = forward
    try:
        graph = KeepModules().trace(com, **body.get("_tracer_extras", {}))
    finally:
        del type(com).forward
    if stack_traces:
        for node in graph.nodes:
            if node.name in stack_traces:
                node.meta["stack_trace"] = stack_traces[node.name]
    cls = graph_module_cls or GraphModule
    gm = cls(com, graph, body.get("_graphmodule_cls_name", "GraphModule"))
    for k, v in body.items():
        if not hasattr(gm, k):
            setattr(gm, k, v)
    return gm
