"""Autograd's global switches that torch exposes beside the grad modes: engine threading, view
replay, the gradient layout contract, and the version-counter escape hatch.

Each is torch's "set on construction, restore on exit" kind: ``set_multithreading_enabled(False)``
as a plain call switches for good; ``with set_multithreading_enabled(False):`` switches for the
block; as a decorator for each call of the function.
"""
from __future__ import annotations

import functools
import threading

__all__ = ["set_multithreading_enabled", "is_multithreading_enabled", "is_view_replay_enabled",
           "_force_original_view_tracking", "enforce_grad_layout_policy", "_unsafe_preserve_version_counter"]


class _Flags(threading.local):
    """Per thread, as torch's (multithreading is process-wide there; ember keeps it per thread
    like the others: it changes nothing ember computes, see ``set_multithreading_enabled``)."""

    def __init__(self):
        self.multithreading = True
        self.grad_layout = True


FLAGS = _Flags()


def _check_bool(fn, name, v):
    if not isinstance(v, bool):
        raise TypeError(f"{fn}(): {name} must be a bool, got {type(v).__name__}")


class _SetOnInit:
    """Switch in ``__init__`` (a plain call keeps it), restore on ``__exit__``; a decorator
    switches around each call (and, as torch's, the decorating call itself switched too)."""

    def _get(self):
        raise NotImplementedError

    def _set(self, v):
        raise NotImplementedError

    def __init__(self, mode):
        self.prev = self._get()
        self.mode = mode
        self._set(mode)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self._set(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)(self.mode)


class set_multithreading_enabled(_SetOnInit):
    """Whether backward may run a device's work on that device's own thread. ember's engine
    runs every backward on the calling thread (as torch does for cpu work), so the switch is
    recorded and reported, and changes no result."""

    def __init__(self, mode: bool):
        _check_bool("set_multithreading_enabled", "mode", mode)
        super().__init__(mode)

    def _get(self):
        return FLAGS.multithreading

    def _set(self, v):
        FLAGS.multithreading = v


def is_multithreading_enabled() -> bool:
    """What ``set_multithreading_enabled`` last set on this thread (True by default)."""
    return FLAGS.multithreading


def is_view_replay_enabled() -> bool:
    """Whether a view whose base changed in place gets its grad_fn by replaying its view ops.
    Never in ember: it gets an ``AsStridedBackward0`` (the same gradients)."""
    return False


class _force_original_view_tracking(_SetOnInit):
    """torch's switch to view replay. Only ``False`` (what ember does) is supported."""

    def __call__(self, fn):
        self._set(self.prev)            # torch's one switch whose decorating call does not switch
        return super().__call__(fn)

    def __init__(self, mode: bool):
        _check_bool("_force_original_view_tracking", "mode", mode)
        if mode:
            raise NotImplementedError("ember.autograd._force_original_view_tracking(True): view replay is not "
                                      "implemented; a view modified through its base gets an AsStridedBackward0 "
                                      "grad_fn (the gradients are the same)")
        super().__init__(mode)

    def _get(self):
        return False

    def _set(self, v):
        pass


class enforce_grad_layout_policy(_SetOnInit):
    """Whether ``.grad`` must follow its parameter's strides (the gradient layout contract). With
    ``enable=False`` a gradient that backward may adopt without a copy is adopted whatever its
    strides; a gradient that must be copied is still copied in the parameter's layout."""

    def __init__(self, enable: bool = True):
        _check_bool("enforce_grad_layout_policy", "enable", enable)
        super().__init__(enable)

    def _get(self):
        return FLAGS.grad_layout

    def _set(self, v):
        FLAGS.grad_layout = v


class _unsafe_preserve_version_counter:
    """Within the block, in-place writes to ``tensor`` (or each tensor of a tuple) leave its
    version counter as it was on entry: saved tensors will not notice them. Unsafe by design:
    use only when the write provably does not change what backward reads."""

    def __init__(self, tensors):
        from ..tensor import Tensor
        self.tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
        for t in self.tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"_unsafe_preserve_version_counter(): expected tensors, got {type(t).__name__}")
        self.prev_versions = tuple(t._version for t in self.tensors)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        for t, v in zip(self.tensors, self.prev_versions):
            vc = t._vc
            if vc is not None:
                vc[0] = v
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _unsafe_preserve_version_counter(self.tensors):
                return fn(*args, **kwargs)
        return wrapper
