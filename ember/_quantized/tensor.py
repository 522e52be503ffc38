"""The quantized tensor: integers plus the parameters that map them to real numbers.

``QuantizedTensor`` is an ``ember.Tensor`` subclass (torch's quantized tensors are
``torch.Tensor`` too) holding

* ``_irepr``: a numpy array of the integers (int8 / uint8 / int32), possibly a view
  of another quantized tensor's integers (views share memory, as torch's do);
* ``_qp``: a ``QParams`` -- the scheme, and the scale / zero point, or per-channel
  scales (float64) / zero points / axis;
* ``_data``: a ``QuantizedStorage``, so that dense kernels refuse it (see storage.py).

The operations torch runs on quantized tensors that only move integers around
(views, indexing, copies) are methods here that apply the same numpy operation to
``_irepr`` and carry the parameters along (a per-channel tensor's axis follows the
dimensions). Arithmetic raises torch's errors.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make, _wrap_dim
from . import kernels as K
from . import schemes as QS
from .storage import QuantizedStorage

_EMPTY_STRIDED = ("empty_strided not supported on quantized tensors yet see "
                  "https://github.com/pytorch/pytorch/issues/74540")
_UNIFORM_ONLY = "Setting strides is possible only on uniformly quantized tensor"


class QParams:
    """How a quantized tensor's integers map to reals (immutable; views share one or derive one)."""

    __slots__ = ("qscheme", "scale", "zero_point", "scales", "zero_points", "axis")

    def __init__(self, qscheme, scale=None, zero_point=None, scales=None, zero_points=None, axis=None):
        self.qscheme = qscheme
        self.scale = scale
        self.zero_point = zero_point
        self.scales = scales
        self.zero_points = zero_points
        self.axis = axis

    @property
    def per_channel(self):
        return self.qscheme in QS.PER_CHANNEL

    def with_axis(self, axis, scales=None, zero_points=None):
        return QParams(self.qscheme, scales=self.scales if scales is None else scales,
                       zero_points=self.zero_points if zero_points is None else zero_points, axis=axis)

    def same_as(self, other):
        if self.qscheme is not other.qscheme:
            return False
        if not self.per_channel:
            return self.scale == other.scale and self.zero_point == other.zero_point
        return (self.axis == other.axis and np.array_equal(self.scales, other.scales)
                and np.array_equal(self.zero_points, other.zero_points))


def make_qtensor(irepr, dtype, qp, base=None):
    """A quantized tensor over the integer array ``irepr``; a view of ``base`` when given."""
    t = object.__new__(QuantizedTensor)
    t._irepr = irepr
    t._qp = qp
    t._data = QuantizedStorage(irepr.shape)
    t.dtype = dtype
    t.device = _t.cpu
    t._vc = None
    if base is not None:
        root = base._base if base._base is not None else base
        if root._vc is None:
            root._vc = [0]
        t._base = root
        t._vc = root._vc
    return t


def _is_basic_index(item):
    return item is None or item is Ellipsis or isinstance(item, (slice, numbers.Integral)) and \
        not isinstance(item, bool)


def _normalize_index(index, ndim):
    """A tuple of basic index items with Ellipsis expanded; None when the index is advanced."""
    if not isinstance(index, tuple):
        index = (index,)
    index = tuple(int(i) if isinstance(i, Tensor) and i.ndim == 0 and not i.dtype.is_floating_point
                  and i.dtype is not _t.bool_ else i for i in index)
    if not all(_is_basic_index(i) for i in index):
        return None
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (ndim - n_real) + index[k + 1:]
    return index


class QuantizedTensor(Tensor):
    """A tensor of dtype qint8 / quint8 / qint32 (see the module doc)."""

    is_quantized = True

    @classmethod
    def __ember_route__(cls, op, args):
        """Top-level functions with a quantized tensor first (``ember.flatten(q, 1)``,
        ``ember.relu(q)`` -- so ``nn.ReLU`` / ``F.relu`` --, ``ember.transpose(q, 0, 1)``) reach the
        dispatcher's slow path (ember/_torch_function.py ``route``): the method of the same name
        takes the call; ``cat`` / ``max`` / ``mean`` / pooling ... (``_ROUTED_OPS``) go to ops.py.
        Other ops return NotImplemented and fail reading the storage."""
        name = op.name
        if name in _ROUTED_OPS and args:
            first = args[0][0] if isinstance(args[0], (list, tuple)) and args[0] else args[0]
            if isinstance(first, QuantizedTensor):
                from .._torch_function import args_as_called
                from ..ops.registry import _REQUIRED
                from .ops import routed
                pos, kw = args_as_called(op.params, args, _REQUIRED)
                return routed(name)(*pos, **kw)
        if name not in _ROUTED_FUNCTIONS or not args or not isinstance(args[0], QuantizedTensor):
            return NotImplemented
        from .._torch_function import args_as_called
        from ..ops.registry import _REQUIRED
        pos, kw = args_as_called(op.params, args, _REQUIRED)
        if name == "slice":                     # (narrow and basic indexing decompose to it)
            self, dim, start, end, step = (list(pos) + [0, None, None, 1][len(pos) - 1:])[:5]
            d = _wrap_dim(dim, self._irepr.ndim)
            return self[(slice(None),) * d + (slice(start, end, step),)]
        return getattr(QuantizedTensor, name)(*pos, **kw)

    # -- metadata -----------------------------------------------------------
    def numel(self):
        return int(self._irepr.size)

    nelement = numel

    def stride(self, dim=None):
        st = tuple(s // self._irepr.itemsize for s in self._irepr.strides)
        return st if dim is None else st[_wrap_dim(dim, self._irepr.ndim)]

    def is_contiguous(self, memory_format=None):
        return bool(self._irepr.flags.c_contiguous)

    def data_ptr(self):
        return self._irepr.__array_interface__["data"][0]

    def storage_offset(self):
        root = self._base if self._base is not None else self
        return (self.data_ptr() - root.data_ptr()) // self._irepr.itemsize

    def untyped_storage(self):
        raise NotImplementedError("ember.quantization: untyped_storage() of a quantized tensor is not supported")

    storage = untyped_storage

    def share_memory_(self):
        raise NotImplementedError("ember.quantization: share_memory_() of a quantized tensor is not supported")

    # -- quantizer accessors ------------------------------------------------------
    def qscheme(self):
        return self._qp.qscheme

    def q_scale(self):
        if self._qp.per_channel:
            raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report an enhancement "
                               "request to PyTorch.)")
        return self._qp.scale

    def q_zero_point(self):
        if self._qp.per_channel:
            raise RuntimeError("Expected quantizer->qscheme() == kPerTensorAffine to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report an enhancement "
                               "request to PyTorch.)")
        return self._qp.zero_point

    def _need_per_channel(self):
        if not self._qp.per_channel:
            raise RuntimeError("Expected quantizer->qscheme() == kPerChannelAffine || quantizer->qscheme() == "
                               "kPerChannelAffineFloatQParams to be true, but got false.  (Could this error "
                               "message be improved?  If so, please report an enhancement request to PyTorch.)")

    def q_per_channel_scales(self):
        self._need_per_channel()
        return _make(self._qp.scales.copy(), _t.cpu, _t.float64)

    def q_per_channel_zero_points(self):
        self._need_per_channel()
        return _make(self._qp.zero_points.copy(), _t.cpu)

    def q_per_channel_axis(self):
        self._need_per_channel()
        return self._qp.axis

    def int_repr(self):
        return _make(np.array(self._irepr, order="C", copy=True), _t.cpu)

    def dequantize(self):
        qp = self._qp
        if qp.per_channel:
            arr = K.dequantize_per_channel(self._irepr, qp.scales, qp.zero_points, qp.axis)
        else:
            arr = K.dequantize_per_tensor(self._irepr, qp.scale, qp.zero_point)
        return _make(_c_order(arr.astype(np.float32, copy=False)), _t.cpu, _t.float32)

    # -- conversions ----------------------------------------------------------
    def numpy(self, *, force=False):
        raise TypeError(f"Got unsupported ScalarType {self.dtype.legacy_name}")

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"Got unsupported ScalarType {self.dtype.legacy_name}")

    def tolist(self):
        raise RuntimeError("load_scalar: invalid type")

    def item(self):
        if self._irepr.size != 1:
            raise RuntimeError(f"a Tensor with {self._irepr.size} elements cannot be converted to Scalar")
        return float(self.dequantize()._data.reshape(()))

    def __index__(self):
        raise TypeError("only integer tensors of a single element can be converted to an index")

    def to(self, *args, **kwargs):
        from ..tensor import to_target
        dtype, device = to_target(args, kwargs)
        if device is not None and _t.as_device(device).type != "cpu":
            raise NotImplementedError("ember.quantization: quantized tensors live on the cpu only")
        if dtype is not None and _t.as_dtype(dtype) is not self.dtype:
            if _t.as_dtype(dtype) in _t.QUANTIZED_DTYPES:
                raise RuntimeError("Expected self.scalar_type() == src.scalar_type() to be true, but got false.  "
                                   "(Could this error message be improved?  If so, please report an "
                                   "enhancement request to PyTorch.)")
            raise RuntimeError("Creation of quantized tensor requires quantized dtype like torch.quint8")
        return self.clone() if kwargs.get("copy") else self

    def cpu(self):
        return self

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return f"{_t.PUBLIC_PREFIX}quantized.{self.dtype.legacy_name}Tensor"
        return self.to(_t.as_dtype(dtype))

    def float(self):
        return self.to(_t.float32)

    def double(self):
        return self.to(_t.float64)

    # -- copies and views -----------------------------------------------------------
    def _derive(self, irepr, qp=None, view=True):
        return make_qtensor(irepr, self.dtype, self._qp if qp is None else qp, base=self if view else None)

    def clone(self, *, memory_format=None):
        return self._derive(np.array(self._irepr, copy=True, order="C"), view=False)

    def contiguous(self, memory_format=None):
        if self._irepr.flags.c_contiguous:
            return self
        if self._qp.per_channel:
            raise RuntimeError(_UNIFORM_ONLY)
        return self._derive(np.array(self._irepr, order="C", copy=True), view=False)

    def detach(self):
        return self._derive(self._irepr)

    @property
    def data(self):
        out = self._derive(self._irepr)
        out._vc = None
        return out

    def __deepcopy__(self, memo):
        out = self.clone()
        memo[id(self)] = out
        return out

    def _check_channel_prefix(self, new_shape, what):
        qp = self._qp
        if qp.per_channel and tuple(new_shape[:qp.axis + 1]) != tuple(self._irepr.shape[:qp.axis + 1]):
            raise NotImplementedError(
                f"ember.quantization: {what} of a per-channel quantized tensor that changes the dimensions up "
                f"to its channel axis ({qp.axis}) is not supported: shape {list(self._irepr.shape)} -> "
                f"{list(new_shape)}")

    def _target_shape(self, shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, _t.Size)):
            shape = tuple(shape[0])
        shape = [int(s) for s in shape]
        n = self._irepr.size
        if shape.count(-1) > 1:
            raise RuntimeError("only one dimension can be inferred")
        if -1 in shape:
            rest = int(np.prod([s for s in shape if s != -1]))
            if rest == 0 or n % rest:
                raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
            shape[shape.index(-1)] = n // rest
        if int(np.prod(shape)) != n:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        return tuple(shape)

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], _t.dtype):
            raise NotImplementedError("ember.quantization: view(dtype) of a quantized tensor is not supported")
        shape = self._target_shape(shape)
        self._check_channel_prefix(shape, "view")
        arr = self._irepr.view()
        try:
            arr.shape = shape
        except AttributeError:
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") \
                from None
        return self._derive(arr)

    def reshape(self, *shape):
        shape = self._target_shape(shape)
        self._check_channel_prefix(shape, "reshape")
        arr = np.reshape(self._irepr, shape)
        return self._derive(arr, view=np.shares_memory(arr, self._irepr))

    def view_as(self, other):
        return self.view(tuple(other.shape))

    def reshape_as(self, other):
        return self.reshape(tuple(other.shape))

    def flatten(self, start_dim=0, end_dim=-1):
        nd = self._irepr.ndim
        if nd == 0:
            return self.reshape(1)
        s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        if s == e:
            return self
        shp = self._irepr.shape
        return self.reshape(shp[:s] + (int(np.prod(shp[s:e + 1])),) + shp[e + 1:])

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        nd = self._irepr.ndim
        dims = tuple(_wrap_dim(d, nd) for d in dims)
        if sorted(dims) != list(range(nd)):
            raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match "
                               "the length of the desired ordering of dimensions i.e. input.dim() = "
                               f"{nd} is not equal to len(dims) = {len(dims)}" if len(dims) != nd else
                               "permute(): duplicate dims are not allowed.")
        if self._qp.per_channel and dims != tuple(range(nd)):
            raise RuntimeError(_UNIFORM_ONLY)
        return self._derive(self._irepr.transpose(dims))

    def transpose(self, dim0, dim1):
        nd = self._irepr.ndim
        if nd == 0:
            return self._derive(self._irepr)
        d0, d1 = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
        dims = list(range(nd))
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return self.permute(dims)

    swapaxes = swapdims = transpose

    def t(self):
        if self._irepr.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self._irepr.ndim}D")
        return self.transpose(0, -1) if self._irepr.ndim == 2 else self._derive(self._irepr)

    @property
    def T(self):
        return self.permute(tuple(range(self._irepr.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def unsqueeze(self, dim):
        d = _wrap_dim(dim, self._irepr.ndim + 1)
        qp = self._qp
        if qp.per_channel and d <= qp.axis:
            qp = qp.with_axis(qp.axis + 1)
        return self._derive(np.expand_dims(self._irepr, d), qp)

    def squeeze(self, dim=None):
        shp = self._irepr.shape
        nd = len(shp)
        if dim is None:
            dims = [i for i, n in enumerate(shp) if n == 1]
        else:
            dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
            dims = [_wrap_dim(d, nd) for d in dims] if nd else []
            dims = [d for d in dims if shp[d] == 1]
        qp = self._qp
        if qp.per_channel:
            dims = [d for d in dims if d != qp.axis]
            qp = qp.with_axis(qp.axis - sum(1 for d in dims if d < qp.axis))
        return self._derive(np.squeeze(self._irepr, axis=tuple(dims)) if dims else self._irepr.view(), qp)

    def __getitem__(self, index):
        nd = self._irepr.ndim
        norm = _normalize_index(index, nd)
        qp = self._qp
        if norm is None:
            if qp.per_channel:
                raise NotImplementedError("ember.quantization: advanced (tensor or list) indexing of a "
                                          "per-channel quantized tensor is not supported")
            idx = _numpy_index(index)
            return self._derive(self._irepr[idx], view=False)
        arr = self._irepr[norm]
        if not qp.per_channel:
            return self._derive(arr)
        # follow the channel axis through the index
        src, dst = 0, 0
        for item in norm:
            if item is None:
                dst += 1
                continue
            if src == qp.axis:
                if isinstance(item, numbers.Integral):
                    c = int(item) % self._irepr.shape[src]
                    return self._derive(arr, QParams(QS.per_tensor_affine, scale=float(qp.scales[c]),
                                                     zero_point=int(qp.zero_points[c])))
                return self._derive(arr, qp.with_axis(dst, qp.scales[item].copy(),
                                                      qp.zero_points[item].copy()))
            if not isinstance(item, numbers.Integral):
                dst += 1
            src += 1
        return self._derive(arr, qp.with_axis(dst + (qp.axis - src)))

    def __setitem__(self, index, value):
        raise NotImplementedError("ember.quantization: assigning into a quantized tensor (q[...] = value) is not "
                                  "supported; quantize the modified float tensor instead")

    def select(self, dim, index):
        nd = self._irepr.ndim
        d = _wrap_dim(dim, nd)
        n = self._irepr.shape[d]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self._irepr.shape)} at dimension {dim}")
        return self[(slice(None),) * d + (int(index),)]

    def narrow(self, dim, start, length):
        d = _wrap_dim(dim, self._irepr.ndim)
        start = int(start)
        if start < 0:
            start += self._irepr.shape[d]
        return self[(slice(None),) * d + (slice(start, start + int(length)),)]

    def unbind(self, dim=0):
        d = _wrap_dim(dim, self._irepr.ndim)
        return tuple(self.select(d, i) for i in range(self._irepr.shape[d]))

    def split(self, split_size, dim=0):
        d = _wrap_dim(dim, self._irepr.ndim)
        n = self._irepr.shape[d]
        if isinstance(split_size, numbers.Integral):
            sizes = [min(int(split_size), n - s) for s in range(0, n, int(split_size))] or [0]
        else:
            sizes = [int(s) for s in split_size]
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return tuple(out)

    def chunk(self, chunks, dim=0):
        n = self._irepr.shape[_wrap_dim(dim, self._irepr.ndim)]
        return self.split(max(-(-n // int(chunks)), 1), dim)

    def __iter__(self):
        if self._irepr.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __len__(self):
        if self._irepr.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._irepr.shape[0]

    def relu(self):
        """max(x, 0) keeps the quantization: the integers below the zero point become it."""
        zp = self.q_zero_point()    # (torch's per-tensor-only error for a per-channel tensor)
        return self._derive(np.maximum(self._irepr, np.asarray(zp).astype(self._irepr.dtype)), view=False)

    def equal(self, other):
        if not isinstance(other, QuantizedTensor):
            raise RuntimeError("promoteTypes with quantized numbers is not handled yet; figure out what the "
                               "correct rules should be, offending types: "
                               f"{self.dtype.legacy_name} {other.dtype.legacy_name}")
        return (self.dtype is other.dtype and self._irepr.shape == other._irepr.shape
                and self._qp.same_as(other._qp) and bool(np.array_equal(self._irepr, other._irepr)))

    def __repr__(self, *, tensor_contents=None):
        from .printing import qtensor_repr
        return qtensor_repr(self)

    __str__ = __repr__


# the ops whose QuantizedTensor method serves the top-level function too (``__ember_route__``)
_ROUTED_FUNCTIONS = frozenset(("view", "reshape", "flatten", "transpose", "swapaxes", "swapdims", "permute",
                               "select", "squeeze", "unsqueeze", "narrow", "clone", "contiguous", "relu", "t",
                               "unbind", "split", "chunk", "detach", "dequantize", "int_repr", "slice"))


# the ops computed on the integers by ember/_quantized/ops.py, pooling.py, elementwise.py (``ops.routed``)
_ROUTED_OPS = frozenset(("cat", "stack", "max", "min", "max_dim", "min_dim", "mean", "max_pool_with_indices",
                         "avg_pool", "_resample", "clamp", "hardtanh", "_gather_axes", "sigmoid", "tanh",
                         "hardsigmoid", "flip", "sort", "argsort", "topk"))


def _c_order(arr):
    """``arr`` in C order (np.ascontiguousarray would turn a 0-d array into a 1-d one)."""
    return arr if arr.flags.c_contiguous else np.array(arr, order="C", copy=True)


def _numpy_index(index):
    """An advanced index with ember tensors turned into numpy arrays (dense ones only)."""
    if isinstance(index, tuple):
        return tuple(_numpy_index(i) for i in index)
    if isinstance(index, QuantizedTensor):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if isinstance(index, Tensor):
        return np.asarray(index._data)
    if isinstance(index, list):
        return np.asarray([_numpy_index(i) for i in index]) if index and isinstance(index[0], Tensor) \
            else np.asarray(index)
    return index


# -- Python operators: torch's errors -------------------------------------------------------
def _operand_error(self, other, reflected):
    if isinstance(other, QuantizedTensor):
        return None
    if isinstance(other, Tensor):
        a, b = (other.dtype.legacy_name, self.dtype.legacy_name) if reflected else \
            (self.dtype.legacy_name, other.dtype.legacy_name)
        return RuntimeError("promoteTypes with quantized numbers is not handled yet; figure out what the "
                            f"correct rules should be, offending types: {a} {b}")
    if isinstance(other, (bool, numbers.Integral)):
        return RuntimeError(_EMPTY_STRIDED)
    if isinstance(other, numbers.Number):      # a float scalar promotes (torch: with the default dtype)
        kind = "ComplexFloat" if isinstance(other, complex) else _t.get_default_dtype().legacy_name
        return RuntimeError("promoteTypes with quantized numbers is not handled yet; figure out what the "
                            f"correct rules should be, offending types: {self.dtype.legacy_name} {kind}")
    return None


def _binary(name, aten, reflected=False):
    def method(self, other):
        err = _operand_error(self, other, reflected)
        if err is None:
            if not isinstance(other, (Tensor, numbers.Number)):
                return NotImplemented
            op = aten if aten != "matmul" else "mm" if self.ndim == 2 and other.ndim == 2 else "bmm.out"
            err = NotImplementedError(
                f"Could not run 'aten::{op}' with arguments from the 'QuantizedCPU' backend. ember has no "
                f"quantized kernel for '{op}'; call .dequantize() on the quantized tensors first.")
        raise err
    method.__name__ = name
    return method


for _name, _aten in (("add", "add.out"), ("sub", "sub.out"), ("mul", "mul.out"), ("truediv", "div.out"),
                     ("floordiv", "floor_divide.out"), ("mod", "remainder.Tensor_out"), ("pow", "pow.Tensor_Tensor_out"),
                     ("matmul", "matmul")):
    setattr(QuantizedTensor, f"__{_name}__", _binary(f"__{_name}__", _aten))
    setattr(QuantizedTensor, f"__r{_name}__", _binary(f"__r{_name}__", _aten, reflected=True))
    setattr(QuantizedTensor, f"__i{_name}__", _binary(f"__i{_name}__", _aten))
for _name, _aten in (("add", "add.out"), ("sub", "sub.out"), ("mul", "mul.out"), ("div", "div.out")):
    setattr(QuantizedTensor, _name, _binary(_name, _aten))
    setattr(QuantizedTensor, _name + "_", _binary(_name + "_", _aten))
del _name, _aten
