"""nn.Modules, user objects, Python modules, classes and ember functions."""
from __future__ import annotations

import functools
import inspect
import operator
import types

from ..exc import Unsupported
from ..source import AttrSource, GetItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable, UserMethodVariable


def _attr_of_instance(tx, obj, source, name, self_var):
    """Static attribute lookup (no user code runs): instance dict, then the class."""
    from .builder import wrap
    written = tx.output.attr_overlay.get((id(obj), name))
    if written is not None:
        from .deletions import is_deleted, read_deleted_attr
        return read_deleted_attr(tx, obj, name) if is_deleted(written) else written
    if name == "__class__" and type(obj).__getattribute__ is object.__getattribute__:
        # ``type(self)``'s spelling in dataclasses.replace / ``self.__class__.__name__``: the
        # class, guarded (it broke the graph as a getset descriptor)
        if source is not None:
            tx.output.guards.type_match(source, obj)
        return ClassVariable(type(obj), AttrSource(source, "__class__") if source else None)
    d = getattr(obj, "__dict__", None)
    if d is not None and name in d and not _is_data_descriptor(type(obj), name):
        return wrap(tx, d[name], AttrSource(source, name) if source else None)
    try:
        attr = inspect.getattr_static(type(obj), name)
    except AttributeError:
        return _missing_attribute(tx, obj, source, name, self_var)
    if source is not None and not isinstance(attr, (int, float, str, bool, type(None))):
        # the class attribute we inline (method/property/...) must still be the one found,
        # and no instance attribute may shadow it
        g = tx.output.guards
        if d is not None:
            # (an object without __dict__ -- __slots__, dataclasses.Field -- has no instance
            # attribute to shadow it: the check raised AttributeError, failing on every call)
            g.add(f"{name!r} not in {source.expr()}.__dict__", f"{name} is not an instance attribute")
        g.add(f"type({source.expr()}).__dict__.get({name!r}, {g.ref(_MISSING)}) is "
              f"{g.ref(type(obj).__dict__.get(name, _MISSING))}", f"{type(obj).__name__}.{name} unchanged")
    if isinstance(attr, staticmethod):
        return wrap(tx, attr.__func__, AttrSource(AttrSource(source, "__class__"), name) if source else None)
    if isinstance(attr, classmethod):
        from .builder import wrap as _w
        return UserMethodVariable(_w(tx, attr.__func__, None, guard=False), ClassVariable(type(obj)))
    if isinstance(attr, types.FunctionType):
        if any(k.startswith("_ember_") for k in getattr(attr, "__dict__", ())):
            # a method decorated by ember (@no_grad(), @ember.compile, @ember.compiler.disable,
            # ...): the wrapper is what wrap() recognises for a plain function; inlining the
            # wrapper's own code stopped at its ember internals (a graph break at each call)
            from .builder import wrap
            cls_src = AttrSource(AttrSource(source, "__class__"), name) if source is not None else None
            return UserMethodVariable(wrap(tx, attr, cls_src), self_var)
        return UserMethodVariable(UserFunctionVariable(attr, _class_function_source(source, attr, name)), self_var)
    if isinstance(attr, property):
        if attr.fget is None:
            raise Unsupported(f"unreadable property {name}")
        return UserFunctionVariable(attr.fget).call_function(tx, [self_var], {})
    if isinstance(attr, types.MemberDescriptorType) and source is not None:
        # a __slots__ field: plain storage, read for real (its value is wrapped, hence guarded)
        try:
            value = attr.__get__(obj, type(obj))
        except AttributeError:
            raise Unsupported(f"{type(obj).__name__}.{name} is an unset slot (the program raises)")
        return wrap(tx, value, AttrSource(source, name))
    if isinstance(attr, functools.cached_property) and source is not None and attr.attrname == name:
        # not computed yet (an instance value would have been found above, and the guard
        # added above fails once it is): the function is inlined and its value stored into the
        # instance __dict__ after the graph, as cached_property.__get__ does; the frame's later
        # reads see that value (it broke the graph)
        value = UserFunctionVariable(attr.func).call_function(tx, [self_var], {})
        tx.output.attr_overlay[(id(obj), name)] = value
        tx.output.side_effects.append(("instdict", self_var, name, value))
        return value
    if isinstance(attr, _C_METHODS) and source is not None:
        # a method implemented in C (``io.StringIO.getvalue``, ``array.array.append``): not
        # traceable, but its call can run after a graph break, with the method read again
        # through the source (guarded above: still the class's, not shadowed). The read broke
        # nothing before; the whole frame ran eagerly.
        return OpaqueMethodVariable(type(obj), name, AttrSource(source, name))
    if hasattr(attr, "__get__") and not isinstance(attr, (int, float, str, bool, tuple, type(None))):
        raise Unsupported(f"descriptor attribute {type(obj).__name__}.{name} ({type(attr).__name__})")
    # plain class attribute: read through the instance at run time, guarded
    return wrap(tx, attr, AttrSource(source, name) if source else None)


_MISSING = object()
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.ClassMethodDescriptorType)


class OpaqueMethodVariable(VariableTracker):
    """A C method of an object (``buf.getvalue``), read through ``source``. Calling it breaks
    the graph at the call, which then runs eagerly; nothing else is known about it."""

    def __init__(self, cls, name, source):
        self.cls = cls
        self.name = name
        self.source = source

    def python_type(self):
        return types.BuiltinMethodType

    def call_function(self, tx, args, kwargs):
        raise Unsupported(f"call of {self.cls.__name__}.{self.name} (a method implemented in C: "
                          f"it runs after a graph break)")

    def __repr__(self):
        return f"OpaqueMethodVariable({self.cls.__name__}.{self.name})"


def _class_function_source(source, fn, name=None):
    """Where a method ``fn`` of the object at ``source`` is found again (``src.__class__.<name>``),
    given only when ``fn`` has closure cells: they are then read (and guarded) through it. A
    method of a class defined in a function (``forward`` calling a helper object it closes over)
    had cells with no source, and calling what they held was unsupported."""
    if source is None or not fn.__closure__:
        return None
    return AttrSource(AttrSource(source, "__class__"), name or fn.__name__)


def _missing_attribute(tx, obj, source, name, self_var=None):
    """``obj.name`` found neither in the instance dict nor on the class: the program raises
    AttributeError (raised into the trace), unless a ``__getattr__``/``__getattribute__`` of the
    class could still produce it. A plain Python ``__getattr__`` (a proxy, a config wrapper) is
    inlined with the name, as CPython calls it after the miss. The miss is guarded (the attribute
    still absent from the instance and the class), so setting it later recompiles."""
    cls = type(obj)
    from ...nn.modules.module import Module
    hook = inspect.getattr_static(cls, "__getattr__", None)
    if isinstance(hook, types.FunctionType) and self_var is not None and source is not None \
            and cls.__getattribute__ is object.__getattribute__ and not isinstance(obj, Module):
        _guard_miss(tx, obj, source, name)
        g = tx.output.guards
        g.add(f"{g.ref(inspect.getattr_static)}(type({source.expr()}), '__getattr__', None) is {g.ref(hook)}",
              f"{cls.__name__}.__getattr__ unchanged")
        return UserFunctionVariable(hook).call_function(tx, [self_var, ConstantVariable(name)], {})
    if isinstance(obj, Module) and cls.__getattr__ is Module.__getattr__ \
            and cls.__getattribute__ is object.__getattribute__:
        d = obj.__dict__
        if not any(name in d.get(s, {}) for s in ("_parameters", "_buffers", "_modules")):
            # Module.__getattr__ finds no parameter/buffer/submodule either: it raises
            if source is not None:
                tx.output.guards.add(f"hasattr({source.expr()}, {name!r}) is False",
                                     f"{source.expr()} has no attribute {name!r}")
            from .exceptions import raise_observed
            raise_observed(tx, AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")
    if cls.__getattribute__ is not object.__getattribute__ or _has_static(cls, "__getattr__"):
        raise Unsupported(f"{cls.__name__} object has no attribute {name!r} (its class has "
                          f"__getattr__/__getattribute__)")
    if source is not None:
        _guard_miss(tx, obj, source, name)
    from .exceptions import raise_observed
    raise_observed(tx, AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")


def _guard_miss(tx, obj, source, name):
    """Guards that ``name`` is still neither an instance attribute of ``obj`` nor on its class."""
    g = tx.output.guards
    if getattr(obj, "__dict__", None) is not None:
        g.add(f"{name!r} not in {source.expr()}.__dict__", f"{source.expr()} has no attribute {name}")
    g.add(f"{g.ref(_static_missing)}(type({source.expr()}), {name!r})",
          f"{type(obj).__name__} has no attribute {name}")


def _has_static(cls, name):
    try:
        inspect.getattr_static(cls, name)
        return True
    except AttributeError:
        return False


def _static_missing(cls, name):
    """Guard helper: ``cls`` (and its bases) define no attribute ``name``."""
    return not _has_static(cls, name)


_static_missing.__module__ = "ember.dynamo.variables.objects"


def _is_data_descriptor(cls, name):
    try:
        a = inspect.getattr_static(cls, name)
    except AttributeError:
        return False
    return hasattr(type(a), "__set__") or hasattr(type(a), "__delete__")


def _returned_none(v, what):
    """Whether a hook returned None, decided while tracing: eager replaces the arguments or
    the output only when it did not."""
    if isinstance(v, ConstantVariable):
        return v.value is None
    try:
        return v.python_type() is type(None)
    except Unsupported:
        raise Unsupported(f"{what} returned {v}, whose type is not known while tracing")


def _is_tuple(v, what):
    """``isinstance(v, tuple)`` for a hook's return value (namedtuples included, as in eager)."""
    try:
        return issubclass(v.python_type(), tuple)
    except Unsupported:
        raise Unsupported(f"{what} returned {v}, whose type is not known while tracing")


# Module methods that walk the module tree (see NNModuleVariable._traverse)
_TRAVERSALS = {"parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
               "modules", "named_modules"}


def _record_module_call(tx, module, expr, call):
    """Run ``call`` (the inlined forward of ``module``, read at source ``expr``) and prepend
    ``{"<expr>@<n>": (expr, type(module))}`` to ``meta["nn_module_stack"]`` of every operator node
    it added (``n``: how many calls of that module came before in this graph, so two calls of a
    shared module stay apart). ``ember.export`` turns it into torch's ``nn_module_stack`` (fully
    qualified names) for ``unflatten``; compiled graphs keep it as it is (custom backends read it)."""
    graph = tx.output.graph
    counts = tx.output.__dict__.setdefault("_module_call_counts", {})
    n = counts.get(expr, 0)
    counts[expr] = n + 1
    last = next(iter(reversed(graph.nodes)), None)
    result = call()
    cls = type(module)
    entry = {f"{expr}@{n}": (expr, cls)}
    # ops run directly by a builtin module (not a container) come from that module, as torch
    # records them in source_fn_stack (what get_source_partitions(graph, [nn.Linear]) reads)
    builtin = cls.__module__.startswith(("ember.nn.modules", "ember.ao.")) and \
        not cls.__module__.startswith("ember.nn.modules.container")
    for node in reversed(graph.nodes):
        if node is last:
            break
        if node.op in ("call_function", "call_method", "call_module", "get_attr"):
            inner = node.meta.get("nn_module_stack")
            if builtin and not inner and "source_fn_stack" in node.meta:
                node.meta["source_fn_stack"] = node.meta["source_fn_stack"][:-1] + [(node.name, cls)]
            node.meta["nn_module_stack"] = {**entry, **(inner or {})}
    return result


class NNModuleVariable(VariableTracker):
    """An ember.nn.Module read from outside the frame (guarded by identity).

    Calling it inlines ``type(m).forward`` (so its parameters become graph
    inputs read at run time through their source), with its forward pre-hooks and
    forward hooks inlined around it as eager runs them (the hooks are guarded by
    identity and order); backward hooks break the graph."""

    def __init__(self, module, source):
        self.module = module
        self.source = source

    def python_type(self):
        return type(self.module)

    def truthy(self, tx):
        return True

    def as_python_constant(self):
        raise Unsupported("module is not a constant")

    def var_getattr(self, tx, name):
        from .builder import wrap
        m = self.module
        written = tx.output.attr_overlay.get((id(m), name))
        if written is not None:
            from .deletions import is_deleted, read_deleted_attr
            return read_deleted_attr(tx, m, name) if is_deleted(written) else written
        d = m.__dict__
        src = self.source
        if tx.output.param_override_owners and id(m) in tx.output.param_override_owners:
            swapped = tx.output.param_overrides.get((id(m), name))
            if swapped is not None:
                return swapped          # functional_call's tensor (variables/functional_call.py)
            if name in ("_parameters", "_buffers", "__dict__"):
                raise Unsupported(f"{type(m).__name__}.{name} read during a functional_call of it (the "
                                  f"swapped tensors are not in the real table)")
        if self._is_traversal(tx, name):
            return _TraversalMethod(self, name)
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, {}):
                tx.output.guards.add(f"{name!r} not in {src.expr()}.__dict__", f"{name} is not an instance attribute")
                return wrap(tx, d[store][name], GetItemSource(AttrSource(src, store), name))
        return _attr_of_instance(tx, m, src, name, self)

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _is_traversal(self, tx, name) -> bool:
        """``name`` is Module's own tree walk (not overridden, not an instance attribute)."""
        if name not in _TRAVERSALS or self.source is None or name in self.module.__dict__:
            return False
        from ...nn.modules.module import Module
        if getattr(type(self.module), name, None) is not getattr(Module, name):
            return False
        g = tx.output.guards
        g.add(f"{name!r} not in {self.source.expr()}.__dict__", f"{name} is not an instance attribute")
        g.add(f"type({self.source.expr()}).{name} is {g.ref(getattr(Module, name))}",
              f"{type(self.module).__name__}.{name} is Module's")
        return True

    def _traverse(self, tx, name, args, kwargs):
        """``m.parameters()``, ``named_buffers()``, ``modules()`` ... as an iterator over the
        members found now, each read through its source (tensors become graph inputs). Module's
        own code builds a ``set`` and generators, which are not traced: every loop over
        ``model.parameters()`` was a graph break. The walk is Module's (same order, same
        de-duplication); the dict keys it walked are guarded, and de-duplicated members are
        guarded distinct (or the same) as they are now."""
        import inspect as _inspect
        from ...nn.modules.module import Module
        from .builder import wrap
        from .lists import IteratorVariable, TupleVariable
        bound = _inspect.signature(getattr(Module, name)).bind(self.module, *args, **kwargs)
        bound.apply_defaults()
        opts = dict(bound.arguments)
        g = tx.output.guards
        seen_keys = set()

        def keys_of(src, store):
            s = AttrSource(src, store)
            if s.expr() not in seen_keys:
                seen_keys.add(s.expr())
                g.dict_keys_match(s, list(getattr(_module_at[src.expr()], store).keys()))
            return s

        _module_at = {}

        def walk(mod, src, prefix, memo, dedup):          # Module.named_modules
            if id(mod) in memo:
                return
            if dedup:
                memo.add(id(mod))
            _module_at[src.expr()] = mod
            yield prefix, mod, src
            ms = keys_of(src, "_modules")
            for k, sub in mod._modules.items():
                wrap(tx, sub, GetItemSource(ms, k))      # guards the entry (a module's identity, or None)
                if sub is None:
                    continue
                yield from walk(sub, GetItemSource(ms, k), prefix + ("." if prefix else "") + k, memo, dedup)

        out = []
        if name in ("modules", "named_modules"):
            dedup = opts.get("remove_duplicate", True)
            for pre, mod, src in walk(self.module, self.source, opts.get("prefix", ""), set(), dedup):
                v = wrap(tx, mod, src)
                out.append(TupleVariable([ConstantVariable(pre), v]) if name == "named_modules" else v)
        elif name in ("children", "named_children"):
            _module_at[self.source.expr()] = self.module
            ms = keys_of(self.source, "_modules")
            memo = set()
            for k, sub in self.module._modules.items():
                v = wrap(tx, sub, GetItemSource(ms, k))
                if sub is None or id(sub) in memo:
                    continue
                memo.add(id(sub))
                out.append(TupleVariable([ConstantVariable(k), v]) if name == "named_children" else v)
        else:
            store = "_parameters" if "parameters" in name else "_buffers"
            dedup = opts.get("remove_duplicate", True)
            prefix = opts.get("prefix", "")
            mods = walk(self.module, self.source, prefix, set(), dedup) if opts.get("recurse", True) \
                else [(prefix, self.module, self.source)]
            _module_at[self.source.expr()] = self.module
            memo, members = set(), []
            for pre, mod, src in list(mods):
                ps = keys_of(src, store)
                for k, v in getattr(mod, store).items():
                    swapped = tx.output.param_overrides.get((id(mod), k))
                    if swapped is not None:
                        # functional_call's tensor in this slot (variables/functional_call.py)
                        if not (dedup and id(swapped) in memo):
                            memo.add(id(swapped))
                            full = pre + ("." if pre else "") + k
                            out.append(TupleVariable([ConstantVariable(full), swapped])
                                       if name.startswith("named") else swapped)
                        continue
                    tv = wrap(tx, v, GetItemSource(ps, k))    # a tensor input, or None (guarded)
                    if v is None or (dedup and id(v) in memo):
                        continue
                    memo.add(id(v))
                    members.append(GetItemSource(ps, k))
                    full = pre + ("." if pre else "") + k
                    out.append(TupleVariable([ConstantVariable(full), tv]) if name.startswith("named") else tv)
            if dedup and len(members) > 1:
                # tying two parameters later (b.weight = a.weight) must change what is walked
                g.add(f"len({{id(__m) for __m in ({', '.join(m.expr() for m in members)},)}}) == {len(members)}",
                      "the walked members are distinct objects")
        return IteratorVariable(out, types.GeneratorType)

    def _submodules(self, tx):
        from .builder import wrap
        mods = self.module.__dict__.get("_modules", {})
        return [wrap(tx, v, GetItemSource(AttrSource(self.source, "_modules"), k)) for k, v in mods.items()]

    def _param_container(self, tx):
        """A ParameterList's indices or a ParameterDict's keys, guarded (their parameters are
        read as attributes, each through its own source)."""
        from ...nn.modules.container import ParameterDict, ParameterList
        m = self.module
        if type(m).__getitem__ is ParameterList.__getitem__ and type(m).__iter__ is ParameterList.__iter__:
            tx.output.guards.add(f"{self.source.expr()}._size == {m._size}", f"ParameterList of {m._size}")
            return [str(i) for i in range(m._size)]
        if type(m).__getitem__ is ParameterDict.__getitem__ and type(m).__iter__ is ParameterDict.__iter__:
            tx.output.guards.dict_keys_match(AttrSource(self.source, "_keys"), list(m._keys))
            return list(m._keys)
        return None

    def unpack(self, tx):
        from ...nn.modules.container import ModuleDict, ModuleList, Sequential
        m = self.module
        names = self._param_container(tx)
        if names is not None:
            from ...nn.modules.container import ParameterList
            if isinstance(m, ParameterList):
                return [self.var_getattr(tx, n) for n in names]
            return [ConstantVariable(k) for k in names]
        if type(m).__iter__ in (ModuleList.__iter__, Sequential.__iter__):
            tx.output.guards.len_match(AttrSource(self.source, "_modules"), len(m._modules))
            tx.output.guards.dict_keys_match(AttrSource(self.source, "_modules"), list(m._modules))
            return self._submodules(tx)
        if type(m).__iter__ is ModuleDict.__iter__:
            tx.output.guards.dict_keys_match(AttrSource(self.source, "_modules"), list(m._modules))
            return [ConstantVariable(k) for k in m._modules]
        raise Unsupported(f"iterating over {type(m).__name__}")

    def length(self, tx):
        from ...nn.modules.container import ModuleDict, ModuleList, Sequential
        m = self.module
        if type(m).__len__ in (ModuleList.__len__, Sequential.__len__, ModuleDict.__len__):
            tx.output.guards.dict_keys_match(AttrSource(self.source, "_modules"), list(m._modules))
            return len(m._modules)
        names = self._param_container(tx)
        if names is not None:
            return len(names)
        raise Unsupported(f"len() of {type(m).__name__}")

    def getitem(self, tx, key):
        from ...nn.modules.container import ModuleDict, ModuleList, Sequential
        m = self.module
        k = _specialize_index(key.as_python_constant())
        if type(m).__getitem__ in (ModuleList.__getitem__, Sequential.__getitem__) and isinstance(k, int):
            _note_selector(tx, key, k)
            subs = self.unpack(tx)
            try:
                return subs[k]
            except IndexError:
                raise Unsupported("module index out of range")
        if type(m) in (ModuleList, Sequential) and isinstance(k, slice):
            # ``self.layers[:2]`` / ``self.seq[1:]``: a new container of the same members
            return ModuleSliceVariable(type(m), self.unpack(tx)[k], self, k)
        if type(m).__getitem__ is ModuleDict.__getitem__ and isinstance(k, str):
            self.unpack(tx)
            return self.var_getattr(tx, k)
        names = self._param_container(tx)
        if names is not None:
            from ...nn.modules.container import ParameterList
            if isinstance(m, ParameterList) and isinstance(k, int) and not isinstance(k, bool):
                if not -len(names) <= k < len(names):
                    raise Unsupported("ParameterList index out of range (the program raises)")
                return self.var_getattr(tx, names[k])
            if not isinstance(m, ParameterList) and isinstance(k, str) and k in names:
                return self.var_getattr(tx, k)
        raise Unsupported(f"{type(m).__name__}[{k!r}]")

    def call_function(self, tx, args, kwargs):
        m = self.module
        e = self.source.expr()
        g = tx.output.guards
        backward = [k for k in ("_backward_hooks", "_backward_pre_hooks") if getattr(m, k, None)]
        if backward:
            # backward hooks wrap the call's inputs and outputs in autograd functions, which the
            # graph cannot hold: at the break Module.__call__ runs all the hooks; the forward's
            # own frame is compiled
            hooks = [k for k in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
                     if getattr(m, k, None)]
            raise Unsupported(f"{type(m).__name__} has module hooks ({', '.join(hooks)}): the call runs "
                              f"them eagerly")
        hooked = bool(getattr(m, "_forward_pre_hooks", None) or getattr(m, "_forward_hooks", None))
        if hooked:
            g.add(f"not ({e}._backward_hooks or {e}._backward_pre_hooks)", f"{e} has no backward hooks")
        else:
            g.add(f"not ({e}._forward_pre_hooks or {e}._forward_hooks or {e}._backward_hooks or "
                  f"{e}._backward_pre_hooks)", f"{e} has no hooks")
        from ...nn.modules import module as _mm
        for name in ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_hooks"):
            if hasattr(_mm, name):
                if getattr(_mm, name):
                    raise Unsupported("global module hooks are registered")
                g.add(f"not {g.ref(getattr(_mm, name))}", f"no {name}")
        if "forward" in m.__dict__:
            raise Unsupported(f"{type(m).__name__} instance has its own forward attribute")
        g.add(f"'forward' not in {e}.__dict__", "no instance-level forward")
        if type(m).__call__ is not _mm.Module.__call__ and "__call__" in type(m).__dict__:
            if hooked:
                # whether (and where) the hooks run is up to that __call__
                raise Unsupported(f"{type(m).__name__} overrides __call__ and has forward hooks: the call "
                                  f"runs eagerly")
            fn = type(m).__call__
            g.add(f"type({e}).__call__ is {g.ref(fn)}", f"{type(m).__name__}.__call__ unchanged")
        else:
            fn = type(m).forward
            g.add(f"type({e}).forward is {g.ref(fn)}", f"{type(m).__name__}.forward unchanged")
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(f"{type(m).__name__}.forward is not a Python function")
        from ... import compiler as _compiler
        from ..eval_frame import is_module_call_code
        if not _compiler._EXPORT_DEPTH and tx.parent is None and is_module_call_code(tx.code):
            # ember.compile(module)'s own call: torch's graph of a compiled module's forward does
            # not list the module itself (export keeps it: the root of the fully qualified names)
            return self._call_forward(tx, fn, hooked, args, kwargs)
        # which module call made each node: meta["nn_module_stack"] (ember.export.unflatten, custom
        # backends, get_source_partitions)
        return _record_module_call(tx, m, e, lambda: self._call_forward(tx, fn, hooked, args, kwargs))

    def _call_forward(self, tx, fn, hooked, args, kwargs):
        name = "forward" if fn is getattr(type(self.module), "forward", None) else "__call__"
        if any(k.startswith("_ember_") for k in getattr(fn, "__dict__", ())):
            # a forward decorated by ember (``@ember.no_grad()`` on a rotary embedding's
            # forward): what wrap() recognises, as for a decorated method (_attr_of_instance);
            # inlining the wrapper's own code broke the graph at its grad-mode internals
            from .builder import wrap
            fv = wrap(tx, fn, AttrSource(AttrSource(self.source, "__class__"), name))
        else:
            fv = UserFunctionVariable(fn, _class_function_source(self.source, fn, name))
        if hooked:
            return self._call_with_hooks(tx, fv, list(args), dict(kwargs))
        return fv.call_function(tx, [self] + list(args), kwargs)

    def _hooks(self, tx, store, kind):
        """``[(hook_id, tracker, description)]`` of ``m.<store>``, in order. The ids (unique per registration)
        and the hook objects are guarded, so registering or removing a hook recompiles."""
        from .builder import wrap
        d = getattr(self.module, store)
        src = AttrSource(self.source, store)
        g = tx.output.guards
        g.dict_keys_match(src, list(d))
        out = []
        for hook_id, hook in d.items():
            hsrc = GetItemSource(src, hook_id)
            g.id_match(hsrc, hook)
            what = f"{kind} {getattr(hook, '__qualname__', type(hook).__name__)} of {type(self.module).__name__}"
            try:
                hv = wrap(tx, hook, hsrc)
            except Unsupported as err:
                raise Unsupported(f"{what} cannot be traced ({err}): the call runs eagerly")
            if type(hv).call_function is VariableTracker.call_function:
                raise Unsupported(f"{what} is a {type(hook).__name__}, which the compiler cannot inline "
                                  f"(make it a Python function or method): the call runs eagerly")
            out.append((hook_id, hv, what))
        return out

    def _flags(self, tx, store, ids):
        """Which of ``ids`` are in ``m.<store>`` (the with_kwargs sets), its keys guarded."""
        d = getattr(self.module, store)
        tx.output.guards.dict_keys_match(AttrSource(self.source, store), list(d))
        return {i for i in ids if i in d}

    def _call_with_hooks(self, tx, forward, args, kwargs):
        """``Module._call_impl`` without backward hooks, traced: the forward pre-hooks, the
        forward, then the forward hooks, with eager's rules for what a hook's return value
        replaces. ``always_call`` hooks run in order like the others (that flag only matters when
        the call raises, which is not traced: an error while tracing is a graph break, so eager
        runs the call)."""
        from .lists import DictVariable, TupleVariable
        pre = self._hooks(tx, "_forward_pre_hooks", "forward pre-hook")
        post = self._hooks(tx, "_forward_hooks", "forward hook")
        pre_kw = self._flags(tx, "_forward_pre_hooks_with_kwargs", [i for i, _, _ in pre])
        post_kw = self._flags(tx, "_forward_hooks_with_kwargs", [i for i, _, _ in post])
        args_v = TupleVariable(args)
        kwargs_v = DictVariable(kwargs)     # one dict, as in eager: a hook may change it in place
        for hook_id, hook, what in pre:
            if hook_id in pre_kw:
                res = hook.call_function(tx, [self, args_v, kwargs_v], {})
                if _returned_none(res, what):
                    continue
                if not (_is_tuple(res, what) and len(res.unpack(tx)) == 2):
                    raise Unsupported(f"{what} (with_kwargs) must return None or (args, kwargs) "
                                      f"(the program raises)")
                args_v, kwargs_v = res.unpack(tx)
                if not isinstance(kwargs_v, DictVariable):
                    raise Unsupported(f"{what} (with_kwargs) returned kwargs that are not a dict")
            else:
                res = hook.call_function(tx, [self, args_v], {})
                if not _returned_none(res, what):
                    args_v = res if _is_tuple(res, what) else TupleVariable([res])
        fwd_kwargs = dict(kwargs_v.items)
        if not all(isinstance(k, str) for k in fwd_kwargs):
            raise Unsupported("a forward pre-hook left non-string keys in the keyword arguments")
        result = forward.call_function(tx, [self] + list(args_v.unpack(tx)), fwd_kwargs)
        for hook_id, hook, what in post:
            hargs = [self, args_v, kwargs_v, result] if hook_id in post_kw else [self, args_v, result]
            res = hook.call_function(tx, hargs, {})
            if not _returned_none(res, what):
                result = res
        return result

    def __repr__(self):
        return f"NNModuleVariable({type(self.module).__name__})"


class ModuleSliceVariable(VariableTracker):
    """``ModuleList[a:b]`` / ``Sequential[a:b]`` of a guarded container (exactly those classes):
    the new container eager code builds, as the member trackers it holds (each read through its
    own source). It can be iterated, measured, indexed, sliced again and (a Sequential) called;
    anything else about it is unsupported. Rebuilt after the graph as the same slice of the
    container (a fresh container, as in eager)."""

    def __init__(self, cls, items, base, key):
        self.cls = cls            # ModuleList or Sequential
        self.items = items        # NNModuleVariable of each member
        self.base = base          # the tracker sliced (an NNModuleVariable or a ModuleSliceVariable)
        self.key = key            # the slice

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        return True

    def as_python_constant(self):
        raise Unsupported("module is not a constant")

    def unpack(self, tx):
        return list(self.items)

    def length(self, tx):
        return len(self.items)

    def getitem(self, tx, key):
        k = key.as_python_constant()
        if isinstance(k, slice):
            return ModuleSliceVariable(self.cls, self.items[k], self, k)
        if isinstance(k, int) and not isinstance(k, bool):
            if not -len(self.items) <= k < len(self.items):
                raise Unsupported("module index out of range")
            return self.items[k]
        raise Unsupported(f"{self.cls.__name__}[{k!r}] of a sliced container")

    def call_function(self, tx, args, kwargs):
        from ...nn.modules.container import Sequential
        if self.cls is not Sequential or kwargs or len(args) != 1:
            raise Unsupported(f"calling a sliced {self.cls.__name__}")
        x = args[0]
        for m in self.items:          # Sequential.forward
            x = m.call_function(tx, [x], {})
        return x

    def reconstruct(self, out):
        k = self.key
        return f"{out.materialize(self.base)}[{out.ref(slice)}({k.start!r}, {k.stop!r}, {k.step!r})]"

    def __repr__(self):
        return f"ModuleSliceVariable({self.cls.__name__}, {len(self.items)} modules)"


class _TraversalMethod(VariableTracker):
    """``m.parameters`` (and the other tree walks) bound to a module tracker."""

    def __init__(self, module_var, name):
        self.module_var, self.name = module_var, name

    def call_function(self, tx, args, kwargs):
        if not all(a.is_python_constant() for a in list(args) + list(kwargs.values())):
            raise Unsupported(f"Module.{self.name} with non-constant arguments")
        return self.module_var._traverse(tx, self.name, [a.as_python_constant() for a in args],
                                         {k: v.as_python_constant() for k, v in kwargs.items()})

    def __repr__(self):
        return f"_TraversalMethod({self.name})"


class UserObjectVariable(VariableTracker):
    """An instance of a user class (dataclasses included): attributes are read statically."""

    def __init__(self, obj, source):
        self.obj = obj
        self.source = source

    def python_type(self):
        return type(self.obj)

    def truthy(self, tx):
        from .user_operators import user_truth
        return user_truth(tx, self)

    def var_getattr(self, tx, name):
        return _attr_of_instance(tx, self.obj, self.source, name, self)

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs):
        call = inspect.getattr_static(type(self.obj), "__call__", None)
        if isinstance(call, types.FunctionType):
            return UserFunctionVariable(call).call_function(tx, [self] + list(args), kwargs)
        raise Unsupported(f"calling a {type(self.obj).__name__} object")

    def __repr__(self):
        return f"UserObjectVariable({type(self.obj).__name__})"


class PythonModuleVariable(VariableTracker):
    def __init__(self, module, source, trusted=False):
        self.module = module
        self.source = source
        self.trusted = trusted   # ember's own modules: attributes are not guarded

    def python_type(self):
        return types.ModuleType

    def as_python_constant(self):
        return self.module

    def var_getattr(self, tx, name):
        from .builder import wrap
        written = tx.output.attr_overlay.get((id(self.module), name))
        if written is not None:
            from .deletions import is_deleted, read_deleted_attr
            return read_deleted_attr(tx, self.module, name) if is_deleted(written) else written
        try:
            v = getattr(self.module, name)
        except AttributeError as e:
            if type(self.module) is not types.ModuleType or "__getattr__" in self.module.__dict__:
                raise Unsupported(f"module {self.module.__name__} has no attribute {name}")
            if self.source is not None and not self.trusted:
                g = tx.output.guards
                g.add(f"not hasattr({self.source.expr()}, {name!r})", f"module {self.module.__name__} has no {name}")
            from .exceptions import raise_observed
            raise_observed(tx, AttributeError, str(e))
        return wrap(tx, v, AttrSource(self.source, name) if self.source else None, guard=not self.trusted)

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def __repr__(self):
        return f"PythonModuleVariable({self.module.__name__})"


class EmberObjectVariable(PythonModuleVariable):
    """An ember-internal helper object (e.g. the lazy ``F`` namespace): attributes read for real."""

    def python_type(self):
        return type(self.module)

    def as_python_constant(self):
        raise Unsupported("ember object is not a constant")

    def __repr__(self):
        return f"EmberObjectVariable({type(self.module).__name__})"


class ClassVariable(VariableTracker):
    def __init__(self, cls, source=None):
        self.cls = cls
        self.source = source

    def python_type(self):
        return type(self.cls)

    def as_python_constant(self):
        return self.cls

    def unpack(self, tx):
        """An Enum class's members, as ``list(cls)`` gives them (aliases and a Flag's combined
        values left out): fixed once the class exists, and the class is guarded by identity."""
        import enum
        if isinstance(self.cls, enum.EnumMeta):
            return [ConstantVariable(m) for m in self.cls]
        return super().unpack(tx)

    def var_getattr(self, tx, name):
        from .builder import wrap
        if self.cls is object and name == "__setattr__":
            return ObjectSetattrVariable()      # a frozen dataclass's __init__ writes fields with it
        if name in ("__name__", "__qualname__", "__module__"):
            # type(m).__name__: fixed for the class (the class itself is guarded by identity)
            return ConstantVariable(getattr(self.cls, name))
        try:
            attr = inspect.getattr_static(self.cls, name)
        except AttributeError:
            import abc
            if type(self.cls) not in (type, abc.ABCMeta):
                raise Unsupported(f"class {self.cls.__name__} has no attribute {name}")
            if self.source is not None:
                g = tx.output.guards
                g.add(f"{g.ref(_static_missing)}({self.source.expr()}, {name!r})",
                      f"{self.cls.__name__} has no attribute {name}")
            from .exceptions import raise_observed
            raise_observed(tx, AttributeError, f"type object {self.cls.__name__!r} has no attribute {name!r}")
        if isinstance(attr, staticmethod):
            attr = attr.__func__
        elif isinstance(attr, classmethod):
            return UserMethodVariable(wrap(tx, attr.__func__, None, guard=False), self)
        return wrap(tx, attr, AttrSource(self.source, name) if self.source else None,
                    guard=self.source is not None)

    def call_function(self, tx, args, kwargs):
        from .builtin import BuiltinVariable
        if self.cls in BuiltinVariable.CLASS_CALLS:
            return BuiltinVariable(self.cls).call_function(tx, args, kwargs)
        from ... import types as _t
        from ...autograd import grad_mode as _gm
        if self.cls is super:
            return make_super(tx, args)
        if self.cls in (_gm.no_grad, _gm.enable_grad) and not args and not kwargs:
            from .ctx import GradModeVariable
            return GradModeVariable(self.cls is _gm.enable_grad)
        if self.cls is _gm.inference_mode and _inference_mode_on(args, kwargs):
            from .ctx import InferenceModeVariable
            return InferenceModeVariable()
        if self.cls is _gm.set_grad_enabled and len(args) == 1 and not kwargs:
            from .ctx import SetGradEnabledVariable
            return SetGradEnabledVariable.create(tx, args[0])
        if getattr(self.cls, "_ember_dynamo_constructible", False) and \
                all(a.is_python_constant() for a in list(args) + list(kwargs.values())):
            # an immutable value object (a DTensor placement such as Shard(0)): made while tracing
            return ConstantVariable(self.cls(*[a.as_python_constant() for a in args],
                                             **{k: v.as_python_constant() for k, v in kwargs.items()}))
        if isinstance(self.cls, type) and issubclass(self.cls, tuple) and hasattr(self.cls, "_fields"):
            from .lists import TupleVariable
            fields = self.cls._fields
            vals = list(args)
            for f in fields[len(vals):]:
                if f in kwargs:
                    vals.append(kwargs[f])
                elif f in getattr(self.cls, "_field_defaults", {}):
                    from .builder import wrap
                    vals.append(wrap(tx, self.cls._field_defaults[f], None, guard=False))
                else:
                    raise Unsupported(f"{self.cls.__name__}() missing field {f}")
            if len(vals) != len(fields) or set(kwargs) - set(fields):
                raise Unsupported(f"bad arguments to {self.cls.__name__}()")
            return TupleVariable(vals, cls=self.cls)
        import enum
        if isinstance(self.cls, enum.EnumMeta) and len(args) == 1 and not kwargs and args[0].is_python_constant():
            # ``Kind("a")``: the member with that value (an existing constant; a value with no
            # member raises ValueError, as eager does); it broke the graph
            try:
                return ConstantVariable(self.cls(args[0].as_python_constant()))
            except ValueError as e:
                from .exceptions import raise_from_real
                raise_from_real(tx, e, str(e))
        if self.cls is _t.Size:
            from .lists import TupleVariable
            items = args[0].unpack(tx) if args else []
            return TupleVariable(items, cls=_t.Size)
        if self.cls is _t.device or self.cls is _t.dtype:
            if all(a.is_python_constant() for a in args) and not kwargs:
                return ConstantVariable(self.cls(*[a.as_python_constant() for a in args]))
        from ... import _finfo
        if self.cls in (_finfo.finfo, _finfo.iinfo) and all(a.is_python_constant() for a in args) \
                and all(v.is_python_constant() for v in kwargs.values()):
            # machine limits of a (guarded) dtype: a constant (ember.finfo(x.dtype).min in masks)
            return ConstantVariable(self.cls(*[a.as_python_constant() for a in args],
                                             **{k: v.as_python_constant() for k, v in kwargs.items()}))
        import collections
        import contextlib
        import functools
        if self.cls in (collections.OrderedDict, collections.defaultdict):
            # dict(...) of the remaining arguments, typed as the subclass (IntermediateLayerGetter's
            # ``out = OrderedDict()``, ``groups = defaultdict(list)``)
            from .builtin import BuiltinVariable
            factory = None
            if self.cls is collections.defaultdict:
                if args:
                    if not args[0].is_python_constant():
                        raise Unsupported("defaultdict with a default_factory that is not a constant")
                    factory, args = args[0].as_python_constant(), args[1:]
            d = BuiltinVariable(dict).call_function(tx, list(args), kwargs)
            d.cls, d.default_factory = self.cls, factory
            return d
        from ...amp.autocast_mode import autocast as _autocast
        if self.cls is _autocast:
            from .ctx import AutocastVariable
            return AutocastVariable.create(tx, args, kwargs)
        from ...profiler import record_function as _record_function
        if self.cls is _record_function or (isinstance(self.cls, type) and issubclass(self.cls, _record_function)):
            # a profiler range in compiled code: traced as a plain block (see record_function)
            from .ctx import NullContextVariable
            return NullContextVariable(ConstantVariable(None))
        from ...nn.attention import sdpa_kernel as _sdpa_kernel
        if self.cls is _sdpa_kernel:
            return _sdpa_kernel_block(tx, args, kwargs)
        if self.cls is contextlib.nullcontext and len(args) <= 1 and set(kwargs) <= {"enter_result"}:
            from .ctx import NullContextVariable
            return NullContextVariable(args[0] if args else kwargs.get("enter_result", ConstantVariable(None)))
        if self.cls is functools.partial and args and not isinstance(args[0], PartialVariable):
            return PartialVariable(args[0], list(args[1:]), dict(kwargs))
        if isinstance(self.cls, type) and issubclass(self.cls, BaseException):
            from .exceptions import can_model, construct_exception
            if can_model(self.cls):
                return construct_exception(tx, self, args, kwargs)
        from .dict_objects import DictObjectVariable
        if DictObjectVariable.can_model(self.cls):
            return DictObjectVariable.construct(tx, self, args, kwargs)
        if NewObjectVariable.can_model(self.cls):
            return NewObjectVariable.construct(tx, self, args, kwargs)
        raise Unsupported(f"constructing a {self.cls.__name__} object")

    def reconstruct(self, out):
        return out.ref(self.cls)

    def __repr__(self):
        return f"ClassVariable({self.cls.__name__})"


def _inference_mode_on(args, kwargs):
    """``inference_mode()`` / ``inference_mode(True)`` (a constant mode that switches it on)."""
    vals = list(args) + [kwargs[k] for k in kwargs if k == "mode"]
    if len(vals) != len(args) + len(kwargs) or len(vals) > 1:
        return False
    return not vals or (vals[0].is_python_constant() and vals[0].as_python_constant() is True)


# ember functions whose result is a pure function of metadata/constants: folded, never in the graph
_AUTOGRAD_CALLS = {"grad", "backward", "jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"}
_FOLD = {"is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype", "is_grad_enabled",
         "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available",   # (regions: guarded or traced)
         "promote_types", "result_type", "can_cast", "is_inference_mode_enabled"}
_FOLD_DEVICE = {("ember.runtime.cuda", "is_available"), ("ember.runtime.cuda", "device_count"),
                ("ember.backends.cuda", "is_built"), ("ember.backends.mps", "is_available"),
                ("ember.backends.mps", "is_built"), ("ember._absent_backend", "is_available"),
                ("ember.distributed.distributed_c10d", "is_available")}
# folded too, but guarded: a process group may be set up between two calls
_FOLD_GUARDED = {("ember.distributed.distributed_c10d", "is_initialized")}
_BLOCKED = {"manual_seed", "seed", "set_rng_state", "get_rng_state", "initial_seed", "save", "load",
            "set_default_dtype", "set_grad_enabled", "set_printoptions", "compile", "use_deterministic_algorithms",
            "nonzero", "masked_select", "unique", "unique_consecutive", "bincount", "argwhere",
            "is_nonzero", "equal", "allclose", "set_num_threads", "no_grad", "enable_grad",
            "inference_mode"}


# ember functions making a tensor from one Python number: (index of the value argument, its
# keyword, the dtype an int value gives)
_FILL_FUNCS = {"full": (1, "fill_value", "int64"), "tensor": (0, "data", "int64"),
               "as_tensor": (0, "data", "int64"), "scalar_tensor": (0, "s", None)}


def _symbolic_fill(tx, fn, name, args, kwargs):
    """``ember.full(size, n)`` / ``ember.tensor(n)`` / ``scalar_tensor(n)`` of a symbolic int
    ``n`` (a loop counter in a resume function, an int argument that changed): traced as
    ``zeros(size, dtype) + n``, whose graph reads ``n`` instead of specialising it -- the
    example run of ``full`` needs a Python number, which guarded each value (a decoding loop
    with ``torch.full((1,), step)`` recompiled every step until the limit). None: not such a
    call (traced as it is)."""
    from ...fx.experimental.symbolic_shapes import SymInt
    spec = _FILL_FUNCS.get(name)
    import ember as _ember
    if spec is None or getattr(_ember, name, None) is not fn:
        return None
    pos, key, int_dtype = spec
    args, kwargs = list(args), dict(kwargs)
    if len(args) > pos:
        value = args.pop(pos)
    elif key in kwargs:
        value = kwargs.pop(key)
    else:
        return None
    if not (value.is_python_constant() and type(value.as_python_constant()) is SymInt):
        return None
    if name == "full" and not args and "size" in kwargs:
        args.append(kwargs.pop("size"))
    if set(kwargs) - {"dtype", "device"} or len(args) != (1 if name == "full" else 0):
        return None           # (requires_grad=, out=, a layout: traced as they are)
    from ... import zeros
    dtype = kwargs.get("dtype")
    if dtype is None or (dtype.is_python_constant() and dtype.as_python_constant() is None):
        from ... import float32, int64
        kwargs["dtype"] = ConstantVariable(int64 if int_dtype else float32)
    size = args[0] if args else ConstantVariable(())
    z = tx.output.call_function(zeros, [size], kwargs)
    return tx.output.call_function(operator.add, [z, value], {})


def _note_selector(tx, key, k):
    """``self.experts[e]`` with ``e`` an argument of the frame (a resume function inside
    ``for e in range(n)``): the entry is specialised to ``e == k``, i.e. to one member module.
    Recorded so the recompile limit counts it per member, as it counts a frame called on each
    of several modules (``for expert in self.experts`` passes the module itself)."""
    from ..source import LocalSource
    src = getattr(key, "source", None)
    if isinstance(src, LocalSource) and type(k) is int:
        tx.output.guards.selectors[src.index] = k


def _specialize_index(k):
    """A symbolic int used as a container index (``self.experts[i]`` in a resume function whose
    loop counter became dynamic) picks one member: specialised (``int()`` guards its value, and
    another value recompiles, as torch.compile does); it broke the graph."""
    from ...fx.experimental.symbolic_shapes import SymInt
    return int(k) if type(k) is SymInt else k


def _has_symbolic(c, is_symbolic):
    if isinstance(c, (tuple, list)):
        return any(_has_symbolic(x, is_symbolic) for x in c)
    return is_symbolic(c)


class EmberFunctionVariable(VariableTracker):
    """A function of ember (``ember.relu``, ``F.linear``, ``ember.cat``): one graph node per call."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def var_getattr(self, tx, name):
        from ...ops._aten_namespace import OpOverloadPacket
        if isinstance(self.fn, OpOverloadPacket) and not name.startswith("_"):
            # ``aten.mm.default``: the overload object (passed to out_dtype, called like the op)
            from .builder import wrap
            try:
                overload = getattr(self.fn, name)
            except AttributeError:
                raise Unsupported(f"attribute {name!r} of {self}") from None
            return wrap(tx, overload, AttrSource(self.source, name) if self.source else None)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        name = getattr(self.fn, "__name__", "")
        if name in _BLOCKED:
            raise Unsupported(f"ember.{name} is not traceable (data-dependent output or global side effect)")
        from .functional_call import is_functional_call
        if is_functional_call(self.fn):
            # traced through with the module's tensors swapped (it broke the graph as one node)
            from .functional_call import call_functional_call
            return call_functional_call(tx, self.fn, args, kwargs)
        if getattr(self.fn, "__module__", "") == "ember.utils.checkpoint":
            # captured as a region tagged for recomputation, or a graph break (see checkpoint.py)
            from .checkpoint import call_checkpoint
            return call_checkpoint(tx, self.fn, args, kwargs)
        if name in _AUTOGRAD_CALLS and getattr(self.fn, "__module__", "").startswith("ember.autograd"):
            if name in ("grad", "backward"):
                from .engine_inputs import check_engine_inputs
                pos = 1 if name == "grad" else 5          # grad(outputs, inputs) / backward(..., inputs)
                check_engine_inputs(args[pos] if len(args) > pos else kwargs.get("inputs"), f"ember.autograd.{name}()")
            # the autograd engine over the graph's values: recorded as one node, aot's trace of it
            # found no grad_fn ("element 0 of tensors does not require grad"); run eagerly, as
            # PyTorch does, on the outputs of the graph before the break
            raise Unsupported(f"ember.autograd.{name}() runs the autograd engine (a graph break)")
        allargs = list(args) + list(kwargs.values())
        if (getattr(self.fn, "__module__", ""), name) in _FOLD_DEVICE and not args and not kwargs:
            # whether a device backend exists: a constant of the process, as torch.compile folds
            # ``torch.cuda.is_available()`` (it was recorded as a graph op and broke the graph)
            return ConstantVariable(self.fn())
        if (getattr(self.fn, "__module__", ""), name) in _FOLD_GUARDED and not args and not kwargs:
            value = self.fn()
            g = tx.output.guards
            g.add(f"{g.ref(self.fn)}() is {value!r}", f"{self.fn.__module__}.{name}() is {value!r}")
            return ConstantVariable(value)
        if name in _FOLD:
            from .tensor import TensorVariable
            ex = [a.example if isinstance(a, TensorVariable) else a.as_python_constant() for a in args]
            exk = {k: (a.example if isinstance(a, TensorVariable) else a.as_python_constant())
                   for k, a in kwargs.items()}
            from .builder import wrap_constant_result
            return wrap_constant_result(self.fn(*ex, **exk))
        from .tensor import TensorVariable
        from ...fx.experimental.symbolic_shapes import is_symbolic
        if not kwargs and all(a.is_python_constant() and not isinstance(a, TensorVariable) for a in args) \
                and not any(_has_symbolic(a.as_python_constant(), is_symbolic) for a in args):
            # (a Size of symbolic sizes too: ember.ones(x.shape) must not run for real)
            # an internal accessor such as ``_api()`` returning a module: fold it
            try:
                res = self.fn(*[a.as_python_constant() for a in args])
            except Exception:
                res = None
            if isinstance(res, types.ModuleType):
                return PythonModuleVariable(res, None, trusted=res.__name__.startswith("ember"))
        del allargs
        filled = _symbolic_fill(tx, self.fn, name, args, kwargs)
        if filled is not None:
            return filled
        try:
            return tx.output.call_function(self.fn, list(args), kwargs)
        except Unsupported as e:
            if " returned " in e.msg and "not a tensor" in e.msg:
                # the generic message ("f returned NoneType, not a tensor") hides the real reason:
                # this ember function is not an operator, yet it was called as one graph node
                mod = getattr(self.fn, "__module__", "?")
                qual = getattr(self.fn, "__qualname__", name)
                raise Unsupported(
                    f"{mod}.{qual} is an ember function, which dynamo records as one graph operator "
                    f"instead of tracing into it, but it is not an operator: {e.msg.split(' (')[0]}. "
                    f"(ember's Python code is traced through only in the modules "
                    f"ember.dynamo.variables.builder.is_inlined_ember_module names)") from None
            raise

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return f"EmberFunctionVariable({getattr(self.fn, '__name__', self.fn)})"


class IsCompilingVariable(VariableTracker):
    """``ember.compiler.is_compiling``: False when run, True while dynamo traces the call
    (code may choose a formulation that captures without graph breaks, e.g. an optimizer's
    step counter kept as a tensor instead of read with ``.item()``)."""

    def __init__(self, fn):
        self.fn = fn

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"{self.fn.__name__}() takes no arguments")
        # is_compiling: True; is_exporting: whether an ember.export is tracing (the value it
        # has while this trace runs)
        traced = getattr(self.fn, "_ember_traced_value", None)
        return ConstantVariable(True if traced is None else bool(traced()))

    def __repr__(self):
        return "IsCompilingVariable()"


def make_super(tx, args):
    """``super()`` / ``super(cls, obj)``: a tracker resolving attributes along the MRO."""
    if len(args) == 2:
        cls_v, obj = args
    elif not args:
        code = tx.code
        cell = tx.locals.get("__class__")
        if cell is None or not code.co_argcount:
            raise Unsupported("super() without __class__ cell or first argument")
        cls_v = cell.contents
        obj = tx.locals.get(code.co_varnames[0])
        from .functions import CellVariable
        if isinstance(obj, CellVariable):
            obj = obj.contents
    else:
        raise Unsupported("super() with one argument")
    if cls_v is None or obj is None or not cls_v.is_python_constant():
        raise Unsupported("super() arguments not known")
    return SuperVariable(cls_v.as_python_constant(), obj)


class SuperVariable(VariableTracker):
    def __init__(self, cls, obj):
        self.cls, self.obj = cls, obj

    def var_getattr(self, tx, name):
        from .exceptions import BuiltinExceptionInit, ExceptionVariable, _BoundExcMethod
        target = getattr(self.obj, "module", None) or getattr(self.obj, "obj", None)
        if target is not None:
            obj_type = type(target)
        elif isinstance(self.obj, (NewObjectVariable, ExceptionVariable)):
            obj_type = self.obj.python_type()
        else:
            raise Unsupported("super() on a non-object")
        mro = obj_type.__mro__
        try:
            start = mro.index(self.cls) + 1
        except ValueError:
            raise Unsupported("super(): class not in the MRO")
        for klass in mro[start:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    return UserMethodVariable(UserFunctionVariable(attr), self.obj)
                if isinstance(self.obj, ExceptionVariable) and klass.__module__ == "builtins":
                    if name == "__init__":
                        return BuiltinExceptionInit(self.obj, klass)
                    if name in ("__str__", "__repr__"):
                        return _BoundExcMethod(self.obj, name, builtin_only=True)
                special = _builtin_super_method(tx, self.obj, klass, name, attr)
                if special is not None:
                    return special
                raise Unsupported(f"super().{name} is a {type(attr).__name__}")
        raise Unsupported(f"super() has no attribute {name}")

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)


def _builtin_super_method(tx, obj, klass, name, attr):
    """``super().name`` resolving to a builtin's method (``object.__setattr__``, ``dict.__setitem__``
    ...) on an object made in the frame: a tracker for it, or None."""
    if isinstance(obj, NewObjectVariable) and klass is object and name == "__setattr__":
        return _BoundSetattr(obj)
    hook = getattr(obj, "builtin_super_method", None)
    if hook is not None:
        return hook(tx, klass, name)
    return None


class _BoundSetattr(VariableTracker):
    """``super().__setattr__`` reaching ``object.__setattr__`` on an object made in the frame."""

    def __init__(self, obj):
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        if len(args) != 2 or kwargs or not args[0].is_python_constant():
            raise Unsupported("super().__setattr__ with unexpected arguments")
        self.obj.set_attr(args[0].as_python_constant(), args[1], raw=True)
        return ConstantVariable(None)


class NewObjectVariable(VariableTracker):
    """An instance of a plain user class created inside the frame (a dataclass output such as
    ``Out(logits=..., loss=...)``, a small state holder): its ``__init__`` is inlined, its
    attributes are trackers written and read here, and where it leaves the frame (returned,
    passed to a resume function, stored on an outside object) it is rebuilt without running
    ``__init__`` again: ``cls.__new__(cls)`` with the final attribute values (one object per
    tracker, so identity is kept). Classes whose construction does more than set attributes in
    Python are not modelled (custom ``__new__``/metaclass/``__setattr__``/``__slots__``, builtin
    or C bases, nn.Modules): constructing those stays a graph break."""

    def __init__(self, cls, class_var):
        self.cls = cls
        self.class_var = class_var        # the ClassVariable (with its source, for guarded class attributes)
        self.attrs = {}

    @staticmethod
    def can_model(cls) -> bool:
        import abc
        if not isinstance(cls, type) or type(cls) not in (type, abc.ABCMeta):
            return False
        if getattr(cls, "__abstractmethods__", None):
            return False                  # instantiation raises TypeError: let Python say so
        from ...nn import Module
        from ...tensor import Tensor
        if issubclass(cls, (Module, Tensor, BaseException)):
            return False
        from .builder import _is_ember_module_name, is_inlined_ember_module
        mod = cls.__module__ or ""
        if _is_ember_module_name(mod) and not is_inlined_ember_module(mod):
            return False     # ember's own objects (autocast regions, generators, ...) are built for real
        for k in cls.__mro__[:-1]:
            # (an empty __slots__ -- abc.ABC's, typing.Generic's -- adds no slot: a subclass
            # without one still keeps its attributes in a __dict__)
            slots = k.__dict__.get("__slots__", ())
            if k.__module__ == "builtins" or isinstance(slots, str) or len(slots):
                return False
        frozen = getattr(getattr(cls, "__dataclass_params__", None), "frozen", False)
        if cls.__new__ is not object.__new__ or cls.__getattribute__ is not object.__getattribute__ \
                or (cls.__setattr__ is not object.__setattr__ and not frozen):
            return False
        hook = inspect.getattr_static(cls, "__getattr__", None)
        if "__del__" in dir(cls) or (hook is not None and not isinstance(hook, types.FunctionType)):
            return False         # (a Python __getattr__ is inlined for a miss: var_getattr)
        init = cls.__init__
        return init is object.__init__ or isinstance(init, types.FunctionType)

    @classmethod
    def construct(cls, tx, class_var, args, kwargs):
        obj = cls(class_var.cls, class_var)
        init = class_var.cls.__init__
        if init is object.__init__:
            if args or kwargs:
                raise Unsupported(f"{class_var.cls.__name__}() takes no arguments (the program raises)")
            return obj
        # with a source, __init__'s defaults are read (and guarded) through it: a dataclass's
        # default_factory sentinel is an object only reachable that way
        src = AttrSource(class_var.source, "__init__") if class_var.source is not None else None
        result = UserFunctionVariable(init, src).call_function(tx, [obj] + list(args), kwargs)
        if not (result.is_python_constant() and result.as_python_constant() is None):
            raise Unsupported(f"{class_var.cls.__name__}.__init__ returned a value (the program raises)")
        return obj

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        from .user_operators import user_truth
        return user_truth(tx, self)

    def has_attr(self, name):
        """True/False when known without running user code; None when a ``__getattr__`` would
        decide (``hasattr`` then reads the attribute: var_getattr inlines it)."""
        if name in self.attrs:
            return True
        try:
            inspect.getattr_static(self.cls, name)
            return True
        except AttributeError:
            return None if inspect.getattr_static(self.cls, "__getattr__", None) is not None else False

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return self.class_var
        if name == "__dict__":
            raise Unsupported(f"{self.cls.__name__}.__dict__ of an object made in the frame")
        try:
            attr = inspect.getattr_static(self.cls, name)
        except AttributeError:
            src = self.class_var.source
            if src is not None:
                g = tx.output.guards
                g.add(f"{g.ref(_static_missing)}({src.expr()}, {name!r})", f"{self.cls.__name__} has no attribute {name}")
            hook = inspect.getattr_static(self.cls, "__getattr__", None)
            if isinstance(hook, types.FunctionType):
                # CPython calls __getattr__ after the miss (can_model admits only a Python one)
                if src is not None:
                    g.add(f"{g.ref(inspect.getattr_static)}({src.expr()}, '__getattr__', None) is {g.ref(hook)}",
                          f"{self.cls.__name__}.__getattr__ unchanged")
                return UserFunctionVariable(hook).call_function(tx, [self, ConstantVariable(name)], {})
            from .exceptions import raise_observed
            raise_observed(tx, AttributeError, f"{self.cls.__name__!r} object has no attribute {name!r}")
        src = self.class_var.source
        if src is not None and isinstance(attr, (types.FunctionType, property, classmethod)):
            # the method / property inlined must still be the class's on later calls
            g = tx.output.guards
            g.add(f"{g.ref(inspect.getattr_static)}({src.expr()}, {name!r}, None) is {g.ref(attr)}",
                  f"{self.cls.__name__}.{name} unchanged")
        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(attr), self)
        if isinstance(attr, property):
            if attr.fget is None:
                raise Unsupported(f"unreadable property {name}")
            return UserFunctionVariable(attr.fget).call_function(tx, [self], {})
        if isinstance(attr, classmethod):
            return UserMethodVariable(UserFunctionVariable(attr.__func__), self.class_var)
        if isinstance(attr, functools.cached_property) and attr.attrname == name:
            # computed on first read and kept in the instance dict, as cached_property.__get__
            # does (read through the class, the frame got the descriptor object itself: a
            # silent wrong answer)
            if src is not None:
                g = tx.output.guards
                g.add(f"{g.ref(inspect.getattr_static)}({src.expr()}, {name!r}, None) is {g.ref(attr)}",
                      f"{self.cls.__name__}.{name} unchanged")
            value = UserFunctionVariable(attr.func).call_function(tx, [self], {})
            self.attrs[name] = value
            return value
        if not isinstance(attr, staticmethod) and hasattr(type(attr), "__get__"):
            # another descriptor: its __get__ would see this instance, which reading through the
            # class does not give it
            raise Unsupported(f"descriptor attribute {self.cls.__name__}.{name} ({type(attr).__name__}) "
                              f"of an object made in the frame")
        # a class attribute (constant, staticmethod, ...): read through the class, guarded there
        return self.class_var.var_getattr(tx, name)

    def set_attr(self, name, value, raw=False):
        if getattr(getattr(self.cls, "__dataclass_params__", None), "frozen", False) and not raw:
            raise Unsupported(f"assignment to field {name!r} of frozen dataclass {self.cls.__name__} "
                              "(the program raises)")
        try:
            attr = inspect.getattr_static(self.cls, name)
        except AttributeError:
            attr = None
        if attr is not None and hasattr(type(attr), "__set__"):
            raise Unsupported(f"assignment to descriptor {self.cls.__name__}.{name}")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs):
        call = inspect.getattr_static(self.cls, "__call__", None)
        if isinstance(call, types.FunctionType):
            return UserFunctionVariable(call).call_function(tx, [self] + list(args), kwargs)
        raise Unsupported(f"calling a {self.cls.__name__} object")

    def reconstruct(self, out):
        items = ", ".join(f"{k!r}: {out.materialize(v)}" for k, v in self.attrs.items())
        return f"{out.ref(rebuild_object)}({out.ref(self.cls)}, {{{items}}})"

    def __repr__(self):
        return f"NewObjectVariable({self.cls.__name__})"


def rebuild_object(cls, attrs):
    """An object made inside a compiled frame, rebuilt after the graph ran (its ``__init__``
    already ran symbolically)."""
    obj = object.__new__(cls)
    obj.__dict__.update(attrs)
    return obj


class ObjectSetattrVariable(VariableTracker):
    """``object.__setattr__``: modelled on objects made in the frame (frozen dataclasses set
    their fields with it in ``__init__``)."""

    def call_function(self, tx, args, kwargs):
        if len(args) == 3 and not kwargs and isinstance(args[0], NewObjectVariable) \
                and args[1].is_python_constant() and isinstance(args[1].as_python_constant(), str):
            args[0].attrs[args[1].as_python_constant()] = args[2]
            return ConstantVariable(None)
        raise Unsupported("object.__setattr__ on an object not made in the compiled frame")


class PartialVariable(VariableTracker):
    """``functools.partial(func, *args, **kwargs)``, made in the frame or read from outside
    (then ``func``, ``args`` and ``keywords`` are read through its source): calling it calls
    ``func`` with the stored arguments first, as the C type does."""

    def __init__(self, func, args, kwargs, source=None):
        self.func = func
        self.args = args
        self._kwargs = kwargs
        self._keywords = None     # the DictVariable ``keywords`` gave, once read: the one store
        self.source = source

    @property
    def kwargs(self):
        """The stored keyword arguments: ``p.keywords`` is the partial's own dict, so what the
        frame writes into it is what a later call passes (as in CPython)."""
        return self._keywords.items if self._keywords is not None else self._kwargs

    def python_type(self):
        import functools
        return functools.partial

    def call_function(self, tx, args, kwargs):
        return self.func.call_function(tx, self.args + list(args), {**self.kwargs, **kwargs})

    def var_getattr(self, tx, name):
        from .lists import DictVariable, TupleVariable
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            if self._keywords is None:
                from ..source import AttrSource
                src = AttrSource(self.source, "keywords") if self.source is not None else None
                self._keywords = DictVariable(self._kwargs, source=src)
            return self._keywords
        raise Unsupported(f"partial.{name}")

    def reconstruct(self, out):
        if self.source is not None:
            return self.source.expr()
        import functools
        parts = [out.materialize(self.func)] + [out.materialize(a) for a in self.args] + \
            [f"{k}={out.materialize(v)}" for k, v in self.kwargs.items()]
        return f"{out.ref(functools.partial)}({', '.join(parts)})"

    def __repr__(self):
        return f"PartialVariable({self.func})"


def _sdpa_kernel_block(tx, args, kwargs):
    """``with ember.nn.attention.sdpa_kernel(backends):`` in compiled code: traced as a plain
    block (ember's attention kernel is the same whichever switches are on, and the graph's
    attention nodes do not read them). A choice that leaves ember no kernel cannot be compiled:
    the frame runs eagerly, where the attention call raises PyTorch's "No viable backend"."""
    from ...nn.attention import sdpa_kernel as _sdpa_kernel
    from .ctx import NullContextVariable
    if not all(a.is_python_constant() for a in list(args) + list(kwargs.values())):
        raise Unsupported("sdpa_kernel(...) with backends that are not constants")
    try:
        block = _sdpa_kernel(*[a.as_python_constant() for a in args],
                             **{k: v.as_python_constant() for k, v in kwargs.items()})
    except AssertionError as e:
        err = Unsupported(f"sdpa_kernel(...): {e}")
        err.no_break = True
        raise err
    if not block.allows_ember_kernel():
        err = Unsupported("sdpa_kernel(...) allows no attention kernel ember has (MATH or FLASH_ATTENTION)")
        err.no_break = True
        raise err
    from .builtin import BuiltinVariable
    return NullContextVariable(BuiltinVariable(dict).call_function(tx, [], {}))   # torch's block yields {}
