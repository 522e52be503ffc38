"""ember.export.register_dataclass: dataclass inputs/outputs export with torch's placeholder names,
run through module() and survive save/load by their serialized type name."""
import dataclasses
import io
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import export, load, register_dataclass, save, unflatten


@dataclasses.dataclass
class Pair:
    a: ember.Tensor
    b: ember.Tensor
    scale: float = 2.0


@dataclasses.dataclass
class Result:
    s: ember.Tensor
    d: ember.Tensor


@dataclasses.dataclass
class Unnamed:
    t: ember.Tensor


register_dataclass(Pair, serialized_type_name="tests.export.Pair")
register_dataclass(Result, serialized_type_name="tests.export.Result")
register_dataclass(Unnamed)


class UsesPair(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, p):
        return Result(self.fc(p.a) + p.b * p.scale, p.a - p.b)


def _np(t):
    return np.asarray(t.detach().numpy())


def test_dataclass_in_and_out_names_like_torch_and_values():
    m = UsesPair()
    ep = export(m, (Pair(ember.randn(2, 3), ember.randn(2, 3)),))
    assert ep.graph_signature.user_inputs == ["p_a", "p_b"]          # torch: p_a, p_b (+ p_scale)
    for _ in range(3):
        p = Pair(ember.randn(2, 3), ember.randn(2, 3))
        got, want = ep.module()(p), m(p)
        assert isinstance(got, Result)
        np.testing.assert_allclose(_np(got.s), _np(want.s), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(got.d), _np(want.d), rtol=1e-5, atol=1e-5)
    u = unflatten(ep)
    p = Pair(ember.randn(2, 3), ember.randn(2, 3))
    np.testing.assert_allclose(_np(u(p).s), _np(m(p).s), rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="2.0"):
        ep.module()(Pair(p.a, p.b, 3.0))                # the float field was specialised


def test_roundtrip_by_serialized_name():
    m = UsesPair()
    ep = export(m, (Pair(ember.randn(2, 3), ember.randn(2, 3)),))
    buf = io.BytesIO()
    save(ep, buf)
    assert b"tests.export.Pair" in buf.getvalue()
    buf.seek(0)
    ep2 = load(buf)
    p = Pair(ember.randn(2, 3), ember.randn(2, 3))
    got = ep2.module()(p)
    assert isinstance(got, Result)
    np.testing.assert_allclose(_np(got.s), _np(m(p).s), rtol=1e-5, atol=1e-5)


def test_errors_as_torch():
    class Id(nn.Module):
        def forward(self, u):
            return u.t * 2
    ep = export(Id(), (Unnamed(ember.randn(2)),))
    with pytest.raises(NotImplementedError, match="No registered serialization name for"):
        save(ep, io.BytesIO())
    with pytest.raises(ValueError, match="as it is not a dataclass"):
        register_dataclass(int)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        register_dataclass(Pair, serialized_type_name="tests.export.Pair")
    assert any("already registered" in str(x.message) for x in w)


def test_load_needs_the_registration():
    from ember.export import pytree_types

    @dataclasses.dataclass
    class Local:
        t: ember.Tensor
    register_dataclass(Local, serialized_type_name="tests.export.Local")

    class Id(nn.Module):
        def forward(self, u):
            return u.t + 1
    ep = export(Id(), (Local(ember.randn(2)),))
    buf = io.BytesIO()
    save(ep, buf)
    del pytree_types._CLASS_OF["tests.export.Local"]
    try:
        buf.seek(0)
        with pytest.raises(NotImplementedError, match="tests.export.Local"):
            load(buf)
    finally:
        pytree_types._CLASS_OF["tests.export.Local"] = Local
    buf.seek(0)
    x = ember.randn(2)
    np.testing.assert_allclose(_np(load(buf).module()(Local(x))), _np(x + 1))
