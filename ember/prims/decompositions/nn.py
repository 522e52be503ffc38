"""Decompositions of the neural-network kernels (ember/ops/nn_ops.py) into prims.

* Convolutions: ``prims.convolution`` (extern) with the bias added by an
  explicit broadcast. Their gradient kernels are convolutions too: the input
  gradient is a transposed convolution (``output_padding`` recovers the input
  size), the weight gradient a convolution of the input (batch and channel
  swapped) with the output gradient as kernel, stride and dilation exchanged.
* Pooling: no extern. The windows are ``prod(kernel_size)`` strided
  ``prims.slice``s of the padded input (a pure value formulation: no
  ``as_strided``, so nothing depends on memory layout); max pooling stacks them
  and takes ``argmax`` + ``gather`` (NaN wins, first occurrence, as the kernel),
  average pooling adds them. The divisor is computed in the graph from
  ``iota`` (no data constants). The backward of average pooling is the sum of
  interior-padded (strided) placements of the gradient; max pooling's is a
  ``scatter_add`` into the flattened input.
* ``_gather_axes``/``_scatter_axes`` (padding modes, nearest resize) and
  ``_resample`` (bilinear/bicubic resize, adaptive average pooling) carry
  static index vectors / interpolation matrices: they become graph constants
  feeding ``index_select``/``scatter_add``/``mm``.
* Normalisations compute in float32 for half inputs (as the kernels) with
  ``prims.var`` (Welford) and ``rsqrt``.
* Losses are written out in elementwise prims; ``nll_loss`` uses ``gather``
  with ignored targets redirected to class 0 and weighted 0.
* ``one_hot`` with an explicit ``num_classes`` is ``eq`` against an ``iota``;
  with ``num_classes=-1`` the output shape depends on the data: kept whole.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import types as _t
from ...ops import nn_ops as _nn
from ...ops._helpers import wrap_dim
from . import register_decomposition
from ...fx.experimental.symbolic_shapes import is_symbolic, statically_known_true
from .shape import (bcast, bcast_to_dims, div_by_size, flat, full, inverse_perm, iota, movedim_last, numel, pad,
                    permute, reshape, size_operand, to)

from ember import prims  # noqa: E402


def _acc(dt):
    """The dtype the normalisation kernels compute in."""
    return _t.float64 if dt is _t.float64 else _t.float32


def _const(arr, dtype, device):
    """A static array (index vector, interpolation matrix) as a graph constant."""
    import ember
    t = ember.tensor(np.ascontiguousarray(arr), dtype=dtype)
    return t if t.device == device else t.to(device)


def _reduce(loss, reduction):
    if reduction == 0:
        return loss
    s = prims.sum(loss, tuple(range(loss.ndim)))
    if reduction == 1:
        return div_by_size(s, numel(loss.shape))      # (0 elements: 0 / 0 = nan, as the kernel)
    return s


# ====================================================================== convolution
@register_decomposition("convolution")
def convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if x.dtype is not w.dtype or (b is not None and b.dtype is not x.dtype) or not x.dtype.is_floating_point:
        return NotImplemented
    out = prims.convolution(x, w, None, list(stride), list(padding), list(dilation), bool(transposed),
                            list(output_padding), int(groups))
    if b is not None:
        out = prims.add(out, bcast_to_dims(b, tuple(out.shape), (1,)))
    return out


@register_decomposition("_conv_input_grad")
def _conv_input_grad(g, w, stride, padding, dilation, groups, input_size):
    nd = w.ndim - 2
    w = to(w, g.dtype)
    opad = []
    for i in range(nd):
        natural = (g.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w.shape[2 + i] - 1) + 1
        # the output padding is the remainder the strided forward dropped, (in + 2p - d(k-1) - 1) % s:
        # specialising it (not the input size) leaves a parity guard, and the transposed conv needs
        # it as a plain int
        opad.append(int(input_size[2 + i] - natural))
    if any(o < 0 or (o >= stride[i] and o >= dilation[i]) for i, o in enumerate(opad)):
        return NotImplemented
    return prims.convolution(g, w, None, list(stride), list(padding), list(dilation), True, opad, int(groups))


def _crop_to_read_extent(x, sp, padding, ks, osp, stride, dilation):
    """(x, its spatial sizes, padding) with the input cut to the padded extent the forward read.

    The weight gradient below is a convolution whose output positions are the kernel taps; where
    the forward's stride dropped a remainder of the padded input, that convolution computes
    taps the weight does not have, sliced off afterwards: a stride-2 3x3 layer computed 4x4
    taps for its 3x3 (1.8x the work), a 1x1 stride-2 shortcut 2x2 for its 1x1 (4x). Cut
    here, the taps are exactly the kernel's. Unpadded dims are sliced (a view); a padded one
    gets its padding explicitly (one copy of the input, far cheaper than the extra taps),
    its high side only as far as the forward read. Symbolic sizes are left as they are."""
    nd = len(ks)
    if not all(type(v) is int for v in tuple(sp) + tuple(osp) + tuple(ks) + tuple(padding)):
        return x, sp, padding
    need = [(ks[i] - 1) * dilation[i] + (osp[i] - 1) * stride[i] + 1 for i in range(nd)]
    if not any(sp[i] + 2 * padding[i] - need[i] >= dilation[i] for i in range(nd)):
        return x, sp, padding           # (no extra tap anywhere)
    if all(p == 0 for p in padding):
        x = prims.slice(x, [0] * (2 + nd), list(x.shape[:2]) + need)
    else:
        x = pad(x, 0, [(0, 0, 0), (0, 0, 0)] + [(padding[i], need[i] - padding[i] - sp[i], 0) for i in range(nd)])
        padding = [0] * nd
    return x, tuple(x.shape[2:]), padding


@register_decomposition("_conv_weight_grad")
def _conv_weight_grad(g, x, stride, padding, dilation, groups, weight_size):
    nd = x.ndim - 2
    N, C = x.shape[:2]
    G = int(groups)
    Cg = C // G
    sp = tuple(x.shape[2:])
    x = to(x, g.dtype)
    ks = tuple(weight_size[2:])
    padding = list(padding)
    x, sp, padding = _crop_to_read_extent(x, sp, padding, ks, tuple(g.shape[2:]), stride, dilation)
    # input: batch = Cg, channels = (group, n); kernel: the output gradient, (O, N, *out)
    xi = reshape(x, (N, G, Cg) + sp)
    xi = permute(xi, (2, 1, 0) + tuple(range(3, 3 + nd)))
    xi = reshape(xi, (Cg, G * N) + sp)
    gk = permute(g, (1, 0) + tuple(range(2, 2 + nd)))
    res = prims.convolution(xi, gk, None, list(dilation), padding, list(stride), False, [0] * nd, G)
    # the result's extent is at least the kernel's (the read extent covers the kernel); a
    # symbolic one is sliced whether or not it equals it: asking ``!=`` guards on the input
    # size's remainder modulo the stride (a recompile per parity for a stride-2 conv)
    if any(is_symbolic(n) or n != k for n, k in zip(res.shape[2:], ks)):
        res = prims.slice(res, [0] * (2 + nd), list(res.shape[:2]) + list(ks))
    return permute(res, (1, 0) + tuple(range(2, 2 + nd)))


# ====================================================================== pooling
def _pool_pad_config(x, k, s, p, d, out):
    """Pad config bringing each spatial dim to the extent the windows read: ``p`` low, and high
    whatever reaches ``need`` (ceil mode may read past the padding). A symbolic high amount is
    kept as is, negative or not (a negative one crops elements no window reads): taking
    ``max(.., 0)`` of it would guard on the size's remainder modulo the stride (a recompile per
    parity for ``avg_pool2d(x, 2)``)."""
    cfg = [(0, 0, 0), (0, 0, 0)]
    for i in range(len(k)):
        need = (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1
        hi = need - x.shape[2 + i] - p[i]
        cfg.append((p[i], hi if is_symbolic(hi) else max(hi, 0), 0))
    return cfg


def _pool_pads(cfg):
    """Whether a ``_pool_pad_config`` may add padding elements (not only crop): a positive low
    amount, or a high one not known to be <= 0 for every size."""
    return any(lo > 0 or not statically_known_true(hi <= 0) for lo, hi, _ in cfg[2:])


def _windows(xpad, k, s, d, out):
    """One strided slice (N, C, *out) per kernel offset, in row-major kernel order."""
    nd = len(k)
    N, C = xpad.shape[:2]
    wins = []
    for kk in itertools.product(*[range(v) for v in k]):
        starts = [0, 0] + [kk[i] * d[i] for i in range(nd)]
        limits = [N, C] + [kk[i] * d[i] + s[i] * (out[i] - 1) + 1 for i in range(nd)]
        wins.append(prims.slice(xpad, starts, limits, [1, 1] + list(s)))
    return wins


def _pool_out(x, k, s, p, d, ceil_mode):
    return tuple(_nn.pool_out_size(x.shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(len(k)))


def _tap_offset(tap, k, d, i):
    """Dim ``i``'s offset, in input elements, of the flat window tap index ``tap`` (row-major
    over the kernel ``k``, dilation ``d``)."""
    inner = numel(k[i + 1:])
    ki = tap if inner == 1 else prims.floor_divide(tap, inner)
    if i > 0:
        ki = prims.remainder(ki, k[i])
    return ki if d[i] == 1 else prims.mul(ki, d[i])


def _tap_inside(x, k, s, p, d, out, shape):
    """Bool ``shape`` = (N, C, *out, K) tensor: whether each window tap is inside the input (not
    padding), from iotas (the sizes may be symbolic)."""
    nd = len(k)
    taps = iota(numel(k), x.device)
    inside = None
    for i in range(nd):
        base = bcast_to_dims(iota(out[i], x.device, -p[i], s[i]), shape, (2 + i,))
        pos = prims.add(base, bcast_to_dims(_tap_offset(taps, k, d, i), shape, (2 + nd,)))
        ok = prims.logical_and(prims.ge(pos, 0), prims.lt(pos, size_operand(x.shape[2 + i], shape, x.device)))
        inside = ok if inside is None else prims.logical_and(inside, ok)
    return inside


@register_decomposition("max_pool_with_indices")
def max_pool_with_indices(x, k, s, p, d, ceil_mode):
    nd = len(k)
    if x.dtype is _t.bool_ or x.ndim != nd + 2:
        return NotImplemented
    out = _pool_out(x, k, s, p, d, ceil_mode)
    if any(o <= 0 for o in out):
        return NotImplemented
    fill = float("-inf") if x.dtype.is_floating_point else int(np.iinfo(x.dtype.np).min)
    config = _pool_pad_config(x, k, s, p, d, out)
    xpad = pad(x, fill, config)
    last = 2 + nd
    win = prims.cat([prims.expand_dims(w, (last,)) for w in _windows(xpad, k, s, d, out)], last)
    arg = prims.argmax(win, last)
    vals = prims.squeeze(prims.gather(win, last, prims.expand_dims(arg, (last,))), (last,))
    inside = None
    # (floor mode reads at most the padded extent, size + 2p, so its high amount is at most p:
    # without padding nothing is padded, symbolic sizes or not -- no masking for max_pool2d(x, 2))
    if any(v > 0 for v in p) or (ceil_mode and _pool_pads(config)):
        # padding holds the fill, so it ties with an input element equal to the fill (-inf) and
        # argmax may name it (its flat index is another element: the gradient would land there);
        # the argmax is the first tap inside the input equal to the max (or the first NaN).
        # A window with no tap inside (dilation over the input) gets index -1, no gradient.
        inside = _tap_inside(x, k, s, p, d, out, tuple(win.shape))
        hit = prims.eq(win, bcast_to_dims(vals, tuple(win.shape), tuple(range(last))))
        if x.dtype.is_floating_point:
            hit = prims.logical_or(hit, prims.isnan(win))
        arg = prims.argmax(prims.logical_and(hit, inside), last)
    # the chosen element's flat position in the (unpadded) input plane
    oshape = tuple(arg.shape)
    idx = None
    for i in range(nd):
        base = bcast_to_dims(iota(out[i], x.device, -p[i], s[i]), oshape, (2 + i,))
        pos = prims.add(base, _tap_offset(arg, k, d, i))
        idx = pos if idx is None else prims.add(prims.mul(idx, size_operand(x.shape[2 + i], oshape, x.device)), pos)
    if inside is not None:
        idx = prims.where(prims.any(inside, (last,)), idx, -1)
    return vals, idx


@register_decomposition("_max_pool_backward")
def _max_pool_backward(g, idx, input_size):
    input_size = tuple(input_size)
    N, C = input_size[:2]
    S = numel(input_size[2:])
    P = numel(idx.shape[2:])
    # index -1 (a window entirely in padding) sends nothing: zero at position 0
    taken = prims.ge(idx, 0)
    idx = prims.where(taken, idx, 0)
    g = prims.where(taken, g, 0)
    out = full((N, C, S), 0, g.dtype, g.device)
    out = prims.scatter_add(out, 2, reshape(idx, (N, C, P)), reshape(g, (N, C, P)))
    return reshape(out, input_size)


@register_decomposition("_max_pool_gather")
def _max_pool_gather(x, idx):
    N, C = x.shape[:2]
    P = numel(idx.shape[2:])
    taken = prims.ge(idx, 0)        # (index -1: a window with no input element reads zero)
    res = prims.gather(reshape(x, (N, C, numel(x.shape[2:]))), 2, reshape(prims.where(taken, idx, 0), (N, C, P)))
    return prims.where(taken, reshape(res, tuple(idx.shape)), 0)


def _avg_divisor(in_sp, out, k, s, p, cip, dtype, device):
    """(*out) tensor of window sizes (the kernel's ``_avg_divisor``), computed with iota."""
    nd = len(k)
    div = None
    for i in range(nd):
        start = iota(out[i], device, -p[i], s[i])
        end = prims.minimum(prims.add(start, k[i]), size_operand(in_sp[i] + p[i], (out[i],), device))
        if cip:
            size = prims.sub(end, start)
        else:
            size = prims.sub(prims.minimum(end, size_operand(in_sp[i], (out[i],), device)), prims.maximum(start, 0))
        size = bcast_to_dims(size, tuple(out), (i,))
        div = size if div is None else prims.mul(div, size)
    return to(div, dtype)


def _divide_by_divisor(t, in_sp, k, s, p, cip, dov):
    out = tuple(t.shape[2:])
    if dov is not None:
        return prims.div(t, float(dov))
    div = _avg_divisor(in_sp, out, k, s, p, cip, t.dtype, t.device)
    return prims.div(t, bcast_to_dims(div, tuple(t.shape), tuple(range(2, t.ndim))))


@register_decomposition("avg_pool")
def avg_pool(x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    nd = len(k)
    if not x.dtype.is_floating_point or x.ndim != nd + 2 or divisor_override == 0:
        return NotImplemented
    d = [1] * nd
    out = _pool_out(x, k, s, p, d, ceil_mode)
    if any(o <= 0 for o in out):
        return NotImplemented
    xpad = pad(x, 0, _pool_pad_config(x, k, s, p, d, out))
    tot = None
    for w in _windows(xpad, k, s, d, out):
        tot = w if tot is None else prims.add(tot, w)
    if tot is xpad or tot is x:
        tot = prims.clone(tot)
    return _divide_by_divisor(tot, tuple(x.shape[2:]), k, s, p, count_include_pad, divisor_override)


@register_decomposition("_avg_pool_backward")
def _avg_pool_backward(g, k, s, p, ceil_mode, cip, dov, input_size):
    nd = len(k)
    out = tuple(g.shape[2:])
    in_sp = tuple(input_size[2:])
    gd = _divide_by_divisor(g, in_sp, k, s, p, cip, dov)
    dx = None
    for kk in itertools.product(*[range(v) for v in k]):
        cfg = [(0, 0, 0), (0, 0, 0)]
        for i in range(nd):
            last = kk[i] + s[i] * (out[i] - 1)
            # this tap's gradient placed in padded coordinates, cropped straight to [p, p + in):
            # negative hi/lo in the pad config drop the padding region. (No ``max`` of symbolic
            # sizes for a padded extent -- it cancels out, and it guarded on the input's parity.)
            cfg.append((kk[i] - p[i], in_sp[i] + p[i] - 1 - last, s[i] - 1))
        part = pad(gd, 0, cfg)
        dx = part if dx is None else prims.add(dx, part)
    return dx


# ====================================================================== static gathers / resampling
@register_decomposition("_gather_axes")
def _gather_axes(x, spec, name):
    out = x
    for axis, idx, mask, fill in spec:
        fv = fill
        if x.dtype is _t.bool_:
            fv = bool(fill)
        elif not x.dtype.is_floating_point:
            fv = int(fill)
        if mask is not None and type(out.shape[axis]) is int and out.shape[axis] == 0:
            # a constant pad of an empty dim: every position is the fill (its clamped source
            # index 0 is out of range of the empty dim, and the selection checks its indices)
            shape = list(out.shape)
            shape[axis] = len(idx)
            out = full(shape, fv, x.dtype, x.device)
            continue
        it = _const(np.asarray(idx, dtype=np.int64), _t.int64, x.device)
        out = prims.index_select(out, axis, it)
        if mask is not None:
            m = bcast_to_dims(_const(np.asarray(mask, dtype=bool), _t.bool_, x.device), tuple(out.shape), (axis,))
            out = prims.where(m, out, fv)
    return prims.clone(x) if out is x else out


@register_decomposition("_scatter_axes")
def _scatter_axes(g, spec, input_size):
    out = g
    sizes = [tuple(input_size)]
    for axis, idx, mask, fill in spec[:-1]:
        s = list(sizes[-1])
        s[axis] = len(idx)
        sizes.append(tuple(s))
    for (axis, idx, mask, fill), size in zip(reversed(spec), reversed(sizes)):
        if type(size[axis]) is int and size[axis] == 0:
            out = full(size, 0, g.dtype, g.device)       # (a pad of an empty dim: nothing to add into)
            continue
        if mask is not None:
            m = bcast_to_dims(_const(np.asarray(mask, dtype=bool), _t.bool_, g.device), tuple(out.shape), (axis,))
            out = prims.where(m, out, 0)
        it = _const(np.asarray(idx, dtype=np.int64), _t.int64, g.device)
        res = full(size, 0, g.dtype, g.device)
        out = prims.scatter_add(res, axis, bcast_to_dims(it, tuple(out.shape), (axis,)), out)
    return prims.clone(g) if out is g else out


@register_decomposition("_resample")
def _resample(x, mats, name):
    acc = x.dtype if x.dtype.is_floating_point else _t.float32
    out = to(x, acc)
    for axis, m in mats:
        m = np.asarray(m)
        moved, perm = movedim_last(out, axis)
        lead = tuple(moved.shape[:-1])
        mt = _const(np.ascontiguousarray(m.T), acc, x.device)            # (in, out)
        res = prims.mm(reshape(moved, (numel(lead), moved.shape[-1])), mt)
        out = permute(reshape(res, lead + (m.shape[0],)), inverse_perm(perm))
    out = to(out, x.dtype)
    return prims.clone(x) if out is x else out


# ====================================================================== normalisation
def _stats(xa, dims, centre_on_mean=False):
    """(mean, rstd-less variance) over ``dims``, both with those dims dropped.

    ``centre_on_mean`` (layer, group and batch norm): the variance is the mean of squares about
    ``mean`` itself, a second reduction over the row in the loop nest of the first, instead of
    ``prims.var``, whose own first pass would sum the row again (a 1000x16000 layer_norm in a C
    model: 4.05 -> 3.7 ms). Same two-pass arithmetic. Batch norm too, since its per-channel
    reductions run in a nest per channel: its training forward then reads a channel twice, the
    centred sum of squares and the running variance's sharing one loop (``_sibling_sums``),
    where ``prims.var`` made it four passes (ResNet's 32x32x32x32 statistics 0.25-0.42 ->
    0.15 ms; channels-last and reductions run interchanged gained too: 0.75 -> 0.62 ms)."""
    n = numel(xa.shape[d] for d in dims)
    mean = div_by_size(prims.sum(xa, tuple(dims)), n)
    if centre_on_mean:
        d = prims.sub(xa, _keep(mean, tuple(xa.shape), dims))
        return mean, div_by_size(prims.sum(prims.mul(d, d), tuple(dims)), n)
    return mean, prims.var(xa, tuple(dims), 0)


def _keep(t, shape, dims):
    """A reduced tensor broadcast back over the reduced ``dims`` of ``shape``."""
    kept = tuple(i for i in range(len(shape)) if i not in dims)
    return bcast_to_dims(t, tuple(shape), kept)


@register_decomposition("native_layer_norm")
def native_layer_norm(x, normalized_shape, w, b, eps):
    shape = tuple(normalized_shape)
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape or \
            any(t is not None and tuple(t.shape) != shape for t in (w, b)):
        return NotImplemented        # the kernel raises the shape error
    dt, acc = x.dtype, _acc(x.dtype)
    xa = to(x, acc)
    dims = tuple(range(x.ndim - k, x.ndim))
    mean, var = _stats(xa, dims, centre_on_mean=True)
    rstd = prims.rsqrt(prims.add(var, float(eps)))
    xs = tuple(x.shape)
    out = prims.mul(prims.sub(xa, _keep(mean, xs, dims)), _keep(rstd, xs, dims))
    if w is not None:
        out = prims.mul(out, bcast(to(w, acc), xs))
    if b is not None:
        out = prims.add(out, bcast(to(b, acc), xs))
    kshape = xs[:x.ndim - k] + (1,) * k
    return to(out, dt), to(reshape(mean, kshape), dt), to(reshape(rstd, kshape), dt)


@register_decomposition("native_batch_norm")
def native_batch_norm(x, w, b, rm, rv, training, momentum, eps):
    if x.ndim < 2:
        return NotImplemented
    dt, acc = x.dtype, _acc(x.dtype)
    xs = tuple(x.shape)
    dims = (0,) + tuple(range(2, x.ndim))
    xa = to(x, acc)
    if training:
        if numel(x.shape) // max(xs[1], 1) <= 1:
            return NotImplemented
        mean, var = _stats(xa, dims, centre_on_mean=True)
        from ...ops.nn_ops import _bn_stats_dtype
        if xa is not x and _bn_stats_dtype(x, w, b, rm, rv) is dt:
            # eager's (torch's) half kernel: the statistics rounded to the input's dtype, bfloat16's
            # variance before its inverse square root too
            mean = to(to(mean, dt), acc)
            if dt is _t.bfloat16:        # (its sum of squares rounded, then the variance)
                cnt = float(numel(xs) // xs[1])
                var = to(to(prims.div(to(to(prims.mul(var, cnt), dt), acc), cnt), dt), acc)
            rstd = to(to(prims.rsqrt(prims.add(var, float(eps))), dt), acc)
        else:
            rstd = prims.rsqrt(prims.add(var, float(eps)))
        save_mean = mean
    else:
        if rm is None or rv is None:
            return NotImplemented
        rstd = prims.div(1.0, prims.sqrt(prims.add(to(rv, acc), float(eps))))
        mean = to(rm, acc)
        save_mean = prims.clone(rm) if rm.dtype is acc else mean
    out = prims.mul(prims.sub(xa, bcast_to_dims(mean, xs, (1,))), bcast_to_dims(rstd, xs, (1,)))
    if w is not None:
        out = prims.mul(out, bcast_to_dims(to(w, acc), xs, (1,)))
    if b is not None:
        out = prims.add(out, bcast_to_dims(to(b, acc), xs, (1,)))
    from ...ops.nn_ops import _bn_stats_dtype
    sdt = _bn_stats_dtype(x, w, b, rm, rv)         # float32 for a half input with float32 parameters
    return to(out, dt), to(save_mean, sdt), to(rstd, sdt)


@register_decomposition("native_group_norm")
def native_group_norm(x, w, b, N, C, HxW, group, eps):
    if C % group:
        return NotImplemented
    dt, acc = x.dtype, _acc(x.dtype)
    xs = tuple(x.shape)
    xr = reshape(to(x, acc), (N, group, numel(xs) // max(N * group, 1)))
    mean, var = _stats(xr, (2,), centre_on_mean=True)
    rstd = prims.rsqrt(prims.add(var, float(eps)))
    rs = tuple(xr.shape)
    out = prims.mul(prims.sub(xr, bcast_to_dims(mean, rs, (0, 1))), bcast_to_dims(rstd, rs, (0, 1)))
    out = reshape(out, xs)
    if w is not None:
        out = prims.mul(out, bcast_to_dims(to(w, acc), xs, (1,)))
    if b is not None:
        out = prims.add(out, bcast_to_dims(to(b, acc), xs, (1,)))
    return to(out, dt), to(mean, dt), to(rstd, dt)


@register_decomposition("_norm2_clamp")
def _norm2_clamp(x, dim, eps):
    acc = _acc(x.dtype)
    d = wrap_dim(dim, x.ndim)
    xa = to(x, acc)
    r = prims.sqrt(prims.sum(prims.mul(xa, xa), (d,)))
    r = prims.maximum(prims.expand_dims(r, (d,)), float(eps))
    return to(r, x.dtype)


# ====================================================================== embedding / one_hot
@register_decomposition("embedding")
def embedding(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if idx.dtype not in (_t.int64, _t.int32) or w.ndim != 2:
        return NotImplemented
    out = prims.index_select(w, 0, to(flat(idx), _t.int64))
    return reshape(out, tuple(idx.shape) + (w.shape[1],))


@register_decomposition("embedding_dense_backward")
def embedding_dense_backward(g, idx, num_weights, padding_idx, sgf):
    D = g.shape[-1]
    fi = to(flat(idx), _t.int64)
    L = fi.shape[0]
    gr = reshape(g, (L, D))
    if sgf:
        counts = prims.scatter_add(full((num_weights,), 0, _t.int64, g.device), 0, fi,
                                   full((L,), 1, _t.int64, g.device))
        per = to(prims.index_select(counts, 0, fi), g.dtype)
        gr = prims.div(gr, bcast_to_dims(per, (L, D), (0,)))
    if padding_idx is not None and padding_idx >= 0:
        keep = bcast_to_dims(prims.ne(fi, int(padding_idx)), (L, D), (0,))
        gr = prims.where(keep, gr, 0)
    return prims.index_put(full((num_weights, D), 0, g.dtype, g.device), (fi,), gr, True)


@register_decomposition("one_hot")
def one_hot(x, num_classes=-1):
    if num_classes < 0 or x.dtype is not _t.int64:
        return NotImplemented        # num_classes=-1: the output shape is max(x) + 1, data-dependent
    shape = tuple(x.shape) + (int(num_classes),)
    xb = bcast_to_dims(x, shape, tuple(range(x.ndim)))
    cls = bcast_to_dims(iota(num_classes, x.device), shape, (x.ndim,))
    return prims.convert_element_type(prims.eq(xb, cls), _t.int64)


# ====================================================================== losses
def _same(x, t):
    return tuple(x.shape) == tuple(t.shape)


@register_decomposition("mse_loss")
def mse_loss(x, t, reduction=1):
    if not _same(x, t):
        return NotImplemented
    d = prims.sub(x, to(t, x.dtype))
    return _reduce(prims.mul(d, d), reduction)


def _pw_loss(d, kind, param):
    ad = prims.abs(d)
    if kind == "smooth_l1":
        if param == 0:
            return ad
        quad = prims.div(prims.mul(prims.mul(d, 0.5), d), float(param))
        return prims.where(prims.lt(ad, float(param)), quad, prims.sub(ad, 0.5 * param))
    quad = prims.mul(prims.mul(d, 0.5), d)
    return prims.where(prims.lt(ad, float(param)), quad, prims.mul(prims.sub(ad, 0.5 * param), float(param)))


@register_decomposition("smooth_l1_loss")
def smooth_l1_loss(x, t, reduction=1, beta=1.0):
    if not _same(x, t) or x.dtype is not t.dtype or beta < 0:
        return NotImplemented
    return _reduce(_pw_loss(prims.sub(x, t), "smooth_l1", beta), reduction)


@register_decomposition("huber_loss")
def huber_loss(x, t, reduction=1, delta=1.0):
    if not _same(x, t) or x.dtype is not t.dtype or delta <= 0:
        return NotImplemented
    return _reduce(_pw_loss(prims.sub(x, t), "huber", delta), reduction)


@register_decomposition("_pw_loss_backward")
def _pw_loss_backward(g, x, t, kind, param):
    if x.dtype is not t.dtype or g.dtype is not x.dtype:
        return NotImplemented
    shape = tuple(x.shape)
    d = prims.sub(x, bcast(t, shape))
    if kind == "smooth_l1":
        f = prims.sign(d) if param == 0 else prims.minimum(prims.maximum(prims.div(d, float(param)), -1.0), 1.0)
    else:
        f = prims.minimum(prims.maximum(d, -float(param)), float(param))
    return prims.mul(bcast(g, shape), f)


def _log_clamped(x):
    return prims.maximum(prims.log(x), -100.0)


def _log1m_clamped(x):
    return prims.maximum(prims.log1p(prims.neg(x)), -100.0)


@register_decomposition("binary_cross_entropy")
def binary_cross_entropy(x, t, w=None, reduction=1):
    if not _same(x, t) or t.dtype is not x.dtype or (w is not None and w.dtype is not x.dtype):
        return NotImplemented
    loss = prims.neg(prims.add(prims.mul(t, _log_clamped(x)), prims.mul(prims.sub(1.0, t), _log1m_clamped(x))))
    if w is not None:
        loss = prims.mul(loss, bcast(w, tuple(x.shape)))
    return _reduce(loss, reduction)


@register_decomposition("_bce_backward")
def _bce_backward(g, x, t, w):
    if t.dtype is not x.dtype or g.dtype is not x.dtype:
        return NotImplemented
    shape = tuple(x.shape)
    g = bcast(g, shape)
    den = prims.maximum(prims.mul(prims.sub(1.0, x), x), 1e-12)
    gx = prims.div(prims.mul(g, prims.sub(x, t)), den)
    # -logit(x), unclamped as the kernel (ops/nn_ops.py ``_bce_backward``): +-inf at x = 0 / 1
    gt = prims.mul(g, prims.neg(prims.log(prims.div(x, prims.sub(1.0, x)))))
    if w is not None:
        wb = bcast(to(w, x.dtype), shape)
        gx, gt = prims.mul(gx, wb), prims.mul(gt, wb)
    return gx, gt


def _softplus(z):
    return prims.add(prims.maximum(z, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(z)))))


@register_decomposition("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(x, t, w=None, pw=None, reduction=1):
    if not _same(x, t) or not x.dtype.is_floating_point:
        return NotImplemented
    shape = tuple(x.shape)
    t = to(t, x.dtype)
    pos = prims.mul(t, _softplus(prims.neg(x)))
    if pw is not None:
        pos = prims.mul(prims.mul(bcast(to(pw, x.dtype), shape), t), _softplus(prims.neg(x)))
    loss = prims.add(pos, prims.mul(prims.sub(1.0, t), _softplus(x)))
    if w is not None:
        loss = prims.mul(loss, bcast(to(w, x.dtype), shape))
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------- nll_loss
def _class_index(t):
    """An nll target as int64: torch's nll_loss also takes uint8 class indices (exact in int64,
    so an ignore_index of -100 compares as a number, never wrapping into 0..255)."""
    return t if t.dtype is _t.int64 else to(t, _t.int64)


def _nll_parts(shape, t, w, ignore_index, dtype, device):
    """(target with ignored entries at class 0, per-entry weights (0 where ignored))."""
    valid = prims.ne(t, int(ignore_index))
    tc = prims.where(valid, t, 0)
    if w is None:
        ws = to(valid, dtype)
    else:
        wsel = reshape(prims.index_select(to(w, dtype), 0, flat(tc)), tuple(t.shape))
        ws = prims.where(valid, wsel, 0.0)
    return tc, ws


@register_decomposition("nll_loss_nd")
def nll_loss_nd(x, t, w=None, reduction=1, ignore_index=-100):
    if t.dtype not in (_t.int64, _t.uint8) or x.ndim < 1 or not x.dtype.is_floating_point:
        return NotImplemented
    t = _class_index(t)
    unb = x.ndim == 1
    xx = prims.expand_dims(x, (0,)) if unb else x
    tt = reshape(t, (1,)) if unb else t
    tc, ws = _nll_parts(tuple(xx.shape), tt, w, ignore_index, x.dtype, x.device)
    sel = prims.squeeze(prims.gather(xx, 1, prims.expand_dims(tc, (1,))), (1,))
    loss = prims.mul(prims.neg(sel), ws)
    total = prims.sum(ws, tuple(range(ws.ndim)))
    if reduction == 0:
        out = reshape(loss, ()) if unb else loss
    elif reduction == 2:
        out = prims.sum(loss, tuple(range(loss.ndim)))
    else:
        out = prims.div(prims.sum(loss, tuple(range(loss.ndim))), total)
    return out, total


@register_decomposition("_nll_loss_backward")
def _nll_loss_backward(g, self_size, t, w, reduction, ignore_index):
    shape = tuple(self_size)
    unb = len(shape) == 1
    xs = (1,) + shape if unb else shape
    t = _class_index(t)
    tt = reshape(t, (1,)) if unb else t
    tc, ws = _nll_parts(xs, tt, w, ignore_index, g.dtype, g.device)
    ts = tuple(tt.shape)
    if reduction == 0:
        coef = prims.mul(prims.neg(ws), reshape(g, (1,)) if unb else g)
    elif reduction == 2:
        coef = prims.mul(prims.neg(ws), bcast(g, ts))
    else:
        total = prims.sum(ws, tuple(range(ws.ndim)))
        coef = prims.mul(prims.neg(ws), bcast(prims.div(g, total), ts))
    # an ignored target's entry stays 0 (never written by torch's kernel, even for a NaN / inf
    # grad); a weight-0 class still gets 0 * grad (NaN when the total weight is 0)
    coef = prims.where(prims.ne(tt, int(ignore_index)), coef, 0.0)
    out = prims.scatter(full(xs, 0, g.dtype, g.device), 1, prims.expand_dims(tc, (1,)),
                        prims.expand_dims(coef, (1,)))
    return reshape(out, shape)


def coverage_examples():
    """op name -> () -> example arguments, for ``python -m ember.prims.coverage``."""
    import ember
    r = ember.randn

    def i(hi, *shape):
        return ember.randint(0, hi, shape)
    x = lambda: r(2, 3, 6, 6)  # noqa: E731
    return {
        "_conv_input_grad": lambda: (r(2, 4, 3, 3), r(4, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1, [2, 3, 6, 6]),
        "_conv_weight_grad": lambda: (r(2, 4, 3, 3), x(), [2, 2], [1, 1], [1, 1], 1, [4, 3, 3, 3]),
        "max_pool_with_indices": lambda: (x(), [3, 3], [2, 2], [1, 1], [1, 1], False),
        "_max_pool_backward": lambda: (r(2, 3, 3, 3), i(36, 2, 3, 3, 3), [2, 3, 6, 6]),
        "_max_pool_gather": lambda: (x(), i(36, 2, 3, 3, 3)),
        "avg_pool": lambda: (x(), [3, 3], [2, 2], [1, 1], True, False, None),
        "_avg_pool_backward": lambda: (r(2, 3, 3, 3), [3, 3], [2, 2], [1, 1], False, True, None, [2, 3, 6, 6]),
        "_gather_axes": lambda: (x(), ((3, [1, 0, 1, 2, 3, 4, 5, 4], None, 0),), "ReflectionPad1DBackward0"),
        "_scatter_axes": lambda: (r(2, 3, 6, 8), ((3, [1, 0, 1, 2, 3, 4, 5, 4], None, 0),), [2, 3, 6, 6]),
        "_resample": lambda: (x(), ((2, np.full((4, 6), 1 / 6)),), "UpsampleBilinear2DBackward0"),
        "native_layer_norm": lambda: (r(3, 4, 5), [5], r(5), r(5), 1e-5),
        "native_batch_norm": lambda: (x(), r(3), r(3), r(3), r(3).abs(), True, 0.1, 1e-5),
        "native_group_norm": lambda: (x(), r(3), r(3), 2, 3, 36, 3, 1e-5),
        "_norm2_clamp": lambda: (r(3, 4), 1, 1e-12),
        "embedding_dense_backward": lambda: (r(2, 3, 4), i(5, 2, 3), 5, 1, False),
        "one_hot": lambda: (i(5, 3), 5),
        "smooth_l1_loss": lambda: (r(3, 4), r(3, 4), 1, 0.5),
        "huber_loss": lambda: (r(3, 4), r(3, 4), 1, 0.5),
        "_pw_loss_backward": lambda: (r(()), r(3, 4), r(3, 4), "smooth_l1", 0.5),
        "binary_cross_entropy": lambda: (ember.rand(3, 4), ember.rand(3, 4), None, 1),
        "_bce_backward": lambda: (r(()), ember.rand(3, 4), ember.rand(3, 4), None),
        "binary_cross_entropy_with_logits": lambda: (r(3, 4), ember.rand(3, 4), None, r(4).abs(), 1),
        "nll_loss_nd": lambda: (r(4, 5), i(5, 4), r(5).abs(), 1, 2),
        "_nll_loss_backward": lambda: (r(()), [4, 5], i(5, 4), None, 1, -100),
    }
