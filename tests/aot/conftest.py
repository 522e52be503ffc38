"""Fixtures shared by the aot tests."""
import logging

import pytest


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty compile cache that is on (``EMBER_CACHE_DIR`` under ``tmp_path``, yielded).
    A graph log an earlier test turned on would bypass the aot cache (its graphs exist only
    when traced), so aot's graph loggers are reset for the test."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_AOT_CACHE", raising=False)
    monkeypatch.delenv("EMBER_LOGS", raising=False)
    loggers = [logging.getLogger(f"ember.aot.{kind}") for kind in ("aot_graphs", "aot_joint_graph")]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        # WARNING, not NOTSET: a parent logger set to DEBUG would still reach them through NOTSET
        lg.setLevel(logging.WARNING)         # (setLevel also clears the logger's isEnabledFor cache)
    yield tmp_path / "cache"
    for lg, lvl in zip(loggers, old):
        lg.setLevel(lvl)
