"""Session 47: ``ember.backends.mha`` (the MultiheadAttention / TransformerEncoder fast-path switch) and
``F.grid_sample`` at non-finite (NaN / +-inf) grid points, both against PyTorch (CPU)."""
import contextlib

import numpy as np
import pytest

import ember


@contextlib.contextmanager
def _fastpath(lib, value):
    old = lib.backends.mha.get_fastpath_enabled()
    lib.backends.mha.set_fastpath_enabled(value)
    try:
        yield
    finally:
        lib.backends.mha.set_fastpath_enabled(old)


def test_mha_fastpath_switch_api_matches_torch():
    torch = pytest.importorskip("torch")
    import ember.backends.mha as mha   # importable as a submodule, as torch.backends.mha is
    assert mha is ember.backends.mha
    assert mha.get_fastpath_enabled() is torch.backends.mha.get_fastpath_enabled() is True
    for value in (False, 1, True):     # stored as given, as PyTorch does
        with _fastpath(ember, value), _fastpath(torch, value):
            assert ember.backends.mha.get_fastpath_enabled() == torch.backends.mha.get_fastpath_enabled()
            assert type(ember.backends.mha.get_fastpath_enabled()) is type(torch.backends.mha.get_fastpath_enabled())
    assert ember.backends.mha.get_fastpath_enabled() is True


def _torch_state(torch, module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_fastpath_switch_changes_fully_masked_rows_like_torch(fast, need_weights):
    """A batch row whose keys are all padded: the native (fast) path gives NaN, the ordinary one does
    not; which one runs must follow the switch, in ember as in PyTorch."""
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(1)
    x = rng.randn(3, 5, 8).astype(np.float32)
    kpm = rng.rand(3, 5) < 0.3
    kpm[2, :] = True
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    em = ember.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    em.load_state_dict({k: ember.tensor(v) for k, v in _torch_state(torch, tm).items()})
    outs = []
    for lib, m in ((torch, tm), (ember, em)):
        with _fastpath(lib, fast), lib.no_grad():
            xt = lib.tensor(x)
            o, w = m(xt, xt, xt, key_padding_mask=lib.tensor(kpm), need_weights=need_weights)
        outs.append((o.numpy(), None if w is None else w.numpy()))
    (to, tw), (eo, ew) = outs
    np.testing.assert_allclose(eo, to, rtol=1e-5, atol=1e-5)   # assert_allclose: NaNs must coincide
    assert (tw is None) == (ew is None)
    if tw is not None:
        np.testing.assert_allclose(ew, tw, rtol=1e-5, atol=1e-5)
    if not need_weights:
        assert np.isnan(to[2]).all() == fast   # the switch shows in the result


@pytest.mark.parametrize("fast", [True, False])
def test_transformer_encoder_nested_path_follows_switch_like_torch(fast):
    """With the fast path on, an eval TransformerEncoder with a key padding mask runs on nested tensors
    and padded tokens come out 0; off, they are ordinary (nonzero) outputs."""
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(2)
    x = rng.randn(3, 6, 8).astype(np.float32)
    kpm = np.zeros((3, 6), bool)
    kpm[0, 4:] = True
    kpm[1, 2:] = True
    torch.manual_seed(0)
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
    em = ember.nn.TransformerEncoder(ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2)
    em.load_state_dict({k: ember.tensor(v) for k, v in _torch_state(torch, tm).items()})
    tm.eval()
    em.eval()
    outs = []
    for lib, m in ((torch, tm), (ember, em)):
        with _fastpath(lib, fast), lib.no_grad():
            outs.append(m(lib.tensor(x), src_key_padding_mask=lib.tensor(kpm)).numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-5)
    assert (np.abs(outs[1][0, 4:]).max() == 0) == fast


# ---- grid_sample at non-finite grid points ------------------------------------------------------

_BAD = [np.nan, np.inf, -np.inf]


def _grid_with_nonfinite(rng, shape):
    """Random grid points (some out of [-1, 1]) with about a third of the coordinates NaN / +-inf."""
    g = rng.uniform(-1.3, 1.3, size=shape)
    pick = rng.rand(*shape) < 0.35
    g[pick] = rng.choice(_BAD, size=int(pick.sum()))
    return g


def _both(torch, x, g, dtype, **kw):
    t = torch.nn.functional.grid_sample(torch.tensor(x, dtype=getattr(torch, dtype)),
                                        torch.tensor(g, dtype=getattr(torch, dtype)), **kw).numpy()
    e = ember.nn.functional.grid_sample(ember.tensor(x.astype(dtype)), ember.tensor(g.astype(dtype)), **kw).numpy()
    return t, e


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_4d_nonfinite_grid_matches_torch(mode, padding_mode, align_corners, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(3)
    x = rng.randn(2, 3, 4, 5)
    g = _grid_with_nonfinite(rng, (2, 6, 7, 2))
    t, e = _both(torch, x, g, dtype, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    assert np.isfinite(g).all(-1).any() and not np.isfinite(g).all()
    np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_5d_nonfinite_grid_matches_torch(mode, padding_mode, align_corners):
    """5-D input takes PyTorch's scalar kernel: NaN clips to the last pixel and zeros padding gives 0."""
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(4)
    x = rng.randn(2, 2, 3, 4, 5)
    g = _grid_with_nonfinite(rng, (2, 3, 4, 5, 3))
    t, e = _both(torch, x, g, "float64", mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("mode,padding_mode", [("bilinear", "zeros"), ("bilinear", "border"),
                                               ("bicubic", "reflection"), ("nearest", "border")])
def test_grid_sample_nonfinite_grid_compiled_matches_eager(mode, padding_mode):
    rng = np.random.RandomState(5)
    x = ember.tensor(rng.randn(1, 2, 4, 5).astype(np.float32))
    g = ember.tensor(_grid_with_nonfinite(rng, (1, 5, 6, 2)).astype(np.float32))

    def f(x, g):
        return ember.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=False)

    np.testing.assert_allclose(ember.compile(f)(x, g).numpy(), f(x, g).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode,padding_mode,bad", [
    ("bilinear", "zeros", np.nan), ("bilinear", "zeros", -np.inf), ("bilinear", "border", np.inf),
    ("nearest", "border", np.nan), ("nearest", "reflection", np.inf), ("bicubic", "zeros", np.nan),
    ("bicubic", "border", np.inf)])
def test_grid_sample_nonfinite_grid_gradients_match_torch(mode, padding_mode, bad):
    """Gradients w.r.t. input and grid, NaNs included, match PyTorch's. (Bilinear border with a NaN
    point and bilinear reflection with any non-finite one are left out: PyTorch 2.13's CPU backward
    crashes (segfault) on them.)"""
    torch = pytest.importorskip("torch")
    rng = np.random.RandomState(6)
    x = rng.randn(1, 2, 4, 5)
    g = rng.uniform(-1.2, 1.2, size=(1, 3, 4, 2))
    g[0, 1, 2, 0] = bad
    g[0, 2, 0, 1] = bad
    up = rng.randn(1, 2, 3, 4)
    grads = []
    for lib in (torch, ember):
        xt = lib.tensor(x, requires_grad=True)
        gt = lib.tensor(g, requires_grad=True)
        out = lib.nn.functional.grid_sample(xt, gt, mode=mode, padding_mode=padding_mode, align_corners=False)
        (out * lib.tensor(up)).sum().backward()
        grads.append((out.detach().numpy(), xt.grad.numpy(), gt.grad.numpy()))
    for e, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-12)
