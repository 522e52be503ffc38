"""Shape and construction helpers PyTorch users reach for: diff, trace, kron, meshgrid, rot90, ...

Composites over existing ops where possible (autograd, fake tensors and the compiler then
need nothing new). The exceptions are noted where they occur:

* ``repeat_interleave`` with a *tensor* of repeats has an output length that is the sum of
  the repeats, so it needs the data (eager) or an ``output_size`` (tracing / compile);
* ``combinations`` builds its index table in Python from the (static) input length;
* ``tril_indices`` / ``triu_indices`` have no tensor inputs: they are factories, like
  ``arange``, computed on the host.
"""
from __future__ import annotations

import itertools
import numbers
import warnings

import numpy as np

from .. import types as _t
from .._fake import DataDependentOutputError
from ..tensor import Tensor
from . import api
from ._helpers import wrap_dim
from .registry import defcomposite
from .shape import _as_strided_rel, _diagonal_backward
from .._torch_function import PASS as _PASS, _ACTIVE as _TF, python_entry as _entry


def _check_int(name, fn, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(v).__name__}")


def _not_implemented(kernel, dt):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{dt.legacy_name}'")


# ---------------------------------------------------------------------- diff / trace
@defcomposite("diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor")
def diff(self, n=1, dim=-1, prepend=None, append=None):
    """n-th forward difference along ``dim``: ``x[1:] - x[:-1]``, repeated ``n`` times, on
    ``cat([prepend, x, append])``. Bool tensors use ``!=`` (logical xor), as PyTorch, since
    bool subtraction is refused. An order past the length leaves an empty dimension."""
    if self.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    _check_int("n", "diff", n)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, self.ndim)
    for extra in (prepend, append):
        if extra is not None and extra.ndim != self.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if n == 0:
        return self.clone()     # a new tensor; PyTorch ignores prepend/append at order 0, and so do we
    x = self
    if prepend is not None or append is not None:
        x = api.cat([t for t in (prepend, self, append) if t is not None], d)
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        hi, lo = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = api.logical_xor(hi, lo) if x.dtype is _t.bool_ else hi - lo
    return x


@defcomposite("trace(Tensor self) -> Tensor")
def trace(self):
    """Sum of the main diagonal of a matrix; integer matrices sum to int64 (as ``sum``)."""
    if self.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
    if self.dtype is _t.bool_:
        raise _not_implemented("trace", self.dtype)
    return self.diagonal().sum()


# ---------------------------------------------------------------------- diag_embed / rot90
@defcomposite("diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor")
def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    """Places the last dimension of ``self`` on the ``offset`` diagonal of the (dim1, dim2) planes
    of a new zero tensor with one more dimension. That is exactly the gradient of ``diagonal``
    (``_diagonal_backward``), so it reuses that op: its own backward is ``diagonal`` again, and it
    writes the values rather than multiplying by an identity (inf/NaN stay on the diagonal)."""
    nd = self.ndim + 1
    d1, d2 = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if self.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -1)")
    m = self.shape[-1] + abs(offset)
    batch = iter(self.shape[:-1])
    size = [m if i in (d1, d2) else next(batch) for i in range(nd)]
    return _diagonal_backward.binding(self, size, offset, d1, d2)


@defcomposite("rot90(Tensor self, int k=1, int[] dims=[0, 1]) -> Tensor")
def rot90(self, k=1, dims=(0, 1)):
    """Rotation by ``k`` quarter turns in the plane ``dims``, from dims[0] towards dims[1]: a flip
    and a transpose (so odd ``k`` gives a transposed, non-contiguous result, as PyTorch's);
    ``k % 4 == 0`` is a contiguous copy."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if self.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.ndim}")
    d0, d1 = wrap_dim(dims[0], self.ndim), wrap_dim(dims[1], self.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = k % 4
    if k == 1:
        return self.flip(d1).transpose(d0, d1)
    if k == 2:
        return self.flip(d0, d1)
    if k == 3:
        return self.flip(d0).transpose(d0, d1)
    return api.clone(self, memory_format="contiguous_format")


# ---------------------------------------------------------------------- repeat_interleave
def _ri_flat(self, dim):
    """(tensor, dim) to repeat along: ``dim=None`` repeats the flattened tensor."""
    if dim is None:
        return self.reshape(-1), 0
    if self.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return self, wrap_dim(dim, self.ndim)


@defcomposite("_repeat_interleave_int(Tensor self, int repeats, int? dim=None, *, int? output_size=None) "
              "-> Tensor", method=False, function=False)
def _repeat_interleave_int(self, repeats, dim=None, output_size=None):
    """Each slice along ``dim`` repeated ``repeats`` times in place: an expand along a new
    dimension after ``dim`` folded into it (no data dependence, so it compiles)."""
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    x, d = _ri_flat(self, dim)
    n = x.shape[d]
    if output_size is not None and output_size != n * repeats:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {n * repeats} but got "
                           f"{output_size}")
    shp = list(x.shape)
    big = shp[:d + 1] + [repeats] + shp[d + 1:]
    out = shp[:d] + [n * repeats] + shp[d + 1:]
    return x.unsqueeze(d + 1).expand(tuple(big)).reshape(tuple(out))


def _segment_ids(reps, total):
    """``[0]*reps[0] + [1]*reps[1] + ...`` (int64, ``total`` long) without a data-dependent op
    other than the length: a 1 is added at each segment's start and the running sum, less one,
    is the segment id. A zero-length segment starts where the next one does, so its mark only
    moves the count past it; marks of trailing empty segments land in the extra last slot."""
    n = reps.shape[0]
    reps = reps.to(_t.int64)
    ends = reps.cumsum(0)
    starts = ends - reps
    marks = api.zeros((total + 1,), dtype=_t.int64, device=reps.device)
    marks = marks.index_add(0, starts, api.ones((n,), dtype=_t.int64, device=reps.device))
    return marks.cumsum(0).narrow(0, 0, total) - 1


def _ri_total(reps, output_size):
    """The output length: ``output_size`` when given (checked against the data in eager mode),
    else the sum of the repeats, which needs their values."""
    if reps._fake:
        if output_size is None:
            raise DataDependentOutputError(
                "repeat_interleave", "with a tensor of repeats the output length is their sum; pass "
                "output_size=... (or use int repeats) to trace or compile it")
        return output_size
    if reps.numel() and bool((reps < 0).any()):
        raise RuntimeError("repeats can not be negative")
    total = int(reps.sum().item()) if reps.numel() else 0
    if output_size is not None and output_size != total:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {total} but got {output_size}")
    return total


def _check_reps(repeats):
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats.dtype not in (_t.int64, _t.int32):
        raise _not_implemented("repeat_interleave_cpu", repeats.dtype)


@defcomposite("_repeat_interleave_tensor(Tensor self, Tensor repeats, int? dim=None, *, int? output_size=None) "
              "-> Tensor", method=False, function=False)
def _repeat_interleave_tensor(self, repeats, dim=None, output_size=None):
    """Slice ``i`` along ``dim`` repeated ``repeats[i]`` times: ``index_select`` with the segment
    ids of the repeats (so the gradient is the op's index_add). A one-element ``repeats``
    applies to every slice."""
    _check_reps(repeats)
    x, d = _ri_flat(self, dim)
    n = x.shape[d]
    if repeats.numel() == 1:
        reps = repeats.reshape(1).expand(n)
    elif repeats.shape[0] != n:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{repeats.shape[0]} and input.size({d}) = {n}")
    else:
        reps = repeats
    total = _ri_total(reps, output_size)
    return x.index_select(d, _segment_ids(reps, total))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """``repeat_interleave(input, repeats, dim=None, *, output_size=None)``; with one tensor
    argument, ``repeat_interleave(repeats)`` is the segment ids ``0..len(repeats)-1`` each
    repeated its count of times (in the repeats' dtype)."""
    if repeats is None:
        if not isinstance(input, Tensor):
            raise TypeError(f"repeat_interleave(): argument 'repeats' must be Tensor, not {type(input).__name__}")
        _check_reps(input)
        reps = input.reshape(1) if input.ndim == 0 else input
        return _segment_ids(reps, _ri_total(reps, output_size)).to(input.dtype)
    if isinstance(repeats, Tensor):
        return _repeat_interleave_tensor.binding(input, repeats, dim, output_size=output_size)
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral):
        raise TypeError(f"repeat_interleave(): argument 'repeats' must be int or Tensor, not "
                        f"{type(repeats).__name__}")
    return _repeat_interleave_int.binding(input, int(repeats), dim, output_size=output_size)


# ---------------------------------------------------------------------- unfold (a view)
@defcomposite("unfold(Tensor self, int dimension, int size, int step) -> Tensor", function=False)
def unfold(self, dimension, size, step):
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last
    dimension. A view (windows overlap when ``step < size``): the dimension's stride becomes
    ``step`` times larger and the new one takes its old stride. The geometry is relative to
    ``self``'s first element, so any strided input works; gradients of overlapping windows add
    up (as_strided's backward scatter-adds)."""
    nd = self.ndim
    d = wrap_dim(dimension, nd)
    n = self.shape[d] if nd else 1
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    st = list(self.stride())
    if nd == 0:
        shape, strides = [size], [1]
    else:
        shape = list(self.shape)
        shape[d] = (n - size) // step + 1
        strides = list(st)
        strides[d] = st[d] * step
        shape.append(size)
        strides.append(st[d])
    return _as_strided_rel.binding(self, tuple(shape), tuple(strides), 0, src_stride=tuple(st))


# ---------------------------------------------------------------------- glu / kron
@defcomposite("glu(Tensor self, int dim=-1) -> Tensor", method=False)
def glu(self, dim=-1):
    """Gated linear unit: the first half along ``dim`` times the sigmoid of the second half."""
    if self.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, self.ndim)
    n = self.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    if not self.dtype.is_floating_point:
        raise _not_implemented("glu_cpu", self.dtype)
    h = n // 2
    return self.narrow(d, 0, h) * api.sigmoid(self.narrow(d, h, h))


@defcomposite("kron(Tensor self, Tensor other) -> Tensor")
def kron(self, other):
    """Kronecker product: both tensors padded with leading size-1 dims to one rank, each dim of
    ``self`` interleaved with the matching one of ``other`` by broadcasting, then merged."""
    nd = max(self.ndim, other.ndim)
    a_shape = (1,) * (nd - self.ndim) + tuple(self.shape)
    b_shape = (1,) * (nd - other.ndim) + tuple(other.shape)
    a_int, b_int = [], []
    for sa, sb in zip(a_shape, b_shape):
        a_int += [sa, 1]
        b_int += [1, sb]
    prod = self.reshape(tuple(a_int)) * other.reshape(tuple(b_int))
    return prod.reshape(tuple([sa * sb for sa, sb in zip(a_shape, b_shape)]))


# ---------------------------------------------------------------------- block_diag
def _common_dtype(tensors):
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = _t.promote_types(dt, t.dtype)
    return dt


@defcomposite("block_diag(Tensor[] tensors) -> Tensor", method=False, function=False)
def _block_diag(tensors):
    """Each tensor (a 0-d one as 1x1, a 1-d one as a row) as a block on the diagonal of a zero
    matrix: each block row is [zeros, block, zeros], and the rows are stacked."""
    if not tensors:
        return api.zeros((1, 0))     # PyTorch's result for no blocks
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")
        if t.device != tensors[0].device:
            raise RuntimeError("torch.block_diag: input tensors must all be on the same device")
        mats.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, t.shape[0]) if t.ndim == 1 else t)
    dt = _common_dtype(mats)
    dev = mats[0].device
    cols = sum(m.shape[1] for m in mats)
    rows, c = [], 0
    for m in mats:
        r, w = m.shape
        left = api.zeros((r, c), dtype=dt, device=dev)
        right = api.zeros((r, cols - c - w), dtype=dt, device=dev)
        rows.append(api.cat([left, m.to(dt), right], 1))
        c += w
    return api.cat(rows, 0)


def block_diag(*tensors):
    return _block_diag.binding(list(tensors))


# ---------------------------------------------------------------------- meshgrid / cartesian_prod
@defcomposite("meshgrid(Tensor[] tensors, *, str indexing='ij') -> Tensor[]", method=False, function=False)
def _meshgrid(tensors, indexing="ij"):
    """Expanded views: output ``i`` is tensor ``i`` laid along dim ``i`` and broadcast over the
    others. ``'xy'`` swaps the roles of the first two (Cartesian rather than matrix indexing)."""
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a "
                               f"{t.ndim}-D tensor of shape {list(t.shape)}")
    for t in tensors[1:]:
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t.device != tensors[0].device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = [f.shape[0] for f in flat]
    outs = []
    for i, f in enumerate(flat):
        v = [1] * len(flat)
        v[i] = shape[i]
        outs.append(f.view(*v).expand(tuple(shape)))
    if swap:
        outs[0], outs[1] = outs[1], outs[0]
    return tuple(outs)


def meshgrid(*tensors, indexing=None):
    """``meshgrid(*tensors, indexing=None)`` (one list or tuple of tensors works too). Without
    ``indexing`` it warns, as PyTorch does, and uses ``'ij'``."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
                      "argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    return _meshgrid.binding(list(tensors), indexing=indexing)


@defcomposite("cartesian_prod(Tensor[] tensors) -> Tensor", method=False, function=False)
def _cartesian_prod(tensors):
    """All tuples of one element from each 1-d tensor, in row-major order, one per row: the
    flattened ``'ij'`` meshgrid stacked as columns. One tensor is returned as is."""
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = _meshgrid.binding(list(tensors), indexing="ij")
    return api.stack([g.reshape(-1) for g in grids], 1)


def cartesian_prod(*tensors):
    return _cartesian_prod.binding(list(tensors))


# ---------------------------------------------------------------------- combinations
@defcomposite("combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor", method=False)
def combinations(self, r=2, with_replacement=False):
    """All length-``r`` combinations of the elements of a 1-d tensor (with repetition if
    ``with_replacement``), in lexicographic order of positions, one per row. The position table
    depends only on the length, so it is built on the host and gathered with ``index_select``
    (differentiable in the values)."""
    if self.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(self.shape)}")
    _check_int("r", "combinations", r)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    no_index = api.zeros((0,), dtype=_t.int64, device=self.device)
    if r == 0:
        return self.index_select(0, no_index)       # empty, but still on the autograd graph
    n = int(self.shape[0])
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(gen(range(n), r)), dtype=np.int64).reshape(-1)
    sel = self.index_select(0, api.tensor(idx, dtype=_t.int64, device=self.device))
    return sel.reshape(-1, r)


# ---------------------------------------------------------------------- tril / triu indices
def _tri_indices(name, lower, row, col, offset, dtype, device):
    for a, v in (("row", row), ("col", col), ("offset", offset)):
        _check_int(a, name, v)
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dt = _t.int64 if dtype is None else dtype
    if dt not in (_t.int64, _t.int32, _t.int16, _t.int8, _t.uint8):
        raise _not_implemented(name, dt)
    r, c = np.nonzero(np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool))
    return api.tensor(np.stack([r, c]).astype(dt.np).reshape(2, -1), dtype=dt, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """Row and column indices (a 2 x N tensor, row-major order) of the lower triangle of a
    ``row`` x ``col`` matrix, diagonal ``offset`` and below. A factory: computed on the host from
    its integer arguments, like ``arange``."""
    if _TF[0] and (_r := _entry(tril_indices, locals())) is not _PASS:
        return _r
    from .._pinned import for_factory
    return for_factory(_tri_indices("tril_indices", True, row, col, offset, dtype, device), pin_memory)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """Indices of the upper triangle, diagonal ``offset`` and above (see ``tril_indices``)."""
    if _TF[0] and (_r := _entry(triu_indices, locals())) is not _PASS:
        return _r
    from .._pinned import for_factory
    return for_factory(_tri_indices("triu_indices", False, row, col, offset, dtype, device), pin_memory)


# ---------------------------------------------------------------------- cdist
@defcomposite("cdist(Tensor x1, Tensor x2, float p=2.0, str? compute_mode=None) -> Tensor", method=False)
def cdist(x1, x2, p=2.0, compute_mode=None):
    """p-norm distance between each row of ``x1`` (..., P, M) and each row of ``x2`` (..., R, M):
    (..., P, R), batch dims broadcast. The vector norm of the pairwise differences, whose
    gradient is zero where two rows coincide (as PyTorch's), not NaN."""
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                           f"X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {t.dtype.legacy_name}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {x1.dtype.legacy_name} but found {x2.dtype.legacy_name}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode in (None, "use_mm_for_euclid_dist_if_necessary") and (rows1 > 25 or rows2 > 25)))
    if not use_mm and x1.dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"\"cdist\" not implemented for '{x1.dtype.legacy_name}'")   # (torch's kernel)
    if use_mm:
        # |a - b|^2 = |a|^2 + |b|^2 - 2 a.b: one matmul instead of a (..., P, R, M) difference
        # tensor (1000 x 1000 rows of 128 floats: 512 MB); PyTorch switches at the same sizes.
        # Cancellation can leave tiny negatives: clamped. Where the distance is 0 the gradient
        # is 0 (sqrt's is infinite there): the square root is taken of 1 at those places.
        sq = (x1 * x1).sum(-1).unsqueeze(-1) + (x2 * x2).sum(-1).unsqueeze(-2) - 2 * (x1 @ x2.mT)
        sq = sq.clamp(min=0)
        pos = sq > 0
        return api.where(pos, api.sqrt(api.where(pos, sq, 1.0)), 0.0)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return api.norm(diff, p, -1)


# ---------------------------------------------------------------------- entry points
for _name, _fn in dict(repeat_interleave=repeat_interleave, block_diag=block_diag, meshgrid=meshgrid,
                       cartesian_prod=cartesian_prod, tril_indices=tril_indices,
                       triu_indices=triu_indices).items():
    setattr(api, _name, _fn)
Tensor.repeat_interleave = repeat_interleave
