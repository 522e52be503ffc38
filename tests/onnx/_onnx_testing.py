"""Shared checks of the ember.onnx tests: export, onnx.checker, run in onnxruntime, compare."""
import io

import numpy as np

import ember


def np_of(t):
    return np.asarray(t.detach().numpy())


def run_ort(model_proto, arrays):
    import onnxruntime as ort
    sess = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert len(names) == len(arrays), (names, len(arrays))
    return sess.run(None, dict(zip(names, arrays)))


def flat_outputs(out):
    if isinstance(out, ember.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(flat_outputs(o))
    return res


def check_export(model, args, *, others=(), rtol=1e-5, atol=1e-5, **export_kwargs):
    """Export ``model``, check the file, and compare onnxruntime with ember eager on ``args`` and
    on every tuple of ``others`` (fresh inputs, possibly other sizes). Returns the ONNXProgram."""
    import onnx
    prog = ember.onnx.export(model, args, **export_kwargs)
    onnx.checker.check_model(prog.model_proto, full_check=True)
    buf = io.BytesIO()
    prog.save(buf)
    reloaded = onnx.load_from_string(buf.getvalue())
    for inputs in (args,) + tuple(others):
        with ember.no_grad():
            want = flat_outputs(model(*inputs))
        got = run_ort(reloaded, [np_of(t) for t in inputs if isinstance(t, ember.Tensor)])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np_of(w)
            assert g.shape == w.shape, (g.shape, w.shape)
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return prog


def op_types(model_proto):
    return [n.op_type for n in model_proto.graph.node]


class Fn(ember.nn.Module):
    """A module calling ``fn`` (the op tests export plain functions)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)
