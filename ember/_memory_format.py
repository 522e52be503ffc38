"""``ember.memory_format``: the type of ``ember.contiguous_format``, ``preserve_format``,
``channels_last`` and ``channels_last_3d``.

Why an Enum: the four values are singletons that print as ``ember.channels_last`` (as
``torch.channels_last``, with ember's prefix, like dtypes), pickle by name, and are constants
to ember.dynamo (which treats Enum members as constants). Each member also compares equal
to, and hashes as, its name string: ember's kernels and meta functions were written against
the strings ``"channels_last"`` etc., and user code or graphs that pass the string keep
working.

Also here: the layout predicates the memory formats need (``is_contiguous(memory_format=)``,
``suggest_memory_format``), following PyTorch's rules for 4-d (NHWC) and 5-d (NDHWC) tensors.
"""
from __future__ import annotations

import enum

from . import types as _t


class _MemoryFormatType(enum.EnumMeta):
    def __repr__(cls):
        return f"<class '{_t.PUBLIC_PREFIX}memory_format'>"


class memory_format(enum.Enum, metaclass=_MemoryFormatType):  # noqa: N801 - PyTorch's name
    contiguous_format = "contiguous_format"
    preserve_format = "preserve_format"
    channels_last = "channels_last"
    channels_last_3d = "channels_last_3d"

    def __repr__(self):
        return _t.PUBLIC_PREFIX + self.value

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self.value
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.value)

    def __reduce_ex__(self, proto):
        return _by_name, (self.value,)


def _by_name(name):
    return memory_format(name)


contiguous_format = memory_format.contiguous_format
preserve_format = memory_format.preserve_format
channels_last = memory_format.channels_last
channels_last_3d = memory_format.channels_last_3d

# dims walked from the innermost (stride 1) outwards, and the permutation that puts a tensor's
# dims in memory order (outermost first)
_INNER_FIRST = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}
ORDER = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}
RANK = {"channels_last": 4, "channels_last_3d": 5}


def check(mf, what=None):
    """``mf`` as a memory_format member (None stays None); a string name is accepted too.
    Anything else: PyTorch's TypeError."""
    if mf is None or isinstance(mf, memory_format):
        return mf
    if isinstance(mf, str) and mf in memory_format._value2member_map_:
        return memory_format(mf)
    where = f"{what}(): " if what else ""
    raise TypeError(f"{where}argument 'memory_format' must be ember.memory_format, not {type(mf).__name__}")


def check_rank(mf, ndim):
    """PyTorch's error for NHWC on a non-4-d (NDHWC on a non-5-d) tensor."""
    r = RANK.get(mf.value if isinstance(mf, memory_format) else mf)
    if r is not None and ndim != r:
        raise RuntimeError(f"required rank {r} tensor to use {mf.value if isinstance(mf, memory_format) else mf} "
                           "format")


def is_channels_last_contiguous(shape, estrides, ndim_wanted):
    """PyTorch's channels-last contiguity: walking C, (D,) W, H, N, every dim of size > 1 has
    the stride of the dims walked before it (size-1 dims are skipped; an empty tensor is not
    special)."""
    if len(shape) != ndim_wanted:
        return False
    expected = 1
    for d in _INNER_FIRST[ndim_wanted]:
        n = shape[d]
        if n != 1:
            if estrides[d] != expected:
                return False
            expected *= n
    return True


def is_contiguous_as(t, mf):
    """``t.is_contiguous(memory_format=mf)``."""
    mf = check(mf, "is_contiguous")
    if mf is channels_last:
        return is_channels_last_contiguous(tuple(t.shape), t.stride(), 4)
    if mf is channels_last_3d:
        return is_channels_last_contiguous(tuple(t.shape), t.stride(), 5)
    return None     # contiguous / preserve: the default test


def suggests(shape, estrides, rank):
    """Whether PyTorch's ``suggest_memory_format`` names the channels-last format of ``rank``
    (4: channels_last, 5: channels_last_3d) for this layout: walking C, (D,) W, H, N the
    strides never fall below the span of the dims already walked; ambiguous layouts (a zero
    channel stride, an empty tensor, a batch stride equal to the channel span) stay row-major."""
    if len(shape) != rank:
        return False
    if rank == 4:
        from .ops._meta import suggest_channels_last
        return suggest_channels_last(shape, estrides)
    if estrides[1] == 0:
        return False
    floor = 0
    for d in _INNER_FIRST[rank]:
        if shape[d] == 0 or estrides[d] < floor:
            return False
        if d == 0 and floor == estrides[1]:
            return False
        floor = estrides[d] * shape[d] if shape[d] > 1 else estrides[d]
    return True


def suggest_memory_format(t):
    shape, st = tuple(t.shape), t.stride()
    if suggests(shape, st, 4):
        return channels_last
    if suggests(shape, st, 5):
        return channels_last_3d
    return contiguous_format


def channels_last_strides(shape):
    """PyTorch's NHWC / NDHWC element strides (a plain product of the sizes: a size-0 channel
    dim gives zero strides, as torch)."""
    order = _INNER_FIRST[len(shape)]
    st = [0] * len(shape)
    acc = 1
    for d in order:
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


def _to_memory_format(src, out, mf):
    """``Tensor.to(..., memory_format=mf)`` after the dtype/device conversion gave ``out``: as
    PyTorch, ``src`` itself is returned when nothing changes and its layout already suggests
    ``mf``; otherwise the result is laid out in ``mf``."""
    mf = check(mf, "to")
    check_rank(mf, src.ndim)
    if out is src:
        if suggest_memory_format(src) is mf:
            return src
        return src.clone(memory_format=mf)
    if mf is contiguous_format:
        return out.contiguous()
    # a conversion copies into empty_like(src, memory_format=mf): exactly mf's strides
    return out if out.stride() == channels_last_strides(tuple(out.shape)) else out.clone(memory_format=mf)
