"""``ember/_settings.py``: the top-level runtime settings (threads, matmul precision, determinism,
default device, warn-always, denormals, anomaly mode, is_inference / get_device) against torch."""
from __future__ import annotations

import ctypes
import warnings

import numpy as np
import pytest

import ember
from oracle import assert_close, needs_torch, torch


@pytest.fixture(autouse=True)
def _restore_settings():
    from ember import _settings
    from ember.inductor import config
    saved = dict(_settings._state)
    threads = config.threads
    yield
    _settings._state.update(saved)
    if threads is None:
        config.threads = None
    else:
        ember.set_num_threads(threads)


def _openblas_getters():
    from ember._blas_threads import openblas_libraries
    out = []
    for _p, h, _setter, nthreads in openblas_libraries():
        getter = nthreads.replace("set_num_threads", "get_num_threads")
        if hasattr(h, getter):
            fn = getattr(h, getter)
            fn.restype = ctypes.c_int
            out.append((h, nthreads, fn))
    return out


def test_set_num_threads_controls_kernels_and_blas():
    from ember._openmp import num_threads
    from ember.inductor import config
    getters = _openblas_getters()
    blas_before = [g() for _, _, g in getters]
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1 == num_threads() == config.threads
        assert all(g() == 1 for _, _, g in getters)
        # results do not depend on the thread count
        rng = np.random.default_rng()
        x = ember.tensor(rng.standard_normal((2, 3, 9, 9)).astype("float32"))
        w = ember.tensor(rng.standard_normal((4, 3, 3, 3)).astype("float32"))
        a = rng.standard_normal((64, 48)).astype("float32")
        one = (ember.nn.functional.conv2d(x, w), ember.tensor(a) @ ember.tensor(a.T))
        ember.set_num_threads(2)
        assert ember.get_num_threads() == 2 and config.threads == 2
        assert all(g() == 2 for _, _, g in getters)
        two = (ember.nn.functional.conv2d(x, w), ember.tensor(a) @ ember.tensor(a.T))
        assert_close(one[0], two[0].numpy(), rtol=1e-5, atol=1e-5)
        assert_close(one[1], two[1].numpy(), rtol=1e-5, atol=1e-4)
    finally:
        for (h, nthreads, _), n in zip(getters, blas_before):
            fn = getattr(h, nthreads)
            fn.argtypes, fn.restype = [ctypes.c_int], None
            fn(n)


@needs_torch
@pytest.mark.parametrize("fn", ["set_num_threads", "set_num_interop_threads"])
@pytest.mark.parametrize("bad", [0, -2, 1.5, "2"])
def test_thread_setters_validate_like_torch(fn, bad):
    if fn == "set_num_interop_threads" and not isinstance(bad, int):
        pytest.skip("torch may refuse interop changes once parallel work started; type errors checked above")
    with pytest.raises(RuntimeError) as te:
        getattr(torch, fn)(bad)
    with pytest.raises(RuntimeError) as ee:
        getattr(ember, fn)(bad)
    assert str(ee.value) == str(te.value).split("\n")[0]


def test_interop_threads_recorded():
    assert ember.get_num_interop_threads() >= 1
    ember.set_num_interop_threads(3)
    assert ember.get_num_interop_threads() == 3


@needs_torch
def test_float32_matmul_precision_like_torch():
    before = torch.get_float32_matmul_precision()
    try:
        assert ember.get_float32_matmul_precision() == "highest"
        for p in ("high", "medium", "highest"):
            ember.set_float32_matmul_precision(p)
            torch.set_float32_matmul_precision(p)
            assert ember.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == p
        ember.set_float32_matmul_precision("medium")
        with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
            ember.set_float32_matmul_precision("low")
        assert ember.get_float32_matmul_precision() == "medium"
        with pytest.raises(RuntimeError) as te:
            torch.set_float32_matmul_precision(1)
        with pytest.raises(RuntimeError) as ee:
            ember.set_float32_matmul_precision(1)
        assert str(ee.value) == str(te.value)
    finally:
        torch.set_float32_matmul_precision(before)


@needs_torch
def test_deterministic_like_torch():
    def both():
        return ((ember.are_deterministic_algorithms_enabled(), ember.is_deterministic_algorithms_warn_only_enabled(),
                 ember.get_deterministic_debug_mode()),
                (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                 torch.get_deterministic_debug_mode()))
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        e, t = both()
        assert e == t == (False, False, 0)
        for args, kw in (((True,), {}), ((True,), {"warn_only": True}), ((False,), {})):
            ember.use_deterministic_algorithms(*args, **kw)
            torch.use_deterministic_algorithms(*args, **kw)
            e, t = both()
            assert e == t
        for mode in ("warn", 2, "default", 1, "error", 0):
            ember.set_deterministic_debug_mode(mode)
            torch.set_deterministic_debug_mode(mode)
            e, t = both()
            assert e == t
        for bad, exc in (("foo", RuntimeError), (3, RuntimeError), (1.0, TypeError)):
            with pytest.raises(exc) as te:
                torch.set_deterministic_debug_mode(bad)
            with pytest.raises(exc) as ee:
                ember.set_deterministic_debug_mode(bad)
            assert str(ee.value) == str(te.value)
        for args, kw in (((1,), {}), ((True,), {"warn_only": 1})):
            with pytest.raises(TypeError) as te:
                torch.use_deterministic_algorithms(*args, **kw)
            with pytest.raises(TypeError) as ee:
                ember.use_deterministic_algorithms(*args, **kw)
            assert str(ee.value) == str(te.value)
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])


def test_default_device_cpu_and_meta():
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("cpu")
    ember.set_default_device(ember.device("cpu"))
    ember.set_default_device(None)
    assert ember.ones(2).device == ember.device("cpu")
    ember.set_default_device("meta")
    try:
        assert ember.get_default_device() == ember.device("meta")
        assert ember.ones(2).device == ember.device("meta")
    finally:
        ember.set_default_device(None)
    assert ember.get_default_device() == ember.device("cpu")
    with pytest.raises(TypeError, match="argument 'device' must be a device"):
        ember.set_default_device(1.5)


@needs_torch
def test_warn_always_flush_denormal_anomaly():
    assert ember.is_warn_always_enabled() is False
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled() is True
    ember.set_warn_always(False)
    assert ember.is_warn_always_enabled() is False
    # torch returns True where the CPU can flush denormals; ember cannot, and says so
    assert ember.set_flush_denormal(True) is False
    assert ember.set_flush_denormal(False) is False
    assert isinstance(torch.set_flush_denormal(False), bool)
    with pytest.raises(TypeError):
        ember.set_flush_denormal(1)
    assert ember.is_anomaly_enabled() is False is torch.is_anomaly_enabled()
    try:
        ember.set_anomaly_enabled(True, check_nan=False)
        assert ember.is_anomaly_enabled() is True and ember.autograd.is_anomaly_enabled() is True
        assert ember.is_anomaly_check_nan_enabled() is False
    finally:
        ember.set_anomaly_enabled(False)
    assert ember.is_anomaly_enabled() is False and ember.is_anomaly_check_nan_enabled() is True


@needs_torch
def test_is_inference_and_get_device_like_torch():
    x = np.random.default_rng().standard_normal(3).astype("float32")
    assert ember.is_inference(ember.tensor(x)) is torch.is_inference(torch.tensor(x)) is False
    assert ember.get_device(ember.tensor(x)) == torch.get_device(torch.tensor(x)) == -1
    for fn in ("is_inference", "get_device"):
        with pytest.raises(TypeError) as te:
            getattr(torch, fn)(3)
        with pytest.raises(TypeError) as ee:
            getattr(ember, fn)(3)
        assert str(ee.value) == str(te.value)


def test_settings_exported():
    from ember import _settings
    for name in _settings.__all__:
        assert getattr(ember, name) is getattr(_settings, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.set_float32_matmul_precision("high")


def test_device_as_default_device_context():
    """``with ember.device(...):`` as torch's default-device context: nested blocks, the previous
    default back on exit (also after an exception)."""
    with ember.device("cpu") as d:
        assert d == "cpu" and ember.zeros(2).device == ember.device("cpu")
    assert ember.get_default_device() == ember.device("cpu")
    with ember.device("meta"):
        assert ember.zeros(2).device == ember.device("meta")
        with ember.device("cpu"):
            assert ember.zeros(2).device == ember.device("cpu")
        assert ember.get_default_device() == ember.device("meta")
    with pytest.raises(ValueError):
        with ember.device("meta"):
            raise ValueError
    assert ember.get_default_device() == ember.device("cpu")