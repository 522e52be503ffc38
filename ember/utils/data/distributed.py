"""``DistributedSampler``: each of ``num_replicas`` processes reads its own share of a dataset.

Same contract as PyTorch's ``torch.utils.data.DistributedSampler``: the dataset's
indices (shuffled with a generator seeded ``seed + epoch``, or in order) are padded by
repeating from the front -- or cut at the end with ``drop_last`` -- to a multiple of
``num_replicas``, and rank ``r`` takes every ``num_replicas``-th index starting at ``r``.
So all ranks get ``len(sampler)`` indices, and together they cover the dataset.

The shuffled order comes from ``ember.randperm`` with an ``ember.Generator``. ember's
generators are numpy's PCG64, not PyTorch's Mersenne Twister, so for the same
``seed`` and epoch the order differs from torch's; what matters for distributed
training holds: every process computes the *same* permutation (same seed, same
epoch), so the ranks' shares are disjoint (apart from the padding) and the union is
the whole dataset, and ``set_epoch`` gives a new order per epoch.
"""
from __future__ import annotations

import math

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _default_from_process_group(what):
    """``num_replicas`` / ``rank`` of the default process group (ember.distributed); the
    distributed package's own ValueError when no group was initialised, as torch's."""
    from ... import distributed as dist
    if not dist.is_available():
        raise RuntimeError("Requires distributed package to be available")
    return dist.get_world_size() if what == "world_size" else dist.get_rank()


class DistributedSampler(Sampler):
    """Restricts a DataLoader to this process's share of ``dataset`` (see the module docstring).

    Args: ``dataset`` (anything with ``len``), ``num_replicas`` / ``rank`` (default: the
    world size and rank of ``ember.distributed``'s default group), ``shuffle`` (True),
    ``seed`` (0; must be the same on every rank), ``drop_last`` (False: pad instead).
    Call :meth:`set_epoch` at the start of every epoch, before iterating the loader,
    or every epoch sees the same order.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = _default_from_process_group("world_size")
        if rank is None:
            rank = _default_from_process_group("rank")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # the largest multiple of num_replicas below n, split evenly
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def _all_indices(self):
        """The padded (or cut) index list all ranks share, before taking this rank's slice."""
        n = len(self.dataset)
        if self.shuffle:
            from ... import randperm
            from ...random import Generator
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            pad = self.total_size - len(indices)
            if pad > 0:
                reps = math.ceil(pad / len(indices))
                indices += (indices * reps)[:pad]
        if len(indices) != self.total_size:
            raise AssertionError(f"Number of indices ({len(indices)}) does not match total_size ({self.total_size})")
        return indices

    def __iter__(self):
        mine = self._all_indices()[self.rank:self.total_size:self.num_replicas]
        if len(mine) != self.num_samples:
            raise AssertionError(f"Number of subsampled indices ({len(mine)}) does not match num_samples "
                                 f"({self.num_samples})")
        return iter(mine)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Use ``epoch`` in the shuffling seed (``seed + epoch``): a new order per epoch, the same on every rank."""
        self.epoch = epoch
