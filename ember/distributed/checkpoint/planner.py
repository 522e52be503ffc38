"""``DefaultSavePlanner`` / ``DefaultLoadPlanner``: here they carry the default planners'
options (``dedup_save_to_lowest_rank``, ``allow_partial_load``); ember has no pluggable planning
(custom ``SavePlanner``/``LoadPlanner`` subclasses are refused by ``save``/``load``)."""
from __future__ import annotations

__all__ = ["DefaultSavePlanner", "DefaultLoadPlanner"]


class DefaultSavePlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, dedup_replicated_tensors=None,
                 dedup_save_to_lowest_rank=False, enable_plan_caching=False):
        if not flatten_state_dict:
            raise NotImplementedError("ember.distributed.checkpoint.DefaultSavePlanner: flatten_state_dict=False is "
                                      "not supported (nested state_dicts are always flattened)")
        self.dedup_save_to_lowest_rank = bool(dedup_save_to_lowest_rank)


class DefaultLoadPlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, allow_partial_load=False):
        if not flatten_state_dict:
            raise NotImplementedError("ember.distributed.checkpoint.DefaultLoadPlanner: flatten_state_dict=False is "
                                      "not supported (nested state_dicts are always flattened)")
        self.allow_partial_load = bool(allow_partial_load)


def check_planner(planner, cls, what):
    if planner is None:
        return cls()
    if type(planner) is not cls:
        raise NotImplementedError(f"ember.distributed.checkpoint.{what}: custom planners ({type(planner).__name__}) "
                                  f"are not supported; pass planner=None or a {cls.__name__}")
    return planner
