# The session's fresh EMBER_CACHE_DIR comes from tests/conftest.py (every test package
# compiles: dynamo, aot and the models write kernel, FX-graph and aot cache entries).
import pytest


@pytest.fixture
def contiguous_outputs(monkeypatch):
    """Graph outputs written contiguously whatever eager's layout (``config.output_eager_layout``
    off). Tests of the transposed-read paths (local tiles) use it: with the knob on, an output
    computed from a transposed input is written in the input's order and needs no tile; the
    tiles remain for values that must be contiguous (a matmul's operand)."""
    from ember.inductor import config
    monkeypatch.setattr(config, "output_eager_layout", False)


@pytest.fixture
def strict_lowering(monkeypatch):
    """A lowering that fails raises (``config.debug_lowering``) instead of running the graph
    eagerly, which would hide it from a test comparing compiled results with eager."""
    from ember.inductor import config
    monkeypatch.setattr(config, "debug_lowering", True)


@pytest.fixture
def strict_dynamic(strict_lowering, monkeypatch):
    """``strict_lowering``, and a ``dynamic=True`` graph that cannot be compiled with symbolic
    sizes raises (aot's ``debug_dynamic``) instead of being compiled once per shape -- always
    correct, so a value comparison does not see it, but it is not the one graph for every size
    the test means to check. (Not part of ``strict_lowering``: the fuzzer's dynamic programs
    reach documented per-shape cases, e.g. an in-place op on a view with symbolic sizes.)"""
    from ember.aot import config as aot_config
    monkeypatch.setattr(aot_config, "debug_dynamic", True)
