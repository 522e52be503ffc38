"""Training with uneven inputs: the ``Join`` context manager (PyTorch's
``torch.distributed.algorithms.join``).

Collectives need every rank of the group; when one rank runs out of batches before the
others, the others would block in their next collective. Inside ``with Join([...])``, every
rank announces each iteration through ``Join.notify_join_context(joinable)`` (one
all-reduce of 1: "still here"). A rank that leaves the ``with`` body keeps answering those
all-reduces with 0 and, each time the sum says some rank is still working, runs every
joinable's ``JoinHook.main_hook()``, which issues the same collectives the working ranks'
iteration does (DDP: zero gradients into the gradient all-reduce). When the sum reaches 0
every rank has joined; each runs its hooks' ``post_hook(is_last_joiner)`` (DDP: copy the
final model from a rank that joined last) and leaves.

The protocol's collectives, per iteration of a rank still working / of a joined rank:

* working: ``all_reduce(1)`` in ``notify_join_context`` (plus, with
  ``throw_on_early_termination``, ``all_reduce(0)``: did anyone run out?), then its own
  collectives;
* joined: ``all_reduce(0)`` (how many still work?), then (with
  ``throw_on_early_termination``) ``all_reduce(1)`` and raise, else the main hooks.
"""
from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import NamedTuple

__all__ = ["Join", "JoinHook", "Joinable"]


class JoinHook:
    """What a joined rank runs for a ``Joinable``: ``main_hook()`` once per iteration some
    rank is still working (shadow its collectives), ``post_hook(is_last_joiner)`` once all
    ranks have joined. Both do nothing by default."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


class _JoinConfig(NamedTuple):
    """How ``Join`` set up a joinable: whether it is inside an enabled join context, whether to
    raise when a rank runs out, and whether it is the first joinable (which alone runs the
    per-iteration notification all-reduce)."""
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config():
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(ABC):
    """A class whose per-iteration collectives a joined rank can shadow: it gives a
    ``join_hook``, the ``join_device`` and ``join_process_group`` of the notification
    all-reduce, and calls ``Join.notify_join_context(self)`` once per iteration."""

    @abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abstractmethod
    def join_hook(self, **kwargs):
        ...

    @property
    @abstractmethod
    def join_device(self):
        ...

    @property
    @abstractmethod
    def join_process_group(self):
        ...


_SKEW_WARN = 1000


class Join:
    """``with Join(joinables, enable=True, throw_on_early_termination=False, **hook_kwargs):``
    run a loop whose iteration count may differ across ranks. ``hook_kwargs`` go to every
    joinable's ``join_hook``. With ``throw_on_early_termination`` every rank raises as soon
    as one runs out instead of shadowing."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = joinables
        self._join_hooks = [j.join_hook(**kwargs) for j in joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        for i, j in enumerate(joinables):
            j._join_config = _JoinConfig(enable=enable, throw_on_early_termination=throw_on_early_termination,
                                         is_first_joinable=(i == 0))
        self._process_group, self._device = None, None
        for j in joinables:
            pg = j.join_process_group
            if self._process_group is None:
                self._process_group = pg
            elif self._process_group is not pg:
                raise ValueError("Using join context manager with multiple process groups")
            if self._device is None:
                self._device = j.join_device
        from .. import distributed_c10d as c10d
        self._rank = c10d.get_rank(self._process_group)

    def __enter__(self):
        pass

    def __exit__(self, exc_type, exc, tb):
        try:
            if not self._enable or exc_type is not None:
                return      # an error in the body propagates as it is
            is_last_joiner = True
            rounds = 0
            while True:
                if rounds > _SKEW_WARN:
                    warnings.warn(f"Detected uneven input skew of greater than {_SKEW_WARN}. This means that rank "
                                  f"{self._rank} has at least {_SKEW_WARN} fewer inputs than other currently-active "
                                  f"ranks. This level of skew could lead to performance degradation during training.")
                if self._count(0) == 0:
                    break
                if self._throw_on_early_termination:
                    self._count(1)          # answers the working ranks' "did anyone run out?"
                    raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                rounds += 1
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
        finally:
            for j in self._joinables:       # joinables used after the context run without it
                j._join_config = _JoinConfig.construct_disabled_join_config()

    def _count(self, mine):
        """Sum of ``mine`` over the group (a working rank's notification is 1)."""
        from ... import tensor, float32
        from .. import distributed_c10d as c10d
        t = tensor([float(mine)], dtype=float32)
        c10d.all_reduce(t, group=self._process_group)
        return t.item()

    @staticmethod
    def notify_join_context(joinable):
        """Called by a working rank once per iteration (by every joinable; only the first one
        of a join context communicates). Returns the async all-reduce's work, whose tensor
        holds the number of working ranks, or None outside an enabled join context."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(f"Check that the {type(joinable)} constructor calls the ``Joinable`` constructor")
        cfg = joinable._join_config
        if not cfg.is_first_joinable or not cfg.enable:
            return None
        from ... import ones, zeros, float32
        from .. import distributed_c10d as c10d
        pg = joinable.join_process_group
        work = c10d.all_reduce(ones(1, dtype=float32), group=pg, async_op=True)
        if cfg.throw_on_early_termination:
            flag = zeros(1, dtype=float32)
            c10d.all_reduce(flag, group=pg)
            if flag.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work
