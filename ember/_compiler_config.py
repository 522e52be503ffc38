"""``ember.compiler.config`` (``torch.compiler.config``): cross-cutting compiler knobs.

* ``job_id`` (env ``TORCH_COMPILE_JOB_ID``, else None): names the workload. torch keys its
  profile-guided-optimisation state by it; ember keeps no state across runs (its disk caches
  are keyed by content), so the value is only recorded for tools that read it;
* ``dynamic_sources`` (env ``TORCH_COMPILE_DYNAMIC_SOURCES``, default ``""``): comma-separated
  source names (``L['x']``, ``L['self']._modules['lin']._parameters['weight']``, ``G['buf']``) or
  regexes matched with ``re.match``, each optionally ``:N`` for dim N only; a matching tensor
  input of a compiled frame gets those dims symbolic from its first compile (as
  ``mark_dynamic``, parameters included, as torch);
* ``recompile_limit``, ``automatic_dynamic_shapes``, ``assume_static_by_default``,
  ``capture_scalar_outputs``, ``capture_dynamic_output_shape_ops``, ``verbose``,
  ``fail_on_recompile_limit_hit``: the ``ember._dynamo.config`` knobs of these names (aliases,
  as in torch);
* ``force_disable_caches`` (env ``TORCHINDUCTOR_FORCE_DISABLE_CACHES``): True turns ember's aot
  and FX-graph disk caches off (``EMBER_AOT_CACHE=0``, ``EMBER_FX_GRAPH_CACHE=0`` for this
  process).

``patch`` / ``get_config_copy`` / ``load_config``: torch's config-module API over these knobs.

Other torch names raise AttributeError naming the supported ones."""
from __future__ import annotations

import os
import re
import sys

from ._config_module import ConfigModule

_ALIASES = ("recompile_limit", "automatic_dynamic_shapes", "assume_static_by_default", "capture_scalar_outputs",
            "capture_dynamic_output_shape_ops", "verbose", "fail_on_recompile_limit_hit")
_CACHE_ENV = ("EMBER_AOT_CACHE", "EMBER_FX_GRAPH_CACHE")


def _env_true(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "on", "yes")


class _CompilerConfig(ConfigModule):
    _KNOWN = ("job_id", "dynamic_sources", "force_disable_caches") + _ALIASES

    def __getattr__(self, name):
        if name in _ALIASES:
            from ._dynamo import config as _dyn
            return getattr(_dyn, name)
        if name == "force_disable_caches":
            return all(os.environ.get(e, "1").strip().lower() in ("0", "false", "off", "no") for e in _CACHE_ENV)
        raise AttributeError(f"ember.compiler.config has no knob {name!r} (supported: {', '.join(self._KNOWN)})")

    def __setattr__(self, name, value):
        if name in _ALIASES:
            from ._dynamo import config as _dyn
            setattr(_dyn, name, value)
        elif name == "job_id":
            if value is not None and not isinstance(value, str):
                raise TypeError(f"ember.compiler.config.job_id must be a str or None, got {type(value).__name__}")
            self.__dict__["job_id"] = value
        elif name == "dynamic_sources":
            if not isinstance(value, str):
                raise TypeError(f"ember.compiler.config.dynamic_sources must be a str, got {type(value).__name__}")
            parse_sources(value)            # a bad entry is an error now, not at the next compile
            self.__dict__["dynamic_sources"] = value
        elif name == "force_disable_caches":
            for e in _CACHE_ENV:
                if value:
                    os.environ[e] = "0"
                else:
                    os.environ.pop(e, None)
        elif name.startswith("__"):
            super().__setattr__(name, value)
        else:
            raise AttributeError(f"ember.compiler.config has no knob {name!r} (supported: {', '.join(self._KNOWN)})")


def parse_sources(spec: str):
    """``[(compiled regex, dim or None)]`` of a ``dynamic_sources`` string."""
    out = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        m = re.fullmatch(r"(.*):(\d+)", entry)
        name, dim = (m.group(1), int(m.group(2))) if m else (entry, None)
        try:
            pat = re.compile(name)
        except re.error as e:
            raise ValueError(f"ember.compiler.config.dynamic_sources: entry {entry!r} is not a source name "
                             f"or regex: {e}") from None
        out.append((name, pat, dim))
    return out


def torch_source_name(source):
    """A dynamo source as torch names it (``L['x']``, ``L['self']._modules['lin']``), or None."""
    from .dynamo.source import AttrSource, ClosureSource, GetItemSource, GlobalSource, LocalSource
    if isinstance(source, LocalSource):
        return f"L[{source.varname!r}]"
    if isinstance(source, ClosureSource):
        return f"L[{source.varname!r}]"
    if isinstance(source, GlobalSource):
        return f"G[{source.gname!r}]"
    if isinstance(source, AttrSource):
        base = torch_source_name(source.base)
        return None if base is None else f"{base}.{source.attr}"
    if isinstance(source, GetItemSource):
        base = torch_source_name(source.base)
        return None if base is None else f"{base}[{source.key!r}]"
    return None


def dynamic_source_dims(source, ndim):
    """The dims ``dynamic_sources`` makes symbolic for this input (empty when none matches)."""
    spec = sys.modules[__name__].__dict__.get("dynamic_sources") or ""
    if not spec:
        return set()
    name = torch_source_name(source)
    if name is None:
        return set()
    dims = set()
    for text, pat, dim in parse_sources(spec):
        if name == text or pat.match(name):
            if dim is None:
                dims.update(range(ndim))
            elif dim < ndim:
                dims.add(dim)
    return dims


sys.modules[__name__].__dict__["job_id"] = os.environ.get("TORCH_COMPILE_JOB_ID") or None
sys.modules[__name__].__dict__["dynamic_sources"] = os.environ.get("TORCH_COMPILE_DYNAMIC_SOURCES", "")
parse_sources(sys.modules[__name__].__dict__["dynamic_sources"])
if _env_true("TORCHINDUCTOR_FORCE_DISABLE_CACHES"):
    for _e in _CACHE_ENV:
        os.environ[_e] = "0"
sys.modules[__name__].__class__ = _CompilerConfig
