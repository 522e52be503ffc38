"""ember.nn.attention's SDPAParams / can_use_* and the flash-attention impl registry, against
torch.nn.attention."""
import logging

import numpy as np
import pytest

import ember
import ember.nn.attention as ea

torch = pytest.importorskip("torch")
import torch.nn.attention as ta  # noqa: E402


def test_sdpa_params_hold_the_call_and_are_read_only():
    q = ember.randn(2, 3, 4, 8)
    mask = ember.ones(4, 4, dtype=ember.bool)
    p = ea.SDPAParams(q, q, q, mask, 0.1, True, False)
    assert p.query is q and p.attn_mask is mask and p.dropout == pytest.approx(0.1)
    assert (p.is_causal, p.enable_gqa) == (True, False)
    with pytest.raises(AttributeError):
        p.dropout = 0.5
    tq = torch.randn(2, 3, 4, 8)
    with pytest.raises(AttributeError):
        ta.SDPAParams(tq, tq, tq, None, 0.0, False, False).dropout = 0.5
    with pytest.raises(TypeError, match="'key' must be Tensor"):
        ea.SDPAParams(q, 1, q, None, 0.0, False, False)
    with pytest.raises(TypeError, match="'dropout' must be float"):
        ea.SDPAParams(q, q, q, None, "x", False, False)
    with pytest.raises(TypeError):
        ea.SDPAParams(q, q, q)


@pytest.mark.parametrize("causal", [False, True])
def test_can_use_fused_kernels_answer_as_torch_cpu(causal, capfd):
    rng = np.random.RandomState(int(causal))
    x = rng.randn(2, 3, 4, 8).astype(np.float32)
    ep = ea.SDPAParams(ember.tensor(x), ember.tensor(x), ember.tensor(x), None, 0.0, causal, False)
    tp = ta.SDPAParams(torch.tensor(x), torch.tensor(x), torch.tensor(x), None, 0.0, causal, False)
    for name in ("can_use_flash_attention", "can_use_efficient_attention"):
        for debug in (False, True):
            assert getattr(ea, name)(ep, debug) == getattr(ta, name)(tp, debug)
    assert capfd.readouterr().err == ""
    with pytest.raises(TypeError, match="'params' must be SDPAParams"):
        ea.can_use_flash_attention(5)


def test_flash_impl_registry_follows_torch(caplog):
    assert ea.list_flash_attention_impls() == ta.list_flash_attention_impls() == ["FA3", "FA4"]
    assert ea.current_flash_attention_impl() is None
    with pytest.raises(ValueError) as e_err:
        ea.activate_flash_attention_impl("nope")
    with pytest.raises(ValueError) as t_err:
        ta.activate_flash_attention_impl("nope")
    assert str(e_err.value) == str(t_err.value)
    for name in ("FA3", "FA4"):    # the CUDA packages are missing here, as for torch
        with pytest.raises(ModuleNotFoundError):
            ea.activate_flash_attention_impl(name)

    log = []

    class Handle:
        def __init__(self, name):
            self.name = name

        def remove(self):
            log.append(("removed", self.name))

    try:
        ea.register_flash_attention_impl("Mine", register_fn=lambda: log.append("mine") or Handle("Mine"))
        ea.register_flash_attention_impl("Other", register_fn=lambda: Handle("Other"))
        ea.register_flash_attention_impl("NoHandle", register_fn=lambda: None)
        assert ea.list_flash_attention_impls() == ["FA3", "FA4", "Mine", "NoHandle", "Other"]
        ea.activate_flash_attention_impl("Mine")
        assert ea.current_flash_attention_impl() == "Mine" and log == ["mine"]
        ea.activate_flash_attention_impl("Other")          # the previous one is removed first
        assert log[-1] == ("removed", "Mine") and ea.current_flash_attention_impl() == "Other"
        ea.activate_flash_attention_impl("NoHandle")
        assert log[-1] == ("removed", "Other") and ea.current_flash_attention_impl() is None
        with caplog.at_level(logging.WARNING):
            ea.restore_flash_attention_impl()
        assert "Trying to restore default FA2 impl when no custom impl was activated" in caplog.text
    finally:
        for name in ("Mine", "Other", "NoHandle"):
            ea._registry._IMPLS.pop(name, None)
        ea._registry._ACTIVE = None
