"""``EMBER_LOGS`` logging, through the stdlib ``logging`` module.

``EMBER_LOGS=graph_breaks,recompiles,guards,graph_code,bytecode`` (comma
separated; ``+dynamo`` or ``all`` for everything) turns on the matching
loggers ``ember.dynamo.<artifact>`` at INFO level with a stderr handler.
The loggers always exist, so tests and users can attach handlers or use
``caplog`` without the environment variable."""
import logging
import os

ARTIFACTS = ("graph_breaks", "recompiles", "guards", "graph_code", "bytecode", "fallback")

_loggers = {name: logging.getLogger(f"ember.dynamo.{name}") for name in ARTIFACTS}
_configured = False


def get(name: str) -> logging.Logger:
    return _loggers[name]


def configure(spec=None):
    """Enable the artifacts named in ``spec`` (default: ``$EMBER_LOGS``)."""
    global _configured
    spec = os.environ.get("EMBER_LOGS", "") if spec is None else spec
    names = {s.strip() for s in spec.split(",") if s.strip()}
    if names & {"all", "+dynamo", "dynamo"}:
        names = set(ARTIFACTS)
    for name in names:
        if name not in _loggers:
            continue
        lg = _loggers[name]
        lg.setLevel(logging.INFO)
        if not any(getattr(h, "_ember", False) for h in lg.handlers):
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter(f"[ember {name}] %(message)s"))
            h._ember = True
            lg.addHandler(h)
    _configured = True


configure()
