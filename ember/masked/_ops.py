"""Masked reductions and normalizations: ``ember.masked.sum(x, dim, mask=m)`` and friends.

Each function follows ``torch.masked``: the masked-out elements of ``input``
are replaced by the *identity* of the operation (0 for sum, 1 for prod, -inf
for amax / logsumexp / softmax, +inf for amin / softmin, ...) with
``ember.where`` and the ordinary dense op then runs. Because ``where`` routes
the gradient only to the selected side, masked-out elements get a zero
gradient, and every formula is the dense op's own (double backward included).
Operations without an identity (mean, var, std, median) count the masked-in
elements instead, so a fully masked-out slice gives nan, as in PyTorch.

``input`` may be a strided tensor or a ``MaskedTensor``, whose own mask is then
used -- also by mean/var/std given no ``mask=`` (torch.masked counts every
element there, masked-out ones included, which is not the mean of anything).
Sparse inputs and masks are refused with NotImplementedError.
"""
from __future__ import annotations

import math

_SMALL_INTS = ("uint8", "bool", "int8", "int16", "int32")


def _ember():
    import ember
    return ember


def _is_mt(x):
    from ._tensor import MaskedTensor
    return isinstance(x, MaskedTensor)


def _strided_only(fn_name, x, what="input"):
    lay = getattr(x, "layout", None)
    if x is not None and getattr(x, "_sparse_layout", False) and not _is_mt(x):
        raise NotImplementedError(
            f"ember.masked.{fn_name}: a sparse {what} (layout {lay}) is not supported; ember.masked "
            f"works on strided tensors only: convert it with .to_dense() first")


def _unwrap(fn_name, input, mask):
    """(data, mask) for ``input``: a MaskedTensor brings its own mask (differentiable data)."""
    from ..tensor import Tensor
    if _is_mt(input):
        data = input.get_data()
        data._mt_through = True    # see _combine
        return data, input.get_mask()
    if not isinstance(input, Tensor):
        raise TypeError(f"ember.masked.{fn_name}(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    _strided_only(fn_name, input)
    if mask is not None:
        if not isinstance(mask, Tensor) or _is_mt(mask):
            raise TypeError(f"ember.masked.{fn_name}(): argument 'mask' must be Tensor or None, not "
                            f"{type(mask).__name__}")
        _strided_only(fn_name, mask, "mask")
    return input, mask


def _input_mask(input, mask):
    """The mask broadcast to ``input``'s shape, as bool (torch.masked's canonical input mask)."""
    E = _ember()
    if mask.shape != input.shape:
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher "
                             "than of the input)")
        mask = E.broadcast_to(mask, input.shape)
    return mask.to(dtype=E.bool)


def _canonical_dim(dim, ndim):
    """``dim`` (None, int or sequence; ``()`` means all) as a sorted tuple of non-negative dims."""
    if dim == () or dim is None:
        return tuple(range(ndim))
    ndim = max(ndim, 1)
    dims = []
    for d in ((dim,) if isinstance(dim, int) else dim):
        d = int(d)
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                             f"but got {d})")
        dims.append(d % ndim)
    return tuple(sorted(dims))


def _identity(op, x, ord=None):
    """The value that does not change reduction ``op`` (torch.masked's ``_reduction_identity``)."""
    E = _ember()
    dt = x.dtype
    if op in ("sum", "cumsum"):
        return 0
    if op in ("prod", "cumprod"):
        return 1
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        if dt.is_floating_point:
            return -math.inf
        if dt.is_signed or dt is E.uint8:
            return E.iinfo(dt).min
    elif op in ("amin", "argmin"):
        if dt.is_floating_point:
            return math.inf
        if dt.is_signed or dt is E.uint8:
            return E.iinfo(dt).max
    elif op == "norm":
        return math.inf if ord == -math.inf else 0
    elif op == "median":
        return math.nan
    raise NotImplementedError(f"identity of {op} on {dt} input")


def _combine(op, data, mask, ord=None):
    """``data`` with its masked-out elements replaced by the identity of ``op``."""
    if mask is None:
        return data
    E = _ember()
    fill = E.tensor(_identity(op, data, ord), dtype=data.dtype, device=data.device)
    mask = _input_mask(data, mask)
    if getattr(data, "_mt_through", False):
        # the data of a MaskedTensor: as torch.masked, the gradient passes through unmasked (the
        # MaskedTensor gradient it becomes hides the masked-out elements anyway)
        return _FillMaskedOut.apply(data, mask, fill)
    return E.where(mask, data, fill)


from ..autograd.function import Function  # noqa: E402


class _FillMaskedOut(Function):
    """where(mask, data, fill) whose gradient reaches every element of ``data``."""

    @staticmethod
    def forward(ctx, data, mask, fill):
        return _ember().where(mask, data, fill)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def _any(mask, dims, keepdim):
    for d in reversed(dims):
        mask = mask.any(dim=d, keepdim=keepdim)
    return mask


def _default_int_promoting(x, dtype):
    E = _ember()
    if dtype is None:
        dtype = x.dtype
        if str(dtype).rsplit(".", 1)[-1] in _SMALL_INTS:
            dtype = E.int64
    return dtype


# ---------------------------------------------------------------------- reductions
def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum of the masked-in elements over ``dim`` (0 for a fully masked-out slice)."""
    x, mask = _unwrap("sum", input, mask)
    dtype = _default_int_promoting(x, dtype)
    dims = _canonical_dim(dim, x.ndim)
    return _ember().sum(_combine("sum", x, mask), dims, bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the masked-in elements over ``dim`` (1 for a fully masked-out slice)."""
    x, mask = _unwrap("prod", input, mask)
    dtype = _default_int_promoting(x, dtype)
    dims = _canonical_dim(dim, x.ndim)
    res = _combine("prod", x, mask).to(dtype=dtype)
    for d in reversed(dims):       # (prod takes one dim at a time)
        res = res.prod(dim=d, keepdim=bool(keepdim))
    return res


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum along ``dim``, masked-out elements counting as 0."""
    x, mask = _unwrap("cumsum", input, mask)
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    return _ember().cumsum(_combine("sum", x, mask), d, dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product along ``dim``, masked-out elements counting as 1."""
    x, mask = _unwrap("cumprod", input, mask)
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    return _ember().cumprod(_combine("prod", x, mask), d, dtype=dtype).to(dtype=dtype)


def _minmax(op):
    def fn(input, dim=None, *, keepdim=False, dtype=None, mask=None):
        x, mask = _unwrap(op, input, mask)
        dtype = x.dtype if dtype is None else dtype
        m = _combine(op, x, mask)
        dims = _canonical_dim(dim, m.ndim)
        return getattr(_ember(), op)(m, dims, bool(keepdim)).to(dtype=dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = (f"``{op}`` of the masked-in elements over ``dim`` ("
                  f"{'-inf' if op == 'amax' else '+inf'} for a fully masked-out float slice).")
    return fn


amax = _minmax("amax")
amin = _minmax("amin")


def _arg(op):
    def fn(input, dim=None, *, keepdim=False, dtype=None, mask=None):
        x, mask = _unwrap(op, input, mask)
        # as torch.masked: the indices come back in ``dtype``, which defaults to the input's
        dtype = x.dtype if dtype is None else dtype
        return getattr(_ember(), op)(_combine(op, x, mask), dim, bool(keepdim)).to(dtype=dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = (f"``{op}`` over the masked-in elements; the indices are returned in ``dtype`` "
                  f"(default: the input's dtype), as torch.masked does.")
    return fn


argmax = _arg("argmax")
argmin = _arg("argmin")


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the masked-in elements (nan for a fully masked-out slice: 0 / 0)."""
    x, mask = _unwrap("mean", input, mask)
    E = _ember()
    src = "Input"
    if dtype is None:
        dtype = x.dtype
    else:
        src = "Optional"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {src} dtype must be either a floating "
                         f"point or complex dtype. Got: {dtype}")
    if mask is None:
        count = E.ones(x.shape, dtype=E.int64, device=x.device)
        count = sum(count, dim, keepdim=keepdim)
        total = sum(x, dim, keepdim=keepdim, dtype=dtype)
    else:
        inmask = _input_mask(x, mask)
        dims = _canonical_dim(dim, x.ndim)
        count = inmask.sum(dim=dims, keepdim=bool(keepdim))
        total = sum(x, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of the masked-in elements along one ``dim`` (nan for a fully masked-out slice)."""
    x, mask = _unwrap("median", input, mask)
    E = _ember()
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    is_float = x.dtype.is_floating_point
    if not is_float:
        x = x.to(dtype=E.float32)
    out = E.nanmedian(_combine("median", x, mask), d, keepdim).values
    if is_float:
        return out
    if not bool(E.isnan(out).any()):
        return out.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not floating point")


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp)) of the masked-in elements (-inf for a fully masked-out slice)."""
    x, mask = _unwrap("logsumexp", input, mask)
    dtype = x.dtype if dtype is None else dtype
    dims = _canonical_dim(dim, x.ndim)
    return _ember().logsumexp(_combine("logsumexp", x, mask), dims, keepdim=keepdim).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """Elementwise log(exp(input) + exp(other)), each side's masked-out elements counting as -inf."""
    x, input_mask = _unwrap("logaddexp", input, input_mask)
    y, other_mask = _unwrap("logaddexp", other, other_mask)
    dtype = x.dtype if dtype is None else dtype
    return _ember().logaddexp(_combine("logaddexp", x, input_mask),
                              _combine("logaddexp", y, other_mask)).to(dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Vector ``ord``-norm of the masked-in elements over ``dim``."""
    x, mask = _unwrap("norm", input, mask)
    dtype = x.dtype if dtype is None else dtype
    m = _combine("norm", x, mask, ord)
    dims = _canonical_dim(dim, x.ndim)
    return _ember().linalg.vector_norm(m, ord, dims, bool(keepdim), dtype=dtype)


def _std_var(name, input, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt):
    x, mask = _unwrap(name, input, mask)
    E = _ember()
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = x.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = E.float32
    compute_dtype = dtype if (dtype.is_floating_point or dtype.is_complex) else E.float32
    dims = _canonical_dim(dim, x.ndim)
    if mask is None:
        inmask = None
        count = E.ones(x.shape, dtype=E.int64).sum(dim=dims, keepdim=True) if x.ndim else E.tensor(1)
    else:
        inmask = _input_mask(x, mask)
        count = inmask.sum(dim=dims, keepdim=True) if x.ndim else inmask.to(E.int64)
    sample_mean = sum(x, dim, keepdim=True, dtype=dtype, mask=inmask) / count
    d = x - sample_mean
    if getattr(x, "_mt_through", False):
        d._mt_through = True
    total = sum(d * d.conj(), dim, keepdim=keepdim, dtype=compute_dtype, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        count = count.to(compute_dtype) - correction
        count = E.maximum(count, E.zeros((), dtype=count.dtype))
    out = (total / count).to(dtype=dtype)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Variance of the masked-in elements (nan where fewer than ``correction`` + 1 are masked in)."""
    return _std_var("var", input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """Standard deviation of the masked-in elements (see ``var``)."""
    return _std_var("std", input, dim, unbiased, correction, keepdim, dtype, mask, True)


# ---------------------------------------------------------------------- normalizations
def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax over the masked-in elements (masked-out ones get 0; a fully masked-out slice nan)."""
    x, mask = _unwrap("softmax", input, mask)
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    return _ember().nn.functional.softmax(_combine("amax", x, mask), d, dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax over the masked-in elements (masked-out ones get -inf)."""
    x, mask = _unwrap("log_softmax", input, mask)
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    return _ember().nn.functional.log_softmax(_combine("amax", x, mask), d, dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin over the masked-in elements (masked-out ones get 0)."""
    x, mask = _unwrap("softmin", input, mask)
    dtype = x.dtype if dtype is None else dtype
    d = _canonical_dim(dim, x.ndim)[0]
    return _ember().nn.functional.softmin(_combine("amin", x, mask), d, dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """``input`` divided by its masked ``ord``-norm along ``dim`` (at least ``eps``); masked-out -> 0."""
    x, mask = _unwrap("normalize", input, mask)
    E = _ember()
    dtype = x.dtype if dtype is None else dtype
    m = _combine("sum", x, mask)
    nrm = norm(x, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denom = E.maximum(nrm, E.tensor(eps, dtype=nrm.dtype))
    return E.div(m, denom)
