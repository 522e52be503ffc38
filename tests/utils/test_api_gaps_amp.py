"""ember.amp.custom_fwd / custom_bwd against torch.amp's (2.13): the dtypes a custom Function's
forward and backward see, the autocast state inside them, values and gradients."""
import numpy as np
import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _make_fn(m, cast_inputs, log):
    class MyMM(m.autograd.Function):
        @staticmethod
        @m.amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx, a, b, scale=None):
            ctx.save_for_backward(a, b)
            log.append(("fwd", str(a.dtype), str(b.dtype), m.is_autocast_enabled("cpu"),
                        str(scale.dtype) if scale is not None else None))
            out = a.mm(b)
            log.append(("fwd_out", str(out.dtype)))
            return out

        @staticmethod
        @m.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            log.append(("bwd", str(grad.dtype), m.is_autocast_enabled("cpu"), str(m.get_autocast_dtype("cpu"))))
            ga, gb = grad.mm(b.t()), a.t().mm(grad)
            log.append(("bwd_out", str(ga.dtype), str(gb.dtype)))
            return ga, gb, None
    return MyMM


def _run(m, cast_inputs, region, rng_arrays, with_kw):
    log = []
    fn = _make_fn(m, None if cast_inputs is None else getattr(m, cast_inputs), log)
    a = m.tensor(rng_arrays[0], requires_grad=True)
    b = m.tensor(rng_arrays[1], requires_grad=True)
    extra = (m.tensor(rng_arrays[2]),) if with_kw else ()
    if region:
        with m.autocast("cpu", dtype=getattr(m, region)):
            out = fn.apply(a, b, *extra)
    else:
        out = fn.apply(a, b, *extra)
    out.float().sum().backward()
    return log, out, a.grad, b.grad


@pytest.mark.parametrize("cast_inputs", [None, "float32", "bfloat16"])
@pytest.mark.parametrize("region", [None, "bfloat16", "float16"])
@pytest.mark.parametrize("with_kw", [False, True])
def test_custom_fwd_bwd_match_torch(cast_inputs, region, with_kw):
    torch = _torch()
    rng = np.random.default_rng(hash((cast_inputs, region, with_kw)) % 2 ** 32)
    arrays = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32),
              rng.standard_normal((2,)).astype(np.float32)]
    e = _run(ember, cast_inputs, region, arrays, with_kw)
    t = _run(torch, cast_inputs, region, arrays, with_kw)
    norm = lambda log: [tuple(str(x).replace("ember", "torch") for x in entry) for entry in log]
    assert norm(e[0]) == norm(t[0])
    for x, y in zip(e[1:], t[1:]):
        assert str(x.dtype).replace("ember", "torch") == str(y.dtype)
        np.testing.assert_allclose(x.detach().float().numpy(), y.detach().float().numpy(), rtol=2e-2, atol=2e-2)


def test_decorator_errors_and_partial():
    torch = _torch()
    for m in (ember, torch):
        with pytest.raises(ValueError) as exc:
            m.amp.custom_fwd(device_type=0)
        msg = str(exc.value)
        with pytest.raises(ValueError) as exc2:
            m.amp.custom_bwd(device_type=None)
        assert "Expected `device_type` of type `str`" in msg and "NoneType" in str(exc2.value)
        with pytest.raises(TypeError):
            m.amp.custom_fwd(lambda ctx: None)  # device_type is keyword-only and required


def test_outside_region_is_noop_and_ctx_records_state():
    seen = {}

    class Twice(ember.autograd.Function):
        @staticmethod
        @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float16)
        def forward(ctx, x):
            seen["dtype"] = x.dtype
            seen["ctx"] = (ctx._fwd_used_autocast, ctx._dtype)
            return x * 2

        @staticmethod
        @ember.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 2

    x = ember.randn(3, requires_grad=True)
    Twice.apply(x).sum().backward()
    assert seen["dtype"] is ember.float32 and seen["ctx"] == (False, ember.bfloat16)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0, np.float32))


def test_cast_inputs_reaches_nested_containers():
    from ember.amp.custom_function import _cast
    x64 = ember.randn(2, dtype=ember.float64)
    xi = ember.arange(3)
    arr = np.ones(2, np.float32)
    out = _cast({"a": [ember.randn(2), (ember.randn(1), x64)], "b": xi, "c": "s", "d": arr}, "cpu", ember.float16)
    assert out["a"][0].dtype is ember.float16 and out["a"][1][0].dtype is ember.float16
    assert isinstance(out["a"][1], tuple) and out["a"][1][1] is x64 and out["b"] is xi and out["d"] is arr
    assert _cast(ember.randn(2), "cuda", ember.float16).dtype is ember.float32
