"""Top-level ``ember.<name>`` spellings of functional ops, with PyTorch's ATen signatures.

PyTorch exposes many ``torch.nn.functional`` ops a second time at the top level with their
ATen signatures: losses take ``reduction`` as an int (0 none, 1 mean, 2 sum), dropouts take
``train`` positionally, the max-pool-with-indices variants return both tensors,
``grid_sampler`` takes its modes as ints. Code written against those (often copied from
traced graphs or older repositories) runs under ``import ember as torch`` through these
thin adapters onto ember's functional ops; ``ember.__getattr__`` resolves them lazily.
"""
from __future__ import annotations

import numpy as np

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}
_GRID_INTERP = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PAD = {0: "zeros", 1: "border", 2: "reflection"}


def _F():
    from .nn import functional
    return functional


def _bool():
    from . import types
    return types.bool_


def _reduction(value, fn):
    if isinstance(value, str):
        return value
    if value not in _REDUCTION:
        raise ValueError(f"{fn}(): reduction must be 0 (none), 1 (mean) or 2 (sum), got {value!r}")
    return _REDUCTION[value]


def adaptive_avg_pool1d(input, output_size):
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    return _F().adaptive_max_pool1d(input, output_size, return_indices=True)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return _F().avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode, count_include_pad)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def constant_pad_nd(input, pad, value=0):
    return _F().pad(input, list(pad), mode="constant", value=value)


def pixel_shuffle(input, upscale_factor):
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    return _F().pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input, groups):
    return _F().channel_shuffle(input, groups)


def prelu(input, weight):
    return _F().prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _F().rrelu(input, lower, upper, training)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _F().rms_norm(input, normalized_shape, weight, eps)


def alpha_dropout(input, p, train):
    return _F().alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    return _F().feature_alpha_dropout(input, p, train)


def feature_dropout(input, p, train):
    """Whole channels (dim 1) zeroed with probability ``p``, the rest scaled by 1/(1-p)."""
    F = _F()
    if not train or p == 0:
        return input
    if input.dim() < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got {input.dim()}")
    return F.dropout(input, p, True) if input.dim() == 2 else \
        _channel_mask_dropout(input, p)


def _channel_mask_dropout(input, p):
    from . import ops
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    keep = ops.api.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    return input * keep / (1 - p) if p < 1 else input * 0


def native_dropout(input, p, train):
    """``(output, mask)``: the mask (bool) says which elements were kept."""
    from . import ops
    if not train:
        return input.clone(), ops.api.ones_like(input, dtype=_bool())
    keep = ops.api.empty(tuple(input.shape), dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    scale = 1.0 / (1 - p) if p < 1 else 0.0
    return input * keep * scale, keep.bool()


def _deprecated(name, instead):
    import warnings
    warnings.warn(f"{name} is deprecated and it is just left for JIT compatibility. It will be removed in a "
                  f"future PyTorch release. Please use `{instead}` instead", UserWarning, stacklevel=3)


def frobenius_norm(input, dim, keepdim=False):
    from . import linalg
    _deprecated("frobenius_norm", "linalg.vector_norm(A, 2., dim, keepdim)")
    return linalg.vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    from . import linalg
    if isinstance(dim, bool):             # nuclear_norm(input, keepdim) overload
        dim, keepdim = None, dim
    _deprecated("nuclear_norm", "linalg.matrix_norm(A, 'nuc', dim, keepdim)")
    return linalg.matrix_norm(input, "nuc", tuple(dim) if dim is not None else (-2, -1), keepdim)


def fill(input, value):
    return input.clone().fill_(value)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction(reduction, "cosine_embedding_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction(reduction, "margin_ranking_loss"))


def kl_div(input, target, reduction=1, *, log_target=False):
    # ATen's Mean is the elementwise mean ("mean"), not the functional default "batchmean" advice
    return _F().kl_div(input, target, reduction=_reduction(reduction, "kl_div"), log_target=log_target)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction(reduction, "poisson_nll_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction(reduction, "triplet_margin_loss"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction(reduction, "ctc_loss"), zero_infinity)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in _GRID_INTERP or padding_mode not in _GRID_PAD:
        raise ValueError(f"grid_sampler(): interpolation_mode must be 0, 1 or 2 and padding_mode 0, 1 or 2, got "
                         f"{interpolation_mode!r} and {padding_mode!r}")
    return _F().grid_sample(input, grid, _GRID_INTERP[interpolation_mode], _GRID_PAD[padding_mode], align_corners)


def affine_grid_generator(theta, size, align_corners):
    return _F().affine_grid(theta, list(size), align_corners)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over ``buffer``'s memory (shared, as PyTorch: writes go through; a
    read-only buffer is copied, with a warning)."""
    arr = np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset)
    if not arr.flags.writeable:
        import warnings
        warnings.warn("The given buffer is not writable: ember copied it (its tensors are always writable), so "
                      "writes to the tensor do not reach the buffer.", UserWarning, stacklevel=2)
        arr = arr.copy()
    from . import from_numpy
    t = from_numpy(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def from_dlpack(ext_tensor):
    """A tensor sharing memory with any DLPack exporter (numpy arrays, PyTorch tensors, ...)."""
    from .utils.dlpack import from_dlpack as impl
    return impl(ext_tensor)


NAMES = ("adaptive_avg_pool1d", "adaptive_max_pool1d", "avg_pool1d", "max_pool1d", "max_pool1d_with_indices",
         "max_pool2d", "max_pool3d", "constant_pad_nd", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
         "prelu", "rrelu", "rms_norm", "alpha_dropout", "feature_alpha_dropout", "feature_dropout",
         "native_dropout", "frobenius_norm", "nuclear_norm", "fill", "cosine_embedding_loss",
         "hinge_embedding_loss", "margin_ranking_loss", "kl_div", "poisson_nll_loss", "triplet_margin_loss",
         "ctc_loss", "grid_sampler", "affine_grid_generator", "frombuffer", "from_dlpack")


# torch's out= on the deprecated norms (ember/ops/_out.py)
from .ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), ("frobenius_norm", "nuclear_norm"))
del _out_mod
