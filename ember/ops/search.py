"""Searching, counting and order statistics: searchsorted, bucketize, isin, median, kthvalue, mode, ...

Most are composites over existing ops (so autograd, fake tensors and the compiler get them
for free); ops whose output shape depends on the data (unique, bincount) are kernels tagged
``data_dependent`` and listed in ``ember.prims.coverage.EXTERN``.

Design notes:

* ``searchsorted``/``bucketize``/``isin`` compare every value with every boundary (an
  ``[..., K, M]`` boolean block reduced over the last dim) instead of a binary search: that
  is plain pointwise + reduction work, so it traces, fakes and compiles, at the price of
  ``K * M`` temporary memory. Eagerly, searchsorted replays PyTorch's binary search instead
  (vectorised over the values), which is also what decides where a NaN boundary puts a value.
* order statistics (``median``, ``kthvalue``) pick a position of a stable ``sort`` (NaN sorts
  last) and gather the value from the input, so the gradient goes to the chosen element.
  Which of several tied elements is reported is unspecified in PyTorch (its CPU kernel uses
  a selection algorithm); ember reports the one a stable sort puts at that rank.
* cumulative ops (``cummax``, ``cummin``, ``logcumsumexp``) are log-depth scans
  (Hillis-Steele: combine each element with the one ``1, 2, 4, ...`` places before it), so
  they need no loop over the dim and ``logcumsumexp`` stays exact where a single shift by the
  slice maximum would underflow early terms.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make
from . import api
from ._helpers import wrap_dim, wrap_dims
from .registry import defcomposite, defop
from .reduction import _maxmin_entry, _overridden, _return_type, sort_keys

_median_t = _return_type("median")
_nanmedian_t = _return_type("nanmedian")
_kthvalue_t = _return_type("kthvalue")
_mode_t = _return_type("mode")
_cummax_t = _return_type("cummax")
_cummin_t = _return_type("cummin")


def _not_impl(kernel, dt):
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt.legacy_name}\'')


# ---------------------------------------------------------------------- searchsorted / bucketize
# above this many (value, boundary) pairs an eager call searches instead of comparing all pairs
_ALL_PAIRS_MAX = 1 << 16


def _eager_numpy(*tensors):
    """Whether these tensors hold real numpy data and no mode (tracing, fake tensors) is active:
    then an op may compute its answer directly instead of in ember ops."""
    from .._state import STATE
    return not STATE.modes and all(type(t._data) is np.ndarray for t in tensors)


def _count_below(seq, values, right):
    """For each value, its insertion point in ``seq`` (last dim) as PyTorch's CPU kernel finds it:
    a binary search that moves right while ``!(mid >= value)`` (``!(mid > value)`` when
    ``right``). On a sequence sorted in the comparison sense that is the count of entries below
    the value (strictly, or ``<=``); a NaN value compares false everywhere and lands at the end.
    A NaN boundary (sorted last) also compares false, so the search steps over it as if it were
    below the value, and where it lands depends on the search's path: only replaying that path
    gives PyTorch's answer ([1, 2, 2, 3, nan] puts 2 at 5 with right=True, not 3)."""
    dt = _compare_dtype(seq, values)
    if isinstance(values, Tensor) and _eager_numpy(seq, values):
        return _make(_binary_search_np(seq.to(dt)._data, values.to(dt)._data, right), values.device, _t.int64)
    if not isinstance(values, Tensor):
        values = api.full((), values, dtype=dt, device=seq.device)
        if _eager_numpy(seq):
            return _make(_binary_search_np(seq.to(dt)._data, values._data, right), seq.device, _t.int64)
    return _binary_search(seq.to(dt), values.to(dt), right)


def _compare_dtype(seq, values):
    """The dtype the boundaries and values are compared in: PyTorch's promotion of the two (a
    0-d tensor or a number only lifts the category: 2.5 against int64 boundaries compares as
    float, 16777217 against float32 ones as float32's 16777216)."""
    dims, zero_dims, scalars = [], [], []
    for x in (seq, values):
        if isinstance(x, Tensor):
            (dims if x.ndim else zero_dims).append(x.dtype)
        else:
            scalars.append(x)
    return _t.result_type_from(dims, zero_dims, scalars)


def _bisect_steps(m):
    """How many halvings a binary search over ``m`` entries takes at most."""
    return int(m).bit_length()


def _binary_search_np(s, v, right):
    """``_count_below`` on numpy arrays: every value's search advanced one halving at a time
    (all values at once, so log2(m) vector steps rather than a loop over the values). ``s`` is
    1-D, or has ``v``'s leading dims."""
    m = s.shape[-1]
    start = np.zeros(v.shape, dtype=np.int64)
    end = np.full(v.shape, m, dtype=np.int64)
    if m == 0:
        return start
    flat = s.ndim == 1
    if not flat and v.ndim == 0:
        raise AssertionError("a 0-d value with batched boundaries")
    with np.errstate(invalid="ignore"):
        for _ in range(_bisect_steps(m)):
            active = start < end
            mid = start + ((end - start) >> 1)
            at = np.minimum(mid, m - 1)
            mv = s[at] if flat else np.take_along_axis(s, at, axis=-1)
            go_right = ~(mv > v) if right else ~(mv >= v)
            start = np.where(active & go_right, mid + 1, start)
            end = np.where(active & ~go_right, mid, end)
    return start


def _binary_search(seq, values, right):
    """``_count_below`` in ember ops (traced, fake, compiled; no loop over the sequence's
    length, which may be symbolic), exact for a sequence sorted with its NaNs last, as the
    binary search's path can be told without replaying it. ``c`` boundaries compare below the
    value, ``p`` are not NaN: the search's predicate holds on [0, c), fails on [c, p) and holds
    again on the NaNs [p, m). Until it first fails, the search moves right, probing at
    distances H, H >> 1, H >> 2, ..., 1 from the end (H = ceil(m / 2)); once it probes inside
    [c, p) it ends at c, and if none of those probes lands there (c == p among them) it ends
    at m. So: c if some H >> k lies in [m - p + 1, m - c], else m."""
    m = seq.shape[-1]
    v = values.unsqueeze(-1)
    s = seq if seq.ndim == 1 else seq.unsqueeze(-2)
    c = ((s <= v) if right else (s < v)).sum(-1)
    if not values.dtype.is_floating_point:
        return c
    p = api.logical_not(api.isnan(seq)).sum(-1, keepdim=seq.ndim > 1)
    pow2 = api.tensor([1 << k for k in range(63)], dtype=_t.int64, device=values.device)
    probes = api.floor_divide(api.zeros_like(pow2) + (m + 1) // 2, pow2)   # H >> k
    lo = (m + 1 - p).unsqueeze(-1) if seq.ndim > 1 else m + 1 - p
    hi = (m - c).unsqueeze(-1)
    lands = ((probes >= lo) & (probes <= hi)).any(-1)
    return api.where(api.isnan(values) | (c >= p) | api.logical_not(lands), m, c)


@defcomposite("searchsorted(Tensor sorted_sequence, Tensor|Scalar self, *, bool out_int32=False, bool right=False, "
              "str? side=None, Tensor? sorter=None) -> Tensor", method=False)
def searchsorted(sorted_sequence, self, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``self`` in the last dim of ``sorted_sequence`` (1-D, or with leading dims
    matching ``self``'s), as torch.searchsorted: ``right``/``side='right'`` puts a value after equal
    entries; ``sorter`` gives the permutation that sorts an unsorted sequence. A sequence holding
    NaN is not sorted in the comparison sense: PyTorch's answer then depends on its binary search's
    path, which ember follows (``_count_below``)."""
    name = "torch.searchsorted()"
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{name}: side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(f"{name}: side and right can't be set to opposites, got side of left while right "
                               f"was True")
        right = side == "right"
    seq = sorted_sequence
    if seq.ndim == 0:
        raise RuntimeError(f"{name}: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"[] and input value tensor {_shape_str(self)}")
    if isinstance(self, Tensor):
        if seq.ndim != 1 and (self.ndim != seq.ndim or tuple(self.shape[:-1]) != tuple(seq.shape[:-1])):
            raise RuntimeError(f"{name}: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                               f"boundaries tensor and input value tensor must match, but we got boundaries "
                               f"tensor {list(seq.shape)} and input value tensor {list(self.shape)}")
        if self.dtype is _t.bool_ or seq.dtype is _t.bool_:
            raise RuntimeError(f"{name}: boolean tensors are not supported (got {seq.dtype} boundaries and "
                               f"{self.dtype} values)")
    elif seq.ndim != 1:
        raise RuntimeError(f"{name}: input value can be a scalar only when boundaries tensor dimension is 1, but "
                           f"we got boundaries tensor dim({seq.ndim}) and input value's dim(0) numel(1)")
    if sorter is not None:
        if sorter.dtype is not _t.int64:
            raise RuntimeError(f"{name}: sorter must be a tensor of long dtype but got {sorter.dtype}")
        if tuple(sorter.shape) != tuple(seq.shape):
            raise RuntimeError(f"{name}: boundary and sorter must have the same size, but got boundary tensor "
                               f"{list(seq.shape)}and got sorter tensor {list(sorter.shape)}")
        seq = api.gather(seq, -1, sorter)
    out = _count_below(seq, self, right)
    return out.to(_t.int32) if out_int32 else out


def _shape_str(x):
    return list(x.shape) if isinstance(x, Tensor) else "[]"


@defcomposite("bucketize(Tensor|Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
              method=False)
def bucketize(self, boundaries, out_int32=False, right=False):
    """Bucket index of each value given 1-D sorted ``boundaries``: with ``right=False`` bucket i holds
    ``boundaries[i-1] < x <= boundaries[i]`` (searchsorted's left side), ``right=True`` flips the
    inequalities."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted.composite(boundaries, self, out_int32, right, None, None)


# ---------------------------------------------------------------------- isin / count_nonzero
@defcomposite("isin(Tensor|Scalar elements, Tensor|Scalar test_elements, *, bool assume_unique=False, "
              "bool invert=False) -> Tensor", method=False)
def isin(elements, test_elements, assume_unique=False, invert=False):
    """Whether each of ``elements`` equals some entry of ``test_elements`` (its shape is ignored);
    NaN is in nothing. ``assume_unique`` is accepted for compatibility: the all-pairs comparison
    needs no uniqueness."""
    e_t, t_t = isinstance(elements, Tensor), isinstance(test_elements, Tensor)
    if not e_t and not t_t:
        raise TypeError("isin(): at least one of elements and test_elements must be a Tensor")
    if not e_t:
        found = (test_elements == elements).any()
    elif not t_t:
        found = elements == test_elements
    elif _eager_numpy(elements, test_elements) and elements.numel() * test_elements.numel() > _ALL_PAIRS_MAX:
        # eager and large: numpy's sort-based isin (same answers, NaN in nothing), not the
        # all-pairs comparison's elements x test_elements booleans
        from ._helpers import result_dtype
        dt = result_dtype(elements._data, test_elements._data)
        found = _make(np.isin(elements._data.astype(dt.np, copy=False), test_elements._data.astype(dt.np, copy=False)),
                      elements.device, _t.bool_)
    else:
        found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    return api.logical_not(found) if invert else found


@defcomposite("count_nonzero(Tensor self, int[]? dim=None) -> Tensor")
def count_nonzero(self, dim=None):
    """Number of nonzero entries (over ``dim``, or everything), as int64; NaN counts as nonzero."""
    if dim is not None:
        dim = list(wrap_dims(dim, self.ndim))
    return (self != 0).sum(dim)


# ---------------------------------------------------------------------- median / nanmedian / kthvalue
def _check_order_dtype(kernel, x):
    if x.dtype is _t.bool_ or x.dtype.is_complex:
        raise _not_impl(kernel, x.dtype)


def _rank_pick(self, d, rank, keepdim):
    """(values, indices) of the element a stable sort puts at ``rank`` (an int64 tensor, keepdim
    shape) along ``d``; values are gathered from ``self`` so the gradient reaches that element."""
    idx = api.gather(api.argsort(self, d), d, rank)
    vals = api.gather(self, d, idx)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx


def _median_rank(self, d, ignore_nan):
    """The sorted position of the lower median along ``d`` (keepdim shape). NaN sorts last: for
    ``median`` a slice holding one is reported as NaN (its first NaN's position); ``nanmedian``
    takes the median of the other values (position 0, a NaN, when there are none)."""
    n = self.shape[d]
    shape = list(self.shape)
    shape[d] = 1
    if not self.dtype.is_floating_point:
        return api.full(shape, (n - 1) // 2, dtype=_t.int64, device=self.device)
    valid = api.logical_not(api.isnan(self)).sum(d, keepdim=True)
    if ignore_nan:
        return api.where(valid > 0, api.floor_divide(valid - 1, 2), 0)
    return api.where(valid < n, valid, (n - 1) // 2)


def _median_dim_impl(name, self, dim, keepdim, ignore_nan):
    _check_order_dtype(f"{name}_cpu" if name == "median" else "nanmedian_cpu", self)
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return self.clone(), api.zeros((), dtype=_t.int64, device=self.device)
    if self.shape[d] == 0:
        if self.numel() == 0 and any(s == 0 for i, s in enumerate(self.shape) if i != d):
            shape = [s for i, s in enumerate(self.shape) if i != d or keepdim]
            if keepdim:
                shape[d] = 1
            return (api.empty(shape, dtype=self.dtype, device=self.device),
                    api.empty(shape, dtype=_t.int64, device=self.device))
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    return _rank_pick(self, d, _median_rank(self, d, ignore_nan), keepdim)


@defcomposite("median_dim(Tensor self, int dim, bool keepdim=False) -> Tensor, Tensor", function=False,
              method=False)
def _median_dim(self, dim, keepdim=False):
    """Lower median along ``dim`` and its index; a slice holding NaN gives NaN."""
    return _median_dim_impl("median", self, dim, keepdim, False)


@defcomposite("nanmedian_dim(Tensor self, int dim, bool keepdim=False) -> Tensor, Tensor", function=False,
              method=False)
def _nanmedian_dim(self, dim, keepdim=False):
    """Lower median of the non-NaN values along ``dim`` and its index."""
    return _median_dim_impl("nanmedian", self, dim, keepdim, True)


def _median_all_impl(name, self, ignore_nan):
    _check_order_dtype(f"{name}_cpu" if name == "median" else "nanmedian_cpu", self)
    flat = self.reshape(-1)
    if flat.numel() == 0:
        if not self.dtype.is_floating_point:
            raise RuntimeError(f"{name}(): an empty {self.dtype.legacy_name} tensor has no median (its NaN "
                               f"result needs a floating dtype)")
        # + flat.sum() (0): the NaN stays connected to self, whose gradient is then empty (as
        # PyTorch's), instead of a result that does not require grad
        return api.full((), float("nan"), dtype=self.dtype, device=self.device) + flat.sum()
    v = _median_dim_impl(name, flat, 0, False, ignore_nan)[0]
    if not self.dtype.is_floating_point:
        return v
    # PyTorch splits the gradient of a whole-tensor median evenly among the elements equal to it
    # (the NaNs, when the result is NaN). v + sum_{mask}(x - v) / count is v exactly (every masked
    # x - v is 0, or NaN when v is) and its derivative is mask / count: v's own path cancels.
    # An infinite v would make x - v NaN (inf - inf): there the mean of the masked elements
    # (all equal to v, so exactly v) carries the same gradient mask / count instead.
    mask = (flat == v) | (api.isnan(flat) & api.isnan(v))
    count = mask.sum()
    inf = api.isinf(v)
    split = api.where(mask, api.where(inf, flat, flat - v), 0).sum() / count
    return api.where(inf, split, v + split)


@defcomposite("median(Tensor self) -> Tensor", function=False, method=False)
def _median_all(self):
    """Lower median of all elements (NaN if any is NaN, NaN for an empty tensor)."""
    return _median_all_impl("median", self, False)


@defcomposite("nanmedian(Tensor self) -> Tensor", function=False, method=False)
def _nanmedian_all(self):
    """Lower median of all non-NaN elements (NaN when there are none)."""
    return _median_all_impl("nanmedian", self, True)


median = _maxmin_entry("median", _median_all, _median_dim, _median_t, full_doc=" (lower median of all elements)")
nanmedian = _maxmin_entry("nanmedian", _nanmedian_all, _nanmedian_dim, _nanmedian_t,
                          full_doc=" (lower median of the non-NaN elements)")


@defcomposite("kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> Tensor, Tensor", function=False,
              method=False)
def _kthvalue(self, k, dim=-1, keepdim=False):
    """The ``k``-th smallest value (1-based) along ``dim`` and its index; NaN counts as the largest."""
    _check_order_dtype("kthvalue_cpu", self)
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d] if self.ndim else 1
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"kthvalue(): argument 'k' must be int, not {type(k).__name__}")
    if not 1 <= k <= n and not (self.numel() == 0 and n > 0):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if self.ndim == 0:
        return self.clone(), api.zeros((), dtype=_t.int64, device=self.device)
    shape = list(self.shape)
    shape[d] = 1
    if self.numel() == 0:
        shape = shape if keepdim else [s for i, s in enumerate(shape) if i != d]
        return (api.empty(shape, dtype=self.dtype, device=self.device),
                api.empty(shape, dtype=_t.int64, device=self.device))
    return _rank_pick(self, d, api.full(shape, k - 1, dtype=_t.int64, device=self.device), keepdim)


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """``kthvalue(input, k, dim=-1, keepdim=False) -> (values, indices)``: the k-th smallest along dim."""
    r = _overridden(kthvalue, (input, k), {kk: v for kk, v in (("dim", dim), ("keepdim", keepdim))
                                           if v not in (-1, False)})
    if r is not NotImplemented:
        return r
    if out is not None:
        raise TypeError("kthvalue(): the out= argument is not supported by ember")
    return _kthvalue_t(*_kthvalue.binding(input, k, dim, keepdim))


# ---------------------------------------------------------------------- mode
@defcomposite("mode(Tensor self, int dim=-1, bool keepdim=False) -> Tensor, Tensor", function=False, method=False)
def _mode(self, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` and an index of it.

    A stable ``sort`` puts equal values in runs (in input order within a run); each run's length
    is read at its last element, and the first longest run wins, so among equally frequent values
    the smallest is reported, at its last occurrence. That is what PyTorch's CPU kernel reports
    for slices of up to 16 elements (as observed with torch 2.13); for longer slices its index
    is some occurrence of the value. NaN equals nothing, so every NaN is a run of length 1 sorted
    after all numbers: a NaN is the mode only of an all-NaN slice (PyTorch's answer for a slice
    holding NaN depends on where its comparison sort happens to leave the NaNs). Values are
    gathered from ``self`` at the index, so the gradient reaches that element (as median's).
    """
    if self.dtype.is_complex:
        raise _not_impl("mode_cpu", self.dtype)
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return self.clone(), api.zeros((), dtype=_t.int64, device=self.device)
    n = self.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    if self.numel() == 0:
        shape = [1 if i == d else s for i, s in enumerate(self.shape) if i != d or keepdim]
        return (api.empty(shape, dtype=self.dtype, device=self.device),
                api.empty(shape, dtype=_t.int64, device=self.device))
    x = self.to(_t.uint8) if self.dtype is _t.bool_ else self
    order = api.argsort(x, d)
    s = api.gather(x, d, order)
    edge = [1 if i == d else k for i, k in enumerate(x.shape)]
    yes = api.full(edge, True, dtype=_t.bool_, device=x.device)
    # changes[i]: sorted element i + 1 starts a new run (NaN != NaN: each NaN is its own run)
    changes = api.narrow(s, d, 1, n - 1) != api.narrow(s, d, 0, n - 1)
    starts, ends = api.cat([yes, changes], d), api.cat([changes, yes], d)
    pos = _positions(x, d)
    run_start = _scan(api.where(starts, pos, 0), d, api.maximum)
    length = api.where(ends, pos - run_start + 1, 0)
    best = api.argmax(length, d, keepdim=True)       # first longest run: the smallest value
    idx = api.gather(order, d, best)
    vals = api.gather(self, d, idx)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx


def mode(input, dim=-1, keepdim=False, *, out=None):
    """``mode(input, dim=-1, keepdim=False) -> (values, indices)``: the most frequent value along
    dim (the smallest of equally frequent ones) and the index of its last occurrence."""
    r = _overridden(mode, (input,), {kk: v for kk, v in (("dim", dim), ("keepdim", keepdim))
                                     if v not in (-1, False)})
    if r is not NotImplemented:
        return r
    if out is not None:
        raise TypeError("mode(): the out= argument is not supported by ember")
    return _mode_t(*_mode.binding(input, dim, keepdim))


# ---------------------------------------------------------------------- cumulative scans
def _scan(x, d, combine):
    """Inclusive scan of ``combine`` (associative) along ``d`` in ceil(log2 n) steps."""
    n = x.shape[d]
    step = 1
    while step < n:
        head = api.narrow(x, d, 0, step)
        tail = combine(api.narrow(x, d, step, n - step), api.narrow(x, d, 0, n - step))
        x = api.cat([head, tail], d)
        step *= 2
    return x


def _positions(x, d):
    """0, 1, ... along ``d``, broadcast to ``x``'s shape (int64)."""
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    return api.arange(x.shape[d], dtype=_t.int64, device=x.device).reshape(shape).expand(tuple(x.shape))


def _cum_extreme(name, self, dim, combine):
    if self.dtype.is_complex:
        raise _not_impl(f"{name}_cpu", self.dtype)
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return self.clone(), api.zeros((), dtype=_t.int64, device=self.device)
    if self.shape[d] == 0 or self.numel() == 0:
        return self.clone(), api.zeros(tuple(self.shape), dtype=_t.int64, device=self.device)
    x = self.to(_t.uint8) if self.dtype is _t.bool_ else self
    running = _scan(x, d, combine)     # NaN propagates through maximum/minimum, as in PyTorch
    # the running extreme was last (re)attained at the latest position holding it: PyTorch's
    # kernel moves the index on ties (>=, <=) and on every NaN
    hit = x == running
    if x.dtype.is_floating_point:
        hit = hit | api.isnan(x)
    idx = _scan(api.where(hit, _positions(x, d), 0), d, api.maximum)
    return api.gather(self, d, idx), idx


@defcomposite("cummax(Tensor self, int dim) -> Tensor, Tensor", function=False, method=False)
def _cummax(self, dim):
    """Running maximum along ``dim`` and the index of its last occurrence; NaN propagates."""
    return _cum_extreme("cummax", self, dim, api.maximum)


@defcomposite("cummin(Tensor self, int dim) -> Tensor, Tensor", function=False, method=False)
def _cummin(self, dim):
    """Running minimum along ``dim`` and the index of its last occurrence; NaN propagates."""
    return _cum_extreme("cummin", self, dim, api.minimum)


def _cum_entry(name, op, rtype):
    def entry(input, dim, *, out=None):
        r = _overridden(entry, (input, dim), {})
        if r is not NotImplemented:
            return r
        if out is not None:
            raise TypeError(f"{name}(): the out= argument is not supported by ember")
        return rtype(*op.binding(input, dim))
    entry.__name__ = entry.__qualname__ = name
    entry.__module__ = "ember"
    entry.__doc__ = f"{name}(input, dim) -> (values, indices)"
    return entry


cummax = _cum_entry("cummax", _cummax, _cummax_t)
cummin = _cum_entry("cummin", _cummin, _cummin_t)


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow; infinite maxima are passed through (and kept out of
    the arithmetic, so their NaN never reaches a gradient)."""
    hi, lo = api.maximum(a, b), api.minimum(a, b)
    inf = api.isinf(hi)
    hi_s = api.where(inf, 0.0, hi)
    lo_s = api.where(inf, 0.0, lo)
    return api.where(inf, hi, hi_s + api.log1p(api.exp(lo_s - hi_s)))


@defcomposite("logcumsumexp(Tensor self, int dim) -> Tensor")
def logcumsumexp(self, dim):
    """``log(cumsum(exp(self), dim))`` computed stably: a log-depth scan of pairwise log-add-exp."""
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise _not_impl("logcumsumexp_out_cpu", self.dtype)
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0 or self.numel() == 0:
        return self.clone()
    # PyTorch's CPU kernel adds one term after another in acc_type (double for float32, float for
    # the half types), rounding each output once; the scan's other association order in float32
    # was an ulp or more off in most rows. In float64 its error is far below the output's ulp.
    wide = {_t.float32: _t.float64, _t.float16: _t.float64, _t.bfloat16: _t.float64,
            _t.complex64: _t.complex128}.get(self.dtype)
    x = self if wide is None else self.to(wide)
    if self.dtype.is_complex:
        r = _scan(x, d, _logaddexp_complex)
        # a prefix of -inf real parts is the kernel's starting value, -inf + 0j (its tie between
        # two -inf reals keeps the accumulator, whose phase is still the initial 0)
        r = api.where(api.real(r) == float("-inf"), api.full_like(r, complex(float("-inf"), 0.0)), r)
    else:
        r = _scan(x, d, _logaddexp)
    return r if wide is None else r.to(self.dtype)


def _logaddexp_complex(a, b):
    """``log(exp(a) + exp(b))`` of complex numbers, shifted by the one with the larger real part
    (torch's complex ``_log_add_exp_helper``): ``hi + log1p(exp(lo - hi))``."""
    first = api.real(a) >= api.real(b)
    hi, lo = api.where(first, a, b), api.where(first, b, a)
    inf = api.isinf(api.real(hi))
    hi_s = api.where(inf, 0.0, hi)
    lo_s = api.where(inf, 0.0, lo)
    return api.where(inf, hi, hi_s + api.log1p(api.exp(lo_s - hi_s)))


# ---------------------------------------------------------------------- histc
@defcomposite("histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor")
def histc(self, bins=100, min=0, max=0):
    """Counts of ``self`` in ``bins`` equal-width bins over ``[min, max]`` (the data's range when
    ``min == max``, widened by 1 each way when the data is constant), in ``self``'s dtype; values
    outside the range (and NaN) are not counted, ``max`` itself falls in the last bin. The range
    check of data-derived bounds reads the data, so it runs in eager mode only (a traced or
    compiled histc of data with a non-finite range counts nothing instead of raising)."""
    from .._state import STATE
    if not self.dtype.is_floating_point:
        raise _not_impl("histogram_cpu", self.dtype)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = self.reshape(-1)
    if min == max and x.numel() > 0:
        lo, hi = api.amin(x), api.amax(x)
        same = lo == hi
        lo, hi = api.where(same, lo - 1, lo), api.where(same, hi + 1, hi)
        if not STATE.modes:
            lo_v, hi_v = float(lo.item()), float(hi.item())
            if not (math.isfinite(lo_v) and math.isfinite(hi_v)):
                raise RuntimeError(f"torch.histc: range of [{_g(lo_v)}, {_g(hi_v)}] is not finite")
    else:
        lo, hi = (min - 1, max + 1) if min == max else (min, max)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histc: range of [{_g(lo)}, {_g(hi)}] is not finite")
    inside = (x >= lo) & (x <= hi)
    pos = api.floor((api.where(inside, x, lo) - lo) / (hi - lo) * bins).to(_t.int64)
    pos = api.clamp(pos, 0, bins - 1)        # x == max lands in the last bin
    counts = api.zeros((bins,), dtype=self.dtype, device=self.device)
    return api.scatter_add(counts, 0, pos, inside.to(self.dtype))


def _g(v):
    return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else f"{v:g}"))


# ---------------------------------------------------------------------- data-dependent kernels
_DD = ("nondifferentiable", "data_dependent")


@defop("bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor", tags=_DD, save=())
def bincount(xp, a, weights=None, minlength=0):
    """Occurrences of each value 0..max(self) of a 1-D non-negative integer tensor (summed
    ``weights`` instead, when given); at least ``minlength`` bins."""
    dt = _t.from_numpy_dtype(a.dtype)
    if dt.is_floating_point or dt is _t.bool_ or dt.is_complex:
        raise _not_impl("bincount_cpu", dt)
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if a.ndim != 1 or (a.size and int(a.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != a.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if a.size == 0:     # PyTorch returns int64 zeros for an empty input, weights or not
        return xp.zeros(minlength, dtype=np.int64)
    n = max(int(a.max()) + 1, minlength)
    idx = a.astype(np.int64, copy=False)
    if weights is None:
        return xp.bincount(idx, minlength=n).astype(np.int64, copy=False)
    # float32 weights keep their dtype (and sum in it, in input order, as PyTorch's CPU kernel);
    # every other dtype sums in float64
    wdt = np.float32 if weights.dtype == np.float32 else np.float64
    if xp is np:
        out = np.zeros(n, dtype=wdt)
        np.add.at(out, idx, weights.astype(wdt, copy=False))
        return out
    return xp.bincount(idx, weights=weights.astype(np.float64), minlength=n).astype(wdt, copy=False)


def _no_dim(name, dim):
    if dim is not None:
        raise NotImplementedError(f"{name}(): dim={dim} is not supported by ember (only dim=None, which "
                                  f"flattens the input)")


@defop("unique(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) "
       "-> Tensor, Tensor, Tensor", tags=_DD, save=(), function=False, method=False)
def _unique(xp, a, sorted=True, return_inverse=False, return_counts=False):
    """Sorted distinct values of the flattened input (each NaN distinct, NaNs last, as PyTorch's
    CPU kernel), the index of each input element in them and how often each occurs. The values
    are sorted even for ``sorted=False``, which leaves the order to the implementation."""
    flat = a.reshape(-1)
    perm = xp.argsort(sort_keys(flat), kind="stable")
    s = flat[perm]
    first = xp.ones(s.shape, dtype=bool)
    if s.size:
        first[1:] = s[1:] != s[:-1]
    group = xp.cumsum(first) - 1
    inverse = xp.empty(flat.shape, dtype=np.int64)
    inverse[perm] = group
    starts = xp.nonzero(first)[0]
    counts = xp.diff(xp.append(starts, s.size)).astype(np.int64)
    return xp.ascontiguousarray(s[first]), inverse.reshape(a.shape), counts


@defop("unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False) "
       "-> Tensor, Tensor, Tensor", tags=_DD, save=(), function=False, method=False)
def _unique_consecutive(xp, a, return_inverse=False, return_counts=False):
    """The flattened input with each run of equal neighbours collapsed to one element (NaN equals
    nothing, so NaNs never merge), each element's run number and the run lengths."""
    flat = a.reshape(-1)
    first = xp.ones(flat.shape, dtype=bool)
    if flat.size:
        first[1:] = flat[1:] != flat[:-1]
    inverse = (xp.cumsum(first) - 1).astype(np.int64)
    starts = xp.nonzero(first)[0]
    counts = xp.diff(xp.append(starts, flat.size)).astype(np.int64)
    return xp.ascontiguousarray(flat[first]), inverse.reshape(a.shape), counts


def _pick(outs, return_inverse, return_counts):
    vals, inv, counts = outs
    if not return_inverse and not return_counts:
        return vals
    return (vals,) + ((inv,) if return_inverse else ()) + ((counts,) if return_counts else ())


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """``unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)``: the
    distinct values, plus the inverse indices and/or counts when asked for (a tuple then)."""
    kw = {k: v for k, v, default in (("sorted", sorted, True), ("return_inverse", return_inverse, False),
                                     ("return_counts", return_counts, False), ("dim", dim, None)) if v != default}
    r = _overridden(unique, (input,), kw)
    if r is not NotImplemented:
        return r
    _no_dim("unique", dim)
    return _pick(_unique.binding(input, sorted, return_inverse, return_counts), return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)``: runs of
    equal consecutive values collapsed, plus run indices and/or run lengths when asked for."""
    kw = {k: v for k, v in (("return_inverse", return_inverse), ("return_counts", return_counts),
                            ("dim", dim)) if v not in (False, None)}
    r = _overridden(unique_consecutive, (input,), kw)
    if r is not NotImplemented:
        return r
    _no_dim("unique_consecutive", dim)
    return _pick(_unique_consecutive.binding(input, return_inverse, return_counts), return_inverse, return_counts)


# ---------------------------------------------------------------------- entry points
for _fn in (median, nanmedian, kthvalue, mode, cummax, cummin, unique, unique_consecutive):
    setattr(Tensor, _fn.__name__, _fn)
    setattr(api, _fn.__name__, _fn)
