"""Top-level torch functions ember lacked: small ATen entry points that libraries call directly.

Why each exists:

* ``slice_inverse`` -- the functionalization pass's inverse of a slice view (a view of the
  slice's base with the base's geometry);
* ``hash_tensor`` -- torch's cheap content fingerprint (xor of the elements' 64-bit patterns);
* ``embedding_renorm_`` -- the in-place row renormalisation behind ``F.embedding(max_norm=)``;
* ``native_channel_shuffle``, ``grid_sampler_2d`` / ``grid_sampler_3d`` -- the ATen kernels
  behind ``F.channel_shuffle`` / ``F.grid_sample`` (integer modes, as ATen takes them);
* the SyncBatchNorm kernels (``batch_norm_stats``, ``batch_norm_elemt``,
  ``batch_norm_gather_stats[_with_counts]``, ``batch_norm_backward_reduce``,
  ``batch_norm_backward_elemt``, ``batch_norm_update_stats``): the per-replica statistics and the
  element-wise passes SyncBatchNorm combines across processes (torch builds them for CUDA only;
  ember runs them on its CPU tensors with the same formulas);
* ``sym_constrain_range[_for_size]`` / ``sym_fresh_size`` -- export's value-range assertions,
  checked eagerly on concrete numbers;
* the sparse x dense products ``dsmm`` / ``hsmm`` / ``saddmm`` / ``sspaddmm`` (over ember.sparse's
  public API; ``smm`` itself is ember.sparse's) and the ``*_copy`` accessors of sparse tensors' parts;
* build flags (``has_lapack`` ...), ``get_file_path``, ``init_num_threads``.
"""
from __future__ import annotations

import numbers
import os

import numpy as np

__all__ = ["slice_inverse", "hash_tensor", "embedding_renorm_", "native_channel_shuffle", "grid_sampler_2d",
           "grid_sampler_3d", "batch_norm_stats", "batch_norm_elemt", "batch_norm_gather_stats",
           "batch_norm_gather_stats_with_counts", "batch_norm_backward_reduce", "batch_norm_backward_elemt",
           "batch_norm_update_stats", "sym_constrain_range", "sym_constrain_range_for_size", "sym_fresh_size",
           "dsmm", "hsmm", "saddmm", "sspaddmm", "values_copy", "indices_copy", "crow_indices_copy",
           "col_indices_copy", "ccol_indices_copy", "row_indices_copy", "get_file_path", "init_num_threads",
           "compiled_with_cxx11_abi", "empty_quantized", "quantized_max_pool3d", "resize_as_sparse_",
           "is_vulkan_available"]


def _ember():
    import ember
    return ember


def _check_tensor(fn, name, pos, x):
    from .tensor import Tensor
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not {type(x).__name__}")


# ---------------------------------------------------------------------- views / hashes
def slice_inverse(input, src, dim=0, start=None, end=None, step=1):
    """A view with ``src``'s sizes, strides and offset over ``input``'s storage: when ``input`` is
    ``base[..., start:end:step, ...]`` (along ``dim``) and ``src`` has ``base``'s geometry, the result
    is ``base`` again, seen through the slice. The geometry comes from ``src``; ``dim/start/end/
    step`` say which part of the result is ``input`` (the gradient flows back through it)."""
    _check_tensor("slice_inverse", "input", 1, input)
    _check_tensor("slice_inverse", "src", 2, src)
    size, stride = tuple(src.shape), tuple(src.stride())
    offset = src.storage_offset()
    item = input.element_size()
    need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    have = input.untyped_storage().nbytes() // max(item, 1)
    if need > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {item} requiring a storage size of {need * item} are out of bounds for "
                           f"storage of size {have * item}")
    root = input._base if getattr(input, "_base", None) is not None else input
    if not (input.requires_grad and _ember().is_grad_enabled()):
        return root.detach().as_strided(size, stride, offset) if root.requires_grad else \
            root.as_strided(size, stride, offset)
    return _SliceInverse.apply(input, root, size, stride, offset, dim, start, end, step)


def _slice_inverse_fn():
    from .autograd import Function

    class SliceInverse(Function):
        """slice_inverse's autograd: the result's gradient restricted to the slice is ``input``'s."""

        @staticmethod
        def forward(ctx, input, root, size, stride, offset, dim, start, end, step):
            ctx.slice = (dim, start, end, step)
            return root.detach().as_strided(size, stride, offset)

        @staticmethod
        def backward(ctx, grad):
            dim, start, end, step = ctx.slice
            index = [slice(None)] * grad.dim()
            index[dim] = slice(start, end, step)
            return (grad[tuple(index)],) + (None,) * 8

    return SliceInverse


class _LazyFunction:
    def __init__(self, make):
        self._make, self._fn = make, None

    def apply(self, *args):
        if self._fn is None:
            self._fn = self._make()
        return self._fn.apply(*args)


_SliceInverse = _LazyFunction(_slice_inverse_fn)


def _hash_bits(x):
    """The 64-bit patterns torch xors: floats widened to float64, integers (and bool) to int64."""
    ember = _ember()
    dt = x.dtype
    if dt.is_complex or dt._limited is not None:      # torch's xor reduction has no kernel for these
        raise NotImplementedError(f'"xor_sum_cpu" not implemented for \'{dt.legacy_name}\'')
    arr = x.detach().numpy()
    if dt.is_floating_point:
        wide = arr.astype(np.float64)
    elif dt is ember.bool:
        wide = arr.astype(np.int64)
    else:
        wide = arr.astype(np.int64) if dt.name != "uint64" else arr
    return np.ascontiguousarray(wide).view(np.uint64)


def hash_tensor(input, dim=(), *, keepdim=False, mode=0, out=None):
    """xor of the elements' 64-bit patterns over ``dim`` (all dims when empty): a uint64 tensor."""
    _check_tensor("hash_tensor", "input", 1, input)
    if mode != 0:
        raise RuntimeError(f"hash_tensor only supports mode=0 (xor_reduction), got mode={mode}")
    ember = _ember()
    if isinstance(dim, int):
        dims = (dim,)
    else:
        dims = tuple(dim) if dim is not None else ()
    nd = input.dim()
    if not dims:
        if input.numel() == 0:
            raise RuntimeError("hash_tensor: Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        dims = tuple(range(nd))
    norm = []
    for d in dims:
        if not -max(nd, 1) <= d < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(nd, 1)}, "
                             f"{max(nd, 1) - 1}], but got {d})")
        norm.append(d % max(nd, 1))
    bits = _hash_bits(input)
    res = np.bitwise_xor.reduce(bits, axis=tuple(d for d in norm if d < nd) or None, keepdims=keepdim) \
        if nd else bits.copy()
    result = ember.from_numpy(np.asarray(res, dtype=np.uint64).copy())
    if out is not None:
        out.resize_(tuple(result.shape)).copy_(result)
        return out
    return result


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Scale (in place) each row of ``input`` named in ``indices`` whose ``norm_type``-norm exceeds
    ``max_norm`` down to norm ``max_norm`` (times 1 / (norm + 1e-7), as torch)."""
    _check_tensor("embedding_renorm_", "input", 1, input)
    _check_tensor("embedding_renorm_", "indices", 2, indices)
    ember = _ember()
    if indices.dtype not in (ember.int64, ember.int32):
        raise RuntimeError(f"Expected tensor for argument #2 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {indices.type()} instead (while checking arguments for "
                           f"embedding_renorm_)".replace("ember.", "torch."))
    if input.dim() != 2:
        raise RuntimeError(f"Expected 2-dimensional tensor, but got {input.dim()}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for embedding_renorm_)")
    if input.requires_grad and input.grad_fn is None and ember.is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    rows = np.unique(indices.detach().numpy().reshape(-1))
    with ember.no_grad():
        for r in rows.tolist():
            row = input[r]
            norm = float(ember.linalg.vector_norm(row.to(ember.float64), norm_type))
            if norm > max_norm:
                row.mul_(max_norm / (norm + 1e-7))
    return input


def native_channel_shuffle(input, groups):
    """ATen's channel shuffle kernel: ``F.channel_shuffle``'s checks and result."""
    _check_tensor("native_channel_shuffle", "input", 1, input)
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(input.shape)


_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADDING = ("zeros", "border", "reflection")


def _grid_sampler(name, nd, input, grid, interpolation_mode, padding_mode, align_corners):
    _check_tensor(name, "input", 1, input)
    _check_tensor(name, "grid", 2, grid)
    if input.dim() != nd or grid.dim() != nd:
        raise RuntimeError(f"grid_sampler(): expected {nd}D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if interpolation_mode not in (0, 1, 2):
        raise RuntimeError(f"{name}(): interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got "
                           f"{interpolation_mode}")
    if padding_mode not in (0, 1, 2):
        raise RuntimeError(f"{name}(): padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got "
                           f"{padding_mode}")
    if nd == 5 and interpolation_mode == 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    from .nn import functional as F
    return F.grid_sample(input, grid, _GRID_MODES[interpolation_mode], _GRID_PADDING[padding_mode],
                         align_corners=bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """ATen's 2-d grid sampler: ``F.grid_sample`` with integer modes (0/1/2 = bilinear/nearest/
    bicubic; padding 0/1/2 = zeros/border/reflection)."""
    return _grid_sampler("grid_sampler_2d", 4, input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """ATen's 3-d grid sampler (bilinear -- trilinear -- or nearest)."""
    return _grid_sampler("grid_sampler_3d", 5, input, grid, interpolation_mode, padding_mode, align_corners)


# ---------------------------------------------------------------------- SyncBatchNorm kernels
def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _channel_view(v, x):
    return v.reshape((1, -1) + (1,) * (x.dim() - 2))


def _check_bn_input(fn, input):
    _check_tensor(fn, "input", 1, input)
    if input.dim() < 2:
        raise ValueError(f"{fn}(): expected an input of at least 2 dims (N, C, ...), got {input.dim()} dims")


def batch_norm_stats(input, eps):
    """(mean, invstd) per channel (dim 1) over the other dims: invstd = 1 / sqrt(biased var + eps)."""
    _check_bn_input("batch_norm_stats", input)
    ember = _ember()
    with ember.no_grad():
        x = input.detach()
        acc = x.to(ember.float64) if x.dtype in (ember.float16, ember.bfloat16, ember.float32) else x
        dims = _reduce_dims(x)
        mean = acc.mean(dims)
        var = ((acc - _channel_view(mean, acc)) ** 2).mean(dims)
        invstd = 1.0 / ember.sqrt(var + eps)
        out_dt = ember.float32 if x.dtype in (ember.float16, ember.bfloat16) else x.dtype
        return mean.to(out_dt), invstd.to(out_dt)


def batch_norm_elemt(input, weight, bias, mean, invstd, eps, *, out=None):
    """(input - mean) * invstd * weight + bias, per channel (``eps`` is unused: ``invstd`` has it)."""
    _check_bn_input("batch_norm_elemt", input)
    ember = _ember()
    y = (input - _channel_view(mean, input)) * _channel_view(invstd, input)
    if weight is not None:
        y = y * _channel_view(weight, input)
    if bias is not None:
        y = y + _channel_view(bias, input)
    y = y.to(input.dtype)
    if out is not None:
        with ember.no_grad():
            out.copy_(y)
        return out
    return y


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    """Combine per-replica (mean, invstd) rows (one per replica, counted ``counts``) into the global
    (mean, invstd); update the running statistics (unbiased variance) in place when given."""
    _check_tensor("batch_norm_gather_stats_with_counts", "mean", 2, mean)
    ember = _ember()
    with ember.no_grad():
        m = mean.to(ember.float64)
        var_r = 1.0 / invstd.to(ember.float64) ** 2 - eps
        n = counts.to(ember.float64).reshape(-1, 1)
        total = n.sum()
        gmean = (m * n).sum(0) / total
        gvar = ((var_r + (m - gmean) ** 2) * n).sum(0) / total
        ginvstd = 1.0 / ember.sqrt(gvar + eps)
        if running_mean is not None:
            running_mean.copy_((1 - momentum) * running_mean.to(ember.float64) + momentum * gmean)
        if running_var is not None:
            unbiased = gvar * total / (total - 1)
            running_var.copy_((1 - momentum) * running_var.to(ember.float64) + momentum * unbiased)
        return gmean.to(mean.dtype), ginvstd.to(invstd.dtype)


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    """``batch_norm_gather_stats_with_counts`` with every replica counted ``count``."""
    ember = _ember()
    counts = ember.full((mean.shape[0],), float(count), dtype=mean.dtype)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts)


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    """Per-channel sums for the backward pass: (sum(dy), sum(dy * (x - mean)), grad_weight,
    grad_bias); each part is None when its flag (input_g / weight_g / bias_g) is False."""
    ember = _ember()
    with ember.no_grad():
        dims = _reduce_dims(input)
        sum_dy = grad_out.sum(dims)
        sum_dy_xmu = (grad_out * (input - _channel_view(mean, input))).sum(dims)
        grad_weight = (sum_dy_xmu * invstd).to(weight.dtype if weight is not None else input.dtype) \
            if weight_g else None
        grad_bias = sum_dy.to(weight.dtype if weight is not None else input.dtype) if bias_g else None
        if not input_g:
            sum_dy = sum_dy_xmu = None
        return sum_dy, sum_dy_xmu, grad_weight, grad_bias


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    """grad_input = (dy - sum_dy / N - (x - mean) * invstd**2 * sum_dy_xmu / N) * invstd * weight,
    N = count.sum() (the samples per channel over every replica; an integer tensor, as torch)."""
    ember = _ember()
    if count.dtype.is_floating_point:
        raise RuntimeError("batch_norm_backward_elemt(): expected count to be an integer tensor (the per-replica "
                           f"sample counts), got {count.dtype}")
    with ember.no_grad():
        n = float(count.sum())
        cv = lambda v: _channel_view(v, input)  # noqa: E731
        xmu = input - cv(mean)
        g = grad_out - cv(sum_dy / n) - xmu * cv(invstd * invstd * sum_dy_xmu / n)
        g = g * cv(invstd)
        if weight is not None:
            g = g * cv(weight)
        return g.to(input.dtype)


def batch_norm_update_stats(input, running_mean, running_var, momentum):
    """(mean, unbiased var) per channel of ``input``; blends them into the running statistics
    (in place) when those are given."""
    _check_bn_input("batch_norm_update_stats", input)
    ember = _ember()
    with ember.no_grad():
        dims = _reduce_dims(input)
        x = input.detach()
        mean = x.mean(dims)
        n = x.numel() // x.shape[1]
        var = ((x - _channel_view(mean, x)) ** 2).sum(dims) / max(n - 1, 1)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
        if running_var is not None:
            running_var.mul_(1 - momentum).add_(var.to(running_var.dtype) * momentum)
        return mean, var


# ---------------------------------------------------------------------- symbolic sizes (eager)
_INT64_MAX = 9223372036854775807


def sym_constrain_range(size, *, min=None, max=None):
    """Assert ``min <= size <= max`` (export records the range for a symbolic ``size``; on a
    concrete number it is a check)."""
    lo = -_INT64_MAX - 1 if min is None else min
    hi = _INT64_MAX if max is None else max
    _check_range(size, lo, hi)


def sym_constrain_range_for_size(size, *, min=None, max=None):
    """``sym_constrain_range`` for a value used as a size: the range starts at 0 at least."""
    lo = 0 if min is None else min
    hi = _INT64_MAX if max is None else max
    _check_range(size, lo, hi)


def _check_range(size, lo, hi):
    from .fx.experimental.symbolic_shapes import SymInt
    if isinstance(size, SymInt):
        return      # a symbolic size: its range is the tracer's business
    if not isinstance(size, numbers.Number):
        raise TypeError(f"sym_constrain_range(): argument 'size' must be a number, not {type(size).__name__}")
    if not lo <= size <= hi:
        raise RuntimeError(f"Invalid value range for {size} between [{lo}, {hi}].")


def sym_fresh_size(expr):
    """A fresh unbacked size equal to ``expr`` (an int or a 0-d integer tensor); eagerly, its value."""
    from .tensor import Tensor
    if isinstance(expr, Tensor):
        return expr.item()
    return expr


# ---------------------------------------------------------------------- sparse x dense
def _check_sparse(fn, x, pos=1, name="input"):
    if not getattr(x, "is_sparse", False) or x.layout != _ember().sparse_coo:
        raise RuntimeError(f"{fn}(): expected argument '{name}' (position {pos}) to be a sparse COO tensor, got a "
                           f"{getattr(x, 'layout', type(x).__name__)} one")


def _check_mm(fn, a, b):
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"{fn}(): expected 2-D matrices, got {a.dim()}-D and {b.dim()}-D")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")


def dsmm(input, mat2):
    """sparse COO ``input`` @ dense ``mat2`` -> dense (differentiable, ``ember.mm``'s sparse route)."""
    _check_sparse("dsmm", input)
    _check_mm("dsmm", input, mat2)
    return _ember().mm(input, mat2)


def _row_product(fn, input, mat2):
    """(rows of ``input`` holding entries, sorted; the dense product's rows there)."""
    _check_sparse(fn, input)
    _check_mm(fn, input, mat2)
    ember = _ember()
    with ember.no_grad():
        idx = input.coalesce().indices()
        rows = np.unique(idx[0].numpy()) if idx.shape[1] else np.zeros(0, dtype=np.int64)
        dense = ember.mm(input, mat2)
        return ember.from_numpy(rows.astype(np.int64)), dense[ember.from_numpy(rows.astype(np.int64))]


def hsmm(input, mat2):
    """sparse ``input`` @ dense ``mat2`` as a hybrid sparse COO tensor (one sparse dim: the rows
    holding entries; each value a dense row of the product): torch's older name of ``hspmm``."""
    _check_sparse("hsmm", input)
    _check_mm("hsmm", input, mat2)
    return _ember().hspmm(input, mat2)


def _smm_entries(input, mat2):
    """(indices, values) of sparse ``input`` @ dense ``mat2`` in torch's smm layout: every column
    of each row of ``input`` that holds entries, row-major (what sspaddmm appends)."""
    ember = _ember()
    rows, vals = _row_product("sspaddmm", input, mat2)
    m = mat2.shape[1]
    r = np.repeat(rows.numpy(), m)
    c = np.tile(np.arange(m, dtype=np.int64), len(rows.numpy()))
    return ember.from_numpy(np.stack([r, c])), vals.reshape(-1)


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` as a sparse COO tensor: ``input``'s entries, then
    the product's (``smm``'s), unsummed (uncoalesced, as torch)."""
    ember = _ember()
    if not getattr(input, "is_sparse", False):
        raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")
    p_idx, p_vals = _smm_entries(mat1, mat2)
    shape = (mat1.shape[0], mat2.shape[1])
    if tuple(input.shape) != shape:
        raise RuntimeError(f"sspaddmm: Argument #1: Expected dim 0 size {shape[0]}, got {input.shape[0]}"
                           if input.shape[0] != shape[0] else
                           f"sspaddmm: Argument #1: Expected dim 1 size {shape[1]}, got {input.shape[1]}")
    with ember.no_grad():
        idx = ember.cat([input._indices(), p_idx], 1)
        vals = ember.cat([input._values() * beta, p_vals.to(input.dtype) * alpha])
        res = ember.sparse_coo_tensor(idx, vals, tuple(input.shape))
    if out is not None:
        raise NotImplementedError("ember.sspaddmm: out= is not supported (sparse outputs cannot be written in place)")
    return res


def saddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``sspaddmm`` under its older name."""
    return sspaddmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)


def _copy_of(fn, getter, allowed):
    def f(input, *, out=None):
        ember = _ember()
        lay = getattr(input, "layout", None)
        if lay not in allowed(ember):
            raise RuntimeError(f"{fn}(): expected a tensor of layout {' or '.join(str(a) for a in allowed(ember))}, "
                               f"got {lay}")
        res = getattr(input, getter)().clone()
        if out is not None:
            out.resize_(tuple(res.shape)).copy_(res)
            return out
        return res
    f.__name__ = f.__qualname__ = fn
    f.__doc__ = f"A copy of ``input.{getter}()`` (torch's ``{fn}``: no view of the sparse tensor's parts)."
    return f


values_copy = _copy_of("values_copy", "values", lambda e: (e.sparse_coo, e.sparse_csr, e.sparse_csc, e.sparse_bsr,
                                                           e.sparse_bsc))
indices_copy = _copy_of("indices_copy", "indices", lambda e: (e.sparse_coo,))
crow_indices_copy = _copy_of("crow_indices_copy", "crow_indices", lambda e: (e.sparse_csr, e.sparse_bsr))
col_indices_copy = _copy_of("col_indices_copy", "col_indices", lambda e: (e.sparse_csr, e.sparse_bsr))
ccol_indices_copy = _copy_of("ccol_indices_copy", "ccol_indices", lambda e: (e.sparse_csc, e.sparse_bsc))
row_indices_copy = _copy_of("row_indices_copy", "row_indices", lambda e: (e.sparse_csc, e.sparse_bsc))


# ---------------------------------------------------------------------- quantized
def empty_quantized(size, qtensor, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """A quantized tensor of ``size`` with ``qtensor``'s quantizer (scale, zero point, dtype). torch
    leaves its integers uninitialised; ember's hold the zero point (the value 0.0)."""
    ember = _ember()
    if not getattr(qtensor, "is_quantized", False):
        raise RuntimeError("empty_quantized(): expected argument 'qtensor' to be a quantized tensor")
    if qtensor.qscheme() not in (ember.per_tensor_affine, ember.per_tensor_symmetric):
        raise NotImplementedError("ember.empty_quantized: only per-tensor quantizers are supported")
    if dtype is not None and dtype is not qtensor.dtype:
        raise RuntimeError(f"empty_quantized(): dtype {dtype} differs from the quantizer's {qtensor.dtype}")
    return ember.quantize_per_tensor(ember.zeros(tuple(size)), qtensor.q_scale(), qtensor.q_zero_point(),
                                     qtensor.dtype)


def quantized_max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """3-d max pooling of a per-tensor quantized tensor: pooled on its dequantized values (each
    exactly representable again: max picks one of them), re-quantized with the same scale and
    zero point, so the integers are the input's."""
    ember = _ember()
    if not getattr(input, "is_quantized", False):
        raise RuntimeError("quantized_max_pool3d(): expected a quantized tensor")
    if input.qscheme() not in (ember.per_tensor_affine, ember.per_tensor_symmetric):
        raise NotImplementedError("ember.quantized_max_pool3d: only per-tensor quantized inputs are supported")
    from .nn import functional as F
    pooled = F.max_pool3d(input.dequantize(), kernel_size, stride or None, padding, dilation, ceil_mode)
    return ember.quantize_per_tensor(pooled, input.q_scale(), input.q_zero_point(), input.dtype)


# ---------------------------------------------------------------------- build / runtime facts
def get_file_path(*path_components):
    """A path inside the installed ember package (torch's ``get_file_path`` for its own files)."""
    return os.path.join(os.path.dirname(os.path.abspath(__import__("ember").__file__)), *path_components)


def init_num_threads():
    """Initialise the calling thread's intra-op thread pool: ember's is set up at import (its
    OpenMP settings, ember/_openmp.py), so there is nothing left to do."""
    return None


def is_vulkan_available():
    """False: ember has no Vulkan backend."""
    return False


def resize_as_sparse_(input, the_template):
    """Resize sparse ``input`` to ``the_template``'s sizes, emptying it (``Tensor.resize_as_sparse_``)."""
    from ._api_gaps import _resize_as_sparse_
    return _resize_as_sparse_(input, the_template)


def compiled_with_cxx11_abi():
    """True: ember's compiled kernels are built by the system compiler with its default (C++11)
    ABI, as torch's wheels since 2.x."""
    return True


# what ember is built with: numpy's LAPACK (linalg), the OpenMP runtime of the compiled kernels,
# numpy's pocketfft (ember.fft); not Intel's MKL (numpy's BLAS is OpenBLAS unless built otherwise)
has_lapack = True
has_spectral = True
has_openmp = True


def _numpy_uses_mkl():
    try:
        cfg = np.__config__.CONFIG["Build Dependencies"]
        return "mkl" in str(cfg.get("blas", {}).get("name", "")).lower()
    except Exception:      # noqa: BLE001 - an older numpy without the CONFIG dict
        return False


has_mkl = _numpy_uses_mkl()


def __getattr__(name):
    # names that need more of ember than this module's import may load
    if name == "legacy_contiguous_format":      # torch's old alias of contiguous_format
        from ._memory_format import contiguous_format
        return contiguous_format
    if name in ("fork", "wait"):                # torch.jit's (deprecated) futures, at the top level as in torch
        from . import jit
        return getattr(jit, name)
    if name in ("Storage", "StorageBase") or name.startswith("Q") and name.endswith("Storage"):
        from . import _storage_classes
        return getattr(_storage_classes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
