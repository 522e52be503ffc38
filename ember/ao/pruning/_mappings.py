"""Dense -> sparse quantized module mappings (torch's ``torch.ao.nn.sparse`` Linear layers, run by
its sparse qnnpack kernels). ember has no sparse quantized modules: asking for the mappings
raises instead of returning a mapping ``convert`` could not use."""
from __future__ import annotations

__all__ = ["get_static_sparse_quantized_mapping", "get_dynamic_sparse_quantized_mapping"]


def _unsupported(which):
    raise NotImplementedError(f"ember.ao.pruning: {which} needs the sparse quantized Linear modules "
                              "(torch.ao.nn.sparse.quantized), which ember does not have; squash_mask() and "
                              "the ordinary quantized modules work")


def get_static_sparse_quantized_mapping():
    _unsupported("get_static_sparse_quantized_mapping")


def get_dynamic_sparse_quantized_mapping():
    _unsupported("get_dynamic_sparse_quantized_mapping")
