"""``ember.export.export``: one functional graph of a module call, its state lifted to inputs.

The pipeline reuses the compiler's two front ends:

1. **dynamo, full-graph**: ``_export_root(mod, args, kwargs)`` is captured with a backend that
   only records the FX graph and its example inputs (and returns sentinel outputs, so the
   call runs nothing and mutates no buffer). A graph break is an error naming the user's
   line and the reason. The returned value (rebuilt by dynamo's generated code) tells the
   output structure: each leaf is a sentinel (a graph output), an input, or a constant.
2. **aot, inference**: ``trace_joint(..., inference=True)`` re-traces the dynamo graph on fake
   tensors into ember's functional op-level graph (in-place ops functionalized; the new values
   of mutated inputs come back as extra outputs), in dynamo's ShapeEnv when sizes are symbolic.

Then the graph is rebuilt with torch's placeholder order and names (parameters ``p_*``,
buffers ``b_*``, constants ``c_*``, user inputs by argument name) and outputs (mutations first).
Dynamic dimensions (``dynamic_shapes``) become ShapeEnv symbols during capture; the guards the
trace records are checked against the declared ``Dim`` ranges ("Constraints violated").
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List

from ..dynamo.exc import FullGraphError, Unsupported
from .dynamic_shapes import Dim, DimRequest, ValueRange, _DerivedDim, _DimHint, _readable, dims_per_tensor, int_oo
from .errors import ConstraintViolationError, UserError
from .graph_signature import (ConstantArgument, ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                              TensorArgument)


def _export_root(mod, args, kwargs):
    return mod(*args, **kwargs)


def _bind(mod, args, kwargs) -> Dict[str, Any]:
    """argument name -> value, as ``mod.forward`` binds them (names for placeholders and specs)."""
    try:
        sig = inspect.signature(mod.forward)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise UserError(f"ember.export: the example inputs do not match {type(mod).__name__}.forward's "
                        f"signature: {e}") from None
    out = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind == inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


def _leaf_names(bound: Dict[str, Any]) -> Dict[int, str]:
    """id(tensor) -> placeholder name (``x``, ``xs_0``, ``d_a``), like torch's."""
    from ..tensor import Tensor
    from ..utils._pytree import SUPPORTED_NODES
    names: Dict[int, str] = {}

    def walk(v, name):
        if isinstance(v, Tensor):
            names.setdefault(id(v), name)
        elif isinstance(v, (tuple, list)):
            for i, x in enumerate(v):
                walk(x, f"{name}_{i}")
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{name}_{k}")
        else:
            node = SUPPORTED_NODES.get(type(v))
            if node is not None and node.flatten_with_keys_fn is not None:
                # a registered dataclass: ``inp_a`` for field ``a`` of argument ``inp`` (torch's names)
                for key, x in node.flatten_with_keys_fn(v)[0]:
                    walk(x, f"{name}_{getattr(key, 'name', getattr(key, 'key', getattr(key, 'idx', '')))}")
    for k, v in bound.items():
        walk(v, k)
    return names


def _dedupe_leaves(args, kwargs):
    """The same tensor object passed twice becomes two inputs of the program (as in torch): the
    repeated occurrences are traced through a copy, so the graph does not assume they alias."""
    from ..tensor import Tensor
    from ..utils._pytree import tree_flatten, tree_unflatten
    leaves, spec = tree_flatten((args, kwargs))
    seen, changed = set(), False
    for i, v in enumerate(leaves):
        if isinstance(v, Tensor):
            if id(v) in seen:
                c = v.detach().clone()
                if v.requires_grad:
                    c.requires_grad_(True)
                leaves[i], changed = c, True
            seen.add(id(v))
    return tree_unflatten(leaves, spec) if changed else (args, kwargs)


def _make_compiler(backend, requests, sources):
    """``requests``: id(tensor) -> {dim: DimRequest}; ``sources`` is filled with the guard
    expression of each requested input -> its requests (for the symbol naming below)."""
    from ..dynamo.convert_frame import Compiler

    class _ExportCompiler(Compiler):
        """Full-graph capture whose symbolic dims are exactly those ``dynamic_shapes`` asks for."""

        def _dynamic_dims_fn(self, cache):
            def dims(source, t):
                req = requests.get(id(t))
                if not req:
                    return set()
                sources[source.expr()] = req
                return set(req)
            return dims
    return _ExportCompiler(backend, fullgraph=True, dynamic=False, name="export")


class _export_symbols:
    """How the export's capture names sizes: one symbol per ``Dim`` (the same ``Dim`` on several
    dims is one symbol, as in torch), and otherwise one per dimension -- no duck sizing: two
    ``Dim``s whose examples happen to be equal must not silently become one symbol; the
    program's own decisions (``x + y``) record ``Eq(s0, s1)`` guards instead, which the
    constraint check then sees."""

    def __init__(self, sources):
        self.sources = sources

    def __enter__(self):
        import re
        from ..dynamo.example_value import SHAPE_ENV_SETUP
        from ..fx.experimental.symbolic_shapes import SymInt
        sources = self.sources
        pattern = re.compile(r"^(.*)\.size\(\)\[(\d+)\]$")

        def setup(env):
            env.duck_shape = False
            create = env.create_symbol
            by_dim = {}

            def create_symbol(value, source=None):
                m = pattern.match(source or "")
                req = sources.get(m.group(1), {}).get(int(m.group(2))) if m else None
                spec = getattr(req, "spec", None)
                if isinstance(spec, _DerivedDim):
                    return derived_symbol(spec, int(value), source)
                name = getattr(req, "name", None)
                hit = by_dim.get(name) if name is not None else None
                if hit is not None and env.var_to_val.get(hit.expr) == int(value):
                    env.var_to_sources[hit.expr].append(source)
                    return SymInt(hit.expr, env)
                out = create(value, source)
                if name is not None and isinstance(out, SymInt):
                    by_dim[name] = out
                return out
            def derived_symbol(spec, value, source):
                """``A * root + B`` of the root Dim's symbol (made here, if the root is not met
                first, with a source that computes it from this dim: dynamo's guards need one)."""
                root = spec.root.__name__
                rv = spec.root_value(value)
                hit = by_dim.get(root)
                if hit is None:
                    hit = create(rv, f"(({source}) - {spec.b}) // {spec.a}" if source else None)
                    if not isinstance(hit, SymInt):
                        return value          # a 0/1 root is specialised like any size
                    by_dim[root] = hit
                return SymInt(spec.a * hit.expr + spec.b, env)
            env.create_symbol = create_symbol
        self.token = SHAPE_ENV_SETUP.set(setup)
        return self

    def __exit__(self, *exc):
        from ..dynamo.example_value import SHAPE_ENV_SETUP
        SHAPE_ENV_SETUP.reset(self.token)
        return False


def _capture(mod, args, kwargs, requests):
    """(dynamo GraphModule or None, its example inputs, sentinel outputs, the call's result)."""
    from ..dynamo import convert_frame
    from ..dynamo.eval_frame import OptimizeContext
    from ..dynamo.example_value import preserve_rng
    from ..ops import api as _api
    cap: Dict[str, Any] = {}

    def backend(gm, example_inputs):
        cap["gm"], cap["inputs"] = gm, list(example_inputs)
        outs = gm.graph.output_node.args[0]
        n = len(outs) if isinstance(outs, (tuple, list)) else 1
        sentinels = tuple(_api.empty(0) for _ in range(n))
        cap["sentinels"] = sentinels
        return lambda *a: sentinels

    sources: Dict[str, Any] = {}
    compiler = _make_compiler(backend, requests, sources)
    code = _export_root.__code__
    n_reasons = len(convert_frame.fallback_reasons)
    n_skipped = convert_frame.counters["skipped"]
    try:
        with preserve_rng(), _export_symbols(sources):
            result = OptimizeContext(compiler)(_export_root)(mod, args, kwargs)
    except FullGraphError as e:
        reason = str(e).split(" as one graph: ", 1)[-1]
        raise Unsupported(f"ember.export: {type(mod).__name__}.forward cannot be captured as one graph, which "
                          f"export needs: {reason}") from None
    finally:
        cache = convert_frame._caches.get(code)
        if cache is not None:
            cache.entries = [e for e in cache.entries if e.owner is not compiler]
            cache.hot = None
    if "gm" not in cap:
        new = convert_frame.fallback_reasons[n_reasons:]
        if new:
            raise Unsupported(f"ember.export: {type(mod).__name__}.forward could not be captured: {new[-1][1]}")
        if convert_frame.counters["skipped"] == n_skipped:
            # the hook did not capture the frame at all (an ember.autocast region, a compiler stance
            # forcing eager): its outputs were computed eagerly and must not become constants
            raise RuntimeError(f"ember.export: {type(mod).__name__}.forward ran without being captured (inside "
                               f"an ember.autocast region or under ember.compiler.set_stance('force_eager')?); "
                               f"export outside of them")
    return cap.get("gm"), cap.get("inputs", []), cap.get("sentinels", ()), result


def _fake_like(t):
    from .._fake import FakeArray
    from ..fx.fake_tensor import make_fake
    return make_fake(FakeArray(tuple(t.shape), t.dtype, tuple(t._data.estrides) if hasattr(t._data, "estrides")
                               else None), t.device)


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False, preserve_module_call_signature=()):
    """Export ``mod(*args, **kwargs)`` as an :class:`ExportedProgram` (``torch.export.export``).

    ``strict`` is accepted for torch compatibility; ember always captures with dynamo (its
    "strict" mode), so both values trace the same way."""
    from .. import compiler
    compiler._EXPORT_DEPTH += 1
    try:
        return _export(mod, args, kwargs, dynamic_shapes, preserve_module_call_signature)
    finally:
        compiler._EXPORT_DEPTH -= 1


def _export(mod, args, kwargs, dynamic_shapes, preserve_module_call_signature, capture=None):
    from ..nn.modules.module import Module
    from ..tensor import Tensor
    from ..utils._pytree import tree_flatten
    from .exported_program import ExportedProgram
    if not isinstance(mod, Module):
        raise ValueError(f"Expected `mod` to be an instance of `ember.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise UserError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise UserError(f"Expecting `kwargs` to be a dict of example keyword inputs, got {type(kwargs)}")
    from ._call_signature import preserve_calls
    preserved = preserve_calls(mod, preserve_module_call_signature) if preserve_module_call_signature else None
    from .shapes_collection import AdditionalInputs, ShapesCollection
    if isinstance(dynamic_shapes, (AdditionalInputs, ShapesCollection)):
        try:
            dynamic_shapes = dynamic_shapes.dynamic_shapes(mod, args, kwargs)
        except TypeError as e:
            raise UserError(f"ember.export: the example inputs do not match {type(mod).__name__}.forward's "
                            f"signature: {e}") from None
    args, kwargs = _dedupe_leaves(args, kwargs)
    bound = _bind(mod, args, kwargs)
    requests = dims_per_tensor(bound, dynamic_shapes)
    names = _leaf_names(bound)
    in_leaves, in_spec = tree_flatten((args, kwargs))

    # example sizes outside a Dim's range are an error before anything is traced
    by_id = {id(v): v for v in in_leaves if isinstance(v, Tensor)}
    seen_dims: Dict[str, Any] = {}
    for tid, per_dim in requests.items():
        for d, req in per_dim.items():
            n = by_id[tid].shape[d]
            if isinstance(req.spec, _DimHint):
                continue
            if isinstance(req.spec, _DerivedDim):
                root_n = req.spec.root_value(n)
                if root_n is None:
                    raise UserError(f"Expected input at {req.where()} to be {req.name} for an integer "
                                    f"{req.spec.root.__name__} >= 0, but got {n}")
                first = seen_dims.setdefault(req.spec.root.__name__, (root_n, f"{req.where()} (as {req.name})"))
                if first[0] != root_n:
                    raise UserError(f"Dim {req.spec.root.__name__!r} is {first[0]} for {first[1]} but {root_n} for "
                                    f"{req.where()} = {req.name} (size {n}) in the example inputs")
                if not req.spec.min <= n <= req.spec.max:
                    raise UserError(f"Expected input at {req.where()} to be within the range [{req.spec.min}, "
                                    f"{req.spec.max}] of {req.name}, but got {n}")
                continue
            first = seen_dims.setdefault(req.name, (n, req.where()))
            if first[0] != n:
                raise UserError(f"Dim {req.name!r} is used for {first[1]} (size {first[0]}) and {req.where()} "
                                f"(size {n}) in the example inputs: the same Dim declares equal sizes; use "
                                f"different Dims")
            if not req.spec.min <= n <= req.spec.max:
                raise UserError(f"Expected input at {req.where()} to be within the range [{req.spec.min}, "
                                f"{req.spec.max}] of Dim {req.name!r}, but got {n}")

    direct = {req.name for per_dim in requests.values() for req in per_dim.values()
              if isinstance(req.spec, Dim) and not isinstance(req.spec, _DerivedDim)}
    for per_dim in requests.values():
        for req in per_dim.values():
            if isinstance(req.spec, _DerivedDim) and req.spec.root.__name__ not in direct:
                raise NotImplementedError(
                    f"ember.export: derived Dim {req.name} ({req.where()}) whose root Dim "
                    f"{req.spec.root.__name__!r} is not itself the size of any input dimension is not supported; "
                    f"declare a plain Dim for {req.where()} (or use {req.spec.root.__name__!r} on another input)")

    params = dict(mod.named_parameters())
    buffers = dict(mod.named_buffers())
    persistent = set(mod.state_dict().keys())
    param_of = {id(t): k for k, t in params.items()}
    buffer_of = {id(t): k for k, t in buffers.items()}

    import contextlib
    with preserved if preserved is not None else contextlib.nullcontext():
        if capture is None:
            gm, ex_inputs, sentinels, result = _capture(mod, args, kwargs, requests)
            # ---- aot: the functional inference graph
            joint = _trace_functional(gm, ex_inputs) if gm is not None else None
        else:
            # another front end (draft_export's real-value trace) made the functional graph itself
            gm, ex_inputs, sentinels, result, joint = capture(mod, args, kwargs)
    out_leaves, out_spec = tree_flatten(result)

    # ---- classify the dynamo inputs
    user_ids = {id(v): i for i, v in enumerate(in_leaves) if isinstance(v, Tensor)}
    constants: Dict[str, Any] = {}
    const_of: Dict[int, str] = {}

    def const_target(t):
        if id(t) not in const_of:
            const_of[id(t)] = f"lifted_tensor_{len(constants)}"
            constants[const_of[id(t)]] = t
        return const_of[id(t)]
    kinds = []     # per dynamo input: (kind, key)
    for t in ex_inputs:
        if id(t) in param_of:
            kinds.append(("p", param_of[id(t)]))
        elif id(t) in buffer_of:
            kinds.append(("b", buffer_of[id(t)]))
        elif id(t) in user_ids:
            kinds.append(("u", user_ids[id(t)]))
        else:
            kinds.append(("c", const_target(t)))
    # tensors returned without passing through the graph and not inputs: constants too
    for v in out_leaves:
        if isinstance(v, Tensor) and not any(v is s for s in sentinels) and id(v) not in param_of and \
                id(v) not in buffer_of and id(v) not in user_ids:
            const_target(v)

    from ..fx.graph import Graph
    from ..fx.graph_module import GraphModule
    g = Graph()
    ph: Dict[Any, Any] = {}       # ("p", fqn) | ("b", fqn) | ("c", target) | ("u", leaf index) -> node
    input_specs: List[InputSpec] = []
    old_phs = [n for n in joint.gm.graph.nodes if n.op == "placeholder"] if joint is not None else []
    val_of = {}
    for (kind, key), n in zip(kinds, old_phs):
        val_of[(kind, key)] = n.meta.get("val")

    def add_ph(kind, key, name, t):
        node = _placeholder(g, name)
        v = val_of.get((kind, key))
        node.meta["val"] = v if v is not None else _fake_like(t)
        ph[(kind, key)] = node
        return node

    for fqn, t in params.items():
        n = add_ph("p", fqn, "p_" + fqn.replace(".", "_"), t)
        input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(n.name), fqn))
    for fqn, t in buffers.items():
        n = add_ph("b", fqn, "b_" + fqn.replace(".", "_"), t)
        input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(n.name), fqn, fqn in persistent))
    for target, t in constants.items():
        n = add_ph("c", target, "c_" + target, t)
        input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(n.name), target))
    user_phs = []
    for i, v in enumerate(in_leaves):
        if isinstance(v, Tensor):
            n = add_ph("u", i, names.get(id(v), f"arg{i}"), v)
            input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(n.name), None))
            user_phs.append((i, n))

    env = {}
    for (kind, key), n in zip(kinds, old_phs):
        env[n] = ph[(kind, key)]
    fwd_outs, muts = (), ()
    consts_root = {}
    if joint is not None:
        for n in joint.gm.graph.nodes:
            if n.op in ("placeholder", "output"):
                continue
            if n.op == "get_attr":
                v = joint.gm
                for part in n.target.split("."):
                    v = getattr(v, part)
                consts_root[n.target] = v
            env[n] = g.node_copy(n, lambda a: env[a])
        out_args = joint.gm.graph.output_node.args[0]
        fwd_outs, muts = out_args[0], out_args[1]

    output_specs: List[OutputSpec] = []
    outputs = []
    for pos, new in zip(joint.mutated_inputs if joint is not None else (), muts):
        kind, key = kinds[pos]
        node = env[new] if hasattr(new, "op") else new
        if kind == "b":
            output_specs.append(OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(node.name), key))
        elif kind == "p":
            output_specs.append(OutputSpec(OutputKind.PARAMETER_MUTATION, TensorArgument(node.name), key))
        elif kind == "u":
            output_specs.append(OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument(node.name),
                                           ph[("u", key)].name))
        else:
            raise UserError(f"ember.export: the program writes in place into a constant tensor "
                            f"({key}) that is neither a parameter, a buffer nor an input; register it as a buffer")
        outputs.append(node)
    for v in out_leaves:
        node = None
        if isinstance(v, Tensor):
            for i, s in enumerate(sentinels):
                if v is s:
                    o = fwd_outs[i]
                    node = env[o] if hasattr(o, "op") else o
                    break
            else:
                key = ("p", param_of[id(v)]) if id(v) in param_of else ("b", buffer_of[id(v)]) \
                    if id(v) in buffer_of else ("u", user_ids[id(v)]) if id(v) in user_ids else ("c", const_of[id(v)])
                node = ph[key]
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None))
            outputs.append(node)
        else:
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", v), None))
    g.output(tuple(outputs))
    kept_signatures = preserved.signatures(g) if preserved is not None else {}
    # the program's nodes call torch's aten overloads (``aten.linear.default``,
    # ``aten.sum.dim_IntList``), as torch.export's graphs do
    from ..ops._aten_convert import convert_graph, rename_like_torch
    convert_graph(g)
    # and their names: op calls after the overload packet (``max_1`` for ``aten.max.dim``)
    renamed = rename_like_torch(g)
    if renamed:
        output_specs = [_renamed_spec(s, renamed) for s in output_specs]
        kept_signatures = {fqn: _renamed_call_signature(s, renamed) for fqn, s in kept_signatures.items()}
    new_gm = GraphModule(consts_root, g)
    from .._higher_order_ops.cond_op import export_branches
    export_branches(new_gm)        # a cond's branch subgraphs: aten targets, the operands' names
    shape_env = gm.meta.get("shape_env") if gm is not None and gm.meta.get("dynamic") else None
    new_gm.meta["shape_env"] = shape_env
    sig = ExportGraphSignature(input_specs, output_specs)

    range_constraints, equal_groups = {}, []
    if requests:
        range_constraints, equal_groups = _check_constraints(requests, user_phs, in_leaves, shape_env)
    state_dict = {**{k: t for k, t in params.items()}, **{k: t for k, t in buffers.items() if k in persistent}}
    np_buffers = {k: t for k, t in buffers.items() if k not in persistent}
    constants_all = dict(constants)
    constants_all.update(np_buffers)
    consts_in = [v if not isinstance(v, Tensor) else None for v in in_leaves]
    from ..utils._pytree import keystr, tree_flatten_with_path
    paths = [("args" if kp[0].idx == 0 else "kwargs") + keystr(kp[1:])
             for kp, _ in tree_flatten_with_path((args, kwargs))[0]]
    _set_module_stacks(g, mod)
    from .exported_program import ModuleCallEntry, ModuleCallSignature
    call_graph = [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec, list(bound)))]
    call_graph += [ModuleCallEntry(fqn, kept_signatures.get(fqn))
                   for fqn, _ in mod.named_modules(remove_duplicate=False) if fqn]
    return ExportedProgram(new_gm, sig, state_dict, constants_all, range_constraints, in_spec, out_spec,
                           consts_in, shape_env, equal_groups, example_inputs=(args, kwargs),
                           module_class=type(mod).__name__, input_paths=paths, module_call_graph=call_graph,
                           state_aliases=_state_aliases(mod, param_of, buffer_of))


def _renamed_arg(a, renamed):
    import dataclasses
    name = getattr(a, "name", None)
    if isinstance(name, str) and name in renamed and dataclasses.is_dataclass(a):
        return dataclasses.replace(a, name=renamed[name])
    return a


def _renamed_spec(spec, renamed):
    import dataclasses
    return dataclasses.replace(spec, arg=_renamed_arg(spec.arg, renamed))


def _renamed_call_signature(sig, renamed):
    import dataclasses
    if sig is None:
        return sig
    return dataclasses.replace(sig, inputs=[_renamed_arg(a, renamed) for a in sig.inputs],
                               outputs=[_renamed_arg(a, renamed) for a in sig.outputs])


def _placeholder(g, name):
    """A placeholder called exactly ``name`` when that is only a builtin's name (``input``: torch
    names it so, and ONNX export takes its input names from here); FX's namespace would make it
    ``input_1``. A parameter of the generated ``forward`` may shadow a builtin: its code never
    calls one by that name."""
    node = g.placeholder(name)
    if node.name != name:
        _rename_placeholder(g, node, name)
    return node


def _rename_placeholder(g, node, name):
    """Give ``node`` the builtin's name ``name`` if it is free (see ``_placeholder``)."""
    import builtins
    import keyword
    if name.isidentifier() and not keyword.iskeyword(name) and name in builtins.__dict__ \
            and not g._namespace.is_used(name):
        g._namespace.release(node.name)
        g._namespace.mark_used(name)
        node.name = node.target = name


def _state_aliases(mod, param_of, buffer_of):
    """Other names of parameters/buffers registered more than once -> their signature name."""
    out = {}
    for named, of in ((mod.named_parameters, param_of), (mod.named_buffers, buffer_of)):
        for name, t in named(remove_duplicate=False):
            canon = of.get(id(t))
            if canon is not None and canon != name:
                out[name] = canon
    return out


def _set_module_stacks(graph, root):
    """Rewrite the capture's ``nn_module_stack`` (``{"<source expr>@<call>": (expr, class)}``,
    outermost first, the root module first) in torch's form: ``{"L__self__<fqn>[@<call>]":
    (fqn, "<module>.<qualname>")}``. The fully qualified name comes from the source expression
    (``<root>._modules['seq']._modules['0']`` -> ``seq.0``); a module reached another way
    (not through registered submodules) is left out of the stack, so its nodes count as its
    caller's."""
    import re
    seg = re.compile(r"\._modules\['([^']*)'\]")
    for n in graph.nodes:
        stack = n.meta.get("nn_module_stack")
        if not stack:
            continue
        items = list(stack.items())
        root_expr = items[0][1][0]
        out = {}
        for key, (expr, cls) in items:
            call = int(key.rsplit("@", 1)[1])
            rest = expr[len(root_expr):] if expr.startswith(root_expr) else None
            if rest is None or seg.sub("", rest):
                continue
            fqn = ".".join(seg.findall(rest))
            try:
                if type(root.get_submodule(fqn)) is not cls:
                    continue
            except AttributeError:
                continue
            out["L__self__" + fqn + (f"@{call}" if call else "")] = (fqn, f"{cls.__module__}.{cls.__qualname__}")
        n.meta["nn_module_stack"] = out


class _carry_module_stack:
    """While inside, aot hands dynamo's ``nn_module_stack`` node meta on to the functional graph's
    nodes, the way it carries checkpoint region tags (``aot.joint.REGION_TAGS``: each dynamo node
    runs on its own and the nodes its run records inherit the keys). Export only: compiled graphs
    keep running whole."""

    def __enter__(self):
        from ..aot import joint
        self.saved = joint.REGION_TAGS
        joint.REGION_TAGS = tuple(self.saved) + ("nn_module_stack", "source_fn_stack", "stack_trace")
        return self

    def __exit__(self, *exc):
        from ..aot import joint
        joint.REGION_TAGS = self.saved
        return False


def _trace_functional(gm, ex_inputs, decompositions=None):
    if not decompositions:
        # torch's export (training IR) keeps composite ops whole (``aten.linear.default``,
        # ``aten.softmax.int``); ``run_decompositions()`` lowers them
        decompositions = _preserved_composites()
    with _carry_module_stack():
        return _trace_functional_inner(gm, ex_inputs, decompositions)


def _keep_whole(*args, **kwargs):
    return NotImplemented


# composite ops the program keeps whole, as torch's training IR does (``aten.softmax.int``,
# ``aten.linear.default``; the pt2e quantizer reads a kept linear as ``F.linear``, its observers
# named after it as torch's). torch keeps every CompositeImplicitAutograd op (``flatten``,
# ``reshape`` too); ember records those as the views they decompose to, for now
_PRESERVED = ("softmax", "log_softmax", "linear")


class lowering_linear:
    """Within: the program records ``linear`` as what it decomposes to (``t`` + ``addmm``), as
    before torch's export kept it (the ONNX exporter's translation wants ``addmm``: Gemm)."""

    def __enter__(self):
        global _PRESERVED
        self.saved = _PRESERVED
        _PRESERVED = tuple(n for n in _PRESERVED if n != "linear")
        return self

    def __exit__(self, *exc):
        global _PRESERVED
        _PRESERVED = self.saved
        return False


def _preserved_composites():
    """A decomposition table recording the :data:`_PRESERVED` composite ops whole (each entry
    declines: the op is recorded as itself)."""
    from ..ops.registry import OPS
    return {OPS[name]: _keep_whole for name in _PRESERVED if OPS.get(name) is not None}


def _trace_functional_inner(gm, ex_inputs, decompositions=None):
    from ..aot.joint import AOTUnsupported, trace_joint
    try:
        if gm.meta.get("dynamic"):
            fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
            return trace_joint(gm, ex_inputs, inference=True, shape_env=gm.meta["shape_env"], fake_inputs=fakes,
                               decompositions=decompositions)
        return trace_joint(gm, ex_inputs, inference=True, decompositions=decompositions)
    except AOTUnsupported as e:
        raise Unsupported(f"ember.export: the captured graph cannot be traced into a functional graph: {e}") from e


# ---------------------------------------------------------------------------- constraints
def _bounds(guard, sym):
    """(lower, upper) that a one-symbol relational ``guard`` allows for ``sym``, or None."""
    import sympy
    try:
        if isinstance(guard, sympy.Eq):
            sol = sympy.solve(guard, sym)
            if len(sol) == 1 and sol[0].is_Integer:
                return int(sol[0]), int(sol[0])
            return None
        if isinstance(guard, (sympy.Ne, sympy.Not)):
            return None
        s = sympy.solve_univariate_inequality(guard, sym, relational=False)
        lo, hi = -int_oo, int_oo
        if s.inf.is_finite:
            lo = int(sympy.ceiling(s.inf)) + (1 if s.left_open and sympy.ceiling(s.inf) == s.inf else 0)
        if s.sup.is_finite:
            hi = int(sympy.floor(s.sup)) - (1 if s.right_open and sympy.floor(s.sup) == s.sup else 0)
        return lo, hi
    except Exception:  # noqa: BLE001 - not a simple relation: checked at call time only
        return None


def _declared_range(reqs):
    """The range torch reports for a symbol before the program's guards narrow it: a named Dim's
    own ``[min, max]`` (``Dim("b")``: ``[0, int_oo]``: its sizes 0 and 1 are accepted at call
    time, as torch's), a hint's bounds clamped to at least 2 (``Dim.AUTO``: ``[2, int_oo]``);
    several requests on one symbol intersect."""
    named = [r.root for r in reqs if not isinstance(r.spec, _DimHint)]
    if named:
        lo, hi = max(d.min for d in named), min(d.max for d in named)
    else:
        lo, hi = 2, int_oo
    for r in reqs:
        if isinstance(r.spec, _DimHint):
            h_lo, h_hi = r.spec.bounds()
            lo, hi = max(lo, h_lo) if r.spec.min is not None or not named else lo, min(hi, h_hi)
    return lo, hi


def _check_constraints(requests, user_phs, in_leaves, shape_env):
    """Range constraints per symbol, and violations of declared Dims (raised)."""
    from ..fx.experimental.symbolic_shapes import SymInt
    sym_reqs: Dict[Any, List[DimRequest]] = {}
    problems, fixes = [], []
    ph_of = {i: n for i, n in user_phs}
    for i, v in enumerate(in_leaves):
        per_dim = requests.get(id(v)) if hasattr(v, "shape") else None
        if not per_dim:
            continue
        val = ph_of[i].meta.get("val")
        for d, req in per_dim.items():
            size = val.shape[d] if val is not None else v.shape[d]
            req.path = ph_of[i].name
            if not isinstance(size, SymInt):
                if req.must_stay_dynamic:
                    label = req.name or req.where()
                    problems.append(f"You marked {label} as dynamic but your code specialized it to be a constant "
                                    f"({int(size)}). If you're using Dim.DYNAMIC, replace it with either "
                                    f"Dim.STATIC or Dim.AUTO.")
                    fixes.append(f"{label} = {int(size)}")
                continue
            if isinstance(req.spec, _DerivedDim) and not size.expr.is_Symbol:
                # ``A * s + B``: constrained through its root's symbol s
                sym_reqs.setdefault(next(iter(size.expr.free_symbols)), []).append(req)
                continue
            sym_reqs.setdefault(size.expr, []).append(req)
    guards = list(shape_env.guards) if shape_env is not None else []
    ranges = {}
    for sym, reqs in sym_reqs.items():
        lo, hi = _declared_range(reqs)
        derived = [r for r in reqs if isinstance(r.spec, _DerivedDim)]
        for r in derived:
            # torch lists each derived dim's range first, mapped from its root's declared one
            ranges[r.spec.a * sym + r.spec.b] = ValueRange(r.spec.min, r.spec.max)
        if derived and len(derived) == len(reqs):
            lo = max(lo, 2)     # a root met only through derived dims: a plain symbol's >= 2 (torch)
        declared = (lo, hi)
        for gd in guards:
            if gd.free_symbols != {sym}:
                continue
            b = _bounds(gd, sym)
            if b is not None:
                lo, hi = max(lo, b[0]), min(hi, b[1])
        ranges[sym] = ValueRange(lo, hi)
        for r in reqs:
            if isinstance(r.spec, _DerivedDim) and len(derived) != len(reqs):
                continue    # reported for the root's own dims
            label = r.name or r.where()
            if lo == hi and r.must_stay_dynamic:
                problems.append(f"You marked {label} as dynamic but your code specialized it to be a constant "
                                f"({lo}). If you're using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO.")
                fixes.append(f"{label} = {lo}")
                break
            if (lo, hi) != declared and r.name is not None:
                up = "IntInfinity()" if hi >= int_oo else hi
                d_lo, d_hi = declared
                spec_range = (f"{d_lo} <= " if d_lo > 2 else "") + r.name + (f" <= {d_hi}" if d_hi < int_oo else "")
                spec_range = "" if spec_range == r.name else spec_range + " "
                problems.append(f"Not all values of {label} = {r.where()} in the specified range {spec_range}satisfy "
                                f"the generated guard {lo} <= {r.where()} and {r.where()} <= {up}")
                root = r.root.__name__
                fixes.append(f"{root} = {_readable(root, lo, hi)}")
                break
    # relations between symbols: equal dims of different declared Dims
    name_of = {sym: next((r.root.__name__ for r in reqs if r.name), None) for sym, reqs in sym_reqs.items()}
    # equalities the program needs are errors only for named Dims (declared independent); between
    # Dim.DYNAMIC/AUTO dims they are accepted (torch: only specialisation breaks DYNAMIC), and
    # module() checks them at call time (the guards)
    strict = {sym for sym, reqs in sym_reqs.items() if any(r.name is not None for r in reqs)}
    import sympy
    for gd in guards:
        syms = gd.free_symbols
        if len(syms) < 2 or not syms & strict:
            continue
        names = {name_of.get(s) for s in syms}
        if len(names) == 1 and None not in names:
            continue       # the same Dim on several dims: equal by declaration
        if isinstance(gd, sympy.Eq) and len(syms) == 2:
            a, b = sorted(syms, key=str)
            ra, rb = sym_reqs.get(a, [None])[0], sym_reqs.get(b, [None])[0]
            la = (ra.name or ra.where()) if ra else str(a)
            lb = (rb.name or rb.where()) if rb else str(b)
            problems.append(f"The values of {lb} = {rb.where() if rb else b} and {la} = "
                            f"{ra.where() if ra else a} must always be equal.")
            fixes.append(f"{lb} = {la}")
        else:
            problems.append(f"The program requires {gd} between dynamic dims, which the declared Dims do not "
                            f"imply.")
    if problems:
        labels = sorted({r.name or r.where() for reqs in sym_reqs.values() for r in reqs if r.must_stay_dynamic})
        msg = f"Constraints violated ({', '.join(labels)})!\n" + "\n".join(f"  - {p}" for p in problems)
        if fixes:
            msg += "\nSuggested fixes:\n" + "\n".join(f"  {f}" for f in fixes)
        raise ConstraintViolationError(msg)
    # the same Dim on several dims: equal at call time even if the program never needed it
    groups: Dict[str, List[tuple]] = {}
    for i, v in enumerate(in_leaves):
        for d, req in (requests.get(id(v)) or {}).items() if hasattr(v, "shape") else ():
            if req.name is not None:
                groups.setdefault(req.name, []).append((ph_of[i].name, d))
    return ranges, [g for g in groups.values() if len(g) > 1]
