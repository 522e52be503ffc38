import sys

import pytest


@pytest.fixture
def fake_cupy(monkeypatch):
    """Installs the numpy-backed cupy stand-in (``fake_cupy.py``) as ``cupy`` for
    one test and makes ember's cuda device find it; restores the real state after
    (no cupy in CI). Everything a test verifies through it is verified against the
    stand-in only: see the stand-in's docstring for what it models."""
    from ember.runtime import cuda as rc
    from . import fake_cupy as fc
    from ember.inductor import config
    fc.reset()
    monkeypatch.setattr(config, "triton_precompile", False)   # (no GPU: nothing to compile for)
    monkeypatch.setitem(sys.modules, "cupy", fc)
    rc._reset()
    yield fc
    monkeypatch.delitem(sys.modules, "cupy")
    rc._reset()
