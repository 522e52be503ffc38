"""SummaryWriter and FileWriter: torch.utils.tensorboard's logging API over ember tensors.

FileWriter turns summaries into Events and hands them to tensorboard's EventFileWriter (a background
thread appending to ``events.out.tfevents.<time>.<host>...``).  SummaryWriter owns one FileWriter for its
log dir, plus one per ``add_scalars`` series, and builds summaries with _summary."""
import os
import time
import warnings

from tensorboard.compat import tf
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import _embedding, _summary
from ._convert import make_np
from ._images import figure_to_chw

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """Writes Events to one event file in ``log_dir`` (asynchronously: queued up to ``max_queue`` events,
    flushed every ``flush_secs``)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(event_pb2.Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None):
        graph_def, run_metadata = graph_profile
        self.add_event(event_pb2.Event(graph_def=graph_def.SerializeToString()), None, walltime)
        tagged = event_pb2.TaggedRunMetadata(tag="step1", run_metadata=run_metadata.SerializeToString())
        self.add_event(event_pb2.Event(tagged_run_metadata=tagged), None, walltime)

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()

    def reopen(self):
        self.event_writer.reopen()


class SummaryWriter:
    """Logs scalars, histograms, images, text, hyperparameters, PR curves, embeddings and graphs for
    TensorBoard, with torch.utils.tensorboard.SummaryWriter's signature and file layout.

    ``log_dir`` defaults to ``runs/<Mon><DD>_<HH>-<MM>-<SS>_<hostname><comment>``.  With ``purge_step``,
    TensorBoard discards events of earlier runs in this log dir at steps >= purge_step (a restart after a
    crash).  Usable as a context manager (closes on exit)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            import socket
            from datetime import datetime
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        self.default_bins = _summary.default_bins()

    def _get_file_writer(self):
        """The main FileWriter, reopened after close() (so a closed writer can keep logging, as torch's)."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step = self.purge_step
                self.file_writer.add_event(Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    def _write(self, summary, global_step=None, walltime=None):
        self._get_file_writer().add_summary(summary, global_step, walltime)

    # --- scalars ---------------------------------------------------------------------------------------

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        self._write(_summary.scalar(tag, scalar_value, new_style=new_style, double_precision=double_precision),
                    global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Each key a run of its own: ``<log_dir>/<main_tag with / as _>_<key>``, all under tag ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            run_dir = base + "/" + main_tag.replace("/", "_") + "_" + tag
            writer = self.all_writers.get(run_dir)
            if writer is None:
                writer = FileWriter(run_dir, self.max_queue, self.flush_secs, self.filename_suffix)
                self.all_writers[run_dir] = writer
            writer.add_summary(_summary.scalar(main_tag, value), global_step, walltime)

    def add_custom_scalars(self, layout):
        self._write(_summary.custom_scalars(layout))

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        self._write(_summary.custom_scalars({category: {title: ["Multiline", tags]}}))

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        if len(tags) != 3:
            raise ValueError(f"Expected 3 tags, got {len(tags)}.")
        self._write(_summary.custom_scalars({category: {title: ["Margin", tags]}}))

    # --- histograms ------------------------------------------------------------------------------------

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """``bins``: 'tensorflow' (TensorBoard's exponential default edges) or anything np.histogram takes."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._write(_summary.histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,
                          global_step=None, walltime=None):
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        self._write(_summary.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts),
                    global_step, walltime)

    # --- images, audio ---------------------------------------------------------------------------------

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """float images are read as 0..1, uint8 as 0..255; 'CHW', 'HWC' or 'HW' (any order of the letters)."""
        self._write(_summary.image(tag, img_tensor, dataformats=dataformats, what="add_image"),
                    global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch tiled into one grid image, 8 a row."""
        self._write(_summary.image(tag, img_tensor, dataformats=dataformats, what="add_images"),
                    global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them, as a grid); needs matplotlib."""
        layout = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, figure_to_chw(figure, close), global_step, walltime, dataformats=layout)

    def add_image_with_boxes(self, tag, img_tensor, box_tensor, global_step=None, walltime=None, rescale=1,
                             dataformats="CHW", labels=None):
        """Boxes: (N, 4) rows of xmin, ymin, xmax, ymax in pixels; ``labels``: a str or one per box."""
        if labels is not None:
            if isinstance(labels, str):
                labels = [labels]
            if len(labels) != box_tensor.shape[0]:
                warnings.warn(f"add_image_with_boxes: {len(labels)} labels for {box_tensor.shape[0]} boxes; "
                              "the labels are left out (as torch does)")
                labels = None
        self._write(_summary.image_boxes(tag, img_tensor, box_tensor, rescale=rescale, dataformats=dataformats,
                                         labels=labels), global_step, walltime)

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None):
        """(N, T, C, H, W) videos as one GIF (the batch tiled into a grid); needs moviepy."""
        self._write(_summary.video(tag, vid_tensor, fps), global_step, walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        self._write(_summary.audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    def add_mesh(self, tag, vertices, colors=None, faces=None, config_dict=None, global_step=None, walltime=None):
        """Point clouds / meshes: (B, N, 3) vertices, optional (B, N, 3) colors and (B, F, 3) faces."""
        self._write(_summary.mesh(tag, vertices, colors, faces, config_dict), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        self._write(_summary.tensor_proto(tag, tensor), global_step, walltime)

    def add_onnx_graph(self, prototxt):
        """The graph of an ONNX model file (e.g. written by ember.onnx.export); needs onnx."""
        from ._onnx_graph import load_onnx_graph
        graph_def = load_onnx_graph(prototxt)
        self._get_file_writer().add_event(event_pb2.Event(graph_def=graph_def.SerializeToString()))

    # --- text, hparams, pr curves ----------------------------------------------------------------------

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        self._write(_summary.text(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """One hparams session in the sub-run ``run_name`` (default: the current time), with each metric
        logged there as a scalar so the hparams dashboard can show it."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        experiment, start, end = _summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        run_dir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=run_dir) as run:
            for summary in (experiment, start, end):
                run.file_writer.add_summary(summary, global_step)
            for key, value in metric_dict.items():
                run.add_scalar(key, value, global_step)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127, weights=None,
                     walltime=None):
        labels, predictions = make_np(labels), make_np(predictions)
        if weights is not None and not isinstance(weights, (int, float)):
            weights = make_np(weights)
        self._write(_summary.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts, true_negative_counts,
                         false_negative_counts, precision, recall, global_step=None, num_thresholds=127,
                         weights=None, walltime=None):
        self._write(_summary.pr_curve_raw(tag, true_positive_counts, false_positive_counts, true_negative_counts,
                                          false_negative_counts, precision, recall, num_thresholds),
                    global_step, walltime)

    # --- graph, embeddings -----------------------------------------------------------------------------

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """The model's ember.fx graph (torch records a JIT trace; ember has none, so ``use_strict_trace`` has
        no effect); ``input_to_model`` adds shapes and lets ember.export capture what fx cannot."""
        from ._graph import graph
        self._get_file_writer().add_graph(graph(model, input_to_model, verbose=verbose))

    @staticmethod
    def _encode(rawstr):
        """Escape '%', '/' and '\\' so an embedding tag is one directory name."""
        return rawstr.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        """Files for the projector under ``<log_dir>/<step:05d>/<tag>/`` and an entry in projector_config.pbtxt."""
        mat = make_np(mat)
        if global_step is None:
            global_step = 0
        subdir = f"{str(global_step).zfill(5)}/{self._encode(tag)}"
        save_path = os.path.join(self._get_file_writer().get_logdir(), subdir)
        gfile = tf.io.gfile
        if gfile.exists(save_path):
            if not gfile.isdir(save_path):
                raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        else:
            gfile.makedirs(save_path)
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise ValueError(f"add_embedding: metadata has {len(metadata)} labels but mat has "
                                 f"{mat.shape[0]} data points")
            _embedding.write_metadata(metadata, save_path, metadata_header=metadata_header)
        if label_img is not None:
            if mat.shape[0] != label_img.shape[0]:
                raise ValueError(f"add_embedding: label_img has {label_img.shape[0]} images but mat has "
                                 f"{mat.shape[0]} data points")
            _embedding.write_sprite(label_img, save_path)
        if mat.ndim != 2:
            raise ValueError(f"add_embedding: mat should be 2D (data points x features), got {mat.ndim}D")
        _embedding.write_tensors(mat, save_path)
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend(
            [_embedding.embedding_info(metadata, label_img, subdir, global_step, tag)])
        from google.protobuf import text_format
        _embedding.write_config(self._get_file_writer().get_logdir(),
                                text_format.MessageToString(self._projector_config))

    # --- lifetime --------------------------------------------------------------------------------------

    def flush(self):
        """Write pending events of every run to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self):
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
