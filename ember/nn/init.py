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
    """Normal(mean, std) restricted to [a, b] (exact, by rejection: accepted draws keep the distribution)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of "
                      "values may be incorrect.", stacklevel=2)
    if _meta_fill(tensor) is not None:
        return tensor
    g = _gen(generator)
    n = tensor.numel()
    out = np.empty(0)
    while out.size < n:
        draw = g.normal(mean, std, size=max(2 * (n - out.size), 16))
        draw = draw[(draw >= a) & (draw <= b)]
        out = np.concatenate([out, draw])
    with _no_grad():
        return _assign(tensor, out[:n].reshape(tuple(tensor.shape)))


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
    flat = _gen(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    d = np.sign(np.diag(r))
    d[d == 0] = 1
    q = q * d
    if rows < cols:
        q = q.T
    with _no_grad():
        return _assign(tensor, (gain * q).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = int(math.ceil(sparsity * rows))
    if _meta_fill(tensor) is not None:
        return tensor
    g = _gen(generator)
    arr = g.normal(0, std, size=(rows, cols))
    for c in range(cols):
        arr[g.permutation(rows)[:num_zeros], c] = 0
    with _no_grad():
        return _assign(tensor, arr)


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
