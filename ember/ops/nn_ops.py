"""Op family: the non-pointwise neural-network ops.

Kernels come in closed pairs where the backward is itself a linear map, so
every derivative is again an op with a derivative (double backward works):

* ``convolution`` / ``_conv_input_grad`` / ``_conv_weight_grad`` (N-d, groups,
  stride, padding, dilation; transposed convolution is the input-gradient map);
* ``max_pool_with_indices`` / ``_max_pool_backward`` / ``_max_pool_gather``;
* ``avg_pool`` / ``_avg_pool_backward``;
* ``_gather_axes`` / ``_scatter_axes`` (padding in every mode, nearest resize);
* ``_resample`` (separable linear maps: bilinear/bicubic resize, adaptive pooling);
* ``embedding`` / ``embedding_dense_backward``; ``nll_loss_nd`` / ``_nll_loss_backward``.

Normalisation kernels (``native_batch_norm``, ``native_layer_norm``,
``native_group_norm``) have derivative formulas written in ember ops that
recompute the statistics, so they are differentiable twice. Losses with a
PyTorch kernel (``mse_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``) are kernels
too; the rest are composites in ``ember.nn.functional``.

Numpy arrays are channels-first (N, C, *spatial) as in PyTorch.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make
from . import _conv_native as _native
from . import _native_small
from . import api
from ._helpers import _canonical_c, as_contiguous, copy_preserve, empty_strided, estrides, np_is_float, sum_to
from .reduction import unrecorded as _unrecorded
from .registry import defop

# reduction enum as in PyTorch
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def reduction_enum(reduction):
    try:
        return REDUCTIONS[reduction]
    except KeyError:
        raise ValueError(f"{reduction} is not a valid value for reduction") from None


def _reduce_arr(xp, loss, reduction):
    if reduction == 0:
        return loss
    # half precision accumulates in float32 and rounds once, as torch's sum/mean (numpy's
    # bfloat16 sum accumulates in bfloat16: 0.70 for a mean of 1.95 over 6144 elements)
    acc = np.float32 if loss.dtype.name in ("float16", "bfloat16") else loss.dtype
    if reduction == 1:
        return xp.asarray(loss.mean(dtype=acc)).astype(loss.dtype)
    return xp.asarray(loss.sum(dtype=acc)).astype(loss.dtype)


def _grad_scale(g, reduction, n):
    """The upstream gradient of a pointwise loss, before the elementwise factor."""
    if reduction == 1:
        return g / max(n, 1) if n else g * float("nan")
    return g


def _cname(arr):
    from .linalg import _CNAME
    dt = _t.from_numpy_dtype(arr.dtype)
    return _CNAME.get(dt.name, dt.name)


def _legacy(arr):
    return _t.from_numpy_dtype(arr.dtype).legacy_name


# ====================================================================== convolution
def _windows(xp, a, out, k, stride, dil):
    """View (N, C, *out, *k) of the spatial windows of ``a`` (N, C, *S)."""
    nd = len(k)
    st = a.strides
    shape = tuple(a.shape[:2]) + tuple(out) + tuple(k)
    strides = tuple(st[:2]) + tuple(st[2 + i] * stride[i] for i in range(nd)) + \
        tuple(st[2 + i] * dil[i] for i in range(nd))
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _conv_out(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _pad_zeros(xp, x, padding, value=0):
    if not any(padding):
        return x
    pw = [(0, 0), (0, 0)] + [(p, p) for p in padding]
    return xp.pad(x, pw, mode="constant", constant_values=value)


def _im2col(xp, x, kshape, stride, padding, dilation, groups, out):
    """(G, N*P, Cg*K) columns of ``x`` for the given output size."""
    N, C = x.shape[:2]
    nd = len(kshape)
    xpad = _pad_zeros(xp, x, padding)
    win = _windows(xp, xpad, out, kshape, stride, dilation)        # N, C, *out, *k
    G = groups
    win = win.reshape((N, G, C // G) + tuple(out) + tuple(kshape))  # view (split C)
    # -> G, N, *out, Cg, *k
    perm = (1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    P = int(np.prod(out)) if out else 1
    K = int(np.prod(kshape)) if kshape else 1
    return xp.ascontiguousarray(win.transpose(perm)).reshape(G, N * P, (C // G) * K)


def _conv_forward_np(xp, x, w, stride, padding, dilation, groups):
    N, C = x.shape[:2]
    O = w.shape[0]
    kshape = tuple(w.shape[2:])
    nd = len(kshape)
    out = tuple(_conv_out(x.shape[2 + i], kshape[i], stride[i], padding[i], dilation[i]) for i in range(nd))
    G = groups
    cols = _im2col(xp, x, kshape, stride, padding, dilation, G, out)            # G, NP, CgK
    wm = w.reshape(G, O // G, -1).transpose(0, 2, 1)                             # G, CgK, Og
    res = xp.matmul(cols, wm)                                                    # G, NP, Og
    res = res.reshape((G, N) + out + (O // G,))
    perm = (1, 0, 2 + nd) + tuple(range(2, 2 + nd))
    return xp.ascontiguousarray(res.transpose(perm)).reshape((N, O) + out)


def _conv_input_grad_np(xp, g, w, stride, padding, dilation, groups, in_shape):
    N, C = in_shape[:2]
    O = w.shape[0]
    kshape = tuple(w.shape[2:])
    nd = len(kshape)
    out = tuple(g.shape[2:])
    G = groups
    Og, Cg = O // G, C // G
    P = int(np.prod(out)) if out else 1
    gm = g.reshape(N, G, Og, P).transpose(1, 0, 3, 2).reshape(G, N * P, Og)
    dcols = xp.matmul(gm, w.reshape(G, Og, -1))                                   # G, NP, CgK
    dcols = dcols.reshape((G, N) + out + (Cg,) + kshape)
    # -> N, G, Cg, *k, *out
    perm = (1, 0, 2 + nd) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(2, 2 + nd))
    dcols = dcols.transpose(perm)
    spad = tuple(in_shape[2 + i] + 2 * padding[i] for i in range(nd))
    dx = xp.zeros((N, G, Cg) + spad, dtype=g.dtype)
    for kk in itertools.product(*[range(k) for k in kshape]):
        sl = tuple(slice(kk[i] * dilation[i], kk[i] * dilation[i] + stride[i] * (out[i] - 1) + 1, stride[i])
                   for i in range(nd))
        dx[(slice(None),) * 3 + sl] += dcols[(slice(None),) * 3 + kk]
    crop = tuple(slice(padding[i], padding[i] + in_shape[2 + i]) for i in range(nd))
    return xp.ascontiguousarray(dx[(slice(None),) * 3 + crop]).reshape(tuple(in_shape))


def _conv_weight_grad_np(xp, g, x, stride, padding, dilation, groups, w_shape):
    N = x.shape[0]
    O = w_shape[0]
    kshape = tuple(w_shape[2:])
    out = tuple(g.shape[2:])
    G = groups
    P = int(np.prod(out)) if out else 1
    cols = _im2col(xp, x, kshape, stride, padding, dilation, G, out)             # G, NP, CgK
    gm = g.reshape(N, G, O // G, P).transpose(1, 2, 0, 3).reshape(G, O // G, N * P)
    return xp.matmul(gm, cols).reshape(tuple(w_shape))


# --- the native path (``_conv_native``): per image, im2col in C++ then a matrix product per group
# (the forward's own kernel, OpenBLAS for the gradients), images spread over OpenMP threads;
# float32/float64 numpy arrays.
def _native_ok(xp, *arrays):
    return xp is np and _native.supported(*arrays)


def _prod(v):
    r = 1
    for t in v:
        r *= int(t)
    return r


def _conv_forward_native(x, w, stride, padding, dilation, groups, out=None, winograd=False):
    """``out`` (N, O, *o) = W_g (Og, Cg*K) @ cols_n,g (Cg*K, P) per image: the matmul writes NCHW.
    ``winograd``: the compiled graphs' choice of Winograd F(2x2, 3x3) where it applies
    (``ops/_conv_winograd.py``); eager keeps the direct kernels."""
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    k = tuple(w.shape[2:])
    nd = len(k)
    osp = tuple(_conv_out(x.shape[2 + i], k[i], stride[i], padding[i], dilation[i]) for i in range(nd))
    res = np.empty((N, O) + osp, x.dtype) if out is None else out
    if res.size == 0:
        return res
    if Cg * _prod(k) == 0:
        res[...] = 0
        return res
    if _prod(osp) < _prod(k):
        # Fewer output positions than kernel taps: the shape of a weight gradient written as a
        # convolution (the prims decomposition of _conv_weight_grad: batch and channels of the
        # input swapped, the output gradient as kernel). Per image that would be a matmul with
        # P columns over an im2col of P-long rows; as the weight gradient it is (O, J) @ (J, .)
        # over long rows. out[b, o, kk] = dW[o, b, kk] for dW = wgrad(g = w^T, x = x^T).
        G = groups
        xx = x.reshape((N, G, C // G) + tuple(x.shape[2:])).transpose((2, 1, 0) + tuple(range(3, 3 + nd)))
        xx = xx.reshape((C // G, G * N) + tuple(x.shape[2:]))               # a view when G == 1
        dw = _conv_weight_grad_native(w.swapaxes(0, 1), xx, dilation, padding, stride, G, (O, N) + osp,
                                      winograd)
        np.copyto(res, dw.swapaxes(0, 1))
        return res
    _native.forward(x, np.ascontiguousarray(w), stride, padding, dilation, groups, res, winograd)
    return res


def _conv_input_grad_native(g, w, stride, padding, dilation, groups, in_shape, out=None, winograd=False):
    """The adjoint of the forward. Stride 1 (and an input size the forward fully covers): a forward
    correlation of ``g`` with the spatially flipped kernel, in/out channels swapped, padding
    d*(k-1)-p (a matmul with Og*K-long rows and no scatter). Otherwise cols_n,g = W_g^T @ g_n,g,
    then col2im."""
    O = g.shape[1]
    C = in_shape[1]
    k = tuple(w.shape[2:])
    nd = len(k)
    G = groups
    Og, Cg = O // G, C // G
    osp, isp = tuple(g.shape[2:]), tuple(in_shape[2:])
    q = [dilation[i] * (k[i] - 1) - padding[i] for i in range(nd)]
    if all(s == 1 for s in stride) and all(v >= 0 for v in q) and \
            all(osp[i] + q[i] * 2 - dilation[i] * (k[i] - 1) == isp[i] for i in range(nd)):
        flip = (slice(None),) * 3 + (slice(None, None, -1),) * nd
        wf = np.ascontiguousarray(w.reshape((G, Og, Cg) + k).swapaxes(1, 2)[flip]).reshape((C, Og) + k)
        return _conv_forward_native(g, wf, [1] * nd, q, dilation, G, out=out, winograd=winograd)
    dx = np.empty(tuple(in_shape), g.dtype) if out is None else out
    if dx.size == 0:
        return dx
    if _prod(osp) == 0 or Og == 0:
        dx[...] = 0
        return dx
    _native.input_grad(np.ascontiguousarray(g), np.ascontiguousarray(w), stride, padding, dilation, G, dx)
    return dx


def _conv_weight_grad_native(g, x, stride, padding, dilation, groups, w_shape, winograd=False):
    """dW_g = sum_n g_n,g (Og, P) @ cols_n,g^T (P, Cg*K), accumulated by BLAS (beta = 1).
    ``winograd``: the compiled graphs' Winograd F(2x2, 3x3) where it applies."""
    dw = np.empty(tuple(w_shape), g.dtype)
    if dw.size == 0:
        return dw
    if x.shape[0] == 0 or _prod(g.shape[2:]) == 0:
        dw[...] = 0
        return dw
    _native.weight_grad(np.ascontiguousarray(g), x, stride, padding, dilation, groups, dw, winograd)
    return dw


def _conv_forward(xp, x, w, stride, padding, dilation, groups):
    if _native_ok(xp, x, w):
        return _conv_forward_native(x, w, stride, padding, dilation, groups)
    return _conv_forward_np(xp, x, w, stride, padding, dilation, groups)


def _conv_input_grad_arr(xp, g, w, stride, padding, dilation, groups, in_shape):
    if _native_ok(xp, g, w):
        return _conv_input_grad_native(g, w, stride, padding, dilation, groups, in_shape)
    return _conv_input_grad_np(xp, g, w, stride, padding, dilation, groups, in_shape)


def _conv_weight_grad_arr(xp, g, x, stride, padding, dilation, groups, w_shape):
    if _native_ok(xp, g, x):
        return _conv_weight_grad_native(g, x, stride, padding, dilation, groups, w_shape)
    return _conv_weight_grad_np(xp, g, x, stride, padding, dilation, groups, w_shape)


def _conv_check(x, w, b, stride, padding, dilation, transposed, groups):
    nd = w.ndim - 2
    if x.ndim != nd + 2:
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to conv{nd}d, but got "
                           f"input of size: {list(x.shape)}")
    if x.dtype != w.dtype:
        raise RuntimeError(f"expected scalar type {_legacy(x)} but found {_legacy(w)}")
    if b is not None and b.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {_legacy(x)} but found {_legacy(b)}")
    if not np_is_float(x.dtype) and x.dtype.kind != "c":     # complex: the numpy im2col path, as torch
        raise RuntimeError(f"\"slow_conv2d_cpu\" not implemented for '{_legacy(x)}'")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    # (min() rather than any() over a generator: ~1 us less per check on a small convolution)
    if stride and min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if padding and min(padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if dilation and min(dilation) <= 0:
        raise RuntimeError("dilation should be greater than zero")
    C = x.shape[1]
    if not transposed:
        if w.shape[0] % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension "
                               f"0, but got weight of size {list(w.shape)} instead")
        if C != w.shape[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                               f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {C} channels "
                               f"instead")
        if b is not None and (b.ndim != 1 or b.shape[0] != w.shape[0]):
            raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                               f"{w.shape[0]} elements, but got bias of size {list(b.shape)} instead")
        padded = [x.shape[2 + i] + 2 * padding[i] for i in range(nd)]
        eff = [dilation[i] * (w.shape[2 + i] - 1) + 1 for i in range(nd)]
        if any(p < e for p, e in zip(padded, eff)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                               f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                               f"actual input size")
    else:
        if C != w.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input"
                               f"{list(x.shape)} to have {w.shape[0]} channels, but got {C} channels instead")
        if C % groups:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                               f"dimension 0, but got weight of size {list(w.shape)} instead")
        if b is not None and (b.ndim != 1 or b.shape[0] != w.shape[1] * groups):
            raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                               f"1-dimensional with {w.shape[1] * groups} elements, but got bias of size "
                               f"{list(b.shape)} instead")


def _transposed_out_shape(x_shape, w_shape, stride, padding, dilation, output_padding, groups):
    nd = len(w_shape) - 2
    sp = tuple((x_shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w_shape[2 + i] - 1)
               + output_padding[i] + 1 for i in range(nd))
    return (x_shape[0], w_shape[1] * groups) + sp


@defop("convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "
       "bool transposed, int[] output_padding, int groups) -> Tensor", method=False, save=("input", "weight"))
def convolution(xp, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    _conv_check(x, w, b, stride, padding, dilation, transposed, groups)
    if not transposed:
        out = _conv_forward(xp, x, w, stride, padding, dilation, groups)
    else:
        for op_, s, d in zip(output_padding, stride, dilation):
            if op_ >= s and op_ >= d:
                raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                                   f"output_padding={list(output_padding)}, stride={list(stride)}, "
                                   f"dilation={list(dilation)}")
        shape = _transposed_out_shape(x.shape, w.shape, stride, padding, dilation, output_padding, groups)
        if any(s <= 0 for s in shape[2:]):
            raise RuntimeError(f"Given input size per channel: {list(x.shape[2:])}. Calculated output size per "
                               f"channel: {list(shape[2:])}. Output size is too small")
        out = _conv_input_grad_arr(xp, x, w, stride, padding, dilation, groups, shape)
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * (out.ndim - 2))
    # NHWC when the input or the weight is NHWC, as PyTorch's CPU convolutions
    return _suggested_layout(xp, x, out.astype(x.dtype, copy=False), w)


@convolution.derivative
def _convolution_bw(ctx, g):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = ctx.args
    n = ctx.needs_input_grad
    nd = len(w.shape) - 2
    gx = gw = gb = None
    if not transposed:
        if n[0]:
            gx = _conv_input_grad(g, w, stride, padding, dilation, groups, tuple(x.shape))
        if n[1]:
            gw = _conv_weight_grad(g, x, stride, padding, dilation, groups, tuple(w.shape))
    else:
        if n[0]:
            gx = _conv_fit(convolution(g, w, None, stride, padding, dilation, False, [0] * nd, groups), x.shape)
        if n[1]:
            gw = _conv_weight_grad(x, g, stride, padding, dilation, groups, tuple(w.shape))
    if n[2]:
        gb = g.sum([0] + list(range(2, 2 + nd)))
    return gx, gw, gb


def _conv_fit(t, shape):
    """Crop a forward-convolution result to ``shape`` (a transposed conv's output_padding makes its
    adjoint's output larger than the input by at most output_padding // stride)."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    spec = tuple((i, np.arange(shape[i]), None, 0) for i in range(2, len(shape)) if t.shape[i] != shape[i])
    return _gather_axes(t, spec, "SliceBackward0")


@defop("_conv_input_grad(Tensor grad, Tensor weight, int[] stride, int[] padding, int[] dilation, int groups, "
       "int[] input_size) -> Tensor", method=False, function=False, grad_fn_name="ConvolutionBackward1")
def _conv_input_grad(xp, g, w, stride, padding, dilation, groups, input_size):
    return _conv_input_grad_arr(xp, g, w.astype(g.dtype, copy=False), stride, padding, dilation, groups,
                                tuple(input_size))


@_conv_input_grad.derivative
def _conv_input_grad_bw(ctx, c):
    g, w, stride, padding, dilation, groups, input_size = ctx.args
    n = ctx.needs_input_grad
    nd = len(w.shape) - 2
    return (_conv_fit(convolution(c, w, None, stride, padding, dilation, False, [0] * nd, groups), g.shape)
            if n[0] else None,
            _conv_weight_grad(g, c, stride, padding, dilation, groups, tuple(w.shape)) if n[1] else None)


@defop("_conv_weight_grad(Tensor grad, Tensor input, int[] stride, int[] padding, int[] dilation, int groups, "
       "int[] weight_size) -> Tensor", method=False, function=False, grad_fn_name="ConvolutionBackward1")
def _conv_weight_grad(xp, g, x, stride, padding, dilation, groups, weight_size):
    return _conv_weight_grad_arr(xp, g, x.astype(g.dtype, copy=False), stride, padding, dilation, groups,
                                 tuple(weight_size))


@_conv_weight_grad.derivative
def _conv_weight_grad_bw(ctx, c):
    g, x, stride, padding, dilation, groups, weight_size = ctx.args
    n = ctx.needs_input_grad
    nd = len(x.shape) - 2
    return (convolution(x, c, None, stride, padding, dilation, False, [0] * nd, groups) if n[0] else None,
            _conv_input_grad(g, c, stride, padding, dilation, groups, tuple(x.shape)) if n[1] else None)


# ====================================================================== pooling
def pool_out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_check(x, k, s, p, d):
    for kk, pp, dd in zip(k, p, d):
        if pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pp}, "
                               f"kernel_size={kk} and dilation={dd}")
    for kk in k:
        if kk <= 0:
            raise RuntimeError(f"kernel size should be greater than zero, but got kernel_size={list(k)}")
    for ss in s:
        if ss <= 0:
            raise RuntimeError(f"stride should be greater than zero, but got stride={list(s)}")


def _pool_padded(xp, x, k, s, p, d, out, fill):
    """Pad ``x`` so every window of the output fits; returns the padded array."""
    nd = len(k)
    pw = [(0, 0), (0, 0)]
    for i in range(nd):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1
        hi = max(need - x.shape[2 + i] - p[i], 0)
        pw.append((p[i], hi))
    if all(a == 0 and b == 0 for a, b in pw):
        return x
    return xp.pad(x, pw, mode="constant", constant_values=fill)


def _maxpool_name(args):
    return f"MaxPool{len(args[1])}DWithIndicesBackward0"


@defop("max_pool_with_indices(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
       "bool ceil_mode) -> Tensor, Tensor", method=False, save=(), grad_fn_name=_maxpool_name)
def max_pool_with_indices(xp, x, k, s, p, d, ceil_mode):
    nd = len(k)
    _pool_check(x, k, s, p, d)
    out = tuple(pool_out_size(x.shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nd))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). Calculated output size: "
                           f"({'x'.join(map(str, (x.shape[1],) + out))}). Output size is too small")
    if np_is_float(x.dtype):
        fill = -np.inf
    elif x.dtype == np.bool_:
        raise RuntimeError("\"max_pool2d\" not implemented for 'Bool'")
    else:
        fill = np.iinfo(x.dtype).min
    if xp is np:     # one native loop over the windows (_native_small), when it can be built
        r = _native_small.max_pool(x, k, s, p, d, out)
        if r is not None:
            return _suggested_layout(xp, x, r[0]), _suggested_layout(xp, x, r[1])
    xpad = _pool_padded(xp, x, k, s, p, d, out, fill)
    win = _windows(xp, xpad, out, k, s, d)
    N, C = x.shape[:2]
    K = int(np.prod(k))
    flat = win.reshape((N, C) + out + (K,))
    # which taps of each window are inside the input: only those can be the argmax (a window of
    # -inf values, or one entirely in padding, must not name a padding position -- its gradient
    # would land on another element); a window with no inside tap gives the fill and index -1
    spatial = (1, 1) + tuple(x.shape[2:])
    inside = _windows(xp, _pool_padded(xp, xp.ones(spatial, dtype=bool), k, s, p, d, out, False),
                      out, k, s, d).reshape((1, 1) + out + (K,))
    top = flat.max(-1)                  # NaN propagates like PyTorch: a NaN is the max
    hit = flat == top[..., None]
    if np_is_float(x.dtype):
        hit |= xp.isnan(flat)           # (NaN != NaN: the first NaN of the window)
    hit &= inside
    arg = hit.argmax(-1)
    # the chosen element's value (its NaN payload and zero sign; the fill for no inside tap)
    vals = xp.where(hit.any(-1), xp.take_along_axis(flat, arg[..., None], -1)[..., 0], top)
    # input coordinates of the chosen element
    kidx = xp.unravel_index(arg, tuple(k))
    flat_idx = xp.zeros(arg.shape, dtype=np.int64)
    for i in range(nd):
        shp = [1] * (2 + nd)
        shp[2 + i] = out[i]
        pos = xp.arange(out[i], dtype=np.int64).reshape(shp) * s[i] - p[i] + kidx[i] * d[i]
        flat_idx = flat_idx * x.shape[2 + i] + pos
    flat_idx = xp.where(hit.any(-1), flat_idx, -1)
    # NHWC values and indices for an NHWC input, as PyTorch's
    return _suggested_layout(xp, x, vals), _suggested_layout(xp, x, flat_idx)


@max_pool_with_indices.derivative(save=(), save_result=True)
def _max_pool_bw2(ctx, grads):
    x = ctx.args[0]
    g = grads[0]
    idx = ctx.result_at(1)          # (the values may be ReLU'd in place)
    if _unrecorded(g, idx):         # (the op's kernel without a dispatcher round)
        return (_make(_max_pool_backward.kernel(np, g._data, idx._data, tuple(x.shape)), g.device),)
    return (_max_pool_backward(g, idx, tuple(x.shape)),)


@defop("_max_pool_backward(Tensor grad, Tensor indices, int[] input_size) -> Tensor", method=False,
       function=False, save=("indices",), grad_fn_name="MaxPoolBackwardBackward0")
def _max_pool_backward(xp, g, idx, input_size):
    input_size = tuple(input_size)
    N, C = input_size[:2]
    S = int(np.prod(input_size[2:]))
    NC = N * C
    off = (xp.arange(NC, dtype=np.int64) * S).reshape((N, C) + (1,) * (idx.ndim - 2))
    flat = (idx + off).reshape(-1)
    weights = g.reshape(-1).astype(np.float64)
    if (idx < 0).any():             # windows entirely in padding (index -1): no gradient
        keep = (idx >= 0).reshape(-1)
        flat, weights = flat[keep], weights[keep]
    res = xp.bincount(flat, weights=weights, minlength=NC * S)
    return res.astype(g.dtype).reshape(input_size)


@_max_pool_backward.derivative
def _max_pool_backward_bw(ctx, c):
    g, idx, input_size = ctx.args
    return (_max_pool_gather(c, idx), None)


@defop("_max_pool_gather(Tensor self, Tensor indices) -> Tensor", method=False, function=False,
       save=("indices",), grad_fn_name="MaxPoolGatherBackward0")
def _max_pool_gather(xp, x, idx):
    N, C = x.shape[:2]
    flat = x.reshape(N, C, -1)
    got = xp.take_along_axis(flat, xp.maximum(idx, 0).reshape(N, C, -1), -1).reshape(idx.shape)
    return xp.where(idx >= 0, got, 0).astype(x.dtype, copy=False)   # (index -1: no input)


@_max_pool_gather.derivative
def _max_pool_gather_bw(ctx, g):
    x, idx = ctx.args
    return (_max_pool_backward(g, idx, tuple(x.shape)), None)


_AVG_DIVISORS = {}      # numpy divisor tables by geometry (read only: each use divides into a new array)


def _avg_divisor(xp, in_sp, out, k, s, p, ceil_mode, count_include_pad, divisor_override, dtype):
    if divisor_override is not None:
        return None
    if xp is np:
        key = (tuple(in_sp), tuple(out), tuple(k), tuple(s), tuple(p), bool(count_include_pad), np.dtype(dtype))
        div = _AVG_DIVISORS.get(key)
        if div is None:
            if len(_AVG_DIVISORS) > 256:
                _AVG_DIVISORS.clear()
            div = _AVG_DIVISORS[key] = _avg_divisor_table(xp, in_sp, out, k, s, p, count_include_pad, dtype)
            div.flags.writeable = False
        return div
    return _avg_divisor_table(xp, in_sp, out, k, s, p, count_include_pad, dtype)


def _avg_divisor_table(xp, in_sp, out, k, s, p, count_include_pad, dtype):
    nd = len(k)
    div = None
    for i in range(nd):
        o = np.arange(out[i])
        start = o * s[i] - p[i]
        end = np.minimum(start + k[i], in_sp[i] + p[i])
        size_pad = end - start
        start_c = np.maximum(start, 0)
        end_c = np.minimum(end, in_sp[i])
        size = size_pad if count_include_pad else (end_c - start_c)
        shp = [1] * nd
        shp[i] = out[i]
        size = size.reshape(shp)
        div = size if div is None else div * size
    return xp.asarray(div.astype(dtype))


def _avgpool_name(args):
    return f"AvgPool{len(args[1])}DBackward0"


@defop("avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, "
       "bool count_include_pad, int? divisor_override) -> Tensor", method=False, save=(),
       grad_fn_name=_avgpool_name)
def avg_pool(xp, x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    nd = len(k)
    d = [1] * nd
    _pool_check(x, k, s, p, d)
    if not np_is_float(x.dtype):
        raise RuntimeError(f"\"avg_pool2d\" not implemented for '{_legacy(x)}'")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = tuple(pool_out_size(x.shape[2 + i], k[i], s[i], p[i], 1, ceil_mode) for i in range(nd))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). Calculated output size: "
                           f"({'x'.join(map(str, (x.shape[1],) + out))}). Output size is too small")
    xpad = _pool_padded(xp, x, k, s, p, d, out, 0)
    win = _windows(xp, xpad, out, k, s, d)
    tot = win.sum(axis=tuple(range(2 + nd, 2 + 2 * nd)))
    div = _avg_divisor(xp, x.shape[2:], out, k, s, p, ceil_mode, count_include_pad, divisor_override, x.dtype)
    res = tot / (div if div is not None else x.dtype.type(divisor_override))
    return _suggested_layout(xp, x, res.astype(x.dtype, copy=False))


@avg_pool.derivative
def _avg_pool_bw(ctx, g):
    x, k, s, p, ceil_mode, cip, dov = ctx.args
    return (_avg_pool_backward(g, k, s, p, ceil_mode, cip, dov, tuple(x.shape)),)


@defop("_avg_pool_backward(Tensor grad, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, "
       "bool count_include_pad, int? divisor_override, int[] input_size) -> Tensor", method=False,
       function=False, save=(), grad_fn_name="AvgPoolBackwardBackward0")
def _avg_pool_backward(xp, g, k, s, p, ceil_mode, cip, dov, input_size):
    nd = len(k)
    out = tuple(g.shape[2:])
    in_sp = tuple(input_size[2:])
    div = _avg_divisor(xp, in_sp, out, k, s, p, ceil_mode, cip, dov, g.dtype)
    gd = g / (div if div is not None else g.dtype.type(dov))
    spad = tuple(max((out[i] - 1) * s[i] + k[i], in_sp[i] + p[i]) + p[i] for i in range(nd))
    dx = xp.zeros(tuple(input_size[:2]) + spad, dtype=g.dtype)
    for kk in itertools.product(*[range(kv) for kv in k]):
        sl = tuple(slice(kk[i], kk[i] + s[i] * (out[i] - 1) + 1, s[i]) for i in range(nd))
        dx[(slice(None),) * 2 + sl] += gd
    crop = tuple(slice(p[i], p[i] + in_sp[i]) for i in range(nd))
    return xp.ascontiguousarray(dx[(slice(None),) * 2 + crop])


@_avg_pool_backward.derivative
def _avg_pool_backward_bw(ctx, c):
    g, k, s, p, ceil_mode, cip, dov, input_size = ctx.args
    return (avg_pool(c, k, s, p, ceil_mode, cip, dov),)


# ====================================================================== gather / scatter along axes
@defop("_gather_axes(Tensor self, Any spec, str name) -> Tensor", method=False, function=False, save=(),
       grad_fn_name=lambda a: a[2])
def _gather_axes(xp, x, spec, name):
    """spec: tuple of (axis, index array, valid mask or None, fill value)."""
    out = x
    for axis, idx, mask, fill in spec:
        if mask is not None and out.shape[axis] == 0:
            # a constant pad of an empty dim: every position is the fill (numpy refuses a
            # non-empty take from an empty axis; PyTorch pads it)
            shp = list(out.shape)
            shp[axis] = len(idx)
            out = xp.full(tuple(shp), fill, dtype=out.dtype)
            continue
        out = xp.take(out, xp.asarray(idx), axis=axis)
        if mask is not None:
            shp = [1] * out.ndim
            shp[axis] = len(idx)
            m = xp.asarray(mask).reshape(shp)
            out = xp.where(m, out, xp.asarray(fill, dtype=out.dtype))
    if name not in _ROW_MAJOR_GATHERS:
        if out is x:                   # nothing to pad: PyTorch clones the input
            return x.copy() if _canonical_c(x) else copy_preserve(xp, x)
        # PyTorch's padding and upsampling kernels allocate in the input's suggested format
        return _suggested_layout(xp, x, out.astype(x.dtype, copy=False))
    if out is x:
        out = xp.array(x, copy=True)
    return xp.ascontiguousarray(out).astype(x.dtype, copy=False)


# the _gather_axes callers that are not PyTorch pad/upsample kernels: row-major results
_ROW_MAJOR_GATHERS = frozenset({"SliceBackward0", "ScatterAxesBackward0", "CopySlices"})


@_gather_axes.derivative
def _gather_axes_bw(ctx, g):
    x, spec, name = ctx.args
    return (_scatter_axes(g, spec, tuple(x.shape)),)


@defop("_scatter_axes(Tensor grad, Any spec, int[] input_size) -> Tensor", method=False, function=False,
       save=(), grad_fn_name="GatherAxesBackwardBackward0")
def _scatter_axes(xp, g, spec, input_size):
    out = g
    sizes = [tuple(input_size)]
    for axis, idx, mask, fill in spec[:-1]:
        s = list(sizes[-1])
        s[axis] = len(idx)
        sizes.append(tuple(s))
    for (axis, idx, mask, fill), size in zip(reversed(spec), reversed(sizes)):
        if size[axis] == 0:
            out = xp.zeros(size, dtype=out.dtype)       # (a pad of an empty dim: nothing to add into)
            continue
        if mask is not None:
            shp = [1] * out.ndim
            shp[axis] = len(idx)
            out = out * xp.asarray(mask).reshape(shp).astype(out.dtype)
        n = size[axis]
        # scatter-add along ``axis`` with a one-hot matrix over the index
        onehot = xp.zeros((n, len(idx)), dtype=out.dtype)
        onehot[xp.asarray(idx), xp.arange(len(idx))] = 1
        moved = xp.moveaxis(out, axis, -1)
        res = xp.matmul(moved, onehot.T) if xp.isfinite(moved).all() else _scatter_add_last(xp, moved, idx, n)
        out = xp.moveaxis(res, -1, axis)
    return xp.ascontiguousarray(out).astype(g.dtype, copy=False)


def _scatter_add_last(xp, a, idx, n):
    res = xp.zeros(a.shape[:-1] + (n,), dtype=a.dtype)
    for j, i in enumerate(np.asarray(idx)):
        res[..., i] += a[..., j]
    return res


@_scatter_axes.derivative
def _scatter_axes_bw(ctx, c):
    g, spec, input_size = ctx.args
    zero = tuple((a, i, m, 0) for a, i, m, f in spec)
    return (_gather_axes(c, zero, "ScatterAxesBackward0"),)


# ====================================================================== separable linear resampling
def _swap_last(nd, axis):
    """The permutation ``moveaxis(a, axis, -1)`` applies."""
    axis %= nd
    return tuple(i for i in range(nd) if i != axis) + (axis,)


def _unswap_last(nd, axis):
    """The permutation ``moveaxis(a, -1, axis)`` applies (the inverse of :func:`_swap_last`)."""
    axis %= nd
    rest = tuple(range(nd - 1))
    return rest[:axis] + (nd - 1,) + rest[axis:]


@defop("_resample(Tensor self, Any mats, str name) -> Tensor", method=False, function=False, save=(),
       grad_fn_name=lambda a: a[2])
def _resample(xp, x, mats, name):
    """mats: tuple of (axis, M) with M of shape (out, in); out[..., i, ...] = sum_j M[i, j] x[..., j, ...]."""
    out = x
    acc = x.dtype if np_is_float(x.dtype) else np.float32
    for axis, m in mats:
        # moveaxis as transposes by precomputed permutations: the same views, without
        # moveaxis's argument normalisation (~3 us a call, twice per axis)
        perm = _swap_last(out.ndim, axis)
        moved = out.astype(acc, copy=False).transpose(perm)
        out = xp.matmul(moved, xp.asarray(m, dtype=acc).T).transpose(_unswap_last(out.ndim, axis))
    if name != "ResampleBackwardBackward0":
        # PyTorch's upsampling kernels allocate in the input's suggested format (NHWC for NHWC)
        return _suggested_layout(xp, x, out.astype(x.dtype, copy=False))
    return xp.ascontiguousarray(out).astype(x.dtype, copy=False)


@_resample.derivative
def _resample_bw(ctx, g):
    x, mats, name = ctx.args
    return (_resample(g, tuple((a, np.ascontiguousarray(np.asarray(m).T)) for a, m in reversed(mats)),
                      "ResampleBackwardBackward0"),)


# ====================================================================== normalisation
def _norm_stats(x, dims, eps):
    mu = x.mean(dims, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(dims, keepdim=True)
    rstd = (var + eps) ** -0.5
    return xc * rstd, rstd


def _norm_input_grad(gxhat, xhat, rstd, dims):
    """Gradient w.r.t. x of a normalisation over ``dims`` given the gradient w.r.t. xhat."""
    return rstd * (gxhat - gxhat.mean(dims, keepdim=True) - xhat * (gxhat * xhat).mean(dims, keepdim=True))


def _np_mean(a, axes):
    """``a.mean(axis=axes, keepdims=True)`` of a float numpy array, as numpy computes it (the sum,
    then divided in place by the item count as an intp), without its Python-level steps."""
    n = 1
    for ax in axes:
        n *= a.shape[ax]
    r = np.add.reduce(a, axis=axes, keepdims=True)
    return np.true_divide(r, np.intp(n), out=r, casting="unsafe", subok=False)


def _np_norm(xp, x, axes, eps):
    acc = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    if type(acc) is np.ndarray and acc.size and type(axes) is tuple:
        mean = _np_mean(acc, axes)
        d = acc - mean
        var = _np_mean(d ** 2, axes)
        rstd = 1.0 / np.sqrt(var + eps)
        return d * rstd, mean, rstd
    mean = acc.mean(axis=axes, keepdims=True)
    var = ((acc - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / xp.sqrt(var + eps)
    return (acc - mean) * rstd, mean, rstd


@defop("native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
       "-> Tensor, Tensor, Tensor", method=False, save=("input", "weight"))
def native_layer_norm(xp, x, shape, w, b, eps):
    shape = tuple(shape)
    k = len(shape)
    if k == 0 or tuple(x.shape[x.ndim - k:]) != shape or x.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(x.shape)}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
                               f"shape {list(t.shape)} and normalized_shape = {list(shape)}")
    axes = tuple(range(x.ndim - k, x.ndim))
    xhat, mean, rstd = _np_norm(xp, x, axes, eps)
    out = xhat
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    dt = x.dtype
    # row-major, as PyTorch's (it normalises a contiguous copy of the input)
    return (as_contiguous(xp, out.astype(dt), x), as_contiguous(xp, mean.astype(dt), x),
            as_contiguous(xp, rstd.astype(dt), x))


@native_layer_norm.derivative
def _native_layer_norm_bw(ctx, grads):
    x, shape, w, b, eps = ctx.args
    g = grads[0]
    n = ctx.needs_input_grad
    if g is None:
        return None, None, None
    k = len(shape)
    dims = list(range(x.dim() - k, x.dim()))
    lead = list(range(x.dim() - k))
    if x.dtype in (_t.float16, _t.bfloat16) and x.numel() and all(t is None or t.dtype is x.dtype for t in (w, b)) \
            and _unrecorded(x, g):
        # (create_graph, or a trace -- aot's fake tensors, a tracing mode --: the differentiable
        # formula below; the half kernel reads the arrays with numpy, which a trace neither
        # records nor can do on fake data)
        return _half_layer_norm_bw(g, x, w, b, dims, eps, n)
    xhat, rstd = _norm_stats(x, dims, eps)
    gx = gw = gb = None
    if n[0]:
        gxhat = g * w if w is not None else g
        gx = _norm_input_grad(gxhat, xhat, rstd, dims)
    if w is not None and n[1]:
        gw = (g * xhat).sum(lead) if lead else g * xhat
    if b is not None and n[2]:
        gb = g.sum(lead) if lead else g
    return gx, gw, gb


def _thread_chunks_half_sum(t, dt):
    """Sum of ``t`` (float32, rows x N) over its rows as torch's CPU norm backward kernels sum a
    half parameter's gradient: the rows split into ``get_num_threads`` contiguous chunks (as
    ``at::parallel_for``), each chunk accumulated row by row in the half dtype (each step
    rounded), the chunks' partial sums added in float32, rounded once."""
    from .._settings import get_num_threads
    a = t._data
    M = a.shape[0]
    nt = max(1, min(get_num_threads(), M))
    ch = -(-M // nt)
    tot = np.zeros(a.shape[1:], np.float32)
    hd = dt.np
    for s in range(0, M, ch):
        acc = np.zeros(a.shape[1:], np.float32)
        for i in range(s, min(M, s + ch)):
            acc = (acc + a[i]).astype(hd).astype(np.float32)
        tot = tot + acc
    return _make(tot.astype(hd), t.device)


def _grad_enabled():
    from ..autograd.grad_mode import is_grad_enabled
    return is_grad_enabled()


def _half_layer_norm_bw(g, x, w, b, dims, eps, n):
    """Layer norm's gradients for a float16/bfloat16 input (weight and bias of its dtype), as
    torch's CPU backward kernel: float32 arithmetic from the saved (half) mean and rstd,
    dx = rstd * dy * w + b' * x + c' per row; the weight's and bias's gradients summed over the
    rows by ``_thread_chunks_half_sum``."""
    dt = x.dtype
    xf, gf = x.detach().float(), g.float()
    _, m, r = _np_norm(np, x._data, tuple(dims), eps)        # the forward's statistics, rounded as saved
    mean = _make(m.astype(dt.np).astype(np.float32), x.device)
    rstd = _make(r.astype(dt.np).astype(np.float32), x.device)
    wf = w.detach().float() if w is not None else None
    cnt = 1
    for d in dims:
        cnt *= x.shape[d]
    gx = gw = gb = None
    if n[0]:
        gw_ = gf * wf if wf is not None else gf
        ds = (gw_ * xf).sum(dims, keepdim=True)
        db = gw_.sum(dims, keepdim=True)
        scale = 1.0 / cnt
        bb = (db * mean - ds) * rstd * rstd * rstd * scale
        c = -bb * mean - db * rstd * scale
        gx = (rstd * gw_ + bb * xf + c).to(dt)
    lead = x.dim() - len(dims)
    if w is not None and n[1]:
        t = gf * (rstd * xf + (-rstd * mean))
        gw = _thread_chunks_half_sum(t.reshape(-1, *w.shape), dt) if lead else t.to(dt)
    if b is not None and n[2]:
        gb = _thread_chunks_half_sum(gf.reshape(-1, *b.shape), dt) if lead else g
    return gx, gw, gb


def _half_group_norm_bw(g, x, w, b, N, C, G, eps, n):
    """Group norm's gradients for a float16/bfloat16 input (weight and bias of its dtype), as
    torch's CPU backward kernel: per (n, c) sums ds = sum(dy * x), db = sum(dy) in float32, per
    group dx = rstd * w * dy + c2 * x + c3 from the saved (half) mean and rstd, dweight =
    sum_n (ds - db * mean) * rstd, dbias = sum_n db; each rounded once."""
    dt = x.dtype
    shape = tuple(x.shape)
    D = C // G
    _, m, r = _np_norm(np, x._data.reshape(N, G, -1), (2,), eps)
    mean = _make(m.reshape(N, G).astype(dt.np).astype(np.float32), x.device)
    rstd = _make(r.reshape(N, G).astype(dt.np).astype(np.float32), x.device)
    xf = x.detach().float().reshape(N, C, -1)
    gf = g.float().reshape(N, C, -1)
    ds = (gf * xf).sum(2)
    db = gf.sum(2)
    mc = mean.repeat_interleave(D, 1)
    rc = rstd.repeat_interleave(D, 1)
    gx = gw = gb = None
    if n[0]:
        wf = w.detach().float() if w is not None else None
        dsg = (ds * wf if wf is not None else ds).reshape(N, G, D).sum(2)
        dbg = (db * wf if wf is not None else db).reshape(N, G, D).sum(2)
        s = 1.0 / (D * xf.shape[2])
        c2 = (dbg * mean - dsg) * rstd * rstd * rstd * s
        c3 = -c2 * mean - dbg * rstd * s
        c1 = rc * wf if wf is not None else rc
        gx = (c1.unsqueeze(2) * gf + c2.repeat_interleave(D, 1).unsqueeze(2) * xf
              + c3.repeat_interleave(D, 1).unsqueeze(2)).reshape(shape).to(dt)
    if w is not None and n[1]:
        gw = ((ds - db * mc) * rc).sum(0).to(dt)
    if b is not None and n[2]:
        gb = db.sum(0).to(dt)
    return gx, gw, gb


def _bn_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _bn_stats_dtype(x, *params):
    """The dtype of batch norm's saved statistics (and of the backward's arithmetic): the
    parameters' for torch's mixed-type case -- a float16/bfloat16 input with float32
    weight/bias/running buffers, which is what autocast runs (it leaves batch_norm in the
    input's dtype) -- else the input's. Works on arrays and tensors alike. Rounding the batch
    mean to bfloat16 put it into the running statistics one ulp off torch's."""
    p = next((t for t in params if t is not None), None)
    if p is not None and p.dtype != x.dtype and x.dtype.name in ("float16", "bfloat16"):
        return p.dtype
    return x.dtype


def _suggested_layout(xp, x, out, w=None):
    """``out`` in the layout PyTorch's CNN kernels (batch/group norm, pooling, padding,
    upsampling; convolution, which also asks its weight ``w``) allocate for a 4-D input ``x``:
    NHWC when ``x`` (or ``w``) suggests channels_last, else row-major. A row-major input
    never suggests channels_last, so the common case is decided by a flag test."""
    if x.flags.c_contiguous and 1 not in x.shape and (w is None or w.flags.c_contiguous and 1 not in w.shape) \
            and out.flags.c_contiguous and 1 not in out.shape:
        return out                  # row-major in, row-major out (tested inline: it is hot)
    if x.ndim == 4 and out.ndim == 4 and (
            (not _canonical_c(x) and _M.suggest_channels_last(x.shape, estrides(x))) or
            (w is not None and w.ndim == 4 and not _canonical_c(w) and
             _M.suggest_channels_last(w.shape, estrides(w)))):
        if estrides(out) == _M.channels_last_strides(out.shape):
            return out
        r = empty_strided(xp, out.shape, _M.channels_last_strides(out.shape), out.dtype)
        r[...] = out
        return r
    return as_contiguous(xp, out)


def _fma32(a, b, c):
    """float32 a * b + c rounded once (the product is exact in float64)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def _half_batch_norm(x, w, b, rm, rv, training, eps, shp, axes):
    """``native_batch_norm`` of a float16/bfloat16 input with parameters of its dtype, rounded as
    torch's CPU kernel: the statistics computed in float32 and saved in the half dtype (bfloat16
    also rounds the sum of squares and the variance before the inverse square root), the output one fused multiply-add
    in float32, x * alpha + beta, from the saved (rounded) mean and invstd."""
    dt = x.dtype
    C = x.shape[1]
    xf = x.astype(np.float32)
    if training:
        cnt = x.size // max(C, 1)
        if cnt <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(x.shape)}")
        mean = xf.mean(axis=axes, keepdims=True, dtype=np.float32)
        d = xf - mean
        vs = np.add.reduce(d * d, axis=axes, keepdims=True)
        if dt.name == "bfloat16":      # the sum of squares and the variance each rounded
            var = (vs.astype(dt).astype(np.float32) / np.float32(cnt)).astype(dt).astype(np.float32)
        else:
            var = vs / np.float32(cnt)
        with np.errstate(divide="ignore"):
            invstd = (np.float32(1) / np.sqrt(var + np.float32(eps))).astype(dt)
        save_mean, save_rstd = mean.astype(dt).reshape(C), invstd.reshape(C)
        mf, inv = save_mean.astype(np.float32), save_rstd.astype(np.float32)
    else:
        if rm is None or rv is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        with np.errstate(divide="ignore"):
            inv = np.float32(1) / np.sqrt(rv.astype(np.float32) + np.float32(eps))
        mf = rm.astype(np.float32)
        save_mean, save_rstd = np.array(rm, copy=True).reshape(C), inv.reshape(C).astype(dt)
    alpha = inv * w.astype(np.float32) if w is not None else inv
    beta = -(mf * alpha) if b is None else b.astype(np.float32) - mf * alpha
    out = _fma32(xf, alpha.reshape(shp), beta.reshape(shp).astype(np.float32))
    return _suggested_layout(np, x, out.astype(dt)), save_mean, save_rstd


def half_batch_norm_running_update(input, mean, running_mean, running_var, m):
    """``F.batch_norm``'s running-statistics update (training) for a float16/bfloat16 input, as
    torch's CPU kernel rounds it; False (nothing done) where the generic composite must run (a
    mode, a subclass, non-numpy data, another dtype). The batch statistics in float32 (the
    mean, the sum of squares about it); then

    - bfloat16 buffers: c10::BFloat16 arithmetic, each step rounded: momentum m rounded, the
      saved (rounded) mean, the unbiased variance as rounded(sum of squares) / rounded(n - 1);
      ``rm = m * mean + (1 - m) * rm``, ``rv = m * var + (1 - m) * rv``;
    - float16 buffers: float32 arithmetic from the unrounded statistics, rounded once into the
      buffer.
    (float32 buffers with a half input, torch's mixed case, keep the composite: its float32 sums'
    order, an ulp off in a rare channel.)"""
    from ..nn._eager_fast import _bufs_plain
    if not _bufs_plain(input, mean, running_mean, running_var):
        return False
    x = input._data
    hd = x.dtype
    if hd.name not in ("float16", "bfloat16") or x.ndim < 2 or not x.size or type(m) not in (int, float):
        return False
    bufs = [b for b in (running_mean, running_var) if b is not None]
    if any(b._data.dtype != hd or b._data.shape != (x.shape[1],) for b in bufs) or mean._data.dtype != hd:
        return False
    C = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // C
    x64 = x.astype(np.float64)
    mean_f = x64.mean(axis=axes).astype(np.float32)
    vs = ((x64 - mean_f.astype(np.float64).reshape(_bn_shape(x))) ** 2).sum(axis=axes).astype(np.float32)
    f32 = np.float32

    def H(v, dt):
        return np.asarray(v, np.float32).astype(dt).astype(np.float32)

    with np.errstate(all="ignore"):
        for buf, is_var in ((running_mean, False), (running_var, True)):
            if buf is None:
                continue
            b = buf._data
            bf = b.astype(np.float32)
            if b.dtype.name == "bfloat16":
                mom = H(m, b.dtype)
                keep = H(f32(1) - mom, b.dtype)
                if is_var:
                    stat = H(H(vs, b.dtype) / H(max(n - 1, 1), b.dtype), b.dtype)
                    new = mom * stat + H(keep * bf, b.dtype)
                else:
                    stat = mean._data.astype(np.float32)         # the saved mean (rounded)
                    new = H(mom * stat, b.dtype) + H(keep * bf, b.dtype)
            else:
                stat = vs / f32(max(n - 1, 1)) if is_var else mean_f
                new = f32(m) * stat + f32(1 - m) * bf
            np.copyto(b, np.asarray(new, np.float32).astype(b.dtype), casting="unsafe")
            buf._bump_version()
            buf._bump_version()
    return True


@defop("native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
       "Tensor? running_var, bool training, float momentum, float eps) -> Tensor, Tensor, Tensor",
       method=False, save=("input", "weight"), save_result=True)
def native_batch_norm(xp, x, w, b, rm, rv, training, momentum, eps):
    if x.ndim < 2:
        raise ValueError(f"Expected 2D or more input (got {x.ndim}D input)")
    C = x.shape[1]
    for name, t in (("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)):
        if t is not None and t.size != C:
            raise RuntimeError(f"{name} should contain {C} elements not {t.size}")
    shp = _bn_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    dt = x.dtype
    if xp is np and x.size and dt.name in ("float16", "bfloat16") and _bn_stats_dtype(x, w, b, rm, rv) == dt:
        return _half_batch_norm(x, w, b, rm, rv, training, eps, shp, axes)
    if training:
        cnt = x.size // max(C, 1)
        if cnt <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(x.shape)}")
        xhat, mean, rstd = _np_norm(xp, x, axes, eps)
        save_mean, save_rstd = mean.reshape(C), rstd.reshape(C)
    else:
        if rm is None or rv is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        acc = np.float64 if dt == np.float64 else np.float32
        rstd = 1.0 / xp.sqrt(rv.astype(acc) + eps)
        xhat = (x.astype(acc) - rm.astype(acc).reshape(shp)) * rstd.reshape(shp)
        # (PyTorch returns empty tensors here; ember returns the statistics it used, which the
        # derivative needs: the running buffers themselves may be updated in place later)
        save_mean = xp.array(rm, copy=True).reshape(C)
        save_rstd = rstd.reshape(C)
    out = xhat
    if w is not None:
        out = out * w.reshape(shp)
    if b is not None:
        out = out + b.reshape(shp)
    sdt = _bn_stats_dtype(x, w, b, rm, rv)
    return _suggested_layout(xp, x, out.astype(dt)), save_mean.astype(sdt), save_rstd.astype(sdt)


@native_batch_norm.derivative
def _native_batch_norm_bw(ctx, grads):
    x, w, b, rm, rv, training, momentum, eps = ctx.args
    g = grads[0]
    n = ctx.needs_input_grad
    if g is None:
        return None, None, None, None, None
    shp = _bn_shape(x)
    dims = [0] + list(range(2, x.dim()))
    xdt, sdt = x.dtype, _bn_stats_dtype(x, w, b, rm, rv)
    if sdt is xdt and xdt in (_t.float16, _t.bfloat16) and x.numel() and not _grad_enabled():
        return _half_batch_norm_bw(ctx, g, x, w, training, shp, dims, n)
    if sdt is not xdt:
        # mixed types: the input's gradient in its dtype, the arithmetic in the parameters'
        x, g = x.to(sdt), g.to(sdt)
    if training and _grad_enabled():
        # a differentiable backward (create_graph): the statistics as functions of x
        xhat, rstd = _norm_stats(x, dims, eps)
    else:
        # torch's backward: the forward's saved mean and inverse std -- in training the batch's
        # (recomputed, they were traced into a compiled training graph a second time)
        smean, srstd = ctx.result_at(1), ctx.result_at(2)    # (output 0 may be ReLU'd in place)
        rstd = srstd.detach().reshape(shp)
        xhat = (x - smean.detach().reshape(shp)) * rstd
    gx = gw = gb = None
    wr = w.reshape(shp) if w is not None else None
    if n[0]:
        gxhat = g * wr if wr is not None else g
        gx = _norm_input_grad(gxhat, xhat, rstd, dims) if training else gxhat * rstd
        gx = gx.to(xdt)
    if w is not None and n[1]:
        gw = (g * xhat).sum(dims)
    if b is not None and n[2]:
        gb = g.sum(dims)
    return gx, gw, gb, None, None


def _half_batch_norm_bw(ctx, g, x, w, training, shp, dims, n):
    """Batch norm's gradients for a float16/bfloat16 input with parameters of its dtype, as
    torch's CPU backward kernel: float32 arithmetic from the saved (half) mean and invstd, each
    gradient rounded once to the half dtype."""
    dt = x.dtype
    xf, gf = x.float(), g.float()
    # (eval: torch's invstd of the running variance is float32; ember saved it rounded, as the
    # buffer itself may change in place before the backward)
    mean = ctx.result_at(1).detach().float().reshape(shp)
    invstd = ctx.result_at(2).detach().float().reshape(shp)
    xc = xf - mean
    sum_g = gf.sum(dims, keepdim=True)
    dotp = (xc * gf).sum(dims, keepdim=True)
    gx = gw = gb = None
    if n[0]:
        scale = invstd * w.detach().float().reshape(shp) if w is not None else invstd
        if training:
            cnt = x.numel() // x.shape[1]
            k = dotp * invstd * invstd / cnt
            gx = (gf - sum_g / cnt - xc * k) * invstd
            gx = gx * w.detach().float().reshape(shp) if w is not None else gx
        else:
            gx = gf * scale
        gx = gx.to(dt)
    if w is not None and n[1]:
        gw = (dotp * invstd).reshape(-1).to(dt)
    if n[2]:
        gb = sum_g.reshape(-1).to(dt)
    return gx, gw, gb, None, None


@defop("native_group_norm(Tensor input, Tensor? weight, Tensor? bias, int N, int C, int HxW, int group, "
       "float eps) -> Tensor, Tensor, Tensor", method=False, save=("input", "weight"))
def native_group_norm(xp, x, w, b, N, C, HxW, group, eps):
    if C % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(x.shape)} and num_groups={group}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and (t.ndim != 1 or t.size != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in "
                               f"input, but got {name} of shape {list(t.shape)} and input of shape "
                               f"{list(x.shape)}")
    xr = x.reshape(N, group, -1)
    xhat, mean, rstd = _np_norm(xp, xr, (2,), eps)
    out = xhat.reshape(x.shape)
    shp = _bn_shape(x)
    if w is not None:
        out = out * w.reshape(shp)
    if b is not None:
        out = out + b.reshape(shp)
    dt = x.dtype
    return (_suggested_layout(xp, x, out.astype(dt)), mean.reshape(N, group).astype(dt),
            rstd.reshape(N, group).astype(dt))


@native_group_norm.derivative
def _native_group_norm_bw(ctx, grads):
    x, w, b, N, C, HxW, group, eps = ctx.args
    g = grads[0]
    n = ctx.needs_input_grad
    if g is None:
        return None, None, None
    shape = tuple(x.shape)
    if x.dtype in (_t.float16, _t.bfloat16) and x.numel() and all(t is None or t.dtype is x.dtype for t in (w, b)) \
            and _unrecorded(x, g):          # (as layer norm's)
        return _half_group_norm_bw(g, x, w, b, N, C, group, eps, n)
    xr = x.reshape(N, group, -1)
    xhat_r, rstd = _norm_stats(xr, [2], eps)
    xhat = xhat_r.reshape(*shape)
    shp = _bn_shape(x)
    dims = [0] + list(range(2, len(shape)))
    gx = gw = gb = None
    if n[0]:
        gxhat = (g * w.reshape(shp) if w is not None else g).reshape(N, group, -1)
        gx = _norm_input_grad(gxhat, xhat_r, rstd, [2]).reshape(*shape)
    if w is not None and n[1]:
        gw = (g * xhat).sum(dims)
    if b is not None and n[2]:
        gb = g.sum(dims)
    return gx, gw, gb


# ====================================================================== embedding / one_hot
def _check_index_dtype(idx, fn, arg="indices"):
    if idx.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"Expected tensor for argument #1 '{arg}' to have one of the following scalar types: "
                           f"Long, Int; but got ember.{_legacy(idx)}Tensor instead (while checking arguments "
                           f"for {fn})")


@defop("embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, "
       "bool sparse=False) -> Tensor", method=False, save=("indices",))
def embedding(xp, w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    _check_index_dtype(idx, "embedding")
    if w.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        raise IndexError("index out of range in self")
    return xp.take(w, idx, axis=0)


@embedding.derivative
def _embedding_bw(ctx, g):
    w, idx, padding_idx, sgf, sparse = ctx.args
    if sparse:     # a sparse COO gradient: one row per looked-up index (ember/sparse)
        from ..sparse._ops import embedding_sparse_backward
        return (embedding_sparse_backward(g, idx, w.shape[0], padding_idx, sgf), None)
    return (embedding_dense_backward(g, idx, w.shape[0], padding_idx, sgf), None)


@defop("embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, int padding_idx, "
       "bool scale_grad_by_freq) -> Tensor", method=False, save=("indices",))
def embedding_dense_backward(xp, g, idx, num_weights, padding_idx, sgf):
    flat = idx.reshape(-1)
    D = g.shape[-1]
    gr = g.reshape(-1, D)
    if sgf:
        counts = xp.bincount(flat, minlength=num_weights)
        gr = gr / counts[flat][:, None].astype(g.dtype)
    if padding_idx is not None and padding_idx >= 0:
        keep = flat != padding_idx
        flat, gr = flat[keep], gr[keep]
    out = xp.zeros((num_weights, D), dtype=g.dtype)
    xp.add.at(out, flat, gr)
    return out


@embedding_dense_backward.derivative
def _embedding_dense_backward_bw(ctx, c):
    g, idx, num_weights, padding_idx, sgf = ctx.args
    if sgf:
        raise RuntimeError("double backward of embedding with scale_grad_by_freq=True is not supported by ember")
    out = embedding(c, idx)
    if padding_idx is not None and padding_idx >= 0:
        out = out * (idx != padding_idx).unsqueeze(-1).to(out.dtype)
    return (out, None)


@defop("one_hot(Tensor self, int num_classes=-1) -> Tensor", method=False, tags=("nondifferentiable",),
       save=())
def one_hot(xp, x, num_classes=-1):
    if x.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if x.size and x.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if x.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(x.max()) + 1
    elif x.size and x.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = xp.zeros(x.shape + (num_classes,), dtype=np.int64)
    xp.put_along_axis(out, x[..., None], 1, axis=-1)
    return out


# ====================================================================== losses (kernels)
def _check_loss_shapes(x, t):
    if x.shape != t.shape:
        raise RuntimeError(f"The size of tensor a ({x.shape[-1] if x.ndim else 1}) must match the size of "
                           f"tensor b ({t.shape[-1] if t.ndim else 1}) at non-singleton dimension "
                           f"{max(x.ndim, t.ndim) - 1}")


@defop("mse_loss(Tensor self, Tensor target, int reduction=1) -> Tensor", method=False)
def mse_loss(xp, x, t, reduction=1):
    _check_loss_shapes(x, t)
    d = x - t.astype(x.dtype, copy=False)
    return _reduce_arr(xp, d * d, reduction)


@mse_loss.derivative
def _mse_loss_bw(ctx, g):
    x, t, reduction = ctx.args
    n = ctx.needs_input_grad
    if x.dtype in (_t.float16, _t.bfloat16) and g.dtype is x.dtype and t.dtype is x.dtype:
        # torch's half kernel: (x - t), times the norm (2/numel for the mean, rounded to the
        # half dtype), times the gradient: each step rounded
        norm = 2.0 / x.numel() if reduction == 1 and x.numel() else (2.0 if reduction != 1 else float("nan"))
        gx = (x - t) * x.new_full((), norm) * g
    else:
        gx = _grad_scale(g, reduction, x.numel()) * 2 * (x - t)
    return (gx if n[0] else None, -gx if n[1] else None)


def _pw_half_diff(x, t, rounds):
    """x - t for smooth_l1/huber: a half input's loss computed in float32 and rounded once, as
    torch's kernels, but for the dtype ``rounds``, where torch's kernel runs in half steps (each
    rounded: numpy's arithmetic on the half array)."""
    name = x.dtype.name
    if name not in ("float16", "bfloat16") or t.dtype != x.dtype or name == rounds:
        return x - t
    return x.astype(np.float32) - t.astype(np.float32)


def _pw_loss_arr(xp, d, kind, param):
    ad = xp.abs(d)
    if kind == "smooth_l1":
        if param == 0:
            return ad
        return xp.where(ad < param, 0.5 * d * d / param, ad - 0.5 * param)
    return xp.where(ad < param, 0.5 * d * d, param * (ad - 0.5 * param))


@defop("smooth_l1_loss(Tensor self, Tensor target, int reduction=1, float beta=1.0) -> Tensor", method=False)
def smooth_l1_loss(xp, x, t, reduction=1, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _check_loss_shapes(x, t)
    return _reduce_arr(xp, _pw_loss_arr(xp, _pw_half_diff(x, t, "float16"), "smooth_l1", beta).astype(x.dtype),
                       reduction)


@smooth_l1_loss.derivative
def _smooth_l1_loss_bw(ctx, g):
    x, t, reduction, beta = ctx.args
    if reduction == 1 and type(ctx).__name__ == "_Float32Ctx" and x.numel():
        # a half input's fused float32 backward (torch's order), rounded once: norm * d * grad / beta
        # inside (-beta, beta), +-norm * grad outside; norm = 1/numel
        norm = 1.0 / x.numel()
        d = x - t
        out = g * norm
        inner = d * norm * g / beta if beta else d * 0
        gx = api.where(d <= -beta, -out, api.where(d >= beta, out, inner))
    else:
        gx = _pw_loss_backward(_grad_scale(g, reduction, x.numel()), x, t, "smooth_l1", beta)
    n = ctx.needs_input_grad
    return (gx if n[0] else None, -gx if n[1] else None)


@defop("huber_loss(Tensor self, Tensor target, int reduction=1, float delta=1.0) -> Tensor", method=False)
def huber_loss(xp, x, t, reduction=1, delta=1.0):
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta.")
    _check_loss_shapes(x, t)
    return _reduce_arr(xp, _pw_loss_arr(xp, _pw_half_diff(x, t, "bfloat16"), "huber", delta).astype(x.dtype),
                       reduction)


@huber_loss.derivative
def _huber_loss_bw(ctx, g):
    x, t, reduction, delta = ctx.args
    if x.dtype in (_t.float16, _t.bfloat16) and g.dtype is x.dtype and t.dtype is x.dtype:
        # torch's half kernel, each step rounded: norm * (x - t) * grad inside [-delta, delta],
        # +-(norm * delta) * grad outside; norm = 1/numel (mean) as the half dtype
        norm = (1.0 / x.numel() if x.numel() else float("nan")) if reduction == 1 else 1.0
        nv = x.new_full((), norm)
        d = x - t
        out = nv * x.new_full((), delta) * g
        gx = api.where(d <= -delta, -out, api.where(d >= delta, out, nv * d * g))
    else:
        gx = _pw_loss_backward(_grad_scale(g, reduction, x.numel()), x, t, "huber", delta)
    n = ctx.needs_input_grad
    return (gx if n[0] else None, -gx if n[1] else None)


@defop("_pw_loss_backward(Tensor grad, Tensor self, Tensor target, str kind, float param) -> Tensor",
       method=False, function=False, grad_fn_name="PwLossBackwardBackward0")
def _pw_loss_backward(xp, g, x, t, kind, param):
    d = x - t
    if kind == "smooth_l1":
        f = ((d > 0).astype(d.dtype) - (d < 0).astype(d.dtype)) if param == 0 else xp.clip(d / param, -1, 1)
    else:
        f = xp.clip(d, -param, param)
    return (g * f).astype(x.dtype)


@_pw_loss_backward.derivative
def _pw_loss_backward_bw(ctx, c):
    g, x, t, kind, param = ctx.args
    n = ctx.needs_input_grad
    # (the incoming grad may be a reduced loss's scalar broadcast over x: its gradient sums back)
    gg = sum_to(_pw_loss_backward(c, x, t, kind, param), tuple(g.shape)) if n[0] else None
    # the elementwise factor is piecewise linear: its slope is 1/param (smooth_l1) or 1 (huber) inside
    d = (x - t).detach()
    inside = ((d < param) & (d > -param)).to(x.dtype) if param != 0 else d * 0
    slope = inside / param if kind == "smooth_l1" and param != 0 else inside
    h = c * g * slope
    return gg, (h if n[1] else None), (-h if n[2] else None)


@defop("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1) -> Tensor",
       method=False)
def binary_cross_entropy(xp, x, t, w=None, reduction=1):
    if x.shape != t.shape:
        raise ValueError(f"Using a target size ({list(t.shape)}) that is different to the input size "
                         f"({list(x.shape)}) is deprecated. Please ensure they have the same size.")
    if x.size and (x.min() < 0 or x.max() > 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):
        lx = xp.maximum(xp.log(x), -100)
        l1x = xp.maximum(xp.log1p(-x), -100)
    loss = -(t * lx + (1 - t) * l1x)
    if w is not None:
        loss = loss * w
    return _reduce_arr(xp, loss.astype(x.dtype), reduction)


@binary_cross_entropy.derivative
def _bce_bw(ctx, g):
    x, t, w, reduction = ctx.args
    if reduction == 1 and x.numel() and (g.dtype is x.dtype or x.dtype not in (_t.float16, _t.bfloat16)):
        # torch's kernels divide by numel last, after the weight (each step rounded)
        gx, gt = _bce_backward(g, x, t, w)
        gx, gt = gx / x.numel(), gt / x.numel()
    else:
        gs = _grad_scale(g, reduction, x.numel())
        gx, gt = _bce_backward(gs, x, t, w)
    n = ctx.needs_input_grad
    return (gx if n[0] else None, gt if n[1] else None, None)


@defop("_bce_backward(Tensor grad, Tensor self, Tensor target, Tensor? weight) -> Tensor, Tensor",
       method=False, function=False, grad_fn_name="BinaryCrossEntropyBackwardBackward0")
def _bce_backward(xp, g, x, t, w):
    eps = 1e-12
    gx = g * (x - t) / xp.maximum((1 - x) * x, eps)
    with np.errstate(divide="ignore"):
        # torch's -logit(x) = -log(x / (1 - x)), unclamped: the -100 clamp bounds the loss, not
        # its target derivative (+-inf at x = 0 / 1; -0 at x = 0.5)
        gt = g * -xp.log(x / (1 - x))
    if w is not None:
        gx, gt = gx * w, gt * w
    return gx.astype(x.dtype), gt.astype(x.dtype)


@_bce_backward.derivative
def _bce_backward_bw(ctx, grads):
    """Double backward of binary_cross_entropy, written with differentiable ops.

    gx = g*w*(x-t)/D with D = max(x(1-x), eps); gt = -g*w*logit(x), unclamped as torch's
    (d/dx -logit(x) = -1/(x(1-x))). The weight gets no gradient, as in PyTorch."""
    g, x, t, w = ctx.args
    ggx, ggt = grads
    n = ctx.needs_input_grad
    eps = 1e-12
    xx = x * (1 - x)
    live = (xx > eps).to(x.dtype)
    d = api.clamp(xx, min=eps)
    one_w = w if w is not None else None
    gg_g = gg_x = gg_t = None
    terms_g, terms_x, terms_t = [], [], []
    if ggx is not None:
        gw = ggx if one_w is None else ggx * one_w
        terms_g.append(gw * (x - t) / d)
        # d/dx [(x-t)/D] = (D - (x-t) dD/dx) / D^2, dD/dx = (1-2x) where D is not clamped
        terms_x.append(gw * g * (d - (x - t) * (1 - 2 * x) * live) / (d * d))
        terms_t.append(-gw * g / d)
    if ggt is not None:
        gw = ggt if one_w is None else ggt * one_w
        terms_g.append(-gw * api.log(x / (1 - x)))
        terms_x.append(-gw * g / (x * (1 - x)))
    if n[0] and terms_g:
        gg_g = sum(terms_g[1:], terms_g[0])
    if n[1] and terms_x:
        gg_x = sum(terms_x[1:], terms_x[0])
    if n[2] and terms_t:
        gg_t = sum(terms_t[1:], terms_t[0])
    return gg_g, gg_x, gg_t, None


def _softplus(xp, z):
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


@defop("binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
       "Tensor? pos_weight=None, int reduction=1) -> Tensor", method=False)
def binary_cross_entropy_with_logits(xp, x, t, w=None, pw=None, reduction=1):
    if x.shape != t.shape:
        raise ValueError(f"Target size ({list(t.shape)}) must be the same as input size ({list(x.shape)})")
    t = t.astype(x.dtype, copy=False)
    if xp is np and x.dtype.name in ("float16", "bfloat16") and all(
            a is None or a.dtype == x.dtype for a in (w, pw)):
        # torch's composite in half ops, each rounded: (1 - t) * x - log_sigmoid(x) [* log_weight]
        xf = x.astype(np.float32)
        ls = (np.minimum(xf, 0) - np.log1p(np.exp(-np.abs(xf)))).astype(x.dtype)
        if pw is not None:
            ls = ls * ((pw - 1) * t + 1)
        loss = (1 - t) * x - ls
        if w is not None:
            loss = loss * w
        return _reduce_arr(xp, np.asarray(loss).astype(x.dtype), reduction)
    if pw is not None:
        loss = pw * t * _softplus(xp, -x) + (1 - t) * _softplus(xp, x)
    else:
        loss = t * _softplus(xp, -x) + (1 - t) * _softplus(xp, x)
    if w is not None:
        loss = loss * w
    return _reduce_arr(xp, xp.asarray(loss).astype(x.dtype), reduction)


@binary_cross_entropy_with_logits.derivative
def _bcel_bw(ctx, g):
    """torch's formulas and rounding order: factor * grad [* weight] [/ numel]. weight and
    pos_weight get no gradient (torch refuses them requiring grad: ``_refuse_grad_for``)."""
    x, t, w, pw, reduction = ctx.args
    n = ctx.needs_input_grad
    half = x.dtype in (_t.float16, _t.bfloat16)
    if half and (g.dtype is not x.dtype or t.dtype is not x.dtype or pw is not None
                 or (w is not None and w.dtype is not x.dtype)):
        # mixed half dtypes: the formulas on the pre-scaled gradient (ember's own rounding)
        g, reduction = _grad_scale(g, reduction, x.numel()), 2
    sig = api.sigmoid(x) if n[0] else None
    if pw is not None:
        pt = pw * t
        gx = ((pt + 1 - t) * sig - pt) if n[0] else None
        # d loss / d t = logsig(-x) - pw * logsig(x); the log(1 - sigmoid(x)) form rounds to
        # log(0) = -inf once sigmoid(x) rounds to 1 (x > ~17 in float32)
        gt = (api.logsigmoid(-x) - api.logsigmoid(x) * pw) if n[1] else None
    else:
        gx = (sig - t) if n[0] else None
        gt = -x if n[1] else None
    return (_bcel_finish(gx, g, w, reduction, x) if n[0] else None,
            _bcel_finish(gt, g, w, reduction, t) if n[1] else None, None, None)


def _bcel_finish(f, g, w, reduction, like):
    """factor * grad [* weight] [/ numel], summed to ``like``'s shape (broadcast weights)."""
    r = f * g
    if w is not None:
        r = r * w
    if reduction == 1:
        r = r / like.numel() if like.numel() else r * float("nan")
    return sum_to(r, like.shape)


def _refuse_grad_for(op, names, torch_name):
    """Refuse, as torch does when it records the call, a tensor requiring grad in ``names``:
    torch has no derivative formula for these arguments (loss weights) and raises rather than
    leave them without a gradient. ember records an op's node through ``op._rec`` (only with
    grad mode on and some tensor argument requiring grad), so the check wraps that: an
    instance attribute shadowing ``OpDef._rec``, which builds the recorder itself.
    ``torch_name(args)``: the name torch's message gives the function."""
    pos = tuple((i, p.name) for i, p in enumerate(op.params) if p.name in names)
    built = []

    def rec(args, out):
        for i, name in pos:
            a = args[i]
            if a is not None and a.requires_grad:
                raise RuntimeError(f"The function '{torch_name(args)}' is not differentiable with "
                                   f"respect to argument '{name}'. This input cannot have "
                                   "requires_grad True.")
        if not built:
            from ..autograd.graph import build_record, record
            # (no straight-line recorder for this op: the generic one, as ``OpDef._rec``)
            built.append(build_record(op) or (lambda a, o: record(op, a, o)))
        return built[0](args, out)

    op.__dict__["_rec"] = rec


_refuse_grad_for(binary_cross_entropy, ("weight",), lambda args: "binary_cross_entropy")
_refuse_grad_for(binary_cross_entropy_with_logits, ("weight", "pos_weight"),
                 lambda args: "binary_cross_entropy_with_logits")


# ---------------------------------------------------------------------- nll_loss
def _nll_select(xp, x, t, w, ignore_index):
    """(selected -x values * weights, weights) with shapes of the target."""
    C = x.shape[1]
    if xp is np and x.ndim == 2 and t.size and not 0 <= ignore_index < C:
        # the common case in fewer numpy calls (~10 us of a 50 us small cross_entropy): every
        # target a class (so none equals an ignore_index outside [0, C)); the same values
        lo, hi = t.min(), t.max()
        if lo >= 0 and hi < C:
            sel = x[np.arange(t.shape[0]), t]
            ws = np.ones(t.shape, x.dtype) if w is None else w.astype(x.dtype)[t]
            return sel, ws, t
    if w is None:
        w = xp.ones(C, dtype=x.dtype)
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= C))
    if bad.any():
        raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
    tc = xp.where(valid, t, 0)
    sel = xp.take_along_axis(x, tc[:, None], 1)[:, 0]
    ws = xp.where(valid, w.astype(x.dtype)[tc], 0).astype(x.dtype)
    return sel, ws, tc


def _nll_name(args):
    return "NllLoss2DBackward0" if args[0].ndim > 2 else "NllLossBackward0"


def _nll_check_target_dtype(x, t):
    """torch's target dtype checks: nll_loss takes int64 or uint8 class indices; the
    spatial kernel (nll_loss2d, input of 3+ dims) still requires int64."""
    if t.dtype == np.int64:
        return
    if t.dtype != np.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_legacy(t)}")
    if x.ndim > 2:
        raise RuntimeError(f"expected scalar type Long but found {_legacy(t)}")


def _nll_check(x, t, w):
    if x.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {x.ndim})")
    if x.ndim == 1:
        if t.ndim != 0:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    else:
        if t.shape[:1] != x.shape[:1]:
            raise ValueError(f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
                             f"({t.shape[0] if t.ndim else 1}).")
        if x.ndim > 2 and tuple(t.shape[1:]) != tuple(x.shape[2:]):
            raise RuntimeError(f"Expected target size {list(x.shape[:1] + x.shape[2:])}, got {list(t.shape)}")
        if x.ndim == 2 and t.ndim != 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    _nll_check_target_dtype(x, t)
    C = x.shape[0] if x.ndim == 1 else x.shape[1]
    if w is not None and w.size != C:
        raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                           f"weight tensor of shape: {list(w.shape)}")


_NLL_FAST = (np.dtype(np.float32), np.dtype(np.float64))
_NLL_INT64 = np.dtype(np.int64)


def nll_unit(x, t, reduction, ignore_index):
    """``nll_loss_nd``'s (output, total) for its common case in fewer numpy calls, or None: x a
    float32/float64 numpy (N, C), t an int64 (N,) with every target a class, no weight, and no
    class equal to ``ignore_index`` (so every weight is 1). The kernel's arithmetic: loss =
    -sel * 1 (= -sel, NaN signs too), total = a sum of N ones (= N, exact below 2**24), mean =
    sum(loss) / total in x's dtype; each result a fresh array, as the kernel's ``astype``."""
    if type(x) is not np.ndarray or type(t) is not np.ndarray or x.ndim != 2 or t.ndim != 1 \
            or t.dtype != _NLL_INT64 or x.dtype not in _NLL_FAST:
        return None
    N, C = x.shape
    if t.shape[0] != N or N == 0 or N >= 1 << 24 or 0 <= ignore_index < C or t.min() < 0:
        return None
    try:
        sel = x[np.arange(N), t]          # a target >= C raises: the general path's error then
    except IndexError:
        return None
    dt = x.dtype
    loss = -sel
    total = np.array(N, dt)
    if reduction == 0:
        return loss, total
    s = np.add.reduce(loss, dtype=dt)      # (ndarray.sum's reduction)
    if reduction == 2:
        return np.array(s, dt), total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.array(s / total[()], dt), total


def _nll_half_cascade(sel, ws, valid, weighted, reduction):
    """torch's CPU nll_loss sums for float16/bfloat16: the losses and weights accumulated in the
    half dtype (each step rounded) through its 8-level cascade (level size 2**max(4, ceil(log2(n)) // 8)),
    ignored targets skipped (their index still counts); without a weight (2-d input) the total is
    the count of valid targets; the mean divides in the half dtype."""
    dt = sel.dtype
    H = dt.type
    sel, ws, valid = sel.reshape(-1), ws.reshape(-1), valid.reshape(-1)
    n = sel.shape[0]
    levels = 8
    power = ((n - 1).bit_length() if n > 1 else 0) // levels
    power = power if power > 4 else 4
    mask = (1 << power) - 1
    lp = [H(0)] * levels
    wp = [H(0)] * levels
    for b in range(n):
        if not valid[b]:
            continue
        if weighted:
            lp[0] = H(lp[0] - H(sel[b] * ws[b]))
            wp[0] = H(wp[0] + ws[b])
        else:
            lp[0] = H(lp[0] - sel[b])
        for j in range(levels - 1):
            if b & (mask << (j * power)):
                break
            wp[j + 1] = H(wp[j + 1] + wp[j])
            lp[j + 1] = H(lp[j + 1] + lp[j])
            wp[j] = lp[j] = H(0)
    if weighted:
        total = H(0)
        for v in wp:
            total = H(total + v)
    else:
        total = H(int(valid.sum()))
    out = H(0)
    for v in lp:
        out = H(out + v)
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = H(out / total)
    return np.asarray(out, dt), np.asarray(total, dt)


@defop("nll_loss_nd(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, int ignore_index=-100) "
       "-> Tensor, Tensor", method=False, save=("target", "weight"), grad_fn_name=_nll_name)
def nll_loss_nd(xp, x, t, w=None, reduction=1, ignore_index=-100):
    if w is None:
        r = nll_unit(x, t, reduction, ignore_index)
        if r is not None:
            return r
    _nll_check(x, t, w)
    unb = x.ndim == 1
    xx = x[None] if unb else x
    tt = t.reshape(1) if unb else t
    sel, ws, _ = _nll_select(xp, xx, tt, w, ignore_index)
    loss = -sel * ws
    if reduction != 0 and xp is np and _t.from_numpy_dtype(x.dtype).name in ("float16", "bfloat16"):
        out, total = _nll_half_cascade(sel, ws, tt != ignore_index, w is not None or xx.ndim > 2, reduction)
        return out, total
    total = ws.sum(dtype=x.dtype)
    if reduction == 0:
        out = loss[0] if unb else loss
    elif reduction == 2:
        out = loss.sum(dtype=x.dtype)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = loss.sum(dtype=x.dtype) / total
    return xp.asarray(out).astype(x.dtype), xp.asarray(total).astype(x.dtype)


@nll_loss_nd.derivative
def _nll_loss_nd_bw(ctx, grads):
    x, t, w, reduction, ignore_index = ctx.args
    g = grads[0]
    if g is None:
        return None, None, None
    if w is None and _unrecorded(g, t):   # (the op's kernel without a dispatcher round)
        r = _nll_loss_backward.kernel(np, g._data, tuple(x.shape), t._data, None, reduction, ignore_index)
        return (_make(r, g.device), None, None)
    return (_nll_loss_backward(g, tuple(x.shape), t, w, reduction, ignore_index), None, None)


@defop("_nll_loss_backward(Tensor grad, int[] self_size, Tensor target, Tensor? weight, int reduction, "
       "int ignore_index) -> Tensor", method=False, function=False, save=("target", "weight"),
       grad_fn_name="NllLossBackwardBackward0")
def _nll_loss_backward(xp, g, self_size, t, w, reduction, ignore_index):
    shape = tuple(self_size)
    if w is None and type(g) is np.ndarray and g.dtype in _NLL_FAST and len(shape) == 2 \
            and type(t) is np.ndarray and t.dtype == _NLL_INT64 and t.shape == shape[:1]:
        r = _nll_backward_unit(g, shape, t, reduction, ignore_index)
        if r is not None:
            return r
    unb = len(shape) == 1
    xs = (1,) + shape if unb else shape
    tt = t.reshape(1) if unb else t
    dummy = xp.zeros((xs[0], xs[1]) + (1,) * (len(xs) - 2), dtype=g.dtype)
    dummy = xp.broadcast_to(dummy, xs)
    _, ws, tc = _nll_select(xp, dummy, tt, w, ignore_index)
    if reduction == 0:
        gg = g.reshape(1) if unb else g
        coef = -ws * gg
    elif reduction == 2:
        coef = -ws * g
    else:
        if xp is np and _t.from_numpy_dtype(g.dtype).name in ("float16", "bfloat16"):
            # the forward's total weight (torch saves it): summed as torch's half kernel
            total = _nll_half_cascade(ws, ws, tt != ignore_index, w is not None or len(xs) > 2, 2)[1]
        else:
            total = ws.sum(dtype=g.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            coef = -ws * (g / total)
    # as torch's kernel: an ignored target's entry is never written (0 even for a NaN / inf
    # grad), while a weight-0 class still gets 0 * grad (NaN when the total weight is 0)
    coef = xp.where(tt != ignore_index, coef, 0)
    out = xp.zeros(xs, dtype=g.dtype)
    xp.put_along_axis(out, tc[:, None], coef[:, None].astype(g.dtype), axis=1)
    return out.reshape(shape)


def _nll_backward_unit(g, shape, t, reduction, ignore_index):
    """``_nll_loss_backward``'s result for ``nll_unit``'s case (every weight 1), or None: the
    kernel's coefficients (-ws * g, or -ws * (g / total) with total = N) put at the targets of a
    fresh zero (N, C) array."""
    N, C = shape
    if N == 0 or N >= 1 << 24 or 0 <= ignore_index < C or t.min() < 0:
        return None
    dt = g.dtype
    neg = np.full(N, -1, dt)               # -ws
    if reduction == 0:
        if g.shape != (N,):
            return None
        coef = neg * g
    elif reduction == 2:
        coef = neg * g
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            coef = neg * (g / dt.type(N))
    out = np.zeros(shape, dtype=dt)
    try:
        out[np.arange(N), t] = coef        # a target >= C raises: the general path's error then
    except IndexError:
        return None
    return out


@_nll_loss_backward.derivative
def _nll_loss_backward_bw(ctx, c):
    g, self_size, t, w, reduction, ignore_index = ctx.args
    return (nll_loss_nd(c, t, w, reduction, ignore_index)[0], None, None)


# torch's nll_loss runs nll_loss2d_forward for an input of more than 2 dims
_refuse_grad_for(nll_loss_nd, ("weight",),
                 lambda args: "nll_loss2d_forward" if args[0].dim() > 2 else "nll_loss_forward")


# ---------------------------------------------------------------------- clamped 2-norm
@defop("_norm2_clamp(Tensor self, int dim, float eps) -> Tensor", method=False, function=False,
       save_result=True, grad_fn_name="LinalgVectorNormBackward0")
def _norm2_clamp(xp, x, dim, eps):
    acc = np.float64 if x.dtype == np.float64 else np.float32
    r = xp.sqrt((x.astype(acc) ** 2).sum(axis=dim, keepdims=True))
    return xp.maximum(r, eps).astype(x.dtype)


@_norm2_clamp.derivative
def _norm2_clamp_bw(ctx, g):
    x, dim, eps = ctx.args
    # torch's norm backward, grad * (x / norm): its rounding in float16/bfloat16
    return (g * (x / ctx.result),)


# ====================================================================== meta functions
# Output metadata from input metadata (see ember/ops/_meta.py). Checks reuse the
# kernels' own on ``_meta.info(t)`` so fake tensors raise the kernels' errors; size
# formulas (conv/pool output sizes) are plain ``+ - * //`` and work on SymInts.
# Layouts: convolution, pooling, gather/scatter, resampling, embedding and the
# backward kernels return C order (ascontiguousarray, fresh zeros, np.take, matmul);
# normalisation and loss kernels are chains of ufuncs and ``astype`` copies, replayed
# on layouts below (``_uf``: a ufunc's 'K' order, ``_copy``: astype's order).
from . import _meta as _M  # noqa: E402
from ._meta import DataDependentOutputError  # noqa: E402


def _lay(t):
    return None if t is None else _M.layout(t)


def _uf(*ops):
    """The layout of a ufunc's output over operand layouts (None = a Python scalar)."""
    ops = [o for o in ops if o is not None]
    shape = _M.broadcast_shapes(*(o[0] for o in ops))
    return shape, _M.k_strides(shape, *ops)


def _copy(op):
    """``astype`` (copy=True) of a layout."""
    return _M.cast_layout(op, True)


def _reshape_lay(op, shape):
    """numpy ``reshape``: a view when the strides allow one, else a C-order copy."""
    from .shape import view_strides
    shape = tuple(shape)
    st = view_strides(op[0], op[1], shape)
    return (shape, st if st is not None else _M.contiguous_strides(shape))


def _fa(op, dtype):
    return _M.out(op[0], dtype, op[1])


def _c(shape, dtype):
    return _M.out(tuple(shape), dtype)


@convolution.meta_fn
def _convolution_meta(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    _conv_check(_M.info(x), _M.info(w), _M.info(b), stride, padding, dilation, transposed, groups)
    if not transposed:
        nd = w.ndim - 2
        shape = (x.shape[0], w.shape[0]) + tuple(
            _conv_out(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in range(nd))
        return _suggested_out(x, shape, w=w)
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= s and op_ >= d:
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={list(output_padding)}, stride={list(stride)}, "
                               f"dilation={list(dilation)}")
    shape = _transposed_out_shape(tuple(x.shape), tuple(w.shape), stride, padding, dilation, output_padding,
                                  groups)
    if any(s <= 0 for s in shape[2:]):
        raise RuntimeError(f"Given input size per channel: {list(x.shape[2:])}. Calculated output size per "
                           f"channel: {list(shape[2:])}. Output size is too small")
    return _suggested_out(x, shape, w=w)


@_conv_input_grad.meta_fn
def _conv_input_grad_meta(g, w, stride, padding, dilation, groups, input_size):
    return _c(input_size, g.dtype)


@_conv_weight_grad.meta_fn
def _conv_weight_grad_meta(g, x, stride, padding, dilation, groups, weight_size):
    return _c(weight_size, g.dtype)


def _pool_out_meta(x, k, s, p, d, ceil_mode):
    nd = len(k)
    out = tuple(pool_out_size(x.shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nd))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). Calculated output size: "
                           f"({'x'.join(map(str, (x.shape[1],) + out))}). Output size is too small")
    return tuple(x.shape[:2]) + out


@max_pool_with_indices.meta_fn
def _max_pool_with_indices_meta(x, k, s, p, d, ceil_mode):
    _pool_check(_M.info(x), k, s, p, d)
    shape = _pool_out_meta(x, k, s, p, d, ceil_mode)
    if x.dtype is _t.bool_:
        raise RuntimeError("\"max_pool2d\" not implemented for 'Bool'")
    return _suggested_out(x, shape), _suggested_out(x, shape, _t.int64)


@_max_pool_backward.meta_fn
def _max_pool_backward_meta(g, idx, input_size):
    return _c(input_size, g.dtype)


@_max_pool_gather.meta_fn
def _max_pool_gather_meta(x, idx):
    # take_along_axis (the 'K' order of the reshaped index), reshaped back to idx's shape
    N, C = x.shape[:2]
    flat_idx = _reshape_lay(_lay(idx), (N, C, _M.numel(tuple(idx.shape)) // (N * C) if N * C != 0 else 0))
    got = (flat_idx[0], _M.k_strides(flat_idx[0], flat_idx))
    return _fa(_reshape_lay(got, tuple(idx.shape)), x.dtype)


@avg_pool.meta_fn
def _avg_pool_meta(x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    _pool_check(_M.info(x), k, s, p, [1] * len(k))
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"avg_pool2d\" not implemented for '{x.dtype.legacy_name}'")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return _suggested_out(x, _pool_out_meta(x, k, s, p, [1] * len(k), ceil_mode))


@_avg_pool_backward.meta_fn
def _avg_pool_backward_meta(g, k, s, p, ceil_mode, cip, dov, input_size):
    return _c(input_size, g.dtype)


@_gather_axes.meta_fn
def _gather_axes_meta(x, spec, name):
    shape = list(x.shape)
    for axis, idx, mask, fill in spec:
        shape[axis] = len(idx)
    if name not in _ROW_MAJOR_GATHERS:
        return _suggested_out(x, shape) if spec else _M.preserve_out(x)
    return _c(shape, x.dtype)


@_scatter_axes.meta_fn
def _scatter_axes_meta(g, spec, input_size):
    return _c(input_size, g.dtype)


@_resample.meta_fn
def _resample_meta(x, mats, name):
    shape = list(x.shape)
    for axis, m in mats:
        shape[axis] = np.shape(m)[0]
    if name != "ResampleBackwardBackward0":
        return _suggested_out(x, shape)
    return _c(shape, x.dtype)


def _acc_dt(dt):
    return _t.float64 if dt is _t.float64 else _t.float32


def _np_norm_lay(x, axes, dt):
    """Layouts of ``_np_norm``: (xhat, mean, rstd)."""
    acc = _M.cast_layout(x, dt is not _acc_dt(dt))
    mean = _M.k_reduced(acc, axes, True)
    xc = _uf(acc, mean)
    var = _M.k_reduced(_uf(xc), axes, True)
    rstd = _uf(var)
    return _uf(xc, rstd), mean, rstd


@native_layer_norm.meta_fn
def _native_layer_norm_meta(x, shape, w, b, eps):
    shape = tuple(shape)
    k = len(shape)
    xs = tuple(x.shape)
    if k == 0 or x.ndim < k or tuple(xs[x.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape [*, "
                           f"{', '.join(map(str, shape))}], but got input of size{list(xs)}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
                               f"shape {list(t.shape)} and normalized_shape = {list(shape)}")
    # row-major, as the kernel's (and PyTorch's); the statistics keep the normalized dims as 1s
    stats = xs[:x.ndim - k] + (1,) * k
    return _c(xs, x.dtype), _c(stats, x.dtype), _c(stats, x.dtype)


@native_batch_norm.meta_fn
def _native_batch_norm_meta(x, w, b, rm, rv, training, momentum, eps):
    if x.ndim < 2:
        raise ValueError(f"Expected 2D or more input (got {x.ndim}D input)")
    C = x.shape[1]
    for name, t in (("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"{name} should contain {C} elements not {t.numel()}")
    if training:
        cnt = _M.numel(tuple(x.shape)) // max(C, 1)
        if cnt <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(x.shape)}")
    elif rm is None or rv is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    sdt = _bn_stats_dtype(x, w, b, rm, rv)
    return _suggested_out(x), _c((C,), sdt), _c((C,), sdt)


@native_group_norm.meta_fn
def _native_group_norm_meta(x, w, b, N, C, HxW, group, eps):
    if C % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(x.shape)} and num_groups={group}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and (t.ndim != 1 or t.numel() != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in "
                               f"input, but got {name} of shape {list(t.shape)} and input of shape "
                               f"{list(x.shape)}")
    xr = _reshape_lay(_lay(x), (N, group, _M.numel(tuple(x.shape)) // (N * group) if N * group != 0 else 0))
    _, mean, _ = _np_norm_lay(xr, (2,), x.dtype)
    stats = _copy(_reshape_lay(mean, (N, group)))        # mean.reshape(N, group).astype(dt)
    return _suggested_out(x), _fa(stats, x.dtype), _fa(stats, x.dtype)


def _suggested_out(x, shape=None, dtype=None, w=None):
    """The kernel's ``_suggested_layout`` of a result of ``shape`` (default ``x``'s) computed
    from input ``x`` (and convolution weight ``w``): NHWC for an NHWC input, else row-major."""
    xshape, st = _M.layout(x)
    shape = xshape if shape is None else tuple(shape)
    dtype = x.dtype if dtype is None else dtype
    cl = len(xshape) == 4 and len(shape) == 4 and (
        _M.suggest_channels_last(xshape, st) or
        (w is not None and w.ndim == 4 and _M.suggest_channels_last(*_M.layout(w))))
    if cl:
        return _M.out(shape, dtype, _M.channels_last_strides(shape))
    return _c(shape, dtype)


@embedding.meta_fn
def _embedding_meta(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    _check_index_dtype(_M.info(idx), "embedding")
    if w.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    # (the index range check needs the data; eager raises it)
    return _c(tuple(idx.shape) + (w.shape[1],), w.dtype)


@embedding_dense_backward.meta_fn
def _embedding_dense_backward_meta(g, idx, num_weights, padding_idx, sgf):
    return _c((num_weights, g.shape[-1]), g.dtype)


@one_hot.meta_fn
def _one_hot_meta(x, num_classes=-1):
    if x.dtype is not _t.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if _M.is_empty(x.shape):
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        raise DataDependentOutputError("one_hot", "num_classes=-1 takes the class count from the data; "
                                       "pass num_classes")
    return _c(tuple(x.shape) + (num_classes,), _t.int64)


def _loss_out(lay, dtype, reduction):
    return _fa(lay, dtype) if reduction == 0 else _c((), dtype)


@mse_loss.meta_fn
def _mse_loss_meta(x, t, reduction=1):
    _check_loss_shapes(_M.info(x), _M.info(t))
    d = _uf(_lay(x), _M.cast_layout(t, t.dtype is not x.dtype))
    return _loss_out(d, x.dtype, reduction)


def _pw_loss_meta(name, check):
    def meta(x, t, reduction=1, param=1.0):
        check(param)
        _check_loss_shapes(_M.info(x), _M.info(t))
        return _loss_out(_copy(_uf(_lay(x), _lay(t))), x.dtype, reduction)
    meta.__name__ = f"_{name}_meta"
    return meta


def _check_beta(beta):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")


def _check_delta(delta):
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta.")


smooth_l1_loss.meta = _pw_loss_meta("smooth_l1_loss", _check_beta)
huber_loss.meta = _pw_loss_meta("huber_loss", _check_delta)


@_pw_loss_backward.meta_fn
def _pw_loss_backward_meta(g, x, t, kind, param):
    return _fa(_copy(_uf(_lay(g), _uf(_lay(x), _lay(t)))), x.dtype)


@binary_cross_entropy.meta_fn
def _bce_meta(x, t, w=None, reduction=1):
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Using a target size ({list(t.shape)}) that is different to the input size "
                         f"({list(x.shape)}) is deprecated. Please ensure they have the same size.")
    # (the 0 <= x <= 1 check needs the data; eager raises it)
    xl, tl = _lay(x), _lay(t)
    lx = _uf(xl)
    loss = _uf(_uf(tl, lx), _uf(_uf(tl), lx))
    if w is not None:
        loss = _uf(loss, _lay(w))
    return _loss_out(_copy(loss), x.dtype, reduction)


@_bce_backward.meta_fn
def _bce_backward_meta(g, x, t, w):
    gl, xl, tl = _lay(g), _lay(x), _lay(t)
    gx = _uf(_uf(gl, _uf(xl, tl)), _uf(_uf(xl), xl))
    gt = _uf(gl, _uf(_uf(xl), _uf(xl)))
    if w is not None:
        gx, gt = _uf(gx, _lay(w)), _uf(gt, _lay(w))
    return _fa(_copy(gx), x.dtype), _fa(_copy(gt), x.dtype)


@binary_cross_entropy_with_logits.meta_fn
def _bcel_meta(x, t, w=None, pw=None, reduction=1):
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Target size ({list(t.shape)}) must be the same as input size ({list(x.shape)})")
    xl = _lay(x)
    tl = _M.cast_layout(t, t.dtype is not x.dtype)
    sp = _uf(xl)                                    # softplus(+-x): ufuncs of x alone
    first = _uf(_uf(_lay(pw), tl), sp) if pw is not None else _uf(tl, sp)
    loss = _uf(first, _uf(_uf(tl), sp))
    if w is not None:
        loss = _uf(loss, _lay(w))
    return _loss_out(_copy(loss), x.dtype, reduction)


@nll_loss_nd.meta_fn
def _nll_loss_nd_meta(x, t, w=None, reduction=1, ignore_index=-100):
    _nll_check(_M.info(x), _M.info(t), _M.info(w))
    if reduction != 0 or x.ndim == 1:
        return _c((), x.dtype), _c((), x.dtype)
    # -take_along_axis(x, tc[:, None], 1)[:, 0] * w[tc]: fancy indexing allocates in the
    # 'K' order of its index arrays, so everything follows tc = where(t != ignore, t, 0)
    tc = _uf(_lay(t))
    return _fa(_copy(_uf(tc, _copy(tc))), x.dtype), _c((), x.dtype)


@_nll_loss_backward.meta_fn
def _nll_loss_backward_meta(g, self_size, t, w, reduction, ignore_index):
    return _c(self_size, g.dtype)


@_norm2_clamp.meta_fn
def _norm2_clamp_meta(x, dim, eps):
    from ._helpers import wrap_dim
    d = wrap_dim(dim, x.ndim)
    acc = _copy(_lay(x))
    return _fa(_copy(_M.k_reduced(acc, (d,), True)), x.dtype)
