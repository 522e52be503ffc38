"""Pass infrastructure (``torch.fx.passes.infra``): :mod:`.pass_base`
(PassBase, PassResult), :mod:`.pass_manager` (PassManager and pass ordering
constraints) and :mod:`.partitioner` (CapabilityBasedPartitioner)."""

from . import pass_base, pass_manager  # noqa: F401
