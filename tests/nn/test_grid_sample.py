"""F.grid_sample and F.affine_grid against PyTorch: 4-D input for every mode x padding_mode x
align_corners (float64 and float32), 5-D input (bilinear / nearest), unit spatial dims; values and the
gradients w.r.t. input, grid and theta; compiled against eager (static and dynamic shapes); argument
errors and warnings."""
import itertools
import warnings

import numpy as np
import pytest

import ember
from oracle import assert_close, needs_torch, torch

F = ember.nn.functional

MODES = ["bilinear", "nearest", "bicubic"]
PADS = ["zeros", "border", "reflection"]


def _source_coords(g, in_sp, align_corners):
    """The unnormalised source coordinate along each spatial axis (grid[..., k] indexes axis nd-1-k)."""
    nd = g.shape[-1]
    out = []
    for k in range(nd):
        n = in_sp[nd - 1 - k]
        c = (g[..., k] + 1) / 2 * (n - 1) if align_corners else ((g[..., k] + 1) * n - 1) / 2
        out.append((n, c))
    return out


def _grid(rng, shape, in_sp, align_corners, lo=-1.3, hi=1.3):
    """Uniform grid in [lo, hi] (so every padding mode matters), redrawn where a source coordinate lies
    within 1e-3 pixel of a multiple of 0.5: at integers the bilinear corners, the border clip and the
    align_corners reflection switch, at half-integers nearest rounding and the align_corners=False
    reflection fold -- the values or grid-gradients jump there, and a last-bit difference from torch
    could fall on the other side. Any draw is then safe at any tolerance below."""
    g = rng.uniform(lo, hi, shape)
    for _ in range(1000):
        bad = np.zeros(shape[:-1], dtype=bool)
        for n, c in _source_coords(g, in_sp, align_corners):
            if align_corners and n == 1:
                continue          # the coordinate is identically 0 there (no dependence on the grid)
            bad |= np.abs(2 * c - np.round(2 * c)) < 2e-3
        if not bad.any():
            return g
        g[bad] = rng.uniform(lo, hi, (int(bad.sum()), shape[-1]))
    raise AssertionError("could not draw a grid away from the discontinuities")


def _close(actual, expected, dtype, what):
    """float64: near-exact; float32: relative to the largest magnitude (grid-gradients scale with size)."""
    e = expected.detach().numpy()
    if dtype == "float64":
        rtol, atol = 1e-9, 1e-9 * max(1.0, float(np.abs(e).max(initial=0)))
    else:
        rtol, atol = 1e-4, 1e-4 * max(1.0, float(np.abs(e).max(initial=0)))
    assert_close(actual, expected, rtol=rtol, atol=atol, msg=what)


def _run_both(x, g, dtype, rng, **kw):
    """grid_sample in ember and torch on the same values; compare the output and the gradients of
    sum(out * random cotangent) w.r.t. input and grid."""
    xe = ember.tensor(x.astype(dtype), requires_grad=True)
    ge = ember.tensor(g.astype(dtype), requires_grad=True)
    xt = torch.tensor(x.astype(dtype), requires_grad=True)
    gt = torch.tensor(g.astype(dtype), requires_grad=True)
    out_e = F.grid_sample(xe, ge, **kw)
    out_t = torch.nn.functional.grid_sample(xt, gt, **kw)
    _close(out_e, out_t, dtype, "output")
    cot = rng.standard_normal(tuple(out_t.shape)).astype(dtype)
    (out_e * ember.tensor(cot)).sum().backward()
    (out_t * torch.tensor(cot)).sum().backward()
    _close(xe.grad, xt.grad, dtype, "grad input")
    _close(ge.grad, gt.grad, dtype, "grad grid")
    return out_e, ge.grad


@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADS)
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_4d_matches_torch(mode, padding_mode, align_corners, dtype):
    rng = np.random.default_rng()
    in_sp = (5, 7)
    x = rng.standard_normal((2, 3) + in_sp)
    g = _grid(rng, (2, 4, 6, 2), in_sp, align_corners)
    _, ggrad = _run_both(x, g, dtype, rng, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    if mode == "nearest":
        assert not np.any(ggrad.numpy())      # torch: a zero (not missing) gradient for the grid


@needs_torch
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADS)
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_unit_spatial_dim_matches_torch(mode, padding_mode, align_corners):
    """A size-1 axis: align_corners=True reflection has nothing to fold (twice_low == twice_high)."""
    rng = np.random.default_rng()
    in_sp = (1, 4)
    x = rng.standard_normal((2, 2) + in_sp)
    g = _grid(rng, (2, 3, 5, 2), in_sp, align_corners)
    _run_both(x, g, "float64", rng, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@needs_torch
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", PADS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_5d_matches_torch(mode, padding_mode, align_corners):
    rng = np.random.default_rng()
    in_sp = (3, 4, 5)
    x = rng.standard_normal((2, 2) + in_sp)
    g = _grid(rng, (2, 2, 3, 4, 3), in_sp, align_corners)
    _run_both(x, g, "float64", rng, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@needs_torch
@pytest.mark.parametrize("mode,padding_mode,align_corners", [("bilinear", "reflection", False),
                                                             ("bilinear", "border", True),
                                                             ("nearest", "zeros", False)])
def test_grid_sample_5d_float32_matches_torch(mode, padding_mode, align_corners):
    rng = np.random.default_rng()
    in_sp = (4, 1, 3)
    x = rng.standard_normal((1, 3) + in_sp)
    g = _grid(rng, (1, 3, 2, 2, 3), in_sp, align_corners)
    _run_both(x, g, "float32", rng, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@needs_torch
def test_grid_sample_noncontiguous_and_empty_match_torch():
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 3, 4, 5))
    g = _grid(rng, (2, 3, 4, 2), (4, 5), False)
    gt = np.ascontiguousarray(g.transpose(0, 2, 1, 3))
    got = F.grid_sample(ember.tensor(x).transpose(2, 3), ember.tensor(gt).transpose(1, 2), mode="bicubic",
                        align_corners=False)
    want = torch.nn.functional.grid_sample(torch.tensor(x).transpose(2, 3), torch.tensor(g), mode="bicubic",
                                           align_corners=False)
    _close(got, want, "float64", "non-contiguous")
    for xs, gs in [((0, 3, 4, 5), (0, 2, 2, 2)), ((1, 3, 4, 5), (1, 0, 2, 2)), ((1, 0, 4, 5), (1, 2, 2, 2))]:
        out = F.grid_sample(ember.tensor(rng.standard_normal(xs)), ember.tensor(rng.uniform(-1, 1, gs)),
                            align_corners=True)
        assert tuple(out.shape) == tuple(torch.nn.functional.grid_sample(
            torch.zeros(xs, dtype=torch.float64), torch.zeros(gs, dtype=torch.float64), align_corners=True).shape)


def test_grid_sample_nearest_grid_only_gradient_is_zero():
    """Only the grid requires grad: the output still has a graph and the grid gets zeros (as torch)."""
    rng = np.random.default_rng()
    g = ember.tensor(rng.uniform(-1.3, 1.3, (1, 3, 3, 2)), requires_grad=True)
    out = F.grid_sample(ember.tensor(rng.standard_normal((1, 2, 4, 4))), g, mode="nearest",
                        align_corners=False)
    assert out.requires_grad
    out.sum().backward()
    assert g.grad is not None and not np.any(g.grad.numpy())


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("align_corners", [False, True])
def test_identity_affine_grid_round_trip(nd, align_corners):
    """The identity transform samples every pixel at its own centre: bilinear and nearest return the input."""
    rng = np.random.default_rng()
    shape = (2, 3) + ((4, 6) if nd == 2 else (3, 4, 5))
    x = ember.tensor(rng.standard_normal(shape))
    theta = ember.tensor(np.tile(np.eye(nd, nd + 1), (2, 1, 1)))
    grid = F.affine_grid(theta, shape, align_corners=align_corners)
    for mode in ("bilinear", "nearest"):
        out = F.grid_sample(x, grid, mode=mode, align_corners=align_corners)
        np.testing.assert_allclose(out.numpy(), x.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_grid_sample_reduced_precision_keeps_dtype(dtype):
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    g = _grid(rng, (1, 3, 3, 2), (4, 5), False, -1.0, 1.0).astype(np.float32)
    ref = F.grid_sample(ember.tensor(x), ember.tensor(g), align_corners=False)
    dt = getattr(ember, dtype)
    got = F.grid_sample(ember.tensor(x).to(dt), ember.tensor(g).to(dt), align_corners=False)
    assert got.dtype is dt
    np.testing.assert_allclose(got.to(ember.float32).numpy(), ref.numpy(), rtol=0.05, atol=0.05)


# ---------------------------------------------------------------------- affine_grid
@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (3, 1, 1, 6), (2, 2, 3, 4, 5), (2, 1, 2, 1, 3)])
def test_affine_grid_matches_torch(size, align_corners, dtype):
    rng = np.random.default_rng()
    nd = len(size) - 2
    theta = rng.standard_normal((size[0], nd, nd + 1)).astype(dtype)
    te, tt = ember.tensor(theta, requires_grad=True), torch.tensor(theta, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the unit-size warning with align_corners=True
        got = F.affine_grid(te, size, align_corners=align_corners)
        want = torch.nn.functional.affine_grid(tt, size, align_corners=align_corners)
    _close(got, want, dtype, "grid")
    cot = rng.standard_normal(tuple(want.shape)).astype(dtype)
    (got * ember.tensor(cot)).sum().backward()
    (want * torch.tensor(cot)).sum().backward()
    _close(te.grad, tt.grad, dtype, "grad theta")


@needs_torch
def test_affine_grid_then_grid_sample_matches_torch():
    """The usual spatial-transformer pipeline, gradients w.r.t. theta through both functions."""
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 3, 6, 5))
    theta = np.tile(np.eye(2, 3), (2, 1, 1)) * 1.2 + rng.uniform(-0.2, 0.2, (2, 2, 3))
    xe, te = ember.tensor(x, requires_grad=True), ember.tensor(theta, requires_grad=True)
    xt, tt = torch.tensor(x, requires_grad=True), torch.tensor(theta, requires_grad=True)
    oe = F.grid_sample(xe, F.affine_grid(te, (2, 3, 4, 7), align_corners=False), padding_mode="border",
                       align_corners=False)
    ot = torch.nn.functional.grid_sample(xt, torch.nn.functional.affine_grid(tt, (2, 3, 4, 7), align_corners=False),
                                         padding_mode="border", align_corners=False)
    _close(oe, ot, "float64", "output")
    oe.square().sum().backward()
    ot.square().sum().backward()
    _close(xe.grad, xt.grad, "float64", "grad input")
    _close(te.grad, tt.grad, "float64", "grad theta")


# ---------------------------------------------------------------------- compiled
def _stn(x, theta, offset):
    grid = F.affine_grid(theta, x.shape, align_corners=False) + offset
    a = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    b = F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return a.sin() + a * b


def _bicubic(x, grid):
    return F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=True) * 2


def _trilinear(x, grid):
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True).square()


def _eager_and_compiled(fn, cfn, arrays):
    res = []
    for f in (fn, cfn):
        leaves = [ember.tensor(a, requires_grad=True) for a in arrays]
        out = f(*leaves)
        out.sum().backward()
        res.append([out.detach().numpy()] + [t.grad.numpy() for t in leaves])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)


def _stn_args(rng, shape):
    theta = np.tile(np.eye(2, 3), (shape[0], 1, 1)) + rng.uniform(-0.3, 0.3, (shape[0], 2, 3))
    return [rng.standard_normal(shape), theta, rng.uniform(-0.2, 0.2, (shape[0],) + shape[2:] + (2,))]


def test_compiled_matches_eager():
    """The default (inductor) backend: values and gradients w.r.t. input, theta and the grid offset."""
    ember.dynamo.reset()
    rng = np.random.default_rng()
    _eager_and_compiled(_stn, ember.compile(_stn), _stn_args(rng, (2, 3, 5, 6)))
    assert ember.dynamo.counters["compiled"] >= 1
    assert ember.dynamo.counters["eager_fallback"] == 0 and ember.dynamo.counters["internal_errors"] == 0


def test_compiled_dynamic_shapes_match_eager():
    """dynamic=True traces with symbolic sizes (affine_grid's linspace, the unnormalisation, the flat
    indices and the padding then come from size tensors); a second shape reuses the trace."""
    ember.dynamo.reset()
    rng = np.random.default_rng()
    fns = [(f, ember.compile(f, dynamic=True, backend="aot_eager")) for f in (_stn, _bicubic, _trilinear)]
    for shape in [(2, 3, 5, 6), (3, 2, 4, 7)]:
        _eager_and_compiled(*fns[0], _stn_args(rng, shape))
        _eager_and_compiled(*fns[1], [rng.standard_normal(shape),
                                      _grid(rng, (shape[0], 3, 4, 2), shape[2:], True)])
        shape3 = (shape[0], 2, 3) + shape[2:]
        _eager_and_compiled(*fns[2], [rng.standard_normal(shape3),
                                      _grid(rng, (shape[0], 2, 3, 2, 3), shape3[2:], True)])
    assert ember.dynamo.counters["compiled"] >= 3
    assert ember.dynamo.counters["eager_fallback"] == 0 and ember.dynamo.counters["internal_errors"] == 0


# ---------------------------------------------------------------------- errors and warnings
def _t(*shape, dtype=None):
    return ember.ones(*shape, dtype=dtype or ember.float32)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(mode="linear"), ValueError, "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'linear'"),
    (dict(padding_mode="reflect"), ValueError, "expected padding_mode to be 'zeros', 'border', or 'reflection'"),
])
def test_grid_sample_bad_strings(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        F.grid_sample(_t(1, 2, 3, 3), _t(1, 2, 2, 2), align_corners=False, **kwargs)


@pytest.mark.parametrize("inp,grid,mode,match", [
    ((2, 2, 3, 3), (1, 2, 2, 2), "bilinear", "same batch size"),
    ((1, 2, 3, 3), (1, 2, 2, 3), "bilinear", "grid to have size 2 in last dimension"),
    ((1, 2, 3, 3, 3), (1, 2, 2, 2, 2), "nearest", "grid to have size 3 in last dimension"),
    ((1, 2, 3, 3, 3), (1, 2, 2, 2, 3), "bicubic", "bicubic interpolation only supports 4D input"),
    ((1, 2, 3, 3), (1, 2, 2, 2, 2), "bilinear", "4D or 5D input and grid with same number of dimensions"),
    ((2, 3, 3), (2, 2, 2), "bilinear", "4D or 5D input and grid with same number of dimensions"),
    ((1, 2, 0, 3), (1, 2, 2, 2), "bilinear", "non-empty spatial dimensions.*dimension 2 being empty"),
])
def test_grid_sample_bad_shapes(inp, grid, mode, match):
    with pytest.raises(RuntimeError, match=match):
        F.grid_sample(_t(*inp), _t(*grid), mode=mode, align_corners=False)


def test_grid_sample_bad_dtypes():
    with pytest.raises(RuntimeError, match="same dtype"):
        F.grid_sample(_t(1, 2, 3, 3), _t(1, 2, 2, 2, dtype=ember.float64), align_corners=False)
    with pytest.raises(RuntimeError, match="floating point"):
        F.grid_sample(_t(1, 2, 3, 3, dtype=ember.int64), _t(1, 2, 2, 2, dtype=ember.int64), align_corners=False)
    with pytest.raises(TypeError, match="'grid' must be Tensor"):
        F.grid_sample(_t(1, 2, 3, 3), np.zeros((1, 2, 2, 2)), align_corners=False)


@pytest.mark.parametrize("theta,size,exc,match", [
    ((2, 3, 3), (2, 3, 4, 4), ValueError, "2D affine matrices of shape Nx2x3"),
    ((2, 2, 3), (2, 3, 4, 4, 4), ValueError, "3D affine matrices of shape Nx3x4"),
    ((2, 2, 3), (2, 3, 4), NotImplementedError, "only supports 4D and 5D sizes"),
    ((2, 2, 3), (2, 3, 0, 4), ValueError, "non-zero, positive output size"),
    ((1, 2, 3), (2, 3, 4, 4), RuntimeError, "expected theta to have batch size"),
])
def test_affine_grid_bad_args(theta, size, exc, match):
    with pytest.raises(exc, match=match):
        F.affine_grid(_t(*theta), size, align_corners=False)


def test_affine_grid_integer_theta():
    with pytest.raises(ValueError, match="theta to have floating point type"):
        F.affine_grid(_t(1, 2, 3, dtype=ember.int64), (1, 1, 2, 2), align_corners=False)


def test_default_align_corners_warns_and_is_false():
    x, g = ember.randn(1, 2, 3, 4), ember.rand(1, 2, 2, 2) * 2 - 1
    theta = ember.randn(1, 2, 3)
    for fn, args in [(F.grid_sample, (x, g)), (F.affine_grid, (theta, (1, 2, 3, 4)))]:
        with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
            got = fn(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            want = fn(*args, align_corners=False)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.warns(UserWarning, match="unit-size grids"):
        F.affine_grid(theta, (1, 2, 1, 4), align_corners=True)


def test_all_modes_exported():
    assert {"grid_sample", "affine_grid"} <= set(F.__all__)
    for mode, pad, ac in itertools.product(MODES, PADS, [False, True]):
        out = F.grid_sample(ember.randn(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), mode=mode, padding_mode=pad,
                            align_corners=ac)
        assert tuple(out.shape) == (1, 1, 1, 1)
