"""Builders of ``Summary`` protobufs, one per kind of logged data, in the layouts TensorBoard's plugins read.

Each takes numpy-convertible input (see _convert.make_np) and returns a tensorboard ``Summary`` (or, for
hparams, the three summaries of an experiment) that FileWriter.add_summary wraps in an Event."""
import numpy as np
from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto

from ._convert import make_np
from ._images import convert_to_hwc, encode_png, to_uint8


def _plugin_metadata(plugin_name, content=b""):
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin_name, content=content))


def _shape(*sizes):
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(s)) for s in sizes])


# --- scalars -------------------------------------------------------------------------------------------

def scalar(tag, value, new_style=False, double_precision=False):
    """Old style: ``simple_value`` (float32).  New style: a tensor for the 'scalars' plugin, float32 or,
    with double_precision, float64."""
    array = make_np(value).squeeze()
    if array.ndim != 0:
        raise ValueError(f"add_scalar: scalar_value must hold exactly one element, got {array.size} "
                         f"element(s) in {array.ndim} dimension(s)")
    number = float(array)
    if not new_style:
        return Summary(value=[Summary.Value(tag=tag, simple_value=number)])
    if double_precision:
        tensor = TensorProto(dtype="DT_DOUBLE", double_val=[number])
    else:
        tensor = TensorProto(dtype="DT_FLOAT", float_val=[number])
    return Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=_plugin_metadata("scalars"))])


# --- histograms ----------------------------------------------------------------------------------------

def default_bins():
    """TensorFlow's default histogram edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    positive = []
    edge = 1e-12
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    return [-e for e in reversed(positive)] + [0] + positive


def histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    histo = HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                           bucket_limit=bucket_limits, bucket=bucket_counts)
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


def _merge_bins(counts, edges, max_bins):
    """Sum groups of adjacent bins so at most about ``max_bins`` remain (the last group zero-padded)."""
    group = len(counts) // max_bins
    padding = (-len(counts)) % group
    if padding:
        counts = np.concatenate([counts, np.zeros(padding, dtype=counts.dtype)])
    merged = counts.reshape(-1, group).sum(axis=1)
    merged_edges = np.empty(merged.size + 1, dtype=edges.dtype)
    merged_edges[:-1] = edges[:-1:group]
    merged_edges[-1] = edges[-1]
    return merged, merged_edges


def make_histogram(values, bins, max_bins=None):
    """HistogramProto of ``values`` over ``bins`` (anything np.histogram takes).  Only the buckets from one
    empty bucket before the first occupied one to the last occupied one are kept, as TensorBoard expects
    (bucket_limit holds each bucket's upper edge)."""
    if values.size == 0:
        raise ValueError("add_histogram: values has no element.")
    values = values.reshape(-1)
    counts, edges = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        counts, edges = _merge_bins(counts, edges, max_bins)
    occupied = np.flatnonzero(counts)
    if occupied.size == 0:
        raise ValueError("add_histogram: no value falls inside the given bins "
                         f"[{edges[0]}, {edges[-1]}]")
    first, last = int(occupied[0]), int(occupied[-1])
    if first > 0:
        kept_counts = counts[first - 1:last + 1]
    else:
        kept_counts = np.concatenate([[0], counts[:last + 1]])
    kept_limits = edges[first:last + 2]
    return HistogramProto(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                          sum_squares=values.dot(values), bucket_limit=kept_limits.tolist(),
                          bucket=kept_counts.tolist())


def histogram(tag, values, bins, max_bins=None):
    histo = make_histogram(make_np(values).astype(float), bins, max_bins)
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


# --- images --------------------------------------------------------------------------------------------

def image(tag, img, rescale=1, dataformats="NCHW", what="add_image"):
    hwc = to_uint8(convert_to_hwc(make_np(img), dataformats))
    png, height, width, channels = encode_png(hwc, rescale=rescale, what=what)
    picture = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
    return Summary(value=[Summary.Value(tag=tag, image=picture)])


# --- text ----------------------------------------------------------------------------------------------

def text(tag, text_string):
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
    if not isinstance(text_string, str):
        raise TypeError(f"add_text: text_string must be a str, got {type(text_string).__name__}")
    tensor = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")], tensor_shape=_shape(1))
    metadata = _plugin_metadata("text", TextPluginData(version=0).SerializeToString())
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=metadata, tensor=tensor)])


# --- hparams -------------------------------------------------------------------------------------------

def _hparams_summary(tag, **content):
    from tensorboard.plugins.hparams.metadata import PLUGIN_DATA_VERSION, PLUGIN_NAME
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    data = HParamsPluginData(version=PLUGIN_DATA_VERSION, **content)
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata(PLUGIN_NAME, data.SerializeToString()))])


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """(experiment, session-start, session-end) summaries.  As in torch, bools count as numbers (they are
    ints), tensors must hold one number, and None values are skipped."""
    from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, MetricInfo, MetricName, Status
    from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG, SESSION_END_INFO_TAG, SESSION_START_INFO_TAG
    from tensorboard.plugins.hparams.plugin_data_pb2 import SessionEndInfo, SessionStartInfo
    from ember.tensor import Tensor

    if not isinstance(hparam_dict, dict):
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for key, choices in domains.items():
        if (key not in hparam_dict or not isinstance(choices, list)
                or not all(isinstance(c, type(hparam_dict[key])) for c in choices)):
            raise TypeError(f"parameter: hparam_domain_discrete[{key}] should be a list of same type as "
                            f"hparam_dict[{key}].")

    infos = []
    start = SessionStartInfo()
    for key, value in hparam_dict.items():
        if value is None:
            continue
        if isinstance(value, Tensor):
            array = make_np(value).reshape(-1)
            if array.size != 1:
                raise ValueError(f"add_hparams: hparam_dict[{key!r}] is a tensor of {array.size} elements; "
                                 "a tensor hyperparameter must hold exactly one")
            start.hparams[key].number_value = float(array[0])
            infos.append(HParamInfo(name=key, type=DataType.Value("DATA_TYPE_FLOAT64")))
            continue
        if isinstance(value, (int, float)):
            field, kind = "number_value", "DATA_TYPE_FLOAT64"
        elif isinstance(value, str):
            field, kind = "string_value", "DATA_TYPE_STRING"
        else:
            raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
        setattr(start.hparams[key], field, value)
        domain = None
        if key in domains:
            domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: c}) for c in domains[key]])
        infos.append(HParamInfo(name=key, type=DataType.Value(kind), domain_discrete=domain))

    experiment = Experiment(hparam_infos=infos,
                            metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    return (_hparams_summary(EXPERIMENT_TAG, experiment=experiment),
            _hparams_summary(SESSION_START_INFO_TAG, session_start_info=start),
            _hparams_summary(SESSION_END_INFO_TAG,
                             session_end_info=SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))))


# --- precision-recall curves ---------------------------------------------------------------------------

def _pr_summary(tag, data, num_thresholds):
    from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    tensor = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(), tensor_shape=_shape(*data.shape))
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata("pr_curves", content), tensor=tensor)])


def compute_curve(labels, predictions, num_thresholds, weights=None):
    """Rows TP, FP, TN, FN, precision, recall at ``num_thresholds`` evenly spaced thresholds in [0, 1]:
    predictions are bucketed by floor(p * (num_thresholds - 1)); counts are cumulated from the top."""
    tiny = 1e-7
    weights = 1.0 if weights is None else weights
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    positive = labels.astype(np.float64)
    span = (0, num_thresholds - 1)
    tp_hist, _ = np.histogram(buckets, bins=num_thresholds, range=span, weights=positive * weights)
    fp_hist, _ = np.histogram(buckets, bins=num_thresholds, range=span, weights=(1.0 - positive) * weights)
    tp = np.cumsum(tp_hist[::-1])[::-1]
    fp = np.cumsum(fp_hist[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(tiny, tp + fp)
    recall = tp / np.maximum(tiny, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    num_thresholds = min(num_thresholds, 127)   # TensorBoard's plugin reads at most 127 thresholds
    return _pr_summary(tag, compute_curve(labels, predictions, num_thresholds, weights), num_thresholds)


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127):
    num_thresholds = min(num_thresholds, 127)
    data = np.stack([make_np(a) for a in (tp, fp, tn, fn, precision, recall)])
    return _pr_summary(tag, data, num_thresholds)


# --- custom scalars ------------------------------------------------------------------------------------

def custom_scalars(layout):
    """``layout``: {category: {chart title: ['Multiline', [tag regexes]] or ['Margin', [value, lower, upper]]}}."""
    from tensorboard.plugins.custom_scalar import layout_pb2
    if not isinstance(layout, dict):
        raise TypeError(f"add_custom_scalars: layout must be a dict of categories, got {type(layout).__name__}")
    categories = []
    for category, charts in layout.items():
        built = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise ValueError(f"add_custom_scalars: a Margin chart takes 3 tags (value, lower, upper), "
                                     f"chart {title!r} has {len(tags)}")
                series = layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1], upper=tags[2])
                built.append(layout_pb2.Chart(title=title, margin=layout_pb2.MarginChartContent(series=[series])))
            else:
                built.append(layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags)))
        categories.append(layout_pb2.Category(title=category, chart=built))
    tensor = TensorProto(dtype="DT_STRING", string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
                         tensor_shape=TensorShapeProto())
    return Summary(value=[Summary.Value(tag="custom_scalars__config__", tensor=tensor,
                                        metadata=_plugin_metadata("custom_scalars"))])


# --- audio ---------------------------------------------------------------------------------------------

def audio(tag, sound, sample_rate=44100):
    """Mono 16-bit WAV of a 1-D signal in [-1, 1] (louder input is clipped, with a warning)."""
    import wave
    import io
    import warnings
    array = make_np(sound).squeeze()
    if array.ndim != 1:
        raise ValueError(f"add_audio: snd_tensor must be 1-dimensional after squeezing, got shape {array.shape}")
    if np.abs(array).max() > 1:
        warnings.warn("add_audio: audio amplitude out of range [-1, 1], clipped")
        array = array.clip(-1, 1)
    samples = (array * np.iinfo(np.int16).max).astype("<i2")
    with io.BytesIO() as buffer:
        with wave.open(buffer, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            wav.writeframes(samples.tobytes())
        encoded = buffer.getvalue()
    clip = Summary.Audio(sample_rate=sample_rate, num_channels=1, length_frames=samples.shape[-1],
                         encoded_audio_string=encoded, content_type="audio/wav")
    return Summary(value=[Summary.Value(tag=tag, audio=clip)])


# --- raw tensors ---------------------------------------------------------------------------------------

def _half_bits(array):
    return array.view(np.uint16).reshape(-1).tolist()


def _complex_parts(array):
    return np.stack([array.real, array.imag], axis=-1).reshape(-1).tolist()


def _plain(array):
    return array.reshape(-1).tolist()


# ember dtype name -> (TensorProto dtype, field, converter).  Halves store their 16 bits in half_val and
# uint8 uses int_val, which is where tensorboard's make_ndarray reads them back from.
_TENSOR_FIELDS = {
    "float16": ("DT_HALF", "half_val", _half_bits),
    "bfloat16": ("DT_BFLOAT16", "half_val", _half_bits),
    "float32": ("DT_FLOAT", "float_val", _plain),
    "float64": ("DT_DOUBLE", "double_val", _plain),
    "int8": ("DT_INT8", "int_val", _plain),
    "uint8": ("DT_UINT8", "int_val", _plain),
    "int16": ("DT_INT16", "int_val", _plain),
    "int32": ("DT_INT32", "int_val", _plain),
    "int64": ("DT_INT64", "int64_val", _plain),
    "bool": ("DT_BOOL", "bool_val", _plain),
    "complex64": ("DT_COMPLEX64", "scomplex_val", _complex_parts),
    "complex128": ("DT_COMPLEX128", "dcomplex_val", _complex_parts),
}


def tensor_proto(tag, tensor):
    """The whole tensor, values and shape, for the 'tensor' plugin."""
    from ember.tensor import Tensor
    if isinstance(tensor, Tensor):
        dtype_name = str(tensor.dtype).rpartition(".")[2]
        array = tensor.detach().cpu().numpy()
    elif isinstance(tensor, np.ndarray):
        array = tensor
        dtype_name = "bfloat16" if array.dtype.name == "bfloat16" else array.dtype.name
    else:
        raise TypeError(f"add_tensor: tensor must be an ember tensor or numpy array, got {type(tensor).__name__}")
    if array.size * array.itemsize >= (1 << 31):
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    if dtype_name not in _TENSOR_FIELDS:
        raise ValueError(f"{tag} has unsupported tensor dtype {tensor.dtype}")
    kind, field, convert = _TENSOR_FIELDS[dtype_name]
    proto = TensorProto(dtype=kind, tensor_shape=_shape(*array.shape), **{field: convert(np.ascontiguousarray(array))})
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata("tensor"), tensor=proto)])


# --- images with boxes ---------------------------------------------------------------------------------

def _draw_box(picture, box, label):
    """A 2-pixel red rectangle, with ``label`` (if any) in black on a red band over its bottom edge."""
    from PIL import ImageDraw, ImageFont
    left, top, right, bottom = (float(v) for v in box[:4])
    draw = ImageDraw.Draw(picture)
    draw.line([(left, top), (left, bottom), (right, bottom), (right, top), (left, top)], width=2, fill="Red")
    if label:
        font = ImageFont.load_default()
        x0, y0, x1, y1 = font.getbbox(label)
        text_w, text_h = x1 - x0, y1 - y0
        margin = np.ceil(0.05 * text_h)
        draw.rectangle([(left, bottom - text_h - 2 * margin), (left + text_w, bottom)], fill="Red")
        draw.text((left + margin, bottom - text_h - margin), label, fill="black", font=font)


def image_boxes(tag, img, boxes, rescale=1, dataformats="CHW", labels=None):
    """One image with boxes given as rows (xmin, ymin, xmax, ymax) in pixels, drawn before rescaling."""
    import io
    from ._images import _require_pillow
    Image = _require_pillow("add_image_with_boxes")
    hwc = to_uint8(convert_to_hwc(make_np(img), dataformats))
    boxes = make_np(boxes)
    if boxes.ndim != 2 or boxes.shape[1] < 4:
        raise ValueError(f"add_image_with_boxes: box_tensor must be (N, 4) rows of xmin, ymin, xmax, ymax, "
                         f"got shape {tuple(boxes.shape)}")
    height, width, channels = hwc.shape
    picture = Image.fromarray(hwc)
    for i in range(boxes.shape[0]):
        _draw_box(picture, boxes[i], None if labels is None else labels[i])
    picture = picture.resize((int(width * rescale), int(height * rescale)), Image.Resampling.LANCZOS)
    with io.BytesIO() as buffer:
        picture.save(buffer, format="PNG")
        png = buffer.getvalue()
    encoded = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


# --- video ---------------------------------------------------------------------------------------------

def video_frames(batch):
    """(B, T, C, H, W) videos -> (T, rows*H, cols*W, C) float frames: the batch, padded with black videos
    to a power of two, tiled into a grid (rows = the largest power of two <= sqrt(B)).  uint8 -> 0..1."""
    b, t, c, h, w = batch.shape
    if batch.dtype == np.uint8:
        batch = np.float32(batch) / 255.0
    padded = 1 << (b - 1).bit_length() if b & (b - 1) else b
    if padded != b:
        batch = np.concatenate([batch, np.zeros((padded - b, t, c, h, w))], axis=0)
    rows = 2 ** ((b.bit_length() - 1) // 2)
    cols = batch.shape[0] // rows
    grid = batch.reshape(rows, cols, t, c, h, w).transpose(2, 0, 4, 1, 5, 3)
    return grid.reshape(t, rows * h, cols * w, c)


def video(tag, vid, fps=4):
    """An animated GIF of (B, T, C, H, W) videos, encoded by moviepy (as torch's add_video)."""
    import os
    import tempfile
    try:
        try:
            from moviepy import ImageSequenceClip          # moviepy >= 2
        except ImportError:
            from moviepy.editor import ImageSequenceClip   # moviepy 1.x
    except ImportError as e:
        raise ModuleNotFoundError("ember.utils.tensorboard: add_video needs the 'moviepy' package to encode "
                                  "GIFs: pip install moviepy", name="moviepy") from e
    array = make_np(vid)
    if array.ndim != 5:
        raise ValueError(f"add_video: vid_tensor must be (N, T, C, H, W), got shape {tuple(array.shape)}")
    frames = to_uint8(video_frames(array))
    t, h, w, c = frames.shape
    clip = ImageSequenceClip(list(frames), fps=fps)
    handle, path = tempfile.mkstemp(suffix=".gif")
    os.close(handle)
    try:
        try:
            clip.write_gif(path, logger=None)
        except TypeError:
            clip.write_gif(path)
        with open(path, "rb") as f:
            encoded = f.read()
    finally:
        os.remove(path)
    gif = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=encoded)
    return Summary(value=[Summary.Value(tag=tag, image=gif)])


# --- meshes --------------------------------------------------------------------------------------------

def mesh(tag, vertices, colors, faces, config_dict, display_name=None, description=None):
    """Point cloud / mesh for the mesh plugin: one tensor value each for vertices, faces and colors
    (those given), each (batch, count, 3), sharing a components bitmask and a ThreeJS JSON config."""
    import json
    from tensorboard.plugins.mesh import metadata
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData
    config = json.dumps(config_dict, sort_keys=True) if config_dict is not None else "{}"
    parts = [(a, kind) for a, kind in ((vertices, MeshPluginData.VERTEX), (faces, MeshPluginData.FACE),
                                       (colors, MeshPluginData.COLOR)) if a is not None]
    components = metadata.get_components_bitmask([kind for _, kind in parts])
    values = []
    for part, kind in parts:
        array = make_np(part)
        if array.ndim != 3:
            raise ValueError(f"add_mesh: vertices, faces and colors must be (batch, count, 3), got shape "
                             f"{tuple(array.shape)}")
        meta = metadata.create_summary_metadata(tag, display_name, kind, components, array.shape, description,
                                                json_config=config)
        proto = TensorProto(dtype="DT_FLOAT", float_val=array.reshape(-1).tolist(), tensor_shape=_shape(*array.shape))
        values.append(Summary.Value(tag=metadata.get_instance_name(tag, kind), tensor=proto, metadata=meta))
    return Summary(value=values)
