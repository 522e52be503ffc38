"""ember.utils.tensorboard.SummaryWriter writes the event files torch.utils.tensorboard writes.

Each comparison runs the same logging calls through torch's writer and ember's into two temp dirs and
reads both back with tensorboard's own loader: every Event (wall times cleared) and every side file
(projector config, tsv, sprite) must be equal, run directory by run directory."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import ember  # noqa: E402
from ember.utils.tensorboard import SummaryWriter  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402


def _run_contents(root):
    """{run dir relative to root: [Event without wall_time, ...]} and {side file: bytes}."""
    events, files = {}, {}
    for directory, _, names in os.walk(root):
        rel = os.path.relpath(directory, root)
        # natural order: event files of one second differ in a counter ("...9" before "...10")
        for name in sorted(names, key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)]):
            path = os.path.join(directory, name)
            if ".tfevents." in name:
                for event in EventFileLoader(path).Load():
                    event.wall_time = 0
                    events.setdefault(rel, []).append(event)
            else:
                with open(path, "rb") as f:
                    files[os.path.join(rel, name)] = f.read()
    return events, files


def _compare_with_torch(tmp_path, log):
    """Run ``log(writer, lib)`` with torch's writer and torch tensors and with ember's writer and ember
    tensors; assert the two log dirs hold the same events and side files.  Returns ember's log dir."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    torch_dir, ember_dir = str(tmp_path / "torch"), str(tmp_path / "ember")
    with TorchWriter(torch_dir) as w:
        log(w, torch)
    with SummaryWriter(ember_dir) as w:
        log(w, ember)
    want_events, want_files = _run_contents(torch_dir)
    got_events, got_files = _run_contents(ember_dir)
    assert sorted(got_events) == sorted(want_events)
    for run in want_events:
        assert len(got_events[run]) == len(want_events[run]), run
        for got, want in zip(got_events[run], want_events[run]):
            assert got == want, f"run {run!r}:\n{got}\n!=\n{want}"
    assert sorted(got_files) == sorted(want_files)
    for name in want_files:
        assert got_files[name] == want_files[name], name
    return ember_dir


def _t(lib, array):
    return lib.from_numpy(np.ascontiguousarray(array))


@pytest.fixture
def rng():
    return np.random.default_rng()


def _accumulator(path):
    acc = event_accumulator.EventAccumulator(path, size_guidance={k: 0 for k in (
        event_accumulator.SCALARS, event_accumulator.HISTOGRAMS, event_accumulator.IMAGES,
        event_accumulator.TENSORS, event_accumulator.AUDIO)})
    acc.Reload()
    return acc


def test_scalars_match_torch(tmp_path, rng):
    values = rng.normal(size=6)

    def log(w, lib):
        for step, v in enumerate(values):
            w.add_scalar("loss/plain", float(v), step)
            w.add_scalar("loss/tensor", _t(lib, np.array(v, dtype=np.float32)), step)
            w.add_scalar("loss/new", _t(lib, np.array([v])), step, new_style=True)
            w.add_scalar("loss/double", v, step, new_style=True, double_precision=True)
            w.add_scalar("loss/numpy", np.float64(v), step, walltime=123.0)
            w.add_scalars("group/run", {"a": float(v), "b": _t(lib, np.array(2 * v))}, step)
    got = _compare_with_torch(tmp_path, log)
    acc = _accumulator(got)
    assert [e.step for e in acc.Scalars("loss/plain")] == list(range(6))
    np.testing.assert_allclose([e.value for e in acc.Scalars("loss/plain")], values.astype(np.float32))
    assert [e.wall_time for e in acc.Scalars("loss/numpy")] == [123.0] * 6
    assert _accumulator(os.path.join(got, "group_run_b")).Scalars("group/run")[3].value == pytest.approx(
        2 * values[3], rel=1e-6)


def test_purge_step_and_reopen_match_torch(tmp_path, rng):
    def log(w, lib):
        w.close()                                   # a closed writer reopens on the next call, as torch's
        w.add_scalar("x", float(rng_values[0]), 1)
        w.flush()

    rng_values = rng.normal(size=1)
    _compare_with_torch(tmp_path, log)
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    for Writer, name in ((TorchWriter, "t"), (SummaryWriter, "e")):
        with Writer(str(tmp_path / name), purge_step=7, filename_suffix=".sfx") as w:
            w.add_scalar("x", 1.0, 7)
    got, want = _run_contents(str(tmp_path / "e"))[0], _run_contents(str(tmp_path / "t"))[0]
    assert got == want
    assert any(e.session_log.status == e.session_log.START and e.step == 7 for e in got["."])
    assert all(n.endswith(".sfx") for n in os.listdir(tmp_path / "e"))


def test_histograms_match_torch(tmp_path, rng):
    data = rng.normal(size=(40, 5)).astype(np.float32)
    ints = rng.integers(-20, 20, size=300)

    def log(w, lib):
        w.add_histogram("h/default", _t(lib, data), 0)
        w.add_histogram("h/int_bins", _t(lib, data), 1, bins=17)
        w.add_histogram("h/auto", data, 2, bins="auto")
        w.add_histogram("h/max_bins", _t(lib, ints), 3, bins=64, max_bins=10)
        w.add_histogram("h/float64", _t(lib, data.astype(np.float64) * 1e3), 4)
        w.add_histogram_raw("h/raw", min=-1.0, max=2.0, num=6, sum=3.0, sum_squares=9.5,
                            bucket_limits=[-1.0, 0.5, 2.0], bucket_counts=[1, 2, 3], global_step=5)
    got = _compare_with_torch(tmp_path, log)
    histo = _accumulator(got).Histograms("h/int_bins")[0].histogram_value
    assert histo.num == data.size and histo.min == pytest.approx(float(data.min()))
    assert sum(histo.bucket) == data.size


def test_images_match_torch(tmp_path, rng):
    pytest.importorskip("PIL")           # both writers encode PNGs with Pillow
    chw = rng.random((3, 9, 7)).astype(np.float32)
    hwc8 = rng.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    gray = rng.random((1, 4, 6)).astype(np.float32) * 1.4 - 0.2          # out of range: clipped
    rgba = rng.integers(0, 256, size=(5, 4, 4), dtype=np.uint8)
    hw = rng.random((8, 3))
    batch = rng.random((11, 3, 4, 5)).astype(np.float32)
    nhwc = rng.integers(0, 256, size=(3, 4, 5, 1), dtype=np.uint8)

    def log(w, lib):
        w.add_image("img/chw", _t(lib, chw), 0)
        w.add_image("img/hwc_uint8", _t(lib, hwc8), 0, dataformats="HWC")
        w.add_image("img/gray", _t(lib, gray), 0)
        w.add_image("img/rgba", rgba, 0, dataformats="HWC")
        w.add_image("img/hw", _t(lib, hw), 0, dataformats="HW")
        w.add_image("img/wh", _t(lib, hw.T.copy()), 0, dataformats="WH")
        w.add_images("imgs/nchw", _t(lib, batch), 1)
        w.add_images("imgs/nhwc", _t(lib, nhwc), 1, dataformats="NHWC")
    got = _compare_with_torch(tmp_path, log)
    acc = _accumulator(got)
    assert (acc.Images("imgs/nchw")[0].width, acc.Images("imgs/nchw")[0].height) == (8 * 5, 2 * 4)
    assert acc.Images("img/rgba")[0].encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"
    import io
    from PIL import Image as PIL
    decoded = np.asarray(PIL.open(io.BytesIO(acc.Images("img/hwc_uint8")[0].encoded_image_string)))
    np.testing.assert_array_equal(decoded, hwc8)


def test_text_custom_scalars_audio_match_torch(tmp_path, rng):
    wave = rng.uniform(-1, 1, size=200)

    def log(w, lib):
        w.add_text("notes", "hello **ember** \u00e9", 0)
        w.add_text("notes", "second", 1)
        w.add_custom_scalars({"Losses": {"both": ["Multiline", ["loss/a", "loss/b"]],
                                         "band": ["Margin", ["m", "lo", "hi"]]}})
        w.add_custom_scalars_multilinechart(["x", "y"], category="cat", title="t")
        w.add_custom_scalars_marginchart(["v", "l", "u"])
        w.add_audio("sound", _t(lib, wave), 2, sample_rate=8000)
    got = _compare_with_torch(tmp_path, log)
    acc = _accumulator(got)
    assert "notes/text_summary" in acc.Tags()["tensors"]
    assert acc.Audio("sound")[0].sample_rate == 8000


def test_hparams_match_torch(tmp_path, rng):
    lr = float(rng.random())

    def log(w, lib):
        w.add_hparams({"lr": lr, "bs": 16, "opt": "adam", "flag": True, "skip": None,
                       "t": _t(lib, np.array([0.25]))},
                      {"hparam/acc": float(rng_metric), "hparam/loss": _t(lib, np.array(0.5))},
                      hparam_domain_discrete={"opt": ["adam", "sgd"], "bs": [16, 32]},
                      run_name="trial", global_step=3)

    rng_metric = rng.random()
    got = _compare_with_torch(tmp_path, log)
    from tensorboard.plugins.hparams import plugin_data_pb2
    acc = _accumulator(os.path.join(got, "trial"))
    start = acc.summary_metadata["_hparams_/session_start_info"].plugin_data.content
    info = plugin_data_pb2.HParamsPluginData.FromString(start).session_start_info
    assert info.hparams["lr"].number_value == lr and info.hparams["opt"].string_value == "adam"
    assert "skip" not in info.hparams
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    multiplexer = plugin_event_multiplexer.EventMultiplexer().AddRunsFromDirectory(got)
    multiplexer.Reload()
    assert sorted(multiplexer.Runs()) == [".", "trial"]
    assert set(multiplexer.PluginRunToTagToContent("hparams")["trial"]) == {
        "_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}


def test_pr_curves_match_torch(tmp_path, rng):
    labels = rng.integers(0, 2, size=50)
    preds = rng.random(50).astype(np.float32)
    weights = rng.random(50)

    def log(w, lib):
        w.add_pr_curve("pr/plain", _t(lib, labels), _t(lib, preds), 0)
        w.add_pr_curve("pr/weighted", labels, preds, 1, num_thresholds=11, weights=weights)
        w.add_pr_curve("pr/weighted_tensor", _t(lib, labels), _t(lib, preds), 1, weights=_t(lib, weights)
                       if lib is ember else weights)          # torch's takes numpy weights only
        w.add_pr_curve("pr/capped", _t(lib, labels), _t(lib, preds), 2, num_thresholds=500)
        rows = rng_rows
        w.add_pr_curve_raw("pr/raw", *[_t(lib, r) for r in rows], global_step=3, num_thresholds=4)

    rng_rows = [rng.random(4) for _ in range(6)]
    _compare_with_torch(tmp_path, log)


def test_embeddings_match_torch(tmp_path, rng):
    pytest.importorskip("PIL")           # the sprite is a PNG
    mat = rng.normal(size=(7, 4)).astype(np.float32)
    labels = [f"p{i}" for i in range(7)]
    table = [[f"p{i}", i % 3] for i in range(7)]
    sprites = rng.random((7, 3, 5, 5)).astype(np.float32)

    def log(w, lib):
        w.add_embedding(_t(lib, mat), metadata=labels, label_img=_t(lib, sprites), global_step=2)
        w.add_embedding(_t(lib, mat.astype(np.float64)), metadata=table, metadata_header=["name", "cls"],
                        tag="a/b%c", global_step=2)
        w.add_embedding(_t(lib, (mat * 10).astype(np.int64)))
    got = _compare_with_torch(tmp_path, log)
    assert os.path.isfile(os.path.join(got, "00002", "a%2fb%25c", "tensors.tsv"))


def test_default_log_dir_and_get_logdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    try:
        assert re.fullmatch(r"runs/[A-Z][a-z]{2}\d\d_\d\d-\d\d-\d\d_.+_exp", w.get_logdir())
        import socket
        assert w.get_logdir().endswith("_" + socket.gethostname() + "_exp")
        assert os.path.isdir(w.get_logdir())
    finally:
        w.close()
    w.close()          # closing twice is harmless


class _Residual(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ember.nn.Linear(3, 3)

    def forward(self, x):
        return ember.nn.functional.gelu(self.inner(x)) + x


def test_graph_of_fx_trace_loads_in_tensorboard(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU(), _Residual(), ember.nn.Linear(3, 2))
    with SummaryWriter(str(tmp_path)) as w:
        w.add_graph(model, ember.randn(5, 4))
    acc = _accumulator(str(tmp_path))
    graph = acc.Graph()
    ops = [n.op for n in graph.node]
    assert ops.count("Linear") == 3 and "ReLU" in ops and ops.count("IO Node") == 2
    by_name = {n.name: n for n in graph.node}
    linear = [n for n in graph.node if n.op == "Linear"][2]
    assert [d.size for d in linear.attr["_output_shapes"].list.shape[0].dim] == [5, 2]
    assert all(i in by_name for n in graph.node for i in n.input)
    # ops of an inlined submodule's forward sit in that submodule's scope
    assert {n.op for n in graph.node if n.name.startswith("Sequential/2/")} == {"Linear", "gelu", "add"}
    assert acc.RunMetadata("step1") is not None


def test_unsupported_and_bad_input_errors(tmp_path):
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ValueError, match="exactly one element"):
            w.add_scalar("x", ember.ones(3))
        with pytest.raises(ValueError, match="dataformats 'HWC' names 3 dimensions but the image tensor has 2"):
            w.add_image("x", ember.rand(4, 4), dataformats="HWC")
        with pytest.raises(ValueError, match="each dimension letter may appear once"):
            w.add_image("x", ember.rand(4, 4), dataformats="HH")
        with pytest.raises(NotImplementedError, match="numpy array or ember tensor"):
            w.add_histogram("x", [1.0, 2.0])
        with pytest.raises(TypeError, match="hparam_dict and metric_dict should be dictionary"):
            w.add_hparams([1], {})
        with pytest.raises(ValueError, match="len\\(bucket_limits\\) != len\\(bucket_counts\\)"):
            w.add_histogram_raw("x", 0, 1, 1, 1, 1, [1.0, 2.0], [1])
        try:
            import moviepy  # noqa: F401
        except ImportError:
            with pytest.raises(ModuleNotFoundError, match="add_video needs the 'moviepy' package"):
                w.add_video("x", ember.rand(1, 2, 3, 4, 4))
        with pytest.raises(ValueError, match="unsupported tensor dtype"):
            w.add_tensor("x", ember.ones(2, dtype=ember.uint16))
        with pytest.raises(ValueError, match=r"box_tensor must be \(N, 4\)"):
            w.add_image_with_boxes("x", ember.rand(3, 8, 8), ember.rand(4))
        with pytest.raises(ValueError, match="meta"):
            w.add_scalar("x", ember.empty(1, device="meta"))
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            with pytest.raises(ModuleNotFoundError, match="add_figure needs the 'matplotlib' package"):
                w.add_figure("fig", object())


def test_import_without_tensorboard_names_it(monkeypatch):
    saved = {k: v for k, v in sys.modules.items() if k.startswith("ember.utils.tensorboard")}
    for k in saved:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    try:
        with pytest.raises(ModuleNotFoundError, match="requires the 'tensorboard' package"):
            import ember.utils.tensorboard  # noqa: F401
    finally:
        for k in [k for k in sys.modules if k.startswith("ember.utils.tensorboard")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_tensors_meshes_boxes_match_torch(tmp_path, rng):
    pytest.importorskip("PIL")
    arrays = [rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=4),
              rng.integers(-9, 9, size=(3, 1)).astype(np.int32), rng.integers(-9, 9, size=5),
              rng.random(3) > 0.5, (rng.normal(size=2) + 1j * rng.normal(size=2)).astype(np.complex64)]
    vertices = rng.normal(size=(1, 6, 3)).astype(np.float32)
    colors = rng.integers(0, 256, size=(1, 6, 3)).astype(np.uint8)
    faces = rng.integers(0, 6, size=(1, 4, 3)).astype(np.int32)
    img = rng.random((3, 40, 50)).astype(np.float32)
    boxes = np.array([[2, 3, 20, 30], [10, 5, 45, 35]], dtype=np.float32) + rng.integers(0, 3, size=(2, 4))

    def log(w, lib):
        for i, a in enumerate(arrays):
            w.add_tensor(f"t/{i}", _t(lib, a), i)
        w.add_mesh("cloud", _t(lib, vertices), colors=_t(lib, colors), faces=_t(lib, faces),
                   config_dict={"camera": {"cls": "PerspectiveCamera", "fov": 75}}, global_step=1)
        w.add_mesh("points", _t(lib, vertices))
        w.add_image_with_boxes("boxed", _t(lib, img), _t(lib, boxes), 2, labels=["cat", "dog"])
        w.add_image_with_boxes("boxed_plain", _t(lib, img), _t(lib, boxes), 3, rescale=2)
    _compare_with_torch(tmp_path, log)


def test_add_tensor_round_trips_every_dtype(tmp_path, rng):
    from tensorboard.util import tensor_util
    cases = {"float16": ember.float16, "bfloat16": ember.bfloat16, "uint8": ember.uint8, "int8": ember.int8,
             "int16": ember.int16, "float64": ember.float64, "bool": ember.bool, "complex128": ember.complex128}
    tensors = {name: ember.from_numpy(rng.normal(size=(2, 3)) * 50).to(dtype) for name, dtype in cases.items()}
    with SummaryWriter(str(tmp_path)) as w:
        for name, t in tensors.items():
            w.add_tensor(name, t, 0)
    acc = _accumulator(str(tmp_path))
    for name, t in tensors.items():
        proto = acc.Tensors(name)[0].tensor_proto
        if name == "bfloat16":            # tensorboard's make_ndarray has no numpy bfloat16: decode the bits
            bits = np.array(proto.half_val, dtype=np.uint32) << 16
            back, want = bits.view(np.float32).reshape(2, 3), t.to(ember.float32).numpy()
        else:
            back, want = tensor_util.make_ndarray(proto), t.numpy()
        np.testing.assert_array_equal(back.astype(want.dtype), want, err_msg=name)


def test_onnx_graph_matches_torch(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from torch.utils.tensorboard._onnx_graph import load_onnx_graph as torch_load
    from ember.utils.tensorboard._onnx_graph import load_onnx_graph
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph), path)
    assert load_onnx_graph(path) == torch_load(path)
    capsys.readouterr()                       # torch's loader prints node names; ember's does not
    with SummaryWriter(str(tmp_path / "run")) as w:
        w.add_onnx_graph(path)
    assert capsys.readouterr().out == ""
    assert [n.op for n in _accumulator(str(tmp_path / "run")).Graph().node][-3:] == ["MatMul", "Relu", "Softmax"]


def test_video_layout_matches_torch(rng):
    pytest.importorskip("torch")
    from torch.utils.tensorboard._utils import _prepare_video
    from ember.utils.tensorboard._summary import video_frames
    for batch in (1, 3, 4, 6):
        v = rng.random((batch, 2, 3, 4, 5)).astype(np.float32)
        np.testing.assert_array_equal(video_frames(v), _prepare_video(v))
    v8 = rng.integers(0, 256, size=(5, 2, 1, 3, 3), dtype=np.uint8)
    np.testing.assert_array_equal(video_frames(v8), _prepare_video(v8))


def test_graph_falls_back_to_export(tmp_path):
    class Branchy(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = ember.nn.Linear(4, 3)

        def forward(self, x):
            if x.shape[0] > 1:             # symbolic_trace cannot branch on a traced size; export can
                return self.proj(x).relu()
            return self.proj(x)

    with pytest.raises(NotImplementedError, match="pass input_to_model so ember.export"):
        SummaryWriter(str(tmp_path / "none")).add_graph(Branchy())
    with SummaryWriter(str(tmp_path)) as w:
        w.add_graph(Branchy(), [ember.randn(2, 4)])
    nodes = {n.name: n for n in _accumulator(str(tmp_path)).Graph().node}
    assert "Branchy/proj/weight" in nodes and "input/x" in nodes
    relu = [n for n in nodes.values() if n.op == "aten::relu"]
    assert len(relu) == 1 and [d.size for d in relu[0].attr["_output_shapes"].list.shape[0].dim] == [2, 3]
    # (export keeps linear whole, as torch's training IR; torch's traced graphs say aten::linear too)
    assert any(n.op == "aten::linear" and n.name.startswith("Branchy/proj/") for n in nodes.values())


def test_images_without_pillow_name_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with SummaryWriter(str(tmp_path)) as w:
        with pytest.raises(ModuleNotFoundError, match="add_image needs the 'pillow' package"):
            w.add_image("x", ember.rand(3, 4, 4))
        w.add_scalar("still_fine", 1.0, 0)      # only image summaries need Pillow
