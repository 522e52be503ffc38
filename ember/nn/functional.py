"""``ember.nn.functional`` (``F``): PyTorch's ``torch.nn.functional`` over ember ops.

Signatures follow ``torch.nn.functional``. Ops owned by other op families
(activations, softmax, ...) are looked up on ``ember.ops.api`` when called, so
this module imports before every family has landed.
"""
from __future__ import annotations

import fractions
import math
import numbers
import operator
import warnings

import numpy as np

from .. import types as _t
from ..ops import api as _api
from ..ops import linalg as _la
from ..ops import nn_ops as _nn
from ..ops.nn_ops import reduction_enum as _red
from ..tensor import Tensor, _make
from ..autograd import no_grad as _no_grad
from ..backends import cuda as _sdp_switches
from . import _eager_fast
from ..amp.autocast_mode import autocast_args as _autocast_args

__all__ = []  # filled at the end


def _op(name):
    fn = getattr(_api, name, None)
    if fn is None:
        raise RuntimeError(f"ember op '{name}' is not available (its op family has not been registered)")
    return fn


def _tuple(v, n, name="argument"):
    if type(v) is int:          # the common case first (the ABC check below costs ~0.5 us)
        return (v,) * n
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    if len(v) == 1 and n > 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={list(v)}")
    return v


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  + ("none" if reduce is False else "mean" if size_average in (None, True) else "sum")
                  + "' instead.", UserWarning, stacklevel=3)
    if reduce is False:
        return "none"
    return "mean" if size_average in (None, True) else "sum"


# ====================================================================== linear
def linear(input, weight, bias=None):
    return _la.linear(input, weight, bias)


def _no_complex_autograd(name, *tensors):
    """torch raises at the forward of the few ops that have no complex derivative (embedding,
    bilinear's _trilinear, silu) when a complex output would need a grad_fn; ember does too,
    so such a graph fails where torch's does instead of at backward."""
    from ..autograd import is_grad_enabled
    ts = [t for t in tensors if isinstance(t, Tensor)]
    if is_grad_enabled() and any(t.dtype.is_complex for t in ts) and any(t.requires_grad for t in ts):
        raise RuntimeError(f"{name} does not support automatic differentiation for outputs with complex dtype.")


def _check_bilinear_batch(input1, input2, weight, bias):
    """torch's shape checks that the einsum below would otherwise report as a broadcast error:
    equal ranks and batch dimensions (checked first, as torch does), and the bias length."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for i in range(input1.dim() - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: got {input1.shape[i]} "
                               f"and {input2.shape[i]}")
    if bias is not None and weight.dim() == 3 and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected "
                           f"{weight.shape[0]}")


def bilinear(input1, input2, weight, bias=None):
    _no_complex_autograd("_trilinear", input1, input2, weight, bias)
    _check_bilinear_batch(input1, input2, weight, bias)
    return _la.bilinear(input1, input2, weight, bias)


# ====================================================================== convolution
def _conv(nd, input, weight, bias, stride, padding, dilation, groups, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}() received an invalid combination of arguments: input must be Tensor, not "
                        f"{type(input).__name__}")
    unbatched = input.dim() == nd + 1
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(input.shape)}")
    if unbatched:
        input = input.unsqueeze(0)
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            k = tuple(weight.shape[2:])
            total = [dilation[i] * (k[i] - 1) for i in range(nd)]
            lo = [t // 2 for t in total]
            extra = [t - 2 * l for t, l in zip(total, lo)]
            if any(extra):
                # asymmetric: pad the extra element on the high side explicitly, like PyTorch
                pad_arg = []
                for i in reversed(range(nd)):
                    pad_arg += [0, extra[i]]
                input = pad(input, pad_arg)
            padding = tuple(lo)
        else:
            raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    else:
        padding = _tuple(padding, nd, "padding")
    out = _nn.convolution(input, weight, bias, stride, padding, dilation, False, (0,) * nd, groups)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, "conv3d")


def _conv_t(nd, input, weight, bias, stride, padding, output_padding, groups, dilation, name):
    unbatched = input.dim() == nd + 1
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(input.shape)}")
    if isinstance(padding, str):
        raise RuntimeError(f"{name}: padding must be an int or tuple of ints, got '{padding}'")
    if unbatched:
        input = input.unsqueeze(0)
    out = _nn.convolution(input, weight, bias, _tuple(stride, nd, "stride"), _tuple(padding, nd, "padding"),
                          _tuple(dilation, nd, "dilation"), True, _tuple(output_padding, nd, "output_padding"),
                          groups)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(1, input, weight, bias, stride, padding, output_padding, groups, dilation, "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(2, input, weight, bias, stride, padding, output_padding, groups, dilation, "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_t(3, input, weight, bias, stride, padding, output_padding, groups, dilation, "conv_transpose3d")


# ====================================================================== pooling
def _pool_prep(nd, input, name):
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor for input, but got: "
                           f"{list(input.shape)}")
    unbatched = input.dim() == nd + 1
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _max_pool(nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, name):
    k = _tuple(kernel_size, nd, "kernel_size")
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0) \
        else _tuple(stride, nd, "stride")
    p = _tuple(padding, nd, "padding")
    d = _tuple(dilation, nd, "dilation")
    if nd == 2 and not return_indices and _eager_fast.plain(input):
        # (_eager_fast: the op's kernel without a dispatcher round, the indices dropped)
        out = _eager_fast.max_pool2d(input, k, s, p, d, ceil_mode)
        if out is not None:
            return out
    x, unb = _pool_prep(nd, input, name)
    if nd == 1:
        # PyTorch runs max_pool1d through the 2-d kernel
        out, idx = _nn.max_pool_with_indices(x.unsqueeze(-2), (1,) + k, (1,) + s, (0,) + p, (1,) + d, ceil_mode)
        out, idx = out.squeeze(-2), idx.squeeze(-2)
    else:
        out, idx = _nn.max_pool_with_indices(x, k, s, p, d, ceil_mode)
    if unb:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return (out, idx) if return_indices else out


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool1d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def max_pool1d_with_indices(*args, **kwargs):
    return max_pool1d(*args, **{**kwargs, "return_indices": True})


def max_pool2d_with_indices(*args, **kwargs):
    return max_pool2d(*args, **{**kwargs, "return_indices": True})


def _avg_pool(nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, name):
    k = _tuple(kernel_size, nd, "kernel_size")
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0) \
        else _tuple(stride, nd, "stride")
    p = _tuple(padding, nd, "padding")
    x, unb = _pool_prep(nd, input, name)
    if nd == 1:
        out = _nn.avg_pool(x.unsqueeze(-2), (1,) + k, (1,) + s, (0,) + p, ceil_mode, count_include_pad,
                           divisor_override).squeeze(-2)
    else:
        out = _nn.avg_pool(x, k, s, p, ceil_mode, count_include_pad, divisor_override)
    return out.squeeze(0) if unb else out


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


def _adaptive_ranges(n_in, n_out):
    starts = [(i * n_in) // n_out for i in range(n_out)]
    ends = [-((-(i + 1) * n_in) // n_out) for i in range(n_out)]
    return starts, ends


def _adaptive_matrix(n_in, n_out):
    m = np.zeros((n_out, n_in), dtype=np.float64)
    for i, (a, b) in enumerate(zip(*_adaptive_ranges(n_in, n_out))):
        m[i, a:b] = 1.0 / (b - a)
    return m


def _adaptive_size(output_size, nd, in_sp):
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) == 1 and nd > 1:
        output_size = output_size * nd
    return tuple(in_sp[i] if o is None else int(o) for i, o in enumerate(output_size))


def _refuse_complex(t, make):
    """torch's error for a complex input of a function it has no complex kernel for (ember's
    numpy kernels would return values)."""
    if isinstance(t, Tensor) and t.dtype.is_complex:
        raise make(t.dtype.legacy_name)


def _adaptive_avg(nd, input, output_size):
    name = f"adaptive_avg_pool{nd}d"
    _refuse_complex(input, lambda n: NotImplementedError(
        f"\"adaptive_avg_pool{'3d_cpu' if nd == 3 else '2d'}\" not implemented for '{n}'"))
    x, unb = _pool_prep(nd, input, name)
    in_sp = tuple(x.shape[2:])
    out = _adaptive_size(output_size, nd, in_sp)
    if any(s == 0 for s in in_sp):
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                           f"input has sizes {list(input.shape)} with dimension {2 + in_sp.index(0)} being empty")
    if all(o == 1 for o in out) and nd == 2:
        res = x.mean([-2, -1], keepdim=True)
    elif _symbolic(in_sp + out):
        # the matrices from the sizes by ops: built in numpy, they specialised every input size
        res = x
        for i in range(nd):
            res = _resample_axis_symbolic(res, 2 + i, _adaptive_matrix_symbolic(in_sp[i], out[i], x.device),
                                          in_sp[i], out[i])
        res = res.to(x.dtype).contiguous()
    else:
        mats = tuple((2 + i, _adaptive_matrix(in_sp[i], out[i])) for i in range(nd) if out[i] != in_sp[i] or True)
        if nd == 1:
            res = _nn._resample(x.unsqueeze(-2), ((3, mats[0][1]),), "AdaptiveAvgPool2DBackward0").squeeze(-2)
        else:
            res = _nn._resample(x, mats, f"AdaptiveAvgPool{nd}DBackward0")
    return res.squeeze(0) if unb else res


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg(1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg(2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    input, = _autocast_args("adaptive_avg_pool3d", input)
    return _adaptive_avg(3, input, output_size)


def _adaptive_max(nd, input, output_size, return_indices):
    """Adaptive max pooling: one max_pool per distinct window size, stitched with gathers."""
    name = f"adaptive_max_pool{nd}d"
    x, unb = _pool_prep(nd, input, name)
    in_sp = tuple(x.shape[2:])
    out = _adaptive_size(output_size, nd, in_sp)
    if _symbolic(in_sp + out):
        with _no_grad():
            ind = _adaptive_max_index_symbolic(x.detach(), in_sp, out)
        vals = _nn._max_pool_gather(x, ind)
        if unb:
            vals, ind = vals.squeeze(0), ind.squeeze(0)
        return (vals, ind) if return_indices else vals
    ranges = [_adaptive_ranges(in_sp[i], out[i]) for i in range(nd)]
    # Every output cell's window: gather the window elements with an index tensor, then max over it.
    N, C = x.shape[:2]
    S = int(np.prod(in_sp))
    cells = []
    kmax = [max(e - s for s, e in zip(*ranges[i])) for i in range(nd)]
    idx = np.zeros(tuple(out) + tuple(kmax), dtype=np.int64)
    valid = np.zeros(tuple(out) + tuple(kmax), dtype=bool)
    import itertools
    for cell in itertools.product(*[range(o) for o in out]):
        spans = [range(ranges[i][0][cell[i]], ranges[i][1][cell[i]]) for i in range(nd)]
        for koff, pos in zip(itertools.product(*[range(len(sp)) for sp in spans]), itertools.product(*spans)):
            flat = 0
            for i in range(nd):
                flat = flat * in_sp[i] + pos[i]
            idx[cell + koff] = flat
            valid[cell + koff] = True
    K = int(np.prod(kmax))
    P = int(np.prod(out))
    idx2 = idx.reshape(P, K)
    valid2 = valid.reshape(P, K)
    if x.dtype.is_floating_point:
        pad_val = -np.inf
    else:
        pad_val = int(np.iinfo(x.dtype.np).min)
    # choose the argmax per (n, c, cell) with ops (so a trace computes it from its input; the
    # window layout idx2/valid2 is static), then gather differentiably
    with _no_grad():
        xf = x.detach().reshape(N, C, S)
        idx_t = _make(np.ascontiguousarray(idx2)).to(x.device)
        win = _op("where")(_make(np.ascontiguousarray(valid2)).to(x.device), xf[:, :, idx_t], pad_val)
        arg = win.argmax(-1)                                   # NaN counts as the max, first one wins
        chosen = idx_t.expand(N, C, P, K).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
        ind = chosen.reshape(N, C, *tuple(out))
    vals = _nn._max_pool_gather(x, ind)
    if unb:
        vals, ind = vals.squeeze(0), ind.squeeze(0)
    return (vals, ind) if return_indices else vals


def _adaptive_windows_symbolic(n_in, n_out, device):
    """(starts, ends) of the adaptive windows as (n_out, 1) int64 tensors from iotas (sizes that
    may be symbolic): ``_adaptive_ranges``'s floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out)."""
    nin = _size_tensor(n_in, _t.int64, device)
    nout = _size_tensor(n_out, _t.int64, device)
    oi = _iota(n_out, _t.int64, device)
    starts = (oi * nin).div(nout, rounding_mode="floor").reshape(-1, 1)
    ends = -((-(oi + 1) * nin).div(nout, rounding_mode="floor")).reshape(-1, 1)
    return starts, ends


def _adaptive_max_index_symbolic(x, in_sp, out):
    """The eager adaptive max pool's flat input index per output cell, for sizes that may be
    symbolic (the eager one lays its window taps out in numpy from the sizes: a guard on every
    input size). The windows are products of one range per axis, so the max is taken one axis
    at a time, last first: per output position along the axis, the input positions outside its
    window masked to the lowest value, argmax over the axis (its first maximum, NaN counting as
    the maximum, as the eager argmax). Reducing the last axis first and then the others keeps
    the eager choice: the first maximum in row-major order over the window. A window of only
    the lowest value takes its first position (as the eager taps, whose first is its start)."""
    nd = len(in_sp)
    dev = x.device
    low = float("-inf") if x.dtype.is_floating_point else int(np.iinfo(x.dtype.np).min)
    vals = x
    flat = None                         # the flat offset the reduced axes contribute
    stride = 1                          # the flat stride of the axis being reduced
    for i in reversed(range(nd)):
        ax = 2 + i
        starts, ends = _adaptive_windows_symbolic(in_sp[i], out[i], dev)
        pos = _iota(in_sp[i], _t.int64, dev).reshape(1, -1)
        inside = (pos >= starts) & (pos < ends)                         # (out_i, in_i)
        shape = [1] * (vals.dim() + 1)
        shape[ax], shape[ax + 1] = out[i], in_sp[i]
        mask = inside.reshape(tuple(shape))
        cand = _op("where")(mask, vals.unsqueeze(ax), low)               # (..., out_i, in_i, ...)
        arg = cand.argmax(ax + 1, keepdim=True)
        sshape = [1] * (vals.dim() + 1)
        sshape[ax] = out[i]
        hit = mask.expand(*cand.shape).gather(ax + 1, arg)
        arg = _op("where")(hit, arg, starts.reshape(tuple(sshape)))
        vals = cand.gather(ax + 1, arg).squeeze(ax + 1)
        off = arg * stride
        if flat is not None:
            off = off + flat.unsqueeze(ax).expand(*cand.shape).gather(ax + 1, arg)
        flat = off.squeeze(ax + 1)
        stride = stride * in_sp[i]
    return flat


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max(2, input, output_size, return_indices)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _tuple(kernel_size, 2)
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (_op("sign")(out) * relu(_op("abs")(out))).mul(kw * kh).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (_op("sign")(out) * relu(_op("abs")(out))).mul(kernel_size).pow(1.0 / norm_type)


# 3-d adaptive max / LP pooling, *_with_indices aliases, max_unpool*, multilabel_margin_loss,
# triplet_margin_with_distance_loss, selu_/celu_/rrelu_ (implemented in ember/nn/_functional_extra.py)
from ._functional_extra import (adaptive_max_pool3d, adaptive_max_pool1d_with_indices,  # noqa: E402
                                adaptive_max_pool2d_with_indices, adaptive_max_pool3d_with_indices,
                                max_pool3d_with_indices, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
                                multilabel_margin_loss, selu_, celu_, rrelu_)
from ._functional_traced import triplet_margin_with_distance_loss  # noqa: E402
from ._mha_functional import multi_head_attention_forward  # noqa: E402
from ._fractional_pool import (fractional_max_pool2d, fractional_max_pool2d_with_indices,  # noqa: E402
                               fractional_max_pool3d, fractional_max_pool3d_with_indices)
# linear_cross_entropy, conv_tbc, grouped_mm/scaled_mm, GRID_SAMPLE_* tables (ember/nn/_functional_gaps.py)
from ._functional_gaps import (linear_cross_entropy, conv_tbc, grouped_mm, scaled_mm, scaled_grouped_mm,  # noqa: E402
                               ScalingType, SwizzleType, GRID_SAMPLE_INTERPOLATION_MODES, GRID_SAMPLE_PADDING_MODES)
from ..overrides import (has_torch_function, has_torch_function_unary, has_torch_function_variadic,  # noqa: E402
                         handle_torch_function)
from .._torch_level_gaps import native_channel_shuffle  # noqa: E402


# ====================================================================== normalisation
def _batch_norm_checks(input, running_mean, running_var, weight, bias, training, momentum, eps,
                       check_dtypes=True):
    """torch's ``F.batch_norm`` checks, in its order: the batch size when training, ``eps``, the
    argument types of ``torch.batch_norm`` (``momentum`` must be a number: ``None`` is the
    module's cumulative average, which ``nn.BatchNorm`` turns into a factor itself), then -- for
    a non-empty input -- the sizes of the statistics and affine parameters. Returns False when
    the input is empty (torch returns before any other check)."""
    if training:
        size = input.size()
        prod = size[0]            # (a plain product: symbolic sizes stay symbolic)
        for d in tuple(size)[2:]:
            prod = prod * d
        if prod == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    elif eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"batch_norm(): argument 'training' (position 6) must be bool, not {type(training).__name__}")
    for name, pos, v in (("momentum", 7, momentum), ("eps", 8, eps)):
        if not isinstance(v, numbers.Real) or isinstance(v, Tensor):
            raise TypeError(f"batch_norm(): argument '{name}' (position {pos}) must be float, not {type(v).__name__}")
    if input.numel() == 0:
        return False
    features = input.shape[1] if input.dim() > 1 else 0
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None:
            if t.numel() != features:
                raise RuntimeError(f"{name} should contain {features} elements not {t.numel()}")
        elif not training:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != features:
            raise RuntimeError(f"{name} should contain {features} elements not {t.numel()}")
    # torch's order from here differs by mode: training checks the rank, the pairing of the
    # running buffers, then the dtypes; evaluation the dtype of the input and the mixed-dtype
    # rule before the rank, the parameters' dtypes (the kernel's) after it
    if training:
        _bn_rank(input)
        if (running_mean is None) != (running_var is None):
            raise ValueError("running_mean and running_var must either both be None or neither be None")
        _bn_dtypes(input, weight, bias, running_mean, running_var, training, check_dtypes)
    else:
        _bn_dtypes(input, weight, bias, running_mean, running_var, training, check_dtypes, rank=True)
    return True


def _bn_rank(input):
    if input.dim() < 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")


def _bn_dtypes(input, weight, bias, running_mean, running_var, training, check_dtypes, rank=False):
    """torch's CPU batch norm dtype rules: a floating input; parameters (weight, bias, running
    statistics) either all of the input's dtype, or -- when the first given one differs from the
    input's ("mixed") -- all float32 with a float16/bfloat16 input. Otherwise the kernel's
    "expected scalar type" for the first parameter read of another dtype (training reads the
    running statistics first, evaluation the affine parameters)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"batch_norm\" not implemented for '{input.dtype.legacy_name}'")
    params = (weight, bias, running_mean, running_var)
    first = next((p for p in params if p is not None), None)
    if check_dtypes and first is not None and first.dtype != input.dtype:
        if any(p is not None and p.dtype is not _t.float32 for p in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        if input.dtype is not _t.float16 and input.dtype is not _t.bfloat16:
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        first = None
    if rank:
        _bn_rank(input)
    if check_dtypes and first is not None:
        order = (running_mean, running_var, weight, bias) if training else params
        for p in order:
            if p is not None and p.dtype != input.dtype:
                raise RuntimeError(f"expected scalar type {input.dtype.legacy_name} but found {p.dtype.legacy_name}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps,
                       getattr(input.device, "type", "cpu") == "cpu")


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, check_dtypes):
    """``F.batch_norm``; ``check_dtypes``: torch's CPU dtype rules (instance_norm's reshaped call,
    and other devices, keep mixed dtypes)."""
    if not _batch_norm_checks(input, running_mean, running_var, weight, bias, training, momentum, eps,
                              check_dtypes):
        out = input.clone()                 # an empty input: torch's early return, its clone (affine by entry 0)
        if weight is not None:
            out = out * weight[0]
        if bias is not None:
            out = out + bias[0]
        return out
    out, mean, rstd = _nn.native_batch_norm(input, weight, bias, running_mean, running_var, training,
                                            momentum if momentum is not None else 0.0, eps)
    if training and (running_mean is not None or running_var is not None):
        m = momentum if momentum is not None else 0.0
        if _nn.half_batch_norm_running_update(input, mean, running_mean, running_var, m) or \
                _eager_fast.batch_norm_running_update(input, mean, running_mean, running_var, m):
            return out
        from ..autograd import no_grad
        with no_grad():
            x = input.detach()
            dims = [0] + list(range(2, x.dim()))
            cnt = x.numel() // x.shape[1]
            if running_mean is not None:
                running_mean.mul_(1 - m).add_(mean.detach().to(running_mean.dtype) * m)
            if running_var is not None:
                shp = (1, x.shape[1]) + (1,) * (x.dim() - 2)
                xc = x - mean.detach().reshape(tuple(shp))
                var_unb = (xc * xc).sum(dims) / max(cnt - 1, 1)
                running_var.mul_(1 - m).add_(var_unb.to(running_var.dtype) * m)
    return out


def _verify_spatial_size(size):
    """Instance statistics over a single spatial element are degenerate; torch refuses them up front."""
    prod = 1
    for n in tuple(size)[2:]:
        prod *= int(n)
    if prod == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {size}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    if use_input_stats:
        _verify_spatial_size(input.size())
    if not use_input_stats:
        return _batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps, False)
    N, C = input.shape[:2]
    x = input.reshape(1, N * C, *tuple(input.shape[2:]))
    w = weight.repeat(N) if weight is not None else None
    b = bias.repeat(N) if bias is not None else None
    rm = running_mean.repeat(N) if running_mean is not None else None
    rv = running_var.repeat(N) if running_var is not None else None
    out = _batch_norm(x, rm, rv, w, b, True, momentum, eps, False)
    if running_mean is not None:
        from ..autograd import no_grad
        with no_grad():
            running_mean.copy_(rm.reshape(N, C).mean(0))
            running_var.copy_(rv.reshape(N, C).mean(0))
    return out.reshape(tuple(input.shape))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    return _nn.native_layer_norm(input, tuple(normalized_shape), weight, bias, eps)[0]


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    N, C = input.shape[0], input.shape[1]
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(input.shape)} and num_groups={num_groups}")
    hxw = int(np.prod(tuple(input.shape[2:]))) if input.dim() > 2 else 1
    return _nn.native_group_norm(input, weight, bias, N, C, hxw, num_groups, eps)[0]


def rms_norm(input, normalized_shape, weight=None, eps=None):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    if tuple(input.shape[input.dim() - k:]) != tuple(normalized_shape):
        # torch's wording, with no comma after the '*'
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape [*"
                           f"{', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    if eps is None:
        # torch's default: the epsilon of the computation's type (float32 for half inputs)
        eps = float(np.finfo(np.float64 if input.dtype is _t.float64 else np.float32).eps)
    dims = list(range(input.dim() - k, input.dim()))
    if input.dtype is _t.float16 or input.dtype is _t.bfloat16:
        # as torch: computed in float32 (the weight multiplied there too), rounded once
        x = input.float()
        out = x * (x.pow(2).mean(dims, keepdim=True) + eps).rsqrt()
        if weight is not None:
            out = out * weight
        return out.to(input.dtype)
    out = input * (input.pow(2).mean(dims, keepdim=True) + eps).pow(-0.5)
    if weight is not None:
        out = out * weight
    return out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    dim = input.dim()
    if dim < 3:
        # torch's message, including the run of spaces left by a line continuation in its source
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    div = (input * input).unsqueeze(1)
    if dim == 3:
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.reshape(tuple(sizes))
    div = (div * alpha + k).pow(beta)
    return input / div


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(norm(input, p, dim), eps)``; with ``out``, written there (torch's out= rules)."""
    if out is not None:
        from ..ops._out import call_with_out
        return call_with_out("normalize", normalize, (input, p, dim, eps), {}, out)
    src = _op("abs")(input) if input.dtype.is_complex else input     # a complex tensor's norm is its modulus's
    if p == 2:
        from ..ops._helpers import wrap_dim
        d = wrap_dim(dim, input.dim())
        denom = _nn._norm2_clamp(src, d, eps)
    else:
        denom = _op("clamp_min")(_op("norm")(src, p, dim, True), eps)
    return input / denom.expand_as(input)


# ====================================================================== embedding / one_hot
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= weight.shape[0]:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -weight.shape[0]:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = weight.shape[0] + padding_idx
    else:
        padding_idx = -1
    _no_complex_autograd("embedding", weight)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    return _nn.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescale (in place, without autograd) the rows of ``weight`` that ``input`` uses to norm <= max_norm.

    Written in tensor ops (gather the rows, their norms in float64, write them back scaled) so
    that ``ember.compile`` traces it into the graph (torch.compile does): read through numpy it
    broke the graph. A row named twice is gathered twice and written twice with the same values.
    Complex tables keep the numpy form (eager only)."""
    if weight.dtype.is_complex or weight.device.type == "meta":
        return _embedding_renorm_numpy(weight, input, max_norm, norm_type)
    from ..linalg import vector_norm
    idx = input.reshape(-1)
    with _no_grad():
        rows = weight.index_select(0, idx).to(_t.float64)
        norms = vector_norm(rows, norm_type, dim=1, keepdim=True)
        scale = _api.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight.index_copy_(0, idx, (rows * scale).to(weight.dtype))
    return weight


def _embedding_renorm_numpy(weight, input, max_norm, norm_type):
    w = weight.detach()._data
    rows = np.unique(np.asarray(input.detach()._data).reshape(-1))
    norms = np.linalg.norm(w[rows].astype(np.complex128 if w.dtype.kind == "c" else np.float64), ord=norm_type,
                           axis=1)
    scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    from ..ops._helpers import half_source      # float64 -> float16 rounds through float32, as torch's cast
    w[rows] = half_source(w[rows] * scale[:, None], w.dtype).astype(w.dtype)
    weight._bump_version()
    return weight


def _check_bag_mode(mode, scale_grad_by_freq, sparse):
    """The reduction modes and what max can't combine with (its gradient is a dense argmax scatter)."""
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    elif mode not in ("sum", "mean"):
        raise ValueError("mode has to be one of sum, mean or max")


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embeddings, as torch.nn.functional.embedding_bag.

    A 2-D ``input`` is a batch of equal-length bags; a 1-D ``input`` is cut into bags at
    ``offsets`` (bag i is ``input[offsets[i]:offsets[i+1]]``; with ``include_last_offset`` the
    last offset ends the last bag). Entries equal to ``padding_idx`` take no part (nor in a
    mean's count); an empty bag gives zeros. Written in ember ops (a bag id per entry from
    ``searchsorted`` over the offsets, then ``index_add`` / ``scatter_reduce``), so it has
    gradients and compiles."""
    _refuse_complex(weight, lambda n: RuntimeError(
        f"Expected tensor for argument #1 'weight' to have one of the following scalar types: Half, BFloat16, "
        f"Float, Double; but got CPU{n}Type instead (while checking arguments for embedding_bag)"))
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if not isinstance(offsets, Tensor):
            raise ValueError(f"offsets has to be a 1D Tensor but got {type(offsets).__name__}")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    _check_bag_mode(mode, scale_grad_by_freq, sparse)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}').")
    # padding entries get no gradient; passing padding_idx on to embedding() also keeps them out
    # of a sparse gradient's indices, as torch's embedding_bag backward does
    pad_row = None if padding_idx is None else (padding_idx if padding_idx >= 0 else weight.shape[0] + padding_idx)
    if input.dim() == 2:
        n_bags, length = input.shape
        if mode == "max" and n_bags and length:
            # equal-length bags: a max over the bag dim (no scatter_reduce(amax), which has no
            # prim, so the compiled graph would run eagerly). Ties share the gradient, as the
            # scatter_reduce path below does.
            emb = embedding(input, weight, pad_row, max_norm, norm_type, scale_grad_by_freq, sparse)
            keep = None if pad_row is None else input != pad_row
            if keep is None:
                return emb.amax(1)
            out = _api.where(keep.unsqueeze(-1), emb, float("-inf")).amax(1)
            return _api.where(keep.any(1).unsqueeze(-1), out, 0.0)
        offsets = _api.arange(0, n_bags * length, max(length, 1), dtype=_t.int64, device=input.device)[:n_bags]
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        include_last_offset = False
    else:
        from .._state import STATE
        # (a check of data: eager only -- under a tracing mode even a real ``offsets`` gives fakes)
        if offsets.numel() and not STATE.modes and not offsets._fake and int(offsets[0].item()) != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {int(offsets[0].item())}")
    starts = offsets[:-1] if include_last_offset else offsets
    n, n_bags, dim = input.shape[0], starts.shape[0], weight.shape[1]
    emb = embedding(input, weight, pad_row, max_norm, norm_type, scale_grad_by_freq, sparse)
    pos = _api.arange(n, dtype=_t.int64, device=input.device)
    bag = _op("searchsorted")(starts.to(_t.int64), pos, right=True) - 1
    keep = _api.ones(n, dtype=_t.bool_, device=input.device)
    if pad_row is not None:
        keep = input != pad_row
    if include_last_offset and offsets.numel():
        keep = keep & (pos < offsets[-1])
    if n_bags == 0 or n == 0:
        # (zeros that still depend on weight, as PyTorch's result: its gradient is zero, not missing)
        out = _api.zeros((n_bags, dim), dtype=weight.dtype, device=weight.device) + emb.sum() * 0
        return out if per_sample_weights is None else out + per_sample_weights.sum() * 0
    bag = bag.clamp(min=0)
    scale = keep.to(emb.dtype)
    if mode == "max":
        filled = _api.where(keep.unsqueeze(-1), emb, float("-inf"))
        init = _api.full((n_bags, dim), float("-inf"), dtype=emb.dtype, device=emb.device)
        out = init.scatter_reduce(0, bag.unsqueeze(-1).expand(n, dim), filled, "amax")
        count = _api.zeros(n_bags, dtype=emb.dtype, device=emb.device).index_add(0, bag, scale)
        return _api.where(count.unsqueeze(-1) > 0, out, 0.0)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights
    out = _api.zeros((n_bags, dim), dtype=emb.dtype, device=emb.device).index_add(0, bag, emb * scale.unsqueeze(-1))
    if mode == "mean":
        count = _api.zeros(n_bags, dtype=emb.dtype, device=emb.device).index_add(0, bag, keep.to(emb.dtype))
        out = out / count.clamp(min=1).unsqueeze(-1)
    return out


def one_hot(tensor, num_classes=-1):
    return _nn.one_hot(tensor, num_classes)


# ====================================================================== padding
def _check_crop(n, lo, hi, axis, mode):
    """Constant padding crops the negative sides before padding (as PyTorch does), so they may not remove
    more than the whole dimension even when the positive side would make the output size non-negative."""
    if mode == "constant" and (lo < 0 or hi < 0) and n + min(lo, 0) + min(hi, 0) < 0:
        raise RuntimeError(f"narrow(): length must be non-negative. (negative padding {lo} and {hi} crops more "
                           f"than the size {n} of dimension {axis})")


def _pad_spec(shape, pad, mode, value):
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    npd = len(pad) // 2
    if npd > len(shape):
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but "
                           f"got padding length {len(pad)} and input of dimension {len(shape)}")
    spec = []
    nd = len(shape)
    for j in range(npd):
        axis = nd - 1 - j
        lo, hi = int(pad[2 * j]), int(pad[2 * j + 1])
        n = shape[axis]
        m = n + lo + hi
        _check_crop(n, lo, hi, axis, mode)
        if m < 0 or (m == 0 and mode != "constant"):
            raise RuntimeError(f"The input size {n}, plus negative padding {lo} and {hi} resulted in a negative "
                               f"output size, which is invalid. Check dimension {axis} of your input.")
        src = np.arange(m, dtype=np.int64) - lo
        mask = None
        if mode == "constant":
            valid = (src >= 0) & (src < n)
            if not valid.all():
                mask = valid
            src = np.clip(src, 0, max(n - 1, 0))
        elif mode == "reflect":
            if lo >= n or hi >= n:
                raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input "
                                   f"dimension, but got: padding ({lo}, {hi}) at dimension {axis} of input "
                                   f"{list(shape)}")
            src = np.abs(src)
            src = np.where(src >= n, 2 * (n - 1) - src, src)
        elif mode == "replicate":
            if n == 0:
                raise RuntimeError("padding size is expected to be nonzero")
            src = np.clip(src, 0, n - 1)
        elif mode == "circular":
            # negative sides crop first; the positive sides then wrap around the cropped range [c0, c1)
            c0, c1 = max(-lo, 0), n - max(-hi, 0)
            if lo > c1 - c0 or hi > c1 - c0:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            src = np.mod(np.arange(m, dtype=np.int64) - max(lo, 0), c1 - c0) + c0
        else:
            raise NotImplementedError(f"Unrecognised padding mode {mode}")
        if lo == 0 and hi == 0:
            continue
        spec.append((axis, src, mask, value))
    return tuple(spec)


def _symbolic(sizes):
    """Whether any size is a SymInt (tracing with symbolic shapes): the index vectors and
    interpolation matrices, built with numpy from plain int sizes in eager mode, are then computed
    by ops in the graph, so the trace stays valid for other sizes."""
    for n in sizes:     # (a plain int first: the ABC check costs ~1 us a size)
        if type(n) is not int and not isinstance(n, numbers.Integral):
            return True
    return False


def _size_tensor(n, dtype, device):
    """The (symbolic) size ``n`` as a 0-d tensor computed by ops, for arithmetic with tensors."""
    from ..fx.experimental.symbolic_shapes import _size_tensor as size_tensor
    return size_tensor(n, device).to(dtype)


def _size_ratio(x, op, num, n, root=False):
    """``op(x, num / n)`` (``root``: ``num / sqrt(n)``) as eager computes it with a Python float,
    for a size ``n`` that may be symbolic. A symbolic ``n`` made a float specialised it (a guard
    on its value: every new size recompiled); here the factor is a 0-d float64 tensor computed
    from the size (the same correctly rounded division / square root as the Python float). The
    op runs in float32 for a half ``x`` (eager's scalar op computes in float32, rounding once to
    the half type; a 0-d operand of a compiled op is first cast to ``x``'s type)."""
    if isinstance(n, numbers.Integral):
        return op(x, num / (math.sqrt(n) if root else n))
    d = _size_tensor(n, _t.float64, x.device)
    if root:
        d = d.sqrt()
    f = num / d
    if x.dtype in (_t.float32, _t.float64):
        return op(x, f.to(x.dtype))
    return op(x.to(_t.float32), f.to(_t.float32)).to(x.dtype)


def _iota(n, dtype, device, start=0):
    from .. import prims
    return prims.iota(n, start, 1, dtype, device)


def _pad_symbolic(input, pad, mode, value):
    """``pad`` with symbolic sizes: the same source index per output position as ``_pad_spec``
    (out-of-range positions masked for ``constant``), computed from an iota and gathered with
    ``index_select``."""
    shape = tuple(input.shape)
    npd = len(pad) // 2
    if len(pad) % 2 or npd > len(shape):
        _pad_spec(shape, pad, mode, value)        # raises the eager error
    out = input
    for j in range(npd):
        axis = len(shape) - 1 - j
        lo, hi = pad[2 * j], pad[2 * j + 1]
        if lo == 0 and hi == 0:
            continue
        n = shape[axis]
        m = n + lo + hi
        _check_crop(n, lo, hi, axis, mode)
        if m < 0 or (m == 0 and mode != "constant"):
            raise RuntimeError(f"The input size {n}, plus negative padding {lo} and {hi} resulted in a negative "
                               f"output size, which is invalid. Check dimension {axis} of your input.")
        src = _iota(m, _t.int64, input.device, -lo)
        nt = _size_tensor(n, _t.int64, input.device)
        mask = None
        if mode == "constant":
            mask = (src >= 0) & (src < nt)
            src = _api.minimum(src.clamp(min=0), nt - 1)
        elif mode == "reflect":
            if lo >= n or hi >= n:
                raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input "
                                   f"dimension, but got: padding ({lo}, {hi}) at dimension {axis} of input "
                                   f"{list(shape)}")
            src = src.abs()
            src = _op("where")(src >= nt, 2 * (nt - 1) - src, src)
        elif mode == "replicate":
            src = _api.minimum(src.clamp(min=0), nt - 1)
        else:   # circular: as in _pad_spec, wrap around the range left after the negative (cropping) sides
            c0, crop = max(-lo, 0), max(-lo, 0) + max(-hi, 0)
            if lo > n - crop or hi > n - crop:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            src = (_iota(m, _t.int64, input.device, -max(lo, 0)) % (nt - crop)) + c0
        out = out.index_select(axis, src)
        if mask is not None:
            shp = [1] * out.dim()
            shp[axis] = -1
            out = out.masked_fill(~mask.reshape(shp), value)
    return out.contiguous() if out is not input else out.clone()


def pad(input, pad, mode="constant", value=None):
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    for i, p in enumerate(pad):
        # a float size would be truncated silently by int(): PyTorch rejects it
        if isinstance(p, numbers.Real) and not isinstance(p, numbers.Integral):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but found element of type "
                            f"{type(p).__name__} at pos {i}")
    pad = tuple(int(p) for p in pad)
    nd = len(pad) // 2
    if mode != "constant":
        if value not in (None, 0):
            raise AssertionError(f'Padding mode "{mode}" doesn\'t take in value argument')
        if len(pad) % 2 == 0 and nd <= input.dim() and (nd > 3 or input.dim() not in (nd + 1, nd + 2)):
            raise NotImplementedError(
                f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if mode in ("reflect", "replicate"):
        input, = _autocast_args(f"{'reflection' if mode == 'reflect' else 'replication'}_pad{nd}d", input)
    if _symbolic(input.shape):
        return _pad_symbolic(input, pad, mode, 0 if value is None else value)
    spec = _pad_spec(tuple(input.shape), pad, mode, 0 if value is None else value)
    if mode == "constant":
        name = "ConstantPadNdBackward0"
    elif mode == "reflect":
        name = f"ReflectionPad{nd}DBackward0"
    elif mode == "replicate":
        name = f"ReplicationPad{nd}DBackward0"
    else:
        name = "CopySlices"
    if not spec:
        return _nn._gather_axes(input, (), name)
    return _nn._gather_axes(input, spec, name)


# ====================================================================== interpolation
def _src_scale(n_in, n_out, align_corners, scale):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return n_in / n_out


def _cached_table(build):
    """``build(*key)`` memoised per key (sizes, scale, flags). Why: an eager interpolate rebuilt its
    index vectors / interpolation matrices on every call (np.add.at ...: ~30 us of a 48 us 8x8
    bilinear upsample). Callers get a fresh copy (~0.3 us), as before: nothing can write into
    the cached table through an op's saved arguments or a traced graph's constants."""
    cache = {}

    def get(*key):
        t = cache.get(key)
        if t is None:
            if len(cache) >= 256:          # sizes vary without bound in a long run: keep it small
                cache.clear()
            t = cache[key] = build(*key)
        return t.copy()
    get.__name__ = build.__name__
    get.__doc__ = build.__doc__
    get.cache = cache
    return get


def _nearest_index(n_in, n_out, scale, exact):
    s = np.float32(_src_scale(n_in, n_out, False, scale))
    dst = np.arange(n_out, dtype=np.float32)
    if exact:
        src = np.floor((dst + np.float32(0.5)) * s)
    else:
        src = np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _linear_matrix(n_in, n_out, align_corners, scale):
    s = _src_scale(n_in, n_out, align_corners, scale)
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * s
    else:
        src = np.maximum((dst + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    l1 = src - i0
    l0 = 1.0 - l1
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), i0), l0)
    np.add.at(m, (np.arange(n_out), i1), l1)
    return m


def _cubic_matrix(n_in, n_out, align_corners, scale):
    A = -0.75
    s = _src_scale(n_in, n_out, align_corners, scale)
    dst = np.arange(n_out, dtype=np.float64)
    src = dst * s if align_corners else (dst + 0.5) * s - 0.5
    i = np.floor(src).astype(np.int64)
    t = src - i

    def c1(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    ws = [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]
    m = np.zeros((n_out, n_in))
    for k, w in zip(range(-1, 3), ws):
        np.add.at(m, (np.arange(n_out), np.clip(i + k, 0, n_in - 1)), w)
    return m


def _aa_filter(mode, x):
    """The anti-aliasing kernels of PyTorch's ``_upsample_*2d_aa`` (Pillow's): triangle, Keys' cubic
    with a = -0.5 (not the -0.75 of plain bicubic), Lanczos-3."""
    x = np.abs(x)
    if mode == "bilinear":
        return np.where(x < 1.0, 1.0 - x, 0.0)
    if mode == "bicubic":
        a = -0.5
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(x == 0, 1.0, np.sin(np.pi * x) / (np.pi * x))
        sinc3 = np.where(x == 0, 1.0, np.sin(np.pi * x / 3) / (np.pi * x / 3))
    return np.where(x < 3.0, sinc * sinc3, 0.0)


_AA_TAPS = {"bilinear": 2, "bicubic": 4, "lanczos": 6}


def _aa_matrix(n_in, n_out, align_corners, scale, mode, dtype_name):
    """(n_out, n_in) weights of an anti-aliased resize along one axis, PyTorch's separable scheme:
    output ``i`` centred at ``s * (i + 0.5)`` reads the inputs within ``support`` (the filter's
    half width, stretched by ``s`` when downsampling), filter values normalised to sum 1. Computed
    in the input's float type (``dtype_name``), as PyTorch's kernel computes its weights."""
    ft = np.dtype(dtype_name).type
    s = ft(_src_scale(n_in, n_out, align_corners, scale))
    half = ft(_AA_TAPS[mode] * 0.5)
    support = half * s if s >= 1.0 else half
    invscale = ft(1.0) / s if s >= 1.0 else ft(1.0)
    width = int(math.ceil(support)) * 2 + 1
    m = np.zeros((n_out, n_in), dtype=np.float64)
    for i in range(n_out):
        center = s * (ft(i) + ft(0.5))
        lo = max(int(center - support + ft(0.5)), 0)
        n = min(max(min(int(center + support + ft(0.5)), n_in) - lo, 0), width)
        taps = np.arange(n, dtype=np.float64) + lo
        w = _aa_filter(mode, ((taps - center + ft(0.5)) * invscale).astype(ft)).astype(ft)
        total = w.sum(dtype=ft)
        if total != 0:
            w = w / total
        m[i, lo:lo + n] = w
    return m


_nearest_index_cached = _cached_table(_nearest_index)
_linear_matrix_cached = _cached_table(_linear_matrix)
_cubic_matrix_cached = _cached_table(_cubic_matrix)
_aa_matrix_cached = _cached_table(_aa_matrix)


def _interpolate_aa(input, in_sp, out, scales, mode, align_corners):
    """``antialias=True`` (bilinear / bicubic / lanczos, 4-D input): one weight matrix per axis, the
    width axis first as PyTorch's kernel; autograd's backward is the transposed resample."""
    if _symbolic(in_sp + out):
        raise NotImplementedError(f"interpolate(mode={mode!r}, antialias=True) with symbolic sizes is not "
                                  f"supported by ember")
    dt = "float64" if input.dtype is _t.float64 else "float32"
    mats = tuple((2 + i, _aa_matrix_cached(in_sp[i], out[i], align_corners, scales[i], mode, dt))
                 for i in (1, 0))
    name = {"bilinear": "UpsampleBilinear2DAaBackward0", "bicubic": "UpsampleBicubic2DAaBackward0",
            "lanczos": "UpsampleLanczos2DAaBackward0"}[mode]
    return _nn._resample(input, mats, name)


def _src_scale_symbolic(n_in, n_out, align_corners, scale, device):
    """``_src_scale`` with sizes that may be symbolic: a Python float, or a float64 0-d tensor
    (the same IEEE double division as the eager one)."""
    if not align_corners and scale is not None and scale > 0:
        return 1.0 / scale
    if align_corners and not n_out > 1:
        return 0.0
    a, b = (n_in - 1, n_out - 1) if align_corners else (n_in, n_out)
    return _size_tensor(a, _t.float64, device) / _size_tensor(b, _t.float64, device)


def _cubic_matrix_symbolic(dst, s, align_corners, last, cols):
    """``_cubic_matrix`` computed by ops from the float64 iota ``dst`` of output positions: the
    same float64 weights, and each of the four taps (index clipped to ``[0, last]``) added in
    the same order as its ``np.add.at`` (a tap's mask is 0 elsewhere, so the sums are equal)."""
    A = -0.75
    src = dst * s if align_corners else (dst + 0.5) * s - 0.5
    fl = src.floor()
    i = fl.to(_t.int64)
    t = src - fl

    def c1(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    m = None
    for k, w in zip(range(-1, 3), (c2(t + 1), c1(t), c1(1 - t), c2(2 - t))):
        idx = (i + k).clamp(min=0)
        idx = _api.minimum(idx, last)
        term = w.reshape(-1, 1) * (idx.reshape(-1, 1) == cols)
        m = term if m is None else m + term
    return m


def _interpolate_symbolic(input, in_sp, out, scales, mode, align_corners):
    """nearest / linear / bicubic resize with symbolic sizes: the eager index vectors
    (``_nearest_index``) and interpolation matrices (``_linear_matrix``, ``_cubic_matrix``)
    computed by ops from iotas, in the same precision (float32 for nearest, float64 for the
    weights)."""
    dev = input.device
    res = input
    for i in range(len(in_sp)):
        axis = 2 + i
        n_in, n_out = in_sp[i], out[i]
        last = _size_tensor(n_in, _t.int64, dev) - 1
        if mode in ("nearest", "nearest-exact"):
            s = _src_scale_symbolic(n_in, n_out, False, scales[i], dev)
            s = float(np.float32(s)) if isinstance(s, float) else s.to(_t.float32)
            dst = _iota(n_out, _t.float32, dev)
            src = ((dst + 0.5) * s if mode == "nearest-exact" else dst * s).floor().to(_t.int64)
            res = res.index_select(axis, _api.minimum(src, last))
            continue
        s = _src_scale_symbolic(n_in, n_out, align_corners, scales[i], dev)
        dst = _iota(n_out, _t.float64, dev)
        cols = _iota(n_in, _t.int64, dev).reshape(1, -1)
        if mode == "bicubic":
            m = _cubic_matrix_symbolic(dst, s, align_corners, last, cols)
        else:
            src = dst * s if align_corners else ((dst + 0.5) * s - 0.5).clamp(min=0.0)
            i0 = _api.minimum(src.floor().to(_t.int64), last)
            i1 = _api.minimum(i0 + 1, last)
            l1 = src - i0
            l0 = 1.0 - l1
            m = l0.reshape(-1, 1) * (i0.reshape(-1, 1) == cols) + l1.reshape(-1, 1) * (i1.reshape(-1, 1) == cols)
        res = _resample_axis_symbolic(res, axis, m, n_in, n_out)
    return res.to(input.dtype).contiguous()


def _resample_axis_symbolic(res, axis, m, n_in, n_out):
    """``_nn._resample``'s step for one axis with symbolic sizes: ``res`` (in its accumulation
    type) times the (n_out, n_in) float64 matrix ``m`` along ``axis``."""
    acc = res.dtype if res.dtype.is_floating_point else _t.float32
    moved = res.to(acc).movedim(axis, -1)
    lead = tuple(moved.shape[:-1])
    # an explicit 2-D mm (matmul's batch folding asks numel(), an int, of the symbolic shape).
    # Its row count is the product of the leading sizes, not -1: reshape's -1 is numel // n_in
    # of the expanded numel, a FloorDiv sympy cannot cancel (n_in a conv's floor size), which
    # inductor refuses in an index, and the sums of products it expands cost seconds a trace.
    rows = 1
    for n in lead:
        rows = rows * n
    return _api.mm(moved.reshape(rows, n_in), m.to(acc).t()).reshape(lead + (n_out,)).movedim(-1, axis)


def _adaptive_matrix_symbolic(n_in, n_out, device):
    """``_adaptive_matrix`` computed by ops from iotas (sizes that may be symbolic): row i is
    1 / (end - start) over its window [floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out)),
    the same float64 values, so a trace needs no guard on the sizes."""
    starts, ends = _adaptive_windows_symbolic(n_in, n_out, device)
    cols = _iota(n_in, _t.int64, device).reshape(1, -1)
    w = 1.0 / (ends - starts).to(_t.float64)
    return _op("where")((cols >= starts) & (cols < ends), w, 0.0)


def _scaled_size(n, scale):
    """``floor(n * scale)`` as the eager float computes it. A symbolic ``n`` stays symbolic when the
    float scale is p / 2**k with p of at most 22 bits: then ``float(n) * scale`` is exact for any
    size below 2**31 and equals the integer ``(n * p) // 2**k``; other scales specialise ``n``."""
    if type(n) is not int and not isinstance(n, numbers.Integral):
        p, q = fractions.Fraction(float(scale)).as_integer_ratio()
        if p.bit_length() <= 22:
            return n * p // q
    return int(math.floor(float(n) * float(scale)))


def _check_resize_sizes(in_sp, out):
    """PyTorch's upsample kernels refuse an empty input or output axis (ember's tables would divide
    by zero). Symbolic sizes are left to the trace."""
    sizes = tuple(in_sp) + tuple(out)
    if not all(isinstance(n, numbers.Integral) for n in sizes) or min(sizes) > 0:
        return
    names = ("D", "H", "W")[3 - len(in_sp):]
    def fmt(v):
        return ", ".join(f"{k}: {n}" for k, n in zip(names, v))
    sep = " and output" if len(in_sp) == 1 else " output"
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({fmt(in_sp)}){sep} "
                       f"({fmt(out)})")


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    nd = input.dim() - 2
    if nd < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the "
                         f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                         f"(got {mode})")
    kernel = {"bicubic": "compute_indices_weights_cubic", "area": "adaptive_avg_pool2d"}.get(
        mode, f"upsample_{mode.replace('-exact', '')}{nd}d")
    _refuse_complex(input, lambda n: NotImplementedError(f"\"{kernel}\" not implemented for '{n}'"))
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | "
                             "bilinear | bicubic | trilinear")
    else:
        if align_corners is None:
            align_corners = False
    need = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3, "lanczos": 2}
    if mode in need and need[mode] != nd:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {need[mode] + 2}D input")
    in_sp = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = _tuple(size, nd, "size")
        scales = [None] * nd
    elif scale_factor is not None:
        sf = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        if len(sf) != nd:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                             f"input with spatial dimensions of {list(in_sp)} and scale_factor of shape {list(sf)}.")
        out = tuple(_scaled_size(in_sp[i], sf[i]) for i in range(nd))
        scales = [None] * nd if recompute_scale_factor else [float(v) for v in sf]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode != "area":
        _check_resize_sizes(in_sp, out)
    if antialias and not (mode in _AA_TAPS and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if antialias:
        return _interpolate_aa(input, in_sp, out, scales, mode, align_corners)
    if mode == "area":
        return _adaptive_avg(nd, input, out)
    if _symbolic(in_sp + out) and mode in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear",
                                            "bicubic"):
        return _interpolate_symbolic(input, in_sp, out, scales, mode, align_corners)
    if mode in ("nearest", "nearest-exact"):
        spec = tuple((2 + i, _nearest_index_cached(in_sp[i], out[i], scales[i], mode == "nearest-exact"), None, 0)
                     for i in range(nd))
        tag = "NearestExact" if mode == "nearest-exact" else "Nearest"
        return _nn._gather_axes(input, spec, f"Upsample{tag}{nd}DBackward0")
    if mode in ("linear", "bilinear", "trilinear"):
        mats = tuple((2 + i, _linear_matrix_cached(in_sp[i], out[i], align_corners, scales[i])) for i in range(nd))
        name = {1: "UpsampleLinear1DBackward0", 2: "UpsampleBilinear2DBackward0",
                3: "UpsampleTrilinear3DBackward0"}[nd]
        return _nn._resample(input, mats, name)
    if mode == "bicubic":
        mats = tuple((2 + i, _cubic_matrix_cached(in_sp[i], out[i], align_corners, scales[i])) for i in range(nd))
        return _nn._resample(input, mats, "UpsampleBicubic2DBackward0")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                              f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                              f"nearest-exact (got {mode})")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _check_shuffle(name, input, factor, what):
    if not isinstance(factor, numbers.Integral) or isinstance(factor, bool):
        raise TypeError(f"{name}(): argument '{what}' (position 2) must be int, not {type(factor).__name__}")
    if input.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


def pixel_shuffle(input, upscale_factor):
    _check_shuffle("pixel_shuffle", input, upscale_factor, "upscale_factor")
    r = int(upscale_factor)
    *lead, c, h, w = tuple(input.shape)
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    oc = c // (r * r)
    x = input.reshape(*lead, oc, r, r, h, w)
    n = len(lead)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    _check_shuffle("pixel_unshuffle", input, downscale_factor, "downscale_factor")
    r = int(downscale_factor)
    *lead, c, h, w = tuple(input.shape)
    for side, n, d in (("height", h, -2), ("width", w, -1)):
        if n % r:
            raise RuntimeError(f"pixel_unshuffle expects {side} to be divisible by downscale_factor, but "
                               f"input.size({d})={n} is not divisible by {r}")
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g*k, *) -> (N, k*g, *): view the channels as a (groups, k) grid and transpose it, so that
    channel ``i*k + j`` moves to ``j*groups + i`` (ShuffleNet); a reshape/transpose/reshape, so autograd
    flows through the view ops."""
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool):
        raise TypeError(f"channel_shuffle(): argument 'groups' (position 2) must be int, not "
                        f"{type(groups).__name__}")
    shape = tuple(input.shape)
    if len(shape) <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(shape)}")
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    c = shape[1]
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {g} groups.")
    x = input.reshape(shape[0], g, c // g, *shape[2:]).transpose(1, 2)
    return x.reshape(shape)


# ====================================================================== dropout
def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _bernoulli_noise(shape, keep, dtype, device):
    """A 0/1 mask with P(1) = keep, drawn by the ``_random`` op from the global generator (an op,
    not raw numpy, so traces record the draw and decompositions turn it into prims.philox_rand)."""
    from ..ops.registry import OPS
    like = _api.empty(*tuple(shape), dtype=dtype, device=device)
    return OPS["_random"].binding(like, "bernoulli", float(keep), 0.0, None)


def _bernoulli_noise_like(input, keep):
    """A 0/1 mask like ``input`` (``empty_like``: a transposed input's layout, so the draws fill
    it in memory order, as PyTorch's ``bernoulli_`` of ``empty_like(input)``)."""
    from ..ops.registry import OPS
    return OPS["_random"].binding(_api.empty_like(input), "bernoulli", float(keep), 0.0, None)


def _apply_noise(input, noise, inplace):
    return input.mul_(noise) if inplace else input * noise


def dropout(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply_noise(input, _api.zeros(*tuple(input.shape), dtype=input.dtype), inplace)
    if not inplace:                       # (_eager_fast: the mask's kernels, no dispatch)
        fast = _eager_fast.dropout(input, p)
        if fast is not None:
            return fast
    noise = _bernoulli_noise_like(input, 1.0 - p)
    noise = noise / (1.0 - p)
    return _apply_noise(input, noise, inplace)


def _feature_dropout(input, p, training, inplace, nd, name):
    _check_p(p)
    if not training or p == 0.0:
        return input
    batched = input.dim() == nd + 2
    if input.dim() not in (nd + 1, nd + 2):
        warnings.warn(f"{name}: Received a {input.dim()}-D input; expected {nd + 1}D or {nd + 2}D", UserWarning)
    shape = tuple(input.shape[:2] if batched else input.shape[:1]) + (1,) * nd
    if p == 1.0:
        return _apply_noise(input, _api.zeros(*shape, dtype=input.dtype), inplace)
    noise = _bernoulli_noise(shape, 1.0 - p, input.dtype, input.device) / (1.0 - p)
    return _apply_noise(input, noise, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _alpha_dropout(input, p, training, inplace, feature):
    _check_p(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    # PyTorch's arithmetic: b = (noise - 1) * (alpha * a) + alpha * a * p, noise * a, then
    # input * noise + b, each step rounded in the input's dtype
    alpha = 1.7580993408473766            # SELU's scale * alpha
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    if feature:
        shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
        keep = _bernoulli_noise(shape, 1.0 - p, input.dtype, input.device)
    else:
        keep = _bernoulli_noise_like(input, 1.0 - p)
    b = (keep - 1) * (alpha * a) + alpha * a * p
    noise = keep * a
    if inplace:
        return input.mul_(noise).add_(b)
    return input * noise + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, True)


# ====================================================================== attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if not _sdp_switches._sdp_runnable():   # ember.nn.attention.sdpa_kernel turned ember's kernel off
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due "
                           "to turning off both the math kernel and the fused kernels.")
    if is_causal and attn_mask is not None and not _flash_cpu_shapes(query, key, value, dropout_p, enable_gqa):
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                           "is_causal=True")
    L, S = query.shape[-2], key.shape[-2]
    E = query.shape[-1]
    # a symbolic head dim keeps 1/sqrt(E) in the graph (math.sqrt specialised it: a recompile per E)
    sc = (1.0 / math.sqrt(E) if isinstance(E, numbers.Integral) else None) if scale is None else scale
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = _repeat_heads(key, rep)
        value = _repeat_heads(value, rep)
    if dropout_p == 0.0 and sc is not None:  # nothing to record or trace: the kernels back to back
        fast = _eager_fast.sdpa(query, key, value, attn_mask, is_causal, sc)
        if fast is not None:
            return fast
    attn = _la.matmul(query, key.transpose(-2, -1))
    attn = attn * sc if sc is not None else _size_ratio(attn, operator.mul, 1.0, E, root=True)
    if attn_mask is not None and attn_mask.dtype is not _t.bool_:
        attn = attn + attn_mask
    if is_causal:
        # built with ops from the sizes (not a constant array), so symbolic traces keep L and S free.
        # With an attn_mask too (PyTorch 2.13 takes both): a bool mask is and-ed with the causal one,
        # a float mask added before the causal -inf
        causal = _api.full((L, S), True, dtype=_t.bool_, device=query.device).tril()
        if attn_mask is not None and attn_mask.dtype is _t.bool_:
            causal = causal & attn_mask
        attn = _op("where")(causal, attn, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype is _t.bool_:
            # a select on the mask tensor (not a constant made from its data: traces stay general)
            attn = _op("where")(attn_mask, attn, float("-inf"))
    attn = _op("softmax")(attn, -1) if attn_mask is None else _safe_softmax(attn)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return _la.matmul(attn, value)


def _flash_cpu_shapes(query, key, value, dropout_p, enable_gqa):
    """Whether PyTorch would pick its CPU flash kernel, the only one that takes an attn_mask together
    with is_causal (the math kernel refuses the pair): 4-D inputs with the same batch, the same
    heads (or grouped ones with enable_gqa), one head dim, and no dropout."""
    if not (query.dim() == key.dim() == value.dim() == 4) or dropout_p != 0.0:
        return False
    (b, h, _, e), (bk, hk, _, ek), (bv, hv, _, ev) = query.shape, key.shape, value.shape
    if not (b == bk == bv and e == ek == ev and hk == hv):
        return False
    return h == hk or (enable_gqa and h % hk == 0)


def _safe_softmax(attn):
    """Softmax over the last dim where a row masked out entirely (all -inf) gives zeros, not NaN, with
    zero gradients: PyTorch's SDPA on CPU (``_safe_softmax``) returns 0 for a query that may attend to
    nothing. The dead rows are zeroed before the softmax too, so its backward sees no NaN."""
    # (a row is all -inf exactly when its max is -inf: a NaN makes the max NaN, as it makes
    # "all -inf" false; amax also exports to ONNX, where ``all`` has no translation)
    dead = attn.amax(-1, keepdim=True) == float("-inf")
    safe = _op("where")(dead, 0.0, attn)
    return _op("where")(dead, 0.0, _op("softmax")(safe, -1))


def _repeat_heads(t, rep):
    shape = tuple(t.shape)
    x = t.unsqueeze(-3).expand(*shape[:-2], rep, *shape[-2:])
    return x.reshape(*shape[:-3], shape[-3] * rep, *shape[-2:])


# ====================================================================== losses
def _check_target_size(input, target, name):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                      f"Please ensure they have the same size.", UserWarning, stacklevel=3)
        from ..ops._helpers import broadcast_shapes
        shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
        return input.expand(tuple(shape)), target.expand(tuple(shape))
    return input, target


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_loss_weight(weight, input):
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")


def _weighted_mean_reduce(loss, weight, reduction):
    """PyTorch's weighted l1 / mse losses: 'mean' is the weighted mean sum(w * l) / sum(w)."""
    if reduction == "mean":
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _check_target_size(input, target, "mse_loss")
    if weight is not None:
        _check_loss_weight(weight, input)
        return _weighted_mean_reduce((input - target).pow(2) * weight, weight, reduction)
    return _nn.mse_loss(input, target, _red(reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _check_target_size(input, target, "l1_loss")
    if weight is None:          # (with a weight PyTorch composes in Python too: no autocast)
        input, target = _autocast_args("l1_loss", input, target)
    loss = _op("abs")(input - target)
    if weight is not None:
        _check_loss_weight(weight, input)
        return _weighted_mean_reduce(loss * weight, weight, reduction)
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _check_target_size(input, target, "smooth_l1_loss")
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    return _nn.smooth_l1_loss(input, target, _red(reduction), float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    input, target = _check_target_size(input, target, "huber_loss")
    if weight is not None:
        _check_loss_weight(weight, input)
        return _reduce(_nn.huber_loss(input, target, 0, float(delta)) * weight, reduction)
    return _nn.huber_loss(input, target, _red(reduction), float(delta))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        from ..ops._helpers import broadcast_shapes
        weight = weight.expand(tuple(broadcast_shapes(tuple(weight.shape), tuple(input.shape))))
    return _nn.binary_cross_entropy(input, target, weight, _red(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if pos_weight is not None:
        # torch combines pos_weight with the target by broadcasting; a shape that can't broadcast
        # is reported in those terms (the kernel would fail with a backend error instead)
        from ..ops._helpers import broadcast_shapes
        broadcast_shapes(tuple(pos_weight.shape), tuple(target.shape))
    input, target, weight, pos_weight = _autocast_args("binary_cross_entropy_with_logits", input, target,
                                                       weight, pos_weight)
    out_dtype = _bce_logits_dtype(input, target)
    if out_dtype is None:
        return _nn.binary_cross_entropy_with_logits(input, target, weight, pos_weight, _red(reduction))
    common = _t.promote_types(input.dtype, target.dtype)
    loss = _nn.binary_cross_entropy_with_logits(input.to(common), target.to(common), weight, pos_weight,
                                                _red(reduction))
    return loss.to(out_dtype)


def _bce_logits_dtype(input, target):
    """The loss's dtype where it is not the logits' (None otherwise): the target's. Why: PyTorch
    computes the loss into ``(1 - target)`` in place, so float32 logits with a float64 target
    give float64, with a float16 one float16 (and weight / pos_weight don't change it). The
    kernel computes in the logits' dtype: it gets both at their promoted dtype instead."""
    if target.dtype is input.dtype or not target.dtype.is_floating_point or not input.dtype.is_floating_point:
        return None
    return target.dtype


def _class_target(input, target):
    """torch's class-index target conventions the kernel doesn't see: Byte targets are accepted
    (as Long) for 1-D and 2-D inputs only -- PyTorch's nll_loss / nll_loss2d kernels take Byte,
    its (N, C, d1, ...) path refuses it with the message below (checked against torch 2.13) --
    and a 1-D input takes a 0-D target or a 1-D one of size 1."""
    if target.dtype is _t.uint8:
        if input.dim() > 2:
            raise RuntimeError("expected scalar type Long but found Byte")
        target = target.long()
    if input.dim() == 1 and target.dim() == 1:
        if target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
        target = target.squeeze(0)
    return target


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = _class_target(input, target)
    if input.dim() >= 2 and target.dim() >= 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}).")
    if weight is None:                    # (_eager_fast: the kernel's common case, no dispatch)
        fast = _eager_fast.nll_loss(input, target, _red(reduction), ignore_index)
        if fast is not None:
            return fast
    out = _nn.nll_loss_nd(input, target, weight, _red(reduction), ignore_index)[0]
    if reduction == "none" and input.dim() not in (1, 2, 4):
        out = out.view(*tuple(out.shape))   # PyTorch folds these ranks to 4-d and views back
    return out


def _check_prob_target(C, weight, ignore_index):
    """What a class-probability target can't combine with: an ignore_index (no class to ignore)
    and a weight of the wrong length."""
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    if weight is not None and weight.numel() != C:
        raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {C} classes or no "
                           f"classes but got weight tensor of shape: {list(weight.shape)}")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _red(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    # class probabilities only when the target has input's shape (torch's rule); any other
    # target is class indices, and the nll kernel reports a float or wrongly shaped one
    probs = target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape)
    if not probs:
        target = _class_target(input, target)
    if label_smoothing == 0.0 and isinstance(target, Tensor):   # (_eager_fast: no dispatch per op)
        fast = _eager_fast.cross_entropy(input, target, weight, _red(reduction), ignore_index)
        if fast is not None:
            return fast
    cdim = 0 if input.dim() == 1 else 1
    C = input.shape[cdim]
    if probs:
        _check_prob_target(C, weight, ignore_index)
    logp = _op("log_softmax")(input, cdim)
    if probs:
        if label_smoothing > 0:
            target = _size_ratio(target * (1 - label_smoothing), operator.add, label_smoothing, C)
        prod = logp * target
        if weight is not None:
            wshape = [1] * input.dim()
            wshape[cdim] = C
            prod = prod * weight.reshape(tuple(wshape))
        if reduction == "none":
            return -prod.sum(cdim)
        if reduction == "sum":
            return -prod.sum()
        # the row count as an integer (numel / C as a float specialised a symbolic size)
        return -prod.sum() / (input.numel() // C)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0.0:
        return nll
    # ops on the target (not numpy on its data), so a trace stays valid for other targets
    keep = target != ignore_index
    if weight is not None:
        wshape = [1] * input.dim()
        wshape[cdim] = C
        smooth = -(logp * weight.reshape(tuple(wshape))).sum(cdim)
    else:
        smooth = -logp.sum(cdim)
    # a select, not a product: the ignored entries' gradient is exactly 0 even if the
    # normaliser below is 0 (PyTorch uses masked_fill)
    smooth = _op("where")(keep, smooth, 0.0)
    if reduction == "mean":
        if weight is not None:
            tc = _op("where")(keep, target, 0)
            wsel = weight.detach().index_select(0, tc.reshape(-1)).reshape(tuple(target.shape))
            denom = _op("where")(keep, wsel, 0.0).sum()
        else:
            denom = keep.sum().to(smooth.dtype)
        ret = smooth.sum() / denom
    elif reduction == "sum":
        ret = smooth.sum()
    else:
        ret = smooth
    return nll * (1 - label_smoothing) + _size_ratio(ret, operator.mul, label_smoothing, C)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss, as torch.nn.functional.ctc_loss.

    ``log_probs`` is ``(T, N, C)`` (or ``(T, C)`` unbatched) log-probabilities over C classes;
    ``targets`` are padded ``(N, S)`` or concatenated 1-D labels; the lengths are tensors or
    sequences of ints. ``reduction='mean'`` divides each loss by its target length (at least 1)
    and averages over the batch; ``zero_infinity`` replaces infinite losses (no alignment fits)
    and their gradients by zeros. Written in ember ops (see ``ember.nn._ctc``), so it has
    autograd, fake-tensor and compiler support; ``log_probs.grad`` follows PyTorch's convention
    (``exp(log_probs) - posterior`` on the used frames)."""
    from ..ops.reduction import _overridden
    from ._ctc import ctc_loss as _ctc_loss
    # fx proxies record this call whole (its Python checks and loop cannot run on proxies)
    kw = {k: v for k, v, d in (("blank", blank, 0), ("reduction", reduction, "mean"),
                               ("zero_infinity", zero_infinity, False)) if v != d}
    r = _overridden(ctc_loss, (log_probs, targets, input_lengths, target_lengths), kw)
    if r is not NotImplemented:
        return r
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    input, target = _autocast_args("kl_div", input, target)
    if log_target:
        loss = _op("exp")(target) * (target - input)
    else:
        if hasattr(_api, "xlogy"):
            tlogt = _api.xlogy(target, target)
        else:
            tlogt = _op("where")(target == 0, target * 0, target * _op("log")(target))
        loss = tlogt - target * input
    if reduction == "batchmean":
        if input.dim() == 0:
            return loss.sum()
        n = input.shape[0]
        # a symbolic batch size divides as a tensor computed in the graph (ops take Python numbers)
        return loss.sum() / (n if isinstance(n, numbers.Integral) else _size_tensor(n, loss.dtype, loss.device))
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _autocast_args("poisson_nll_loss", input, target)
    if log_input:
        loss = _op("exp")(input) - target * input
    else:
        loss = input - target * _op("log")(input + eps)
    if full:
        t = target
        stirling = t * _op("log")(t) - t + 0.5 * _op("log")(2 * math.pi * t)
        # masked_fill, as PyTorch: the term is NaN/-inf at t == 0 and must be dropped, not multiplied by 0
        loss = loss + stirling.masked_fill(t <= 1, 0)
    return _reduce(loss, reduction)


def _gaussian_var_shape(input, var):
    """torch's accepted variance shapes: input's (heteroscedastic), input's without the last dim
    (homoscedastic, unsqueezed here to broadcast), or input's with exactly one dim of size 1 where
    input's differs (e.g. (N, 1) or (1, C) for an (N, C) input)."""
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape == ishape:
        return var
    if ishape[:-1] == vshape:
        return var.unsqueeze(-1)
    if len(ishape) == len(vshape) and sum(v for i, v in zip(ishape, vshape) if i != v) == 1:
        return var
    raise ValueError("var is of incorrect size")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _api.full(tuple(input.shape), float(var), dtype=input.dtype)
    elif bool(_api.lt(var, 0).any()):
        raise ValueError("var has negative entry/entries")
    var = _gaussian_var_shape(input, var)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    from ..autograd import no_grad
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps) if hasattr(var, "clamp_") else var.copy_(_make(np.maximum(var._data, eps)))
    loss = 0.5 * (_op("log")(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input1, input2, target = _autocast_args("margin_ranking_loss", input1, input2, target)
    return _reduce(_op("clamp_min")(-target * (input1 - input2) + margin, 0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _autocast_args("hinge_embedding_loss", input, target)
    where = _op("where")
    zeros = input * 0
    margin_clamp = _op("clamp_min")(margin - input, 0)
    out_margin = where(target != 1, margin_clamp, zeros)
    out_self = where(target != -1, input, zeros)
    return _reduce(out_margin + out_self, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _autocast_args("soft_margin_loss", input, target)
    # (-input) * target, as torch: a broadcast error then names the operands in torch's order
    return _reduce(_op("log1p")(_op("exp")(-input * target)), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(loss.dim() - 1) / input.shape[-1]
    return _reduce(loss, reduction)


def _check_cosine_embedding(input1, input2, target):
    """torch's rank rules: a 1-D target pairs 2-D inputs (a batch), a 0-D one 1-D inputs."""
    if target.dim() not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.dim() == 1 and not (input1.dim() == 2 and input2.dim() == 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if target.dim() == 0 and not (input1.dim() == 1 and input2.dim() == 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_cosine_embedding(input1, input2, target)
    input1, input2, target = _autocast_args("cosine_embedding_loss", input1, input2, target)
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    m1 = (input1 * input1).sum(-1) + eps
    m2 = (input2 * input2).sum(-1) + eps
    cos = prod / (m1 * m2).pow(0.5)
    where = _op("where")
    pos = 1 - cos
    neg = _op("clamp_min")(cos - margin, 0)
    zeros = cos * 0
    loss = where(target == 1, pos, zeros) + where(target == -1, neg, zeros)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    anchor, positive, negative = _autocast_args("triplet_margin_loss", anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = _op("minimum")(d_neg, d_swap)
    return _reduce(_op("clamp_min")(margin + d_pos - d_neg, 0), reduction)


def _data_checks_allowed(*tensors):
    """Checks that read tensor values run eagerly only: under a tracing mode (or on fakes)
    there are no values to read, and the compiled graph must not depend on them."""
    from .._state import STATE
    return not STATE.modes and not any(t._fake for t in tensors)


def _check_multi_margin(input, target, weight):
    """torch's shape checks for multi_margin_loss: a non-empty vector / matrix (or a scalar), one
    class index per sample, one weight per class, and (eagerly) every target a class."""
    nd = input.dim()
    if not ((nd == 2 and input.shape[1] != 0) or (nd == 1 and input.shape[0] != 0) or nd == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    nframe = input.shape[0] if nd == 2 else 1
    dim = input.shape[-1] if nd >= 1 else 1
    if target.dim() > 1 or target.numel() != nframe:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{nframe}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
    if target.numel() and _data_checks_allowed(target):
        if int(target.min().item()) < 0 or int(target.max().item()) >= dim:
            raise RuntimeError("target out of range")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    _check_multi_margin(input, target, weight)
    input, target, weight = _autocast_args("multi_margin_loss", input, target, weight)
    x = input.reshape(1, -1) if input.dim() < 2 else input
    t = target.reshape(-1)
    C = x.shape[1]
    xt = _op("gather")(x, 1, t.unsqueeze(1))
    z = margin - xt + x
    # where(z > 0), not clamp_min: PyTorch's backward passes no gradient where z == 0 exactly
    z = _op("where")(z > 0, z, 0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * _op("index_select")(weight, 0, t).unsqueeze(1)
    mask = 1 - one_hot(t, C).to(x.dtype)
    loss = (z * mask).sum(1) / C
    if target.dim() == 0:
        # torch's unreduced output has the target's rank: (nframe,) for a 1-D target, () for 0-D
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


# ====================================================================== distances
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    from ..ops._helpers import broadcast_shapes, wrap_dim
    for t in (x1, x2):
        _refuse_complex(t, lambda n: RuntimeError(f"expected common dtype to be floating point, yet common dtype "
                                                  f"is {n}"))
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    if tuple(x1.shape) != shape:
        x1 = x1.expand(tuple(shape))
    if tuple(x2.shape) != shape:
        x2 = x2.expand(tuple(shape))
    d = wrap_dim(dim, len(shape))
    n1 = _nn._norm2_clamp(x1, d, eps)
    n2 = _nn._norm2_clamp(x2, d, eps)
    return ((x1 / n1) * (x2 / n2)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    diff = x1 - x2 + eps
    dim = max(x1.dim(), x2.dim()) - 1
    if dim < 0:
        dim = 0
    return _op("norm")(diff, p, dim, keepdim)


def pdist(input, p=2):
    _refuse_complex(input, lambda n: RuntimeError("pdist only supports floating-point dtypes"))
    n = input.shape[0]
    iu = np.triu_indices(n, 1)
    a = _op("index_select")(input, 0, _make(iu[0].astype(np.int64)))
    b = _op("index_select")(input, 0, _make(iu[1].astype(np.int64)))
    return _op("norm")(a - b, p, 1)


# ====================================================================== activations (other op families)
def _act(name, x, inplace=False, *args, **kw):
    if inplace:
        return _op(name + "_")(x, *args, **kw)
    return _op(name)(x, *args, **kw)


def relu(input, inplace=False):
    return _act("relu", input, inplace)


def relu_(input):
    return _op("relu_")(input)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _act("leaky_relu", input, inplace, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return _op("leaky_relu_")(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return _act("elu", input, inplace, alpha)


def elu_(input, alpha=1.0):
    return _op("elu_")(input, alpha)


def selu(input, inplace=False):
    return _act("selu", input, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _act("celu", input, inplace, alpha)


def gelu(input, approximate="none"):
    return _op("gelu")(input, approximate=approximate)


def silu(input, inplace=False):
    if not inplace:
        _no_complex_autograd("silu", input)
    return _act("silu", input, inplace)


def mish(input, inplace=False):
    return _act("mish", input, inplace)


def hardswish(input, inplace=False):
    return _act("hardswish", input, inplace)


def hardsigmoid(input, inplace=False):
    return _act("hardsigmoid", input, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _act("hardtanh", input, inplace, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def softplus(input, beta=1.0, threshold=20.0):
    return _op("softplus")(input, beta, threshold)


def sigmoid(input):
    return _op("sigmoid")(input)


def tanh(input):
    return _op("tanh")(input)


def logsigmoid(input):
    return _op("log_sigmoid")(input) if hasattr(_api, "log_sigmoid") else _op("logsigmoid")(input)


def softsign(input):
    return input / (_op("abs")(input) + 1)


def tanhshrink(input):
    return input - _op("tanh")(input)


def softshrink(input, lambd=0.5):
    return _op("softshrink")(input, lambd)


def hardshrink(input, lambd=0.5):
    return _op("hardshrink")(input, lambd)


def threshold(input, threshold, value, inplace=False):
    return _act("threshold", input, inplace, threshold, value)


def threshold_(input, threshold, value):
    return _op("threshold_")(input, threshold, value)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if not training:
        out = leaky_relu(input, (lower + upper) / 2, inplace)
        # PyTorch's rrelu writes into a contiguous buffer (leaky_relu keeps a permuted layout)
        return out if inplace else out.contiguous()
    # PyTorch's rrelu_with_noise: a uniform(lower, upper) slope drawn for each value <= 0 in
    # turn from the generator's Mersenne Twister (its numbers), the product in float for the
    # 16-bit floats (ember._mt19937.rrelu_noise)
    if input.dtype.np not in (np.float32, np.float64) and input.dtype.name != "bfloat16":
        raise NotImplementedError(f'"rrelu_with_noise_out_cpu" not implemented for \'{input.dtype.legacy_name}\'')
    from .. import random as _random, _mt19937
    xs = np.asarray(input.detach().contiguous()._data)
    noise = _mt19937.rrelu_noise(_random.default_generator._mt, xs, lower, upper)
    x = input if input.dtype.np in (np.float32, np.float64) else input.float()
    out = (x * _make(noise)).to(input.dtype)
    if inplace:
        return input.copy_(out)
    return out.contiguous()


def prelu(input, weight):
    if weight.numel() != 1:
        # one weight per channel: dim 1 (an input of fewer dims has one channel), as torch checks
        channels = input.shape[1] if input.dim() >= 2 else 1
        if weight.numel() != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
    if input.dim() == 0:
        # a 0-d input stays 0-d (the (1,) weight must not broadcast it up to (1,))
        weight = weight.reshape(())
    if weight.numel() != 1 and input.dim() >= 2:
        shape = [1] * input.dim()
        shape[1] = weight.numel()
        weight = weight.reshape(tuple(shape))
    # x > 0, as PyTorch's kernel: at x == 0 the gradient is the weight's (and 0 * w keeps w's sign)
    return _op("where")(input > 0, input, input * weight)


def glu(input, dim=-1):
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    return _op("glu")(input, dim)


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                  f"dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _op("softmax")(input, dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _op("softmax")(-input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _op("log_softmax")(input, dim)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    # PyTorch's: -log(exponential_()) of a contiguous tensor like the logits (the same draws;
    # the float32 log is numpy's, PyTorch's vectorised one can differ in the last bit)
    gumbels = -_api.empty(*tuple(logits.shape), dtype=logits.dtype, device=logits.device).exponential_().log()
    gumbels = (logits + gumbels) / tau
    y_soft = softmax(gumbels, dim)
    if hard:
        index = np.asarray(y_soft.detach()._data).argmax(dim)
        y_hard = np.zeros(tuple(logits.shape), dtype=logits.dtype.np)
        np.put_along_axis(y_hard, np.expand_dims(index, dim), 1.0, axis=dim)
        return _make(y_hard) - y_soft.detach() + y_soft
    return y_soft


def _sliding_blocks(size, k, dl, pd, st, head):
    """Number of kernel positions along each spatial dim (im2col's L), which must be positive."""
    L = [(size[i] + 2 * pd[i] - dl[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2)]
    if any(n < 1 for n in L):       # (not min(L): comparing two symbolic counts is a guard)
        raise RuntimeError(f"{head}, calculated shape of the array of sliding blocks as {tuple(L)}, but its "
                           f"components must be at least one.")
    return L


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), as a convolution with an identity kernel."""
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    unb = input.dim() == 3
    x = input.unsqueeze(0) if unb else input
    k = _tuple(kernel_size, 2)
    st, pd, dl = _tuple(stride, 2), _tuple(padding, 2), _tuple(dilation, 2)
    _sliding_blocks(tuple(x.shape[2:]), k, dl, pd, st, "Given input with spatial size "
                    f"{tuple(x.shape[2:])}, kernel_size={k}, dilation={dl}, padding={pd}")
    N, C = x.shape[:2]
    K = k[0] * k[1]
    # channels folded into the batch, one (K, 1, kh, kw) identity kernel: a grouped convolution
    # with C groups (and a C*K kernel built over range(C)) specialised a symbolic channel count
    # (prims.convolution takes its group count as a plain int): a recompile for every C
    out = _nn.convolution(x.reshape(N * C, 1, x.shape[2], x.shape[3]), _unfold_kernel(k, x.dtype, x.device),
                          None, st, pd, dl, False, (0, 0), 1)
    # L is the product of the two block counts, not -1: reshape's -1 is numel // (N*C*K) of the
    # expanded numel, a FloorDiv sympy cannot cancel with symbolic sizes (inductor refused it as
    # a size and the graph ran eagerly); see _resample_axis_symbolic
    out = out.reshape(N, C * K, out.shape[2] * out.shape[3])
    return out.squeeze(0) if unb else out


def _unfold_kernel(k, dtype, device):
    """The (K, 1, kh, kw) identity kernel of unfold/fold: output channel j is kernel tap j."""
    K = k[0] * k[1]
    eye = np.zeros((K, 1, k[0], k[1]), dtype=dtype.np)
    for j in range(K):
        eye[j, 0, j // k[1], j % k[1]] = 1
    return _make(eye).to(device)


def _fold_output_size(v):
    """fold's ``output_size`` as a pair, symbolic sizes kept (``_tuple`` takes ``int()`` of each:
    ``fold(cols, x.shape[-2:], ...)`` under dynamic=True specialised the output size, a recompile
    for every input size)."""
    from ..fx.experimental.symbolic_shapes import is_symbolic
    if is_symbolic(v):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) in (1, 2) and any(is_symbolic(n) for n in v):
        seq = tuple(n if is_symbolic(n) else int(n) for n in v)
        return seq * 2 if len(seq) == 1 else seq
    return _tuple(v, 2)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: the adjoint of ``unfold`` (a transposed convolution with an identity kernel)."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
                           f"non-zero dimensions for input, but got: {list(input.shape)}")
    unb = input.dim() == 2
    x = input.unsqueeze(0) if unb else input
    k = _tuple(kernel_size, 2)
    K = k[0] * k[1]
    if x.shape[1] % K:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={k}.")
    C = x.shape[1] // K
    osz = _fold_output_size(output_size)
    st, pd, dl = _tuple(stride, 2), _tuple(padding, 2), _tuple(dilation, 2)
    head = f"Given output_size={osz}, kernel_size={k}, dilation={dl}, padding={pd}, stride={st}"
    L = _sliding_blocks(osz, k, dl, pd, st, head)
    if x.shape[2] != L[0] * L[1]:
        raise RuntimeError(f"{head}, expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {L[0]} * {L[1]} = {L[0] * L[1]}, but got input.size(2)={x.shape[2]}.")
    # channels folded into the batch, as unfold (no C groups: a symbolic C stays symbolic)
    N = x.shape[0]
    cols = x.reshape(N * C, K, L[0], L[1])
    out = _nn._conv_input_grad(cols, _unfold_kernel(k, x.dtype, x.device), st, pd, dl, 1, (N * C, 1) + osz)
    out = out.reshape((N, C) + osz)
    return out.squeeze(0) if unb else out


# ====================================================================== grid sampling
_GRID_DEFAULT_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                         "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                         "documentation of grid_sample for details.")


def _grid_size(n, dtype, device):
    """A spatial size for arithmetic with tensors: the int itself, or (symbolic size) a 0-d tensor."""
    return n if isinstance(n, numbers.Integral) else _size_tensor(n, dtype, device)


def _affine_linspace(n, align_corners, dtype, device):
    """ATen's ``linspace_from_neg_one``: ``linspace(-1, 1, n)`` (computed in ``dtype`` as the CPU kernel
    does, from both ends towards the middle), scaled by ``(n - 1) / n`` without ``align_corners``;
    ``[0]`` for a single step."""
    if isinstance(n, numbers.Integral):
        if n <= 1:
            return _make(np.zeros(n, dtype=dtype.np)).to(device)
        f = dtype.np.type
        step = f(2) / f(n - 1)
        i = np.arange(n).astype(dtype.np)
        r = np.where(np.arange(n) < n // 2, f(-1) + step * i, f(1) - step * (f(n - 1) - i)).astype(dtype.np)
        if not align_corners:
            r = (r * f(n - 1)) / f(n)
        return _make(np.ascontiguousarray(r, dtype=dtype.np)).to(device)
    # symbolic size (never 0 or 1 under the shape environment's guards): the same formula by ops
    nt = _size_tensor(n, dtype, device)
    i = _iota(n, dtype, device)
    step = 2 / (nt - 1)
    r = _op("where")(i < (nt / 2).floor(), -1 + step * i, 1 - step * (nt - 1 - i))
    return r * (nt - 1) / nt if not align_corners else r


def affine_grid(theta, size, align_corners=None):
    """Sampling grid of the affine maps ``theta`` (N x 2 x 3 for a 4-D ``size`` (N, C, H, W), N x 3 x 4
    for a 5-D one): ``grid[n, ..., :] = theta[n] @ (x, y[, z], 1)`` over the normalised output
    coordinates in [-1, 1] (pixel corners with ``align_corners``, pixel centres without)."""
    if align_corners is None:
        warnings.warn(_GRID_DEFAULT_WARNING, stacklevel=2)
        align_corners = False
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be Tensor, not {type(theta).__name__}")
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(size)
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {theta.shape}.")
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {theta.shape}.")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the "
                      "documentation of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    N = size[0]
    if theta.shape[0] != N:
        raise RuntimeError(f"affine_grid(): expected theta to have batch size size[0]={N}, but got theta with "
                           f"shape {list(theta.shape)}")
    nd = len(spatial)
    dt, dev = theta.dtype, theta.device
    # base[..., k] is the normalised coordinate along spatial axis nd-1-k (x, y[, z]), then a column of ones
    cols = []
    for k in range(nd):
        a = nd - 1 - k
        shp = [1] * nd
        shp[a] = -1
        cols.append(_affine_linspace(spatial[a], align_corners, dt, dev).reshape(shp).expand(spatial))
    cols.append(_api.ones(spatial, dtype=dt, device=dev))
    base = _api.stack(cols, -1).reshape(1, -1, 1, nd + 1)           # (1, L, 1, nd+1)
    grid = (base * theta.unsqueeze(1)).sum(-1)                       # (N, L, nd)
    return grid.reshape((N,) + spatial + (nd,))


def _grid_unnormalize(coord, size, align_corners):
    """Grid coordinate in [-1, 1] to input pixel units (-1 / 1 are the centres of the corner pixels with
    ``align_corners``, their outer edges without)."""
    if align_corners:
        return ((coord + 1) / 2) * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _grid_clip(coord, size, nan_to_zero=False):
    """ATen's ``clip_coordinates`` into [0, size - 1], as selects rather than a clamp: the gradient is 0
    on the bounds themselves (``clip_coordinates_set_grad``). A NaN coordinate reads the last pixel in
    the scalar kernel (5-D input: ``min(size - 1, max(x, 0))`` with NaN) and the first pixel in the
    vectorized 2-D one (``nan_to_zero``: its SIMD min/max drop the NaN operand); +-inf go to the bounds."""
    where = _op("where")
    if nan_to_zero:
        return where(coord >= size - 1, size - 1, where(coord > 0, coord, 0.0))
    return where(coord <= 0, 0.0, where(coord < size - 1, coord, size - 1))


def _grid_reflect(coord, twice_low, twice_high):
    """ATen's ``reflect_coordinates``: fold ``coord`` into [low, high] by reflecting at the bounds."""
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (coord - lo).abs()
    extra = c.fmod(span)
    odd = (c / span).floor().fmod(2) != 0
    return _op("where")(odd, span - extra + lo, extra + lo)


def _grid_pad_coords(coord, size, padding_mode, align_corners, nan_to_zero=False):
    """ATen's ``compute_coordinates``: where an input-pixel coordinate out of range reads from.
    Reflecting a non-finite coordinate gives NaN, which the clip then sends to a bound (see _grid_clip)."""
    if padding_mode == "border":
        return _grid_clip(coord, size, nan_to_zero)
    if padding_mode == "reflection":
        if align_corners:
            if isinstance(size, numbers.Number) and size == 1:
                return coord * 0          # twice_low == twice_high: every point reads pixel 0
            coord = _grid_reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _grid_reflect(coord, -1, 2 * size - 1)
        return _grid_clip(coord, size, nan_to_zero)
    return coord


def _grid_nonfinite_is_nan(nd, mode, padding_mode):
    """Whether a sample at a non-finite (NaN / +-inf) grid point comes out NaN, as on PyTorch's CPU.

    4-D input runs ATen's vectorized 2-D kernel, which multiplies the (masked, zero) corner values by
    the interpolation weights, NaN there: bilinear with zeros padding and bicubic (whose weights come
    from the unpadded coordinate) with any padding give NaN. Nearest has no weights (zeros padding:
    0), and bilinear border / reflection clip the coordinate first (finite weights). 5-D input runs
    the scalar kernel, which skips out-of-range corners instead: 0 with zeros padding, never NaN."""
    return nd == 2 and (mode == "bicubic" or (mode == "bilinear" and padding_mode == "zeros"))


def _cubic_weights(t):
    """The four cubic-convolution coefficients (A = -0.75) of the taps at floor - 1 .. floor + 2."""
    A = -0.75

    def c1(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def _check_grid_sample(input, grid, mode):
    for name, v in (("input", input), ("grid", grid)):
        if not isinstance(v, Tensor):
            raise TypeError(f"grid_sample(): argument '{name}' must be Tensor, not {type(v).__name__}")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have a floating point dtype, but got "
                           f"{input.dtype}")
    if input.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{input.device} and grid is on {grid.device}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.dim() - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in last dimension, but "
                           f"got grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and input.dim() == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    for i in range(2, input.dim()):
        if input.shape[i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i} being empty")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, [D,] H, W) at the normalised locations ``grid`` (N, [D_out,] H_out, W_out,
    2 or 3; ``grid[..., 0]`` indexes W, ``[..., 1]`` H, ``[..., 2]`` D) as ``torch.nn.functional.grid_sample``.

    Composed of ember ops (so autograd w.r.t. input and grid, and ``ember.compile``, come for free): the
    source coordinates are unnormalised and padded (border / reflection) per axis, every tap of the
    interpolation stencil (2**nd corners, 1 nearest sample, 4 x 4 bicubic taps) gets a flat index and a
    weight (zero where the tap falls outside the input), and one ``gather`` reads all taps.

    Non-finite grid points follow PyTorch's CPU kernels (float32 / float64): see ``_grid_clip`` and
    ``_grid_nonfinite_is_nan``. float16 / bfloat16 sample with float32 coordinates, hence float32's rules
    (PyTorch's reduced-precision 2-D kernel differs for nearest with zeros padding: it reads pixel 0)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_GRID_DEFAULT_WARNING, stacklevel=2)
        align_corners = False
    _check_grid_sample(input, grid, mode)
    input, grid = _autocast_args("grid_sampler", input, grid)
    import itertools
    where = _op("where")
    nd = input.dim() - 2
    N, C = input.shape[0], input.shape[1]
    in_sp = tuple(input.shape[2:])
    out_sp = tuple(grid.shape[1:-1])
    dev = input.device
    # half-precision coordinates would be too coarse: compute in float32, cast the result back
    cdt = input.dtype if input.dtype in (_t.float32, _t.float64) else _t.float32
    src, g = input.to(cdt), grid.to(cdt)
    sizes = [_grid_size(n, cdt, dev) for n in in_sp]
    # taps[a]: (position, weight) pairs along spatial axis a (the order of input's dims: D, H, W)
    taps = []
    nonfinite = None              # (N, *out_sp): a grid coordinate is NaN / +-inf, when that gives NaN
    for a in range(nd):
        n = sizes[a]
        c = _grid_unnormalize(g.select(-1, nd - 1 - a), n, align_corners)
        if _grid_nonfinite_is_nan(nd, mode, padding_mode):
            bad = c.detach().isfinite().logical_not()
            nonfinite = bad if nonfinite is None else nonfinite | bad
        if mode == "bicubic":
            # the stencil sits at floor(c) - 1 .. floor(c) + 2 of the unpadded coordinate; padding
            # moves each (integer) tap position, not the sample point
            lo = c.detach().floor()
            ws = _cubic_weights(c - lo)
            pos = [_grid_pad_coords(lo + (k - 1), n, padding_mode, align_corners, nd == 2) for k in range(4)]
            taps.append(list(zip(pos, ws)))
            continue
        c = _grid_pad_coords(c, n, padding_mode, align_corners, nd == 2)
        if mode == "nearest":
            r = c.round()                 # half to even, as nearbyint; zero gradient w.r.t. the grid
            taps.append([(r.detach(), r * 0 + 1)])   # r * 0 keeps the grid in the graph (torch: zero grad)
        else:
            lo = c.detach().floor()
            taps.append([(lo, (lo + 1) - c), (lo + 1, c - lo)])
    # per-axis validity and clamped integer indices of every tap position
    axis = []
    for a in range(nd):
        n = in_sp[a]
        last = n - 1 if isinstance(n, numbers.Integral) else sizes[a] - 1
        entries = []
        for p, w in taps[a]:
            ok = (p >= 0) & (p <= last)
            entries.append((ok, where(ok, p, 0).to(_t.int64), w))
        axis.append(entries)
    strides, s = [], 1
    for a in reversed(range(nd)):
        strides.insert(0, s)
        s = s * (in_sp[a] if isinstance(in_sp[a], numbers.Integral) else _size_tensor(in_sp[a], _t.int64, dev))
    idxs, wts = [], []
    for combo in itertools.product(*axis):
        ok, lin, w = None, None, None
        for a, (oka, ia, wa) in enumerate(combo):
            ok = oka if ok is None else ok & oka
            term = ia * strides[a] if a < nd - 1 else ia
            lin = term if lin is None else lin + term
            w = wa if w is None else w * wa
        idxs.append(lin)
        wts.append(where(ok, w, 0))   # where, not a product: an out-of-range tap adds nothing (not nan)
    K, L, P = len(idxs), math.prod(out_sp), math.prod(in_sp)   # explicit sizes: -1 is ambiguous if empty
    index = _api.stack(idxs, 1).reshape(N, 1, K * L).expand(N, C, K * L)
    vals = src.reshape(N, C, P).gather(2, index).reshape(N, C, K, L)
    w = _api.stack(wts, 1).reshape(N, 1, K, L)
    out = (vals * w).sum(2).reshape((N, C) + out_sp)
    if nonfinite is not None:
        out = where(nonfinite.unsqueeze(1), math.nan, out)
    return out.to(input.dtype) if cdt != input.dtype else out


__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and callable(v)
           and getattr(v, "__module__", None) == __name__]

# torch's out= on the few functional ops whose torch version takes it (ember/ops/_out.py)
from ..ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), _out_mod.FUNCTIONAL, "")
del _out_mod

# nested tensors' routing of linear/softmax/relu/... (ember/nested/_install.py), installed when
# this module loads so that ``import ember`` need not import ember.nn
from ..nested._install import route_functional as _route_nested  # noqa: E402
_route_nested(__import__("sys").modules[__name__])
del _route_nested
