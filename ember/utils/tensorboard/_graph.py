"""add_graph: an ember model's fx graph as the GraphDef TensorBoard's graph dashboard draws.

torch traces with its JIT; ember uses ``ember.fx.symbolic_trace`` instead, and, when example inputs are
given, ``ShapeProp`` to annotate each node's output shape.  Node names are scoped by the owning submodule
path ('Net/layer1/conv1/...') so the dashboard folds them into boxes as it does for torch's graphs."""
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.config_pb2 import RunMetadata
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.step_stats_pb2 import DeviceStepStats, StepStats
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef


def _op_name(node, modules):
    if node.op in ("placeholder", "output"):
        return "IO Node"
    if node.op == "call_module":
        return type(modules[node.target]).__name__
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "get_attr":
        return "prim::GetAttr"
    return str(node.target)     # call_method


def _scope(node, root):
    if node.op == "call_module":
        return root + "/" + node.target.replace(".", "/")
    if node.op == "get_attr":
        parent = node.target.rpartition(".")[0]
        return root + ("/" + parent.replace(".", "/") if parent else "")
    return root


def _shapes_attr(node):
    meta = node.meta.get("tensor_meta")
    if meta is None:
        return None
    metas = [meta] if hasattr(meta, "shape") else [m for m in meta if hasattr(m, "shape")]
    if not metas:
        return None
    shapes = [TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(s)) for s in m.shape]) for m in metas]
    return AttrValue(list=AttrValue.ListValue(shape=shapes))


def _input_names(node, names):
    found = []

    def visit(arg):
        if hasattr(arg, "op") and hasattr(arg, "target") and arg in names:
            found.append(names[arg])
        elif isinstance(arg, (list, tuple)):
            for a in arg:
                visit(a)
        elif isinstance(arg, dict):
            for a in arg.values():
                visit(a)

    visit(node.args)
    visit(node.kwargs)
    return found


def graph(model, input_to_model=None):
    """(GraphDef, RunMetadata) of ``model``'s fx graph; shapes come from running ``input_to_model``."""
    import ember
    from ember.fx.passes.shape_prop import ShapeProp

    if not isinstance(model, ember.nn.Module):
        raise TypeError(f"add_graph: model must be an ember.nn.Module, got {type(model).__name__}")
    try:
        traced = ember.fx.symbolic_trace(model)
    except Exception as e:
        raise NotImplementedError(
            f"ember.utils.tensorboard.add_graph: ember.fx.symbolic_trace could not trace "
            f"{type(model).__name__} ({type(e).__name__}: {e}); add_graph needs an fx-traceable model") from e
    if input_to_model is not None:
        inputs = input_to_model if isinstance(input_to_model, (list, tuple)) else (input_to_model,)
        with ember.no_grad():
            ShapeProp(traced).propagate(*inputs)

    modules = dict(traced.named_modules())
    root = type(model).__name__
    names = {}
    nodes = []
    for node in traced.graph.nodes:
        if node.op == "placeholder":
            name = f"input/{node.name}"
        elif node.op == "output":
            name = "output/output"
        else:
            name = f"{_scope(node, root)}/{node.name}"
        names[node] = name
        attrs = {}
        shapes = _shapes_attr(node)
        if shapes is not None:
            attrs["_output_shapes"] = shapes
        if node.op == "call_module":
            attrs["attr"] = AttrValue(s=repr(modules[node.target]).encode("utf-8"))
        elif node.kwargs:
            attrs["attr"] = AttrValue(s=repr(dict(node.kwargs)).encode("utf-8"))
        nodes.append(NodeDef(name=name, op=_op_name(node, modules), input=_input_names(node, names),
                             device="/device:CPU:0", attr=attrs))
    stats = RunMetadata(step_stats=StepStats(dev_stats=[DeviceStepStats(device="/device:CPU:0")]))
    return GraphDef(node=nodes, versions=VersionDef(producer=22)), stats
