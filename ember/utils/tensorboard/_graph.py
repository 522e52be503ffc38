"""add_graph: an ember model's graph as the GraphDef TensorBoard's graph dashboard draws.

torch records a JIT trace; ember has no JIT tracer, so the graph comes from ``ember.fx.symbolic_trace``
(module-level nodes: Linear, ReLU, ...), or, where symbolic tracing fails (Python branches on shapes,
say) and example inputs are given, from ``ember.export.export`` (ATen-level nodes).  Example inputs
also annotate each node with its output shape (``_output_shapes``).  Node names are scoped by the
owning submodule path ('Net/layer1/conv1/...') so the dashboard folds them into boxes as for torch."""
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.step_stats_pb2 import DeviceStepStats, StepStats
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef

_DEVICE = "/device:CPU:0"


def _shape_list(node):
    """Output shapes from ShapeProp's tensor_meta or export's example value, or None if unknown."""
    meta = node.meta.get("tensor_meta")
    if meta is None:
        meta = node.meta.get("val")
    if meta is None:
        return None
    metas = [meta] if hasattr(meta, "shape") else [m for m in meta if hasattr(m, "shape")] \
        if isinstance(meta, (list, tuple)) else []
    if not metas:
        return None
    try:
        shapes = [TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(s)) for s in m.shape]) for m in metas]
    except TypeError:           # symbolic sizes: leave the shape out rather than guess it
        return None
    return AttrValue(list=AttrValue.ListValue(shape=shapes))


def _input_names(node, names):
    found = []

    def visit(arg):
        if isinstance(arg, (list, tuple)):
            for a in arg:
                visit(a)
        elif isinstance(arg, dict):
            for a in arg.values():
                visit(a)
        elif getattr(arg, "graph", None) is not None and arg in names:
            found.append(names[arg])

    visit(node.args)
    visit(node.kwargs)
    return found


def _function_name(target):
    packet = getattr(target, "overloadpacket", None)        # an exported program's aten.relu.default
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", None) or str(target)


def _scoped_trace(model):
    """symbolic_trace, also recording in ``node.meta['tensorboard_scope']`` the path of the submodule whose
    forward was running when the node was made (fx inlines non-leaf modules, losing that)."""
    import ember

    class ScopedTracer(ember.fx.Tracer):
        def __init__(self):
            super().__init__()
            self.scopes = [""]

        def call_module(self, m, forward, args, kwargs):
            self.scopes.append(self.path_of_module(m))
            try:
                return super().call_module(m, forward, args, kwargs)
            finally:
                self.scopes.pop()

        def create_node(self, *args, **kwargs):
            node = super().create_node(*args, **kwargs)
            node.meta["tensorboard_scope"] = self.scopes[-1]
            return node

    tracer = ScopedTracer()
    graph_ = tracer.trace(model)
    return ember.fx.GraphModule(tracer.root, graph_, type(model).__name__)


def _symbolic_nodes(traced, root):
    """(node -> (scoped name, op, extra attr text)) for a symbolic_trace GraphModule."""
    modules = dict(traced.named_modules())
    described = {}
    for node in traced.graph.nodes:
        extra = repr(dict(node.kwargs)) if node.kwargs else None
        if node.op == "placeholder":
            described[node] = (f"input/{node.name}", "IO Node", None)
        elif node.op == "output":
            described[node] = ("output/output", "IO Node", None)
        elif node.op == "call_module":
            module = modules[node.target]
            scope = root + "/" + node.target.replace(".", "/")
            described[node] = (f"{scope}/{node.name}", type(module).__name__, repr(module))
        elif node.op == "get_attr":
            parent = node.target.rpartition(".")[0]
            scope = root + ("/" + parent.replace(".", "/") if parent else "")
            described[node] = (f"{scope}/{node.name}", "prim::GetAttr", None)
        else:
            path = node.meta.get("tensorboard_scope", "")
            scope = root + ("/" + path.replace(".", "/") if path else "")
            op = _function_name(node.target) if node.op == "call_function" else str(node.target)
            described[node] = (f"{scope}/{node.name}", op, extra)
    return described


def _exported_nodes(program, root):
    """(node -> (scoped name, op, extra attr text)) for an ExportedProgram's ATen graph: parameters and
    buffers sit in their module's scope, ops in the innermost module that called them."""
    state_targets = {}
    for spec in program.graph_signature.input_specs:
        if spec.target is not None:
            state_targets[spec.arg.name] = spec.target
    described = {}
    for node in program.graph_module.graph.nodes:
        if node.op == "placeholder":
            target = state_targets.get(node.name)
            if target is None:
                described[node] = (f"input/{node.name}", "IO Node", None)
            else:
                described[node] = (root + "/" + target.replace(".", "/"), "prim::GetAttr", None)
        elif node.op == "output":
            described[node] = ("output/output", "IO Node", None)
        else:
            stack = node.meta.get("nn_module_stack") or {}
            path = list(stack.values())[-1][0] if stack else ""
            scope = root + ("/" + path.replace(".", "/") if path else "")
            extra = repr(dict(node.kwargs)) if node.kwargs else None
            described[node] = (f"{scope}/{node.name}", "aten::" + _function_name(node.target), extra)
    return described


def graph(model, input_to_model=None, verbose=False):
    """(GraphDef, RunMetadata) of ``model``; shapes come from running ``input_to_model``."""
    import ember
    from ember.fx.passes.shape_prop import ShapeProp

    if not isinstance(model, ember.nn.Module):
        raise TypeError(f"add_graph: model must be an ember.nn.Module, got {type(model).__name__}")
    inputs = None
    if input_to_model is not None:
        inputs = tuple(input_to_model) if isinstance(input_to_model, (list, tuple)) else (input_to_model,)
    root = type(model).__name__
    try:
        traced = _scoped_trace(model)
    except Exception as trace_error:
        if inputs is None:
            raise NotImplementedError(
                f"ember.utils.tensorboard.add_graph: ember.fx.symbolic_trace cannot trace {root} "
                f"({type(trace_error).__name__}: {trace_error}); pass input_to_model so ember.export can "
                "capture it instead") from trace_error
        try:
            program = ember.export.export(model, inputs)
        except Exception as export_error:
            raise NotImplementedError(
                f"ember.utils.tensorboard.add_graph: neither ember.fx.symbolic_trace nor ember.export can "
                f"capture {root} as a graph (export: {type(export_error).__name__}: {export_error})") \
                from export_error
        graph_module, described = program.graph_module, _exported_nodes(program, root)
    else:
        if inputs is not None:
            with ember.no_grad():
                ShapeProp(traced).propagate(*inputs)
        graph_module, described = traced, _symbolic_nodes(traced, root)
    if verbose:
        print(graph_module.graph)

    names = {node: described[node][0] for node in graph_module.graph.nodes}
    nodes = []
    for node in graph_module.graph.nodes:
        name, op, extra = described[node]
        attrs = {}
        shapes = _shape_list(node)
        if shapes is not None:
            attrs["_output_shapes"] = shapes
        if extra is not None:
            attrs["attr"] = AttrValue(s=extra.encode("utf-8"))
        nodes.append(NodeDef(name=name, op=op, input=_input_names(node, names), device=_DEVICE, attr=attrs))
    stats = RunMetadata(step_stats=StepStats(dev_stats=[DeviceStepStats(device=_DEVICE)]))
    return GraphDef(node=nodes, versions=VersionDef(producer=22)), stats
