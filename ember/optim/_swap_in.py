"""``swap_in_optimizer_params_and_state``: run an optimizer on other tensors for a while.

Within the block the optimizer's param groups hold the given parameters (and the given
groups' hyper-parameters) and its ``state`` is the given ``state_dict()``-shaped state,
re-keyed to those parameters -- so ``step()`` (and every hook) works on them; on exit the
live groups and state come back untouched. Per-parameter state dicts are shallow copies:
in-place tensor updates reach the caller's state, reassignments do not (as PyTorch's)."""
from __future__ import annotations

import contextlib
from collections import defaultdict

__all__ = ["swap_in_optimizer_params_and_state"]

_NAME = "swap_in_optimizer_params_and_state"


def _checked_state(state):
    from ..tensor import Tensor
    if not isinstance(state, dict):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be a dict mapping packed parameter ids "
                           f"to per-param state dicts, got {type(state).__name__}.")
    if any(isinstance(k, Tensor) for k in state):
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style state keyed by packed parameter ids.")
    if any(isinstance(k, int) and not isinstance(v, dict) for k, v in state.items()):
        raise RuntimeError(f"{_NAME} requires per-parameter optimizer state entries to be dictionaries.")
    return state


def _checked_groups(optimizer, groups):
    if not isinstance(groups, list):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['param_groups'] to be a list of param-group dicts, "
                           f"got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups than the live optimizer.")
    return groups


def _checked_group_ids(idx, live, given):
    if not isinstance(given, dict):
        raise RuntimeError(f"{_NAME} requires each optimizer param group to be a dictionary.")
    ids = given.get("params")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param_groups[*]['params'] entries keyed "
                           f"by packed parameter ids.")
    if len(ids) != len(live["params"]):
        raise RuntimeError(f"swapin_optim_state param group {idx} has a different number of params than the live "
                           f"optimizer param group.")
    only_given = [k for k in given if k not in live]
    only_live = [k for k in live if k not in given]
    if only_given or only_live:
        raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param group keys to exactly match the "
                           f"live optimizer group keys for group {idx}. Keys only in swap-in: {only_given}. Keys only "
                           f"in live: {only_live}.")
    return ids


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """See the module docstring. ``swapin_parameters``: name -> tensor, in the optimizer's
    parameter order; ``swapin_optim_state``: ``{"state": {id: {...}}, "param_groups": [...]}``."""
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    given_state = _checked_state(swapin_optim_state.get("state"))
    given_groups = _checked_groups(optimizer, swapin_optim_state.get("param_groups"))
    tensors = list(swapin_parameters.values())
    plan, used, offset = [], set(), 0
    for idx, (live, given) in enumerate(zip(optimizer.param_groups, given_groups)):
        ids = _checked_group_ids(idx, live, given)
        used.update(ids)
        if offset + len(ids) > len(tensors):
            raise RuntimeError(f"{_NAME} requires the explicit parameter state to match optimizer.param_groups "
                               f"ordering.")
        plan.append((live, given, tensors[offset:offset + len(ids)], ids))
        offset += len(ids)
    extra = [k for k in given_state if k not in used]
    if extra:
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be keyed only by packed parameter ids "
                           f"from param_groups[*]['params']; got extra keys {extra!r}.")

    live_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        swapped = defaultdict(dict)
        for live, given, params, ids in plan:
            live["params"] = params
            live.update({k: v for k, v in given.items() if k != "params"})
            for p, i in zip(params, ids):
                swapped[p] = dict(given_state.get(i, {}))
        optimizer.state = swapped
        yield
    finally:
        for group, snapshot in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snapshot)
        optimizer.state = live_state
