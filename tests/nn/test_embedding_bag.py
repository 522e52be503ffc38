"""F.embedding_bag and nn.EmbeddingBag against PyTorch: 1-D input with offsets (empty bags,
include_last_offset), 2-D input, padding_idx, per_sample_weights; values and gradients, compiled
against eager, and the errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import needs_torch, torch

F = ember.nn.functional


def _bags(rng, n_bags, max_len):
    lengths = rng.integers(0, max_len + 1, n_bags)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return offsets, int(lengths.sum())


@needs_torch
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_bags=st.integers(1, 5), mode=st.sampled_from(["sum", "mean", "max"]),
       padding=st.sampled_from([None, 0, -1]), last=st.booleans(), weighted=st.booleans())
def test_embedding_bag_1d_matches_torch(seed, n_bags, mode, padding, last, weighted):
    rng = np.random.default_rng(seed)
    offsets, n = _bags(rng, n_bags, 4)
    if last:
        offsets = np.append(offsets, n)
    w = rng.standard_normal((6, 3))
    idx = rng.integers(0, 6, n)
    psw = rng.standard_normal(n) if weighted and mode == "sum" else None
    ew, tw = ember.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    ep = None if psw is None else ember.tensor(psw, requires_grad=True)
    tp = None if psw is None else torch.tensor(psw, requires_grad=True)
    got = F.embedding_bag(ember.tensor(idx), ew, ember.tensor(offsets), mode=mode, padding_idx=padding,
                          include_last_offset=last, per_sample_weights=ep)
    want = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, torch.tensor(offsets), mode=mode,
                                             padding_idx=padding, include_last_offset=last, per_sample_weights=tp)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(want.shape))
    ge = ember.autograd.grad(got, [ew] + ([ep] if ep is not None else []), ember.tensor(g))
    gt = torch.autograd.grad(want, [tw] + ([tp] if tp is not None else []), torch.tensor(g))
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_and_module_match_torch(mode):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((7, 4)).astype(np.float32)
    idx = rng.integers(0, 7, (3, 5))
    em = ember.nn.EmbeddingBag(7, 4, mode=mode, padding_idx=2, _weight=ember.tensor(w))
    tm = torch.nn.EmbeddingBag(7, 4, mode=mode, padding_idx=2, _weight=torch.tensor(w))
    np.testing.assert_allclose(em(ember.tensor(idx)).detach().numpy(), tm(torch.tensor(idx)).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    assert repr(em) == repr(tm)
    off = np.array([0, 4, 4, 9])
    flat = rng.integers(0, 7, 12)
    np.testing.assert_allclose(em(ember.tensor(flat), ember.tensor(off)).detach().numpy(),
                               tm(torch.tensor(flat), torch.tensor(off)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_bag_compiles_and_matches_eager():
    rng = np.random.default_rng(9)
    w = ember.tensor(rng.standard_normal((8, 3)), requires_grad=True)
    idx, off = ember.tensor(rng.integers(0, 8, 10)), ember.tensor(np.array([0, 3, 3, 7]))

    def f(i, o, w):
        return (F.embedding_bag(i, w, o, mode="mean").sum() + F.embedding_bag(i, w, o, mode="max").pow(2).sum()
                + F.embedding_bag(i.reshape(2, 5), w, mode="sum").sum())

    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor")(idx, off, w)
    gc = ember.autograd.grad(got, w)[0]
    want = f(idx, off, w)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(gc.numpy(), ember.autograd.grad(want, w)[0].numpy(), rtol=1e-10)


@needs_torch
def test_embedding_bag_errors_match_torch():
    w = np.ones((5, 2))
    cases = [
        lambda m: m.nn.functional.embedding_bag(m.tensor([0, 1]), m.tensor(w), m.tensor([1, 2])),
        lambda m: m.nn.functional.embedding_bag(m.tensor([0, 1]), m.tensor(w)),
        lambda m: m.nn.functional.embedding_bag(m.tensor([[0, 1]]), m.tensor(w), m.tensor([0])),
        lambda m: m.nn.functional.embedding_bag(m.tensor([0, 1]), m.tensor(w), m.tensor([0]), mode="max",
                                                per_sample_weights=m.ones(2, dtype=m.float64)),
        lambda m: m.nn.functional.embedding_bag(m.tensor([0, 1]), m.tensor(w), m.tensor([0]), mode="median"),
    ]
    for case in cases:
        with pytest.raises(Exception) as ours:
            case(ember)
        with pytest.raises(Exception) as theirs:
            case(torch)
        assert type(ours.value) is type(theirs.value)
        prefix = str(theirs.value).split(". ")[0][:40]
        assert str(ours.value).startswith(prefix), (str(ours.value), str(theirs.value))


def test_offsets_made_in_compiled_code_do_not_break_the_graph():
    """The eager check ``offsets[0] == 0`` read data: with offsets built in the frame (a real
    constant whose slices are fake under tracing) it broke the graph."""
    import ember.nn.functional as F

    def f(w):
        return F.embedding_bag(ember.tensor([0, 1, 2, 1]), w, ember.tensor([0, 2]), mode="sum")

    w = ember.randn(4, 6)
    r = ember.dynamo.explain(f)(w)
    assert r.graph_count == 1 and r.graph_break_count == 0
    np.testing.assert_allclose(ember.compile(f)(w).numpy(), f(w).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(ember.tensor([0, 1]), w, ember.tensor([1]))
