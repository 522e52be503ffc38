"""``FuzzedSparseTensor``: a fuzzed COO sparse tensor (size, sparse dims, density, coalesced or
not) from a parameter set, as PyTorch's."""
from __future__ import annotations

import math
from numbers import Number

import ember

from .fuzzer import FuzzedTensor

__all__ = ["FuzzedSparseTensor"]


class FuzzedSparseTensor(FuzzedTensor):
    """``nnz = ceil(sum(size) * density)`` random coordinates over the first ``sparse_dim``
    dimensions. The parameter names given as ``density``, ``coalesced`` and ``sparse_dim`` are
    looked up in the parameter set (PyTorch reads the keys "density", "coalesced",
    "sparse_dim"; these are the defaults here)."""

    def __init__(self, name: str, size, min_elements=None, max_elements=None, dim_parameter=None, sparse_dim=None,
                 nnz=None, density=None, coalesced=None, dtype=ember.float32, cuda=False):
        super().__init__(name=name, size=size, min_elements=min_elements, max_elements=max_elements,
                         dim_parameter=dim_parameter, dtype=dtype, cuda=cuda)
        self._density = density
        self._coalesced = coalesced
        self._sparse_dim = sparse_dim

    @staticmethod
    def sparse_tensor_constructor(size, dtype, sparse_dim, nnz, is_coalesced):
        """Uncoalesced: every coordinate appears twice (values doubled in count, same pattern),
        so ``nnz`` distinct positions either way."""
        if isinstance(size, Number):
            size = [size] * sparse_dim
        if all(size[d] <= 0 for d in range(sparse_dim)) and nnz != 0:
            raise AssertionError("invalid arguments")
        v_size = [nnz] + list(size[sparse_dim:])
        if dtype.is_floating_point:
            v = ember.rand(tuple(v_size), dtype=dtype, device="cpu")
        else:
            v = ember.randint(1, 127, tuple(v_size), dtype=dtype, device="cpu")
        i = ember.rand(sparse_dim, nnz, device="cpu")
        i = (i * ember.tensor(list(size[:sparse_dim])).unsqueeze(1).to(i)).to(ember.long)
        if not is_coalesced:
            v = ember.cat([v, ember.randn_like(v)], 0)
            i = ember.cat([i, i], 1)
        x = ember.sparse_coo_tensor(i, v, ember.Size(size))
        return x.coalesce() if is_coalesced else x

    def _make_tensor(self, params, state):
        size, _, _ = self._get_size_and_steps(params)
        density = params[self._density or "density"]
        nnz = math.ceil(sum(size) * density)
        if nnz > sum(size):
            raise AssertionError("nnz cannot exceed total number of elements")
        is_coalesced = params[self._coalesced or "coalesced"]
        sparse_dim = params[self._sparse_dim] if self._sparse_dim else len(size)
        sparse_dim = min(sparse_dim, len(size))
        tensor = self.sparse_tensor_constructor(size, self._dtype, sparse_dim, nnz, is_coalesced)
        if self._cuda:
            tensor = tensor.cuda()
        sparse_dim, dense_dim = tensor.sparse_dim(), tensor.dense_dim()
        properties = {
            "numel": int(tensor.numel()),
            "shape": tensor.size(),
            "is_coalesced": tensor.is_coalesced(),
            "density": density,
            "sparsity": 1.0 - density,
            "sparse_dim": sparse_dim,
            "dense_dim": dense_dim,
            "is_hybrid": len(size[sparse_dim:]) > 0,
            "dtype": str(self._dtype),
        }
        return tensor, properties
