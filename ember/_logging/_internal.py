"""set_logs / TORCH_LOGS for ember: torch's logging front end over ember's loggers.

ember's compiler logs through stdlib loggers (``ember.dynamo.graph_breaks``,
``ember.aot.aot_graphs``, ``ember.inductor.output_code``, ...) that ``EMBER_LOGS`` switches on
at import. This module lets torch's spellings drive the same loggers at run time:
``set_logs(dynamo=logging.DEBUG, graph_breaks=True)`` or ``TORCH_LOGS="+dynamo,graph_breaks"``.
Each call of set_logs replaces the previous settings (as torch's): what it turned on before is
turned off again. Components print through one stderr handler on the top logger (``ember``),
which stops propagating meanwhile; artifacts are enabled at DEBUG with their own handler and
do not propagate (nothing is printed twice); a component enables its artifacts only at DEBUG,
as torch's does.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import sys
import time
import warnings

from ._registrations import ARTIFACTS, COMPONENTS, SET_LOGS_ARTIFACTS, SET_LOGS_COMPONENTS

__all__ = ["set_logs", "getArtifactLogger", "trace_structured", "LazyString", "warning_once", "help_message",
           "get_loggers", "register_log", "register_artifact", "trace_log", "DEFAULT_LOGGING"]

LOG_ENV_VAR = "TORCH_LOGS"
TRACE_ENV_VAR = "TORCH_TRACE"
DEFAULT_LOGGING = {"dynamo": logging.INFO, "aot": logging.INFO, "inductor": logging.INFO, "fsdp": logging.INFO,
                   "ddp_graphs": True, "graph_breaks": True, "guards": True, "recompiles": True,
                   "dynamic": logging.INFO}

log = logging.getLogger(__name__)
trace_log = logging.getLogger("ember.__trace")
trace_log.propagate = False
trace_log.setLevel(logging.DEBUG)

_components = dict(COMPONENTS)                        # alias -> logger names (register_log adds more)
_artifacts = {k: v[0] for k, v in ARTIFACTS.items()}  # artifact -> its component
_artifact_targets = {k: list(v[1]) for k, v in ARTIFACTS.items()}   # artifact -> ember loggers
_artifact_descriptions = {}
_enabled_artifacts = set()
_touched = {}          # logger name -> (level, propagate) before set_logs changed it


class _Handler(logging.StreamHandler):
    """The stderr handler set_logs attaches (told apart from EMBER_LOGS's and the user's)."""


def _valid_levels():
    return logging._levelToName


def _attach(logger, fmt):
    if not any(isinstance(h, _Handler) for h in logger.handlers):
        h = _Handler(sys.stderr)
        h.setFormatter(fmt if isinstance(fmt, logging.Formatter) else logging.Formatter(fmt))
        logger.addHandler(h)


def _remember(logger):
    _touched.setdefault(logger.name, (logger.level, logger.propagate))


def _reset():
    for name, (level, propagate) in _touched.items():
        lg = logging.getLogger(name)
        lg.setLevel(level)
        lg.propagate = propagate
        for h in [h for h in lg.handlers if isinstance(h, _Handler)]:
            lg.removeHandler(h)
    _touched.clear()
    _enabled_artifacts.clear()


class _TorchStyleFormatter(logging.Formatter):
    """torch's record prefix: ``I1130 03:20:27.453000 1234 ember/dynamo/x.py:12] message``."""

    def format(self, record):
        t = time.localtime(record.created)
        micros = int((record.created % 1) * 1e6)
        path = record.pathname
        marker = os.sep + "ember" + os.sep
        if marker in path:
            path = "ember" + os.sep + path.rsplit(marker, 1)[1]
        prefix = (f"{record.levelname[:1]}{time.strftime('%m%d %H:%M:%S', t)}.{micros:06d} {record.process} "
                  f"{path}:{record.lineno}] ")
        out = prefix + record.getMessage()
        if record.exc_info:
            out += "\n" + self.formatException(record.exc_info)
        return out


_FORMAT = _TorchStyleFormatter()


def _set_level(name, level):
    """Set a logger's level; its records are printed by one handler on its top logger (``ember``
    for ember's loggers), which stops propagating meanwhile: nothing is printed twice."""
    lg = logging.getLogger(name)
    _remember(lg)
    lg.setLevel(level)
    top = logging.getLogger(name.partition(".")[0])
    _remember(top)
    top.propagate = False
    _attach(top, _FORMAT)


def _enable_component(alias, level):
    for name in _components[alias]:
        _set_level(name, level)


def _artifact_loggers(artifact):
    names = list(_artifact_targets.get(artifact, ()))
    names += [n for n in logging.root.manager.loggerDict if n.endswith(f".__{artifact}")]
    return [logging.getLogger(n) for n in names]


def _enable_artifact(artifact):
    _enabled_artifacts.add(artifact)
    for lg in _artifact_loggers(artifact):
        _remember(lg)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        _attach(lg, f"[ember {artifact}] %(message)s")


def _quiet_artifacts_below(alias, level):
    """A component at INFO or above does not turn its artifacts on (torch's rule): ember's
    artifact loggers write at INFO, so they are held at WARNING unless asked for."""
    if level <= logging.DEBUG:
        return
    for artifact, component in _artifacts.items():
        if component != alias or artifact in _enabled_artifacts:
            continue
        for lg in _artifact_loggers(artifact):
            if lg.level == logging.NOTSET:
                _remember(lg)
                lg.setLevel(logging.WARNING)


def _is_valid_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _apply(settings):
    """settings: (alias, value) pairs, already validated."""
    _reset()
    components = []
    for alias, val in settings:
        if alias in _artifacts:
            if val:
                _enable_artifact(alias)
        elif alias in _components:
            components.append((alias, val))
        else:                                  # a module name
            _set_level(alias, val)
    for alias, level in components:
        _enable_component(alias, level)
        _quiet_artifacts_below(alias, level)


def set_logs(**kwargs):
    """Set log levels of components (``dynamo=logging.DEBUG``) and switch artifacts on
    (``graph_breaks=True``); ``modules={name: level_or_bool}`` for anything else. Replaces the
    previous call's settings; ignored (with a warning) while ``TORCH_LOGS`` is set."""
    modules = kwargs.pop("modules", None) or {}
    allowed = set(SET_LOGS_COMPONENTS) | set(SET_LOGS_ARTIFACTS)
    for k in kwargs:
        if k not in allowed:
            raise TypeError(f"set_logs() got an unexpected keyword argument '{k}'")
    if LOG_ENV_VAR in os.environ:
        log.warning("Using TORCH_LOGS environment variable for log settings, ignoring call to set_logs")
        return
    settings = []
    for alias, val in list(kwargs.items()) + list(dict(modules).items()):
        if val is None or (alias in kwargs and alias in SET_LOGS_ARTIFACTS and val is False):
            continue
        alias = "torch" if alias == "all" else alias
        if alias in _artifacts:
            if not isinstance(val, bool):
                raise ValueError(f"Expected bool to enable artifact {alias}, received {val}")
            if val and not _artifact_targets.get(alias):
                warnings.warn(f"ember._logging: ember's compiler writes no '{alias}' logs; set_logs({alias}=True) "
                              f"only enables loggers made by getArtifactLogger(..., {alias!r})", stacklevel=2)
        elif alias in _components or _is_valid_module(alias):
            if val not in _valid_levels():
                raise ValueError(f"Unrecognized log level for log {alias}: {val}, valid level values are: "
                                 f"{','.join(str(k) for k in _valid_levels())}")
        else:
            raise ValueError(f"Unrecognized log or artifact name passed to set_logs: {alias}")
        settings.append((alias, val))
    _apply(settings)


def _valid_settings():
    return sorted(["all"] + list(_components) + list(_artifacts))


def help_message(verbose=False):
    lines = ["", "TORCH_LOGS Info", "Usage: TORCH_LOGS=\"+comp1,-comp2,artifact\"", "",
             "Registered components (a level: +name DEBUG, name INFO, -name ERROR):"]
    lines += [f"  {c:<30}{', '.join(_components[c])}" for c in sorted(_components)]
    lines += ["", "Registered artifacts (on or off):"]
    for a in sorted(_artifacts):
        where = ", ".join(_artifact_targets.get(a, ())) or "(ember writes none; getArtifactLogger loggers only)"
        lines.append(f"  {a:<30}{where}")
    return "\n".join(lines) + "\n"


def _invalid_settings_err_msg(settings):
    return (f"\nInvalid log settings: {settings}, must be a comma separated list of fully\n"
            "qualified module names, registered log names or registered artifact names.\n"
            "For more info on various settings, try TORCH_LOGS=\"help\"\n"
            f"Valid settings:\n{', '.join(_valid_settings())}\n")


def _parse_log_settings(spec: str):
    """TORCH_LOGS syntax -> (alias, value) pairs; raises torch's ValueError for bad names."""
    spec = spec.strip()
    if spec == "":
        return []
    if spec == "help":
        raise ValueError(help_message(verbose=False))
    if spec == "+help":
        raise ValueError(help_message(verbose=True))
    out = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        level = logging.INFO
        name = item
        if item[0] in "+-":
            level = logging.DEBUG if item[0] == "+" else logging.ERROR
            name = item[1:]
        name = "torch" if name == "all" else name
        if name in _artifacts and item[0] not in "+-":
            out.append((name, True))
        elif name in _components or (name not in _artifacts and _is_valid_module(name)):
            out.append((name, level))
        else:
            raise ValueError(_invalid_settings_err_msg(spec))
    return out


def _init_from_env():
    """Apply ``TORCH_LOGS`` (torch's spelling of ``EMBER_LOGS``); called when ember is imported
    with it set, and by ember/_logging on import."""
    spec = os.environ.get(LOG_ENV_VAR)
    if spec is not None:
        _apply(_parse_log_settings(spec))
    trace_dir = os.environ.get(TRACE_ENV_VAR)
    if trace_dir:
        _init_trace(trace_dir)


def get_loggers():
    return [logging.getLogger(n) for alias in _components.values() for n in alias]


def register_log(setting_name, log_name):
    """Make ``setting_name`` a component controlling logger(s) ``log_name``."""
    names = (log_name,) if isinstance(log_name, str) else tuple(log_name)
    _components[setting_name] = tuple(dict.fromkeys(_components.get(setting_name, ()) + names))


def register_artifact(setting_name, description, visible=False, off_by_default=False, log_format=None):
    """Make ``setting_name`` an artifact name (for getArtifactLogger and set_logs(modules=...))."""
    _artifacts.setdefault(setting_name, "torch")
    _artifact_targets.setdefault(setting_name, [])
    _artifact_descriptions[setting_name] = description


def getArtifactLogger(module_qname, artifact_name) -> logging.Logger:
    """The logger ``<module_qname>.__<artifact_name>``: silent unless the artifact is enabled."""
    if artifact_name not in _artifacts:
        raise ValueError(f"Artifact name: {artifact_name!r} not registered,please call "
                         f"register_artifact({artifact_name!r}) in torch._logging.registrations.")
    lg = logging.getLogger(f"{module_qname}.__{artifact_name}")
    lg.artifact_name = artifact_name
    if artifact_name in _enabled_artifacts:
        _remember(lg)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        _attach(lg, f"[ember {artifact_name}] %(message)s")
    return lg


class LazyString:
    """A log argument computed only if the record is formatted (``str()`` calls ``func``)."""

    def __init__(self, func, *args, **kwargs):
        self.func = func
        self.args = args
        self.kwargs = kwargs

    def __str__(self):
        return self.func(*self.args, **self.kwargs)


@functools.cache
def warning_once(logger_obj, *args, **kwargs) -> None:
    """``logger_obj.warning(*args)``, once per distinct arguments."""
    logger_obj.warning(*args, **kwargs)


_RESERVED = ("rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "severity", "timestamp",
             "pathname", "thread", "subgraph_name")


def trace_structured(name, metadata_fn=dict, *, payload_fn=lambda: None, suppress_context=False,
                     expect_trace_id=True, record_logging_overhead=True, compile_id=None):
    """Write a structured record ``{name: metadata_fn()}`` plus ``payload_fn()`` to the trace log.

    Both functions run only when the trace log has a handler (``TORCH_TRACE=<dir>`` or one the
    user attached to ``trace_log``): an expensive payload costs nothing when tracing is off."""
    if name in _RESERVED:
        raise AssertionError(f"name {name!r} is reserved and cannot be used")
    if not callable(metadata_fn):
        raise AssertionError(f"metadata_fn should be callable, but got {type(metadata_fn)}")
    if not callable(payload_fn):
        raise AssertionError(f"payload_fn should be callable, but got {type(payload_fn)}")
    if not trace_log.handlers:
        return
    record = {name: metadata_fn()}
    if compile_id is not None:
        record["compile_id"] = str(compile_id)
    payload = payload_fn()
    if payload is not None:
        if not isinstance(payload, str):
            if isinstance(payload, list):
                payload = "[\n" + ",\n".join(json.dumps(i) for i in payload) + "\n]"
            else:
                payload = json.dumps(payload, default=lambda o: list(o) if isinstance(o, set) else repr(o),
                                     indent=0)
        record["has_payload"] = hashlib.md5(payload.encode("utf-8"), usedforsecurity=False).hexdigest()
    trace_log.debug("", extra={"metadata": record, "payload": payload}, stacklevel=2)


class _TraceFormatter(logging.Formatter):
    """One JSON line of metadata, then the payload's lines each indented by a tab (torch's layout)."""

    def format(self, record):
        meta = dict(getattr(record, "metadata", {}))
        meta["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        meta["pathname"] = record.pathname
        meta["lineno"] = record.lineno
        out = json.dumps(meta)
        payload = getattr(record, "payload", None)
        if payload is not None:
            out += "".join(f"\n\t{line}" for line in payload.split("\n"))
        return out


def _init_trace(directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"dedicated_log_ember_trace_{os.getpid()}.log")
    h = logging.FileHandler(path)
    h.setFormatter(_TraceFormatter())
    trace_log.addHandler(h)
