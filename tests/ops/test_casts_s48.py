"""Eager float -> integer casts against torch: bfloat16 sources convert through float32 as
c10::BFloat16 does (nan/inf/out-of-range -> INT_MIN for int32/int64, negatives wrap into
uint8), and nll_loss's target dtype check has torch's message."""
import numpy as np
import pytest

import ember

INT_TARGETS = ("int32", "int64", "int16", "int8", "uint8", "bool")


def _values():
    rng = np.random.default_rng(48)
    special = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1.5, -2.5, 1e20, 300.0, -129.0, 70000.0, -0.7]
    return np.concatenate([np.array(special, np.float32),
                           (rng.standard_normal(20) * 200).astype(np.float32)])


def _pair(src, dt):
    torch = pytest.importorskip("torch")
    x = _values()
    return ember.from_numpy(x).to(getattr(ember, src)), torch.from_numpy(x).to(getattr(torch, src)), torch


@pytest.mark.parametrize("src", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("dt", INT_TARGETS)
def test_float_to_int_casts_match_torch(src, dt):
    a, ta, torch = _pair(src, dt)
    want = ta.to(getattr(torch, dt)).tolist()
    with np.errstate(all="ignore"):
        assert a.to(getattr(ember, dt)).tolist() == want
        assert a.type(getattr(ember, dt)).tolist() == want
        assert ember.zeros(a.shape[0], dtype=getattr(ember, dt)).copy_(a).tolist() == want
        assert ember.tensor(a, dtype=getattr(ember, dt)).tolist() == \
            torch.tensor(ta.tolist(), dtype=getattr(torch, src)).to(getattr(torch, dt)).tolist()


@pytest.mark.parametrize("dt", ["int32", "int64", "uint8", "int8"])
def test_bfloat16_0d_value_fill_and_setitem_match_torch(dt):
    _, ta, torch = _pair("bfloat16", dt)
    for v in ta.tolist()[:12]:
        got = ember.zeros(3, dtype=getattr(ember, dt)).fill_(ember.tensor(v, dtype=ember.bfloat16))
        want = torch.zeros(3, dtype=getattr(torch, dt)).fill_(torch.tensor(v, dtype=torch.bfloat16))
        assert got.tolist() == want.tolist(), v
        got[1] = ember.tensor(v, dtype=ember.bfloat16)
        want[1] = torch.tensor(v, dtype=torch.bfloat16)
        got[:1] = ember.tensor([v], dtype=ember.bfloat16)
        want[:1] = torch.tensor([v], dtype=torch.bfloat16)
        assert got.tolist() == want.tolist(), v


@pytest.mark.parametrize("dt", ["int32", "int64", "uint8"])
def test_bfloat16_to_int_cast_compiled_matches_eager(dt):
    a, ta, torch = _pair("bfloat16", dt)
    f = lambda v: v.to(getattr(ember, dt))  # noqa: E731
    ember.dynamo.reset()
    with np.errstate(all="ignore"):
        assert ember.compile(f, backend="inductor")(a).tolist() == f(a).tolist() == \
            ta.to(getattr(torch, dt)).tolist()


@pytest.mark.parametrize("dt", ["int32", "float32", "int8", "bool"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_nll_target_dtype_message_matches_torch(dt, loss):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    y = np.array([0, 2, 1, 2])
    with pytest.raises(RuntimeError) as te:
        getattr(torch.nn.functional, loss)(torch.tensor(x), torch.tensor(y).to(getattr(torch, dt)))
    with pytest.raises(RuntimeError) as ee:
        getattr(ember.nn.functional, loss)(ember.tensor(x), ember.tensor(y).to(getattr(ember, dt)))
    assert str(ee.value) == str(te.value).replace("torch.", "ember.")


def test_nll_uint8_target_matches_torch():
    torch = pytest.importorskip("torch")
    from ember.ops import api
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    y = np.array([0, 2, 1, 2, 255])
    for red in (0, 1, 2):
        xe = ember.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        oe = api.nll_loss_nd(xe, ember.tensor(y).to(ember.uint8), None, red, 255)[0]
        ot = torch.ops.aten.nll_loss_nd(xt, torch.tensor(y).to(torch.uint8), None, red, 255)
        (oe * 1.5).sum().backward()
        (ot * 1.5).sum().backward()
        np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_uint8_target_compiles(reduction, caplog):
    """The nll_loss_nd / _nll_loss_backward decompositions take a uint8 target (as int64):
    the graph compiles (no eager fallback logged) and matches torch."""
    torch = pytest.importorskip("torch")
    from ember.ops import api
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 3, 255, 1, 2, 3])
    g = np.random.default_rng(4).standard_normal(6).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    ot = torch.ops.aten.nll_loss_nd(xt, torch.tensor(y).to(torch.uint8), None, reduction, 255)
    (ot * torch.tensor(g if reduction == 0 else g[0])).sum().backward()
    ember.dynamo.reset()
    f = ember.compile(lambda a, b: api.nll_loss_nd(a, b, None, reduction, 255)[0], backend="inductor")
    xe = ember.tensor(x, requires_grad=True)
    with caplog.at_level("WARNING", logger="ember.inductor"):
        oe = f(xe, ember.tensor(y).to(ember.uint8))
        (oe * ember.tensor(g if reduction == 0 else g[0])).sum().backward()
    assert "running it eagerly" not in caplog.text
    np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
