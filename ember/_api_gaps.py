"""Small torch names with no better home in ember: the exception classes torch raises for
memory and device failures, ``is_distributed``, ``GradScaler`` at the top level, and the Tensor
methods ``dim_order``, ``const_data_ptr`` and ``module_load``. ``install`` puts them in place
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


def install(namespace):
    """Add the top-level names to ``namespace`` (ember's globals) and the Tensor methods."""
    from .tensor import Tensor
    from .amp import GradScaler
    namespace.update(OutOfMemoryError=OutOfMemoryError, AcceleratorError=AcceleratorError,
                     is_distributed=is_distributed, GradScaler=GradScaler)
    for name, fn in (("dim_order", _dim_order), ("const_data_ptr", _const_data_ptr), ("module_load", _module_load)):
        fn.__name__ = fn.__qualname__ = name
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
