"""ember.func.rearrange against torch.func.rearrange: shapes, values, dtypes, errors."""
import random
import warnings

import numpy as np
import pytest

import ember
from ember.func import rearrange

torch = pytest.importorskip("torch")


def _outcome(lib, fn, x, pattern, kw):
    try:
        r = fn(x, pattern, **kw)
    except Exception as e:  # noqa: BLE001 - compared
        return (type(e).__name__, str(e))
    arr = r.detach().numpy() if lib is torch else r.numpy()
    return ("OK", tuple(r.shape), str(r.dtype).split(".")[-1], np.asarray(arr))


def _same(shape, pattern, kw=None, dtype=np.float32, seed=0):
    kw = kw or {}
    xn = np.asarray(np.random.RandomState(seed).randn(*shape) * 10).astype(dtype)
    expected = _outcome(torch, torch.func.rearrange, torch.from_numpy(xn.copy()), pattern, kw)
    got = _outcome(ember, rearrange, ember.tensor(xn), pattern, kw)
    assert got[:3] == expected[:3]
    if got[0] == "OK":
        np.testing.assert_allclose(got[3], expected[3], rtol=1e-5, atol=1e-5)
    return got


@pytest.mark.parametrize("shape,pattern,kw", [
    ((2, 3, 4, 5), "a b c d -> (a b) c d", {}),
    ((2, 3, 4, 5), "a b c d -> b a (c d)", {}),
    ((2, 3, 4, 5), "a ... -> ... a", {}),
    ((2, 3, 4, 5), "... d -> d ...", {}),
    ((2, 3, 4, 5), "a ... -> (...) a 1", {}),
    ((2, 3, 4, 5), "(a1 a2) b c d -> a1 a2 b c d", {"a1": 2}),
    ((2, 3, 4, 5), "(a1 a2) b c d -> a1 a2 b c d", {}),
    ((4, 6, 2, 3), "b (h1 h) (w1 w) c -> (b h1 w1) h w c", {"h1": 2, "w1": 2}),
    ((4, 6, 2, 3), "b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}),
    ((4, 6, 2, 3), "(a b) c d e -> a b c d e", {"a": 3}),
    ((4, 6, 2, 3), "(a b) c d e -> a b c d e", {"a": 2, "b": 3}),
    ((4, 6, 2), "a b c -> a b c", {"a": 3}),
    ((2, 3, 4), "a 1 c -> a c", {}),
    ((2, 3, 4), "a () c -> c a", {}),
    ((2, 3, 4), "a b c -> a b c () 1", {}),
    ((2, 3, 4), "1 b c -> b 1 c", {}),
    ((2, 3, 4), "a b c -> a b c e", {}),
    ((2, 3, 4), "a b -> a b", {}),
    ((2, 3, 4), "a a c -> a c", {}),
    ((2, 3, 4), "a b c -> a b c", {"e": 3}),
    ((2, 3, 4), "a b c -> a b (c", {}),
    ((2, 3, 4), "a b c) -> a b c", {}),
    ((2, 3, 4), "a ((b) c) -> a b c", {}),
    ((2, 3, 4), "a b c", {}),
    ((2, 3, 4), "a b c -> a b -> c", {}),
    ((2, 3, 4), "a b c -> a b c ...", {}),
    ((2, 3, 4), "a ... ... -> a", {}),
    ((2, 3, 4), "a .. -> a", {}),
    ((2, 3, 4), "a b c -> a b 2", {}),
    ((2, 3, 4), "a b c -> a b 0", {}),
    ((2, 3, 4), "a b c -> a b_ c", {}),
    ((2, 3, 4), "a b c -> a 1b c", {}),
    ((2, 3, 4), "a b c -> a b+c", {}),
    ((2, 3, 4), "(a ...) b -> a b", {}),
    ((2, 3, 4), "(a b c d) ... -> a b c d ...", {}),
    ((2, 3, 4), "a ... -> a", {}),
    ((2, 3, 4), "a b c -> a b c", {"a": "2"}),
    ((2, 3, 4), "a b c -> a b c", {"a": True}),
    ((0, 4), "(a b) c -> a b c", {"a": 2}),
    ((0, 4), "(a b) c -> a b c", {}),
    ((6,), "(a b c) -> c b a", {}),
    ((3,), "1 -> 1", {}),
    ((3,), "1 -> ", {}),
    ((1, 2), "(1) b -> b 1", {}),
    ((), "->", {}),
    ((), "-> 1 ()", {}),
])
def test_patterns_match_torch(shape, pattern, kw):
    _same(shape, pattern, kw)


def test_integer_input_summed_anonymous_axis_promotes_like_torch():
    assert _same((2, 3, 4), "a 1 c -> c a", dtype=np.int32)[2] == "int64"


def test_random_patterns_match_torch():
    rng = random.Random(5)
    names = ["a", "b", "c", "d", "e"]
    ok = 0

    def side(ids):
        toks, pool = [], list(ids)
        rng.shuffle(pool)
        while pool:
            if rng.random() < 0.3 and len(pool) >= 2:
                k = rng.randint(2, min(3, len(pool)))
                toks.append("(" + " ".join(pool[:k]) + ")")
                pool = pool[k:]
            else:
                toks.append(pool.pop(0))
        if rng.random() < 0.15:
            toks.insert(rng.randint(0, len(toks)), rng.choice(["1", "()", "(1)"]))
        return " ".join(toks)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(300):
            shape = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(2, 4))]
            ids = rng.sample(names, rng.randint(0, 4)) + (["..."] if rng.random() < 0.3 else [])
            kw = {n: rng.choice([1, 2, 3]) for n in ids if n != "..." and rng.random() < 0.2}
            ok += _same(shape, side(ids) + " -> " + side(ids), kw, seed=i)[0] == "OK"
    assert 30 < ok < 290


def test_list_of_tensors_is_stacked():
    a, b = np.random.randn(2, 3), np.random.randn(2, 3)
    got = rearrange([ember.tensor(a), ember.tensor(b)], "n x y -> x n y")
    exp = torch.func.rearrange([torch.tensor(a), torch.tensor(b)], "n x y -> x n y")
    np.testing.assert_allclose(got.numpy(), exp.numpy())


def test_permutation_is_a_view_and_gradients_flow():
    x = ember.randn(2, 3, 4)
    y = rearrange(x, "a b c -> c b a")
    assert y.data_ptr() == x.data_ptr()
    x = ember.randn(2, 6, 4, requires_grad=True)
    w = ember.randn(8, 2, 3)
    (rearrange(x, "a (b1 b2) c -> (c b1) a b2", b2=3) * w).sum().backward()
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    (torch.func.rearrange(tx, "a (b1 b2) c -> (c b1) a b2", b2=3) * torch.tensor(w.numpy())).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_axis_name_warnings_match_torch():
    with pytest.warns(FutureWarning, match="'axis' as an axis name"):
        rearrange(ember.randn(2, 3), "axis b -> b axis")


def test_contradicting_length_on_1d_input_raises():
    # deliberate difference: torch ignores c=2 here and returns the input
    from ember._rearrange import DimensionBindError
    with pytest.raises(DimensionBindError, match=r"Dimension sizes to do not match \(6 != 2\)"):
        rearrange(ember.randn(6), "c -> c", c=2)
