"""ember.utils.tensorboard: ``SummaryWriter`` logging to TensorBoard event files, as torch.utils.tensorboard.

The ``tensorboard`` package is required (``pip install tensorboard`` or ``ember[tensorboard]``): it owns
the event-file format (CRC-framed TFRecords) and the protobuf schemas of every plugin, which ember uses
rather than re-implements.  Importing this module without it raises an ImportError that names it.
"""
try:
    import tensorboard as _tensorboard
except ImportError as _e:  # the message says what to install; the cause stays attached
    raise ModuleNotFoundError(
        "ember.utils.tensorboard requires the 'tensorboard' package (its event-file writer and protobuf "
        "schemas): pip install tensorboard  (or pip install 'ember[tensorboard]')", name="tensorboard") from _e


def _version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


if _version_tuple(getattr(_tensorboard, "__version__", "0")) < (1, 15):
    raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above")
del _tensorboard

from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: E402

from .writer import FileWriter, SummaryWriter  # noqa: E402

__all__ = ["FileWriter", "RecordWriter", "SummaryWriter"]
