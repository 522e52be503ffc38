"""Loss gradients against PyTorch: binary_cross_entropy(_with_logits) target gradients, loss
weights that torch refuses to differentiate, nll_loss with a zero total weight."""
import numpy as np
import pytest

import ember


def _both(fn):
    torch = pytest.importorskip("torch")
    return fn(torch), fn(ember)


def _np(t):
    return None if t is None else t.detach().numpy()


def test_bce_with_logits_pos_weight_target_grad_large_logits():
    """The target gradient logsig(-x) - pw * logsig(x) stays finite where sigmoid(x) rounds to
    1 in float32 (log(1 - sigmoid(x)) was -inf)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-40, 40, 50), rng.normal(size=50)]).astype(np.float32)
    t = rng.uniform(size=x.size).astype(np.float32)
    pw = rng.uniform(0.2, 3, size=x.size).astype(np.float32)
    w = rng.uniform(0.2, 2, size=x.size).astype(np.float32)

    def run(lib, red, weight):
        X, T = lib.tensor(x, requires_grad=True), lib.tensor(t, requires_grad=True)
        W = lib.tensor(w) if weight else None
        loss = lib.nn.functional.binary_cross_entropy_with_logits(X, T, W, pos_weight=lib.tensor(pw),
                                                                  reduction=red)
        loss.backward(lib.ones_like(loss))
        return _np(X.grad), _np(T.grad)

    # (the gradients only: torch's float32 forward (1 - t) * x - log_weight * logsig(x) cancels
    # for large -x, where ember's softplus form is the more accurate one)
    for red in ("mean", "sum", "none"):
        for weight in (False, True):
            ref, got = _both(lambda lib: run(lib, red, weight))
            assert np.isfinite(got[1]).all()
            for a, b in zip(ref, got):
                np.testing.assert_allclose(b, a, rtol=2e-6, atol=1e-7)


def test_bce_with_logits_pos_weight_target_grad_double_backward():
    """The stable target gradient is differentiable again (float64 against torch)."""
    rng = np.random.default_rng(1)
    x, t = rng.normal(size=8) * 5, rng.uniform(size=8)
    pw = rng.uniform(0.5, 2, size=8)

    def run(lib):
        X, T = lib.tensor(x, requires_grad=True), lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy_with_logits(X, T, pos_weight=lib.tensor(pw))
        gt, = lib.autograd.grad(loss, [T], create_graph=True)
        gx, = lib.autograd.grad((gt * lib.tensor(np.arange(8.0))).sum(), [X])
        return _np(gt), _np(gx)

    ref, got = _both(run)
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("case", ["bcel_weight", "bcel_pos_weight", "bce_weight", "nll_weight_1d",
                                  "nll_weight_2d", "nll_weight_4d", "cross_entropy_weight"])
def test_loss_weight_requiring_grad_refused_like_torch(case):
    """torch has no derivative for a loss's weight / pos_weight and raises at the call when
    one requires grad (under grad mode); without grad mode the call runs."""
    rng = np.random.default_rng(2)
    x3 = rng.normal(size=3).astype(np.float32)
    t3 = rng.uniform(size=3).astype(np.float32)
    w3 = rng.uniform(0.5, 2, size=3).astype(np.float32)

    def call(lib):
        F = lib.nn.functional
        w = lib.tensor(w3, requires_grad=True)
        if case == "bcel_weight":
            return F.binary_cross_entropy_with_logits(lib.tensor(x3, requires_grad=True), lib.tensor(t3), w)
        if case == "bcel_pos_weight":
            return F.binary_cross_entropy_with_logits(lib.tensor(x3), lib.tensor(t3), pos_weight=w)
        if case == "bce_weight":
            return F.binary_cross_entropy(lib.tensor(t3), lib.tensor(t3[::-1].copy()), w)
        if case == "nll_weight_1d":
            return F.nll_loss(lib.tensor(x3, requires_grad=True), lib.tensor(1), w)
        if case == "nll_weight_2d":
            return F.nll_loss(lib.tensor(np.stack([x3, x3])), lib.tensor([0, 2]), w)
        if case == "nll_weight_4d":
            x = lib.tensor(rng.normal(size=(2, 3, 2, 2)).astype(np.float32))
            return F.nll_loss(x, lib.tensor(np.zeros((2, 2, 2), np.int64)), w)
        return F.cross_entropy(lib.tensor(np.stack([x3, x3])), lib.tensor([0, 2]), w, label_smoothing=0.1)

    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as ref:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(ember)
    assert str(got.value) == str(ref.value)
    with ember.no_grad():
        assert np.isfinite(call(ember).numpy()).all()


def test_bce_target_grad_unclamped_like_torch():
    """binary_cross_entropy's target gradient is -logit(x), +-inf at x = 0 / 1 (the -100 clamp
    bounds the loss only); the input gradient's mean divides last, as torch."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(size=200), [0.0, 1.0, 0.5, 1e-30]]).astype(np.float32)
    t = rng.uniform(size=x.size).astype(np.float32)
    w = rng.uniform(0.5, 2, size=x.size).astype(np.float32)

    def run(lib, red, weight):
        X, T = lib.tensor(x, requires_grad=True), lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(X, T, lib.tensor(w) if weight else None, reduction=red)
        loss.backward(lib.ones_like(loss))
        return _np(X.grad), _np(T.grad)

    for red in ("mean", "sum"):
        for weight in (False, True):
            (rx, rt), (gx, gt) = _both(lambda lib: run(lib, red, weight))
            np.testing.assert_array_equal(gx, rx)
            assert np.array_equal(np.isinf(gt), np.isinf(rt)) and np.array_equal(np.signbit(gt), np.signbit(rt))
            np.testing.assert_allclose(gt, rt, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3,), (4, 3), (2, 3, 2, 2)])
@pytest.mark.parametrize("kind", ["weights_zero", "all_ignored", "negative_weights_sum_zero"])
def test_nll_loss_zero_total_weight_like_torch(shape, kind):
    """reduction='mean' with total weight 0: the value is s / 0 (NaN or inf) and a selected
    entry's gradient w * (-g / 0) (NaN for w = 0, inf otherwise); ignored entries stay 0."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=shape)
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = rng.integers(0, 2, size=tshape)
    ignore, weight = -100, None
    if kind == "weights_zero":
        weight = np.array([0.0, 0.0, 1.0])
    elif kind == "all_ignored":
        t, ignore = np.full(tshape, 1), 1
    else:
        t, weight = np.zeros(tshape, np.int64), np.array([1.0, -1.0, 2.0])
        t.reshape(-1)[1::2] = 1
        if t.size % 2:
            t.reshape(-1)[-1] = 2
            ignore = 2

    def run(lib):
        X = lib.tensor(x, requires_grad=True)
        W = None if weight is None else lib.tensor(weight)
        loss = lib.nn.functional.nll_loss(X, lib.tensor(t), W, ignore_index=ignore)
        loss.backward()
        return _np(loss), _np(X.grad)

    (rl, rg), (gl, gg) = _both(run)
    assert not np.isfinite(rl) and np.array_equal(gl, rl, equal_nan=True)
    if (t != ignore).any():            # (all ignored: nothing written, every entry 0)
        assert not np.isfinite(rg).all()
    np.testing.assert_array_equal(gg, rg)


@pytest.mark.parametrize("red", ["none", "sum"])
def test_nll_loss_ignored_entries_zero_under_nan_grad(red):
    """An ignored target's gradient entry is never written by torch: 0 even when the incoming
    gradient is NaN (0 * NaN elsewhere)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 3))
    t = np.array([0, 2, 1, 2, 0])

    def run(lib):
        X = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.nll_loss(X, lib.tensor(t), lib.tensor([1.0, 0.0, 2.0], dtype=lib.float64), ignore_index=2,
                                          reduction=red)
        loss.backward(lib.full(tuple(loss.shape), float("nan"), dtype=lib.float64))
        return _np(X.grad)

    ref, got = _both(run)
    np.testing.assert_array_equal(got, ref)


def test_compiled_bce_target_grad_and_nll_zero_total_like_torch():
    """The prims decompositions of ``_bce_backward`` / ``_nll_loss_backward`` (the compiled
    path) agree with torch too: unclamped -logit target gradient, NaN for a weight-0 class
    under a zero total weight, 0 for an ignored target."""
    rng = np.random.default_rng(6)
    p = np.concatenate([[0.0, 1.0], rng.uniform(0.05, 0.95, 6)])
    t = rng.uniform(size=8)
    x = rng.normal(size=(4, 3))

    def losses(lib):
        F = lib.nn.functional
        w = lib.tensor([0.0, 0.0, 1.0], dtype=lib.float64)
        tg = lib.tensor([0, 1, 0, 2])

        def f(P, T, X):
            return F.binary_cross_entropy(P, T, reduction="sum"), F.nll_loss(X, tg, w, ignore_index=2)
        fn = ember.compile(f) if lib is ember else f          # torch: eager reference
        P, T, X = (lib.tensor(a, requires_grad=True) for a in (p, t, x))
        a, b = fn(P, T, X)
        (a + b).backward()                  # (T gets a's gradient only, X b's)
        return _np(T.grad), _np(X.grad)

    ref, got = _both(losses)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_array_equal(got[1], ref[1])
