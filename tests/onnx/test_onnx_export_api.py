"""ember.onnx.export's calling convention (torch.onnx's): files, names, dynamic axes/shapes,
initializers, ONNXProgram, torch's legacy keywords, and the errors for what is unsupported."""
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import onnx  # noqa: E402  (tests/onnx/conftest.py: collected only where installed)

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.onnx  # noqa: E402
from ember.export import Dim  # noqa: E402

from _onnx_testing import Fn, np_of, run_ort  # noqa: E402


class TwoIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        return self.fc(x) * y.sum(-1, keepdim=True), x.mean()


def _dims(vi):
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def test_ember_onnx_is_a_lazy_attribute_and_import_ember_does_not_import_onnx():
    code = ("import sys, ember; assert 'onnx' not in sys.modules and 'ember.onnx' not in sys.modules; "
            "ember.onnx.export; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(ember.__file__)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_missing_onnx_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"pip install onnx"):
        ember.onnx.export(Fn(lambda x: x + 1), (ember.randn(2),))


def test_write_to_path_and_file_object(tmp_path):
    m = TwoIn().eval()
    x, y = ember.randn(2, 4), ember.randn(2, 5)
    path = tmp_path / "model.onnx"
    prog = ember.onnx.export(m, (x, y), str(path), input_names=["x", "y"], output_names=["out", "avg"])
    assert isinstance(prog, ember.onnx.ONNXProgram)
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded)
    assert loaded == prog.model_proto
    buf = io.BytesIO()
    ember.onnx.export(m, (x, y), buf, input_names=["x", "y"])
    assert onnx.load_from_string(buf.getvalue()).graph.node
    p2 = tmp_path / "again.onnx"
    prog.save(p2)
    got = run_ort(onnx.load(str(p2)), [np_of(x), np_of(y)])
    with ember.no_grad():
        want = m(x, y)
    np.testing.assert_allclose(got[0], np_of(want[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], np_of(want[1]), rtol=1e-5, atol=1e-6)
    assert [o.name for o in loaded.graph.output] == ["out", "avg"]
    assert [i.name for i in loaded.graph.input] == ["x", "y"]


def test_default_names_and_opset():
    prog = ember.onnx.export(TwoIn().eval(), (ember.randn(2, 4), ember.randn(2, 5)))
    mp = prog.model_proto
    assert [i.name for i in mp.graph.input] == ["x", "y"]
    assert [(o.domain, o.version) for o in mp.opset_import] == [("", 18)]
    assert mp.producer_name == "ember"
    assert "fc.weight" in {t.name for t in mp.graph.initializer}


def test_program_call_runs_onnxruntime():
    m = TwoIn().eval()
    prog = ember.onnx.export(m, (ember.randn(2, 4), ember.randn(2, 5)))
    for _ in range(2):
        x, y = ember.randn(2, 4), ember.randn(2, 5)
        got = prog(x, y)
        assert all(isinstance(g, ember.Tensor) for g in got)
        with ember.no_grad():
            want = m(x, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), np_of(w), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="takes 2 tensor inputs"):
        prog(ember.randn(2, 4))
    assert "ONNXProgram(inputs=[x, y]" in repr(prog)


def test_dynamic_axes_shared_name_and_output_axes():
    m = TwoIn().eval()
    prog = ember.onnx.export(m, (ember.randn(2, 4), ember.randn(2, 5)), input_names=["a", "b"],
                             output_names=["o", "m"], dynamic_axes={"a": {0: "batch"}, "b": {0: "batch", 1: "n"},
                                                                    "o": {0: "rows"}})
    g = prog.model_proto.graph
    assert _dims(g.input[0]) == ["batch", 4] and _dims(g.input[1]) == ["batch", "n"]
    assert _dims(g.output[0]) == ["rows", 3]
    x, y = ember.randn(6, 4), ember.randn(6, 9)
    with ember.no_grad():
        want = m(x, y)
    got = prog(x, y)
    np.testing.assert_allclose(got[0].numpy(), np_of(want[0]), rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_tuple_form_and_auto():
    m = TwoIn().eval()
    prog = ember.onnx.export(m, (ember.randn(2, 4), ember.randn(2, 5)),
                             dynamic_shapes=({0: Dim("b")}, {0: Dim("b"), 1: Dim.AUTO}))
    g = prog.model_proto.graph
    assert _dims(g.input[0]) == ["b", 4]
    d1 = _dims(g.input[1])
    assert d1[0] == "b" and isinstance(d1[1], str)
    got = prog(ember.randn(3, 4), ember.randn(3, 8))
    assert tuple(got[0].shape) == (3, 3)


def test_export_params_false_and_keep_initializers_as_inputs():
    m = TwoIn().eval()
    args = (ember.randn(2, 4), ember.randn(2, 5))
    prog = ember.onnx.export(m, args, export_params=False)
    g = prog.model_proto.graph
    assert {"fc.weight", "fc.bias"} <= {i.name for i in g.input}
    assert not {"fc.weight", "fc.bias"} & {t.name for t in g.initializer}
    feeds = [np_of(args[0]), np_of(args[1]), np_of(m.fc.weight), np_of(m.fc.bias)]
    got = run_ort(prog.model_proto, feeds)
    with ember.no_grad():
        np.testing.assert_allclose(got[0], np_of(m(*args)[0]), rtol=1e-5, atol=1e-6)
    prog2 = ember.onnx.export(m, args, keep_initializers_as_inputs=True)
    g2 = prog2.model_proto.graph
    assert {"fc.weight", "fc.bias"} <= {i.name for i in g2.input} & {t.name for t in g2.initializer}
    buf = io.BytesIO()
    ember.onnx.export(m, args).save(buf, include_initializers=False)
    saved = onnx.load_from_string(buf.getvalue())
    assert not saved.graph.initializer and "fc.weight" in {i.name for i in saved.graph.input}


def test_external_data(tmp_path):
    m = nn.Linear(64, 64).eval()
    prog = ember.onnx.export(m, (ember.randn(2, 64),))
    path = tmp_path / "ext.onnx"
    prog.save(path, external_data=True)
    assert (tmp_path / "ext.onnx.data").exists()
    loaded = onnx.load(str(path))
    x = ember.randn(2, 64)
    with ember.no_grad():
        np.testing.assert_allclose(run_ort(loaded, [np_of(x)])[0], np_of(m(x)), rtol=1e-5, atol=1e-5)


def test_exported_program_input_and_legacy_keywords(capsys):
    m = TwoIn().eval()
    args = (ember.randn(2, 4), ember.randn(2, 5))
    ep = ember.export.export(m, args)
    prog = ember.onnx.export(ep, args, dynamo=False, do_constant_folding=False, training=ember.onnx.TrainingMode.EVAL,
                             verbose=True, optimize=True, opset_version=19, operator_export_type=None)
    assert "main_graph" in capsys.readouterr().out
    assert prog.model_proto.opset_import[0].version == 19
    assert prog.exported_program is ep


@pytest.mark.parametrize("kw, match", [
    ({"operator_export_type": 1}, "operator_export_type"),
    ({"custom_opsets": {"my": 1}}, "custom_opsets"),
    ({"export_modules_as_functions": True}, "export_modules_as_functions"),
    ({"custom_translation_table": {"a": 1}}, "custom_translation_table"),
    ({"verify": True}, "verify"),
    ({"report": True}, "report"),
    ({"training": ember.onnx.TrainingMode.TRAINING}, "TRAINING"),
    ({"opset_version": 13}, "opset_version=13"),
])
def test_unsupported_options_raise(kw, match):
    with pytest.raises(NotImplementedError, match=match):
        ember.onnx.export(Fn(lambda x: x + 1), (ember.randn(2),), **kw)


def test_bad_arguments():
    m = TwoIn().eval()
    args = (ember.randn(2, 4), ember.randn(2, 5))
    with pytest.raises(ValueError, match="either dynamic_axes or dynamic_shapes"):
        ember.onnx.export(m, args, dynamic_axes={"x": {0: "b"}}, dynamic_shapes={"x": {0: Dim("b")}})
    with pytest.raises(ValueError, match="neither an input nor an output name"):
        ember.onnx.export(m, args, dynamic_axes={"z": {0: "b"}})
    with pytest.raises(ValueError, match="newer than the installed onnx"):
        ember.onnx.export(m, args, opset_version=999)
    with pytest.raises(ValueError, match="input_names has 3 names"):
        ember.onnx.export(m, args, input_names=["a", "b", "c"])
    with pytest.raises(TypeError, match="ember.nn.Module or an ExportedProgram"):
        ember.onnx.export(lambda x: x, args)
    with pytest.raises(ValueError, match="used twice"):
        ember.onnx.export(m, args, input_names=["a", "a"])


def test_unsupported_op_names_op_and_node():
    with pytest.raises(ember.onnx.UnsupportedOperatorError) as ei:
        ember.onnx.export(Fn(lambda x: ember.cumprod(x, 0) + 1), (ember.randn(3, 2),))
    msg = str(ei.value)
    assert "cumprod" in msg and "FX node" in msg
    assert isinstance(ei.value, NotImplementedError)


def test_training_dropout_preserve_is_refused():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train()
    with pytest.raises(NotImplementedError, match="eval mode"):
        ember.onnx.export(m, (ember.randn(2, 4),), training=ember.onnx.TrainingMode.PRESERVE)
    prog = ember.onnx.export(m, (ember.randn(2, 4),))        # EVAL (default): dropout off
    assert m.training
    x = ember.randn(2, 4)
    m.eval()
    with ember.no_grad():
        np.testing.assert_allclose(prog(x)[0].numpy(), np_of(m(x)), rtol=1e-5, atol=1e-6)


def test_batchnorm_training_preserve_is_refused():
    m = nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2)).train()
    with pytest.raises(NotImplementedError, match="eval mode"):
        ember.onnx.export(m, (ember.randn(2, 2, 3, 3),), training=ember.onnx.TrainingMode.PRESERVE)


def test_boolean_mask_index_is_refused():
    with pytest.raises((NotImplementedError, Exception)) as ei:
        ember.onnx.export(Fn(lambda x: x[x > 0]), (ember.randn(5),))
    assert "data-dependent" in str(ei.value) or "cannot be captured" in str(ei.value)


def test_torch_style_mlp_matches_torch_exporter_values():
    """The same weights through torch's TorchScript exporter and ember's: equal outputs in ORT."""
    torch = pytest.importorskip("torch")
    m = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2), nn.LogSoftmax(-1)).eval()
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2),
                             torch.nn.LogSoftmax(-1)).eval()
    tm.load_state_dict({k: torch.from_numpy(np_of(v).copy()) for k, v in m.state_dict().items()})
    buf = io.BytesIO()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(tm, (torch.randn(3, 5),), buf, dynamo=False, opset_version=18,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        except Exception as e:  # noqa: BLE001
            pytest.skip(f"torch's TorchScript exporter does not run here: {e}")
    ours = ember.onnx.export(m, (ember.randn(3, 5),), input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    theirs = onnx.load_from_string(buf.getvalue())
    assert [n.op_type for n in ours.model_proto.graph.node] == [n.op_type for n in theirs.graph.node]
    assert _dims(ours.model_proto.graph.input[0]) == _dims(theirs.graph.input[0])
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(run_ort(ours.model_proto, [x])[0], run_ort(theirs, [x])[0], rtol=1e-5, atol=1e-6)


def test_unsupported_op_error_quotes_the_users_source_line():
    """ember.export's nodes carry the user's stack trace; the error quotes the innermost user line."""
    with pytest.raises(ember.onnx.UnsupportedOperatorError) as info:
        ember.onnx.export(Fn(lambda x: ember.cumprod(x, 0)), (ember.randn(3, 2),))
    msg = str(info.value)
    assert "cumprod" in msg
    assert re.search(r'from: File ".*test_onnx_export_api\.py", line \d+, in <lambda> .*ember\.cumprod\(x, 0\)', msg), msg


class _CumprodInsideLinear(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(2, 2)

    def forward(self, x):
        h = self.fc(x)
        return h.cumprod(0)


def test_unsupported_op_error_quotes_the_users_line_not_embers():
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match=r"line \d+, in forward return h\.cumprod\(0\)"):
        ember.onnx.export(_CumprodInsideLinear(), (ember.randn(3, 2),))


def test_handler_failure_names_the_node():
    with pytest.raises(ember.onnx.OnnxExporterError, match="ceil_mode/divisor_override over a dynamic.*FX node"):
        ember.onnx.export(Fn(lambda x: ember.nn.functional.avg_pool1d(x, 2, ceil_mode=True)), (ember.randn(1, 2, 5),),
                          dynamic_shapes={"xs": ({2: Dim("b")},)})
