"""From ``ember.export.export(...).module()`` to the graph the PT2E flow annotates and rewrites.

``ember.export`` hands back a module whose graph takes the parameters as inputs and whose
operators are already lowered (``convolution``, ``addmm(b, x, t(w))``, ``native_batch_norm``,
``max_pool_with_indices``). PT2E quantizers describe patterns on torch's export IR
(``conv2d``, ``linear``, ``max_pool2d``, ...), so this module:

* *unlifts* the program into an ``ember.fx.GraphModule`` whose parameters and buffers are
  ``get_attr`` nodes on the module (as torch's ``ExportedProgram.module()`` has them), the
  placeholders being the user's inputs only;
* *raises* the lowered patterns back to the functional ops torch's IR has (``F.conv2d``,
  ``F.linear``, ``F.max_pool2d``, ``F.avg_pool2d``, ``F.adaptive_avg_pool2d``), keeping every
  node's meta (``val``, ``nn_module_stack``);
* folds an eval-mode batch norm into the conv before it (torch's ``prepare_pt2e`` does
  ``_fuse_conv_bn_``).
"""
from __future__ import annotations

import operator

import ember
import ember.nn.functional as F
from ember.fx import Graph, GraphModule, Node

__all__ = ["to_graph_module", "raise_patterns", "fold_conv_bn"]


def _val(n):
    return n.meta.get("val", None) if isinstance(n, Node) else None


def _ndim(n):
    v = _val(n)
    return v.dim() if v is not None and hasattr(v, "dim") else None


def _install(root, fqn, t, kind):
    *path, leaf = fqn.split(".")
    mod = root
    for p in path:
        sub = mod._modules.get(p)
        if sub is None:
            sub = ember.nn.Module()
            mod.add_module(p, sub)
        mod = sub
    if kind == "param":
        mod.register_parameter(leaf, t)
    else:
        mod.register_buffer(leaf, t)


def _get(root, fqn):
    mod = root
    *path, leaf = fqn.split(".")
    for p in path:
        mod = mod._modules[p]
    return getattr(mod, leaf)


def to_graph_module(model, what="prepare_pt2e"):
    """An ``ember.fx.GraphModule`` with ``get_attr`` parameters for ``model`` (the module
    ``ember.export.export(...).module()`` returns, or a GraphModule already)."""
    if isinstance(model, GraphModule):
        return model
    ep = model.__dict__.get("_ep", None)
    if ep is None:
        raise TypeError(f"{what}: expected the module returned by ember.export.export(model, args).module() "
                        f"(or an ember.fx.GraphModule), got {type(model).__name__}")
    from ember.export.graph_signature import InputKind, OutputKind
    from ember.utils._pytree import tree_flatten
    sig = ep.graph_signature
    n_user = sum(1 for s in sig.input_specs if s.kind == InputKind.USER_INPUT)
    in_spec = ep._in_spec
    # only flat positional tensors: (args tuple of leaves, {} kwargs)
    probe = in_spec.unflatten(list(range(in_spec.num_leaves)))
    if (not isinstance(probe, tuple) or len(probe) != 2 or probe[1] != {} or not isinstance(probe[0], tuple)
            or len(probe[0]) != n_user or any(not isinstance(v, int) for v in probe[0])
            or any(c is not None for c in ep._const_inputs)):
        raise NotImplementedError(f"{what}: exported programs whose inputs are not flat positional tensors "
                                  f"(keyword, nested or constant inputs) are not supported")
    for s in sig.output_specs:
        if s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            raise NotImplementedError(
                f"{what}: the exported program mutates {s.target!r} ({s.kind.name}); programs with state "
                f"mutations (e.g. BatchNorm in training mode, as QAT's conv-bn fusion would need) are not supported")
    root = ember.nn.Module()
    graph = Graph()
    env = {}
    consts = {}
    src = ep.graph_module.graph
    placeholders = [n for n in src.nodes if n.op == "placeholder"]
    for node, s in zip(placeholders, sig.input_specs):
        if s.kind == InputKind.USER_INPUT:
            env[node] = graph.placeholder(node.name)
            env[node].meta = dict(node.meta)
            continue
        if s.kind == InputKind.PARAMETER:
            t = _get(model, s.target)
            _install(root, s.target, t, "param")
            name = s.target
        elif s.kind == InputKind.BUFFER:
            t = _get(model, s.target)
            _install(root, s.target, t, "buffer")
            name = s.target
        else:
            name = f"_const_{len(consts)}"
            consts[name] = ep.constants[s.target]
            root.register_buffer(name, ep.constants[s.target])
        env[node] = graph.get_attr(name)
        env[node].meta = dict(node.meta)
    out_node = None
    for node in src.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            out_node = node
            continue
        env[node] = graph.node_copy(node, lambda a: env[a])
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    user = []
    k = 0
    for s in sig.output_specs:
        from ember.export.graph_signature import ConstantArgument
        if isinstance(s.arg, ConstantArgument):
            user.append(s.arg.value)
            continue
        user.append(env[outs[k]] if isinstance(outs[k], Node) else outs[k])
        k += 1
    result = ep._out_spec.unflatten(user)
    graph.output(result)
    # the program's aten-overload nodes (aten.addmm.default, ...) as ember's binding calls, which
    # the quantizer's patterns match
    from ember.ops._aten_convert import graph_to_bindings
    graph_to_bindings(graph)
    gm = GraphModule(root, graph)
    gm.meta.update(getattr(ep.graph_module, "meta", {}) or {})
    return gm


# ------------------------------------------------------------------------------- pattern raising
def _replace(graph, old: Node, target, args, kwargs=None, meta_from=None):
    with graph.inserting_before(old):
        new = graph.call_function(target, tuple(args), kwargs or {})
    new.meta = dict((meta_from or old).meta)
    old.replace_all_uses_with(new)
    graph.erase_node(old)
    return new


def _erase_if_unused(graph, *nodes):
    for n in nodes:
        if isinstance(n, Node) and n.op == "call_function" and not n.users:
            graph.erase_node(n)


def _getitem_users(node):
    """{index: getitem node} when every user of ``node`` is ``operator.getitem``, else None."""
    out = {}
    for u in node.users:
        if u.op != "call_function" or u.target is not operator.getitem:
            return None
        out[u.args[1]] = u
    return out


def _weight_of_t(n):
    """``w`` for ``t(w)`` with a 2-D constant (get_attr) ``w``."""
    if (isinstance(n, Node) and n.op == "call_function" and n.target is ember.t and isinstance(n.args[0], Node)
            and n.args[0].op == "get_attr" and _ndim(n.args[0]) == 2):
        return n.args[0]
    return None


def _module_class(n):
    stack = n.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    cls = list(stack.values())[-1][1]
    return cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"


def _source_name(n):
    """The name of the function or module the node was traced from (``source_fn_stack``)."""
    stack = n.meta.get("source_fn_stack") or []
    if not stack:
        return ""
    src = stack[-1][1]
    return src if isinstance(src, str) else getattr(src, "__name__", "")


def _flatten_dims(in_shape, out_shape):
    """``(start, end)`` with ``in_shape`` flattened over ``[start, end]`` giving ``out_shape``."""
    in_shape, out_shape = tuple(in_shape), tuple(out_shape)
    n = len(in_shape)
    for start in range(n):
        for end in range(start, n):
            p = 1
            for d in in_shape[start:end + 1]:
                p *= d
            if in_shape[:start] + (p,) + in_shape[end + 1:] == out_shape:
                return start, end
    return None


def _raise_linear_modules(gm: GraphModule) -> None:
    """Every ``nn.Linear`` call, whatever it was lowered to (``addmm``, ``view + mm +
    _unsafe_view``, ``expand + bmm``, ...), becomes one ``F.linear`` node: the nodes whose
    innermost ``nn_module_stack`` entry is one Linear instance, read from one activation and the
    module's ``weight`` (and ``bias``), read outside at one node."""
    graph = gm.graph
    groups = {}
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        cls = _module_class(n)
        if cls is None or cls.rsplit(".", 1)[-1] != "Linear":
            continue
        fqn = list(n.meta["nn_module_stack"].values())[-1][0]
        fqn = fqn[len("L['self']."):] if fqn.startswith("L['self'].") else fqn
        groups.setdefault(fqn, []).append(n)
    parts = []
    for fqn, nodes in groups.items():
        # one module called twice: one part per call (connected nodes)
        comp = {n: i for i, n in enumerate(nodes)}
        for n in nodes:
            for a in n.all_input_nodes:
                if a in comp and comp[a] != comp[n]:
                    old, new = comp[n], comp[a]
                    for k in comp:
                        if comp[k] == old:
                            comp[k] = new
        by = {}
        for n in nodes:
            by.setdefault(comp[n], []).append(n)
        parts.extend((fqn, v) for v in by.values())
    for fqn, nodes in parts:
        members = set(nodes)
        acts, attrs = [], []
        for n in nodes:
            for a in n.all_input_nodes:
                if a in members:
                    continue
                if a.op == "get_attr":
                    if a not in attrs:
                        attrs.append(a)
                elif a not in acts:
                    acts.append(a)
        outs = [n for n in nodes if any(u not in members for u in n.users)]
        by_target = {a.target: a for a in attrs}
        w = by_target.get(f"{fqn}.weight" if fqn else "weight")
        b = by_target.get(f"{fqn}.bias" if fqn else "bias")
        if w is None:       # a tied weight is read under its first owner's name
            two = [a for a in attrs if _ndim(a) == 2]
            one = [a for a in attrs if _ndim(a) == 1]
            if len(two) == 1 and len(one) <= 1:
                w, b = two[0], (one[0] if one else None)
        if len(acts) != 1 or len(outs) != 1 or w is None or len(attrs) != (1 if b is None else 2):
            continue
        x, o = acts[0], outs[0]
        vx, vo, vw = _val(x), _val(o), _val(w)
        if vx is None or vo is None or vw is None or vw.dim() != 2 or vx.dim() < 1 \
                or tuple(vo.shape) != tuple(vx.shape[:-1]) + (vw.shape[0],) or vx.shape[-1] != vw.shape[1]:
            continue
        if len(nodes) == 1 and nodes[0].target is F.linear:
            continue
        _replace(graph, o, F.linear, (x, w) if b is None else (x, w, b))
        for n in reversed(nodes):
            if n is not o and n.graph is graph and not n.users:
                graph.erase_node(n)


def raise_patterns(gm: GraphModule) -> GraphModule:
    """Rewrite the lowered patterns of an exported graph into the functional ops torch's
    export IR has (see the module docstring)."""
    graph = gm.graph
    # the program keeps ``aten.linear.default`` whole (as torch's export does): it is ``F.linear``
    # already, under its own name (``linear``, ``linear_1``: the observers are named after them)
    from ember.ops.registry import OPS
    lin = getattr(OPS.get("linear"), "binding", None)
    for node in graph.nodes:
        if node.op == "call_function" and lin is not None and node.target is lin:
            node.target = F.linear
    _raise_linear_modules(gm)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.graph is not graph:
            continue
        tgt = node.target
        if tgt is ember.convolution and len(node.args) == 9 and node.args[6] is False and _ndim(node.args[1]) == 4 \
                and not node.kwargs and all(p == 0 for p in node.args[7]):
            x, w, b, stride, padding, dilation, _, _, groups = node.args
            _replace(graph, node, F.conv2d, (x, w, b, tuple(stride), tuple(padding), tuple(dilation), groups))
        elif tgt in (ember.addmm, ember.mm) and not node.kwargs:
            if tgt is ember.addmm:
                if len(node.args) != 3:
                    continue
                b, x, wt = node.args
                if not (isinstance(b, Node) and _ndim(b) == 1):
                    continue
            else:
                b, (x, wt) = None, node.args
            w = _weight_of_t(wt)
            if w is None:
                continue
            # x.view(-1, in) -> addmm -> view(*lead, out): a linear on an N-d input
            first, last = x, node
            users = list(node.users)
            if (isinstance(x, Node) and x.op == "call_function" and x.target is ember.view and len(users) == 1
                    and users[0].op == "call_function" and users[0].target is ember.view):
                x0 = x.args[0]
                v0, vout = _val(x0), _val(users[0])
                if v0 is not None and vout is not None and v0.dim() >= 3 \
                        and tuple(vout.shape) == tuple(v0.shape[:-1]) + (w.meta["val"].shape[0],):
                    first, last = x0, users[0]
            args = (first, w) if b is None else (first, w, b)
            new = _replace(graph, last, F.linear, args, meta_from=node)
            if last is not node:
                graph.erase_node(node)
                new.meta["val"] = last.meta.get("val") if False else new.meta.get("val")
            _erase_if_unused(graph, x, wt)
        elif tgt is ember.max_pool_with_indices and _ndim(node.args[0]) == 4:
            items = _getitem_users(node)
            if items is None or set(items) - {0, 1} or (1 in items and items[1].users) or 0 not in items:
                continue
            x, k, s, p, d, ceil = node.args[:6]
            g0 = items[0]
            _replace(graph, g0, F.max_pool2d, (x, tuple(k), tuple(s), tuple(p), tuple(d), ceil))
            if 1 in items:
                graph.erase_node(items[1])
            graph.erase_node(node)
        elif tgt is ember.avg_pool and _ndim(node.args[0]) == 4 and len(node.args) == 7:
            x, k, s, p, ceil, cip, div = node.args
            _replace(graph, node, F.avg_pool2d, (x, tuple(k), tuple(s), tuple(p), ceil, cip, div))
        elif tgt is ember.mean and _ndim(node.args[0]) == 4 and len(node.args) == 3 \
                and list(node.args[1]) == [-2, -1] and node.args[2] is True and not node.kwargs \
                and ((_module_class(node) or "").endswith("AdaptiveAvgPool2d")
                     or _source_name(node) in ("adaptive_avg_pool2d", "AdaptiveAvgPool2d")):
            _replace(graph, node, F.adaptive_avg_pool2d, (node.args[0], (1, 1)))
        elif tgt is ember.view and (_source_name(node) in ("flatten", "Flatten")
                                    or (_module_class(node) or "").endswith(".Flatten")):
            vin, vout = _val(node.args[0]), _val(node)
            dims = _flatten_dims(vin.shape, vout.shape) if vin is not None and vout is not None else None
            if dims is not None and vin.dim() > 0:
                _replace(graph, node, ember.flatten, (node.args[0], dims[0], dims[1]))
    graph.lint()
    gm.recompile()
    return gm


# ------------------------------------------------------------------------------- conv-bn folding
def _attr_name(gm, prefix):
    i = 0
    while hasattr(gm, f"{prefix}{i}"):
        i += 1
    return f"{prefix}{i}"


def fold_conv_bn(gm: GraphModule) -> GraphModule:
    """Fold every eval-mode ``native_batch_norm`` whose input is a ``F.conv2d`` (read by nothing
    else) with constant parameters into the conv's weight and bias (torch's ``_fuse_conv_bn_``:
    ``w * (gamma * rsqrt(var + eps))``, ``(b - mean) * rsqrt(var + eps) * gamma + beta``)."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not ember.native_batch_norm or node.graph is not graph:
            continue
        x, bw, bb, rm, rv, training, _momentum, eps = node.args[:8]
        if training is not False or not isinstance(x, Node) or x.op != "call_function" or x.target is not F.conv2d:
            continue
        if len(x.users) != 1:
            continue
        items = _getitem_users(node)
        if items is None or 0 not in items or any(items[i].users for i in items if i != 0):
            continue
        cw, cb = x.args[1], x.args[2]
        params = [p for p in (cw, cb, bw, bb, rm, rv) if p is not None]
        if any(not isinstance(p, Node) or p.op != "get_attr" for p in params):
            continue
        get = lambda p: None if p is None else _get(gm, p.target).detach()  # noqa: E731
        w, b, g, beta, mean, var = (get(p) for p in (cw, cb, bw, bb, rm, rv))
        if g is None:
            g = ember.ones_like(mean)
        if beta is None:
            beta = ember.zeros_like(mean)
        if b is None:
            b = ember.zeros_like(mean)
        with ember.no_grad():
            inv = ember.rsqrt(var + eps)
            fw = (w * (g * inv).reshape([-1] + [1] * (w.dim() - 1))).to(w.dtype)
            fb = ((b - mean) * inv * g + beta).to(w.dtype)
        wname = _attr_name(gm, "_folded_conv_weight_")
        gm.register_parameter(wname, ember.nn.Parameter(fw, requires_grad=False))
        bname = _attr_name(gm, "_folded_conv_bias_")
        gm.register_parameter(bname, ember.nn.Parameter(fb, requires_grad=False))
        with graph.inserting_before(x):
            wn = graph.get_attr(wname)
            bn_ = graph.get_attr(bname)
        wn.meta["val"] = cw.meta.get("val")
        bn_.meta["val"] = rm.meta.get("val")
        args = list(x.args)
        args[1], args[2] = wn, bn_
        x.args = tuple(args)
        g0 = items[0]
        g0.replace_all_uses_with(x)
        for i in sorted(items):
            graph.erase_node(items[i])
        graph.erase_node(node)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return gm
