"""add_onnx_graph: an ONNX model file (e.g. from ember.onnx.export) as a TensorBoard GraphDef.

Graph inputs and outputs become 'Variable' nodes carrying their ONNX element type and shape; every
ONNX node is named after its first output and lists its attributes as text."""
from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef


def load_onnx_graph(path):
    try:
        import onnx
    except ImportError as e:
        raise ModuleNotFoundError("ember.utils.tensorboard: add_onnx_graph needs the 'onnx' package: "
                                  "pip install onnx", name="onnx") from e
    return onnx_to_graph_def(onnx.load(path).graph)


def onnx_to_graph_def(onnx_graph):
    nodes = []
    for value in list(onnx_graph.input) + list(onnx_graph.output):
        tensor_type = value.type.tensor_type
        shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=d.dim_value) for d in tensor_type.shape.dim])
        nodes.append(NodeDef(name=value.name, op="Variable", input=[],
                             attr={"dtype": AttrValue(type=tensor_type.elem_type), "shape": AttrValue(shape=shape)}))
    for node in onnx_graph.node:
        described = ", ".join(" = ".join(str(field[1]) for field in a.ListFields()) for a in node.attribute)
        nodes.append(NodeDef(name=node.output[0], op=node.op_type, input=node.input,
                             attr={"parameters": AttrValue(s=described.encode("utf_8"))}))
    return GraphDef(node=nodes, versions=VersionDef(producer=22))
