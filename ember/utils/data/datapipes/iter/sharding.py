"""ShardingFilter (``sharding_filter``): each DataLoader worker / rank keeps every n-th item."""
from enum import IntEnum

from .._decorator import functional_datapipe
from ..datapipe import IterDataPipe
from ._len import no_length

__all__ = ["SHARDING_PRIORITIES", "ShardingFilterIterDataPipe"]


class SHARDING_PRIORITIES(IntEnum):
    DEFAULT = 1
    DISTRIBUTED = 2
    MULTIPROCESSING = 3


class _ShardingIterDataPipe(IterDataPipe):
    def apply_sharding(self, num_of_instances, instance_id, sharding_group):
        raise NotImplementedError


@functional_datapipe("sharding_filter")
class ShardingFilterIterDataPipe(_ShardingIterDataPipe):
    """Item ``i`` goes to instance ``i % num_of_instances``. Sharding groups (distributed ranks,
    then workers) combine: the instance id is mixed radix over the groups in priority order."""

    def __init__(self, source_datapipe, sharding_group_filter=None):
        super().__init__()
        self.source_datapipe = source_datapipe
        self.sharding_group_filter = sharding_group_filter
        self.groups = {}
        self.num_of_instances = 1
        self.instance_id = 0
        self._update_num_of_instances()

    def apply_sharding(self, num_of_instances, instance_id, sharding_group=SHARDING_PRIORITIES.DEFAULT):
        if instance_id >= num_of_instances:
            raise ValueError(f"instance_id({instance_id}) should be smaller than num_of_instances({num_of_instances})")
        if sharding_group == SHARDING_PRIORITIES.DEFAULT:
            if self.groups and SHARDING_PRIORITIES.DEFAULT not in self.groups:
                raise RuntimeError("ShardingFilter cannot mix DEFAULT and non DEFAULT groups")
        elif SHARDING_PRIORITIES.DEFAULT in self.groups:
            raise RuntimeError("ShardingFilter cannot mix DEFAULT and non DEFAULT groups")
        self.groups[sharding_group] = (num_of_instances, instance_id)
        self._update_num_of_instances()

    def _update_num_of_instances(self):
        selected = [self.groups[k] for k in sorted(self.groups, reverse=True)
                    if self.sharding_group_filter is None or k == self.sharding_group_filter]
        self.num_of_instances, self.instance_id = 1, 0
        for n, i in selected:
            self.instance_id += self.num_of_instances * i
            self.num_of_instances *= n

    def __iter__(self):
        for i, item in enumerate(self.source_datapipe):
            if i % self.num_of_instances == self.instance_id:
                yield item

    def __len__(self):
        if hasattr(type(self.source_datapipe), "__len__"):
            n = len(self.source_datapipe)
            return n // self.num_of_instances + (1 if self.instance_id < n % self.num_of_instances else 0)
        raise no_length(self)
