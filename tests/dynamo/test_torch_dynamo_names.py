"""``ember._dynamo`` / ``ember.compiler`` carry the names PyTorch code uses through
``torch._dynamo`` and ``torch.compiler``; their knobs act on ember's or raise."""
import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

_rng = np.random.default_rng(17)


def test_torch_dynamo_names_exist_and_work():
    td = ember._dynamo
    for name in ("reset", "explain", "mark_dynamic", "maybe_mark_dynamic", "graph_break", "optimize",
                 "disable", "list_backends", "is_compiling", "assume_constant_result"):
        assert callable(getattr(td, name)), name
    assert td.utils.counters is dynamo.counters
    x = random_tensor(_rng, 3)
    out = td.explain(lambda t: t.sin() + 1)(x)
    assert out.graph_count == 1
    td.reset()


def test_config_aliases(monkeypatch):
    cfg = ember._dynamo.config
    monkeypatch.setattr(dynamo.config, "recompile_limit", dynamo.config.recompile_limit)
    cfg.cache_size_limit = 3
    assert dynamo.config.recompile_limit == 3 == cfg.cache_size_limit == cfg.recompile_limit
    cfg.suppress_errors = True
    assert cfg.suppress_errors is True
    with pytest.raises(ValueError, match="suppress_errors=False"):
        cfg.suppress_errors = False
    with pytest.raises(ValueError, match="positive int"):
        cfg.cache_size_limit = 0
    assert cfg.capture_scalar_outputs is False
    monkeypatch.setattr(dynamo.config, "capture_scalar_outputs", False)
    cfg.capture_scalar_outputs = True       # the real knob (tests/dynamo/test_capture_scalar_outputs.py)
    assert cfg.capture_scalar_outputs is True is dynamo.config.capture_scalar_outputs
    cfg.capture_scalar_outputs = False
    assert dynamo.config.capture_scalar_outputs is False
    with pytest.warns(UserWarning, match="data-dependent output shapes"):
        cfg.capture_dynamic_output_shape_ops = True
    cfg.capture_dynamic_output_shape_ops = False
    cfg.inline_inbuilt_nn_modules = True
    cfg.optimize_ddp = False
    assert cfg.assume_static_by_default is True and cfg.specialize_int is False
    with pytest.raises(ValueError, match="specialize_int=True is not supported"):
        cfg.specialize_int = True
    with pytest.raises(ValueError, match="inline_inbuilt_nn_modules=False is not supported"):
        cfg.inline_inbuilt_nn_modules = False
    with pytest.raises(AttributeError, match="no knob"):
        cfg.not_a_knob   # noqa: B018


@pytest.mark.parametrize("automatic", [True, False])
def test_automatic_dynamic_shapes_switch(monkeypatch, automatic):
    monkeypatch.setattr(dynamo.config, "automatic_dynamic_shapes", dynamo.config.automatic_dynamic_shapes)
    ember._dynamo.config.automatic_dynamic_shapes = automatic
    assert dynamo.config.automatic_dynamic_shapes is automatic
    cnt = CountingBackend()
    cf = ember.compile(lambda t: t.sin() * 2, backend=cnt)
    for n in (3, 4, 5, 6):
        x = random_tensor(_rng, n)
        assert ember.allclose(cf(x), x.sin() * 2)
    # automatic: the second size makes the dim symbolic, the later sizes reuse that entry
    assert cnt.frame_count == (2 if automatic else 4)


def test_cache_size_limit_takes_effect(monkeypatch):
    monkeypatch.setattr(dynamo.config, "recompile_limit", dynamo.config.recompile_limit)
    ember._dynamo.config.cache_size_limit = 1
    cnt = CountingBackend()
    cf = ember.compile(lambda t, k: t * k, backend=cnt)
    x = random_tensor(_rng, 2)
    with pytest.warns(dynamo.RecompileLimitExceeded):
        for k in ("a", "b", "c"):      # a string argument specialises: one entry per value
            cf(x, len(k) * 0 + ord(k))
    assert cnt.frame_count <= 2


_calls = []


@ember.compiler.assume_constant_result
def _table_size(name):
    _calls.append(name)
    return {"small": 4, "big": 16}[name]


def test_assume_constant_result_is_called_while_tracing_only():
    _calls.clear()

    def f(x):
        return x * _table_size("big")
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = random_tensor(_rng, 5)
    for _ in range(3):
        np.testing.assert_allclose(cf(x).numpy(), (x * 16).numpy())
    assert _calls == ["big"] and cnt.frame_count == 1
    assert _table_size("small") == 4          # called normally, it runs


def test_assume_constant_result_with_a_tensor_argument_breaks():
    @ember.compiler.assume_constant_result
    def reads(t):
        return float(t.sum())

    def f(x):
        return x * reads(x)
    x = random_tensor(_rng, 3)
    np.testing.assert_allclose(ember.compile(f, backend=CountingBackend())(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert dynamo.explain(f)(x).graph_break_count >= 1
    with pytest.raises(TypeError, match="callable"):
        ember.compiler.assume_constant_result(3)
