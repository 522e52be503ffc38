"""More of PyTorch's API, written over existing ember ops (composites or plain functions over
them, so autograd, fake tensors and the compiler need nothing new):

* ``finfo``, ``iinfo`` (from ``ember._finfo``);
* broadcasting and shape helpers: ``broadcast_to``, ``broadcast_tensors``, ``broadcast_shapes``,
  ``ravel``, ``hsplit``/``vsplit``/``dsplit``, ``take_along_dim``, ``diagflat``,
  ``unravel_index``, ``msort``, ``aminmax``;
* reductions and linear-algebra helpers: ``nansum``, ``nanmean``, ``quantile``,
  ``nanquantile``, ``inner``, ``tensordot``, ``vdot``, ``dist``, ``cov``, ``corrcoef``,
  ``trapezoid``/``trapz``, ``cumulative_trapezoid``, ``vander``, ``addmv``, ``addr``,
  ``addbmm``, ``matrix_power``;
* top-level aliases of ``ember.nn.functional`` (``torch.conv2d``, ``torch.layer_norm``, ...)
  with PyTorch's top-level signatures, and ``detach``;
* Tensor methods: ``is_nonzero``, ``is_same_size``, ``is_signed``, ``is_inference``,
  ``get_device``, ``fill_diagonal_``, ``sum_to_size``, ``masked_scatter(_)``, ``renorm(_)``,
  ``new_empty_strided``.
"""
from __future__ import annotations

import itertools
import numbers
import operator

import numpy as np

from .. import types as _t
from .._finfo import finfo, iinfo
from ..tensor import Tensor
from . import api
from ._exports import Exports
from ._helpers import wrap_dim
from .registry import defcomposite
from .reduction import _return_type

_aminmax_t = _return_type("aminmax", ("min", "max"))


def _vnorm(*args):
    from .registry import OPS
    return OPS["linalg_vector_norm"].binding(*args)

_export = Exports()
_EXPORTS, _METHODS = _export.functions, _export.methods


def _check_int(name, fn, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(v).__name__}")


# ---------------------------------------------------------------------- broadcasting
@_export
def broadcast_shapes(*shapes):
    """The shape all of ``shapes`` (sequences of ints, or ints) broadcast to, as an ``ember.Size``,
    with PyTorch's error for incompatible ones."""
    from ..fx.experimental.symbolic_shapes import SymInt      # (symbolic sizes while tracing)
    norm = []
    for s in shapes:
        if isinstance(s, numbers.Integral) and not isinstance(s, bool):
            norm.append((int(s),))
        elif isinstance(s, SymInt):
            norm.append((s,))
        elif isinstance(s, (tuple, list)):
            for d in s:
                if not isinstance(d, (numbers.Integral, SymInt)):
                    raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, "
                                       f"got {s}")
            norm.append(tuple(s))
        else:
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}")
    n = max((len(s) for s in norm), default=0)
    common = [1] * n
    for arg_idx, shape in enumerate(norm):
        for idx in range(-1, -1 - len(shape), -1):
            if shape[idx] == common[idx]:
                continue
            if common[idx] == 1:
                if shape[idx] < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                common[idx] = shape[idx]
            if shape[idx] == 1:
                continue
            if common[idx] != shape[idx]:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {shape[idx]} at {idx}! "
                                   f"Mismatching argument at index {arg_idx} had {shape}; but expected shape "
                                   f"should be broadcastable to {common}")
    return _t.Size(common)


@_export(method=True)
def broadcast_to(input, size):
    """``input`` expanded to ``size`` (a view; ``-1`` keeps a size), as ``expand``."""
    return input.expand(tuple(size)) if isinstance(size, (tuple, list)) else input.expand(size)


def _tensor_broadcast_shape(tensors):
    shape = ()
    for i, t in enumerate(tensors):
        a, b = list(shape), list(t.shape)
        n = max(len(a), len(b))
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        out = []
        for k in range(n):
            if a[k] == b[k] or b[k] == 1:
                out.append(a[k])
            elif a[k] == 1:
                out.append(b[k])
            else:
                raise RuntimeError(f"The size of tensor a ({a[k]}) must match the size of tensor b ({b[k]}) at "
                                   f"non-singleton dimension {k}")
        shape = tuple(out)
    return shape


@_export
def broadcast_tensors(*tensors):
    """The tensors expanded (views) to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors(): expected Tensor arguments, got {type(t).__name__}")
    shape = _tensor_broadcast_shape(tensors)
    return tuple(t.expand(tuple(shape)) for t in tensors)


# ---------------------------------------------------------------------- ravel / splits
@_export(method=True)
def ravel(input):
    """The elements as a 1-d tensor: a view when the layout allows it, else a copy."""
    return input.reshape(-1)


def _nsplit(fname, input, indices_or_sections, dim, min_dim):
    if input.ndim < min_dim:
        raise RuntimeError(f"torch.{fname} requires a tensor with at least {min_dim} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, numbers.Integral) and not isinstance(indices_or_sections, bool):
        n = int(indices_or_sections)
        size = input.shape[dim]
        if n == 0 or size % n != 0:
            raise RuntimeError(f"torch.{fname} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {n}!")
        return api.tensor_split(input, n, dim)
    return api.tensor_split(input, list(indices_or_sections), dim)


@_export(method=True)
def hsplit(input, indices_or_sections):
    """Split along dim 1 (dim 0 for a 1-d tensor), as ``numpy.hsplit``."""
    return _nsplit("hsplit", input, indices_or_sections, 1 if input.ndim != 1 else 0, 1)


@_export(method=True)
def vsplit(input, indices_or_sections):
    """Split along dim 0 of a tensor with at least 2 dims."""
    return _nsplit("vsplit", input, indices_or_sections, 0, 2)


@_export(method=True)
def dsplit(input, indices_or_sections):
    """Split along dim 2 of a tensor with at least 3 dims."""
    return _nsplit("dsplit", input, indices_or_sections, 2, 3)


# ---------------------------------------------------------------------- take_along_dim / diagflat / unravel_index
@defcomposite("take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor")
def take_along_dim(self, indices, dim=None):
    """``gather`` along ``dim`` after broadcasting ``self`` and ``indices`` over the other dims
    (``numpy.take_along_axis``); with ``dim=None`` both are flattened first."""
    if indices.dtype is not _t.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.legacy_name}")
    if dim is None:
        return self.reshape(-1).gather(0, indices.reshape(-1))
    if self.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {self.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    d = wrap_dim(dim, self.ndim)
    s_self, s_idx = list(self.shape), list(indices.shape)
    s_self[d] = s_idx[d] = 1
    common = list(broadcast_shapes(tuple(s_self), tuple(s_idx)))
    a_shape, i_shape = list(common), list(common)
    a_shape[d], i_shape[d] = self.shape[d], indices.shape[d]
    return self.expand(tuple(a_shape)).gather(d, indices.expand(tuple(i_shape)))


@defcomposite("diagflat(Tensor self, int offset=0) -> Tensor")
def diagflat(self, offset=0):
    """A square matrix with the flattened input on diagonal ``offset``."""
    return api.diag(self.reshape(-1), offset)


@_export
def unravel_index(indices, shape):
    """Coordinates (a tuple of int64 tensors, one per dim of ``shape``) of flat ``indices`` in a
    tensor of ``shape``; out-of-range and negative indices wrap, as PyTorch's."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"expected 'indices' to be a tensor, but got {type(indices)}")
    if indices.dtype.is_floating_point or indices.dtype is _t.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    else:
        for d in shape:
            if not isinstance(d, numbers.Integral):
                raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(d)}")
        shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    coefs = list(reversed(list(itertools.accumulate(reversed(shape[1:] + (1,)), func=operator.mul))))
    idx = indices.to(_t.int64).unsqueeze(-1)
    res = idx.floor_divide(api.tensor(coefs, dtype=_t.int64, device=indices.device)) % \
        api.tensor(shape, dtype=_t.int64, device=indices.device)
    return tuple(res.unbind(-1))


# ---------------------------------------------------------------------- msort / aminmax
@defcomposite("msort(Tensor self) -> Tensor")
def msort(self):
    """Sorted along dim 0 (the values of ``sort(self, 0)``)."""
    return api.sort(self, 0)[0]


@defcomposite("aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor, Tensor)",
              method=False, function=False)
def _aminmax(self, dim=None, keepdim=False):
    if dim is None:
        if self.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        x = self.reshape(-1) if self.ndim else self
        if keepdim:
            lo, hi = api.amin(x), api.amax(x)
            one = [1] * self.ndim
            return lo.reshape(one), hi.reshape(one)
        return api.amin(x), api.amax(x)
    d = wrap_dim(dim, self.ndim)
    if self.ndim and self.shape[d] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    if self.ndim == 0:
        return self.clone(), self.clone()
    return api.amin(self, d, keepdim), api.amax(self, d, keepdim)


@_export(method=True)
def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` of ``input`` (over ``dim`` when given) as the named tuple
    ``ember.return_types.aminmax``; ties share the gradient evenly, as amin/amax."""
    lo, hi = _aminmax.binding(input, dim=dim, keepdim=keepdim)
    return _aminmax_t(lo, hi)


# ---------------------------------------------------------------------- nansum / nanmean
def _dims_arg(dim):
    if dim is None:
        return None
    return [dim] if isinstance(dim, numbers.Integral) else list(dim)


@_export(method=True)
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """``sum`` treating NaN as zero (its gradient is 0 there)."""
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    x = api.where(api.isnan(input), 0, input) if input.dtype.is_floating_point else input
    d = _dims_arg(dim)
    if d is None:
        return api.sum(x, dtype=dtype) if not keepdim else api.sum(x, list(range(x.ndim)), True, dtype=dtype)
    return api.sum(x, d, keepdim, dtype=dtype)


@_export(method=True)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """``mean`` over the non-NaN elements (NaN where all are NaN)."""
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{input.dtype.legacy_name}")
    cnt = nansum((~api.isnan(input)).to(input.dtype), dim, keepdim, dtype=dtype)
    return nansum(input, dim, keepdim, dtype=dtype) / cnt


# ---------------------------------------------------------------------- quantile
_INTERP = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(fname, input, q, dim, keepdim, interpolation, ignore_nan):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fname}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype not in (_t.float32, _t.float64):
        raise RuntimeError(f"{fname}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{fname}() input tensor must be non-empty")
    if interpolation not in _INTERP:
        raise RuntimeError(f"{fname}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                         f"{interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{fname}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{fname}() q tensor must be same dtype as the input tensor")
        if not q._fake and q.numel() and bool(((q < 0) | (q > 1)).any()):
            raise RuntimeError(f"{fname}() q values must be in the range [0, 1]")
        qt, q_scalar = q.reshape(-1), q.ndim == 0
    else:
        q = float(q)
        if not 0 <= q <= 1:
            raise RuntimeError(f"{fname}() q must be in the range [0, 1] but got {q}")
        qt, q_scalar = api.tensor([q], dtype=input.dtype, device=input.device), True
    # the reduced dim last (size 1 kept where it was, for keepdim), or everything flattened
    if dim is None:
        x = input.reshape(-1)
        out_shape = [1] * input.ndim if keepdim else []
    else:
        d = wrap_dim(dim, input.ndim)
        x = input.unsqueeze(-1).transpose(d, -1).squeeze(d) if input.ndim else input.reshape(1)
        out_shape = list(input.shape)
        if input.ndim:
            if keepdim:
                out_shape[d] = 1
            else:
                del out_shape[d]
    srt = api.sort(x, -1)[0]                     # NaN sorts last
    n = srt.shape[-1]
    isn = api.isnan(srt)
    nq = qt.shape[0]
    qv = qt.reshape([nq] + [1] * srt.ndim)         # (nq, ..., 1)
    srt = srt.unsqueeze(0)
    if ignore_nan:
        valid = (~isn).sum(-1, keepdim=True).to(input.dtype).unsqueeze(0)
        ranks = qv * (valid - 1)
        ranks = api.where(ranks < 0, 0.0, ranks)
    else:
        ranks = qv * float(n - 1)
        ranks = api.where(isn.any(-1, keepdim=True).unsqueeze(0), float(n - 1), ranks)
    if interpolation == "lower":
        ranks = api.floor(ranks)
    elif interpolation == "higher":
        ranks = api.ceil(ranks)
    elif interpolation == "nearest":
        ranks = api.round(ranks)
    shape = list(srt.shape)
    shape[0] = nq
    srt_e = srt.expand(*shape[:-1], n)
    below = ranks.to(_t.int64)
    idx_shape = shape[:-1] + [1]
    values = srt_e.gather(-1, below.expand(tuple(idx_shape)))
    if interpolation in ("linear", "midpoint"):
        w = api.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below.to(ranks.dtype)
        above = api.ceil(ranks).to(_t.int64)
        values = api.lerp(values, srt_e.gather(-1, above.expand(tuple(idx_shape))), w.expand(tuple(idx_shape)))
    values = values.squeeze(-1)                   # (nq, *reduced)
    if q_scalar:
        return values.reshape(out_shape)
    return values.reshape([nq] + out_shape)


@_export(method=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles of ``input`` (over ``dim`` or all elements); a 1-d ``q`` adds a
    leading dim. Any NaN in a reduced row makes its quantiles NaN."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@_export(method=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` ignoring NaN (NaN only for an all-NaN row)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# ---------------------------------------------------------------------- inner / tensordot / vdot / dist
@defcomposite("inner(Tensor self, Tensor other) -> Tensor")
def inner(self, other):
    """Sum over the last dims of both: shape ``self.shape[:-1] + other.shape[:-1]``; a 0-d
    argument multiplies."""
    if self.ndim == 0 or other.ndim == 0:
        return self * other
    if self.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(self.shape)} and {list(other.shape)}")
    return tensordot(self, other, ([-1], [-1]))


@_export
def tensordot(a, b, dims=2, out=None):
    """Contract ``dims`` (an int: the last of ``a`` with the first of ``b``; or two lists) as a
    permute + reshape + matmul."""
    if out is not None:
        raise TypeError("tensordot(): out= is not supported by ember")
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("tensordot(): expected Tensor arguments")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da = list(range(a.ndim - dims, a.ndim))
        db = list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists or an int")
        da, db = dims
        da = [da] if isinstance(da, numbers.Integral) else list(da)
        db = [db] if isinstance(db, numbers.Integral) else list(db)
        if len(da) != len(db):
            raise RuntimeError("both dimension lists should have same length")
    da = [wrap_dim(d, a.ndim) for d in da]
    db = [wrap_dim(d, b.ndim) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} "
                               f"and second has size {b.shape[y]} in dim {y}")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [i for i in range(b.ndim) if i not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    m = 1
    for d in free_a:
        m *= a.shape[d]
    n = 1
    for d in free_b:
        n *= b.shape[d]
    am = a.permute(tuple((free_a + da))).reshape(m, k)
    bm = b.permute(tuple((db + free_b))).reshape(k, n)
    return (am @ bm).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])


@defcomposite("vdot(Tensor self, Tensor other) -> Tensor")
def vdot(self, other):
    """Dot product of two 1-d tensors, the first one conjugated."""
    return api.dot(api.conj(self) if self.dtype.is_complex else self, other)


@defcomposite("dist(Tensor self, Tensor other, Scalar p=2) -> Tensor")
def dist(self, other, p=2):
    """The ``p``-norm of ``self - other`` (of its modulus for complex tensors)."""
    d = self - other
    return _vnorm(api.abs(d) if d.dtype.is_complex else d, p)


# ---------------------------------------------------------------------- cov / corrcoef
@_export(method=True)
def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance matrix of the variables in the rows of ``input`` (observations in columns),
    with integer frequency weights and/or observation weights, PyTorch's formula. Degrees of
    freedom <= 0 give inf/NaN without the warning PyTorch prints."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    num_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.ndim > 1:
            raise RuntimeError(f"cov(): expected fweights to have one or fewer dimensions but got fweights with "
                               f"{fweights.ndim} dimensions")
        if fweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{fweights.dtype.legacy_name} dtype")
        if fweights.numel() != num_obs:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are observations in the "
                               f"input but got {fweights.numel()} != {num_obs}")
        w = fweights
    if aweights is not None:
        if aweights.ndim > 1:
            raise RuntimeError(f"cov(): expected aweights to have one or fewer dimensions but got aweights with "
                               f"{aweights.ndim} dimensions")
        if not aweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{aweights.dtype.legacy_name} dtype")
        if aweights.numel() != num_obs:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are observations in the "
                               f"input but got {aweights.numel()} != {num_obs}")
        w = aweights if w is None else w * aweights
    if w is not None:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    else:
        w_sum = num_obs
        avg = x.sum(1) / num_obs if x.dtype.is_floating_point or x.dtype.is_complex else \
            x.to(_t.get_default_dtype()).sum(1) / num_obs
    if w is not None and correction != 0:
        if aweights is not None:
            nf = w_sum - correction * (w * aweights).sum() / w_sum
        else:
            nf = w_sum - correction
    else:
        nf = w_sum - correction
    if isinstance(nf, Tensor):
        nf = api.where(nf <= 0, 0, nf)
    elif nf <= 0:
        nf = 0
    xc = x - avg.unsqueeze(1)
    c = xc @ (xc * w if w is not None else xc).t()
    if c.dtype.is_complex:      # E[(x - mx) conj(y - my)]
        c = xc @ api.conj(xc * w if w is not None else xc).t()
    return (c / nf).squeeze()


@_export(method=True)
def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = api.diagonal(c)
    sd = api.sqrt(api.real(d) if d.dtype.is_complex else d)
    c = c / sd.unsqueeze(1)
    c = c / sd.unsqueeze(0)
    if c.dtype.is_complex:      # each part clipped (torch)
        from .complex_ops import complex as _complex
        return _complex(api.clamp(api.real(c), -1, 1), api.clamp(api.imag(c), -1, 1))
    return api.clamp(c, -1, 1)


# ---------------------------------------------------------------------- trapezoid / cumulative_trapezoid
def _trap_dx(y, x, dx, d, fname):
    """The spacing between samples along ``d``: a number or a tensor broadcastable to y[1:]."""
    if x is not None and dx is not None:
        raise RuntimeError(f"{fname}: received both x and dx; only one may be given")  # pragma: no cover
    if x is None:
        return 1 if dx is None else dx
    if not isinstance(x, Tensor):
        return x
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{fname}: There must be one `x` value for each sample point")
        shape = [1] * y.ndim
        shape[d] = x.shape[0] - 1
        return api.diff(x).reshape(shape)
    xd = d - y.ndim + x.ndim
    return api.diff(x, dim=xd) if x.ndim else x


@_export
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """Integral of ``y`` along ``dim`` by the trapezoidal rule, with sample points ``x`` or a
    constant spacing ``dx`` (1 by default)."""
    if y.ndim == 0:
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    d = wrap_dim(dim, y.ndim)
    n = y.shape[d]
    step = _trap_dx(y, x, dx, d, "trapezoid")
    if n == 0:
        return api.sum(y, [d]) * 0 if not isinstance(step, Tensor) else (y.sum(d) * 0)
    if isinstance(step, Tensor):
        return (step * (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1))).sum(d) / 2
    return (y.sum(d) - (y.select(d, 0) + y.select(d, n - 1)) * 0.5) * step


@_export
def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of :func:`trapezoid` (``trapz(y, x, *, dim=-1)`` / ``trapz(y, *, dx=1, dim=-1)``)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@_export
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoidal integral of ``y`` along ``dim`` (one element shorter)."""
    if y.ndim == 0:
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    d = wrap_dim(dim, y.ndim)
    n = y.shape[d]
    step = _trap_dx(y, x, dx, d, "cumulative_trapezoid")
    if n == 0:
        return y.narrow(d, 0, 0) * 1.0 if not y.dtype.is_floating_point else y.narrow(d, 0, 0) * 1
    avg = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) / 2
    return api.cumsum(avg * step, d)


# ---------------------------------------------------------------------- vander
@_export
def vander(x, N=None, increasing=False):
    """Columns are powers of ``x`` (decreasing unless ``increasing``): ``N`` of them (``len(x)``
    by default). Integer and bool inputs give int64 (as PyTorch)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    xx = x if x.dtype.is_floating_point else x.to(_t.int64)
    if N == 0:
        return api.empty((x.shape[0], 0), dtype=xx.dtype, device=x.device)
    cols = [api.ones_like(xx)]
    if N > 1:
        cols = [api.ones_like(xx).unsqueeze(1),
                api.cumprod(xx.unsqueeze(1).expand(x.shape[0], N - 1), 1)]
        res = api.cat(cols, 1)
    else:
        res = cols[0].unsqueeze(1)
    return res if increasing else res.flip(1)


# ---------------------------------------------------------------------- addmv / addr / addbmm
def _scaled_add(self, prod, beta, alpha):
    """PyTorch's ``beta * self + alpha * prod`` with ``beta == 0`` ignoring ``self`` (NaN too)."""
    out = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return out + api.zeros_like(self)
    return out + (self if beta == 1 else self * beta)


@defcomposite("addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addmv(self, mat, vec, beta=1, alpha=1):
    """``beta * self + alpha * (mat @ vec)``."""
    return _scaled_add(self, api.mv(mat, vec), beta, alpha)


@defcomposite("addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addr(self, vec1, vec2, beta=1, alpha=1):
    """``beta * self + alpha * outer(vec1, vec2)``."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D" if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return _scaled_add(self, api.outer(vec1, vec2), beta, alpha)


@defcomposite("addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addbmm(self, batch1, batch2, beta=1, alpha=1):
    """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``."""
    if batch1.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    return _scaled_add(self, api.bmm(batch1, batch2).sum(0), beta, alpha)


def _inplace_of(name, fn):
    def method(self, *args, **kwargs):
        from ..autograd import is_grad_enabled
        src = self.clone() if (self.requires_grad and is_grad_enabled()) else self
        res = fn(src, *args, **kwargs)
        if not _t.can_cast(res.dtype, self.dtype):
            raise RuntimeError(f"result type {res.dtype.legacy_name} can't be cast to the desired output type "
                               f"{self.dtype.legacy_name}")
        if tuple(res.shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(res.shape)}")
        return self.copy_(res)
    method.__name__ = method.__qualname__ = name
    return method


# ---------------------------------------------------------------------- matrix_power
@defcomposite("matrix_power(Tensor self, int n) -> Tensor")
def matrix_power(self, n):
    """``self`` (a square matrix or a batch of them) to the integer power ``n`` by repeated
    squaring; ``n == 0`` is the identity, ``n < 0`` inverts first."""
    _check_int("n", "matrix_power", n)
    if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{self.shape[-2] if self.ndim >= 2 else self.shape[-1] if self.ndim else 1} by "
                           f"{self.shape[-1] if self.ndim else 1} matrices" if self.ndim >= 2 else
                           f"linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if n == 0:
        # the identity written over a copy of self (torch's way): the result stays on self's
        # graph, so self's gradient is zeros rather than missing
        eye = api.eye(self.shape[-1], dtype=self.dtype, device=self.device)
        return self.clone().copy_(eye.expand(tuple(self.shape)))
    a = self
    if n < 0:
        from .registry import OPS
        a = OPS["linalg_inv"].binding(self)
        n = -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else result @ a
        n >>= 1
        if n:
            a = a @ a
    return result


# ---------------------------------------------------------------------- nn.functional at the top level
def _F():
    from ..nn import functional as F
    return F


@_export
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return _F().cosine_similarity(x1, x2, dim, eps)


@_export
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)


@_export
def pdist(input, p=2):
    return _F().pdist(input, p)


@_export
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


@_export
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


@_export
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


@_export
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


@_export
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


@_export
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


@_export
def dropout(input, p, train):
    """``torch.dropout(input, p, train)`` (all positional, unlike ``F.dropout``)."""
    return _F().dropout(input, p, train)


@_export
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


@_export
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


@_export
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """``torch.batch_norm``: PyTorch's top-level argument order (weight and bias first)."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


@_export
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """``torch.instance_norm``: PyTorch's top-level argument order."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


@_export
def detach(input):
    return input.detach()


# ---------------------------------------------------------------------- Tensor methods
@_export(method=True, function=False)
def is_nonzero(self):
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item() != 0)


@_export(method=True, function=False)
def is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


@_export(method=True, function=False)
def is_signed(self):
    return self.dtype.is_signed


@_export(method=True, function=False)
def is_inference(self):
    """Always False: ember has no separate inference-tensor kind (``inference_mode`` works like
    ``no_grad``)."""
    return False


@_export(method=True, function=False)
def get_device(self):
    """-1 for a CPU tensor, else the device index."""
    return -1 if self.device.type == "cpu" else (self.device.index or 0)


def fill_diagonal_(self, fill_value, wrap=False):
    """Write ``fill_value`` on the main diagonal (of all dims at once); for a tall matrix,
    ``wrap`` continues it every ``ncols + 1`` rows, as numpy's ``fill_diagonal``."""
    nd = self.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = tuple(self.shape)
    if nd > 2 and any(s != shape[0] for s in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    if nd == 2:
        rows, cols = shape
        if wrap and rows > cols + 1:
            flat = np.arange(0, rows * cols, cols + 1)
        else:
            flat = np.arange(min(rows, cols)) * (cols + 1)
    else:
        step = sum(int(np.prod(shape[i + 1:])) for i in range(nd))
        flat = np.arange(min(shape)) * step
    coords = np.unravel_index(flat, shape)
    idx = tuple(api.tensor(c.astype(np.int64), device=self.device) for c in coords)
    return self.index_put_(idx, api.tensor(fill_value, dtype=self.dtype, device=self.device))


_METHODS["fill_diagonal_"] = fill_diagonal_


@_export(method=True, function=False)
def sum_to_size(self, *size):
    """Sum ``self`` down to ``size`` (which must expand to ``self``'s shape)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(size)
    shape = tuple(self.shape)
    ok = len(size) <= len(shape)
    if ok:
        for s, t in zip(reversed(size), reversed(shape)):
            if s != t and s != 1:
                ok = False
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    lead = len(shape) - len(size)
    x = self
    if lead:
        x = x.sum(list(range(lead)))
    dims = [i for i, (s, t) in enumerate(zip(size, x.shape)) if s == 1 and t != 1]
    if dims:
        x = x.sum(dims, keepdim=True)
    return x


@defcomposite("masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor")
def masked_scatter(self, mask, source):
    """Where ``mask`` (broadcast with ``self``) is True, the next element of ``source`` in
    row-major order; elsewhere ``self``. The source position of each True is the running
    count of Trues, so the op needs no data-dependent shape."""
    if mask.dtype is not _t.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype.legacy_name}")
    if self.dtype is not source.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got "
                           f"{self.dtype.legacy_name} and {source.dtype.legacy_name}")
    shape = tuple(broadcast_shapes(tuple(self.shape), tuple(mask.shape)))
    m = mask.expand(tuple(shape))
    pos = m.reshape(-1).to(_t.int64).cumsum(0) - 1
    n_src = source.numel()
    if not pos._fake and not source._fake:
        need = int(pos[-1].item()) + 1 if pos.numel() else 0
        if need > n_src:
            raise RuntimeError("Number of elements of source < number of ones in mask")
    if n_src == 0:
        return self.expand(tuple(shape)).clone() if tuple(self.shape) != shape else self.clone()
    pos = api.clamp(pos, 0, n_src - 1)
    vals = source.reshape(-1).index_select(0, pos).reshape(shape)
    return api.where(m, vals, self)


def masked_scatter_(self, mask, source):
    """In-place :func:`masked_scatter`; ``self`` is not broadcast."""
    return _inplace_of("masked_scatter_", masked_scatter)(self, mask, source)


_METHODS["masked_scatter_"] = masked_scatter_


@defcomposite("renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor")
def renorm(self, p, dim, maxnorm):
    """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down to norm
    ``maxnorm`` (PyTorch's ``maxnorm / (norm + 1e-7)``)."""
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(f"renorm: expected a floating point input but got {self.dtype.legacy_name}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if self.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.ndim} dimensions")
    d = wrap_dim(dim, self.ndim)
    dims = [i for i in range(self.ndim) if i != d]
    norm = _vnorm(api.abs(self) if self.dtype.is_complex else self, p, dims, True)
    factor = api.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return self * factor.to(norm.dtype if self.dtype.is_complex else self.dtype)   # a real factor


_METHODS["renorm_"] = _inplace_of("renorm_", renorm)
_METHODS["addmv_"] = _inplace_of("addmv_", addmv)
_METHODS["addr_"] = _inplace_of("addr_", addr)
_METHODS["addbmm_"] = _inplace_of("addbmm_", addbmm)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor with the given sizes and strides (``self``'s dtype and device
    unless given)."""
    if self.__class__ not in _tf.FAST_CLASSES and \
            (r := _new_entry(new_empty_strided, locals(), (size,), {}, (list(stride),))) is not _tf.PASS:
        return r
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape")
    n = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if all(s > 0 for s in size) else 0
    from ..autograd import no_grad
    with no_grad():
        buf = self.new_empty((n,), dtype=dtype, device=device)
        out = buf.as_strided(size, stride)
    if requires_grad:
        out.requires_grad_(True)
    return out


_METHODS["new_empty_strided"] = new_empty_strided
from .. import _torch_function as _tf            # noqa: E402
from ..tensor import _new_entry                  # noqa: E402


# ---------------------------------------------------------------------- exports
api.finfo = finfo
api.iinfo = iinfo
_export.install()
