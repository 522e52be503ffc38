"""``ember.distributed.fsdp``: FSDP2's ``fully_shard`` on top of DTensor (torch.distributed.fsdp)."""
from ._fully_shard import FSDPModule, fully_shard

__all__ = ["fully_shard", "FSDPModule"]
