"""``torch.distributed.logging_handlers``: where the c10d logger's records go, by destination
name. ``"default"`` discards them (a ``NullHandler``); register another handler under a name and
ask ``c10d_logger._get_or_create_logger(name)`` for a logger writing to it."""
from __future__ import annotations

import logging
from typing import Dict

__all__: list = []

_log_handlers: Dict[str, logging.Handler] = {
    "default": logging.NullHandler(),
}
