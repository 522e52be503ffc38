"""Settings applied across a whole pipeline: shuffling on/off, per-epoch seeds, sharding.

DataLoader calls these: ``apply_shuffle_settings`` for its ``shuffle=`` argument,
``apply_random_seed`` at every epoch (one shared seed, so all workers shuffle alike and then
keep disjoint shards), ``apply_sharding`` in each worker (its ``sharding_filter`` keeps every
``num_workers``-th item).
"""
from __future__ import annotations

import inspect
import warnings

from .datapipes.iter.combinatorics import draw_seed
from .datapipes.iter.sharding import SHARDING_PRIORITIES, _ShardingIterDataPipe
from .graph import traverse_dps

__all__ = ["apply_random_seed", "apply_sharding", "apply_shuffle_seed", "apply_shuffle_settings",
           "get_all_graph_pipes"]


def get_all_graph_pipes(graph) -> list:
    """Every datapipe in a ``traverse_dps`` graph, once each (depth first)."""
    seen, out = set(), []

    def walk(g):
        for dp_id, (dp, sub) in g.items():
            if dp_id in seen:
                continue
            seen.add(dp_id)
            out.append(dp)
            walk(sub)
    walk(graph)
    return out


def _is_sharding_datapipe(dp) -> bool:
    return isinstance(dp, _ShardingIterDataPipe) or (hasattr(dp, "apply_sharding")
                                                      and inspect.ismethod(dp.apply_sharding))


def apply_sharding(datapipe, num_of_instances, instance_id, sharding_group=SHARDING_PRIORITIES.DEFAULT):
    """Tell each sharding datapipe which shard to keep; two on one path is a RuntimeError."""
    def walk(graph, applied_above=None):
        for dp, sub in graph.values():
            applied = applied_above
            if _is_sharding_datapipe(dp):
                if applied_above is not None:
                    raise RuntimeError("Sharding twice on a single pipeline is likely unintended and will cause data "
                                       f"loss. Sharding already applied to {applied_above} while trying to apply to "
                                       f"{dp}")
                if len(inspect.signature(dp.apply_sharding).parameters) < 3:
                    dp.apply_sharding(num_of_instances, instance_id)
                else:
                    dp.apply_sharding(num_of_instances, instance_id, sharding_group=sharding_group)
                applied = dp
            walk(sub, applied)
    walk(traverse_dps(datapipe))
    return datapipe


def _is_shuffle_datapipe(dp) -> bool:
    return (hasattr(dp, "set_shuffle") and hasattr(dp, "set_seed") and inspect.ismethod(dp.set_shuffle)
            and inspect.ismethod(dp.set_seed))


def apply_shuffle_settings(datapipe, shuffle=None):
    """Switch every shuffler on or off (None: leave them); ``shuffle=True`` with none appends one."""
    if shuffle is None:
        return datapipe
    shufflers = [p for p in get_all_graph_pipes(traverse_dps(datapipe)) if _is_shuffle_datapipe(p)]
    if not shufflers and shuffle:
        warnings.warn("`shuffle=True` was set, but the datapipe does not contain a `Shuffler`. Adding one at the end. "
                      "Be aware that the default buffer size might not be sufficient for your task.", stacklevel=2)
        datapipe = datapipe.shuffle()
        shufflers = [datapipe]
    for s in shufflers:
        s.set_shuffle(shuffle)
    return datapipe


def apply_shuffle_seed(datapipe, rng):
    warnings.warn("`apply_shuffle_seed` is deprecated since 1.12 and will be removed in the future releases. "
                  "Please use `apply_random_seed` instead.", FutureWarning, stacklevel=2)
    return apply_random_seed(datapipe, rng)


def _is_random_datapipe(dp) -> bool:
    return hasattr(dp, "set_seed") and inspect.ismethod(dp.set_seed)


def apply_random_seed(datapipe, rng):
    """Give every random datapipe (one with ``set_seed``) a seed drawn from ``rng`` (an
    ``ember.Generator``), in graph order."""
    seen, randoms = set(), []
    for p in get_all_graph_pipes(traverse_dps(datapipe)):
        if id(p) not in seen and _is_random_datapipe(p):
            seen.add(id(p))
            randoms.append(p)
    for p in randoms:
        p.set_seed(draw_seed(rng))
    return datapipe
