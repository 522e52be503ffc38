"""``ember.export.unflatten``: an exported program back as a tree of modules (torch's API).

An ExportedProgram is one flat graph; its operator nodes carry ``meta["nn_module_stack"]``,
the chain of module calls that made them (recorded during the capture). ``unflatten`` cuts the
graph along those calls: each call becomes the graph of an ``InterpreterModule`` installed at
the module's fully qualified name, its caller's graph calling it with ``call_module``. So the
result has the original model's submodule hierarchy and state names, and calling it runs
the same operators as the flat program.

* Each call is a *scope*: the nodes it made, nested scopes for the calls inside it. Its
  inputs are the values it reads that are made outside it; its outputs, the values it makes
  that are read outside it.
* Parameters and buffers are read with ``get_attr`` by the scope whose module owns them
  (their name is inside its subtree); a scope reading state from outside its subtree gets it
  as an input from its caller.
* A module called several times gets one module when the calls' graphs are the same;
  a call with a different graph becomes a sibling module ``<name>@<n>`` sharing the state
  (torch's naming).
* Buffer writes (BatchNorm's running statistics in training) happen where the module that
  owns the buffer produced the new value, so calling a submodule alone updates it too.
"""
from __future__ import annotations

import abc
import operator
from typing import Any, Dict, List, Optional

from ..fx.interpreter import Interpreter
from ..nn.modules.module import Module
from .graph_signature import ConstantArgument, InputKind, OutputKind

__all__ = ["unflatten", "UnflattenedModule", "InterpreterModule", "FlatArgsAdapter"]


class FlatArgsAdapter(abc.ABC):
    """Turns the flat inputs of a call whose pytree structure differs from the exported one
    into the flat inputs the program expects (``unflatten(ep, flat_args_adapter=...)``)."""

    @abc.abstractmethod
    def adapt(self, target_spec, input_spec, input_args, metadata=None, obj=None) -> List[Any]:
        """``target_spec``: the exported input spec; ``input_spec``/``input_args``: the call's."""


def _write_back(dst, value):
    """A buffer (or input) write of the program: ``dst`` takes ``value`` (no autograd history:
    eager updates running statistics under no_grad)."""
    from ..autograd.grad_mode import no_grad
    with no_grad():
        dst.copy_(value)


class InterpreterModule(Module):
    """A submodule of an unflattened program: runs its own graph (``.graph``), whose
    ``get_attr``/``call_module`` nodes read its parameters, buffers and child modules."""

    def __init__(self, graph=None):
        super().__init__()
        self.__dict__["graph"] = graph

    def forward(self, *args):
        if self.graph is None:
            raise RuntimeError(f"ember.export.unflatten: {type(self).__name__} was never called in the exported "
                               f"program, so it has no graph to run")
        return Interpreter(self, graph=self.graph).run(*args)

class _FlattenOutputs:
    """Graph helper: the flat tensor leaves of a preserved submodule's structured result."""
    __name__ = "flatten_outputs"

    def __init__(self, signature):
        self.signature = signature

    def __call__(self, result):
        from .graph_signature import TensorArgument
        leaves = self.signature.out_spec.flatten_up_to(result) if not self.signature.out_spec.is_leaf() \
            else [result]
        return tuple(v for v, a in zip(leaves, self.signature.outputs) if isinstance(a, TensorArgument))


class _PreservedModule(InterpreterModule):
    """A submodule exported with ``preserve_module_call_signature``: called with the same
    ``(args, kwargs)`` structure as in the original program, it returns the same result
    structure (its graph takes the flat tensor inputs, returns the flat tensor outputs)."""

    def __init__(self, fqn, signature):
        super().__init__(None)
        self.__dict__["_fqn"] = fqn
        self.__dict__["signature"] = signature

    def forward(self, *args, **kwargs):
        from ..utils._pytree import tree_flatten
        from .graph_signature import TensorArgument
        sig = self.signature
        leaves, spec = tree_flatten(_thaw((args, kwargs)))
        if spec != sig.in_spec:
            raise TypeError(f"ember.export.unflatten: {self._fqn} keeps the call signature it was exported with: "
                            f"expected inputs with tree spec \n{sig.in_spec}\nbut got \n{spec}")
        tensors = []
        for i, (v, a) in enumerate(zip(leaves, sig.inputs)):
            if isinstance(a, TensorArgument):
                tensors.append(v)
            elif not (v is a.value or (type(v) is type(a.value) and v == a.value)):
                raise TypeError(f"ember.export.unflatten: input {i} of {self._fqn} was the constant {a.value!r} "
                                f"when exported (the program is specialised to it), got {v!r}")
        outs = iter(super().forward(*tensors))
        flat = [next(outs) if isinstance(a, TensorArgument) else a.value for a in sig.outputs]
        return sig.out_spec.unflatten(flat)


def _thaw(v):
    """FX hands a call_module node's dict/list arguments over as its immutable subclasses: plain
    ones again, so the call's tree spec is the exported one."""
    from ..fx.immutable_collections import immutable_dict, immutable_list
    if isinstance(v, immutable_dict):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, immutable_list):
        return [_thaw(x) for x in v]
    if type(v) in (tuple, list, dict):
        return type(v)(_thaw(x) for x in v) if not isinstance(v, dict) else {k: _thaw(x) for k, x in v.items()}
    return v


class UnflattenedModule(InterpreterModule):
    """What :func:`unflatten` returns: the root of the rebuilt hierarchy, called like the
    exported module (the original ``(args, kwargs)`` structure, checked as
    ``ExportedProgram.module()`` checks it)."""

    def __init__(self, ep, graph, flat_args_adapter):
        super().__init__(graph)
        self.__dict__["_ep"] = ep
        self.__dict__["flat_args_adapter"] = flat_args_adapter
        sig = ep.module_call_graph[0].signature if ep.module_call_graph else None
        self.__dict__["input_spec"] = ep._in_spec
        self.__dict__["output_spec"] = ep._out_spec
        self.__dict__["forward_arg_names"] = getattr(sig, "forward_arg_names", None)

    @property
    def module_call_graph(self):
        return self._ep.module_call_graph

    def forward(self, *args, **kwargs):
        from ..autograd.grad_mode import no_grad
        from ..tensor import Tensor
        from ..utils._pytree import tree_flatten
        ep = self._ep
        leaves, spec = tree_flatten((args, kwargs))
        if spec != ep._in_spec:
            if self.flat_args_adapter is not None:
                leaves = self.flat_args_adapter.adapt(target_spec=ep._in_spec, input_spec=spec,
                                                      input_args=leaves, metadata=None, obj=self)
                if len(leaves) != ep._in_spec.num_leaves:
                    raise ValueError(f"Flat args adaption failed, number of args mismatch Adatped: "
                                     f"{len(leaves)} \nExported module: {ep._in_spec.num_leaves}")
            else:
                try:
                    leaves = ep._in_spec.flatten_up_to((args, kwargs))
                except ValueError as e:
                    raise TypeError(f"Trying to flatten user inputs with exported input tree spec: \n"
                                    f"{ep._in_spec}\nbut actually got inputs with tree spec of: \n{spec}.\n"
                                    f"({e})") from None
        ep._check_inputs(leaves)
        user = [t for t, c in zip(leaves, ep._const_inputs) if c is None and isinstance(t, Tensor)]
        if ep._prims_only():
            with no_grad():
                outs = Interpreter(self, graph=self.graph).run(*user)
        else:
            outs = Interpreter(self, graph=self.graph).run(*user)
        outs = iter(outs)
        result = []
        for s in ep.graph_signature.output_specs:
            if s.kind != OutputKind.USER_OUTPUT:
                continue
            result.append(s.arg.value if isinstance(s.arg, ConstantArgument) else next(outs))
        return ep._out_spec.unflatten(result)


# ---------------------------------------------------------------------------- scopes
class _Scope:
    """One module call: the nodes it made and the calls inside it, in graph order."""

    def __init__(self, fqn: str, call: int, parent: Optional["_Scope"]):
        self.fqn, self.call, self.parent = fqn, call, parent
        self.items: List[Any] = []        # fx nodes, _Scope children and ("write", value, target) sinks
        self.defined: set = set()
        self.inputs: List[Any] = []
        self.outputs: List[Any] = []

    def owns(self, target: str) -> bool:
        return self.fqn == "" or target.startswith(self.fqn + ".")

    def rel(self, target: str) -> str:
        return target if self.fqn == "" else target[len(self.fqn) + 1:]


def _call_path(node):
    out = []
    for key, (fqn, _cls) in (node.meta.get("nn_module_stack") or {}).items():
        if fqn == "":
            continue
        call = int(key.rsplit("@", 1)[1]) if "@" in key else 0
        out.append((fqn, call))
    return out


def _build_scopes(graph):
    root = _Scope("", 0, None)
    stack = [root]
    scope_of = {}
    for n in graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        path = _call_path(n)
        k = 0
        while k < len(path) and k + 1 < len(stack) and (stack[k + 1].fqn, stack[k + 1].call) == path[k]:
            k += 1
        del stack[k + 1:]
        for fqn, call in path[k:]:
            s = _Scope(fqn, call, stack[-1])
            stack[-1].items.append(s)
            stack.append(s)
        stack[-1].items.append(n)
        scope_of[n] = stack[-1]
    return root, scope_of


def _fill_defined(scope):
    for it in scope.items:
        if isinstance(it, _Scope):
            scope.defined |= _fill_defined(it)
        elif not isinstance(it, tuple):
            scope.defined.add(it)
    return scope.defined


def _uses(scope):
    """(value, user) pairs of everything read inside ``scope``, in order."""
    for it in scope.items:
        if isinstance(it, _Scope):
            yield from _uses(it)
        elif isinstance(it, tuple):
            yield it[1], it
        else:
            for a in it.all_input_nodes:
                yield a, it


# ---------------------------------------------------------------------------- unflatten
def unflatten(module, flat_args_adapter: Optional[FlatArgsAdapter] = None):
    """The :class:`UnflattenedModule` of ExportedProgram ``module`` (``torch.export.unflatten``)."""
    from ..nn.parameter import Parameter
    from .exported_program import ExportedProgram, _get
    ep = module
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"ember.export.unflatten: expected an ExportedProgram, got {type(ep).__name__}")
    if flat_args_adapter is not None and not isinstance(flat_args_adapter, FlatArgsAdapter):
        raise TypeError(f"ember.export.unflatten: flat_args_adapter must be a FlatArgsAdapter, got "
                        f"{type(flat_args_adapter).__name__}")
    dropped = getattr(ep, "_dropped_signatures", None)
    if dropped:
        raise NotImplementedError(f"ember.export.unflatten: the program went through run_decompositions after being "
                                  f"exported with preserve_module_call_signature={tuple(dropped)!r}; keeping those "
                                  f"signatures across a decomposition is not supported -- unflatten the program "
                                  f"before decomposing it")
    graph = ep.graph
    sig = ep.graph_signature
    state_target = {}          # placeholder node -> (kind, target)
    user_phs = []
    phs = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    for s in sig.input_specs:
        node = phs[s.arg.name]
        if s.kind == InputKind.USER_INPUT:
            user_phs.append(node)
        else:
            state_target[node] = (s.kind, s.target)
    root, scope_of = _build_scopes(graph)
    names_of = {}          # signature name -> every name the state has (the signature's first)
    for alias, canon in ep._state_aliases.items():
        names_of.setdefault(canon, [canon]).append(alias)

    def owned_name(scope, target):
        """``target``'s name relative to ``scope``'s module if it is in its subtree (an alias may be)."""
        for name in names_of.get(target, [target]):
            if scope.owns(name):
                return scope.rel(name)
        return None

    # where each write of the program happens: in the scope that made the new value, or the
    # nearest caller owning the buffer
    outs = list(graph.output_node.args[0])
    user_out_nodes = []
    for s, v in zip([s for s in sig.output_specs if not isinstance(s.arg, ConstantArgument)], outs):
        if s.kind == OutputKind.USER_OUTPUT:
            user_out_nodes.append(v)
            continue
        if s.kind == OutputKind.USER_INPUT_MUTATION:
            root.items.append(("write", v, ("input", s.target)))
            continue
        scope = scope_of.get(v, root)
        while owned_name(scope, s.target) is None:
            scope = scope.parent
        scope.items.append(("write", v, ("state", s.target)))
    _fill_defined(root)

    def local_name(scope, a):
        """The name ``scope``'s module reads state placeholder ``a`` by (None: not in its subtree)."""
        kt = state_target.get(a)
        if kt is None:
            return None
        if kt[0] == InputKind.CONSTANT_TENSOR:
            return kt[1] if scope.fqn == "" else None
        return owned_name(scope, kt[1])

    def resolvable(scope, a):
        return local_name(scope, a) is not None

    preserved = {e.fqn: e.signature for e in ep.module_call_graph if e.fqn and e.signature is not None}
    by_name = {n.name: n for n in graph.nodes}

    def signature_nodes(scope, args):
        from .graph_signature import TensorArgument
        out = []
        for a in args:
            if isinstance(a, TensorArgument):
                if a.name not in by_name:
                    raise NotImplementedError(f"ember.export.unflatten: the kept call signature of {scope.fqn!r} names "
                                              f"{a.name!r}, which is not in the graph (renamed by a graph pass such as "
                                              f"run_decompositions); unflatten the program before the pass")
                out.append(by_name[a.name])
        return out

    def plan(scope):
        seen = set()
        for a, _ in _uses(scope):
            if a not in scope.defined and a not in seen and not resolvable(scope, a):
                seen.add(a)
                scope.inputs.append(a)
        if scope.fqn in preserved:
            wanted = signature_nodes(scope, preserved[scope.fqn].inputs)
            extra = [a.name for a in scope.inputs if a not in wanted]
            if extra:
                raise NotImplementedError(f"ember.export.unflatten: {scope.fqn!r} (preserve_module_call_signature) "
                                          f"reads {', '.join(extra)} from its caller besides its arguments; keeping "
                                          f"its call signature then is not supported")
            scope.inputs = wanted
        for it in scope.items:
            if isinstance(it, _Scope):
                plan(it)
    plan(root)

    readers = {}         # value -> the (innermost) scopes reading it; the graph output reads at the root
    for a, user in _uses(root):
        where = scope_of.get(user, None) if not isinstance(user, tuple) else _sink_scope(root, user)
        readers.setdefault(a, set()).add(where)
    for v in user_out_nodes:
        readers.setdefault(v, set()).add(root)

    def compute_outputs(scope):
        for it in scope.items:
            if isinstance(it, _Scope):
                compute_outputs(it)
        if scope.parent is None:
            return
        for n in _ordered_defined(scope):
            if any(not _inside(r, scope) for r in readers.get(n, ())):
                scope.outputs.append(n)
        if scope.fqn in preserved:
            wanted = signature_nodes(scope, preserved[scope.fqn].outputs)
            extra = [n.name for n in scope.outputs if n not in wanted]
            if extra:
                raise NotImplementedError(f"ember.export.unflatten: values {', '.join(extra)} made inside "
                                          f"{scope.fqn!r} (preserve_module_call_signature) are read outside it "
                                          f"without being among its outputs; not supported")
            scope.outputs = wanted
    compute_outputs(root)

    # ---- the module tree: InterpreterModule at each called module, plain Module elsewhere
    called = set()

    def collect(scope):
        for it in scope.items:
            if isinstance(it, _Scope):
                called.add(it.fqn)
                collect(it)
    collect(root)
    top = UnflattenedModule(ep, None, flat_args_adapter)
    fqns = [e.fqn for e in ep.module_call_graph if e.fqn]
    # a module registered under two names is listed once by named_modules(); called through
    # the other name, it gets a module there too
    for f in sorted(called - set(fqns), key=lambda f: (f.count("."), f)):
        fqns.append(f)
    for fqn in fqns:
        parent = top
        *path, leaf = fqn.split(".")
        for p in path:
            if p not in parent._modules:
                parent.add_module(p, Module())
            parent = parent._modules[p]
        if leaf not in parent._modules:
            parent.add_module(leaf, _PreservedModule(fqn, preserved[fqn]) if fqn in preserved
                              else InterpreterModule() if fqn in called else Module())
    # the unflattened module owns copies of the state (torch deep-copies it): training it or
    # running its BatchNorms leaves the exported model, the program and ep.module() untouched
    for s in sig.input_specs:
        if s.kind == InputKind.PARAMETER:
            t = ep.state_dict[s.target]
            _install(top, s.target, Parameter(t.detach().clone(), requires_grad=t.requires_grad), "param")
        elif s.kind == InputKind.BUFFER:
            _install(top, s.target, _copy(ep._state_tensor(s)), "buffer", s.persistent)
        elif s.kind == InputKind.CONSTANT_TENSOR:
            top.__dict__[s.target] = _copy(ep.constants[s.target])
    for alias, canon in ep._state_aliases.items():
        t = _get(top, canon)
        _install(top, alias, t, "param" if isinstance(t, Parameter) else "buffer",
                 canon not in sig.non_persistent_buffers)

    # ---- graphs, bottom-up; calls with the same graph share a module
    variants: Dict[str, List[Any]] = {}          # fqn -> [(structure, module)]

    def build(scope):
        from ..fx.graph import Graph
        from ._trace import _placeholder
        g = Graph()
        env: Dict[Any, Any] = {}
        attrs: Dict[Any, Any] = {}
        if scope.parent is None:
            for n in user_phs:
                p = _placeholder(g, n.name)
                p.meta = dict(n.meta)
                env[n] = p
        else:
            for a in scope.inputs:
                p = _placeholder(g, a.name)
                p.meta = {k: v for k, v in a.meta.items() if k == "val"}
                env[a] = p

        def value(a):
            if a in env:
                return env[a]
            if resolvable(scope, a):
                if a not in attrs:
                    attrs[a] = g.get_attr(local_name(scope, a))
                    attrs[a].meta = {k: v for k, v in a.meta.items() if k == "val"}
                return attrs[a]
            raise AssertionError(f"ember.export.unflatten: value {a.name} is read in the call of "
                                 f"{scope.fqn or 'the root'} but neither made nor passed there")

        for it in scope.items:
            if isinstance(it, _Scope):
                target = build(it)
                rel = target if scope.fqn == "" else target[len(scope.fqn) + 1:]
                sig = preserved.get(it.fqn)
                if sig is not None:
                    # called as the original program called it: structured (args, kwargs) in, the
                    # structured result out (flattened back to its tensors for the nodes after)
                    from .graph_signature import TensorArgument
                    vals = iter(value(a) for a in it.inputs)
                    leaves = [next(vals) if isinstance(a, TensorArgument) else a.value for a in sig.inputs]
                    cargs, ckwargs = sig.in_spec.unflatten(leaves)
                    call = g.create_node("call_module", rel, tuple(cargs), dict(ckwargs),
                                         rel.replace(".", "_").replace("@", "_"))
                    flat = g.call_function(_FlattenOutputs(sig), (call,))
                    for i, o in enumerate(it.outputs):
                        item = g.call_function(operator.getitem, (flat, i))
                        item.meta = {k: v for k, v in o.meta.items() if k == "val"}
                        env[o] = item
                    continue
                call = g.create_node("call_module", rel, tuple(value(a) for a in it.inputs), {},
                                     rel.replace(".", "_").replace("@", "_"))
                if len(it.outputs) == 1:
                    env[it.outputs[0]] = call
                else:
                    for i, o in enumerate(it.outputs):
                        item = g.call_function(operator.getitem, (call, i))
                        item.meta = {k: v for k, v in o.meta.items() if k == "val"}
                        env[o] = item
            elif isinstance(it, tuple):
                _, v, (kind, target) = it
                if kind == "input":
                    dst = env[next(n for n in user_phs if n.name == target)]
                else:
                    dst = g.get_attr(owned_name(scope, target))
                g.call_function(_write_back, (dst, value(v)))
            else:
                env[it] = g.node_copy(it, value)
        if scope.parent is None:
            g.output(tuple(value(v) for v in user_out_nodes))
            return g
        res = [value(o) for o in scope.outputs]
        if scope.fqn in preserved:
            g.output(tuple(res))        # _PreservedModule rebuilds the result structure
        else:
            g.output(res[0] if len(res) == 1 else tuple(res) if res else None)
        return _place(scope, g)

    def _place(scope, g):
        """The module running call ``scope`` with graph ``g``: the first call's, another call's
        with the same graph, or a new ``<name>@<call>`` sibling."""
        key = _structure(g)
        mods = variants.setdefault(scope.fqn, [])
        for k, path in mods:
            if k == key:
                return path
        canon = _get_module(top, scope.fqn)
        if not mods:
            canon.__dict__["graph"] = g
            mods.append((key, scope.fqn))
            return scope.fqn
        *path, leaf = scope.fqn.split(".")
        name = f"{leaf}@{scope.call}"
        twin = InterpreterModule(g)
        for k, sub in canon._modules.items():
            twin._modules[k] = sub
        for k, p in canon._parameters.items():
            twin._parameters[k] = p
        for k, b in canon._buffers.items():
            twin._buffers[k] = b
        twin._non_persistent_buffers_set = set(getattr(canon, "_non_persistent_buffers_set", ()))
        parent = _get_module(top, ".".join(path))
        parent._modules[name] = twin
        full = ".".join(path + [name])
        mods.append((key, full))
        return full

    top.__dict__["graph"] = build(root)
    _install_cond_branches(top, ep.graph_module)
    return top


def _install_cond_branches(top, gm):
    """A cond node's branch graphs (``true_graph_0``: get_attr nodes copied into the modules'
    graphs) installed on each module whose graph reads them."""
    from ..fx.graph_module import GraphModule
    for _, mod in top.named_modules():
        g = mod.__dict__.get("graph")
        if g is None:
            continue
        for n in g.nodes:
            if n.op == "get_attr" and n.target not in mod._modules:
                sub = getattr(gm, n.target, None)
                if isinstance(sub, GraphModule):
                    mod._modules[n.target] = sub


def _copy(t):
    """A detached copy of a buffer or constant tensor, keeping ``requires_grad``."""
    c = t.detach().clone()
    return c.requires_grad_(True) if t.requires_grad else c


def _sink_scope(root, sink):
    def find(scope):
        for it in scope.items:
            if it is sink:
                return scope
            if isinstance(it, _Scope):
                hit = find(it)
                if hit is not None:
                    return hit
        return None
    return find(root)


def _inside(reader, scope) -> bool:
    while reader is not None:
        if reader is scope:
            return True
        reader = reader.parent
    return False


def _ordered_defined(scope):
    out = []

    def walk(s):
        for it in s.items:
            if isinstance(it, _Scope):
                walk(it)
            elif not isinstance(it, tuple):
                out.append(it)
    walk(scope)
    return out


def _structure(graph):
    """A comparable form of ``graph``: per node its kind, target and arguments (nodes by
    position), so two calls whose graphs do the same thing compare equal whatever their names."""
    from ..fx.node import map_arg
    pos = {}
    out = []
    for i, n in enumerate(graph.nodes):
        pos[n] = i
        args = map_arg((n.args, n.kwargs), lambda a: ("node", pos[a]))
        target = None if n.op == "placeholder" else n.target if isinstance(n.target, str) else id(n.target)
        out.append((n.op, target, repr(args)))
    return out


def _get_module(root, fqn):
    mod = root
    for p in fqn.split(".") if fqn else ():
        mod = mod._modules[p]
    return mod


def _install(root, fqn, t, kind, persistent=True):
    from ..nn.modules.module import Module
    *path, leaf = fqn.split(".")
    mod = root
    for p in path:
        if p not in mod._modules:
            mod.add_module(p, Module())
        mod = mod._modules[p]
    if kind == "param":
        mod.register_parameter(leaf, t)
    else:
        mod.register_buffer(leaf, t, persistent=persistent)
