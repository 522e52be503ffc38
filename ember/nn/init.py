"""Parameter initialisation (``torch.nn.init``): every function fills its tensor in place,
without recording autograd, drawing from ember's generator (or the one given)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_", "sparse_"]


def _no_grad():
    from ..autograd import no_grad
    return no_grad()


def _assign(tensor, arr):
    """Write a host numpy array into ``tensor`` in place (cast to its dtype), bumping its version."""
    data = tensor._data
    if isinstance(data, np.ndarray):
        data[...] = np.asarray(arr).astype(data.dtype)
    else:  # cupy
        import cupy
        data[...] = cupy.asarray(np.asarray(arr)).astype(data.dtype)
    tensor._bump_version()
    return tensor


def _meta_fill(tensor):
    """A tensor on the meta device has no values to draw: the initialiser only marks it written
    (``with ember.device("meta"): model = Big()`` must not compute a QR or draw the numbers)."""
    if tensor.device.type != "meta":
        return None
    tensor._bump_version()
    return tensor


def _gen(generator):
    from ..random import default_generator
    return (generator if generator is not None else default_generator)._np


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with _no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with _no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b] (exact, by rejection: accepted draws keep the distribution;
    PyTorch's two samplers, so the same numbers for the same seed)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of "
                      "values may be incorrect.", stacklevel=2)
    if _meta_fill(tensor) is not None:
        return tensor
    # PyTorch's samplers, the same draws from ember's generator: most of the mass inside [a, b]
    # (p > 0.3): normal_ and redraws of the values outside; else uniform candidates on [a, b]
    # accepted with probability pdf / peak (log of a uniform against the log ratio)
    from ..ops import api as _api

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    with _no_grad():
        p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
        if p > 0.3:
            lo = float(np.array(a, dtype=tensor.dtype.np)) if tensor.dtype.is_floating_point else a
            hi = float(np.array(b, dtype=tensor.dtype.np)) if tensor.dtype.is_floating_point else b
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                mask = (result < lo) | (result > hi)
                if not bool(mask.any()):
                    break
                result = _api.where(mask, _api.empty_like(result).normal_(mean, std, generator=generator), result)
            if result is not tensor:
                tensor.copy_(result)
            return tensor
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def log_ratio(c):
            return c.sub(mean).div(std).pow(2).mul(-0.5).sub(log_peak)
        tensor.uniform_(a, b, generator=generator)
        candidates = log_ratio(tensor)
        accept_buf = _api.empty_like(tensor)
        pending = accept_buf.uniform_(generator=generator).log().gt(candidates)
        if bool(pending.any()):
            result = tensor.clone()
            while True:
                cand = _api.empty_like(tensor).uniform_(a, b, generator=generator)
                result = _api.where(pending, cand, result)
                pending = _api.where(pending, accept_buf.uniform_(generator=generator).log().gt(log_ratio(cand)),
                                     pending)
                if not bool(pending.any()):
                    break
            tensor.copy_(result)
        return tensor


def constant_(tensor, val):
    with _no_grad():
        if hasattr(Tensor, "fill_"):
            return tensor.fill_(val)
        return _assign(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if _meta_fill(tensor) is not None:
        return tensor
    with _no_grad():
        return _assign(tensor, np.eye(*tuple(tensor.shape)))


def dirac_(tensor, groups=1):
    dimensions = tensor.dim()
    if dimensions not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    if _meta_fill(tensor) is not None:
        return tensor
    arr = np.zeros(sizes)
    for g in range(groups):
        for d in range(min_dim):
            idx = (g * out_chans_per_grp + d, d) + tuple(s // 2 for s in sizes[2:])
            arr[idx] = 1
    with _no_grad():
        return _assign(tensor, arr)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    if _meta_fill(tensor) is not None:
        return tensor
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    # PyTorch's draw (normal_ of a rows x cols tensor of the dtype, from ember's generator), then
    # Q of its QR (numpy's, in the dtype: LAPACK's rounding may differ from PyTorch's)
    from ..ops import api as _api
    flat = _api.empty(rows, cols, dtype=tensor.dtype).normal_(0, 1, generator=generator).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    d = np.sign(np.diag(r))
    q = q * d
    if rows < cols:
        q = q.T
    with _no_grad():
        _assign(tensor, q.reshape(tuple(tensor.shape)))
        return tensor.mul_(gain)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = int(math.ceil(sparsity * rows))
    if _meta_fill(tensor) is not None:
        return tensor
    # PyTorch's: normal_(0, std) from the generator, then per column the first rows of a
    # randperm from the default generator zeroed (its numbers)
    from ..ops import api as _api
    with _no_grad():
        tensor.normal_(0, std, generator=generator)
        for c in range(cols):
            tensor[_api.randperm(rows)[:num_zeros], c] = 0
        return tensor


def _make_deprecated(fn):
    def deprecated(*args, **kwargs):
        warnings.warn(f"`nn.init.{fn.__name__[:-1]}` is now deprecated in favor of `nn.init.{fn.__name__}`.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    deprecated.__name__ = fn.__name__[:-1]
    return deprecated


uniform = _make_deprecated(uniform_)
normal = _make_deprecated(normal_)
constant = _make_deprecated(constant_)
xavier_uniform = _make_deprecated(xavier_uniform_)
xavier_normal = _make_deprecated(xavier_normal_)
kaiming_uniform = _make_deprecated(kaiming_uniform_)
kaiming_normal = _make_deprecated(kaiming_normal_)
orthogonal = _make_deprecated(orthogonal_)
eye = _make_deprecated(eye_)
dirac = _make_deprecated(dirac_)
sparse = _make_deprecated(sparse_)
