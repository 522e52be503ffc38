"""ExportedProgram -> ``onnx.ModelProto``: walk the FX graph once, translating node by node.

Placeholders become graph inputs (user inputs) or initializers (parameters, buffers, lifted
constants: named by their fully qualified name, as torch does); each ``call_function`` node
goes through the handler table in ``_registry``; the user outputs become graph outputs. Sizes
marked dynamic carry a ``dim_param`` (the name the user gave them) on inputs and outputs."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ._builder import GraphBuilder
from ._context import Ctx, SymValue, Unavailable, Value
from ._dtypes import numpy_dtype, onnx_type
from ._registry import HANDLERS, load_all, target_key
from .errors import OnnxExporterError, UnsupportedOperatorError
from ..ops._aten_convert import to_binding


def describe_node(node) -> str:
    """``ember op 'cumprod' (FX node 'cumprod_1': cumprod_1 = cumprod(x, 0)), from: File ...``"""
    if node is None:
        return "no node"
    text = f"ember op {target_key(node.target)!r} (FX node {node.name!r}"
    try:
        fmt = node.format_node()
        if fmt:
            text += ": " + fmt.strip()
    except Exception:  # noqa: BLE001 - the description is best effort
        pass
    text += ")"
    trace = node.meta.get("stack_trace")
    if trace:
        # the innermost line of the user's code (ember's own frames, e.g. inside nn.Linear, skipped)
        from ..export._stack_trace import user_lines
        text += ", from: " + user_lines(trace)[-1]
    return text


def _dims(shape, dim_names: Dict[Any, str]):
    """ONNX dims: ints for static sizes, a name (``dim_param``) for symbolic ones."""
    out = []
    for d in shape:
        if hasattr(d, "expr"):
            expr = d.expr
            if expr in dim_names:
                out.append(dim_names[expr])
            else:
                import sympy
                subs = {s: sympy.Symbol(dim_names[s]) for s in expr.free_symbols if s in dim_names}
                out.append(str(expr.xreplace(subs)) if subs else str(expr))
        else:
            out.append(int(d))
    return out


def _value_info(name, val, dim_names):
    from onnx import helper
    return helper.make_tensor_value_info(name, onnx_type(val.dtype), _dims(val.shape, dim_names))


def _to_numpy(t):
    import numpy as np
    arr = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
    return np.asarray(arr, dtype=numpy_dtype(t.dtype))


def translate(ep, **options):
    """The ``onnx.ModelProto`` of ``ep`` (an ``ember.export.ExportedProgram``). The program's
    nodes call aten overloads (``aten.sum.dim_IntList(x, [1])``); the translation table is keyed
    by ember's bindings and reads their arguments, so while it runs each such node is its binding
    call again (``ember.sum(x, [1])``), restored afterwards."""
    saved = []
    for n in ep.graph_module.graph.nodes:
        if n.op == "call_function":
            back = to_binding(n.target, n.args, n.kwargs)
            if back is not None:
                saved.append((n, n.target, n.args, n.kwargs))
                n.target, n.args, n.kwargs = back
    try:
        return _translate(ep, **options)
    finally:
        for n, t, a, kw in saved:
            n.target, n.args, n.kwargs = t, a, kw


def _translate(ep, *, opset: int, input_names: Optional[List[str]] = None,
               output_names: Optional[List[str]] = None, dim_names: Optional[Dict[Any, str]] = None,
               export_params: bool = True, keep_initializers_as_inputs: bool = False):
    import onnx
    from onnx import helper

    from ..export.graph_signature import ConstantArgument, InputKind, OutputKind
    load_all()
    dim_names = dict(dim_names or {})
    gm = ep.graph_module
    b = GraphBuilder(opset)
    ctx = Ctx(b)
    specs = ep.graph_signature.input_specs
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    n_user = sum(1 for s in specs if s.kind == InputKind.USER_INPUT)
    input_names = list(input_names or [])
    if len(input_names) > n_user:
        raise ValueError(f"ember.onnx.export: input_names has {len(input_names)} names but the model has "
                         f"{n_user} tensor inputs")
    tensor_outs = [s for s in ep.graph_signature.output_specs
                   if s.kind == OutputKind.USER_OUTPUT and not isinstance(s.arg, ConstantArgument)]
    output_names = list(output_names or [])
    if len(output_names) > len(tensor_outs):
        raise ValueError(f"ember.onnx.export: output_names has {len(output_names)} names but the model has "
                         f"{len(tensor_outs)} tensor outputs")
    for nm in input_names + output_names:
        b.reserve(nm)

    env: Dict[Any, Any] = {}
    graph_inputs, param_inputs = [], []
    k = 0
    for n, spec in zip(phs, specs):
        val = n.meta["val"]
        if spec.kind == InputKind.USER_INPUT:
            name = input_names[k] if k < len(input_names) else b.fresh(n.name)
            k += 1
            graph_inputs.append(_value_info(name, val, dim_names))
            env[n] = Value(name, val.dtype, tuple(val.shape))
            continue
        tensor = _state_tensor(ep, spec, InputKind)
        name = b.fresh(spec.target or n.name)
        env[n] = Value(name, tensor.dtype, tuple(tensor.shape))
        param_inputs.append((name, tensor))

    def lookup(a):
        if hasattr(a, "op") and hasattr(a, "meta"):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(lookup(x) for x in a)
        if isinstance(a, dict):
            return {kk: lookup(v) for kk, v in a.items()}
        return a

    out_node = None
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            out_node = n
            continue
        ctx.node = n
        if n.op == "get_attr":
            obj = gm
            for part in n.target.split("."):
                obj = getattr(obj, part)
            name = b.fresh(n.name)
            param_inputs.append((name, obj))
            env[n] = Value(name, obj.dtype, tuple(obj.shape))
            continue
        if n.op != "call_function":
            raise UnsupportedOperatorError(f"ember.onnx.export: FX node kind {n.op!r} is not supported "
                                           f"({describe_node(n)})")
        handler = HANDLERS.get(target_key(n.target))
        if handler is None:
            raise UnsupportedOperatorError(f"ember.onnx.export: no ONNX translation for {describe_node(n)}")
        try:
            res = handler(ctx, lookup(n.args), lookup(n.kwargs))
        except OnnxExporterError:
            raise
        except Exception as e:  # noqa: BLE001 - name the node whatever broke
            raise OnnxExporterError(f"ember.onnx.export: translating {describe_node(n)} failed: "
                                    f"{type(e).__name__}: {e}") from e
        env[n] = _wrap(n, res)

    # ---- outputs
    for s in ep.graph_signature.output_specs:
        if s.kind == OutputKind.USER_INPUT_MUTATION:
            raise UnsupportedOperatorError(f"ember.onnx.export: the model writes in place into its input "
                                           f"{s.target!r}; ONNX graphs cannot modify their inputs")
        if s.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            raise UnsupportedOperatorError(f"ember.onnx.export: the model updates {s.target!r} during its forward "
                                           f"(BatchNorm running statistics in training mode?); ONNX graphs are "
                                           f"stateless: export the model in eval mode")
    # the FX output holds the tensor outputs only (constants returned by forward are not graph values)
    fx_outs = list(out_node.args[0]) if out_node is not None else []
    graph_outputs = []
    produced = {o for nd in b.nodes for o in nd.output}
    taken_as_output = set()
    rename: Dict[str, str] = {}
    for i, o in enumerate(fx_outs):
        v = env[o] if hasattr(o, "op") else o
        if not isinstance(v, Value):
            raise OnnxExporterError(f"ember.onnx.export: output {i} is not a tensor ({v!r})")
        want = output_names[i] if i < len(output_names) else None
        src = v.name
        if want is None:
            if src in produced and src not in taken_as_output:
                name = src
            else:
                name = b.op("Identity", [src], name=f"output_{i}")
        elif src in produced and src not in taken_as_output and src not in rename:
            rename[src] = want
            name = want
        else:
            name = b.op("Identity", [src], out_names=[want], name=f"output_{i}")
        taken_as_output.add(name)
        taken_as_output.add(src)
        val = o.meta.get("val")
        graph_outputs.append(helper.make_tensor_value_info(name, onnx_type(v.dtype),
                                                           _dims(val.shape if val is not None else v.shape,
                                                                 dim_names)))
    if rename:
        for nd in b.nodes:
            for j, x in enumerate(nd.input):
                if x in rename:
                    nd.input[j] = rename[x]
            for j, x in enumerate(nd.output):
                if x in rename:
                    nd.output[j] = rename[x]

    _drop_dead_nodes(b, {o.name for o in graph_outputs})

    # ---- initializers: only what the graph reads
    used = {x for nd in b.nodes for x in nd.input} | {o.name for o in graph_outputs}
    initializers = [tp for nm, tp in b.initializers.items() if nm in used]
    extra_inputs = []
    for name, tensor in param_inputs:
        if name not in used:
            continue
        if export_params:
            b.initializer(name, _to_numpy(tensor))
            initializers.append(b.initializers[name])
            if keep_initializers_as_inputs:
                extra_inputs.append(_value_info(name, tensor, {}))
        else:
            extra_inputs.append(_value_info(name, tensor, {}))
    graph = helper.make_graph(b.nodes, "main_graph", graph_inputs + extra_inputs, graph_outputs,
                              initializer=initializers)
    opset_id = helper.make_opsetid("", opset)
    model = helper.make_model(graph, opset_imports=[opset_id], producer_name="ember",
                              producer_version=_version())
    model.ir_version = helper.find_min_ir_version_for([opset_id], ignore_unknown=True)
    onnx.checker.check_model(model)
    return model


def _drop_dead_nodes(b, outputs):
    """Remove nodes none of whose outputs is read (a Transpose that a Gemm absorbed, an unused
    shape computation), walking backwards so chains go too."""
    live = set(outputs)
    kept = []
    for nd in reversed(b.nodes):
        if any(o in live for o in nd.output):
            kept.append(nd)
            live.update(i for i in nd.input if i)
    b.nodes[:] = kept[::-1]


def _state_tensor(ep, spec, InputKind):
    """The parameter / buffer / lifted constant a placeholder stands for."""
    if spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent):
        return ep.state_dict[spec.target]
    if spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
        return ep.constants[spec.target]
    raise UnsupportedOperatorError(f"ember.onnx.export: graph input kind {spec.kind.name} is not supported")


def _version() -> str:
    try:
        from ..version import __version__
        return str(__version__)
    except Exception:  # noqa: BLE001
        return ""


def _wrap(node, res):
    """Handler result -> env entry (a Value with the node's dtype and shape, a SymValue, a list)."""
    if isinstance(res, (SymValue, Unavailable, Value)):
        return res
    if isinstance(res, (list, tuple)):
        return [r if not isinstance(r, str) else Value(r, None, ()) for r in res]
    val = node.meta.get("val")
    if not hasattr(val, "dtype"):
        raise OnnxExporterError(f"ember.onnx.export: {describe_node(node)} has no tensor metadata")
    return Value(res, val.dtype, tuple(val.shape))
