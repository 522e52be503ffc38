"""ember._logging: torch._logging's API (set_logs, TORCH_LOGS, getArtifactLogger,
trace_structured, LazyString, warning_once) over ember's loggers (see _internal.py)."""
from ._internal import (DEFAULT_LOGGING, LazyString, getArtifactLogger, get_loggers, help_message, register_artifact,
                        register_log, set_logs, trace_log, trace_structured, warning_once)

__all__ = ["set_logs", "getArtifactLogger", "trace_structured", "LazyString", "warning_once", "help_message",
           "get_loggers", "register_log", "register_artifact", "trace_log", "DEFAULT_LOGGING"]
