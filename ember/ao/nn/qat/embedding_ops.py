"""QAT Embedding / EmbeddingBag: the table goes through ``weight_fake_quant`` (a per-row
``per_channel_affine_float_qparams`` fake quantizer: float scale and zero point per row) on every
forward, so training sees the rounding of the quint8 table ``convert`` then builds from the
learned row parameters (``nnq.Embedding.from_float`` takes this module's fake quantizer)."""
from __future__ import annotations

from ember import nn
from ember._quantized import schemes as _QS
from ember.nn import functional as F
from .modules import _from_float_checks, _need_qconfig

__all__ = ["Embedding", "EmbeddingBag"]


def _float_qparams_weight(qconfig, what):
    """The qconfig's weight fake quantizer, checked to quantize rows with float qparams."""
    _need_qconfig(qconfig)
    fq = qconfig.weight()
    if fq.qscheme is not _QS.per_channel_affine_float_qparams:
        raise AssertionError(f"{what} weights requires a qscheme of torch.per_channel_affine_float_qparams Got "
                             f"{fq.qscheme}")
    return fq


class Embedding(nn.Embedding):
    """``nn.Embedding`` whose table is fake-quantized row by row in ``forward``."""

    _FLOAT_MODULE = nn.Embedding

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None, qconfig=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, device=device, dtype=dtype)
        self.weight_fake_quant = _float_qparams_weight(qconfig, "Embedding")
        self.qconfig = qconfig

    def forward(self, input):
        return F.embedding(input, self.weight_fake_quant(self.weight), self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        _float_qparams_weight(mod.qconfig, "Embedding")
        return cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, mod.max_norm, mod.norm_type,
                   mod.scale_grad_by_freq, mod.sparse, mod.weight, qconfig=mod.qconfig)

    def to_float(self):
        emb = nn.Embedding(self.num_embeddings, self.embedding_dim, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse, None)
        emb.weight = nn.Parameter(self.weight.detach())
        emb.train(self.training)
        return emb


class EmbeddingBag(nn.EmbeddingBag):
    """``nn.EmbeddingBag`` whose table is fake-quantized row by row in ``forward``."""

    _FLOAT_MODULE = nn.EmbeddingBag

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, qconfig=None,
                 device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                         _weight, include_last_offset, padding_idx, device=device, dtype=dtype)
        self.weight_fake_quant = _float_qparams_weight(qconfig, "Embedding Bag")
        self.qconfig = qconfig

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight_fake_quant(self.weight), offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        _from_float_checks(cls, mod)
        _float_qparams_weight(mod.qconfig, "Embedding Bag")
        return cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type, mod.scale_grad_by_freq,
                   mod.mode, mod.sparse, mod.weight, mod.include_last_offset, mod.padding_idx, qconfig=mod.qconfig)

    def to_float(self):
        bag = nn.EmbeddingBag(self.num_embeddings, self.embedding_dim, self.max_norm, self.norm_type,
                              self.scale_grad_by_freq, self.mode, self.sparse, None, self.include_last_offset,
                              self.padding_idx)
        bag.weight = nn.Parameter(self.weight.detach())
        bag.train(self.training)
        return bag
