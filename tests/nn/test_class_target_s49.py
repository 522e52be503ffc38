"""uint8 (Byte) class-index targets in nll_loss / cross_entropy, against torch 2.x: accepted for
1-D and 2-D inputs (as Long), refused for (N, C, d1, ...) inputs with torch's message."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F

SHAPES = {"1d": (5,), "2d": (4, 5), "3d": (3, 5, 4), "4d": (2, 5, 3, 2), "5d": (2, 5, 2, 2, 2)}


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float64)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    C = shape[0] if len(shape) == 1 else shape[1]
    t = rng.integers(1, C, size=tshape).astype(np.uint8)
    return x, t


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
@pytest.mark.parametrize("rank", sorted(SHAPES))
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_byte_target_matches_torch(name, rank, reduction):
    torch = pytest.importorskip("torch")
    x, t = _data(SHAPES[rank], seed=len(rank) * 7 + len(name))
    tx = torch.tensor(x, requires_grad=True)
    ex = ember.tensor(x, requires_grad=True)
    try:
        want = getattr(torch.nn.functional, name)(tx, torch.from_numpy(t), reduction=reduction)
    except RuntimeError as err:
        with pytest.raises(RuntimeError) as info:
            getattr(F, name)(ex, ember.from_numpy(t), reduction=reduction)
        assert str(info.value) == str(err)
        assert len(SHAPES[rank]) > 2
        return
    got = getattr(F, name)(ex, ember.from_numpy(t), reduction=reduction)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(want.shape))
    want.backward(torch.tensor(g))
    got.backward(ember.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
def test_byte_target_1d_input_size1_target(name):
    torch = pytest.importorskip("torch")
    x, _ = _data((6,), seed=3)
    t = np.array([4], dtype=np.uint8)
    want = getattr(torch.nn.functional, name)(torch.tensor(x), torch.from_numpy(t))
    got = getattr(F, name)(ember.tensor(x), ember.from_numpy(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape", [SHAPES["3d"], SHAPES["4d"]])
def test_byte_target_high_rank_message(shape):
    x, t = _data(shape, seed=11)
    for fn in (F.nll_loss, F.cross_entropy):
        with pytest.raises(RuntimeError, match="^expected scalar type Long but found Byte$"):
            fn(ember.tensor(x), ember.from_numpy(t))
        # Long targets of the same values still work
        fn(ember.tensor(x), ember.from_numpy(t.astype(np.int64)))
