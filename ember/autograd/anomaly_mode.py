"""Anomaly detection: nodes remember the forward stack that made them, and the
engine reports NaN gradients naming the node and that stack."""
from __future__ import annotations

from .._state import STATE


class set_detect_anomaly:
    """``set_detect_anomaly(True)`` switches it on now; also a context manager."""

    def __init__(self, mode, check_nan=True):
        self.prev = STATE.anomaly
        self.prev_nan = STATE.anomaly_check_nan
        STATE.anomaly = bool(mode)
        STATE.anomaly_check_nan = check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly = self.prev
        STATE.anomaly_check_nan = self.prev_nan
        return False


class detect_anomaly(set_detect_anomaly):
    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = STATE.anomaly
        self.prev_nan = STATE.anomaly_check_nan

    def __enter__(self):
        STATE.anomaly = True
        STATE.anomaly_check_nan = self.check_nan
        return self


def is_anomaly_enabled():
    return STATE.anomaly
