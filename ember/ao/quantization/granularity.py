"""The affine-quantization vocabulary torch keeps in ``torch.ao.quantization.observer`` for torchao
(pt2e): how floats map to integers (``MappingType``), where the zero point lives
(``ZeroPointDomain``), placeholder sub-byte dtypes (``TorchAODType``), the granularity of the
quantization parameters (``PerTensor`` / ``PerAxis`` / ``PerGroup`` / ``PerRow`` / ``PerToken`` /
``PerBlock``) and ``get_block_size``, which turns a granularity into the block of elements that
share one scale. (ember has no AffineQuantizedObserverBase: these describe, they do not observe.)"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

__all__ = ["MappingType", "ZeroPointDomain", "TorchAODType", "Granularity", "PerBlock", "PerTensor", "PerAxis",
           "PerGroup", "PerRow", "PerToken", "get_block_size"]


class MappingType(Enum):
    """SYMMETRIC: (-max|x|, max|x|) onto the integer range; SYMMETRIC_NO_CLIPPING_ERR: the larger
    of min/qmin and max/qmax as the scale; ASYMMETRIC: (min, max) onto the integer range."""
    SYMMETRIC = auto()
    SYMMETRIC_NO_CLIPPING_ERR = auto()
    ASYMMETRIC = auto()


class ZeroPointDomain(Enum):
    """INT: q = x / scale + zp (integer zp); FLOAT: zp a float offset; NONE: no zero point."""
    INT = auto()
    FLOAT = auto()
    NONE = auto()


class TorchAODType(Enum):
    """Sub-byte integer dtypes torch core does not have."""
    INT1 = auto()
    INT2 = auto()
    INT3 = auto()
    INT4 = auto()
    INT5 = auto()
    INT6 = auto()
    INT7 = auto()


@dataclass(frozen=True)
class Granularity:
    """Base of the granularities (which elements share quantization parameters)."""


@dataclass(frozen=True)
class PerBlock(Granularity):
    """One set of parameters per block of ``block_size`` elements."""
    block_size: tuple


@dataclass(frozen=True)
class PerTensor(Granularity):
    """One set for the whole tensor."""


@dataclass(frozen=True)
class PerAxis(Granularity):
    """One set per index along ``axis``."""
    axis: int


@dataclass(frozen=True)
class PerGroup(Granularity):
    """One set per ``group_size`` consecutive elements of a row (2-d inputs)."""
    group_size: int


class PerRow(Granularity):
    """One set per row (block ``(1, ..., shape[-1])``)."""


class PerToken(Granularity):
    """One set per token: every index of all but the last dimension."""


def get_block_size(input_shape, granularity):
    """The block of elements sharing one set of parameters under ``granularity``."""
    if not isinstance(granularity, Granularity):
        raise AssertionError("Please provide an instance of Granularity, not subclass of it")
    if isinstance(granularity, PerTensor):
        return input_shape
    if isinstance(granularity, PerAxis):
        block_size = list(input_shape)
        block_size[granularity.axis] = 1
        return tuple(block_size)
    if isinstance(granularity, PerRow):
        return (1,) * (len(input_shape) - 1) + (input_shape[-1],)
    if isinstance(granularity, PerGroup):
        if len(input_shape) != 2:
            raise AssertionError(f"Expecting input shape dim to be 2 for per group quantization, gotinput shape: "
                                 f"{input_shape}")
        return (1, granularity.group_size)
    if isinstance(granularity, PerToken):
        block_size = [1] * len(input_shape)
        block_size[-1] = input_shape[-1]
        return tuple(block_size)
    raise ValueError(f"Unsupported Granularity: {granularity}")
