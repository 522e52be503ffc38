"""Assorted PyTorch API over existing ember ops:

* ``frexp`` (function and method; mantissa in [0.5, 1) and an int32 exponent; the mantissa's
  gradient is ``grad / 2**exponent``), ``histogram`` (``bins`` an int or a tensor of edges,
  ``range``, ``weight``, ``density``), ``gradient`` (``spacing`` a scalar, a list of scalars or
  a list of coordinate tensors; ``dim``; ``edge_order`` 1 or 2), ``index_reduce`` /
  ``index_reduce_`` (over ``scatter_reduce``);
* small functions: ``is_nonzero``, ``is_same_size``, ``is_signed``, ``typename``, ``row_stack``,
  ``empty_strided``, ``empty_permuted``, and the constants ``pi``, ``e``, ``inf``, ``nan``,
  ``newaxis``;
* Tensor methods: the legacy constructor ``new``, ``apply_`` / ``map_`` / ``map2_`` (a Python
  callable per element, on the host), and the in-place random fills ``cauchy_``,
  ``geometric_``, ``log_normal_`` (transforms of the ``_random`` op's uniform / normal draws,
  so a compiled graph draws them afresh at every call);
* sampling ops ``binomial`` and ``poisson``: kernels over ember's generator (numpy's), kept
  whole (``ember.prims.coverage.EXTERN``) as ``multinomial`` is.
"""
from __future__ import annotations

import builtins as _builtins
import math
import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta, api
from ._exports import Exports
from ._helpers import wrap_dim
from .creation import _drawn, _dt, _finish, _gen
from .more_api import _inplace_of
from .reduction import _return_type
from .registry import defop
from .._torch_function import PASS as _PASS, _ACTIVE as _TF, python_entry as _entry

_export = Exports()
_EXPORTS, _METHODS = _export.functions, _export.methods

_frexp_t = _return_type("frexp", ("mantissa", "exponent"))
_histogram_t = _return_type("histogram", ("hist", "bin_edges"))
builtins_range = _builtins.range


# ---------------------------------------------------------------------- frexp
@_export(method=True)
def frexp(input, *, out=None):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) (0, inf and NaN: themselves with exponent 0); exponent int32."""
    if out is not None:
        raise TypeError("frexp(): the out= argument is not supported by ember")
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    from ..autograd import no_grad
    with no_grad():
        x = input.detach().to(_t.float64)
        ax = api.abs(x)
        ok = api.isfinite(x) & (x != 0)
        e = api.floor(api.log2(api.where(ok, ax, 1.0))) + 1

        def scale(e):
            # two factors, so neither 2**-e1 nor 2**-(e - e1) overflows (subnormal input)
            e1 = api.floor(e / 2)
            return api.exp2(-e1), api.exp2(e1 - e)

        # log2 rounds near powers of two: move the exponent so |x| / 2**e lands in [0.5, 1)
        s1, s2 = scale(e)
        e = api.where(ok & (ax * s1 * s2 >= 1.0), e + 1, e)
        s1, s2 = scale(e)
        e = api.where(ok & (ax * s1 * s2 < 0.5), e - 1, e)
        e = api.where(ok, e, 0.0)
        s1, s2 = scale(e)
        s1, s2 = s1.to(input.dtype), s2.to(input.dtype)
        exponent = e.to(_t.int32)
    return _frexp_t(input * s1 * s2, exponent)


# ---------------------------------------------------------------------- histogram
def _torch_linspace_f(start, end, steps, np_dt):
    """PyTorch's CPU linspace in the output dtype: ``start + i * step`` for the first half,
    ``end - (steps - 1 - i) * step`` for the second, computed in that dtype."""
    start, end = np_dt.type(start), np_dt.type(end)
    if steps == 1:
        return np.array([start], dtype=np_dt)
    step = np_dt.type((end - start) / np_dt.type(steps - 1))
    i = np.arange(steps)
    half = steps // 2
    lo = start + step * i.astype(np_dt)
    hi = end - step * (steps - 1 - i).astype(np_dt)
    return np.where(i < half, lo, hi).astype(np_dt)


@_export(method=True)
def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """``(hist, bin_edges)``: ``bins`` equal-width bins over ``range`` (the input's min and max
    by default; an empty range widened by 0.5 each side) or the edges in the tensor ``bins``.
    Elements outside the edges (and NaN) are skipped; the last bin includes its right edge.
    ``weight`` (input's shape) weighs each element; ``density`` divides by the total and the
    bin widths. Not differentiable."""
    if out is not None:
        raise TypeError("histogram(): the out= argument is not supported by ember")
    if not input.dtype.is_floating_point or input.dtype.name in ("float16", "bfloat16"):
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{input.dtype.legacy_name[:-6]}'")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogram: if weight tensor is provided it should have the same shape as the "
                           "input tensor excluding its innermost dimension")
    if weight is not None and weight.dtype is not input.dtype:
        raise RuntimeError("torch.histogram: if weight tensor is provided, input tensor and weight tensor "
                           "should have the same dtype")
    x = input.detach().reshape(-1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): argument 'range' is not allowed with a tensor of bins")
        if bins.ndim != 1:
            raise RuntimeError(f"torch.histogram: bins tensor should have one dimension, but got {bins.ndim} "
                               f"dimensions")
        if bins.dtype is not input.dtype:
            raise RuntimeError("torch.histogram: input tensor and bins tensors should have the same dtype")
        if bins.numel() < 1:
            raise RuntimeError("torch.histogram: bins tensor should have at least 1 element, but got 0 elements")
        edges = bins.detach().clone()
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral):
            raise TypeError(f"histogram(): argument 'bins' must be int or Tensor, not {type(bins).__name__}")
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif x.numel():
            lo, hi = float(x.min().item()), float(x.max().item())
        else:
            lo = hi = 0.0
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} max {hi} for "
                               f"dimension 0")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        arr = _torch_linspace_f(lo, hi, int(bins) + 1, np.dtype(input.dtype.np))
        edges = api.tensor(arr, dtype=input.dtype, device=input.device)
    nb = edges.numel() - 1
    if nb < 1:
        z = api.zeros((0,), dtype=input.dtype, device=input.device)
        return _histogram_t(z, edges)
    idx = api.searchsorted(edges, x, right=True) - 1
    valid = (x >= edges[0]) & (x <= edges[-1])
    idx = api.clamp(idx, 0, nb - 1)
    w = weight.detach().reshape(-1) if weight is not None else api.ones_like(x)
    w = api.where(valid, w, api.zeros_like(w))
    hist = api.zeros((nb,), dtype=input.dtype, device=input.device).index_add(0, idx, w)
    if density:
        hist = hist / hist.sum() / (edges[1:] - edges[:-1])
    return _histogram_t(hist, edges)


# ---------------------------------------------------------------------- gradient
def _sl(t, d, start, end=None):
    idx = [slice(None)] * t.ndim
    idx[d] = slice(start, end)
    return t[tuple(idx)]


@_export
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Estimates of the derivative of ``input`` along each of ``dim`` (all dims by default) by
    central differences inside and one-sided differences of ``edge_order`` (1 or 2) at the ends,
    as ``numpy.gradient``. ``spacing``: one scalar for every dim, one scalar per dim, or one 1-D
    tensor of sample coordinates per dim. Returns a tuple, one tensor per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(builtins_range(input.ndim))
    elif isinstance(dim, numbers.Integral):
        dims = [int(dim)]
    else:
        dims = [int(d) for d in dim]
    dims = [wrap_dim(d, input.ndim) for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError("dim appears multiple times in the list of dims")
    if isinstance(spacing, (numbers.Number, Tensor)) and not (isinstance(spacing, Tensor) and spacing.ndim > 0):
        sp = [spacing.item() if isinstance(spacing, Tensor) else spacing] * len(dims)
    else:
        sp = list(spacing)
        if len(sp) != len(dims):
            if dim is None:
                raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of "
                                   f"length equal to 'self.dim() = {input.ndim}', since dim argument was not "
                                   f"given, but got a list of length {len(sp)}")
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and "
                               f"dim arguments to have the same length, but got a spacing argument of length "
                               f"{len(sp)} and a dim argument of length {len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    res = []
    for d, h in zip(dims, sp):
        if isinstance(h, Tensor) and h.ndim == 0:
            h = h.item()
        if isinstance(h, Tensor):
            res.append(_gradient_coords(input, h, d, edge_order))
        else:
            res.append(_gradient_uniform(input, h, d, edge_order))
    return tuple(res)


def _gradient_uniform(f, h, d, edge_order):
    center = (_sl(f, d, 2) - _sl(f, d, 0, -2)) / h
    if edge_order == 1:
        pre = (_sl(f, d, 1, 2) - _sl(f, d, 0, 1)) / h
        app = (_sl(f, d, -1) - _sl(f, d, -2, -1)) / h
    else:
        pre = (_sl(f, d, 0, 1) * -1.5 + _sl(f, d, 1, 2) * 2 - _sl(f, d, 2, 3) * 0.5) / h
        app = (_sl(f, d, -3, -2) * 0.5 + _sl(f, d, -2, -1) * -2 + _sl(f, d, -1) * 1.5) / h
    return api.cat([pre, center / 2, app], d)


def _gradient_coords(f, x, d, edge_order):
    if x.ndim != 1 or x.shape[0] != f.shape[d]:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device, and to have size "
                           f"{f.shape[d]} along dim {d}")
    shape = [1] * f.ndim
    shape[d] = -1
    dx = x[1:] - x[:-1]
    dx1, dx2 = dx[:-1], dx[1:]
    a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
    b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
    c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
    center = a * _sl(f, d, 0, -2) + b * _sl(f, d, 1, -1) + c * _sl(f, d, 2)
    if edge_order == 1:
        pre = (_sl(f, d, 1, 2) - _sl(f, d, 0, 1)) / dx[0]
        app = (_sl(f, d, -1) - _sl(f, d, -2, -1)) / dx[-1]
    else:
        a = -(2.0 * dx[0] + dx[1]) / (dx[0] * (dx[0] + dx[1]))
        b = (dx[0] + dx[1]) / (dx[0] * dx[1])
        c = (-dx[0]) / (dx[1] * (dx[0] + dx[1]))
        pre = a * _sl(f, d, 0, 1) + b * _sl(f, d, 1, 2) + c * _sl(f, d, 2, 3)
        a = dx[-1] / (dx[-2] * (dx[-1] + dx[-2]))
        b = -(dx[-1] + dx[-2]) / (dx[-1] * dx[-2])
        c = (2 * dx[-1] + dx[-2]) / (dx[-1] * (dx[-1] + dx[-2]))
        app = a * _sl(f, d, -3, -2) + b * _sl(f, d, -2, -1) + c * _sl(f, d, -1)
    return api.cat([pre, center, app], d)


# ---------------------------------------------------------------------- index_reduce
_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


@_export(method=True)
def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """Reduce (``prod``, ``mean``, ``amax``, ``amin``) the slices of ``source`` along ``dim`` into
    the slices of ``input`` that ``index`` names; with ``include_self`` the original values take
    part. Over ``scatter_reduce`` (so its gradients)."""
    if out is not None:
        raise TypeError("index_reduce(): the out= argument is not supported by ember")
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                           f"{reduce}.")
    if index.ndim > 1:
        raise RuntimeError("index_reduce_(): Index is supposed to be a vector")
    if index.dtype not in (_t.int64, _t.int32):
        raise RuntimeError("index_reduce_(): Expected dtype int32/int64 for index")
    if input.dtype is not source.dtype:
        raise RuntimeError(f"index_reduce_(): self ({input.dtype.legacy_name}) and source "
                           f"({source.dtype.legacy_name}) must have the same scalar type")
    if input.ndim != source.ndim and not (input.ndim <= 1 and source.ndim <= 1):
        raise RuntimeError("index_reduce_(): Index should have dimension 1 or 0 (got "
                           f"{index.ndim}) and self and source should have the same number of dimensions")
    if input.ndim == 0:
        return index_reduce(input.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce,
                            include_self=include_self).reshape(())
    d = wrap_dim(dim, input.ndim)
    src = source.reshape(-1) if source.ndim == 0 else source
    index = index.reshape(-1).to(_t.int64)
    if index.numel() != src.shape[d]:
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim) ({src.shape[d]})")
    for i in builtins_range(input.ndim):
        if i != d and input.shape[i] != src.shape[i]:
            raise RuntimeError(f"index_reduce_(): self and source must have the same size at dimension {i}; "
                               f"self has size {input.shape[i]}, source has size {src.shape[i]}")
    shape = [1] * src.ndim
    shape[d] = -1
    idx = index.reshape(shape).expand(tuple(src.shape))
    return input.scatter_reduce(d, idx, src, reduce, include_self=include_self)


_METHODS["index_reduce_"] = _inplace_of("index_reduce_", index_reduce)


# ---------------------------------------------------------------------- small functions
@_export
def is_nonzero(input):
    """``input.is_nonzero()``: the truth of a one-element tensor."""
    return input.is_nonzero()


@_export
def is_same_size(input, other):
    """``input.is_same_size(other)``."""
    return input.is_same_size(other)


@_export
def is_signed(input):
    """``input.is_signed()``: whether the dtype is signed."""
    return input.is_signed()


@_export
def typename(obj):
    """A tensor's type string (``t.type()``), else the object's module-qualified name."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


@_export
def row_stack(tensors, *, out=None):
    """An alias of ``vstack``."""
    return api.vstack(tensors, out=out)


def _size_of(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


@_export
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialised tensor with the given sizes and strides."""
    if _TF[0] and (_r := _entry(empty_strided, locals())) is not _PASS:
        return _r
    base = api.empty((0,), dtype=_dt(dtype), device=device)
    from .._pinned import for_factory
    return for_factory(base.new_empty_strided(tuple(size), tuple(stride), requires_grad=requires_grad), pin_memory)


@_export
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialised tensor of ``size`` whose memory holds its dims in the order
    ``physical_layout`` (outermost first)."""
    if _TF[0] and (_r := _entry(empty_permuted, locals())) is not _PASS:
        return _r
    size, perm = tuple(size), tuple(int(p) for p in physical_layout)
    if sorted(perm) != list(builtins_range(len(size))):
        raise RuntimeError(f"Dimension mismatch or not a permutation: size {list(size)} physical_layout "
                           f"{list(perm)}")
    phys = api.empty(tuple(size[p] for p in perm), dtype=_dt(dtype), device=device)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    from .._pinned import for_factory
    return for_factory(_finish(phys.permute(tuple(inv)), requires_grad), pin_memory)


# ---------------------------------------------------------------------- Tensor methods
def new(self, *args, device=None):
    """The legacy constructor: ``t.new()`` (empty), ``t.new(2, 3)`` / ``t.new(ember.Size(...))``
    (uninitialised), ``t.new(data)`` (a list, tuple or array: a tensor of ``t``'s dtype),
    ``t.new(other_tensor)`` (``other_tensor`` itself); dtype and device of ``t``."""
    dev = device if device is not None else self.device
    if not args:
        return api.empty((0,), dtype=self.dtype, device=dev)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if a.dtype is not self.dtype:
                raise TypeError(f"expected {self.dtype.legacy_name} (got {a.dtype.legacy_name})")
            return a
        if isinstance(a, _t.Size):
            return api.empty(tuple(a), dtype=self.dtype, device=dev)
        if isinstance(a, (list, tuple, np.ndarray)):
            return api.tensor(a, dtype=self.dtype, device=dev)
    for a in args:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral):
            raise TypeError(f"new(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(a).__name__}")
    return api.empty(tuple(int(a) for a in args), dtype=self.dtype, device=dev)


def _host_apply(self, fn, *others):
    if self.device.type != "cpu":
        raise TypeError("apply_ is only implemented on CPU tensors")
    from ..autograd import no_grad
    vals = [self.detach().numpy()] + [np.broadcast_to(o.detach().numpy(), tuple(self.shape)) for o in others]
    flat = [v.reshape(-1).tolist() for v in vals]
    res = np.array([fn(*xs) for xs in zip(*flat)], dtype=self.dtype.np).reshape(tuple(self.shape))
    with no_grad():
        self.copy_(api.tensor(res, dtype=self.dtype))
    return self


def apply_(self, callable):
    """Replace each element ``x`` with ``callable(x)`` (host, Python floats/ints; slow)."""
    return _host_apply(self, callable)


def map_(self, tensor, callable):
    """Replace each element ``x`` with ``callable(x, y)``, ``y`` the element of ``tensor``
    (broadcast to ``self``)."""
    return _host_apply(self, callable, tensor)


def map2_(self, x, y, callable):
    """Replace each element ``s`` with ``callable(s, x_i, y_i)`` (``x``, ``y`` broadcast)."""
    return _host_apply(self, callable, x, y)


_CPP_TYPE = {"Long": "long int", "Int": "int", "Short": "short int", "Char": "signed char", "Byte": "unsigned char",
             "Bool": "bool", "ComplexFloat": "c10::complex<float>", "ComplexDouble": "c10::complex<double>",
             "ComplexHalf": "c10::complex<c10::Half>", "UInt16": "unsigned short", "UInt32": "unsigned int",
             "UInt64": "unsigned long"}


def _fill_from_mt(self, kind, a, b, generator):
    from .sampling import random_mt_fill
    return random_mt_fill(self, kind, a, b, generator)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with PyTorch's Cauchy draws, the same numbers for the same seed: a double uniform ``u``
    per value, ``median + sigma * tan(pi * (u - 1/2))`` (``ember._mt19937.cauchy``)."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={float(sigma):g}")
    if not self.dtype.is_floating_point:
        name = self.dtype.legacy_name
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {_CPP_TYPE.get(name, name)}")
    return _fill_from_mt(self, "cauchy", median, sigma, generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with PyTorch's log-normal draws, the same numbers for the same seed: ``exp`` of its
    scalar normal path (``ember._mt19937.log_normal``)."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={float(std):g}")
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f'"log_normal_cpu" not implemented for \'{self.dtype.legacy_name}\'')
    return _fill_from_mt(self, "log_normal", mean, std, generator)


def geometric_(self, p, *, generator=None):
    """Fill with PyTorch's geometric draws (the number of Bernoulli(p) trials up to the first
    success, 1, 2, ...), the same numbers for the same seed: ``ceil(log(u) / log1p(-p))`` of a
    double uniform ``u`` (``ember._mt19937.geometric``)."""
    if not (0 < p < 1):
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={float(p):g}")
    if self.dtype.is_complex or self.dtype.legacy_name == "Bool":
        raise NotImplementedError(f'"geometric_cpu" not implemented for \'{self.dtype.legacy_name}\'')
    return _fill_from_mt(self, "geometric", p, 0.0, generator)


for _name in ("new", "apply_", "map_", "map2_", "cauchy_", "log_normal_", "geometric_"):
    _METHODS[_name] = globals()[_name]


# ---------------------------------------------------------------------- binomial / poisson
def _to_host(a):
    return np.asarray(a.get() if hasattr(a, "get") else a)


@defop("binomial(Tensor count, Tensor prob, Generator? generator=None) -> Tensor", method=False, function=False,
       tags=("random", "nondeterministic", "nondifferentiable"), save=())
def _binomial_op(xp, count, prob, generator=None):
    """PyTorch's CPU binomial sampler (BTRS / geometric inversion) over ember's Mersenne Twister:
    the same numbers for the same seed (``ember._mt19937.binomial``)."""
    from .. import _mt19937 as _mt
    c, p = np.broadcast_arrays(_to_host(count), _to_host(prob).astype(count.dtype))
    out = _mt.binomial(_gen(generator)._mt, np.ascontiguousarray(c), np.ascontiguousarray(p))
    return xp.asarray(out.astype(count.dtype))


@_binomial_op.meta_fn
def _binomial_meta(count, prob, generator=None):
    return _meta.out(tuple(np.broadcast_shapes(tuple(count.shape), tuple(prob.shape))), count.dtype)


@defop("poisson(Tensor self, Generator? generator=None) -> Tensor", method=False, function=False,
       tags=("random", "nondeterministic"), save=())
def _poisson_op(xp, rates, generator=None):
    """PyTorch's CPU Poisson sampler (transformed rejection for rates >= 10, products of uniforms
    below) over ember's Mersenne Twister: the same numbers for the same seed."""
    from .. import _mt19937 as _mt
    lam = _to_host(rates)
    if lam.size and not (lam >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    out = _mt.poisson(_gen(generator)._mt, np.ascontiguousarray(lam))
    if rates.dtype.itemsize < 4:
        out = out.astype(np.float32)
    return xp.asarray(out.astype(rates.dtype))


@_poisson_op.meta_fn
def _poisson_meta(rates, generator=None):
    return _meta.out(tuple(rates.shape), rates.dtype)


@_poisson_op.derivative(save=())
def _poisson_bw(ctx, g):
    return (g * 0,)


@_export
def binomial(count, prob, generator=None):
    """Draws from Binomial(``count``, ``prob``) elementwise (floating tensors, broadcast);
    NaN where the parameters are invalid."""
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {count.dtype.legacy_name}")
    if count.dtype.itemsize < 4:
        raise NotImplementedError(f"\"binomial_cpu\" not implemented for '{count.dtype.legacy_name}'")
    if prob.dtype != count.dtype:
        raise RuntimeError(f"Found dtype {prob.dtype.legacy_name} but expected {count.dtype.legacy_name}")
    return _binomial_op.binding(count.detach(), prob.detach(), generator)


@_export
def poisson(input, generator=None):
    """Draws from Poisson(``input``) elementwise (a floating tensor of rates); its gradient is
    zero, as PyTorch's."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{input.dtype.legacy_name}'")
    return _poisson_op.binding(input, generator)


# ---------------------------------------------------------------------- exports
api.pi = math.pi
api.e = math.e
api.inf = math.inf
api.nan = math.nan
api.newaxis = None
_export.install()
