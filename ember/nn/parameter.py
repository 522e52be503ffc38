"""``Parameter`` (defined with Tensor in ``ember.tensor``) and ``Buffer``."""
from __future__ import annotations

from ..tensor import Parameter, Tensor

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


class _BufferMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.__dict__.get("_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """``Buffer(data, persistent=True)``: a tensor that a Module registers as a buffer on assignment."""

    def __new__(cls, data=None, *, persistent=True):
        from .. import empty
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer expects a Tensor, got {type(data).__name__}")
        t = data.detach()
        t.__dict__["_is_buffer"] = True
        t.__dict__["_buffer_persistent"] = bool(persistent)
        return t


_UNINIT_USE_MSG = ("Attempted to use an uninitialized parameter in {}. This error happens when you are using a "
                   "`LazyModule` or explicitly manipulating `ember.nn.parameter.UninitializedParameter` objects. "
                   "When using LazyModules Call `forward` with a dummy batch to initialize the parameters before "
                   "calling ember functions")

_SLOT_DATA = Tensor.__dict__["_data"]      # the real storage slot (shadowed by the property below)


class UninitializedTensorMixin:
    """A tensor without storage yet: ``materialize(shape)`` gives it storage and turns it into
    ``cls_to_become``. Any use of its data before that raises (PyTorch's messages)."""

    cls_to_become = None

    @property
    def _data(self):
        # every op reads ``_data``; an uninitialized tensor has none to give
        raise ValueError(_UNINIT_USE_MSG.format("an ember op"))

    @_data.setter
    def _data(self, value):
        _SLOT_DATA.__set__(self, value)

    def materialize(self, shape, device=None, dtype=None):
        """Create this tensor's storage (``empty(shape)`` on its device/dtype) and turn it into
        ``cls_to_become`` (Parameter or Tensor)."""
        from .. import empty
        if device is None:
            device = self.device
        if dtype is None:
            dtype = self.dtype
        if isinstance(shape, int):
            shape = (shape,)
        t = empty(tuple(shape), device=device, dtype=dtype)
        _SLOT_DATA.__set__(self, t._data)
        self.dtype = t.dtype
        self.device = t.device
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def size(self, dim=None):
        raise ValueError(_UNINIT_USE_MSG.format("size"))

    def numel(self):
        raise ValueError(_UNINIT_USE_MSG.format("numel"))

    def dim(self):
        raise ValueError(_UNINIT_USE_MSG.format("dim"))

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
                           "initialize the parameters before calling `module.share_memory()`.")

    def _retarget(self, device=None, dtype=None):
        """A dtype/device change before materialization (``module.to(...)``, ``.double()``): recorded."""
        from .. import types as _t
        if dtype is not None:
            self.dtype = _t.as_dtype(dtype)
        if device is not None:
            self.device = _t.device(device) if not isinstance(device, _t.device) else device
        return self

    def __repr__(self):
        return f"<{self.__class__.__name__}>"

    def __str__(self):
        return self.__repr__()

    def __reduce_ex__(self, proto):
        return (self.__class__, (self.requires_grad,))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.requires_grad, device=self.device, dtype=self.dtype)
        memo[id(self)] = out
        return out


def _uninit_init(self, requires_grad, device, dtype):
    from .. import empty
    t = empty(0, device=device, dtype=dtype)
    _SLOT_DATA.__set__(self, t._data)
    self.dtype = t.dtype
    self.device = t.device
    self._vc = None
    if requires_grad:
        self.requires_grad = True


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet (used by the ``Lazy*`` modules). It becomes a regular
    ``Parameter`` on ``materialize(shape)``."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        self = object.__new__(cls)
        _uninit_init(self, requires_grad, device, dtype)
        return self


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (used by the ``Lazy*`` norm modules). It becomes a regular
    ``Tensor`` on ``materialize(shape)``."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        self = object.__new__(cls)
        _uninit_init(self, requires_grad, device, dtype)
        return self

    def __init__(self, *args, **kwargs):
        pass


def is_lazy(param):
    """True for an uninitialized (not yet materialized) parameter or buffer."""
    return isinstance(param, UninitializedTensorMixin)
