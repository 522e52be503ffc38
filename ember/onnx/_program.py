"""``ONNXProgram``: what ``ember.onnx.export`` returns (torch.onnx's name and main members)."""
from __future__ import annotations

import os
from typing import Any, List, Optional

_TWO_GB = 2 * 1024 ** 3


class ONNXProgram:
    """An exported model: ``model_proto`` (an ``onnx.ModelProto``), ``save(path)``, and calling
    it runs the model in onnxruntime (when installed) on ember tensors.

    Non-tensor outputs of the model (a returned Python number) are not part of the ONNX graph;
    ``exported_program`` is the ``ember.export.ExportedProgram`` it was translated from."""

    def __init__(self, model_proto, exported_program):
        self.model_proto = model_proto
        self.exported_program = exported_program
        self._session = None

    def __repr__(self):
        ins = ", ".join(i.name for i in self.model_proto.graph.input)
        outs = ", ".join(o.name for o in self.model_proto.graph.output)
        ops = len(self.model_proto.graph.node)
        opset = next((o.version for o in self.model_proto.opset_import if o.domain in ("", "ai.onnx")), None)
        return f"ONNXProgram(inputs=[{ins}], outputs=[{outs}], nodes={ops}, opset={opset})"

    # ---- serialization
    def save(self, destination, *, include_initializers: bool = True, keep_initializers_as_inputs: bool = False,
             external_data: Optional[bool] = None):
        """Write the model to ``destination`` (a path or a binary file object).

        ``external_data``: weights in a side file ``<name>.data`` (None: only when the model
        would pass protobuf's 2 GB limit). ``include_initializers=False`` leaves the weights
        out (they become graph inputs); ``keep_initializers_as_inputs`` lists them as inputs
        too, so a runtime may override them."""
        import onnx
        model = self._proto_for_save(include_initializers, keep_initializers_as_inputs)
        if external_data is None:
            external_data = model.ByteSize() > _TWO_GB
        if hasattr(destination, "write"):
            if external_data:
                raise ValueError("ember.onnx: external_data=True needs a path as destination, not a file object")
            destination.write(model.SerializeToString())
            return
        path = os.fspath(destination)
        if external_data:
            onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(path) + ".data", size_threshold=1024)
        else:
            onnx.save_model(model, path)

    def _proto_for_save(self, include_initializers, keep_initializers_as_inputs):
        from onnx import helper
        if include_initializers and not keep_initializers_as_inputs:
            return self.model_proto
        model = type(self.model_proto)()
        model.CopyFrom(self.model_proto)
        graph = model.graph
        have = {i.name for i in graph.input}
        inits = list(graph.initializer)
        for t in inits:
            if t.name not in have:
                graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        if not include_initializers:
            del graph.initializer[:]
        return model

    # ---- running
    def initialize_inference_session(self):
        """Create the onnxruntime session (CPU) now rather than on the first call."""
        try:
            import onnxruntime as ort
        except ImportError:
            raise ImportError("ember.onnx: running an ONNXProgram needs onnxruntime (`pip install onnxruntime`)") \
                from None
        self._session = ort.InferenceSession(self.model_proto.SerializeToString(),
                                             providers=["CPUExecutionProvider"])
        return self._session

    def release(self):
        """Drop the onnxruntime session (it holds a copy of the weights)."""
        self._session = None

    def __call__(self, *args, **kwargs) -> List[Any]:
        """Run the model in onnxruntime: tensor leaves of ``(args, kwargs)`` in export order ->
        the list of output tensors (ember tensors)."""
        import numpy as np

        import ember
        from ..tensor import Tensor
        from ..utils._pytree import tree_flatten
        sess = self._session or self.initialize_inference_session()
        leaves, _ = tree_flatten((args, kwargs))
        tensors = [t for t in leaves if isinstance(t, Tensor)]
        names = [i.name for i in sess.get_inputs()]
        if len(tensors) != len(names):
            raise ValueError(f"ember.onnx: the model takes {len(names)} tensor inputs ({', '.join(names)}), got "
                             f"{len(tensors)}")
        feed = {n: np.ascontiguousarray(t.detach().cpu().numpy()) for n, t in zip(names, tensors)}
        outs = sess.run(None, feed)
        return [ember.from_numpy(np.asarray(o)) if np.asarray(o).ndim else ember.tensor(np.asarray(o))
                for o in outs]
