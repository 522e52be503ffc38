"""``torch._inductor.config`` names on ``ember.inductor.config`` (the CPU compiler's knobs).

Translated:

* ``cpp.threads`` (torch: -1 = all cores): ``ember.inductor.config.threads`` (None = all cores);
* ``cpp.simdlen`` (torch: None = the machine's width, 1 = no vectorisation): None turns
  ``ember.inductor.config.simd`` on, 1 off; other widths raise (ember compiles for the host's
  vector width, ``-march=native``);
* ``compile_threads``: ``ember.inductor.config.compile_threads`` (compiler processes per graph);
* ``fx_graph_cache``: ember's FX-graph disk cache on/off (``EMBER_FX_GRAPH_CACHE`` for this
  process); ``force_disable_caches``: ``ember.compiler.config.force_disable_caches``;
* ``epilogue_fusion`` / ``aggressive_fusion``: read ``ember.inductor.config.fusion``; setting
  either sets it;
* ``debug``: True turns the ``output_code`` log on (the generated C++ and wrapper, on stderr).
* ``fallback_random``: the same knob (compiled random numbers drawn by the eager kernels, equal
  to eager's).

Accepted with a one-time warning that they change nothing here (a performance hint, never a
result): ``max_autotune``, ``max_autotune_gemm``, ``max_autotune_pointwise``,
``coordinate_descent_tuning``, ``freezing``, ``size_asserts``, ``triton.cudagraphs``,
``triton.unique_kernel_names``, ``benchmark_kernel``, ``trace.enabled``.

ember's own knobs (``fusion``, ``simd``, ``threads``, ``parallel``, ...) are reachable here too;
any other name raises AttributeError listing the torch names supported."""
import logging
import os
import sys
import types
import warnings

from .._config_module import ConfigModule
from ..inductor import config as _ember

_NO_EFFECT = {"max_autotune": False, "max_autotune_gemm": False, "max_autotune_pointwise": False,
              "coordinate_descent_tuning": False, "freezing": False, "size_asserts": True,
              "benchmark_kernel": False}
_FUSION = ("epilogue_fusion", "aggressive_fusion")
_OFF = ("0", "false", "off", "no")


def _warn_no_effect(name: str, value) -> None:
    warnings.warn(f"ember._inductor.config.{name}={value!r} has no effect in ember (its CPU compiler "
                  f"has no such mode); results are unaffected", UserWarning, stacklevel=3)


class _Section(types.SimpleNamespace):
    """A nested config class of torch's (``cpp``, ``triton``, ``trace``): its knobs are
    translated by the owner's getter/setter pair for each name."""

    def __init__(self, section: str, knobs: dict):
        object.__setattr__(self, "_section", section)
        object.__setattr__(self, "_knobs", knobs)

    def __getattr__(self, name):
        knobs = object.__getattribute__(self, "_knobs")
        if name in knobs:
            return knobs[name][0]()
        raise AttributeError(f"ember._inductor.config.{self._section} has no knob {name!r} "
                             f"(supported: {', '.join(knobs)})")

    def __setattr__(self, name, value):
        knobs = self._knobs
        if name not in knobs:
            raise AttributeError(f"ember._inductor.config.{self._section} has no knob {name!r} "
                                 f"(supported: {', '.join(knobs)})")
        knobs[name][1](value)

    def __repr__(self):
        return f"<ember._inductor.config.{self._section}: {', '.join(self._knobs)}>"


def _get_threads():
    return -1 if _ember.threads is None else _ember.threads


def _set_threads(v):
    if isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1):
        raise ValueError(f"ember._inductor.config.cpp.threads must be -1 (all cores) or a positive int, got {v!r}")
    _ember.threads = None if v == -1 else v


def _get_simdlen():
    return None if _ember.simd else 1


def _set_simdlen(v):
    if v is None:
        _ember.simd = True
    elif v == 1 and not isinstance(v, bool):
        _ember.simd = False
    else:
        raise ValueError(f"ember._inductor.config.cpp.simdlen={v!r} is not supported: ember compiles for the "
                         f"host's vector width (None) or without vectorisation (1)")


def _stored(store: dict, name: str, default):
    """A getter/setter pair for an accepted knob that changes nothing (warns once when set)."""
    def get():
        return store.get(name, default)

    def set_(v):
        if v != default and name not in store:
            _warn_no_effect(name, v)
        store[name] = v
    return get, set_


_store: dict = {}
cpp = _Section("cpp", {"threads": (_get_threads, _set_threads), "simdlen": (_get_simdlen, _set_simdlen)})
triton = _Section("triton", {"cudagraphs": _stored(_store, "triton.cudagraphs", False),
                             "unique_kernel_names": _stored(_store, "triton.unique_kernel_names", False)})
trace = _Section("trace", {"enabled": _stored(_store, "trace.enabled", False)})


class _Config(ConfigModule):
    _KNOWN = ("cpp.threads", "cpp.simdlen", "compile_threads", "fx_graph_cache", "force_disable_caches",
              "debug", "triton.cudagraphs", "triton.unique_kernel_names", "trace.enabled") + _FUSION \
        + tuple(_NO_EFFECT)
    _EMBER_HOME = "ember.inductor.config"

    def __getattr__(self, name):
        if name == "compile_threads":
            return _ember.compile_threads
        if name == "fx_graph_cache":
            return os.environ.get("EMBER_FX_GRAPH_CACHE", "1").strip().lower() not in _OFF
        if name == "force_disable_caches":
            from .. import compiler
            return compiler.config.force_disable_caches
        if name in _FUSION:
            return _ember.fusion
        if name == "debug":
            return logging.getLogger("ember.inductor.output_code").isEnabledFor(logging.DEBUG)
        if name in _NO_EFFECT:
            return _store.get(name, _NO_EFFECT[name])
        if not name.startswith("_") and hasattr(_ember, name):
            return getattr(_ember, name)
        raise self._unknown(name)

    def __setattr__(self, name, value):
        if name == "compile_threads":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ember._inductor.config.compile_threads must be a positive int, got {value!r}")
            _ember.compile_threads = value
        elif name == "fx_graph_cache":
            os.environ["EMBER_FX_GRAPH_CACHE"] = "1" if value else "0"
        elif name == "force_disable_caches":
            from .. import compiler
            compiler.config.force_disable_caches = value
        elif name in _FUSION:
            _ember.fusion = bool(value)
        elif name == "debug":
            _set_debug(bool(value))
        elif name in _NO_EFFECT:
            if value != _NO_EFFECT[name] and name not in _store:
                _warn_no_effect(name, value)
            _store[name] = value
        elif name.startswith("__") or name in ("cpp", "triton", "trace"):
            super().__setattr__(name, value)
        elif not name.startswith("_") and hasattr(_ember, name):
            setattr(_ember, name, value)
        else:
            raise self._unknown(name)


_DEBUG_HANDLER = []


def _set_debug(on: bool) -> None:
    """``debug=True``: the generated code on stderr (the ``output_code`` log at DEBUG level)."""
    lg = logging.getLogger("ember.inductor.output_code")
    if on and not _DEBUG_HANDLER:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("[ember output_code] %(message)s"))
        lg.addHandler(h)
        _DEBUG_HANDLER.append((h, lg.level))
        lg.setLevel(logging.DEBUG)
    elif not on and _DEBUG_HANDLER:
        h, level = _DEBUG_HANDLER.pop()
        lg.removeHandler(h)
        lg.setLevel(level)


sys.modules[__name__].__class__ = _Config
