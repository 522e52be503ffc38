"""``ember._inductor`` (torch._inductor's public corners): the config's torch names on ember's
knobs, ``compile_fx`` / ``compile``, ``fresh_inductor_cache`` and ``run_and_get_code``."""
import os
import warnings

import numpy as np
import pytest

import ember
import ember.inductor.config as ecfg
from ember._inductor import config as icfg
from ember._inductor.utils import fresh_inductor_cache, run_and_get_code, run_fw_bw_and_get_code


def _x(*shape, seed=0, grad=False):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), requires_grad=grad)


def test_config_translates_torch_names():
    assert icfg.cpp.threads == -1 and ecfg.threads is None
    with icfg.patch({"cpp.threads": 1, "cpp.simdlen": 1, "epilogue_fusion": False}):
        assert ecfg.threads == 1 and ecfg.simd is False and ecfg.fusion is False
        assert icfg.cpp.threads == 1 and icfg.cpp.simdlen == 1 and icfg.aggressive_fusion is False
    assert ecfg.threads is None and ecfg.simd is True and ecfg.fusion is True
    with pytest.raises(ValueError, match="simdlen=8"):
        icfg.cpp.simdlen = 8
    with pytest.raises(ValueError, match="cpp.threads"):
        icfg.cpp.threads = 0
    with pytest.raises(AttributeError, match="no knob 'not_a_knob'"):
        icfg.not_a_knob
    with pytest.raises(AttributeError, match="cpp has no knob"):
        icfg.cpp.vec_isa
    assert icfg.inline_max_ops == ecfg.inline_max_ops       # ember's own knobs pass through


def test_no_effect_knobs_warn_once_and_restore():
    with pytest.warns(UserWarning, match="max_autotune=True has no effect"):
        with icfg.patch(max_autotune=True):
            assert icfg.max_autotune is True
    assert icfg.max_autotune is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        icfg.freezing = False          # the default: no warning
        icfg.triton.cudagraphs = False


def test_fx_graph_cache_knob_sets_env():
    old = os.environ.get("EMBER_FX_GRAPH_CACHE")
    try:
        with icfg.patch(fx_graph_cache=False):
            assert os.environ["EMBER_FX_GRAPH_CACHE"] == "0" and icfg.fx_graph_cache is False
        assert icfg.fx_graph_cache is True
    finally:
        if old is None:
            os.environ.pop("EMBER_FX_GRAPH_CACHE", None)
        else:
            os.environ["EMBER_FX_GRAPH_CACHE"] = old


def test_compile_fx_on_a_traced_graph():
    from ember._inductor.compile_fx import compile_fx
    gm = ember.fx.symbolic_trace(lambda a, b: ((a * b).sin() + a).relu())
    a, b = _x(16, 8, seed=1), _x(16, 8, seed=2)
    compiled = compile_fx(gm, [a, b], config_patches={"cpp.simdlen": 1})
    out = compiled(a, b)
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert np.allclose(out.numpy(), ((a * b).sin() + a).relu().numpy(), rtol=1e-5, atol=1e-6)
    assert ecfg.simd is True                    # the patch is over
    compiled2 = ember._inductor.compile(gm, [a, b])
    out2 = compiled2(a, b)
    out2 = out2[0] if isinstance(out2, (tuple, list)) else out2
    assert np.allclose(out2.numpy(), out.numpy())
    with pytest.raises(NotImplementedError, match="inner_compile"):
        compile_fx(gm, [a, b], inner_compile=lambda *x: None)
    with pytest.raises(NotImplementedError, match="AOTInductor"):
        ember._inductor.aoti_compile_and_package(None)


def test_run_and_get_code_in_a_fresh_cache():
    old = os.environ.get("EMBER_CACHE_DIR")
    entries = {}
    ember._dynamo.reset()
    with fresh_inductor_cache(cache_entries=entries):
        tmp = os.environ["EMBER_CACHE_DIR"]
        assert tmp != old and os.path.isdir(tmp)
        f = ember.compile(lambda t: (t.cos() * 3).tanh())
        x = _x(64, seed=3)
        out, codes = run_and_get_code(f, x)
    assert os.environ.get("EMBER_CACHE_DIR") == old and not os.path.exists(tmp)
    assert np.allclose(out.numpy(), (x.cos() * 3).tanh().numpy(), rtol=1e-5, atol=1e-6)
    assert len(codes) == 1 and "def call" in codes[0] and "extern \"C\"" in codes[0]
    assert entries and all(isinstance(v, list) for v in entries.values())
    _, again = run_and_get_code(f, x)           # already compiled: nothing new
    assert again == []


def test_run_fw_bw_and_get_code_lists_both_graphs():
    ember._dynamo.reset()
    with fresh_inductor_cache():
        x = _x(32, seed=4, grad=True)
        f = ember.compile(lambda t: t.sin() * t)
        out, codes = run_fw_bw_and_get_code(lambda: f(x))
    # the forward, the backward -- and possibly the backward again, specialised for the
    # expanded (stride-0) gradient ``sum().backward()`` feeds it
    assert 2 <= len(codes) <= 3 and "sinf" in codes[0] and "cosf" in codes[1]
    assert np.allclose(x.grad.numpy(), (np.cos(x.detach().numpy()) * x.detach().numpy()
                                        + np.sin(x.detach().numpy())), rtol=1e-5, atol=1e-6)


def test_compiler_config_patch():
    with ember.compiler.config.patch(recompile_limit=3):
        assert ember._dynamo.config.recompile_limit == 3
    assert ember.compiler.config.recompile_limit == ember._dynamo.config.recompile_limit != 3
