"""Small public names across ember (hub, types, utils, hooks, overrides, dlpack, sparse,
library, multiprocessing, autograd.graph, accelerator, random) against torch."""
import os
import pickle
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


def test_hub_names(tmp_path, monkeypatch):
    import ember.hub as hub
    monkeypatch.setenv(hub.ENV_TORCH_HOME, str(tmp_path))
    monkeypatch.setattr(hub, "_hub_dir", None)
    assert hub.get_dir() == os.path.join(str(tmp_path), "hub")      # the variable moves ember's cache
    assert hub.MAP_LOCATION is not None


def test_types_aliases():
    import ember.types as et
    assert et.py_sym_types == (ember.SymInt, ember.SymFloat, ember.SymBool)
    assert et.SymBool is ember.SymBool and et.Storage is ember.UntypedStorage
    assert int in et.IntLikeType.__args__ and ember.SymInt in et.IntLikeType.__args__
    assert set(et.Number.__args__) == {int, float, bool}
    with pytest.raises(AttributeError):
        et.NoSuchName


def test_dlpack_device_type_matches_torch():
    from ember.utils.dlpack import DLDeviceType
    assert [(m.name, int(m)) for m in DLDeviceType] == \
        [(m.name, int(m)) for m in torch.utils.dlpack.DLDeviceType]
    assert DLDeviceType(ember.randn(2).__dlpack_device__()[0]) == DLDeviceType.kDLCPU
    assert ember.randn(2).__dlpack_device__()[0] == torch.randn(2).__dlpack_device__()[0]


def test_sparse_library_multiprocessing_names():
    assert ember.sparse.DimOrDims == torch.sparse.DimOrDims or str(ember.sparse.DimOrDims).endswith("NoneType]")
    assert [(m.name, m.value) for m in ember.library.EffectType] == [(m.name, m.value) for m in torch.library.EffectType]
    assert isinstance(ember.ops.aten.add.default, ember.library.OpOverload)
    import ember.multiprocessing as emp
    assert emp.ENV_VAR_PARALLEL_START == torch.multiprocessing.ENV_VAR_PARALLEL_START
    emp.init_reductions()
    emp.init_reductions()
    t = ember.randn(3)
    from multiprocessing.reduction import ForkingPickler
    back = pickle.loads(ForkingPickler.dumps(t))
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_unserializable_hook_and_warn_if_has_hooks_match_torch():
    import ember.utils.hooks as eh
    import torch.utils.hooks as th
    for lib, hooks in ((ember, eh), (torch, th)):
        leaf = lib.randn(2, requires_grad=True)
        nonleaf = leaf * 2

        def plain(g):
            return g

        @hooks.unserializable_hook
        def marked(g):
            return g
        assert marked.__torch_unserializable__ is True
        for t in (leaf, nonleaf):
            t.register_hook(plain)
            t.register_hook(marked)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                hooks.warn_if_has_hooks(t)
            assert len(w) == 1 and "will not be serialized" in str(w[0].message) and "plain" in str(w[0].message)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            hooks.warn_if_has_hooks(lib.randn(2, requires_grad=True))
        assert not w


def test_overrides_names():
    import ember.overrides as eo
    t = ember.randn(2, requires_grad=True)
    t.sum().backward()
    fns = eo.get_default_nowrap_functions()
    assert ember.Tensor.grad.__get__ in fns
    assert any(f(t) is t.grad for f in fns)
    with eo.enable_reentrant_dispatch():
        assert (ember.ones(2) + 1).tolist() == [2.0, 2.0]


def test_utils_cmake_and_backtrace():
    with pytest.raises(AttributeError, match="ships no C\\+\\+ library"):
        ember.utils.cmake_prefix_path

    def inner():
        return ember.utils.get_cpp_backtrace()

    bt = inner()
    assert bt.startswith("frame #0: ") and "inner" in bt.splitlines()[0]
    assert "test_utils_cmake_and_backtrace" in bt.splitlines()[1]
    assert ember.utils.get_cpp_backtrace(maximum_number_of_frames=2).count("\n") == 2
    assert "test_utils_cmake_and_backtrace" in ember.utils.get_cpp_backtrace(frames_to_skip=0).splitlines()[0]


def test_random_thread_safe_generator_outside_workers():
    assert ember.random.thread_safe_generator() is None
    assert torch.random.thread_safe_generator() is None


def test_autograd_graph_names_match_torch():
    import ember.autograd.graph as eg
    import torch.autograd.graph as tg
    assert eg.RemovableHandle is ember.utils.hooks.RemovableHandle
    for name in ("set_warn_on_accumulate_grad_stream_mismatch", "set_override_stale_capture_stream"):
        for v in (True, False, 1, "x"):
            assert _err(lambda: getattr(eg, name)(v)) == _err(lambda: getattr(tg, name)(v))
    eg.set_warn_on_accumulate_grad_stream_mismatch(True)
    eg.set_override_stale_capture_stream(False)
    for b in (0.5, 1.5, -0.1, "x", True):
        got = _err(lambda: eg.region_activation_memory_budget(b).__enter__())
        exp = _err(lambda: tg.region_activation_memory_budget(b).__enter__())
        assert got == exp


def test_accelerator_names_match_torch():
    assert _err(ember.accelerator.get_device_capability) == _err(torch.accelerator.get_device_capability)
    assert _err(ember.accelerator.Graph) == _err(torch.accelerator.Graph)


def test_backward_hook_driven_by_hand_matches_torch():
    rng = np.random.RandomState(4)
    w, x = rng.randn(2, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    seen = {}
    for lib in (ember, torch):
        mod = lib.nn.Linear(3, 2, bias=False)
        with lib.no_grad():
            mod.weight.copy_(lib.tensor(w))
        log = []

        def pre(m, gout):
            log.append(("pre", [g.numpy().copy() for g in gout]))
            return (gout[0] * 2,)

        def post(m, gin, gout):
            log.append(("post", [g.numpy().copy() for g in gin], [g.numpy().copy() for g in gout]))
        bh = lib.utils.hooks.BackwardHook(mod, [post], [pre])
        xin = lib.tensor(x, requires_grad=True)
        (xi,) = bh.setup_input_hook((xin,))
        out = bh.setup_output_hook(mod(xi))
        out.sum().backward()
        seen[lib.__name__] = (log, xin.grad.numpy())
    (elog, eg), (tlog, tg) = seen["ember"], seen["torch"]
    assert [e[0] for e in elog] == [t[0] for t in tlog] == ["pre", "post"]
    for e, t in zip(elog, tlog):
        for ea, ta in zip(e[1:], t[1:]):
            for a, b in zip(ea, ta):
                np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(eg, tg, rtol=1e-6)
