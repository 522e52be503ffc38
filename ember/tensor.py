"""Tensor and Parameter.

A Tensor owns a backend array (numpy on cpu, cupy on cuda). Views are
backend views of the same memory; ``_base`` names the tensor that owns the
storage and ``_vc`` (a one-element list) is the version counter a view
shares with its base. Every in-place op bumps it, and saved tensors compare
it at backward time.

Only the four fields every tensor needs are slots. Autograd fields live in
the instance ``__dict__`` with class-level defaults, so a tensor that never
meets autograd costs four attribute writes to make.

Operator methods (``add``, ``sum``, ``view``, ...) are attached to the class
by ``ember.ops`` from the registry: nothing here knows about individual ops
except the Python operator protocol, which forwards to them.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from . import types as _t
from ._fake import FakeArray
from ._state import STATE
from . import _torch_function as _tf
from .types import Size, device as _device_cls, cpu as _cpu
from ._layout import strided as _STRIDED


class Tensor:
    __slots__ = ("_data", "dtype", "device", "_vc", "__dict__", "__weakref__")

    # autograd / view defaults (overridden per instance when set)
    _requires_grad = False
    _grad = None
    _grad_fn = None
    _output_nr = 0
    _base = None
    _view_version = 0
    _acc = None            # weakref to this leaf's AccumulateGrad node
    _hooks = None          # leaf hooks (run before accumulation)
    _post_acc_hooks = None
    _retains_grad = False
    _is_param = False
    _diff_view = False     # a view made by a differentiable view op (not detach())
    _detach_alias = False  # made by detach() / .data: shares storage (_base) but is no view for detach_

    # ------------------------------------------------------------------ __torch_function__
    __torch_function__ = classmethod(_tf.default_torch_function)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _tf.note_tensor_class(cls)

    # ------------------------------------------------------------------ creation
    def __new__(cls, *args, **kwargs):
        # Legacy constructor: ember.Tensor([1., 2.]) / ember.Tensor(2, 3).
        if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
            # Tensor(other) / MySubclass(other): a differentiable alias of ``other`` (torch's)
            other = args[0]
            return other.view_as(other) if cls is Tensor else other.as_subclass(cls)
        self = object.__new__(cls)
        device = kwargs.pop("device", None)
        if args or kwargs:
            if kwargs:
                raise TypeError(f"Tensor() got unexpected keyword arguments {sorted(kwargs)}")
            if len(args) == 1 and not isinstance(args[0], numbers.Integral):
                arr = np.asarray(args[0], dtype=_t.get_default_dtype().np)
            else:
                if not all(isinstance(a, numbers.Integral) for a in args):
                    raise TypeError("Tensor(*sizes) expects integer sizes")
                arr = np.empty(tuple(int(a) for a in args), dtype=_t.get_default_dtype().np)
            self._data = np.asarray(arr, order="C")
        else:
            self._data = np.empty((0,), dtype=_t.get_default_dtype().np)
        self.dtype = _t.from_numpy_dtype(self._data.dtype)
        self.device = _cpu if device is None else _t.as_device(device)
        if self.device.type != "cpu":  # the data lives on the device (cupy), not in a numpy array
            from .ops.registry import xp_of
            self._data = xp_of(self.device).asarray(self._data)
        self._vc = None
        return self

    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def _make_subclass(cls, data, require_grad=False, **kwargs):
        """torch's ``Tensor._make_subclass``: a ``cls`` instance sharing ``data``'s memory, a leaf
        (detached from ``data``'s graph) with ``requires_grad=require_grad``."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is "
                            "not possible. Make sure your class inherits from Tensor.")
        if not isinstance(data, Tensor):
            raise TypeError(f"_make_subclass(): argument 'data' (position 2) must be Tensor, not "
                            f"{type(data).__name__}")
        unknown = set(kwargs) - {"dispatch_sizes_strides_policy", "dispatch_device", "dispatch_layout"}
        if unknown:
            raise TypeError(f"_make_subclass() got an unexpected keyword argument '{sorted(unknown)[0]}'")
        out = object.__new__(cls)
        out._data = data._data
        out.dtype = data.dtype
        out.device = data.device
        vc = data._vc
        if vc is None:
            vc = data._vc = [0]
        out._vc = vc
        if require_grad:
            out.requires_grad_(True)
        return out

    @staticmethod
    def _make_wrapper_subclass(cls, size, strides=None, storage_offset=None, memory_format=None, dtype=None,
                               layout=None, device=None, pin_memory=False, requires_grad=False,
                               dispatch_sizes_strides_policy=None, dispatch_device=False, dispatch_layout=False,
                               _extra_dispatch_keys=None, storage_size=None):
        """torch's ``Tensor._make_wrapper_subclass``: a ``cls`` instance with the given metadata and no
        data of its own (a ``__torch_dispatch__`` subclass keeps its real tensors as attributes and
        its handler computes every op; see ``ember.ops.registry._subclass_dispatch``)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is "
                            "not possible. Make sure your class inherits from Tensor.")
        if cls not in _tf.DISPATCH_CLASSES:
            raise RuntimeError(f"_make_wrapper_subclass: {cls.__qualname__} defines no __torch_dispatch__, so "
                               "nothing could compute its ops (ember has no data for a wrapper instance)")
        dt = _t.get_default_dtype() if dtype is None else _t.as_dtype(dtype)
        shape = tuple(int(n) for n in size)
        out = object.__new__(cls)
        out._data = FakeArray(shape, dt, None if strides is None else tuple(int(s) for s in strides),
                              int(storage_offset or 0))
        out.dtype = dt
        out.device = STATE.default_device if device is None else _t.as_device(device)
        out._vc = None
        if requires_grad:
            out.requires_grad_(True)
        return out

    # ------------------------------------------------------------------ metadata
    @property
    def _fake(self):
        """A fake tensor (``ember.fx.fake_tensor``): metadata only, no data."""
        return type(self._data) is FakeArray

    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    ndimension = dim

    def numel(self):
        n = self._data.size
        # a fake tensor with symbolic sizes: keep the product symbolic (int() would specialise it)
        return n if hasattr(n, "expr") else int(n)

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def stride(self, dim=None):
        d = self._data
        if type(d) is FakeArray:
            st = d.estrides
        else:
            isz = d.itemsize
            st = tuple(s // isz for s in d.strides)
            if not d.size and d.ndim and not any(st):     # (numpy zeroes a new empty array's strides;
                st = _empty_strides(d.shape)              # a view of one keeps its own)
        if dim is None:
            return st
        return st[_wrap_dim(dim, self._data.ndim)]

    def data_ptr(self):
        if self.device.type == "meta" or self.__class__ in _tf.DISPATCH_CLASSES:
            return 0                   # torch's: a meta tensor or a wrapper subclass has no memory
        return _data_ptr(self._data)

    def share_memory_(self):
        """Move this tensor's data into a named shared-memory block (``ember.multiprocessing``),
        so that processes it is sent to through ``ember.multiprocessing`` queues/arguments map
        the same memory. A no-op when already shared. As ``data = ...``, views made of the
        tensor before the call keep the old memory."""
        from .multiprocessing._shared import share_array, shared_name
        if self.device.type != "cpu":
            return self            # PyTorch: a no-op for CUDA tensors
        if type(self._data) is not np.ndarray:
            raise RuntimeError("share_memory_: only tensors with real (not fake) data can be shared")
        if shared_name(self._data) is None:
            self._data = share_array(self._data)
        return self

    def is_shared(self):
        """True when the data lies in a shared-memory block (``share_memory_``)."""
        if type(self._data) is not np.ndarray:
            return False
        from .multiprocessing._shared import shared_name
        return shared_name(self._data) is not None

    def pin_memory(self, device=None):
        """A copy in page-locked host memory for fast, asynchronous copies to the accelerator;
        RuntimeError when there is no accelerator, as a CPU-only PyTorch (see ember/_pinned.py)."""
        from ._pinned import pin_memory
        return pin_memory(self, device)

    def is_pinned(self, device=None):
        """Whether the data lies in page-locked host memory (always False without an accelerator)."""
        from ._pinned import is_pinned
        return is_pinned(self, device)

    def storage_offset(self):
        if type(self._data) is FakeArray:
            return self._data.offset
        from .storage import storage_start     # the first byte of this tensor's storage (ember/storage.py)
        return (_data_ptr(self._data) - storage_start(self)) // self._data.itemsize

    def is_contiguous(self, memory_format=None):
        if memory_format is not None:      # channels_last / channels_last_3d (ember/_memory_format.py)
            from ._memory_format import is_contiguous_as
            res = is_contiguous_as(self, memory_format)
            if res is not None:
                return res
        d = self._data
        if d.size <= 1:
            return True
        expected = 1
        isz = d.itemsize
        for n, s in zip(reversed(d.shape), reversed(d.strides)):
            if n != 1 and s != expected * isz:
                return False
            expected *= n
        return True

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        return self.dtype.is_complex

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_meta(self):
        return self.device.type == "meta"

    _sparse_layout = False   # True on ember.sparse's SparseTensor (a class attribute: no per-tensor cost)

    @property
    def layout(self):
        return _STRIDED

    @property
    def is_sparse(self):
        return False

    @property
    def _version(self):
        vc = self._vc
        return 0 if vc is None else vc[0]

    def _bump_version(self):
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        vc[0] += 1

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # identity hash (as torch): object's C slot, not a Python method -- guards and the autograd
    # engine look tensors up in dicts a few hundred times per optimizer step
    __hash__ = object.__hash__

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if self._grad_fn is not None and not flag:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if flag and self.dtype.category < 2:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad_fn(self):
        if self._diff_view and self._requires_grad:
            from .autograd.graph import refresh_view_grad_fn
            refresh_view_grad_fn(self)
        return self._grad_fn

    @property
    def grad(self):
        g = self._grad
        if g is None and self._grad_fn is not None and not self._retains_grad:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
                ".grad attribute won't be populated during autograd.backward(). If you indeed want "
                "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
                "non-leaf Tensor.", UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(f"assigned grad has data of a different size: expected "
                                   f"{list(self.shape)}, got {list(value.shape)}")
            if value.dtype is not self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def output_nr(self):
        return self._output_nr

    def retain_grad(self):
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None:
            return
        if self._retains_grad:
            return
        from .autograd.graph import install_retain_grad
        install_retain_grad(self)

    @property
    def retains_grad(self):
        return self._retains_grad

    def register_hook(self, hook):
        from .autograd.graph import register_tensor_hook
        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        from .autograd.graph import register_post_accumulate_hook
        return register_post_accumulate_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from .autograd import backward
        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self):
        if self.__class__ in _tf.DISPATCH_CLASSES:     # a wrapper subclass: its handler makes the alias
            return _detach_through_handler(self)
        if _tf.RECORDERS and (r := _tf.record_detach(self)) is not None:
            return r                                    # a user's make_fx graph: aten.detach
        out = _alias(self)
        return out

    def detach_(self):
        # PyTorch refuses any view, made by a view op with or without grad (its history is the
        # base's, so detaching it alone would leave base and view disagreeing); a detach() or
        # .data alias is no view there and detaches like any tensor. Views taken from self
        # before this call keep their own history, as in PyTorch; those taken after have none.
        if self._base is not None and not self._detach_alias:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                "refer to the Optimizer.zero_grad() function in ember/optim/optimizer.py as the solution.")
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def _is_view(self):
        """torch's ``Tensor._is_view()``: True for the result of a view op (``b[0]``, ``b.t()``,
        also under no_grad). A ``detach()`` or ``.data`` alias is no view in torch, although
        ember keeps its storage owner in ``_base`` for storage, aliasing and mutation tracking."""
        return self._base is not None and not self._detach_alias

    @property
    def data(self):
        out = _alias(self)
        out._vc = None  # .data does not share the version counter (unlike detach())
        return out

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._data = value._data
        self.dtype = value.dtype
        self.device = value.device

    # ------------------------------------------------------------------ conversion
    def item(self):
        if self._fake:
            return _no_data("item", self)
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return _host(self._data).reshape(()).item() if self.dtype is not _t.bfloat16 else float(
            _host(self._data).reshape(()).astype(np.float32))

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Whether every element is close to ``other``'s (``isclose``, broadcast): a Python bool."""
        if not isinstance(other, Tensor):
            raise TypeError(f"allclose(): argument 'other' must be Tensor, not {type(other).__name__}")
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def equal(self, other):
        """True when ``other`` has this shape and equal values (compared after type promotion,
        as torch.equal; NaN equals nothing): a Python bool, never an error for another shape."""
        if not isinstance(other, Tensor):
            raise TypeError(f"equal(): argument 'other' must be Tensor, not {type(other).__name__}")
        if tuple(self.shape) != tuple(other.shape):
            return False
        return bool((self == other).all())

    def tolist(self):
        if self._fake:
            _no_data("tolist", self)
        arr = _host(self._data)
        if self.dtype is _t.bfloat16 or self.dtype is _t.float16:
            arr = arr.astype(np.float64)
        return arr.tolist()

    def numpy(self, *, force=False):
        if self._fake:
            _no_data("numpy", self)
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if self.dtype._limited == "float8":     # numpy has no float8 (torch refuses too)
            raise TypeError(f"Got unsupported ScalarType {self.dtype.legacy_name}")
        if self.device.type != "cpu":
            if not force:
                raise TypeError(f"can't convert {self.device.type}:{self.device.index} device type tensor "
                                "to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")
            return _host(self._data)
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __dlpack__(self, *args, **kwargs):
        """DLPack export (``np.from_dlpack(t)``, ``torch.from_dlpack(t)``): the consumer shares
        this tensor's memory, through the numpy/cupy array holding it."""
        if self._fake:
            _no_data("__dlpack__", self)
        if self._requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        try:
            return self._data.__dlpack__(*args, **kwargs)
        except (BufferError, ValueError) as e:       # (a TypeError passes: consumers retry without kwargs)
            raise BufferError(f"cannot export a {self.dtype} tensor through DLPack: {e}") from e

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __float__(self):
        v = self.item()
        if type(v) is complex:
            _complex_to_real(v, "double")
            v = v.real
        return float(v)

    def __int__(self):
        v = self.item()
        if type(v) is complex:
            _complex_to_real(v, "int64_t")
            v = v.real
        return int(v)

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype is _t.bool_ or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __complex__(self):
        return complex(self.item())

    def __format__(self, spec):
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        from .ops import api
        return iter(api.unbind(self, 0))

    def __reversed__(self):
        from .ops import api
        return iter(api.flip(self, (0,)).unbind(0))

    def __contains__(self, element):
        return bool((self == element).any().item())

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        out = type(self).__new__(type(self))
        out._data = self._data.copy()
        out.dtype = self.dtype
        out.device = self.device
        out._vc = None
        out._requires_grad = self._requires_grad
        if self._grad is not None:
            import copy as _copy
            out._grad = _copy.deepcopy(self._grad, memo)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        # values, dtype, shape, strides, requires_grad, class; views of one storage pickle it once
        from ._torch_pickle import reduce_tensor
        return reduce_tensor(self)

    def __repr__(self, *, tensor_contents=None):
        from ._tensor_str import repr_of
        if self.__class__ in _tf.PLAIN_CLASSES:
            return repr_of(self)
        return repr_of(self, prefix=type(self).__name__)     # torch: "MyTensor([1., 2.])"

    def __str__(self):
        return self.__repr__()

    def __setstate__(self, state):
        # (ember's pickles rebuild the tensor whole; this takes a plain attribute dict)
        if not isinstance(state, dict):
            raise RuntimeError(f"ember: unsupported tensor pickle state of type {type(state).__name__}")
        for k, v in state.items():
            setattr(self, k, v)

    # ------------------------------------------------------------------ devices / dtypes
    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; copy=, non_blocking=."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _t.dtype):
                dtype = a
            elif isinstance(a, (str, _device_cls)):
                device = a
            elif isinstance(a, bool):
                pass
            elif isinstance(a, type) or isinstance(a, np.dtype):
                dtype = _t.as_dtype(a)
            else:
                raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
        from .ops import api
        out = api._to_copy_if_needed(self, dtype=None if dtype is None else _t.as_dtype(dtype),
                                     device=None if device is None else _t.as_device(device),
                                     copy=copy)
        if memory_format is not None and memory_format != "preserve_format":
            from ._memory_format import _to_memory_format
            out = _to_memory_format(self, out, memory_format)
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else _t.device("cuda", device) if isinstance(device, int)
                       else device)

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return f"{_t.PUBLIC_PREFIX}{self.dtype.legacy_name}Tensor"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            legacy = dtype.rsplit(".", 1)[-1][:-len("Tensor")]
            for d in _t.ALL_DTYPES + _t.LIMITED_DTYPES:
                if d.legacy_name == legacy:
                    return self.to(d)
            raise ValueError(f"invalid type: {dtype!r}")
        return self.to(_t.as_dtype(dtype))

    def float(self):
        return self.to(_t.float32)

    def double(self):
        return self.to(_t.float64)

    def half(self):
        return self.to(_t.float16)

    def bfloat16(self):
        return self.to(_t.bfloat16)

    def int(self):
        return self.to(_t.int32)

    def long(self):
        return self.to(_t.int64)

    def short(self):
        return self.to(_t.int16)

    def char(self):
        return self.to(_t.int8)

    def byte(self):
        return self.to(_t.uint8)

    def bool(self):
        return self.to(_t.bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    # ------------------------------------------------------------------ Python operators
    # Each forwards to the registry binding attached by ember.ops (kept as
    # explicit methods so tracebacks name the operator a user wrote).
    def __add__(self, other):
        return _api.add(self, other)

    def __radd__(self, other):
        return _api.add(self, other)

    def __iadd__(self, other):
        return _api.add_(self, other)

    def __sub__(self, other):
        return _api.sub(self, other)

    def __rsub__(self, other):
        return _api.rsub(self, other)

    def __isub__(self, other):
        return _api.sub_(self, other)

    def __mul__(self, other):
        return _api.mul(self, other)

    def __rmul__(self, other):
        return _api.mul(self, other)

    def __imul__(self, other):
        return _api.mul_(self, other)

    def __truediv__(self, other):
        return _api.div(self, other)

    def __rtruediv__(self, other):
        return _api.rdiv(self, other)

    def __itruediv__(self, other):
        return _api.div_(self, other)

    def __floordiv__(self, other):
        return _api.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _api.floor_divide(_api.scalar_tensor_like(other, self), self)

    def __ifloordiv__(self, other):
        return _api.floor_divide_(self, other)

    def __mod__(self, other):
        return _api.remainder(self, other)

    def __rmod__(self, other):
        return _api.remainder(_api.scalar_tensor_like(other, self), self)

    def __imod__(self, other):
        return _api.remainder_(self, other)

    def __pow__(self, other):
        return _api.pow(self, other)

    def __rpow__(self, other):
        return _api.pow(other, self)

    def __ipow__(self, other):
        return _api.pow_(self, other)

    def __matmul__(self, other):
        return _api.matmul(self, other)

    def __rmatmul__(self, other):
        return _api.matmul(other, self)

    def __neg__(self):
        return _api.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _api.abs(self)

    def __invert__(self):
        return _api.bitwise_not(self)

    def __and__(self, other):
        return _api.bitwise_and(self, other)

    def __rand__(self, other):
        return _api.bitwise_and(self, other)

    def __iand__(self, other):
        return _api.bitwise_and_(self, other)

    def __or__(self, other):
        return _api.bitwise_or(self, other)

    def __ror__(self, other):
        return _api.bitwise_or(self, other)

    def __ior__(self, other):
        return _api.bitwise_or_(self, other)

    def __xor__(self, other):
        return _api.bitwise_xor(self, other)

    def __rxor__(self, other):
        return _api.bitwise_xor(self, other)

    def __ixor__(self, other):
        return _api.bitwise_xor_(self, other)

    def __lshift__(self, other):
        return _api.bitwise_left_shift(self, other)

    def __rshift__(self, other):
        return _api.bitwise_right_shift(self, other)

    def __rlshift__(self, other):        # ``5 << t`` (the Scalar_Tensor overload)
        return _api.bitwise_left_shift(other, self)

    def __rrshift__(self, other):
        return _api.bitwise_right_shift(other, self)

    def __eq__(self, other):
        return _api.eq(self, other)

    def __ne__(self, other):
        return _api.ne(self, other)

    def __lt__(self, other):
        return _api.lt(self, other)

    def __le__(self, other):
        return _api.le(self, other)

    def __gt__(self, other):
        return _api.gt(self, other)

    def __ge__(self, other):
        return _api.ge(self, other)

    def __getitem__(self, index):
        return _api.getitem(self, index)

    def __setitem__(self, index, value):
        _api.setitem(self, index, value)

    # complex parts: views that write through (a real tensor is its own real part)
    @property
    def real(self):
        return _api.real(self)

    @real.setter
    def real(self, value):
        _api.real(self).copy_(value)

    @property
    def imag(self):
        return _api.imag(self)

    @imag.setter
    def imag(self, value):
        _api.imag(self).copy_(value)

    def cfloat(self):
        return self.to(_t.complex64)

    def cdouble(self):
        return self.to(_t.complex128)

    @property
    def T(self):
        if self._data.ndim > 2:
            warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their shape "
                          "is deprecated", UserWarning, stacklevel=2)
        return _api.permute(self, tuple(range(self._data.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return _api.transpose(self, -2, -1)

    @property
    def H(self):
        return self.T.conj() if self.dtype.is_complex else self.T

    @property
    def mH(self):
        return self.mT.conj() if self.dtype.is_complex else self.mT

    def adjoint(self):
        return self.mH

    # new_* factories
    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        return _api.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                           requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, **size_kw):
        if self.__class__ not in _tf.FAST_CLASSES and \
                (r := _new_entry(Tensor.new_zeros, locals(), size, size_kw, ())) is not _tf.PASS:
            return r
        return _api.zeros(*_size_arg("new_zeros", size, size_kw), dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False, **size_kw):
        if self.__class__ not in _tf.FAST_CLASSES and \
                (r := _new_entry(Tensor.new_ones, locals(), size, size_kw, ())) is not _tf.PASS:
            return r
        return _api.ones(*_size_arg("new_ones", size, size_kw), dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False, **size_kw):
        if self.__class__ not in _tf.FAST_CLASSES and \
                (r := _new_entry(Tensor.new_empty, locals(), size, size_kw, ())) is not _tf.PASS:
            return r
        return _api.empty(*_size_arg("new_empty", size, size_kw), dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        if self.__class__ not in _tf.FAST_CLASSES and \
                (r := _new_entry(Tensor.new_full, locals(), (size,), {}, (fill_value,))) is not _tf.PASS:
            return r
        return _api.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


def _new_entry(func, loc, size, size_kw, extra):
    """The protocol for ``x.new_zeros/new_ones/new_empty/new_full`` on a tensor subclass or under a
    mode: ``__torch_function__`` and modes see the method with the caller's arguments; a
    ``__torch_dispatch__`` wrapper's handler gets ``aten.new_zeros`` ... with torch's arguments
    -- ``(self, [sizes], *extra)`` and the dtype/device given plus ``pin_memory=False`` -- and the
    result gets ``requires_grad`` after, as torch's (the aten op has no such argument)."""
    self = loc["self"]
    if self.__class__ not in _tf.DISPATCH_CLASSES or (STATE.tf_modes and not STATE.tf_off):
        return _tf.python_entry(func, loc)
    r = _tf.python_entry(func, loc, None)         # a __torch_function__ on the wrapper comes first
    if r is not _tf.PASS:
        return r
    from .ops.registry import python_dispatch
    sizes = _size_arg(func.__name__, size, size_kw)
    sizes = list(sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, Size)) else sizes)
    kwargs = {k: loc[k] for k in ("dtype", "device") if loc[k] is not None}
    kwargs["pin_memory"] = False
    out = python_dispatch(func.__name__, _aten_new(func.__name__), (self, sizes) + tuple(extra), kwargs)
    if loc["requires_grad"]:
        out.requires_grad_(True)
    return out


def _aten_new(name):
    """What ``aten.<name>`` (new_zeros ...) runs when a handler calls it on plain tensors."""
    def run(self, size, *extra, dtype=None, layout=None, device=None, pin_memory=False):
        return getattr(Tensor, name)(self, size, *extra, dtype=dtype, device=device)
    run.__name__ = name
    return run


def _empty_strides(shape):
    """Strides of a tensor with no elements: numpy reports zeros, torch the row-major strides
    with every size-0 dim counted as 1 (``zeros(2, 0).stride() == (1, 1)``)."""
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def _size_arg(name, size, size_kw):
    """``new_zeros(2, 3)``, ``new_zeros((2, 3))`` and PyTorch's ``new_zeros(size=(2, 3))``."""
    if not size_kw:
        return size
    extra = sorted(set(size_kw) - {"size"})
    if extra:
        raise TypeError(f"{name}() got an unexpected keyword argument '{extra[0]}'")
    if size:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return (size_kw["size"],)


class Parameter(Tensor):
    """A Tensor that a Module registers as a parameter. Shares ``data``'s storage."""

    _is_param = True
    __torch_function__ = _tf._disabled_torch_function_impl    # results of ops on parameters are plain

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor()
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        make = getattr(type(data), "_make_parameter", None)
        if make is not None:        # a wrapper subclass (DTensor) stays one, as torch keeps it
            return make(data, requires_grad)
        self = object.__new__(cls)
        self._data = data._data
        self.dtype = data.dtype
        self.device = data.device
        self._vc = None
        if requires_grad:
            self.requires_grad = True
        return self

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = Parameter(Tensor.__deepcopy__(Parameter._alias_of(self), {}), self._requires_grad)
        memo[id(self)] = out
        return out

    @staticmethod
    def _alias_of(t):
        return _alias(t)


_tf.note_tensor_class(Tensor)     # the base itself (__init_subclass__ sees only subclasses)


# ---------------------------------------------------------------------- helpers
_new = object.__new__


def _make(arr, device=_cpu, dtype=None):
    """Wrap a backend array as a fresh tensor (the kernels' output path)."""
    t = _new(Tensor)
    t._data = arr
    t.dtype = dtype if dtype is not None else _t.from_numpy_dtype(arr.dtype)
    t.device = device
    t._vc = None
    return t


def to_target(args, kwargs):
    """``(dtype, device)`` named by ``t.to(*args, **kwargs)`` (a dtype, a device or string, another
    tensor, or the keywords; None where not given): for the tensor classes with their own ``to``
    (sparse, nested, quantized)."""
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    for a in args:
        if isinstance(a, _t.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, _device_cls)):
            device = a
    return dtype, device


def _alias(t):
    """A new leaf tensor sharing ``t``'s storage and version counter (detach())."""
    out = _new(Tensor)
    out._data = t._data
    out.dtype = t.dtype
    out.device = t.device
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    out._vc = vc
    base = t._base
    out._base = base if base is not None else t
    out._detach_alias = True
    return out


def _complex_to_real(v, cname):
    """torch's checked conversion of a complex element to a real Python number: only a zero
    imaginary part converts."""
    if v.imag != 0:
        raise RuntimeError(f"value cannot be converted to type {cname} without overflow")


def _detach_through_handler(t):
    from .ops.registry import OPS, _subclass_dispatch
    return _subclass_dispatch(OPS["alias"], (t,))


def _no_data(what, t):
    """``what`` needs data ``t`` (a fake or meta tensor) does not have: torch's error for a
    meta tensor, the subclass's handler (``item``) or torch's refusal for a ``__torch_dispatch__``
    wrapper, else the fake-tensor error dynamo breaks the graph on."""
    if t.__class__ in _tf.DISPATCH_CLASSES:
        if what == "item":
            from .ops._aten_namespace import local_scalar_dense
            return t.__class__.__torch_dispatch__(local_scalar_dense, (t.__class__,), (t,), {})
        if what == "numpy":
            raise RuntimeError(".numpy() is not supported for tensor subclasses.")
        raise RuntimeError(f".{what}() is not supported for tensor subclasses, got {t.__class__.__name__}")
    if t.device.type == "meta":
        if what == "item":
            n = t.numel()
            if n != 1:
                raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        if what == "numpy":
            raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    from .ops._meta import DataDependentOutputError
    raise DataDependentOutputError(what)


def _data_ptr(arr):
    try:
        return arr.__array_interface__["data"][0]
    except AttributeError:
        return arr.data.ptr  # cupy


def _host(arr):
    if isinstance(arr, np.ndarray):
        return arr
    return arr.get()  # cupy


def _wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim + n if dim < 0 else dim


class _LazyApi:
    """``ember.ops.api`` resolved on first use (tensor.py is imported first)."""

    def __getattr__(self, name):
        from .ops import api
        globals()["_api"] = api
        return getattr(api, name)


_api = _LazyApi()
