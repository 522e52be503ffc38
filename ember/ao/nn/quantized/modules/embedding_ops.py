"""Weight-only quantized ``Embedding`` (torch's ``QuantizedEmbedding``): the table stored as quint8
rows, each with its own float scale and float zero point (``per_channel_affine_float_qparams``);
a lookup returns float32 rows computed as fbgemm's ``embedding_byte`` does,
``fma(q, scale, -zero_point * scale)``; ``EmbeddingBag`` sums them per bag. (4-bit tables are not
supported.)"""
from __future__ import annotations

import numpy as np

import ember
from ember import nn
from ember._quantized import kernels as _K
from ember._quantized import schemes as _QS
from ember._quantized.tensor import QParams, QuantizedTensor, make_qtensor

__all__ = ["Embedding", "EmbeddingBag", "EmbeddingPackedParams"]

_F32 = np.float32


def quantize_rows_float_qparams(weight, scales, zero_points):
    """quint8 per-row quantization with float zero points (torch's float-qparams scheme)."""
    w = np.asarray(weight.detach()._data, _F32)
    s = np.asarray(scales.detach()._data, _F32)
    z = np.asarray(zero_points.detach()._data, _F32)
    ints = _K.quantize_per_channel(w, s, z, 0, ember.quint8)
    return make_qtensor(ints, ember.quint8, QParams(_QS.per_channel_affine_float_qparams, scales=s,
                                                    zero_points=z, axis=0))


class EmbeddingPackedParams(nn.Module):
    """Holds the quantized table (state_dict ``_packed_weight`` and ``dtype``, torch's keys)."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, dtype=ember.quint8):
        super().__init__()
        self.dtype = dtype
        if dtype is not ember.quint8:
            raise NotImplementedError(f"ember.quantization: quantized Embedding with dtype {dtype} is not supported "
                                      "(quint8 is)")
        self.set_weight(quantize_rows_float_qparams(ember.zeros(num_embeddings, embedding_dim),
                                                    ember.ones(num_embeddings), ember.zeros(num_embeddings)))

    def set_weight(self, weight):
        if not isinstance(weight, QuantizedTensor) or weight.qscheme() is not _QS.per_channel_affine_float_qparams:
            raise NotImplementedError("ember.quantization: a quantized Embedding table must be quint8 with "
                                      "per_channel_affine_float_qparams (one float scale and zero point per row)")
        self._packed_weight = weight

    def _weight(self):
        return self._packed_weight

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_weight"] = self._weight()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        self.dtype = state_dict.pop(prefix + "dtype")
        self.set_weight(state_dict.pop(prefix + "_packed_weight"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys,
                                      error_msgs)

    def __repr__(self):
        return repr(self._weight())


class Embedding(nn.Module):
    """A lookup table of quint8 rows: float32 rows out."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, dtype=ember.quint8):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.dtype = dtype
        self._packed_params = EmbeddingPackedParams(num_embeddings, embedding_dim, dtype)
        if _weight is not None:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self._packed_params.set_weight(_weight)

    def forward(self, indices):
        w = self._packed_params._weight()
        idx = np.asarray(indices.detach()._data)
        if idx.dtype.kind not in "iu":
            raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               f"Long, Int; but got {indices.dtype} instead")
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_embeddings):
            raise IndexError("index out of range in self")
        s = np.asarray(w._qp.scales, _F32)
        bias = (-np.asarray(w._qp.zero_points, _F32) * s).astype(_F32)
        rows = w._irepr[idx].astype(np.float64)
        # fma(q, scale, bias): the product exact in float64, one rounding to float32 after the add
        out = (rows * s[idx][..., None].astype(np.float64) + bias[idx][..., None].astype(np.float64)).astype(_F32)
        return ember.tensor(np.ascontiguousarray(out))

    def _get_name(self):
        return "QuantizedEmbedding"

    def __repr__(self):
        # the packed table is an implementation detail: torch leaves it out of the repr
        return f"{self._get_name()}({self.extra_repr()})"

    def extra_repr(self):
        w = self._packed_params._weight()
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype={self._packed_params.dtype}, qscheme={w.qscheme()}")

    def weight(self):
        return self._packed_params._weight()

    def set_weight(self, w):
        self._packed_params.set_weight(w)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        wobs = _weight_observer(cls, mod, nn.Embedding, "Embedding")
        dtype = wobs.dtype
        if wobs.qscheme is not _QS.per_channel_affine_float_qparams:
            raise AssertionError("Embedding quantization is only supported with float_qparams_weight_only_qconfig.")
        if dtype not in (ember.quint8, ember.quint4x2):
            raise AssertionError(f"The only supported dtype for nnq.Embedding is torch.quint8 and torch.quint4x2, "
                                 f"got {dtype}")
        if dtype is not ember.quint8:
            raise NotImplementedError("ember.quantization: quantized Embedding with quint4x2 (4-bit) tables is not "
                                      "supported (quint8 is)")
        wobs(mod.weight)
        scales, zero_points = wobs.calculate_qparams()
        qweight = quantize_rows_float_qparams(mod.weight.float(), scales, zero_points)
        out = cls(mod.num_embeddings, mod.embedding_dim)
        out.set_weight(qweight)
        return out


class EmbeddingBag(Embedding):
    """Sums of quint8 rows per bag (``mode="sum"``), as fbgemm's ``embedding_bag_byte``: each row
    added as ``fma(scale, q, acc + bias)`` in float32 (a per-sample weight scales ``scale`` and
    ``bias``). torch's quantized EmbeddingBag ignores ``mode`` (a "mean" or "max" bag returns the
    sum); ember refuses those modes instead of returning a sum."""

    _version = 1

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="sum", sparse=False, _weight=None, include_last_offset=False, dtype=ember.quint8):
        super().__init__(num_embeddings, embedding_dim, _weight=_weight, dtype=dtype)
        self.mode = mode
        self.pruned_weights = False
        self.include_last_offset = include_last_offset
        self.dtype = dtype

    def _get_name(self):
        return "QuantizedEmbeddingBag"

    def forward(self, indices, offsets=None, per_sample_weights=None, compressed_indices_mapping=None):
        if self.mode != "sum":
            raise NotImplementedError(f"ember.quantization: quantized EmbeddingBag with mode={self.mode!r} is not "
                                      "supported (torch's kernel returns the sum whatever the mode; mode='sum' is "
                                      "supported)")
        if compressed_indices_mapping is not None:
            raise NotImplementedError("ember.quantization: pruned (compressed) quantized EmbeddingBag tables are not "
                                      "supported")
        idx = np.asarray(indices.detach()._data)
        if idx.ndim == 2:
            if offsets is not None:
                raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch "
                                 "of fixed length sequences.")
            n, length = idx.shape
            starts = np.arange(n) * length
            idx = idx.reshape(-1)
            ends = starts + length
        else:
            if offsets is None:
                raise ValueError("offsets has to be a 1D Tensor but got None")
            off = np.asarray(offsets.detach()._data).astype(np.int64)
            bounds = off if self.include_last_offset else np.append(off, len(idx))
            starts, ends = bounds[:-1], bounds[1:]
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_embeddings):
            raise IndexError("index out of range in self")
        psw = None if per_sample_weights is None else np.asarray(per_sample_weights.detach()._data, _F32).reshape(-1)
        w = self._packed_params._weight()
        q = w._irepr.astype(np.float64)
        s = np.asarray(w._qp.scales, _F32)
        bias = (-np.asarray(w._qp.zero_points, _F32) * s).astype(_F32)
        out = np.zeros((len(starts), self.embedding_dim), _F32)
        for b, (lo, hi) in enumerate(zip(starts, ends)):
            acc = np.zeros(self.embedding_dim, _F32)
            for i in range(int(lo), int(hi)):
                r = idx[i]
                sc, bi = s[r], bias[r]
                if psw is not None:
                    sc, bi = _F32(sc * psw[i]), _F32(bi * psw[i])
                acc = (np.float64(sc) * q[r] + (acc + bi).astype(_F32).astype(np.float64)).astype(_F32)
            out[b] = acc
        return ember.tensor(out)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        wobs = _weight_observer(cls, mod, nn.EmbeddingBag, "EmbeddingBag")
        if wobs.qscheme is not _QS.per_channel_affine_float_qparams:
            raise AssertionError("EmbeddingBag quantization is only supported with float_qparams_weight_only_qconfig.")
        if wobs.dtype not in (ember.quint8, ember.quint4x2):
            raise AssertionError(f"The only supported dtype for nnq.EmbeddingBag is torch.quint8 and torch.quint4x2, "
                                 f"got {wobs.dtype}")
        if wobs.dtype is not ember.quint8:
            raise NotImplementedError("ember.quantization: quantized EmbeddingBag with quint4x2 (4-bit) tables is not "
                                      "supported (quint8 is)")
        wobs(mod.weight)
        scales, zero_points = wobs.calculate_qparams()
        out = cls(mod.num_embeddings, mod.embedding_dim, max_norm=mod.max_norm, norm_type=mod.norm_type,
                  scale_grad_by_freq=mod.scale_grad_by_freq, mode=mod.mode, sparse=mod.sparse,
                  include_last_offset=mod.include_last_offset)
        out.set_weight(quantize_rows_float_qparams(mod.weight.float(), scales, zero_points))
        return out


def _weight_observer(cls, mod, float_cls, what):
    """The observer / fake quantizer giving the table's row parameters: a QAT module's trained
    ``weight_fake_quant``, else a fresh one of the float module's qconfig (torch's checks)."""
    if hasattr(mod, "weight_fake_quant"):
        from ember.ao.nn import qat as nnqat
        qat_cls = getattr(nnqat, float_cls.__name__)
        if float_cls is nn.Embedding and type(mod) is not qat_cls:
            raise AssertionError(f"nnq.{cls.__name__}.from_float with fake quant only works for {qat_cls.__name__}")
        return mod.weight_fake_quant
    if type(mod) is not float_cls:
        raise AssertionError(f"nnq.{cls.__name__}.from_float only works for {float_cls.__name__}")
    if not hasattr(mod, "qconfig"):
        raise AssertionError(f"{what} input float module must have qconfig defined")
    if mod.qconfig is not None and mod.qconfig.weight is not None:
        return mod.qconfig.weight()
    from ember.ao.quantization.qconfig import float_qparams_weight_only_qconfig
    return float_qparams_weight_only_qconfig.weight()
