"""The ops a MaskedTensor supports, installed as its methods and Python operators.

The lists follow ``torch.masked.maskedtensor`` (unary.py, binary.py,
reductions.py, passthrough.py, _ops_refs.py):

* unary: the op on the data, the mask kept (no keyword or tensor arguments);
* binary: both operands' masks must be equal (a dense operand has none), the
  op on the data, the mask broadcast to the result;
* reductions (``sum``, ``mean``, ``amax``, ... ``all``): the ``ember.masked``
  function of the same name; the result's mask is "any element masked in";
* passthrough (``t``, ``view``, indexing, ...): the op on data and mask alike;
* ``where``, ``softmax``, ``detach``, ``clone``, ``to``, ``contiguous``.

Every other Tensor method reaches a dense kernel, whose read of the storage
raises PyTorch's error naming the op (see _storage.py).
"""
from __future__ import annotations

from .. import types as _t
from .._state import STATE
from ..tensor import Tensor
from . import _ops as M
from ._tensor import MaskedTensor, _new_mt, _plain, as_masked_tensor, is_masked_tensor

UNARY_NAMES = (
    "abs", "absolute", "acos", "arccos", "acosh", "arccosh", "angle", "asin", "arcsin", "asinh", "arcsinh",
    "atan", "arctan", "atanh", "arctanh", "bitwise_not", "ceil", "clamp", "clip", "conj_physical", "cos",
    "cosh", "deg2rad", "digamma", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "fix", "floor", "frac",
    "lgamma", "log", "log10", "log1p", "log2", "logit", "i0", "isnan", "nan_to_num", "neg", "negative",
    "positive", "pow", "rad2deg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sgn", "signbit",
    "sin", "sinc", "sinh", "sqrt", "square", "tan", "tanh", "trunc")
INPLACE_UNARY_NAMES = tuple(n + "_" for n in UNARY_NAMES if n not in ("angle", "positive", "signbit", "isnan"))

BINARY_NAMES = (
    "add", "atan2", "arctan2", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift", "div", "divide", "floor_divide", "fmod", "logaddexp", "logaddexp2", "mul",
    "multiply", "nextafter", "remainder", "sub", "subtract", "true_divide", "eq", "ne", "le", "ge", "greater",
    "greater_equal", "gt", "less_equal", "lt", "less", "maximum", "minimum", "fmax", "fmin", "not_equal")
INPLACE_BINARY_NAMES = tuple(n + "_" for n in BINARY_NAMES
                             if n not in ("logaddexp", "logaddexp2", "fmin", "minimum", "maximum", "fmax"))

REDUCE_NAMES = ("sum", "mean", "amin", "amax", "argmin", "argmax", "prod", "all", "norm", "var", "std")

PASSTHROUGH_NAMES = ("select", "transpose", "split", "t", "expand", "view", "reshape", "flatten", "unsqueeze",
                     "unfold", "__getitem__",
                     # ops torch decomposes into those (so its MaskedTensor runs them too)
                     "chunk", "narrow", "tensor_split", "hsplit", "vsplit", "swapaxes", "swapdims", "unflatten",
                     "ravel", "expand_as", "view_as", "reshape_as")
_SHAPE_FROM = ("expand_as", "view_as", "reshape_as")    # a MaskedTensor argument only gives a shape


def _data(x):
    return x.get_data() if is_masked_tensor(x) else x


def _inplace_guard(self, name):
    if self._requires_grad and STATE.grad_enabled:
        raise NotImplementedError(f"ember.masked: in-place {name} on a MaskedTensor that requires grad is "
                                  f"not supported outside no_grad(); use the out-of-place op")


def _finish_inplace(self, res):
    self._masked_data = _plain(res)
    self._bump_version()
    return self


# ---------------------------------------------------------------------- unary
def _unary_check(args, kwargs):
    # (torch's keyword arguments reach its MaskedTensor as positional ones: clamp(min=0) works)
    if any(isinstance(a, Tensor) for a in tuple(args) + tuple(kwargs.values())):
        raise TypeError("MaskedTensor unary ops do not support additional Tensor arguments")


def _unary(name):
    def method(self, *args, **kwargs):
        _unary_check(args, kwargs)
        return as_masked_tensor(getattr(self.get_data(), name)(*args, **kwargs), self._masked_mask)
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the data; the mask is kept."
    return method


def _inplace_unary(name):
    def method(self, *args, **kwargs):
        _unary_check(args, kwargs)
        _inplace_guard(self, name)
        return _finish_inplace(self, getattr(_plain(self._masked_data), name)(*args, **kwargs))
    method.__name__ = name
    return method


# ---------------------------------------------------------------------- binary
def _masks_match(a, b):
    if is_masked_tensor(a) and is_masked_tensor(b):
        ma, mb = a._masked_mask, b._masked_mask
        return ma.dim() == mb.dim() and ma.shape == mb.shape and bool((ma == mb).all())
    return True


def _binary_check(args, kwargs):
    if kwargs:
        raise ValueError("len(kwargs) must equal 0")
    if any(isinstance(a, Tensor) for a in args[2:]):
        raise TypeError("MaskedTensor binary ops do not support Tensor arguments aside from the lhs and rhs")
    if not _masks_match(args[0], args[1]):
        raise ValueError("Input masks must match. If you need support for this, please open an issue on Github.")


def _binary_apply(name, a, b, rest):
    _binary_check((a, b) + rest, {})
    res = getattr(Tensor, name)(_data(a), _data(b), *rest) if isinstance(_data(a), Tensor) \
        else getattr(Tensor, name)(_as_tensor(_data(a), _data(b)), _data(b), *rest)
    mask = (a if is_masked_tensor(a) else b)._masked_mask
    return as_masked_tensor(res, mask.expand_as(res) if mask.shape != res.shape else mask)


def _as_tensor(x, like):
    from ..ops import api
    return api.tensor(x, dtype=like.dtype if isinstance(x, (int, float)) and like.dtype.is_floating_point
                      else None, device=like.device)


def _binary(name):
    def method(self, other, *args, **kwargs):
        if kwargs:
            raise ValueError("len(kwargs) must equal 0")
        return _binary_apply(name, self, other, args)
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the data; both masks must be equal."
    return method


def _reflected(name):
    def method(self, other):
        return _binary_apply(name, other, self, ())
    return method


def _inplace_binary(name):
    def method(self, other, *args, **kwargs):
        _binary_check((self, other) + args, kwargs)
        _inplace_guard(self, name)
        return _finish_inplace(self, getattr(_plain(self._masked_data), name)(_plain(_data(other))
                                                                            if isinstance(other, Tensor)
                                                                            else other, *args))
    method.__name__ = name
    return method


# ---------------------------------------------------------------------- reductions
def _multidim_any(mask, dim, keepdim):
    dims = M._canonical_dim(dim, mask.ndim)
    return M._any(mask, dims, keepdim)


def _masked_all(data, mask, dim=None, keepdim=False):
    filled = data.masked_fill(~mask, True)
    return filled.all() if dim is None else filled.all(dim=dim, keepdim=keepdim)


def _reduction(name):
    fn = getattr(M, name, None)

    def method(self, *args, **kwargs):
        mask = self._masked_mask
        if not args and not kwargs:
            if name == "all":
                res = _masked_all(self.get_data(), mask)
            else:
                res = fn(self, mask=mask)
            return as_masked_tensor(res, mask.any())
        bound = dict(zip(("dim", "keepdim", "dtype"), args))
        if len(args) > 3:
            raise TypeError(f"{name}() takes from 1 to 4 positional arguments but {len(args) + 1} were given")
        for k, v in kwargs.items():
            if k not in ("dim", "keepdim", "dtype") or k in bound:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            bound[k] = v
        if "dim" not in bound:
            raise TypeError(f"{name}() missing 1 required positional argument: 'dim'")
        dim, keepdim, dtype = bound["dim"], bool(bound.get("keepdim", False)), bound.get("dtype")
        if name == "all":
            res = _masked_all(self.get_data(), mask, dim, keepdim)
        else:
            res = fn(self, dim=dim, keepdim=keepdim, dtype=dtype, mask=mask)
        return as_masked_tensor(res, _multidim_any(mask, dim, keepdim))
    method.__name__ = name
    method.__doc__ = (f"``ember.masked.{name}`` over the masked-in elements; the result is masked "
                      f"where every reduced element was masked out.")
    return method


# ---------------------------------------------------------------------- passthrough
def _passthrough(name):
    def method(self, *args, **kwargs):
        if any(is_masked_tensor(a) for a in args) or any(is_masked_tensor(v) for v in kwargs.values()):
            args = tuple(a._masked_mask if is_masked_tensor(a) else a for a in args)
            kwargs = {k: (v._masked_mask if is_masked_tensor(v) else v) for k, v in kwargs.items()}
            if name not in _SHAPE_FROM:
                raise NotImplementedError(f"ember.masked: {name} with a MaskedTensor argument is not supported")
        data = getattr(self.get_data(), name)(*args, **kwargs)
        mask = getattr(self._masked_mask, name)(*args, **kwargs)
        if isinstance(data, (tuple, list)):
            return type(data)(as_masked_tensor(d, m) for d, m in zip(data, mask))
        return as_masked_tensor(data, mask)
    method.__name__ = name
    method.__doc__ = f"``{name}`` applied to the data and to the mask alike."
    return method


# ---------------------------------------------------------------------- the rest
def where(self, condition, other):
    """``where(condition, self, other)``: data and mask both chosen by ``condition`` (a dense
    ``other`` counts as fully masked in)."""
    from ..ops import api
    if is_masked_tensor(condition) or not isinstance(condition, Tensor):
        raise ValueError("__torch_dispatch__, aten.where: expected args[0] to be a tensor")
    if not isinstance(other, Tensor):
        other = api.tensor(other, dtype=self.dtype, device=self.device)
    om = other._masked_mask if is_masked_tensor(other) else api.ones_like(other, dtype=_t.bool_)
    data = api.where(condition, self.get_data(), _data(other))
    mask = api.where(condition, self._masked_mask, om)
    return as_masked_tensor(data, mask)


def masked_where(condition, input, other):
    """``ember.where(condition, input, other)`` for MaskedTensor operands (either may be dense)."""
    from ..ops import api
    if not is_masked_tensor(input):
        if not isinstance(input, Tensor):
            input = api.tensor(input)
        input = as_masked_tensor(input, api.ones_like(input, dtype=_t.bool_))
    return where(input, condition, other)


def softmax(self, dim, dtype=None):
    """Softmax over the masked-in elements, as PyTorch's ``_masked_softmax``: masked-out elements
    are 0, a fully masked-out slice is nan, and the gradient of the data is 0 at both."""
    from ..ops import api
    import math
    data, mask = self.get_data(), self._masked_mask
    d = M._canonical_dim(dim, data.ndim)[0]
    keep = mask.any(d, keepdim=True)
    # a fully masked-out slice softmaxes zeros instead of -infs (finite, so its gradient is a
    # finite 0 rather than nan) and is set to nan after
    x = api.where(mask, data, api.tensor(-math.inf, dtype=data.dtype))
    x = api.where(keep, x, api.tensor(0, dtype=data.dtype))
    out = _softmax(x, d, dtype)
    out = api.where(mask, out, api.tensor(0, dtype=out.dtype))
    out = api.where(keep, out, api.tensor(math.nan, dtype=out.dtype))
    return as_masked_tensor(out, mask)


def _softmax(x, d, dtype):
    import ember
    return ember.nn.functional.softmax(x, d, dtype=dtype)


def _clone(self, *, memory_format=None):
    return as_masked_tensor(self.get_data().clone(), self._masked_mask.clone())


def _to(self, *args, **kwargs):
    data = self.get_data().to(*args, **kwargs)
    kw = dict(kwargs)
    kw.pop("dtype", None)
    a = tuple(x for x in args if not isinstance(x, _t.dtype))
    a = tuple(x.device if isinstance(x, Tensor) else x for x in a)
    mask = self._masked_mask.to(*a, **kw)
    if data is self._masked_data and mask is self._masked_mask:
        return self
    return as_masked_tensor(data, mask)


def _contiguous(self, memory_format=None):
    return as_masked_tensor(self.get_data().contiguous(), self._masked_mask.contiguous())


def _to_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None or dtype is self.dtype else _to(self, dtype)


def _copy_(self, src, non_blocking=False):
    """Copy ``src``'s data (a MaskedTensor's, or a dense tensor) into this one's; the mask stays
    (as torch's MaskedTensor: it does not compare the masks)."""
    _inplace_guard(self, "copy_")
    data = _plain(self._masked_data)
    data.copy_(_plain(src._masked_data) if is_masked_tensor(src) else src)
    self._bump_version()
    return self


def _is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def _no_sparse(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"ember.masked: {name} of a MaskedTensor (a MaskedTensor with sparse data) "
                                  f"is not supported; ember's MaskedTensor holds strided data only")
    method.__name__ = name
    return method


_OPERATORS = {   # Python operator -> the op it is in PyTorch
    "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__floordiv__": "floor_divide",
    "__mod__": "remainder", "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
    "__lshift__": "bitwise_left_shift", "__rshift__": "bitwise_right_shift", "__eq__": "eq", "__ne__": "ne",
    "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge"}
_REFLECTED = {"__radd__": "add", "__rmul__": "mul", "__rtruediv__": "div",
              "__rfloordiv__": "floor_divide", "__rmod__": "remainder", "__rand__": "bitwise_and",
              "__ror__": "bitwise_or", "__rxor__": "bitwise_xor"}
_INPLACE_OPERATORS = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
                      "__ifloordiv__": "floor_divide_", "__imod__": "remainder_", "__iand__": "bitwise_and_",
                      "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_"}


def install():
    """Put the rules on MaskedTensor (each looks the dense op up when called, so a Tensor method
    ember lacks fails there, naming it, instead of breaking this import)."""
    C = MaskedTensor
    for n in UNARY_NAMES:
        setattr(C, n, _unary(n))
    for n in INPLACE_UNARY_NAMES:
        setattr(C, n, _inplace_unary(n))
    for n in BINARY_NAMES:
        setattr(C, n, _binary(n))
    for n in INPLACE_BINARY_NAMES:
        setattr(C, n, _inplace_binary(n))
    for op, n in _OPERATORS.items():
        setattr(C, op, _binary(n))
    for op, n in _REFLECTED.items():
        setattr(C, op, _reflected(n))
    for op, n in _INPLACE_OPERATORS.items():
        setattr(C, op, getattr(C, n))
    C.__neg__ = C.neg
    C.__abs__ = C.abs
    C.__invert__ = C.bitwise_not
    C.__pos__ = C.positive
    C.__pow__ = C.pow
    C.__rpow__ = _rpow
    C.__rsub__ = _rsub
    for n in REDUCE_NAMES:
        setattr(C, n, _reduction(n))
    for n in PASSTHROUGH_NAMES:
        setattr(C, n, _passthrough(n))
    C.__hash__ = Tensor.__hash__      # defining __eq__ would otherwise drop it
    C.mT = property(lambda self: self.transpose(-2, -1), doc="The last two dims swapped (data and mask).")
    C.where = where
    C.softmax = softmax
    C.clone = _clone
    C.to = _to
    C.contiguous = _contiguous
    C.to_dense = _to_dense
    C.copy_ = _copy_
    C.is_same_size = _is_same_size
    for n in ("float", "double", "half", "int", "long", "bool", "short", "char"):
        dt = {"float": _t.float32, "double": _t.float64, "half": _t.float16, "int": _t.int32,
              "long": _t.int64, "bool": _t.bool_, "short": _t.int16, "char": _t.int8}[n]
        setattr(C, n, (lambda dt: lambda self, memory_format=None: _to(self, dt))(dt))
    for n in ("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr",
              "to_sparse_bsc"):
        setattr(C, n, _no_sparse(n))


def _rsub(self, other):
    """``number - mt``: PyTorch's MaskedTensor has no rule for rsub, so Python's TypeError."""
    return NotImplemented


def _rpow(self, other):
    """``number ** mt``: no rule in PyTorch's MaskedTensor either, so Python's TypeError."""
    return NotImplemented


# ---------------------------------------------------------------------- top-level functions
_ROUTED_FUNCTIONS = frozenset(UNARY_NAMES + BINARY_NAMES + REDUCE_NAMES + PASSTHROUGH_NAMES
                              + ("softmax", "log_softmax", "clone", "detach", "contiguous"))


def route_function(op, args):
    """``ember.<op>(...)`` with a MaskedTensor: the method on the MaskedTensor in ``self``'s place
    (``where``: the MaskedTensor ``self`` after the condition), the arguments as the call spelled
    them; NotImplemented for ops a MaskedTensor does not support or with it elsewhere."""
    from .._torch_function import args_as_called
    from ..ops.registry import _REQUIRED
    name = op.name
    if name == "where" and len(args) == 3 and is_masked_tensor(args[1]):
        return args[1].where(args[0], args[2])
    method = MaskedTensor.__dict__.get(name) if name in _ROUTED_FUNCTIONS else None
    if method is None or not args or not is_masked_tensor(args[0]):
        return NotImplemented          # (an inherited Tensor method would be this very function)
    pos, kw = args_as_called(op.params, args, _REQUIRED)
    return method(*pos, **kw)
