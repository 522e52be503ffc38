"""The config-module API torch's ``config`` modules share (``torch._dynamo.config``,
``torch._inductor.config``, ``torch._functorch.config``): ``patch`` (context manager and
decorator), ``get_config_copy`` and ``load_config`` over a module whose knobs are translated
onto ember's own (each subclass's ``__getattr__``/``__setattr__`` does the translating and
raises for names it does not know: a knob that would be silently ignored is worse than an
error)."""
from __future__ import annotations

import functools
import pickle
import types


class ConfigModule(types.ModuleType):
    """Base of the translating config modules; ``_KNOWN`` lists the torch names supported,
    ``_EMBER_HOME`` where ember's own knobs are."""

    _KNOWN: tuple = ()
    _EMBER_HOME = ""

    def _unknown(self, name: str) -> AttributeError:
        """The error for a knob this module does not translate."""
        return AttributeError(f"{self.__name__} has no knob {name!r} (supported: {', '.join(self._KNOWN)}; "
                              f"ember's own knobs are in {self._EMBER_HOME})")

    def _check_fixed(self, name: str, value, fixed: dict) -> None:
        """A knob describing how ember always works: its value is accepted, any other raises."""
        if bool(value) != fixed[name]:
            raise ValueError(f"{self.__name__}.{name}={value!r} is not supported: ember always works as "
                             f"{name}={fixed[name]}")

    def patch(self, arg1=None, arg2=None, **kwargs):
        """``config.patch("name", value)`` / ``patch({"name": value})`` / ``patch(name=value)``: a
        context manager and decorator setting knobs while in force (torch's ``config.patch``).
        Every name is checked (and its old value read) when the patch is made."""
        if isinstance(arg1, str):
            changes = {arg1: arg2}
        elif isinstance(arg1, dict):
            changes = dict(arg1)
        elif arg1 is None:
            changes = {}
        else:
            raise TypeError(f"config.patch: expected a config name or a dict, got {type(arg1).__name__}")
        changes.update(kwargs)
        for k in changes:
            _get_dotted(self, k)      # unknown names raise AttributeError now, not at __enter__
        return _Patch(self, changes)

    def get_config_copy(self) -> dict:
        """The current value of every knob, by torch's name."""
        return {k: _get_dotted(self, k) for k in self._KNOWN}

    def load_config(self, maybe_pickled_config):
        """Set knobs from a dict (or the pickle of one) made by ``get_config_copy``."""
        cfg = pickle.loads(maybe_pickled_config) if isinstance(maybe_pickled_config, bytes) else maybe_pickled_config
        if not isinstance(cfg, dict):
            raise TypeError(f"load_config: expected a dict or its pickle, got {type(cfg).__name__}")
        for k, v in cfg.items():
            _set_dotted(self, k, v)


def _get_dotted(obj, name: str):
    """``getattr`` through dots (``"cpp.threads"``: torch's nested config classes)."""
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _set_dotted(obj, name: str, value) -> None:
    *head, last = name.split(".")
    for part in head:
        obj = getattr(obj, part)
    setattr(obj, last, value)


class _Patch:
    """What ``config.patch`` returns: sets the changes on enter, restores the old values on exit;
    used as a decorator it wraps each call."""

    def __init__(self, cfg, changes):
        self.cfg, self.changes, self._saved = cfg, changes, []

    def __enter__(self):
        saved = {k: _get_dotted(self.cfg, k) for k in self.changes}
        try:
            for k, v in self.changes.items():
                _set_dotted(self.cfg, k, v)
        except BaseException:
            for k, v in saved.items():
                _set_dotted(self.cfg, k, v)
            raise
        self._saved.append(saved)

    def __exit__(self, *exc):
        for k, v in self._saved.pop().items():
            _set_dotted(self.cfg, k, v)
        return False

    def __call__(self, fn):
        if isinstance(fn, type):
            raise TypeError("config.patch: decorating a class is not supported; decorate its methods")

        @functools.wraps(fn)
        def patched(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return patched
