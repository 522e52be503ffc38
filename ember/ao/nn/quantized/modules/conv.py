"""Statically quantized convolutions, 1-, 2- and 3-d (``QuantizedConv{1,2,3}d`` and their ReLU
fusions), computed as fbgemm does on x86 for any dimensionality:

1. the integers: ``acc = sum (x_q - x_zp) * (w_q - w_zp)`` exactly (int32, ``_int_gemm``) over
   the im2col patches of each group, the input padded with its zero point (zeros after the
   shift; ``padding_mode="reflect"`` reflects the stored integers instead);
2. requantization with the float bias (``static._requantize``): the output's scale and zero
   point were observed during calibration.
"""
from __future__ import annotations

import numpy as np

import ember
from ember import nn
from .._int_gemm import exact_int_matmul, int8_gemm_saturates, saturation_correction
from .static import _QuantizedWeighted, _need_quantized, _quantize_weight, _requantize, _weight_ints, \
    _weight_post_process

_SUPPORTED_PADDING = {"zeros", "reflect"}
_INPUT_SHAPE = {1: "`(N, C, L)`", 2: "`(N, C, H, W)`", 3: "`(N, C, D, H, W)`"}
_TRANSPOSE_INPUT_SHAPE = {1: "`(N, C, L)`", 2: "`(N, C, H, W)`", 3: "`(N, C, T, H, W)`"}


def _ntuple(v, n, name):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    if len(v) != n or not all(isinstance(e, int) for e in v):
        raise ValueError(f"quantized Conv{n}d: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return v


def _conv_ints(xi, wi, stride, dilation, groups, raw=None):
    """int32 ``acc`` (N, *out_spatial, C_out) of the already padded, zero-point-shifted int32
    input ``xi`` (N, C, *spatial) with the shifted weight ``wi`` (C_out, C/groups, *kernel).

    ``raw``: ``(x_zp, stored int8 weight)``, given where fbgemm runs the convolution: on a CPU
    whose int8 GEMM saturates pairs of products (``_int_gemm.int8_gemm_saturates``) the int16
    saturation of the stored values' pairs (channels-last im2col order) is added."""
    acc = _conv_ints_exact(xi, wi, stride, dilation, groups)
    if raw is not None and int8_gemm_saturates():
        x_zp, w_raw = raw
        acc = acc + _conv_saturation(xi + np.int32(x_zp), np.asarray(w_raw, np.int32), stride, dilation, groups)
    return acc.astype(np.int32)


def _windows(x, ks, stride, dilation):
    """(N, C, *out_spatial, *kernel) view of the sliding windows of ``x`` (N, C, *spatial)."""
    nd = x.ndim - 2
    span = tuple(d * (k - 1) + 1 for d, k in zip(dilation, ks))
    out_sp = tuple((s - sp) // st + 1 for s, sp, st in zip(x.shape[2:], span, stride))
    win = np.lib.stride_tricks.sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))
    sel = (slice(None), slice(None)) + tuple(slice(None, o * st, st) for o, st in zip(out_sp, stride)) \
        + tuple(slice(None, None, d) for d in dilation)
    return win[sel], out_sp


def _conv_saturation(x_raw, w_raw, stride, dilation, groups, reverse_taps=False):
    """int64 (N, *out_spatial, C_out): fbgemm's int16 pair saturation (``saturation_correction``)
    for the padded stored input ``x_raw`` and stored weight ``w_raw``, the reduction axis in fbgemm's
    channels-last im2col order (kernel taps outer, the group's input channels inner).
    ``reverse_taps``: the taps in reverse order (a transposed convolution computed with the flipped
    kernel pairs its taps in the original kernel's order)."""
    nd = x_raw.ndim - 2
    n = x_raw.shape[0]
    c_out, c_g = w_raw.shape[:2]
    win, out_sp = _windows(x_raw, w_raw.shape[2:], stride, dilation)       # (N, C, *out_sp, *kernel)
    perm = (0,) + tuple(range(2, 2 + nd)) + tuple(range(2 + nd, 2 + 2 * nd)) + (1,)
    win = win.transpose(perm)                                              # (N, *out_sp, *kernel, C)
    m = n * int(np.prod(out_sp))
    kvol = int(np.prod(w_raw.shape[2:]))
    cols = win.reshape(m, kvol, groups, c_g)
    wt = w_raw.reshape(groups, c_out // groups, c_g, kvol).transpose(0, 1, 3, 2)   # (G, O/G, kernel, C/G)
    if reverse_taps:
        cols, wt = cols[:, ::-1], wt[:, :, ::-1]
    corr = np.concatenate([saturation_correction(cols[:, :, g].reshape(m, kvol * c_g),
                                                 wt[g].reshape(c_out // groups, kvol * c_g))
                           for g in range(groups)], axis=1)
    return corr.reshape((n,) + out_sp + (c_out,))


def _conv_ints_exact(xi, wi, stride, dilation, groups):
    nd = xi.ndim - 2
    n, c = xi.shape[:2]
    c_out, c_g = wi.shape[:2]
    ks = wi.shape[2:]
    span = tuple(d * (k - 1) + 1 for d, k in zip(dilation, ks))
    out_sp = tuple((s - sp) // st + 1 for s, sp, st in zip(xi.shape[2:], span, stride))
    if any(o <= 0 for o in out_sp):
        raise RuntimeError(f"quantized convolution: the kernel (dilated size {span}) is larger than the padded "
                           f"input {tuple(xi.shape[2:])}")
    win = np.lib.stride_tricks.sliding_window_view(xi, span, axis=tuple(range(2, 2 + nd)))
    sel = (slice(None), slice(None)) + tuple(slice(None, o * st, st) for o, st in zip(out_sp, stride)) \
        + tuple(slice(None, None, d) for d in dilation)
    win = win[sel]                                         # (N, C, *out_sp, *kernel)
    perm = (0,) + tuple(range(2, 2 + nd)) + (1,) + tuple(range(2 + nd, 2 + 2 * nd))
    win = win.transpose(perm)                              # (N, *out_sp, C, *kernel)
    m = n * int(np.prod(out_sp))
    kvol = int(np.prod(ks))
    cols = win.reshape(m, groups, c_g * kvol)
    w = wi.reshape(groups, c_out // groups, c_g * kvol)
    acc = np.concatenate([exact_int_matmul(cols[:, g], w[g].T) for g in range(groups)], axis=1)
    return acc.astype(np.int32).reshape((n,) + out_sp + (c_out,))


def _channels_first(q):
    """(N, *spatial, C) -> contiguous (N, C, *spatial)."""
    nd = q.ndim - 2
    return np.ascontiguousarray(q.transpose((0, nd + 1) + tuple(range(1, nd + 1))))


class _ConvNd(_QuantizedWeighted):
    """Shared by Conv1d / Conv2d / Conv3d (``_DIM`` spatial dimensions)."""

    _version = 3
    _DIM = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        nd = self._DIM
        if out_channels <= 0:
            raise ValueError(f"out_channels must be greater than 0, got {out_channels}")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _SUPPORTED_PADDING:
            raise ValueError(f"'padding_mode' {padding_mode} is not supported by quantized convolution")
        if isinstance(padding, str):
            raise NotImplementedError(f"ember.quantization: quantized Conv{nd}d with padding={padding!r} is not "
                                      "supported (give the padding as ints)")
        if nd == 3 and padding_mode == "reflect":
            raise AssertionError("Conv3d does not support reflection padding")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        self.stride = _ntuple(stride, nd, "stride")
        self.padding = _ntuple(padding, nd, "padding")
        self.dilation = _ntuple(dilation, nd, "dilation")
        self.transposed = False
        self.output_padding = (0,) * nd
        self.groups = groups
        self.padding_mode = padding_mode
        self.scale = 1.0
        self.zero_point = 0
        w = ember.quantize_per_tensor(ember.zeros(out_channels, in_channels // groups, *self.kernel_size), 1.0, 0,
                                      ember.qint8)
        self.set_weight_bias(w, ember.zeros(out_channels) if bias else None)

    def _get_name(self):
        return f"QuantizedConvReLU{self._DIM}d" if self._FUSE_RELU else f"QuantizedConv{self._DIM}d"

    def __repr__(self):
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        nd = self._DIM
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"scale={self.scale}, zero_point={self.zero_point}")
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias() is None:
            s += ", bias=False"
        return s

    def weight(self):
        return self._wb[0]

    def bias(self):
        return self._wb[1]

    def set_weight_bias(self, w, b):
        self._wb = (w, b)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight()
        destination[prefix + "bias"] = self.bias()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if prefix + "weight" in state_dict:
            self.set_weight_bias(state_dict[prefix + "weight"], state_dict.get(prefix + "bias"))
        elif strict:
            missing_keys.append(prefix + "weight")

    def forward(self, x):
        acc, ws, bias = self._int_acc(x)
        q = _requantize(acc, x.q_scale(), ws, bias, self.scale, self.zero_point, self._FUSE_RELU)
        return self._out(_channels_first(q))

    def _int_acc(self, x):
        """(int32 acc (N, *out_spatial, C_out), per-channel weight scales, float32 bias or None)."""
        nd = self._DIM
        if not isinstance(x, ember.Tensor) or x.ndim != nd + 2:
            raise ValueError(f"Input shape must be {_INPUT_SHAPE[nd]}!")
        _need_quantized(x, self._get_name())
        if x.shape[1] != self.in_channels:
            raise RuntimeError(f"{self._get_name()}: expected input with {self.in_channels} channels, got "
                               f"{x.shape[1]}")
        w, b = self.weight(), self.bias()
        wi, ws = _weight_ints(w, self.out_channels)
        ints = x._irepr
        pads = ((0, 0), (0, 0)) + tuple((p, p) for p in self.padding)
        if self.padding_mode == "reflect":
            xi = np.pad(ints, pads, mode="reflect").astype(np.int32) - np.int32(x.q_zero_point())
        else:       # zero padding of the real values = the zero point in the integers = 0 after the shift
            xi = np.pad(ints.astype(np.int32) - np.int32(x.q_zero_point()), pads)
        acc = _conv_ints(xi, wi, self.stride, self.dilation, self.groups, raw=(x.q_zero_point(), w._irepr))
        bias = None if b is None else np.asarray(b.detach()._data, np.float32)
        return acc, ws, bias

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if not hasattr(mod, "qconfig") or mod.qconfig is None:
            raise AssertionError("Input float module must have qconfig defined.")
        if not hasattr(mod, "activation_post_process"):
            raise AssertionError("Input float module must have observer attached")
        act = mod.activation_post_process
        mod, wobs = _weight_post_process(mod)
        wobs(mod.weight)
        if wobs.dtype is not ember.qint8:
            raise AssertionError("Weight observer must have a dtype of qint8")
        qweight = _quantize_weight(mod.weight.detach().float(), wobs)
        if mod.padding_mode not in _SUPPORTED_PADDING:
            raise ValueError(f"'padding_mode' {mod.padding_mode} is not supported by quantized convolution")
        out = cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding, mod.dilation,
                  mod.groups, mod.bias is not None, mod.padding_mode)
        out.set_weight_bias(qweight, None if mod.bias is None else mod.bias.detach().clone())
        s, z = act.calculate_qparams()
        out.scale, out.zero_point = float(s), int(z)
        return out


class Conv1d(_ConvNd):
    """``QuantizedConv1d``: quint8 (N, C, L) -> quint8, int8 weight, float bias."""

    _DIM = 1


class Conv2d(_ConvNd):
    """``QuantizedConv2d``: quint8 NCHW -> quint8 NCHW, int8 weight (per tensor or per channel), float bias."""

    _DIM = 2


class Conv3d(_ConvNd):
    """``QuantizedConv3d``: quint8 NCDHW -> quint8, int8 weight, float bias."""

    _DIM = 3


class ConvReLU1d(Conv1d):
    _FUSE_RELU = True


class ConvReLU2d(Conv2d):
    _FUSE_RELU = True


class ConvReLU3d(Conv3d):
    _FUSE_RELU = True



class _ConvTransposeNd(_ConvNd):
    """Transposed convolution, as the regular one over the input spread out by ``stride``
    (zeros between the values: the shifted zero point), padded by ``dilation * (k - 1) - padding``
    (plus ``output_padding`` at the end), with the kernel flipped and its in/out axes swapped.
    Weights per tensor (the x86 backend's transposed kernels have no per-channel weights)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        nd = self._DIM
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
        self.transposed = True
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        w = ember.quantize_per_tensor(ember.zeros(in_channels, out_channels // groups, *self.kernel_size), 1.0, 0,
                                      ember.qint8)
        self.set_weight_bias(w, ember.zeros(out_channels) if bias else None)

    def _get_name(self):
        return f"QuantizedConvTranspose{self._DIM}d"

    def forward(self, x):
        nd = self._DIM
        if not isinstance(x, ember.Tensor) or x.ndim != nd + 2:
            raise ValueError(f"Input shape must be {_TRANSPOSE_INPUT_SHAPE[nd]}!")
        _need_quantized(x, self._get_name())
        if x.shape[1] != self.in_channels:
            raise RuntimeError(f"{self._get_name()}: expected input with {self.in_channels} channels, got "
                               f"{x.shape[1]}")
        w, b = self.weight(), self.bias()
        if w._qp.per_channel:
            raise NotImplementedError("ember.quantization: quantized transposed convolution with per-channel "
                                      "weights is not supported (use a per-tensor weight observer, as torch's x86 "
                                      "default qconfig mapping does)")
        wi = w._irepr.astype(np.int32) - np.int32(w._qp.zero_point)         # (C_in, C_out/g, *k)
        g = self.groups
        cin_g = self.in_channels // g
        flip = tuple(range(2, 2 + nd))
        wconv = np.concatenate([np.flip(wi[i * cin_g:(i + 1) * cin_g].swapaxes(0, 1), flip) for i in range(g)],
                               axis=0)                                        # (C_out, C_in/g, *k)
        xi = x._irepr.astype(np.int32) - np.int32(x.q_zero_point())
        n, c = xi.shape[:2]
        spread = np.zeros((n, c) + tuple((s_ - 1) * st + 1 for s_, st in zip(xi.shape[2:], self.stride)), np.int32)
        spread[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in self.stride)] = xi
        lo = [d * (k - 1) - p for d, k, p in zip(self.dilation, self.kernel_size, self.padding)]
        hi = [v + op for v, op in zip(lo, self.output_padding)]
        spread = np.pad(spread, ((0, 0), (0, 0)) + tuple((max(a, 0), max(z, 0)) for a, z in zip(lo, hi)))
        crop = tuple(slice(max(-a, 0), spread.shape[2 + i] - max(-z, 0)) for i, (a, z) in enumerate(zip(lo, hi)))
        spread = spread[(slice(None), slice(None)) + crop]
        acc = _conv_ints(spread, wconv, (1,) * nd, self.dilation, g)
        if int8_gemm_saturates():
            # fbgemm's transposed convolution: the zero-point-filled spread input, the taps paired in
            # the (unflipped) kernel's order, the group's channels inner (verified against torch)
            wr = w._irepr.astype(np.int32)
            wraw = np.concatenate([np.flip(wr[i * cin_g:(i + 1) * cin_g].swapaxes(0, 1), flip) for i in range(g)],
                                  axis=0)
            acc = (acc + _conv_saturation(spread + np.int32(x.q_zero_point()), wraw, (1,) * nd, self.dilation, g,
                                          reverse_taps=True)).astype(np.int32)
        ws = np.full(self.out_channels, np.float32(w._qp.scale))
        bias = None if b is None else np.asarray(b.detach()._data, np.float32)
        q = _requantize(acc, x.q_scale(), ws, bias, self.scale, self.zero_point, False)
        perm = (0, nd + 1) + tuple(range(1, nd + 1))
        return self._out(np.ascontiguousarray(q.transpose(perm)))

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        float_cls = getattr(nn, f"ConvTranspose{cls._DIM}d")
        if type(mod) is not float_cls:
            raise AssertionError(f" nnq.{cls.__name__}.from_float only works for {float_cls.__name__}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined.")
        wobs = mod.qconfig.weight()
        wobs(mod.weight)
        if wobs.dtype is not ember.qint8:
            raise AssertionError(f"Weight observer must have a dtype of qint8, got {wobs.dtype}")
        qweight = _quantize_weight(mod.weight.detach().float(), wobs)
        out = cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding, mod.output_padding,
                  mod.groups, mod.bias is not None, mod.dilation, mod.padding_mode)
        out.set_weight_bias(qweight, None if mod.bias is None else mod.bias.detach().clone())
        act = getattr(mod, "activation_post_process", None)
        if act is not None and act.dtype is not ember.float32:
            s, z = act.calculate_qparams()
            out.scale, out.zero_point = float(s), int(z)
        return out


class ConvTranspose1d(_ConvTransposeNd):
    """``QuantizedConvTranspose1d``: quint8 (N, C, L) -> quint8, int8 weight (C_in, C_out/groups, k)."""

    _DIM = 1


class ConvTranspose2d(_ConvTransposeNd):
    """``QuantizedConvTranspose2d``."""

    _DIM = 2


class ConvTranspose3d(_ConvTransposeNd):
    """``QuantizedConvTranspose3d``."""

    _DIM = 3
