"""MaskedTensor: a dense data tensor plus a bool mask of which elements are specified.

As PyTorch's prototype ``torch.masked.MaskedTensor`` it is an ``ember.Tensor``
subclass whose ops act on the data and combine the masks (see _methods.py).
It holds

* ``_masked_data``: a plain ember tensor with no autograd history;
* ``_masked_mask``: a bool tensor of the same shape;
* ``_data``: a ``MaskedStorage`` (shape and dtype only), so any op without a
  MaskedTensor rule fails instead of computing on masked-out values.

Autograd never looks inside, as for ember.sparse: an op takes the data
through ``_GetData`` (whose gradient is a MaskedTensor with the input's mask),
computes with ordinary ember ops, and wraps the result with ``_FromData``
(whose gradient is the data of the incoming gradient). So ``mt.grad`` of a
leaf is a MaskedTensor, as in PyTorch. The class sets ``_sparse_layout`` (the
flag Tensor uses for "no dense storage"): the autograd engine then sums and
accumulates its gradients with ``+`` (MaskedTensor's own) and ember.compile
breaks the graph on it, running the code eagerly.
"""
from __future__ import annotations

import warnings

from .. import types as _t
from .._state import STATE
from ..autograd.function import Function
from ..tensor import Tensor, _make
from ._storage import MaskedStorage

_SUPPORTED = ("float16", "float32", "float64", "bool", "int8", "int16", "int32", "int64")


def is_masked_tensor(obj, /):
    """True if ``obj`` is a MaskedTensor."""
    return isinstance(obj, MaskedTensor)


def _plain(t):
    """An alias of ``t``'s array as a plain tensor with no autograd history."""
    return _make(t._data, t.device, t.dtype)


def _validate(data, mask):
    if is_masked_tensor(data) or not isinstance(data, Tensor):
        raise TypeError("data must be a Tensor")
    if is_masked_tensor(mask) or not isinstance(mask, Tensor):
        raise TypeError("mask must be a Tensor")
    if data._sparse_layout or mask._sparse_layout:
        raise NotImplementedError(
            f"ember.masked: a MaskedTensor with sparse data or mask (layouts {data.layout} and {mask.layout}) "
            f"is not supported; pass strided tensors (.to_dense())")
    if mask.dtype is not _t.bool_:
        raise TypeError("mask must have dtype bool.")
    if str(data.dtype).rsplit(".", 1)[-1] not in _SUPPORTED:
        raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
    if data.dim() != mask.dim():
        raise ValueError("data.dim() must equal mask.dim()")
    if data.shape != mask.shape:
        raise ValueError("data.size() must equal mask.size()")


def _new_mt(data, mask):
    """A MaskedTensor over plain ``data`` and ``mask`` (no autograd recorded, no copies)."""
    if data._requires_grad or data._grad_fn is not None:
        data = _plain(data)
    if mask._requires_grad or mask._grad_fn is not None:
        mask = _plain(mask)
    t = object.__new__(MaskedTensor)
    t._data = MaskedStorage(data._data)
    t.dtype = data.dtype
    t.device = data.device
    t._vc = None
    t._masked_data = data
    t._masked_mask = mask
    return t


class MaskedTensor(Tensor):
    """A tensor whose elements where ``mask`` is False are unspecified (see the module doc)."""

    _sparse_layout = True
    _compile_unsupported = "a MaskedTensor is not supported by ember.compile; the code using it runs eagerly"

    def __new__(cls, data, mask, requires_grad=False):
        _validate(data, mask)
        warnings.warn("The PyTorch API of MaskedTensors is in prototype stage and will change in the near "
                      "future. Please open a Github issue for features requests and see our documentation "
                      "on the torch.masked module for further information about the project.",
                      UserWarning, stacklevel=2)
        if data.requires_grad:
            warnings.warn("It is not recommended to create a MaskedTensor with a tensor that requires_grad. "
                          "To avoid this, you can use data.detach().clone()", UserWarning, stacklevel=2)
        out = _new_mt(_plain(data).clone(), _plain(mask).clone())
        if requires_grad:
            out.requires_grad_(True)
        return out

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __ember_route__(cls, op, args):
        """Top-level functions (``ember.exp(mt)``, ``ember.add(mt, x)``, ``ember.sum(mt, 0)``,
        ``ember.where(c, mt, y)``) reach the dispatcher's slow path with a MaskedTensor argument
        (ember/_torch_function.py ``route``): the MaskedTensor method of the same name takes
        the call, as torch's MaskedTensor handles them; other ops return NotImplemented and
        fail reading the storage with torch's error."""
        from . import _methods
        return _methods.route_function(op, args)

    # -- the two halves ------------------------------------------------------------
    def get_data(self):
        """The data (masked-out elements included), differentiable: its gradient is masked."""
        if self._requires_grad and STATE.grad_enabled:
            return _GetData.apply(self)
        return _plain(self._masked_data)

    def get_mask(self):
        return self._masked_mask

    def to_tensor(self, value):
        """A dense tensor: the data with the masked-out elements set to ``value``."""
        return self.get_data().masked_fill(~self._masked_mask, value)

    def _set_data_mask(self, data, mask):
        _validate(data, mask)
        self._masked_data, self._masked_mask = _plain(data), _plain(mask)
        self._data = MaskedStorage(data._data)
        self.dtype = data.dtype

    # -- layout ---------------------------------------------------------------------
    @property
    def is_sparse(self):
        return False

    def is_sparse_coo(self):
        return False

    def is_sparse_csr(self):
        return False

    def stride(self, dim=None):
        return self._masked_data.stride(dim) if dim is not None else self._masked_data.stride()

    def is_contiguous(self, memory_format=None):
        if memory_format is None:
            return self._masked_data.is_contiguous()
        return self._masked_data.is_contiguous(memory_format=memory_format)

    def data_ptr(self):
        raise RuntimeError("ember.masked: a MaskedTensor has no data pointer of its own; use "
                           "mt.get_data().data_ptr()")

    def numpy(self, *, force=False):
        raise TypeError("ember.masked: can't convert a MaskedTensor to numpy (it has masked-out elements); "
                        "use mt.to_tensor(value).numpy() or mt.get_data().numpy()")

    def __array__(self, *args, **kwargs):
        self.numpy()

    def tolist(self):
        raise TypeError("ember.masked: tolist() of a MaskedTensor is not supported (it has masked-out "
                        "elements); use mt.to_tensor(value).tolist()")

    def item(self):
        if not bool(self._masked_mask.all()):
            raise ValueError("__torch_dispatch__, aten._local_scalar_dense: expected a mask tensor")
        return self._masked_data.item()

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __format__(self, spec):
        return object.__format__(self, spec) if not spec else format(self.item(), spec)

    def __repr__(self, *, tensor_contents=None):
        from ._print import masked_repr
        return masked_repr(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        out = _new_mt(self._masked_data.clone(), self._masked_mask.clone())
        if self._requires_grad and self.is_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        raise NotImplementedError("ember.masked: pickling (ember.save) a MaskedTensor is not supported; "
                                  "save mt.get_data() and mt.get_mask()")

    # -- copies ------------------------------------------------------------------------
    def detach(self):
        return _new_mt(self._masked_data, self._masked_mask)

    def detach_(self):
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self):
        return _new_mt(self._masked_data, self._masked_mask)

    @data.setter
    def data(self, value):
        raise NotImplementedError("ember.masked: assigning .data of a MaskedTensor is not supported")

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self


# ---------------------------------------------------------------------- the autograd boundary
def _node_repr(self):
    return f"<{type(self).__name__} object at {hex(id(self))}>"


class _GetData(Function):
    """A MaskedTensor -> its data; the gradient is a MaskedTensor with the input's mask."""

    @staticmethod
    def forward(ctx, mt):
        ctx.set_materialize_grads(False)
        ctx.mask = mt._masked_mask
        return _plain(mt._masked_data)

    @staticmethod
    def backward(ctx, grad):
        if grad is None or is_masked_tensor(grad):
            return grad
        return as_masked_tensor(grad, ctx.mask)


class _FromData(Function):
    """data (and a mask) -> a MaskedTensor; the gradient of the data is the incoming gradient's data."""

    @staticmethod
    def forward(ctx, data, mask):
        ctx.set_materialize_grads(False)
        return _new_mt(data, mask)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None
        if is_masked_tensor(grad):
            grad = grad.get_data()
        return grad, None


for _cls, _name in ((_GetData, "GetDataBackward"), (_FromData, "MaskedTensorConstructorBackward")):
    _b = _cls._backward_cls
    _b.__name__ = _b.__qualname__ = _name
    _b.__repr__ = _node_repr


def as_masked_tensor(data, mask):
    """A MaskedTensor over ``data`` that keeps ``data``'s autograd history (no copy)."""
    _validate(data, mask)
    if data._requires_grad and STATE.grad_enabled:
        return _FromData.apply(data, mask)
    return _new_mt(data, mask)


def masked_tensor(data, mask, requires_grad=False):
    """A new leaf MaskedTensor over copies of ``data`` and ``mask`` (torch.masked.masked_tensor)."""
    return MaskedTensor(data, mask, requires_grad)
