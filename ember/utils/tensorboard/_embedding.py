"""Files of TensorBoard's embedding projector: tensors.tsv, metadata.tsv, sprite.png, projector_config.pbtxt.

Paths go through tensorboard's gfile so remote log dirs (gs://, s3://) work where tensorboard supports them."""
import math

import numpy as np
from tensorboard.compat import tf
from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

from ._convert import make_np
from ._images import encode_png, make_grid


def join(directory, name):
    gfile = tf.io.gfile
    if hasattr(gfile, "join"):
        return gfile.join(directory, name)
    return gfile.get_filesystem(directory).join(directory, name)


def _write(path, data):
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(data)


def write_metadata(metadata, save_path, metadata_header=None):
    """One label a line, or, with a header, tab-separated columns under the header line."""
    if not metadata_header:
        lines = [str(x) for x in metadata]
    else:
        if len(metadata_header) != len(metadata[0]):
            raise ValueError(f"add_embedding: metadata_header has {len(metadata_header)} columns but each "
                             f"metadata row has {len(metadata[0])}")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
    _write(join(save_path, "metadata.tsv"), ("\n".join(lines) + "\n").encode("utf-8"))


def write_sprite(label_img, save_path):
    """All label images (NCHW, values in 0..1) on one square grid, ceil(sqrt(N)) a row."""
    images = make_np(label_img)
    per_row = math.ceil(images.shape[0] ** 0.5)
    grid = make_grid(images, ncols=per_row).transpose(1, 2, 0)
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[:grid.shape[0]] = grid
    png, _, _, _ = encode_png(np.uint8((square * 255).clip(0, 255)), what="add_embedding(label_img=...)")
    _write(join(save_path, "sprite.png"), png)


def write_tensors(mat, save_path):
    """Each row a line of tab-separated values, each written as Python prints the element."""
    lines = ["\t".join(str(v.item()) for v in row) + "\n" for row in mat]
    _write(join(save_path, "tensors.tsv"), "".join(lines).encode("utf-8"))


def embedding_info(metadata, label_img, subdir, global_step, tag):
    info = EmbeddingInfo()
    info.tensor_name = f"{tag}:{str(global_step).zfill(5)}"
    info.tensor_path = join(subdir, "tensors.tsv")
    if metadata is not None:
        info.metadata_path = join(subdir, "metadata.tsv")
    if label_img is not None:
        info.sprite.image_path = join(subdir, "sprite.png")
        info.sprite.single_image_dim.extend([int(label_img.shape[3]), int(label_img.shape[2])])
    return info


def write_config(log_dir, config_text):
    _write(join(log_dir, "projector_config.pbtxt"), config_text.encode("utf-8"))
