"""ember.nn.attention: flex_attention, BlockMask and sdpa_kernel against PyTorch.

PyTorch runs flex_attention's eager reference on CPU but refuses its backward there, so
gradients are checked against a hand-written PyTorch softmax attention with the same
additive bias / boolean mask (and against float64 finite differences)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.attention import SDPBackend, sdpa_kernel
from ember.nn.attention.flex_attention import (AuxRequest, BlockMask, and_masks, create_block_mask, create_mask,
                                               flex_attention, noop_mask, or_masks)

from oracle import HAVE_TORCH, needs_torch, torch


def _data(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _pair(arr, requires_grad=False):
    e = ember.tensor(arr, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad) if HAVE_TORCH else None
    return e, t


def _tflex():
    from torch.nn.attention import flex_attention as tfa
    return tfa


# ---- mods, each written once and called with either framework's tensors -----------------
def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx).abs() <= 3


def relative(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.1


def softcap(score, b, h, q_idx, kv_idx):
    return 2.0 * (score / 2.0).tanh()


def nothing_early(b, h, q_idx, kv_idx):
    """Rows 0-3 see nothing: their output must be zeros and their lse -inf."""
    return (q_idx >= 4) & (q_idx >= kv_idx)


SCORE_MODS = {"none": None, "relative": relative, "softcap": softcap}
def prefix(b, h, q_idx, kv_idx):
    return kv_idx < 2


# composite mods are built by each framework's own or_masks / and_masks
MASK_MODS = {"causal": causal, "sliding": sliding, "nothing_early": nothing_early,
             "prefix_or": ("or_masks", causal, prefix), "window_and": ("and_masks", causal, sliding)}


def _mod(name, framework):
    mod = MASK_MODS[name]
    if isinstance(mod, tuple):
        lib = _tflex() if framework is torch else ember.nn.attention.flex_attention
        return getattr(lib, mod[0])(*mod[1:])
    return mod


def _block_mask(name, framework, B, H, L, S, block):
    if framework is ember:
        return create_block_mask(_mod(name, ember), B, H, L, S, device="cpu", BLOCK_SIZE=block)
    return _tflex().create_block_mask(_mod(name, torch), B, H, L, S, device="cpu", BLOCK_SIZE=block)


@needs_torch
@pytest.mark.parametrize("score", sorted(SCORE_MODS))
@pytest.mark.parametrize("mask", sorted(MASK_MODS) + [None])
@pytest.mark.parametrize("L,S,block", [(8, 8, 4), (10, 7, 4), (16, 16, 128)])
def test_forward_and_lse_match_torch(score, mask, L, S, block):
    rng = np.random.default_rng(hash((score, mask, L, S)) % 2**32)
    B, H, D = 2, 3, 8
    q, k, v = (_pair(_data(rng, B, H, n, D)) for n in (L, S, S))
    tfa = _tflex()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = {}
        for fw, flex, i in ((ember, flex_attention, 0), (torch, tfa.flex_attention, 1)):
            bm = _block_mask(mask, fw, B, None, L, S, block) if mask else None
            outs[fw] = flex(q[i], k[i], v[i], score_mod=SCORE_MODS[score], block_mask=bm,
                            return_aux=(AuxRequest if fw is ember else tfa.AuxRequest)(lse=True))
    (eo, eaux), (to, taux) = outs[ember], outs[torch]
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eaux.lse.numpy(), taux.lse.numpy(), rtol=1e-5, atol=1e-5)
    assert eo.dtype is ember.float32 and eaux.lse.dtype is ember.float32


@needs_torch
@pytest.mark.parametrize("mask", sorted(MASK_MODS))
@pytest.mark.parametrize("B,H,L,S,block", [(2, 2, 8, 8, 4), (1, None, 10, 13, 4), (None, 3, 9, 9, (2, 4))])
def test_block_mask_fields_match_torch(mask, B, H, L, S, block):
    e = _block_mask(mask, ember, B, H, L, S, block)
    t = _block_mask(mask, torch, B, H, L, S, block)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                 "q_indices", "full_q_num_blocks", "full_q_indices"):
        ev, tv = getattr(e, name), getattr(t, name)
        np.testing.assert_array_equal(ev.numpy(), tv.numpy(), err_msg=name)
        assert str(ev.dtype).split(".")[1] == str(tv.dtype).split(".")[1], name
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())
    assert e.shape == t.shape and e.BLOCK_SIZE == t.BLOCK_SIZE and e.numel() == t.numel()
    assert e.sparsity() == pytest.approx(t.sparsity())
    assert str(e) == str(t)
    assert repr(e) == repr(t).replace("torch.Size", "ember.Size")
    np.testing.assert_array_equal(create_mask(_mod(mask, ember), B, H, L, S).numpy(),
                                  _tflex().create_mask(_mod(mask, torch), B, H, L, S, device="cpu").numpy())


@needs_torch
def test_block_mask_indexing_adjust_and_large_grids_match_torch():
    e = _block_mask("causal", ember, 2, 3, 24, 24, 4)
    t = _block_mask("causal", torch, 2, 3, 24, 24, 4)
    for idx in (0, (1, 2), (slice(0, 2), slice(1, 3)), -1):
        ei, ti = e[idx], t[idx]
        np.testing.assert_array_equal(ei.kv_indices.numpy(), ti.kv_indices.numpy())
        np.testing.assert_array_equal(ei.q_num_blocks.numpy(), ti.q_num_blocks.numpy())
    x = ember.randn(1, 3, 24, 8)
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        flex_attention(x, x, x, block_mask=e[0:1])
    ea, ta = e._adjust(13, 10), t._adjust(13, 10)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        np.testing.assert_array_equal(getattr(ea, name).numpy(), getattr(ta, name).numpy(), err_msg=name)
    assert ea.shape == ta.shape
    # more than `limit` heads and a grid coarser than the blocks: the summary picture
    e2 = _block_mask("sliding", ember, 3, 2, 100, 100, 2)
    t2 = _block_mask("sliding", torch, 3, 2, 100, 100, 2)
    assert str(e2) == str(t2)
    assert e2.to_string(grid_size=-1, limit=1) == t2.to_string(grid_size=-1, limit=1)


@needs_torch
@pytest.mark.parametrize("with_mask", [False, True])
def test_gradients_match_torch_softmax_attention(with_mask):
    """Gradients for q, k, v and a learnable bias captured by the score_mod, against the same
    attention written out with PyTorch ops (PyTorch's flex has no CPU backward)."""
    rng = np.random.default_rng(5)
    B, H, L, D = 2, 2, 9, 4
    (eq, tq), (ek, tk), (ev, tv) = (_pair(_data(rng, B, H, L, D, dtype=np.float64), True) for _ in range(3))
    ebias, tbias = _pair(_data(rng, H, L, L, dtype=np.float64), True)

    def e_mod(score, b, h, q_idx, kv_idx):
        return score + ebias[h, q_idx, kv_idx]

    bm = create_block_mask(nothing_early, None, H, L, L, BLOCK_SIZE=4) if with_mask else None
    eout = flex_attention(eq, ek, ev, score_mod=e_mod, block_mask=bm)
    g = _data(rng, B, H, L, D, dtype=np.float64)
    eout.backward(ember.tensor(g))

    scores = tq @ tk.transpose(-2, -1) / D ** 0.5 + tbias
    if with_mask:
        idx = torch.arange(L)
        keep = (idx[:, None] >= 4) & (idx[:, None] >= idx[None, :])
        scores = scores.masked_fill(~keep, float("-inf"))
        probs = torch.nan_to_num(scores.softmax(-1), nan=0.0)
    else:
        probs = scores.softmax(-1)
    tout = probs @ tv
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(eout.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    for e, t in ((eq, tq), (ek, tk), (ev, tv), (ebias, tbias)):
        assert np.isfinite(e.grad.numpy()).all()
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_gradcheck_with_score_mod_and_gqa():
    rng = np.random.default_rng(2)
    q = ember.tensor(_data(rng, 1, 4, 5, 3, dtype=np.float64), requires_grad=True)
    k = ember.tensor(_data(rng, 1, 2, 6, 3, dtype=np.float64), requires_grad=True)
    v = ember.tensor(_data(rng, 1, 2, 6, 2, dtype=np.float64), requires_grad=True)
    bm = create_block_mask(lambda b, h, qi, ki: (qi + 1) >= ki, 1, 4, 5, 6, BLOCK_SIZE=2)

    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=softcap, block_mask=bm, enable_gqa=True, scale=0.7)
    assert ember.autograd.gradcheck(f, (q, k, v))


@needs_torch
def test_gqa_and_value_width_match_torch():
    rng = np.random.default_rng(3)
    (eq, tq), (ek, tk), (ev, tv) = (_pair(_data(rng, 2, h, 12, e)) for h, e in ((6, 8), (2, 8), (2, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = _tflex().flex_attention(tq, tk, tv, score_mod=relative, enable_gqa=True)
    e = flex_attention(eq, ek, ev, score_mod=relative, enable_gqa=True)
    assert tuple(e.shape) == tuple(t.shape) == (2, 6, 12, 5)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_rows_with_nothing_visible_are_zero_with_minus_inf_lse():
    rng = np.random.default_rng(4)
    q = ember.tensor(_data(rng, 1, 1, 8, 4), requires_grad=True)
    bm = create_block_mask(nothing_early, 1, 1, 8, 8, BLOCK_SIZE=4)
    out, aux = flex_attention(q, q, q, block_mask=bm, return_aux=AuxRequest(lse=True, max_scores=True))
    assert (out[0, 0, :4] == 0).all().item() and ember.isneginf(aux.lse[0, 0, :4]).all().item()
    assert ember.isfinite(out).all().item() and ember.isfinite(aux.lse[0, 0, 4:]).all().item()
    (out.sum() + aux.lse[0, 0, 4:].sum()).backward()
    assert ember.isfinite(q.grad).all().item()


def test_half_inputs_compute_in_float32():
    rng = np.random.default_rng(6)
    x = _data(rng, 1, 2, 8, 4)
    lo = ember.tensor(x).to(ember.bfloat16)
    out, lse = flex_attention(lo, lo, lo, return_lse=True)
    ref = flex_attention(lo.float(), lo.float(), lo.float())
    assert out.dtype is ember.bfloat16 and lse.dtype is ember.float32
    np.testing.assert_allclose(out.float().numpy(), ref.numpy(), atol=2e-2)


def test_errors_are_torchs():
    x = ember.randn(1, 2, 8, 4)
    with pytest.raises(ValueError, match="same number of heads but got Hq=2 and Hkv=1"):
        flex_attention(x, x[:, :1], x[:, :1])
    with pytest.raises(ValueError, match="multiple of kv heads"):
        flex_attention(ember.randn(1, 3, 8, 4), x, x, enable_gqa=True)
    with pytest.raises(ValueError, match="same embedding dimension"):
        flex_attention(x, ember.randn(1, 2, 8, 3), x)
    with pytest.raises(NotImplementedError, match="must be 4D"):
        flex_attention(x[0], x[0], x[0])
    with pytest.raises(ValueError, match="smaller length"):
        flex_attention(x, x, x, block_mask=create_block_mask(causal, 1, 1, 4, 4))
    with pytest.raises(ValueError, match="larger length"):
        flex_attention(x, x, x, block_mask=create_block_mask(causal, 1, 1, 16, 16))
    with pytest.raises(ValueError, match="Cannot specify both"):
        flex_attention(x, x, x, return_lse=True, return_aux=AuxRequest(lse=True))
    with pytest.raises(AssertionError, match="requires a mask_mod"):
        create_block_mask(relative, 1, 1, 8, 8)
    with pytest.raises(AssertionError, match="Expected 4 or 5 positional args, got 3"):
        create_mask(lambda a, b, c: a, 1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="callable mask_mods"):
        and_masks(causal, 3)
    bm = BlockMask.from_kv_blocks(ember.ones(1, 1, 2, dtype=ember.int32), ember.zeros(1, 1, 2, 2, dtype=ember.int32),
                                  BLOCK_SIZE=4)
    assert bm.mask_mod is noop_mask and bm.shape == (1, 1, 8, 8)


def test_hand_made_block_lists_hide_unlisted_tiles():
    """Kernel semantics: with a noop mask_mod, a tile that is not listed is hidden."""
    rng = np.random.default_rng(7)
    x = ember.tensor(_data(rng, 1, 1, 8, 4))
    # row-block 0 sees kv block 0; row-block 1 sees kv block 1 only
    bm = BlockMask.from_kv_blocks(ember.tensor([[[1, 1]]], dtype=ember.int32),
                                  ember.tensor([[[[0, 1], [1, 0]]]], dtype=ember.int32), BLOCK_SIZE=4)
    out = flex_attention(x, x, x, block_mask=bm)
    keep = ember.zeros(8, 8, dtype=ember.bool)
    keep[:4, :4] = True
    keep[4:, 4:] = True
    ref = F.scaled_dot_product_attention(x, x, x, attn_mask=keep)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_mask", [False, True])
def test_compiled_flex_attention_is_one_graph_and_matches_eager(with_mask):
    rng = np.random.default_rng(8)
    B, H, L, D = 2, 2, 16, 8
    bias = ember.tensor(_data(rng, H, 2 * L), requires_grad=True)

    def alibi_like(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx - kv_idx + L]

    bm = create_block_mask(sliding, None, None, L, L, BLOCK_SIZE=4) if with_mask else None

    def attend(q, k, v):
        return flex_attention(q, k, v, score_mod=alibi_like, block_mask=bm)

    q, k, v = (ember.tensor(_data(rng, B, H, L, D), requires_grad=True) for _ in range(3))
    explained = ember.dynamo.explain(attend)(q, k, v)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    compiled = ember.compile(attend)
    got = compiled(q, k, v)
    want = attend(q, k, v)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    grads_c = ember.autograd.grad(got.square().sum(), (q, k, v, bias))
    grads_e = ember.autograd.grad(want.square().sum(), (q, k, v, bias))
    for a, b in zip(grads_c, grads_e):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


# ---- sdpa_kernel -------------------------------------------------------------------------
def test_sdpa_kernel_switches_like_torchs_cpu_build():
    q = ember.randn(1, 2, 4, 8)
    ref = F.scaled_dot_product_attention(q, q, q)
    for ok in (SDPBackend.MATH, [SDPBackend.FLASH_ATTENTION], [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        with sdpa_kernel(ok):
            assert ember.equal(F.scaled_dot_product_attention(q, q, q), ref)
    for bad in (SDPBackend.EFFICIENT_ATTENTION, [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        with sdpa_kernel(bad):
            assert not ember.backends.cuda.math_sdp_enabled()
            with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
                F.scaled_dot_product_attention(q, q, q)
        assert ember.backends.cuda.math_sdp_enabled() and ember.backends.cuda.flash_sdp_enabled()
    with pytest.raises(AssertionError, match="got str"):
        with sdpa_kernel("math"):
            pass
    assert repr(SDPBackend.MATH) == "<SDPBackend.MATH: 0>" and str(SDPBackend.FLASH_ATTENTION) == \
        "SDPBackend.FLASH_ATTENTION"


@needs_torch
def test_sdpa_backend_values_match_torch():
    from torch.nn.attention import SDPBackend as T
    assert {m: int(v) for m, v in SDPBackend.__members__.items()} == \
        {m: int(v.value) for m, v in T.__members__.items()}


def test_sdpa_kernel_block_in_compiled_code():
    def f(q):
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]) as got:
            out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return out * 2, got

    q = ember.randn(1, 2, 8, 4)
    explained = ember.dynamo.explain(f)(q)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    out, got = ember.compile(f)(q)
    assert got == {} and ember.allclose(out, f(q)[0])
    assert ember.backends.cuda.mem_efficient_sdp_enabled()      # the switches are back after the block

    def g(q):
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            return F.scaled_dot_product_attention(q, q, q)
    with pytest.raises(RuntimeError, match="No viable backend"):
        ember.compile(g)(q)
    assert ember.backends.cuda.math_sdp_enabled()
