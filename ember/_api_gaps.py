"""Small torch names with no better home in ember: the exception classes torch raises for
memory and device failures, ``is_distributed``, ``GradScaler`` at the top level, and the Tensor
methods ``dim_order``, ``const_data_ptr`` and ``module_load`` (and the thin Tensor-method
forms of ember/_torch_level_gaps.py's functions, the always-False ``is_xpu``-style device
flags, ``name``, ``volatile``, ``grad_dtype``). ``install`` puts them in place
when ember is imported (the methods must exist on every Tensor from the start)."""
from __future__ import annotations

__all__ = ["OutOfMemoryError", "AcceleratorError", "is_distributed", "install"]


class OutOfMemoryError(RuntimeError):
    """A device (or host) allocation failed: torch's ``torch.OutOfMemoryError`` (also
    ``torch.cuda.OutOfMemoryError``), a RuntimeError so existing handlers still catch it."""


class AcceleratorError(RuntimeError):
    """An accelerator (CUDA) runtime error: torch's ``torch.AcceleratorError``, a RuntimeError."""


def is_distributed(input) -> bool:
    """Whether ``input`` is a distributed tensor: never, ember's tensors live in one process."""
    from .tensor import Tensor
    if not isinstance(input, Tensor):
        raise TypeError(f"is_distributed(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return False


# ---------------------------------------------------------------------- Tensor methods
def _outward(sizes, strides, a, b):
    """+1 when dim ``a`` sits outside dim ``b`` in memory, -1 when inside, 0 when it cannot be
    told (a zero stride, or equal strides where ``a`` is not the longer dim)."""
    def ge(x, y):          # x >= y, or x a multiple of y; zero counts as smallest
        return True if y == 0 else False if x == 0 else (x >= y or x % y == 0)
    sa, sb = strides[a], strides[b]
    if sa == 0 or sb == 0:
        return 0
    if sa == sb:
        return 0 if ge(sizes[b], sizes[a]) else 1
    return -1 if ge(sb, sa) else 1


def _stride_order(t):
    """(dims from outermost to innermost in memory, whether that order is ambiguous): contiguous
    and channels-last tensors answer at once; otherwise an insertion sort of the dims
    (innermost first) by ``_outward``, ties keeping their logical order."""
    from . import _memory_format as mf
    sizes, strides = tuple(t.shape), tuple(t.stride())
    ndim = len(sizes)
    if ndim <= 1:
        return tuple(range(ndim)), False
    contiguous = t.is_contiguous()
    channels_last = ndim == 4 and t.is_contiguous(memory_format=mf.channels_last)
    if contiguous and not channels_last:
        return tuple(range(ndim)), False
    if channels_last and not contiguous:
        return (0, *range(2, ndim), 1), False
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        j = i
        for k in range(i - 1, -1, -1):
            c = _outward(sizes, strides, perm[k], perm[j])
            if c > 0:
                perm[k], perm[j] = perm[j], perm[k]
                j = k
            elif c < 0:
                break
    ambiguous = any(_outward(sizes, strides, perm[i], perm[i + 1]) != -1 for i in range(ndim - 1))
    return tuple(reversed(perm)), ambiguous


def _dim_order(self, *, ambiguity_check=False):
    """The order of this tensor's dims from outermost to innermost in memory (torch's
    ``Tensor.dim_order``): ``(0, 1, 2, 3)`` contiguous, ``(0, 2, 3, 1)`` channels-last.
    ``ambiguity_check=True`` (or a list of memory formats the tensor must match exactly one of)
    raises when size-1 dims or equal strides make more than one order valid."""
    from ._memory_format import memory_format
    bad_arg = "The ambiguity_check argument must be a bool or a list of memory formats."
    if not isinstance(ambiguity_check, bool):
        if not isinstance(ambiguity_check, list) or not all(isinstance(f, memory_format) for f in ambiguity_check):
            raise TypeError(bad_arg)
    formats = ambiguity_check if isinstance(ambiguity_check, list) else []
    check = ambiguity_check if isinstance(ambiguity_check, bool) else True
    sizes, strides = tuple(self.shape), tuple(self.stride())
    multiple = any(a == b for a, b in zip(strides, strides[1:])) or any(s == 1 for s in sizes)
    if check and multiple and sum(1 for f in formats if self.is_contiguous(memory_format=f)) != 1:
        raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the given "
                           "memory formats.")
    order, ambiguous = _stride_order(self)
    if ambiguity_check is not False and ambiguous:
        raise RuntimeError("The tensor does not have unique dim order.")
    return order


def _const_data_ptr(self):
    """The address of the first element, for reading (``data_ptr`` without the intent to write)."""
    return self.data_ptr()


def _module_load(self, other, assign=False):
    """What ``Module.load_state_dict`` stores for parameter / buffer ``self`` given ``other``:
    ``other`` detached (``assign=True``) or ``self`` with ``other`` copied in, detached.
    Subclasses override it to control how their tensors load."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


# ---------------------------------------------------------------------- more Tensor methods / properties
def _from_gaps(name):
    """A Tensor method calling ``ember._torch_level_gaps.<name>`` with ``self`` first (loaded on use)."""
    def method(self, *args, **kwargs):
        from . import _torch_level_gaps
        return getattr(_torch_level_gaps, name)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``ember.{name}(self, ...)``."
    return method


def _smm(self, mat2):
    """sparse ``self`` @ dense ``mat2`` as a sparse tensor (``ember.smm``; sparse tensors have their
    own method, so on a dense ``self`` this is torch's refusal)."""
    from . import _torch_level_gaps
    _torch_level_gaps._check_sparse("smm", self)
    return _torch_level_gaps._ember().smm(self, mat2)


def _sspaddmm(self, mat1, mat2, *, beta=1, alpha=1):
    """``beta * self + alpha * (mat1 @ mat2)``, sparse (``ember.sspaddmm``)."""
    from . import _torch_level_gaps
    return _torch_level_gaps.sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)


def _record_stream(self, stream):
    """Mark memory as used by ``stream`` (a CUDA caching-allocator hint). ember's tensors live on the
    CPU, which has no streams; torch's CPU backend refuses the call the same way."""
    raise NotImplementedError("Could not run 'aten::record_stream' with arguments from the 'CPU' backend. This could "
                              "be because the operator doesn't exist for this backend.")


def _resize_as_sparse_(self, the_template):
    """Resize sparse ``self`` to ``the_template``'s sizes in place: ember's sparse tensors cannot be
    resized in place, so two sparse tensors get a NotImplementedError saying so."""
    if not getattr(self, "is_sparse", False) or not getattr(the_template, "is_sparse", False):
        raise RuntimeError("resize_as_sparse_: expected self and the_template to be sparse COO tensors, got "
                           f"{self.layout} and {getattr(the_template, 'layout', type(the_template).__name__)}")
    raise NotImplementedError("ember.sparse: resize_as_sparse_ (resizing a sparse tensor in place) is not supported; "
                              "build a new one with ember.sparse_coo_tensor(indices, values, size)")


def _index(self, positions, dims):
    """functorch's first-class dimensions (``functorch.dim``) bind positional dims to Dim objects;
    ember has no first-class dimensions."""
    raise NotImplementedError("ember: Tensor.index (first-class dimensions, functorch.dim) is not supported")


def _volatile_get(self):
    import warnings
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
    return False


def _volatile_set(self, value):
    import warnings
    warnings.warn("volatile was removed and now has no effect. Use `with ember.no_grad():` instead.", UserWarning,
                  stacklevel=2)


def _grad_dtype_get(self):
    """The dtype autograd gives this leaf's ``.grad``: the tensor's own (ember casts every
    accumulated gradient to it, torch's default)."""
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
    return self.dtype


def _grad_dtype_set(self, value):
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be set on leaf tensors.")
    if value is not self.dtype:
        raise NotImplementedError(f"ember: grad_dtype={value} is not supported (ember's autograd gives a leaf's "
                                  f"gradient the leaf's dtype, {self.dtype})")


def _absent_device_method(name, error_type, message):
    def method(self, *args, **kwargs):
        raise error_type(message)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``Tensor.{name}()``: ember has no such device; torch's error without it."
    return method


def _to_mkldnn(self, dtype=None):
    """oneDNN's blocked layout: ember has no mkldnn tensors."""
    raise NotImplementedError("ember: Tensor.to_mkldnn is not supported (ember has no mkldnn layout)")


def _reinforce(self, reward):
    raise RuntimeError("reinforce() was removed.\nUse ember.distributions instead.")


def _sparse_resize_(self, size, sparse_dim, dense_dim):
    if not getattr(self, "is_sparse", False):
        raise NotImplementedError("Could not run 'aten::sparse_resize_' with arguments from the 'CPU' backend. This "
                                  "could be because the operator doesn't exist for this backend.")
    raise NotImplementedError("ember.sparse: sparse_resize_ (resizing a sparse tensor in place) is not supported; "
                              "build a new one with ember.sparse_coo_tensor(indices, values, size)")


_FALSE_PROPERTIES = ("is_xpu", "is_mps", "is_mkldnn", "is_vulkan", "is_maia", "is_mtia", "is_ipu", "is_xla")


def install(namespace):
    """Add the top-level names to ``namespace`` (ember's globals) and the Tensor methods."""
    from .tensor import Tensor
    from .amp import GradScaler
    namespace.update(OutOfMemoryError=OutOfMemoryError, AcceleratorError=AcceleratorError,
                     is_distributed=is_distributed, GradScaler=GradScaler)
    for name, fn in (("dim_order", _dim_order), ("const_data_ptr", _const_data_ptr), ("module_load", _module_load),
                     ("hash_tensor", _from_gaps("hash_tensor")), ("slice_inverse", _from_gaps("slice_inverse")),
                     ("smm", _smm), ("sspaddmm", _sspaddmm), ("record_stream", _record_stream),
                     ("resize_as_sparse_", _resize_as_sparse_), ("index", _index),
                     ("is_distributed", is_distributed), ("to_mkldnn", _to_mkldnn), ("reinforce", _reinforce),
                     ("sparse_resize_", _sparse_resize_), ("sparse_resize_and_clear_", _sparse_resize_),
                     ("xpu", _absent_device_method("xpu", AssertionError, "ember not compiled with XPU enabled")),
                     ("mtia", _absent_device_method("mtia", AssertionError, "ember not compiled with MTIA enabled")),
                     ("ipu", _absent_device_method("ipu", RuntimeError,
                                                   "ember is not linked with support for ipu devices"))):
        fn.__name__ = fn.__qualname__ = name
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    # devices and layouts ember never has: always False (torch's Tensor.is_xpu, ...)
    for name in _FALSE_PROPERTIES:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(lambda self: False, doc=f"False: ember has no {name[3:]} tensors."))
    if not hasattr(Tensor, "name"):       # named tensors' per-tensor name: ember's tensors have none
        Tensor.name = property(lambda self: None, doc="None (torch's legacy per-tensor name, never set).")
    if not hasattr(Tensor, "volatile"):   # removed in torch 0.4: always False, with torch's warning
        Tensor.volatile = property(_volatile_get, _volatile_set)
    if not hasattr(Tensor, "grad_dtype"):
        Tensor.grad_dtype = property(_grad_dtype_get, _grad_dtype_set, doc=_grad_dtype_get.__doc__)
