"""F.multi_head_attention_forward against torch's: packed and separate projections, bias_k/v,
add_zero_attn, bool/float masks, key_padding_mask, static_k/v, unbatched input, weights
averaged or per head; values and gradients of every input."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()


def enp(t):
    return np.asarray(t.detach()._data)


@settings(max_examples=30, deadline=None)
@given(H=st.sampled_from([1, 2]), separate=st.booleans(), bias=st.booleans(), bias_kv=st.booleans(),
       zero_attn=st.booleans(), mask=st.sampled_from([None, "bool2", "float2", "float3"]), kpm=st.booleans(),
       need_weights=st.booleans(), average=st.booleans(), unbatched=st.booleans(), static=st.booleans())
def test_mha_forward_vs_torch(H, separate, bias, bias_kv, zero_attn, mask, kpm, need_weights, average, unbatched,
                              static):
    L, S, N, E = 3, 4, 2, 4
    kdim = 3 if separate else E
    hd = E // H
    if unbatched:
        N = 1
    arrays = {
        "query": RNG.standard_normal((L, N, E)), "key": RNG.standard_normal((S, N, kdim)),
        "value": RNG.standard_normal((S, N, kdim)), "out_w": RNG.standard_normal((E, E)),
    }
    if separate:
        arrays.update(q_w=RNG.standard_normal((E, E)), k_w=RNG.standard_normal((E, kdim)),
                      v_w=RNG.standard_normal((E, kdim)))
    else:
        arrays["in_w"] = RNG.standard_normal((3 * E, E))
    if bias:
        arrays.update(in_b=RNG.standard_normal(3 * E), out_b=RNG.standard_normal(E))
    use_static = static and not bias_kv
    if bias_kv:
        arrays.update(bias_k=RNG.standard_normal((1, 1, E)), bias_v=RNG.standard_normal((1, 1, E)))
    if use_static:
        arrays.update(static_k=RNG.standard_normal((N * H, S, hd)), static_v=RNG.standard_normal((N * H, S, hd)))
    src = S                  # the masks cover the given keys (bias_k / zero attention pad them)
    if mask == "bool2":
        m = RNG.random((L, src)) < 0.3
        m[:, 0] = False
    elif mask == "float2":
        m = RNG.standard_normal((L, src))
    elif mask == "float3":
        m = RNG.standard_normal((N * H, L, src))
    else:
        m = None
    kp = None
    if kpm:
        kp = RNG.random((N, src)) < 0.3
        kp[:, 0] = False
        if m is not None and m.dtype == bool:
            m[:, 1] = False
    if kpm and m is not None and m.dtype != bool:
        kp = RNG.standard_normal((N, src))     # torch wants the two masks of one kind

    def call(mod, F, tens):
        t = {k: mod.tensor(v, requires_grad=True) for k, v in tens.items()}
        q, k, v = t["query"], t["key"], t["value"]
        kpm_t = None if kp is None else mod.tensor(kp)
        if unbatched:
            q, k, v = q[:, 0], k[:, 0], v[:, 0]
            kpm_t = None if kpm_t is None else kpm_t[0]
        out, w = F.multi_head_attention_forward(
            q, k, v, E, H, t.get("in_w"), t.get("in_b"), t.get("bias_k"), t.get("bias_v"), zero_attn, 0.0,
            t["out_w"], t.get("out_b"), training=True, key_padding_mask=kpm_t, need_weights=need_weights,
            attn_mask=None if m is None else mod.tensor(m), use_separate_proj_weight=separate,
            q_proj_weight=t.get("q_w"), k_proj_weight=t.get("k_w"), v_proj_weight=t.get("v_w"),
            static_k=t.get("static_k"), static_v=t.get("static_v"), average_attn_weights=average)
        return t, out, w

    tt, to, tw = call(torch, TF, arrays)
    et, eo, ew = call(ember, EF, arrays)
    np.testing.assert_allclose(enp(eo), to.detach().numpy(), rtol=1e-9, atol=1e-9)
    assert (ew is None) == (tw is None)
    loss_w = RNG.standard_normal(tuple(to.shape))
    tl = (to * torch.tensor(loss_w)).sum()
    el = (eo * ember.tensor(loss_w)).sum()
    if tw is not None:
        np.testing.assert_allclose(enp(ew), tw.detach().numpy(), rtol=1e-9, atol=1e-9)
        ww = RNG.standard_normal(tuple(tw.shape))
        tl = tl + (tw * torch.tensor(ww)).sum()
        el = el + (ew * ember.tensor(ww)).sum()
    tl.backward()
    el.backward()
    for name in arrays:
        tg, eg = tt[name].grad, et[name].grad
        assert (tg is None) == (eg is None), name
        if tg is not None:
            np.testing.assert_allclose(enp(eg), tg.numpy(), rtol=1e-8, atol=1e-8, err_msg=name)


def test_module_uses_functional_and_matches_torch():
    tm = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    em = ember.nn.MultiheadAttention(4, 2, batch_first=True, dtype=ember.float64)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((2, 3, 4))
    to, tw = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    eo, ew = em(ember.tensor(x), ember.tensor(x), ember.tensor(x))
    np.testing.assert_allclose(enp(eo), to.detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(enp(ew), tw.detach().numpy(), rtol=1e-9)


def test_errors():
    q = ember.randn(3, 2, 4)
    w = ember.randn(12, 4)
    ow = ember.randn(4, 4)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 8"):
        EF.multi_head_attention_forward(q, q, q, 8, 2, w, None, None, None, False, 0.0, ow, None)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        EF.multi_head_attention_forward(q, q, q, 4, 2, w, None, None, None, False, 0.0, ow, None, is_causal=True)
    with pytest.raises(AssertionError, match="use_separate_proj_weight is True"):
        EF.multi_head_attention_forward(q, q, q, 4, 2, None, None, None, None, False, 0.0, ow, None,
                                        use_separate_proj_weight=True)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask"):
        EF.multi_head_attention_forward(q, q, q, 4, 2, w, None, None, None, False, 0.0, ow, None,
                                        attn_mask=ember.zeros(2, 2))
    with pytest.raises(AssertionError, match="For batched"):
        EF.multi_head_attention_forward(q, q[0], q, 4, 2, w, None, None, None, False, 0.0, ow, None)
    # dropout only in training
    out1, _ = EF.multi_head_attention_forward(q, q, q, 4, 2, w, None, None, None, False, 0.9, ow, None,
                                              training=False)
    out2, _ = EF.multi_head_attention_forward(q, q, q, 4, 2, w, None, None, None, False, 0.0, ow, None)
    np.testing.assert_allclose(enp(out1), enp(out2))
