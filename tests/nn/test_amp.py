"""ember.autocast and ember.amp.GradScaler against torch.autocast / torch.amp.GradScaler (cpu)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch


def _pair(*shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(a), torch.tensor(a) if torch is not None else None


@needs_torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_region_dtypes_values_and_gradients_match_torch(dtype):
    (xe, xt), (we, wt) = _pair(6, 8), _pair(8, 5, seed=1)
    we.requires_grad_(), wt.requires_grad_()
    ce, ct = ember.nn.Linear(5, 4), torch.nn.Linear(5, 4)
    with torch.no_grad():
        ct.weight.copy_(torch.tensor(ce.weight.detach().numpy())), ct.bias.copy_(torch.tensor(ce.bias.detach().numpy()))
    target = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    outs = {}
    for lib, x, w, lin in ((ember, xe, we, ce), (torch, xt, wt, ct)):
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            h = x @ w                                  # lower precision
            y = lin(h.relu())                          # lower precision (linear)
            loss = lib.nn.functional.mse_loss(y, lib.tensor(target))   # float32 (cpu fp32 list)
            dbl = x.double() @ w.double()               # float64 is not eligible: stays float64
        loss.backward()
        outs[lib.__name__] = (h, y, loss, dbl, w.grad, lin.weight.grad)
    for e, t in zip(outs["ember"], outs["torch"]):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(), rtol=2e-2, atol=2e-2)
    assert we.grad.dtype is ember.float32           # the cast is recorded: float32 leaves get float32 grads


def test_regions_nest_restore_and_are_per_device_type():
    x = ember.randn(3, 3)
    with ember.autocast("cpu"):
        assert (x @ x).dtype is ember.bfloat16 and ember.is_autocast_enabled("cpu")
        with ember.autocast("cpu", dtype=ember.float16):
            assert (x @ x).dtype is ember.float16
        with ember.autocast("cpu", enabled=False):
            assert (x @ x).dtype is ember.float32
        assert (x @ x).dtype is ember.bfloat16
        assert not ember.is_autocast_enabled("cuda")
    assert (x @ x).dtype is ember.float32 and not ember.is_autocast_enabled("cpu")

    @ember.autocast("cpu")
    def f(a):
        return a @ a
    assert f(x).dtype is ember.bfloat16
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ember.autocast("tpu")
    # an unsupported dtype warns and disables the region (PyTorch's behaviour, not an error)
    with pytest.warns(UserWarning, match="target dtype is not supported. Disabling autocast"):
        ember.autocast("cpu", dtype=ember.float64)


_UNSUPPORTED_MSG = ("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                    "CPU Autocast only supports dtypes of {lib}.bfloat16, {lib}.float16 currently.")


def _unsupported_region(lib, spelling, dtype):
    return {"autocast": lambda: lib.autocast("cpu", dtype=dtype),
            "amp.autocast": lambda: lib.amp.autocast("cpu", dtype=dtype),
            "cpu.amp.autocast": lambda: lib.cpu.amp.autocast(dtype=dtype)}[spelling]()


def _observe_unsupported(lib, spelling, dtype_name, x, w):
    """What a region with an unsupported dtype does, inside an outer bfloat16 region: its
    warnings, the state inside, the dtype of a matmul inside, and the state restored after."""
    import warnings
    seen = {}
    with lib.autocast("cpu"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            region = _unsupported_region(lib, spelling, getattr(lib, dtype_name))
        seen["warnings"] = [(c.category, str(c.message)) for c in caught if c.category is UserWarning]
        with region:
            y = x @ w
            seen["inside"] = (lib.is_autocast_enabled("cpu"), str(lib.get_autocast_dtype("cpu")).split(".")[1],
                              str(y.dtype).split(".")[1])
            loss = (y * y).sum()
        loss.backward()
        seen["after"] = (lib.is_autocast_enabled("cpu"), str(lib.get_autocast_dtype("cpu")).split(".")[1],
                         str((x @ w).dtype).split(".")[1])
    seen["outside"] = lib.is_autocast_enabled("cpu")
    return seen, y, w.grad


@needs_torch
@pytest.mark.parametrize("spelling", ["autocast", "amp.autocast", "cpu.amp.autocast"])
@pytest.mark.parametrize("dtype_name", ["float64", "float32", "int32"])
def test_unsupported_dtype_warns_and_disables_like_torch(spelling, dtype_name):
    (xe, xt), (we, wt) = _pair(5, 7, seed=3), _pair(7, 4, seed=4)
    we.requires_grad_(), wt.requires_grad_()
    got, ye, ge = _observe_unsupported(ember, spelling, dtype_name, xe, we)
    want, yt, gt = _observe_unsupported(torch, spelling, dtype_name, xt, wt)
    assert got["warnings"] == [(UserWarning, _UNSUPPORTED_MSG.format(lib="ember"))]
    assert want["warnings"] == [(UserWarning, _UNSUPPORTED_MSG.format(lib="torch"))]
    assert got["inside"] == want["inside"] == (False, dtype_name, "float32")
    assert got["after"] == want["after"] == (True, "bfloat16", "bfloat16")
    assert got["outside"] is want["outside"] is False
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-5, atol=1e-5)


def test_unsupported_dtype_decorator_warns_once_and_runs_disabled():
    import warnings
    x = ember.randn(3, 3)
    with pytest.warns(UserWarning, match="Disabling autocast"):
        deco = ember.autocast("cpu", dtype=ember.float64)

    @deco
    def f(a):
        return a @ a, ember.is_autocast_enabled("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no warning per call, as in PyTorch
        with ember.autocast("cpu"):
            y, on = f(x)
    assert y.dtype is ember.float32 and on is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # disabled regions are not checked: no warning
        with ember.autocast("cpu", dtype=ember.float64, enabled=False):
            assert not ember.is_autocast_enabled("cpu")


def test_compiled_code_follows_the_region():
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    g = ember.compile(lambda x, w: (x @ w) * 2)
    assert g(x, w).dtype is ember.float32
    with ember.autocast("cpu"):
        got = g(x, w)                              # traced with the region's casts (its own entry)
    assert got.dtype is ember.bfloat16
    assert g(x, w).dtype is ember.float32

    def inner(x, w):
        with ember.autocast("cpu"):
            y = x @ w
        return y, x @ w
    a, b = ember.compile(inner)(x, w)
    assert a.dtype is ember.bfloat16 and b.dtype is ember.float32


def _train(lib, scaler_kw, steps, poison=()):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 1))
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3 for p in model.parameters()]
    with lib.no_grad():
        for p, a in zip(model.parameters(), init):
            p.copy_(lib.tensor(a))
    opt = lib.optim.SGD(model.parameters(), lr=0.05)
    scaler = lib.amp.GradScaler("cpu", **scaler_kw)
    data = [(rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal((16, 1)).astype(np.float32))
            for _ in range(steps)]
    scales, losses = [], []
    for i, (x, t) in enumerate(data):
        opt.zero_grad()
        with lib.autocast("cpu"):
            loss = lib.nn.functional.mse_loss(model(lib.tensor(x)), lib.tensor(t))
        scaled = scaler.scale(loss)
        if i in poison:
            scaled = scaled * float("inf")           # an overflowing step: skipped, scale backs off
        scaled.backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(float(loss))
    return scales, losses, [p.detach().float().numpy() for p in model.parameters()]


@needs_torch
def test_grad_scaler_matches_torch():
    kw = dict(init_scale=2.0 ** 10, growth_interval=3)
    se, le, pe = _train(ember, kw, 8, poison=(2, 5))
    st, lt, pt = _train(torch, kw, 8, poison=(2, 5))
    assert se == st
    np.testing.assert_allclose(le, lt, rtol=3e-2, atol=3e-3)
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a, b, rtol=3e-2, atol=3e-3)


def test_grad_scaler_errors_and_state():
    p = ember.nn.Parameter(ember.randn(3))
    opt = ember.optim.SGD([p], lr=0.1)
    s = ember.amp.GradScaler("cpu", init_scale=8.0)
    (s.scale(p.sum() * 2)).backward()
    np.testing.assert_allclose(p.grad.numpy(), np.full(3, 16.0))
    s.unscale_(opt)
    np.testing.assert_allclose(p.grad.numpy(), np.full(3, 2.0))
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.step(opt)
    s.update()
    assert s.state_dict()["scale"] == 8.0 and s.state_dict()["_growth_tracker"] == 1
    s2 = ember.amp.GradScaler("cpu")
    s2.load_state_dict(s.state_dict())
    assert s2.get_scale() == 8.0
    off = ember.amp.GradScaler("cpu", enabled=False)
    assert off.scale(p.sum()) is not None and off.get_scale() == 1.0 and off.state_dict() == {}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_module_in_a_region_is_compiled_with_its_casts(backend):
    """A compiled model called inside an autocast region (the usual AMP loop) is traced with
    the dispatcher's casts and runs compiled: low-precision outputs and float32 gradients as
    eager's (to bfloat16/float16 rounding); outside the region the float32 entry serves."""
    from ember import dynamo
    rng = np.random.default_rng()
    m = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.LayerNorm(32),
                            ember.nn.Linear(32, 4))
    dynamo.reset()
    cm = ember.compile(m, backend=backend)
    for dt, tol in ((ember.bfloat16, 3e-2), (ember.float16, 4e-3)):
        for _ in range(2):
            x = ember.tensor(rng.standard_normal((8, 16)).astype(np.float32), requires_grad=True)
            with ember.autocast("cpu", dtype=dt):
                got = cm(x)
                want = m(x)
            assert got.dtype is dt and want.dtype is dt
            np.testing.assert_allclose(got.float().detach().numpy(), want.float().detach().numpy(),
                                       rtol=tol, atol=tol)
            got.float().sum().backward()
            g_comp, w_comp = x.grad.numpy().copy(), m[0].weight.grad.numpy().copy()
            x.grad = None
            m.zero_grad()
            want.float().sum().backward()
            assert x.grad.dtype is ember.float32 and m[0].weight.grad.dtype is ember.float32
            np.testing.assert_allclose(g_comp, x.grad.numpy(), rtol=tol, atol=tol)
            np.testing.assert_allclose(w_comp, m[0].weight.grad.numpy(), rtol=tol, atol=tol * 4)
            m.zero_grad()
    # compiled, not run eagerly: one entry per region state, no fallback
    assert dynamo.counters["compiled"] >= 2 and dynamo.counters["eager_fallback"] == 0
    x = ember.tensor(rng.standard_normal((8, 16)).astype(np.float32))
    out = cm(x)
    assert out.dtype is ember.float32
    np.testing.assert_allclose(out.detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_autocast_compilation_can_be_switched_off():
    from ember import dynamo
    dynamo.reset()
    g = ember.compile(lambda x, w: (x @ w) * 2)
    x, w = ember.randn(4, 8), ember.randn(8, 3)
    old = dynamo.config.compile_under_autocast
    dynamo.config.compile_under_autocast = False
    try:
        with ember.autocast("cpu"):
            assert g(x, w).dtype is ember.bfloat16     # run eagerly: the casts still happen
        assert dynamo.counters["compiled"] == 0
    finally:
        dynamo.config.compile_under_autocast = old


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_autocast_block_inside_a_compiled_function_is_captured(backend):
    """``with ember.autocast(...)`` inside compiled code: one graph, the region's casts traced
    (values, dtypes and gradients as eager's), the region closed after the block."""
    from ember import dynamo
    rng = np.random.default_rng()
    m = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))

    def step(x, y):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            out = m(x)
            loss = (out.float() - y).pow(2).mean()
        return loss, out.dtype, ember.is_autocast_enabled()

    dynamo.reset()
    r = dynamo.explain(step)(ember.randn(4, 8), ember.randn(4, 4))
    assert r.graph_count == 1 and r.graph_break_count == 0
    cs = ember.compile(step, backend=backend)
    for _ in range(2):
        x = ember.tensor(rng.standard_normal((4, 8)).astype(np.float32))
        y = ember.tensor(rng.standard_normal((4, 4)).astype(np.float32))
        got, want = cs(x, y), step(x, y)
        assert got[1:] == want[1:] == (ember.bfloat16, False)
        assert not ember.is_autocast_enabled()
        np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=2e-2, atol=2e-2)
        got[0].backward()
        g = m[0].weight.grad.numpy().copy()
        m.zero_grad()
        want[0].backward()
        np.testing.assert_allclose(g, m[0].weight.grad.numpy(), rtol=5e-2, atol=5e-3)
        m.zero_grad()


def test_autocast_region_is_closed_when_the_graph_raises():
    from ember import dynamo

    def f(x, w):
        with ember.autocast("cpu"):
            y = x @ w
        return y

    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    cf(ember.randn(2, 3), ember.randn(3, 4))
    with pytest.raises(RuntimeError):
        cf(ember.randn(2, 3), ember.randn(5, 4))        # mismatched matmul inside the region
    assert not ember.is_autocast_enabled()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_graph_break_inside_an_autocast_block(backend):
    """A break inside ``with ember.autocast(...)`` (an ``.item()``): the region stays on for the
    breaking call and the resumed code, which closes it -- two graphs, values, dtypes and
    gradients as eager's (the frame ran eagerly before)."""
    from ember import dynamo
    rng = np.random.default_rng()
    m = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))

    def step(x, y):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            h = m[0](x)
            scale = float(h.float().abs().mean().item())    # the break, inside the region
            out = m[2](m[1](h)) * scale
            inside = ember.is_autocast_enabled("cpu")
            loss = (out.float() - y).pow(2).mean()
        return loss, out.dtype, h.dtype, inside, ember.is_autocast_enabled("cpu")

    dynamo.reset()
    r = dynamo.explain(step)(ember.randn(4, 8), ember.randn(4, 4))
    assert (r.graph_count, r.graph_break_count) == (2, 1), r.break_reasons
    cs = ember.compile(step, backend=backend)
    for _ in range(2):
        x = ember.tensor(rng.standard_normal((4, 8)).astype(np.float32))
        y = ember.tensor(rng.standard_normal((4, 4)).astype(np.float32))
        got, want = cs(x, y), step(x, y)
        assert got[1:] == want[1:] == (ember.bfloat16, ember.bfloat16, True, False)
        assert not ember.is_autocast_enabled()
        np.testing.assert_allclose(got[0].item(), want[0].item(), rtol=3e-2, atol=3e-2)
        got[0].backward()
        g = m[0].weight.grad.numpy().copy()
        m.zero_grad()
        want[0].backward()
        np.testing.assert_allclose(g, m[0].weight.grad.numpy(), rtol=6e-2, atol=6e-3)
        m.zero_grad()


def test_nested_regions_across_a_break_and_the_exception_path():
    from ember import dynamo

    def f(x, w, idx):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            a = x @ w
            with ember.autocast("cpu", enabled=False):
                b = x @ w                                 # float32: the inner region is off
                n = int(b.sum().item() > 0)               # the break, in the inner block
                c = x @ w
            d = x @ w                                     # bfloat16 again
            e = a.float()[idx]                            # raises for a bad index (run time)
        return a.dtype, b.dtype, c.dtype, d.dtype, n >= 0, e

    dynamo.reset()
    cf = ember.compile(f, backend="inductor")
    x, w = ember.randn(3, 4), ember.randn(4, 5)
    ok = ember.tensor([0, 2])
    got, want = cf(x, w, ok), f(x, w, ok)
    assert got[:5] == want[:5] == (ember.bfloat16, ember.float32, ember.float32, ember.bfloat16, True)
    np.testing.assert_allclose(got[5].numpy(), want[5].numpy())
    assert not ember.is_autocast_enabled()
    with pytest.raises(IndexError):
        cf(x, w, ember.tensor([0, 9]))
    assert not ember.is_autocast_enabled()        # the regions the blocks opened are closed


def test_a_resumed_region_is_closed_when_its_graph_raises():
    # the break leaves the bf16 region on for the resumed code; its graph raising (a bad index,
    # known at run time only) must close the region as leaving the block would
    from ember import dynamo

    def f(x, w, idx):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            a = x @ w
            n = int(a.float().sum().item() > 0)            # the break, inside the region
            e = a.float()[idx] * n
        return e

    dynamo.reset()
    cf = ember.compile(f, backend="inductor")
    x, w = ember.randn(3, 4), ember.randn(4, 5)
    ok = ember.tensor([0, 2])
    np.testing.assert_allclose(cf(x, w, ok).numpy(), f(x, w, ok).numpy(), rtol=1e-6)
    with pytest.raises(IndexError):
        cf(x, w, ember.tensor([0, 9]))
    assert not ember.is_autocast_enabled("cpu")
