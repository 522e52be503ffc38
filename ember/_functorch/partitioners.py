"""``torch._functorch.partitioners``: the two partitioners a ``partition_fn=`` may name.

ember's AOT stage partitions a joint graph itself (``ember.aot.partition``); these two
functions are the *names* torch code passes as ``partition_fn`` to ``aot_function`` /
``aot_module_simplified`` / ``aot_autograd``, which pick ember's partitioner of the same
policy: ``default_partition`` saves every forward value the backward reads,
``min_cut_rematerialization_partition`` saves a minimum-bytes set and recomputes cheap ops
(ember's default). Called directly on a joint ``JointGraph`` they run that partitioner and
return ``(forward GraphModule, backward GraphModule)`` as torch's do. A ``partition_fn`` of the
user's own is not supported (``aot_autograd.resolve_partition_fn`` says so)."""
from __future__ import annotations

from ..aot.joint import JointGraph
from ..aot.partition import default_partition as _default, min_cut_partition as _min_cut


def _check_joint(joint, who: str) -> JointGraph:
    if not isinstance(joint, JointGraph):
        raise TypeError(f"{who}: expected ember's joint graph (ember.aot.JointGraph, what "
                        f"ember.aot.trace_joint returns), got {type(joint).__name__}; to choose a "
                        f"partitioner for a compile, pass this function as partition_fn=")
    return joint


def default_partition(joint_module, _joint_inputs=None, *, num_fwd_outputs=None, **kwargs):
    """Save every forward value the backward reads: ``(fw_module, bw_module)``."""
    fw, bw, _, _ = _default(_check_joint(joint_module, "default_partition"))
    return fw, bw


def min_cut_rematerialization_partition(joint_module, _joint_inputs=None, compiler="inductor", *,
                                        num_fwd_outputs=None, **kwargs):
    """Save a minimum-bytes set of forward values, recomputing cheap ones: ``(fw_module, bw_module)``."""
    fw, bw, _, _ = _min_cut(_check_joint(joint_module, "min_cut_rematerialization_partition"))
    return fw, bw


#: partition_fn -> the memory budget that selects ember's partitioner of that policy
BUDGET_FOR = {default_partition: 1.0, min_cut_rematerialization_partition: None}

__all__ = ["default_partition", "min_cut_rematerialization_partition"]
