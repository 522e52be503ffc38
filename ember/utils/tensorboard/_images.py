"""Image layout conversion and PNG encoding for add_image / add_images / add_figure / embedding sprites.

Layouts follow torch.utils.tensorboard: any permutation of HW, HWC or NCHW; one-channel images become
three-channel grey; a batch is tiled into a grid (8 columns unless told).  PNG encoding needs Pillow
(as torch's does); only the image summaries need it, so it is imported when an image is encoded."""
import io

import numpy as np


def _require_pillow(what):
    try:
        from PIL import Image
    except ImportError as e:
        raise ModuleNotFoundError(
            f"ember.utils.tensorboard: {what} needs the 'pillow' package to encode PNG images: pip install pillow",
            name="PIL") from e
    return Image


def make_grid(images, ncols=8):
    """Tile an N1HW or N3HW array into one 3HW canvas, row by row, ``ncols`` images a row."""
    if not isinstance(images, np.ndarray):
        raise TypeError(f"make_grid: expected a numpy array, got {type(images).__name__}")
    if images.ndim == 4 and images.shape[1] == 1:
        images = np.concatenate([images] * 3, axis=1)
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"make_grid: expected N1HW or N3HW images, got shape {tuple(images.shape)}")
    count, _, height, width = images.shape
    ncols = min(count, ncols)
    nrows = -(-count // ncols) if count else 0
    canvas = np.zeros((3, height * nrows, width * ncols), dtype=images.dtype)
    for i in range(count):
        row, col = divmod(i, ncols)
        canvas[:, row * height:(row + 1) * height, col * width:(col + 1) * width] = images[i]
    return canvas


def convert_to_hwc(array, dataformats):
    """``array`` laid out as ``dataformats`` (e.g. 'CHW', 'HWC', 'HW', 'NCHW', 'NHWC') -> an HWC array."""
    if not isinstance(dataformats, str):
        raise TypeError(f"dataformats: expected a string such as 'CHW', got {type(dataformats).__name__}")
    layout = dataformats.upper()
    if len(set(layout)) != len(layout):
        raise ValueError(f"dataformats: each dimension letter may appear once, got {dataformats!r}")
    if array.ndim != len(layout):
        raise ValueError(f"dataformats {dataformats!r} names {len(layout)} dimensions but the image tensor has "
                         f"{array.ndim} (shape {tuple(array.shape)})")
    wanted = {4: "NCHW", 3: "HWC", 2: "HW"}.get(len(layout))
    if wanted is None or set(layout) != set(wanted):
        raise ValueError(f"dataformats: expected a permutation of HW, HWC or NCHW, got {dataformats!r}")
    moved = array.transpose([layout.index(c) for c in wanted])
    if wanted == "NCHW":
        return make_grid(moved).transpose(1, 2, 0)
    if wanted == "HWC":
        return np.concatenate([moved] * 3, axis=2) if moved.shape[2] == 1 else moved
    return np.stack([moved] * 3, axis=2)


def to_uint8(hwc):
    """uint8 images are taken as 0..255, anything else as 0..1 (scaled by 255); out-of-range is clipped."""
    scale = 1 if hwc.dtype == np.uint8 else 255
    return (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def encode_png(hwc_uint8, rescale=1, what="add_image"):
    """(PNG bytes, height, width, channels) of an HWC uint8 image, resized by ``rescale`` (Lanczos) first."""
    Image = _require_pillow(what)
    height, width, channels = hwc_uint8.shape
    picture = Image.fromarray(hwc_uint8)
    picture = picture.resize((int(width * rescale), int(height * rescale)), Image.Resampling.LANCZOS)
    with io.BytesIO() as buffer:
        picture.save(buffer, format="PNG")
        return buffer.getvalue(), height, width, channels


def figure_to_chw(figures, close=True):
    """Render matplotlib figure(s) to a CHW (or NCHW, for a list) uint8 RGB array."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError as e:
        raise ModuleNotFoundError("ember.utils.tensorboard: add_figure needs the 'matplotlib' package: "
                                  "pip install matplotlib", name="matplotlib") from e

    def render(figure):
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        width, height = figure.canvas.get_width_height()
        rgba = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(height, width, 4)
        if close:
            plt.close(figure)
        return np.moveaxis(rgba[:, :, :3], 2, 0)

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)
