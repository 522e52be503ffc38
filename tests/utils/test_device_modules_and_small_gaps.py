"""Small torch modules: ``ember.cpu`` (torch.cpu's device module, with the deprecated ``amp``
spellings), ``ember.nn.grad`` (conv gradients vs torch's), ``ember.functional``,
``ember.utils.model_zoo``, ``ember.utils.weak``."""
import gc
import warnings

import numpy as np
import pytest

import ember


def test_cpu_device_module():
    assert ember.cpu.is_available() and ember.cpu.is_initialized()
    assert ember.cpu.device_count() == 1 and ember.cpu.current_device() == "cpu"
    ember.cpu.synchronize()
    ember.cpu.synchronize("cpu")
    ember.cpu.set_device("cpu")
    assert ember.get_device_module("cpu") is ember.cpu
    s = ember.cpu.Stream()
    with ember.cpu.stream(s) as got:
        assert got is s and ember.cpu.current_stream() is s
    assert ember.cpu.current_stream() is not s
    e = ember.cpu.Event()
    e.record()
    assert e.query() is True and s.record_event(e) is e
    caps = ember.cpu.get_capabilities()
    assert isinstance(caps["avx2"], bool) and caps["num_logical_cores"] >= 1
    # device-generic code: the module of a device type
    assert getattr(ember, ember.device("cpu").type) is ember.cpu


def test_cpu_capabilities_match_torch():
    torch = pytest.importorskip("torch")
    mine, theirs = ember.cpu.get_capabilities(), torch.cpu.get_capabilities()
    for key in ("avx", "avx2", "avx512_f", "avx512_bw", "avx512_vnni", "fma3", "sse4_2", "architecture"):
        assert mine[key] == theirs[key], key


def test_cpu_amp_deprecated_spellings_warn_and_work():
    with pytest.warns(FutureWarning, match=r"ember.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = ember.cpu.amp.autocast()
    with ctx:
        assert ember.get_autocast_dtype("cpu") is ember.bfloat16
        y = ember.mm(ember.randn(2, 3), ember.randn(3, 2))
    assert y.dtype is ember.bfloat16
    with pytest.warns(FutureWarning, match="GradScaler"):
        scaler = ember.cpu.amp.GradScaler()
    assert scaler.get_scale() == 2.0 ** 16


@pytest.mark.parametrize("n", [1, 2, 3])
def test_nn_grad_conv_gradients_match_torch(n):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    for stride, padding, dilation, groups in ((1, 0, 1, 1), (2, 1, 1, 2), (1, 2, 2, 1)):
        x = rng.standard_normal((2, 4) + (8,) * n).astype(np.float32)
        w = rng.standard_normal((6, 4 // groups) + (3,) * n).astype(np.float32)
        tx, tw = torch.tensor(x), torch.tensor(w)
        out = getattr(torch.nn.functional, f"conv{n}d")(tx, tw, None, stride, padding, dilation, groups)
        go = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        args = (stride, padding, dilation, groups)
        want_in = getattr(torch.nn.grad, f"conv{n}d_input")(tx.shape, tw, torch.tensor(go), *args)
        got_in = getattr(ember.nn.grad, f"conv{n}d_input")(tuple(x.shape), ember.tensor(w), ember.tensor(go), *args)
        want_w = getattr(torch.nn.grad, f"conv{n}d_weight")(tx, tw.shape, torch.tensor(go), *args)
        got_w = getattr(ember.nn.grad, f"conv{n}d_weight")(ember.tensor(x), tuple(w.shape), ember.tensor(go), *args)
        np.testing.assert_allclose(got_in.numpy(), want_in.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got_w.numpy(), want_w.numpy(), rtol=1e-4, atol=1e-4)
        assert not got_in.requires_grad and not got_w.requires_grad


def test_functional_model_zoo_names():
    import ember.utils.model_zoo as mz
    assert ember.functional.einsum is ember.einsum and ember.functional.meshgrid is ember.meshgrid
    assert mz.load_url is ember.hub.load_state_dict_from_url
    with pytest.raises(AttributeError):
        ember.functional.not_a_function


def test_weak_id_key_dictionary_holds_tensors_by_identity():
    from ember.utils.weak import TensorWeakRef, WeakIdKeyDictionary, WeakTensorKeyDictionary
    assert WeakTensorKeyDictionary is WeakIdKeyDictionary
    d = WeakIdKeyDictionary()
    a, b = ember.randn(3), ember.randn(3)
    d[a], d[b] = "a", "b"
    assert len(d) == 2 and d[a] == "a" and a in d and ember.randn(3) not in d
    assert d.get(ember.randn(1), 0) == 0
    del a
    gc.collect()
    assert len(d) == 1 and list(d.values()) == ["b"]
    r = TensorWeakRef(b)
    assert r() is b
    del b, d
    gc.collect()
    assert r() is None
