"""Embedding and EmbeddingBag."""
from __future__ import annotations

from ...tensor import Parameter
from .. import init
from ._F import F
from .module import Module

__all__ = ["Embedding", "EmbeddingBag"]


def _init_table(self, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                _weight, _freeze, device, dtype):
    """The lookup table and its options, shared by Embedding and EmbeddingBag."""
    from ... import empty
    self.num_embeddings = num_embeddings
    self.embedding_dim = embedding_dim
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = num_embeddings + padding_idx
    self.padding_idx = padding_idx
    self.max_norm = max_norm
    self.norm_type = norm_type
    self.scale_grad_by_freq = scale_grad_by_freq
    self.sparse = sparse
    if _weight is None:
        self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype),
                                requires_grad=not _freeze)
        self.reset_parameters()
    else:
        if list(_weight.shape) != [num_embeddings, embedding_dim]:
            raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
        self.weight = Parameter(_weight, requires_grad=not _freeze)


def _norm_options(self):
    """The repr of the table's non-default max_norm / norm_type / scale_grad_by_freq."""
    s = ""
    if self.max_norm is not None:
        s += f", max_norm={self.max_norm}"
    if self.norm_type != 2:
        s += f", norm_type={self.norm_type}"
    if self.scale_grad_by_freq is not False:
        s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
    return s


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``."""

    __constants__ = ["num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type",
                     "scale_grad_by_freq", "sparse"]

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        _init_table(self, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                    sparse, _weight, _freeze, device, dtype)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            from ...autograd import no_grad
            with no_grad():
                self.weight._data[self.padding_idx] = 0
                self.weight._bump_version()

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        s += _norm_options(self)
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (``F.embedding_bag``) without building the
    per-entry embeddings as a module output."""

    __constants__ = ["num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode",
                     "sparse", "include_last_offset", "padding_idx"]

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None,
                 device=None, dtype=None):
        super().__init__()
        _init_table(self, num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                    sparse, _weight, False, device, dtype)
        self.mode = mode
        self.include_last_offset = include_last_offset

    reset_parameters = Embedding.reset_parameters
    _fill_padding_idx_with_zero = Embedding._fill_padding_idx_with_zero

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        """A bag module over the 2-D ``embeddings`` (kept as its weight, trainable unless ``freeze``)."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
                  norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}{_norm_options(self)}, mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
