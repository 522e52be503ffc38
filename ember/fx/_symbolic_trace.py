"""``Tracer`` and ``symbolic_trace``: run a module/function on Proxies.

Why it works the way it does: a module's ``forward`` is ordinary Python, so
the simplest faithful capture is to *run* it with Proxies as inputs. Three
hooks are installed for the duration of a trace (and always removed):

- ``Module.__call__`` is routed through :meth:`Tracer.call_module`, which
  either records a ``call_module`` node (leaf modules such as ``nn.Linear``)
  or traces through the submodule's ``forward``;
- ``Module.__getattr__`` (where parameters and buffers are looked up) is
  routed through :meth:`Tracer.getattr`, so ``self.weight`` becomes a
  ``get_attr`` node instead of a frozen constant;
- ember functions reach :meth:`Proxy.__ember_function__` by themselves
  through the override protocol; nothing needs patching for them.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._names import is_ember_object
from .graph import Graph
from .node import Node
from .proxy import Proxy, TraceError, TracerBase

__all__ = [
    "Tracer",
    "symbolic_trace",
    "wrap",
    "assert_specialized",
    "is_fx_tracing",
    "ProxyableClassMeta",
    "PH",
    "PHBase",
    "PHWithMeta",
]


def _nn():
    """ember.nn's Module and container classes, imported on demand (fx is
    usable on plain functions before/without ember.nn)."""
    try:
        from ember.nn.modules.module import Module
    except ImportError:
        return None
    return Module


def _tensor_classes():
    mod = sys.modules.get("ember.tensor")
    if mod is None:
        try:
            import ember.tensor as mod  # noqa: F811
        except ImportError:
            return None, None
    Tensor = getattr(mod, "Tensor", None)
    Parameter = getattr(mod, "Parameter", None)
    if Parameter is None:
        try:
            from ember.nn.parameter import Parameter  # type: ignore
        except ImportError:
            Parameter = None
    return Tensor, Parameter


def assert_specialized(value: Any, expected: Any, name: str) -> None:
    """Guard emitted for ``concrete_args``: the graph was traced for
    ``name == expected`` and is wrong for any other value."""
    same = value is expected if expected is None or isinstance(expected, bool) else value == expected
    if not same:
        raise AssertionError(
            f"{name} has been specialized to have value {expected!r} but got {value!r}"
        )


assert_specialized._ember_is_impure = True  # type: ignore[attr-defined]
assert_specialized.__fx_name__ = "ember.fx.assert_specialized"  # type: ignore[attr-defined]


_is_fx_tracing_flag = False


def is_fx_tracing() -> bool:
    """Whether a :class:`Tracer` is currently running a program symbolically."""
    return _is_fx_tracing_flag


# classes whose construction is recorded (see ProxyableClassMeta), in
# definition order
_proxyable_classes: Dict[type, None] = {}


class ProxyableClassMeta(type):
    """Metaclass that makes constructing a class traceable.

    Why: a user type holding tensors (a pair, a small record) is built inside
    traced code from traced values; running its ``__init__`` on Proxies would
    freeze whatever it does. With this metaclass, constructing the class while
    tracing with any Proxy among the arguments records one ``call_function``
    node whose target is the class (the generated code calls it on real
    values). Outside tracing, or with no Proxy argument, construction is
    ordinary. An instance passed into traced code as a constant is stored on
    the root as ``_<ClassName>_constant_<i>`` and read with ``get_attr``::

        class TensorPair(metaclass=ember.fx.ProxyableClassMeta):
            def __init__(self, left, right):
                self.left, self.right = left, right

            def add(self, other):
                return TensorPair(self.left + other.left, self.right + other.right)

        def f(x: TensorPair, y):
            return x.add(TensorPair(y, y))

        ember.fx.symbolic_trace(f).code
        # tensor_pair = tests_..._TensorPair(y, y); add = x.add(tensor_pair) ...
    """

    def __init__(cls, name: str, bases: Tuple[type, ...], attrs: Dict[str, Any]) -> None:
        _proxyable_classes.setdefault(cls)
        super().__init__(name, bases, attrs)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        instance = cls.__new__(cls)
        if _is_fx_tracing_flag:
            from .proxy import _find_tracer

            tracer = _find_tracer(args, kwargs)
            if tracer is not None:
                return tracer.create_proxy("call_function", cls, args, kwargs)
        cls.__init__(instance, *args, **kwargs)
        return instance


class PHBase:
    """Marks, inside a ``concrete_args`` value, a leaf that stays an input
    (a placeholder) while the surrounding structure is fixed. Use :data:`PH`."""

    def __repr__(self) -> str:
        return "PH"


#: the placeholder marker for ``concrete_args`` pytrees
PH = PHBase()


class PHWithMeta(PHBase):
    """A :class:`PHBase` carrying a key (``ph_key``) and any attributes the
    user sets on it; they are copied onto the placeholder node created for it."""

    def __init__(self, ph_key: Optional[str] = None) -> None:
        super().__init__()
        self.ph_key = ph_key


class _Patcher:
    """Temporarily replace attributes / dict entries; undone on exit, in
    reverse order, even when tracing raises."""

    def __init__(self) -> None:
        self._undo: List[Callable[[], None]] = []

    def patch(self, obj: Any, name: str, value: Any) -> None:
        had = name in obj.__dict__
        old = obj.__dict__.get(name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))

    def patch_dict(self, d: Dict[str, Any], key: str, value: Any) -> None:
        had = key in d
        old = d.get(key)
        d[key] = value
        self._undo.append(lambda: d.__setitem__(key, old) if had else d.pop(key, None))

    def __enter__(self) -> "_Patcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()


# Functions registered with ``wrap``: (globals dict, name) pairs patched to
# record a call_function instead of running during tracing.
_wrapped_fns: Dict[Tuple[int, str], Tuple[Dict[str, Any], str]] = {}


def wrap(fn_or_name: Union[str, Callable[..., Any]]):
    """Mark a module-level function as a leaf: while tracing, calls to it
    become ``call_function`` nodes instead of being traced through.

    Call at module level, after the function is defined (``wrap("helper")``
    or ``wrap(helper)``); only calls through that module's globals are seen.
    """
    frame = sys._getframe(1)
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("fx.wrap must be called at the top level of a module")
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    g = frame.f_globals
    _wrapped_fns[(id(g), name)] = (g, name)
    return fn_or_name


class Tracer(TracerBase):
    """Turns a module or function into a :class:`Graph` by running it on
    Proxies. Subclass and override :meth:`is_leaf_module`,
    :meth:`create_arg` or :meth:`call_module` to customise."""

    def __init__(self, autowrap_modules: Tuple[Any, ...] = (math,), autowrap_functions: Tuple[Callable[..., Any], ...] = (),
                 param_shapes_constant: bool = False, proxy_buffer_attributes: bool = True,
                 record_stack_traces: bool = False) -> None:
        self.autowrap_functions = tuple(autowrap_functions)
        self.autowrap_modules = tuple(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant
        #: buffers become get_attr nodes (torch.fx's default folds them into
        #: constants; we keep them live so e.g. running statistics stay current)
        self.proxy_buffer_attributes = proxy_buffer_attributes
        self.record_stack_traces = record_stack_traces
        self.graph: Graph = Graph(tracer_cls=type(self))
        self.root: Any = None
        self._attr_cache: Dict[int, Node] = {}
        self._module_paths: Dict[int, str] = {}
        self._tensor_paths: Dict[int, str] = {}
        self._constants: Dict[int, str] = {}
        self._keepalive: List[Any] = []
        self._pytree_inputs = False

    # -- hooks for subclasses ------------------------------------------------
    def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
        """Default: modules whose class is defined inside ``ember.nn``, except
        the containers (Sequential, ModuleList, ModuleDict), are leaves."""
        mod = type(m).__module__ or ""
        if not (mod == "ember.nn" or mod.startswith("ember.nn.")):
            return False
        return type(m).__name__ not in ("Sequential", "ModuleList", "ModuleDict", "Module", "GraphModule")

    def path_of_module(self, mod: Any) -> str:
        """The dotted path of ``mod`` inside the root module."""
        p = self._module_paths.get(id(mod))
        if p is None:
            raise NameError(f"fx: module {type(mod).__name__} is not installed as a submodule of the traced root")
        return p

    def call_module(self, m: Any, forward: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """A submodule call: a ``call_module`` node for leaves, otherwise
        trace into ``forward``."""
        qualname = self.path_of_module(m)
        if not self.is_leaf_module(m, qualname):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qualname, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: Optional[Dict[str, Any]] = None) -> Any:
        """A module attribute read during tracing: parameters (and buffers
        when ``proxy_buffer_attributes``) become ``get_attr`` proxies."""
        Tensor, Parameter = _tensor_classes()
        if Tensor is not None and isinstance(attr_val, Tensor):
            is_param = Parameter is not None and isinstance(attr_val, Parameter)
            if is_param or self.proxy_buffer_attributes:
                path = self._tensor_paths.get(id(attr_val))
                if path is not None:
                    return self.proxy(self._get_attr_node(path, attr_val))
        return attr_val

    def _get_attr_node(self, path: str, val: Any) -> Node:
        n = self._attr_cache.get(id(val))
        if n is None or n._erased:
            n = self.create_node("get_attr", path, (), {})
            self._attr_cache[id(val)] = n
        return n

    def create_arg(self, a: Any) -> Any:
        """Like :meth:`TracerBase.create_arg`, plus: parameters/buffers of
        the root become ``get_attr`` nodes, other tensors are stored on the
        root as ``_tensor_constant<N>``, submodules become ``get_attr``."""
        Tensor, Parameter = _tensor_classes()
        if Tensor is not None and isinstance(a, Tensor) and not isinstance(a, Proxy):
            path = self._tensor_paths.get(id(a))
            if path is not None:
                return self._get_attr_node(path, a)
            if Parameter is not None and isinstance(a, Parameter):
                raise NameError("fx: a Parameter that is not a member of the traced module was used")
            path = self._constants.get(id(a))
            if path is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                path = f"_tensor_constant{i}"
                _set_plain_attr(self.root, path, a)
                self._constants[id(a)] = path
                self._keepalive.append(a)
            return self._get_attr_node(path, a)
        Module = _nn()
        if Module is not None and isinstance(a, Module):
            p = self._module_paths.get(id(a))
            if p is not None:
                return self.create_node("get_attr", p, (), {})
        if type(a) in _proxyable_classes:
            # an instance of a ProxyableClassMeta class used as a constant:
            # store it on the root, read it back with get_attr
            i = 0
            while hasattr(self.root, f"_{type(a).__name__}_constant_{i}"):
                i += 1
            path = f"_{type(a).__name__}_constant_{i}"
            _set_plain_attr(self.root, path, a)
            return self.create_node("get_attr", path, (), {})
        return super().create_arg(a)

    # -- tracing -----------------------------------------------------------------
    def _create_placeholders(self, fn: Callable[..., Any], skip_self: bool, concrete_args: Optional[Dict[str, Any]]) -> List[Any]:
        sig = inspect.signature(inspect.unwrap(fn))
        params = list(sig.parameters.values())
        if skip_self:
            if not params:
                raise TraceError("fx: forward() must take `self`")
            params = params[1:]
        concrete_args = dict(concrete_args or {})
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise TraceError(f"fx: concrete_args names unknown parameters: {sorted(unknown)}")
        values: List[Any] = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise NotImplementedError(
                    f"fx: symbolic_trace of a function with *args/**kwargs ({p}) is not supported; "
                    "give every input a name"
                )
            kw = p.kind is p.KEYWORD_ONLY
            if self._pytree_inputs:
                if kw:
                    raise NotImplementedError(
                        f"ember.fx: PH in concrete_args needs positional parameters; {p.name!r} is "
                        "keyword-only (make it positional or pass it without PH)"
                    )
                if p.name in concrete_args:
                    values.append(("pos", p.name, self._pytree_placeholders(p, concrete_args[p.name])))
                    continue
            if p.name in concrete_args:
                val = concrete_args[p.name]
                # literal values become the placeholder's default plus a guard;
                # anything else (a module, a tensor) is baked in and the
                # now-unused input defaults to None
                ph = self.create_proxy("placeholder", p.name, (val,) if _is_literal(val) else (None,), {})
                if _is_literal(val):
                    self.create_node("call_function", assert_specialized, (ph.node, val, p.name), {})
                values.append(("kw" if kw else "pos", p.name, val))
                continue
            default = () if p.default is inspect.Parameter.empty else (p.default,)
            ph = self.create_proxy("placeholder", p.name, default, {}, type_expr=_annotation(p))
            values.append(("kw" if kw else "pos", p.name, ph))
        return values

    def _pytree_placeholders(self, p: inspect.Parameter, tree: Any) -> Any:
        """A ``concrete_args`` value holding :data:`PH` leaves: one placeholder
        ``<name>_<i>`` per leaf (numbered from 1, in pytree order). PH leaves
        stay inputs; other leaves are specialised (literals and None get an
        ``assert_specialized`` guard on their placeholder, anything else is
        baked in with a warning). Returns the tree the traced code sees."""
        from ember.utils import _pytree as pytree

        leaves, spec = pytree.tree_flatten(tree)
        default = () if p.default is inspect.Parameter.empty else (p.default,)
        out = []
        for i, leaf in enumerate(leaves, 1):
            ph = self.create_proxy("placeholder", f"{p.name}_{i}", default, {})
            if isinstance(leaf, PHBase):
                if leaf is not PH:
                    _transfer_attrs(leaf, ph.node)
                out.append(ph)
                continue
            if _is_literal(leaf):
                self.create_node("call_function", assert_specialized, (ph.node, leaf, p.name), {})
            else:
                warnings.warn(
                    f"Was not able to add assertion to guarantee correct input {p.name} to specialized "
                    "function. It is up to the user to make sure that your inputs match the inputs you "
                    "specialized the function with."
                )
            out.append(leaf)
        return pytree.tree_unflatten(out, spec)

    def trace(self, root: Any, concrete_args: Optional[Dict[str, Any]] = None) -> Graph:
        """Trace ``root`` (an ember ``Module`` or a function) into a Graph.

        ``concrete_args`` maps parameter names to values the trace is
        specialised to. A value that is a pytree containing :data:`PH` leaves
        keeps those leaves as inputs: the graph gets one placeholder per leaf
        and a :class:`~ember.fx._codegen._PyTreeCodeGen`, so the generated
        ``forward`` still takes the structured argument (flattened on entry)
        and returns the traced result's structure (rebuilt on exit)."""
        from ember.utils import _pytree as pytree

        self._pytree_inputs = any(
            any(isinstance(leaf, PHBase) for leaf in pytree.tree_leaves(v)) for v in (concrete_args or {}).values()
        )
        Module = _nn()
        is_module = Module is not None and isinstance(root, Module)
        if is_module:
            self.root = root
            fn = type(root).forward
        elif callable(root):
            self.root = Module() if Module is not None else _PlainRoot()
            fn = root
        else:
            raise TypeError(f"fx: symbolic_trace expects an ember Module or a function, got {type(root).__name__}")
        self.graph = Graph(tracer_cls=type(self))
        self._attr_cache = {}
        self._index_root()
        fn_globals = getattr(inspect.unwrap(fn), "__globals__", {})

        placeholders = self._create_placeholders(fn, is_module, concrete_args)
        call_args: List[Any] = [root] if is_module else []
        call_kwargs: Dict[str, Any] = {}
        for kind, pname, val in placeholders:
            if kind == "kw":
                call_kwargs[pname] = val
            else:
                call_args.append(val)

        global _is_fx_tracing_flag
        was_tracing, _is_fx_tracing_flag = _is_fx_tracing_flag, True
        try:
            with _Patcher() as patcher:
                if Module is not None:
                    self._patch_module(Module, patcher)
                self._patch_autowrap(fn_globals, patcher)
                result = fn(*call_args, **call_kwargs)
        finally:
            _is_fx_tracing_flag = was_tracing
        ret_type = getattr(fn, "__annotations__", {}).get("return")
        if self._pytree_inputs:
            from ._codegen import _PyTreeCodeGen, _PyTreeInfo

            in_spec = pytree.tree_structure(tuple(call_args[1:] if is_module else call_args))
            out_leaves, out_spec = pytree.tree_flatten(result)
            names = [pname for _, pname, _ in placeholders]
            self.graph.set_codegen(_PyTreeCodeGen(_PyTreeInfo(names, in_spec, out_spec)))
            self.create_node("output", "output", (self.create_arg(list(out_leaves)),), {})
            return self.graph
        self.create_node("output", "output", (self.create_arg(result),), {}, type_expr=ret_type)
        return self.graph

    def _index_root(self) -> None:
        self._module_paths = {}
        self._tensor_paths = {}
        root = self.root
        if hasattr(root, "named_modules"):
            for name, m in root.named_modules():
                self._module_paths.setdefault(id(m), name)
        if hasattr(root, "named_parameters"):
            for name, p in _named(root, "named_parameters"):
                self._tensor_paths.setdefault(id(p), name)
        if hasattr(root, "named_buffers"):
            for name, b in _named(root, "named_buffers"):
                self._tensor_paths.setdefault(id(b), name)

    def _patch_module(self, Module: type, patcher: _Patcher) -> None:
        tracer = self
        orig_call = Module.__call__

        @functools.wraps(orig_call)
        def module_call(mod, *args, **kwargs):
            def forward(*a, **k):
                return orig_call(mod, *a, **k)

            return tracer.call_module(mod, forward, args, kwargs)

        patcher.patch(Module, "__call__", module_call)
        orig_getattr = Module.__dict__.get("__getattr__")
        if orig_getattr is not None:
            @functools.wraps(orig_getattr)
            def module_getattr(mod, attr):
                val = orig_getattr(mod, attr)
                return tracer.getattr(attr, val, None)

            patcher.patch(Module, "__getattr__", module_getattr)

    def _patch_autowrap(self, fn_globals: Dict[str, Any], patcher: _Patcher) -> None:
        """Functions from ``autowrap_modules`` (math by default), those in
        ``autowrap_functions`` and those registered with :func:`wrap` become
        leaves when called with a Proxy from the traced function's globals."""
        targets: Dict[int, Any] = {}
        for md, name, v in _ember_leaves():
            patcher.patch_dict(md, name, _leaf_wrapper(v))
            targets[id(v)] = v
        for m in self.autowrap_modules:
            for k, v in vars(m).items():
                if callable(v) and not k.startswith("_"):
                    targets[id(v)] = v
        for f in self.autowrap_functions:
            targets[id(f)] = f
        done = set()
        for name, v in list(fn_globals.items()):
            if id(v) in targets and callable(v):
                patcher.patch_dict(fn_globals, name, _leaf_wrapper(v))
                done.add((id(fn_globals), name))
        for m in self.autowrap_modules:
            md = vars(m)
            for name, v in list(md.items()):
                if (id(md), name) not in done and id(v) in targets and callable(v):
                    patcher.patch_dict(md, name, _leaf_wrapper(v))
                    done.add((id(md), name))
        for g, n in list(_wrapped_fns.values()):
            if (id(g), n) not in done and n in g and callable(g[n]):
                patcher.patch_dict(g, n, _leaf_wrapper(g[n]))
                done.add((id(g), n))


# ember's Python-level functions that read their arguments' sizes, dtypes or types before calling
# ops (so they cannot run on a Proxy): each is recorded as one call_function node, as torch.fx
# records torch's functions (their ``__torch_function__`` check), and runs whole in the GraphModule
_LEAVES = {
    "ember": ("flatten", "unflatten", "chunk", "tensor_split", "einsum", "broadcast_tensors", "atleast_1d",
              "atleast_2d", "atleast_3d", "tensordot", "movedim", "moveaxis", "narrow", "tile", "dstack", "hstack",
              "vstack", "column_stack", "row_stack", "full_like", "zeros_like", "ones_like", "empty_like",
              "rand_like", "randn_like", "randint_like"),
    "ember.nn.functional": (
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
        "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
        "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "affine_grid", "alpha_dropout", "avg_pool1d",
        "avg_pool2d", "avg_pool3d", "binary_cross_entropy", "binary_cross_entropy_with_logits", "channel_shuffle",
        "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "cosine_embedding_loss", "cross_entropy", "ctc_loss", "dropout", "dropout1d", "dropout2d", "dropout3d",
        "embedding_bag", "feature_alpha_dropout", "fold", "fractional_max_pool2d",
        "fractional_max_pool2d_with_indices", "fractional_max_pool3d", "fractional_max_pool3d_with_indices",
        "gaussian_nll_loss", "grid_sample", "group_norm", "hinge_embedding_loss", "huber_loss", "instance_norm",
        "interpolate", "kl_div", "l1_loss", "local_response_norm", "lp_pool1d", "lp_pool2d", "lp_pool3d",
        "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices",
        "max_pool3d", "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d", "mse_loss",
        "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss", "nll_loss",
        "normalize", "pad", "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "smooth_l1_loss",
        "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "unfold", "upsample",
        "upsample_bilinear", "upsample_nearest"),
    "ember.linalg": ("norm", "vector_norm", "matrix_norm"),
}


def _ember_leaves():
    """(module dict, name, function) of each of ``_LEAVES`` that exists."""
    import importlib
    out = []
    for modname, names in _LEAVES.items():
        mod = importlib.import_module(modname)
        for name in names:
            v = getattr(mod, name, None)
            if callable(v) and getattr(v, "_ember_op", None) is None:
                out.append((vars(mod), name, v))
    return out


def _leaf_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .proxy import _find_tracer

        tracer = _find_tracer(args, kwargs)
        if tracer is None:
            return fn(*args, **kwargs)
        return tracer.create_proxy("call_function", fn, args, kwargs)

    return wrapper


def _transfer_attrs(fr: Any, to: Any) -> None:
    """Copy the user's attributes of a :class:`PHWithMeta` onto its node."""
    for name in dir(fr):
        val = getattr(fr, name)
        if not callable(val) and not name.startswith("__") and not hasattr(to, name):
            setattr(to, name, val)


class _PlainRoot:
    """Holds constants for a traced *function* when ember.nn is missing."""


def _named(root: Any, meth: str):
    try:
        return list(getattr(root, meth)(remove_duplicate=False))
    except TypeError:
        return list(getattr(root, meth)())


def _set_plain_attr(root: Any, name: str, value: Any) -> None:
    # A tensor constant is stored like a buffer would be, but not registered
    # (it is not model state). Going through object.__setattr__ avoids any
    # Module registration logic.
    object.__setattr__(root, name, value)


def _is_literal(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, complex))


def _annotation(p: inspect.Parameter) -> Optional[Any]:
    return None if p.annotation is inspect.Parameter.empty else p.annotation


def symbolic_trace(root: Any, concrete_args: Optional[Dict[str, Any]] = None) -> Any:
    """Trace ``root`` and wrap the result in a :class:`GraphModule`."""
    from .graph_module import GraphModule

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if _nn() is not None and isinstance(root, _nn()) else getattr(root, "__name__", "GraphModule")
    return GraphModule(tracer.root, graph, name)
