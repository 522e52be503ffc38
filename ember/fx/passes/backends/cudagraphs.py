"""Partition a graph into the pieces CUDA graphs could capture
(``torch.fx.passes.backends.cudagraphs``).

Why: CUDA graphs replay a recorded sequence of kernels, so only nodes whose
inputs and outputs are all CUDA tensors can be part of one. The support rule
reads the fake values FakeTensorProp records; the partitioner groups the
supported nodes. On CPU tensors nothing is supported and the graph comes back
unchanged in structure (as torch's does).
"""

from __future__ import annotations

import operator
from typing import Any, Mapping, Sequence

from ...node import Node
from ..fake_tensor_prop import FakeTensorProp
from ..infra.partitioner import CapabilityBasedPartitioner
from ..operator_support import OperatorSupport
from ..tools_common import CALLABLE_NODE_OPS

__all__ = ["CudaGraphsSupport", "partition_cudagraphs"]


def _any_not_cuda(value: Any) -> bool:
    from ....tensor import Tensor
    from ....utils import _pytree as pytree

    return any(isinstance(t, Tensor) and t.device.type != "cuda" for t in pytree.tree_leaves(value))


class CudaGraphsSupport(OperatorSupport):
    """Supported: ``getitem`` nodes, and call nodes whose value and inputs'
    values (``meta["val"]``, or ``meta["fake_result"]``) are CUDA tensors
    only; ``aten.embedding_dense_backward`` never."""

    def is_node_supported(self, submodules: Mapping[str, Any], node: Node) -> bool:
        if node.op not in CALLABLE_NODE_OPS:
            return False
        if "embedding_dense_backward" in str(getattr(node.target, "__name__", node.target)):
            return False
        if node.target is operator.getitem:
            return True

        def fake_of(meta: dict) -> Any:
            return meta["val"] if "val" in meta else meta["fake_result"]

        if any(_any_not_cuda(fake_of(n.meta)) for n in node.all_input_nodes):
            return False
        return not _any_not_cuda(fake_of(node.meta))


def partition_cudagraphs(gm: Any, inputs: Sequence[Any]) -> Any:
    """``gm`` with each group of CUDA-only nodes fused into a submodule
    (FakeTensorProp runs on ``inputs`` first)."""
    from ...._subclasses.fake_tensor import FakeTensorMode

    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    partitioner = CapabilityBasedPartitioner(gm, CudaGraphsSupport(), allows_single_node_partition=True)
    return partitioner.fuse_partitions(partitioner.propose_partitions())
