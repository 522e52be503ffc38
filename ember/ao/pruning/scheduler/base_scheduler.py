"""``BaseScheduler``: moves each sparsifier group's ``sparsity_level`` step by step, as an LR
scheduler moves an optimizer's learning rate. The groups' levels at construction are the
targets (``base_sl``); a subclass's ``get_sl()`` gives the levels for ``last_epoch``. The
sparsifier's ``step`` is wrapped to count its calls, for torch's order warnings."""
from __future__ import annotations

import warnings
import weakref
from functools import wraps

from ..sparsifier.base_sparsifier import BaseSparsifier

__all__ = ["BaseScheduler"]


def _counting(method):
    """``method`` (a bound ``step``) wrapped to bump its instance's ``_step_count`` on each call."""
    if getattr(method, "_with_counter", False):
        return method
    owner = weakref.ref(method.__self__)
    func = method.__func__

    @wraps(func)
    def wrapper(*args, **kwargs):
        instance = owner()
        instance._step_count += 1
        return func.__get__(instance, type(instance))(*args, **kwargs)
    wrapper._with_counter = True
    return wrapper


class _InsideStep:
    """Marks ``get_sl`` calls made by ``step`` (others warn, as torch's)."""

    def __init__(self, scheduler):
        self.scheduler = scheduler

    def __enter__(self):
        self.scheduler._get_sl_called_within_step = True

    def __exit__(self, *exc):
        self.scheduler._get_sl_called_within_step = False


class BaseScheduler:
    def __init__(self, sparsifier, last_epoch=-1, verbose=False):
        if not isinstance(sparsifier, BaseSparsifier):
            raise TypeError(f"{type(sparsifier).__name__} is not an instance of torch.ao.pruning.BaseSparsifier")
        self.sparsifier = sparsifier
        self.base_sl = [group["sparsity_level"] for group in sparsifier.groups]
        self.last_epoch = last_epoch
        self.sparsifier.step = _counting(self.sparsifier.step)
        self.sparsifier._step_count = 0
        self._step_count = 0
        self.verbose = verbose
        self._get_sl_called_within_step = False
        self.step()

    def state_dict(self):
        """Every attribute but the sparsifier."""
        return {key: value for key, value in self.__dict__.items() if key != "sparsifier"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_sl(self):
        """The sparsity levels the last ``step`` set."""
        return self._last_sl

    def get_sl(self):
        if not self._get_sl_called_within_step:
            warnings.warn("To get the last sparsity level computed by the scheduler, please use `get_last_sl()`.",
                          stacklevel=2)
        raise NotImplementedError

    def print_sl(self, is_verbose, group, sl, epoch=None):
        if is_verbose:
            if epoch is None:
                print(f"Adjusting sparsity level of group {group} to {sl:.4e}.")
            else:
                print(f"Epoch {epoch:5d}: adjusting sparsity level of group {group} to {sl:.4e}.")

    def __repr__(self):
        return f"{self.__class__.__name__} (\nSparsifier {self.sparsifier}\n    base_sl: {self.base_sl}\n)"

    def step(self, epoch=None):
        if self._step_count == 1:
            if not hasattr(self.sparsifier.step, "_with_counter"):
                warnings.warn("Seems like `sparsifier.step()` has been overridden after sparsity scheduler "
                              "initialization. Please, make sure to call `sparsifier.step()` before "
                              "`scheduler.step()`.", UserWarning, stacklevel=2)
            elif self.sparsifier._step_count < 1:
                warnings.warn("Detected call of `scheduler.step()` before `sparsifier.step()`. You have to make sure "
                              "you run the sparsifier.step() BEFORE any calls to the scheduler.step().", UserWarning,
                              stacklevel=2)
        self._step_count += 1
        with _InsideStep(self):
            self.last_epoch += 1
            values = self.get_sl()
        for i, (group, sl) in enumerate(zip(self.sparsifier.groups, values)):
            group["sparsity_level"] = sl
            self.print_sl(self.verbose, i, sl, epoch)
        self._last_sl = [group["sparsity_level"] for group in self.sparsifier.groups]
        self.sparsifier.enable_mask_update = True

    def _make_sure_a_list(self, var):
        """``var`` repeated per group, or checked to have one entry per group."""
        n = len(self.sparsifier.groups)
        if not isinstance(var, (list, tuple)):
            return [var] * n
        if len(var) != n:
            raise ValueError(f"Expected variable of length {n}, but got {len(var)}")
        return list(var)
