"""Eager fast paths of ``nn.functional`` composites: scaled_dot_product_attention and
cross_entropy run their ops' numpy kernels back to back, without a dispatcher round per op.

Why. Each ember op call costs ~5 us of dispatch (bindings, argument checks, autograd and mode
tests, wrapping the result) before its kernel runs. SDPA is ~10 such calls (matmul = expand,
reshape, bmm, view; then mul, softmax, matmul again): 150 us for an 8x8 attention, 30x
PyTorch; cross_entropy is log_softmax and nll_loss (50 us, 9x).

When. Only when nothing could see the inner ops: no dispatch or __torch_function__ mode, no
autocast region (it would change the matmuls' dtype), plain ember Tensors (no subclass) on
numpy arrays, and no input requiring grad while grad mode is on. Otherwise -- autograd
recording, fake tensors while the compiler traces, make_fx, profiling modes -- the caller's
composite runs, so gradients and what ``ember.compile`` captures are unchanged.

What. The same kernels in the same order on the same arrays (the composite's reshapes are
numpy reshapes of the same views), so the values are bit for bit the composite's;
``tests/ops/test_small_op_fast_paths.py`` pins that, and the fallback, against torch.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _mt19937 as _mt
from .. import random as _random
from .._state import STATE
from ..ops import nn_ops as _nn_ops
from ..tensor import Tensor, _make

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def plain(*tensors) -> bool:
    """Whether a composite over these tensors (None entries ignored) may run its kernels
    directly: see the module docstring."""
    st = STATE
    if st.modes or st.tf_modes or st.autocast is not None:
        return False
    grad = st.grad_enabled
    for t in tensors:
        if t is None:
            continue
        if type(t) is not Tensor or type(t._data) is not np.ndarray or (grad and t._requires_grad):
            return False
    return True


from ..ops.reduction import kernel_of as _kernel  # noqa: E402  (the numpy kernel of a registered op)


def _bmm(a, b, nb):
    """``linalg.matmul``'s batched route for operands of equal batch dims: fold the batch into
    one dim (a view where possible, as ember's reshape) and run the ``bmm`` kernel."""
    a3 = a.reshape((nb,) + a.shape[-2:])
    b3 = b.reshape((nb,) + b.shape[-2:])
    return _kernel("bmm")(np, a3, b3)


def sdpa(query, key, value, attn_mask, is_causal, scale):
    """``F.scaled_dot_product_attention`` without dropout and with equal batch dims of q, k, v,
    as a fresh tensor; None when the composite must run (see :func:`plain`), for any other
    case (broadcast batch dims, mixed dtypes, empty tensors, a mask of another float dtype),
    so its checks and errors stay the composite's."""
    if not plain(query, key, value, attn_mask):
        return None
    q, k, v = query._data, key._data, value._data
    dt = q.dtype
    nd = q.ndim
    if dt not in _FLOATS or k.dtype != dt or v.dtype != dt or nd < 3 or k.ndim != nd or v.ndim != nd:
        return None
    batch = q.shape[:-2]
    if k.shape[:-2] != batch or v.shape[:-2] != batch or k.shape[-1] != q.shape[-1] or \
            v.shape[-2] != k.shape[-2] or q.size == 0 or k.size == 0 or v.size == 0:
        return None
    m = None
    if attn_mask is not None:
        if is_causal:
            return None                   # the composite's error
        m = attn_mask._data
        if m.dtype != np.bool_ and m.dtype != dt:
            return None
    L, S = q.shape[-2], k.shape[-2]
    nb = math.prod(batch)
    attn = _bmm(q, k.swapaxes(-2, -1), nb).reshape(batch + (L, S))
    attn = _kernel("mul")(np, attn, scale)
    if is_causal:
        attn = _kernel("where")(np, np.tri(L, S, dtype=np.bool_), attn, float("-inf"))
    elif m is not None:
        attn = _kernel("where")(np, m, attn, float("-inf")) if m.dtype == np.bool_ else \
            _kernel("add")(np, attn, m)
        if attn.shape[:-2] != batch:      # a mask with more batch dims: the composite's broadcast
            return None
    dead = None
    if m is not None:                     # a query row masked out entirely gives zeros (F._safe_softmax)
        dead = np.all(attn == -np.inf, axis=-1, keepdims=True)
        if dead.any():
            attn = np.where(dead, attn.dtype.type(0), attn)
        else:
            dead = None
    attn = _kernel("_softmax")(np, attn, -1, False)
    if dead is not None:
        attn = np.where(dead, attn.dtype.type(0), attn)
    out = _bmm(attn, v, nb).reshape(batch + (L, v.shape[-1]))
    return _make(out, query.device, query.dtype)


def cross_entropy(input, target, weight, reduction_enum, ignore_index):
    """``F.cross_entropy`` with class-index targets and no label smoothing: the
    ``_log_softmax`` and ``nll_loss_nd`` kernels; None when the composite must run."""
    if not plain(input, target, weight):
        return None
    x, t = input._data, target._data
    if x.dtype not in _FLOATS or t.dtype.kind == "f" or x.ndim == 0:
        return None
    if x.ndim >= 2 and t.ndim >= 1 and x.shape[0] != t.shape[0]:
        return None                       # nll_loss's own error
    sel = _selected_log_softmax(x, t, weight, ignore_index)
    if sel is not None:
        # nll_loss_nd's arithmetic with all weights 1: loss = -sel * 1, total = the row count
        # (a sum of ones, exact), mean = sum(loss) / total in the input's dtype
        dt = x.dtype
        loss = -sel
        if reduction_enum == 0:
            out = loss
        elif reduction_enum == 2:
            out = loss.sum(dtype=dt)
        else:
            out = loss.sum(dtype=dt) / dt.type(sel.shape[0])
        return _make(np.asarray(out).astype(dt), input.device, input.dtype)
    logp = _kernel("_log_softmax")(np, x, 0 if x.ndim == 1 else 1, False)
    out = _kernel("nll_loss_nd")(np, logp, t, None if weight is None else weight._data, reduction_enum,
                                 ignore_index)[0]
    return _make(out, input.device, input.dtype)


def nll_loss(input, target, reduction_enum, ignore_index):
    """``F.nll_loss`` without a weight in ``nll_loss_nd``'s common case (``nn_ops.nll_unit``: (N, C)
    float input, every target a class), the kernel's arithmetic without a dispatcher round; None
    when the op must run (autograd, modes, any other case and every error)."""
    if not plain(input, target):
        return None
    r = _nn_ops.nll_unit(input._data, target._data, reduction_enum, ignore_index)
    if r is None:
        return None
    return _make(r[0], input.device, input.dtype)


def dropout(input, p):
    """``F.dropout(input, p, training=True)`` (0 < p < 1, not in place) with its mask made by the
    kernels the composite's ops run -- ``_random``'s bernoulli draw (the same generator stream)
    into what ``empty_like`` gives a row-major input, then ``div`` by 1 - p -- without their
    dispatcher rounds; the product with the input is the ``mul`` kernel, or the ``mul`` op when
    autograd records it (MulBackward0, as the composite). None when the composite must run: a
    mode, a subclass, non-numpy data, another dtype, an input that is not row-major or has a
    size-1 dim (``empty_like`` keeps such layouts: another draw order)."""
    st = STATE
    if st.modes or st.tf_modes or st.autocast is not None or type(input) is not Tensor or type(p) is not float:
        return None
    x = input._data
    if type(x) is not np.ndarray or x.dtype not in _FLOATS or not x.flags.c_contiguous or 1 in x.shape:
        return None
    keep = 1.0 - p
    dt = x.dtype
    # _random's bernoulli kernel for a row-major float tensor (creation._torch_stream_draw): the
    # default generator's Mersenne Twister draw, cast, in C order; then div's kernel: a true
    # divide by the number as a 0-d array of the dtype (0 or 1 by keep in [2**-53, 1): no
    # floating-point flag to silence); then mul's kernel for one float dtype: np.multiply
    noise = _bernoulli_mask(_random.default_generator._mt, x.size, keep).astype(dt).reshape(x.shape)
    noise = np.true_divide(noise, np.asarray(keep, dtype=dt))
    if st.grad_enabled and input._requires_grad:
        return input * _make(noise, input.device, input.dtype)
    return _make(np.multiply(x, noise), input.device, input.dtype)


_LOW21 = np.uint64((1 << 21) - 1)
_S32 = np.uint64(32)


def _bernoulli_mask(stream, n, p):
    """``_mt19937.bernoulli(stream, n, p)`` in integers: that draw is ``u < p`` for the double
    ``u = v * 2**-53`` of the 53-bit ``v`` = the low 21 bits of a first word over a second word;
    ``u`` is exact, and so is ``p * 2**53``, so ``u < p`` is ``v < ceil(p * 2**53)`` -- the same
    words consumed, the same mask, without the double conversion and scaling."""
    w = stream.bg.random_raw(2 * n)
    v = ((w[0::2] & _LOW21) << _S32) | w[1::2]
    return v < np.uint64(math.ceil(p * 9007199254740992.0))


def max_pool2d(input, k, s, p, d, ceil_mode):
    """``F.max_pool2d`` of a batched (N, C, H, W) float input, no indices: the values of the
    ``max_pool_with_indices`` kernel (its checks and errors included); None for any other input
    (the caller has checked :func:`plain`)."""
    x = input._data
    if x.ndim != 4 or x.dtype not in _FLOATS:
        return None
    return _make(_kernel("max_pool_with_indices")(np, x, k, s, p, d, ceil_mode)[0], input.device, input.dtype)


def _selected_log_softmax(x, t, weight, ignore_index):
    """(N,): ``log_softmax(x, 1)[i, t[i]]`` with the ``_log_softmax`` kernel's arithmetic
    (row max, shift, exp, sum, log), computing the final ``z - log(s)`` for the picked entries
    only, and the exp in place; None unless x is (N, C), unweighted, every target a class and no
    ignore_index among the classes (then nll_loss's weights are all 1)."""
    if x.ndim != 2 or weight is not None or t.ndim != 1 or t.dtype != np.int64 or x.size == 0:
        return None
    N, C = x.shape
    if 0 <= ignore_index < C or t.min() < 0 or t.max() >= C:
        return None
    with np.errstate(all="ignore"):
        # (np.max / np.sum's reductions, without their Python wrappers)
        z = x - np.maximum.reduce(x, axis=1, keepdims=True)
        zt = z[np.arange(N), t]
        s = np.add.reduce(np.exp(z, out=z), axis=1, keepdims=True)
        return zt - np.log(s)[:, 0]


def _bufs_plain(*tensors) -> bool:
    """Whether in-place updates of these buffers (under no_grad) may run their kernels directly:
    no dispatch / __torch_function__ mode or autocast region, plain ember Tensors on numpy arrays."""
    st = STATE
    if st.modes or st.tf_modes or st.autocast is not None:
        return False
    for t in tensors:
        if t is not None and (type(t) is not Tensor or type(t._data) is not np.ndarray):
            return False
    return True


def batch_norm_running_update(input, mean, running_mean, running_var, m) -> bool:
    """``F.batch_norm``'s running-statistics update (training) as its ops' kernels back to back:
    ``running_mean.mul_(1 - m).add_(mean * m)`` and ``running_var.mul_(1 - m).add_(var_unb * m)``
    with ``var_unb = ((x - mean) ** 2).sum(dims) / max(cnt - 1, 1)``, each in-place write a copy
    into the buffer and a version bump, as the dispatcher's. False (nothing done) when the
    composite must run: a mode, a subclass, non-numpy data, or dtypes that differ."""
    if not _bufs_plain(input, mean, running_mean, running_var):
        return False
    x, mu = input._data, mean._data
    dt = x.dtype
    if dt not in _FLOATS or mu.dtype != dt or x.ndim < 2:
        return False
    for b in (running_mean, running_var):
        if b is not None and (b._data.dtype != dt or b._data.shape != mu.shape):
            return False
    if type(m) not in (int, float):
        return False
    # the kernels' arithmetic (mul by a Python number: by that number as a 0-d array of the
    # buffer's dtype; add, sub, mul of two arrays of one float dtype: the ufunc; sum: add.reduce;
    # div by an int: by it as the dtype), one error state around it all (the kernels': ignore)
    f = dt.type
    keep, mom = f(1 - m), f(m)
    with np.errstate(all="ignore"):
        if running_mean is not None:
            rm = running_mean._data
            np.copyto(rm, rm * keep, casting="unsafe")
            np.copyto(rm, rm + mu * mom, casting="unsafe")
            running_mean._bump_version()
            running_mean._bump_version()
        if running_var is not None:
            C = x.shape[1]
            xc = x - mu.reshape((1, C) + (1,) * (x.ndim - 2))
            var_unb = np.add.reduce(xc * xc, axis=(0,) + tuple(range(2, x.ndim))) / f(max(x.size // C - 1, 1))
            rv = running_var._data
            np.copyto(rv, rv * keep, casting="unsafe")
            np.copyto(rv, rv + var_unb * mom, casting="unsafe")
            running_var._bump_version()
            running_var._bump_version()
    return True
