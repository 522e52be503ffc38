"""In-place ops on views made by view ops that decompose to a non-view prim
(``view``/``alias``/full slices -> ``prims.reshape``): functionalization must still
write them into the base. They were silently lost (the write never reached the
input's write-back nor later reads of the base)."""
import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.prims.table import decomposition_table


def _prog(kind):
    def f(a):
        if kind == "view":
            a.view(-1).mul_(0.5)
        elif kind == "full_slice":
            a[:, 0:].mul_(0.5)
        elif kind == "view_then_slice":
            a.view(-1)[3:].add_(1.0)
        elif kind == "alias_of_intermediate":
            b = a * 2.0
            b[:, 0:].sub_(1.0)
            return (b * 1.0, a + 1.0)
        return (a * 1.0,)
    return f


KINDS = ["view", "full_slice", "view_then_slice", "alias_of_intermediate"]


@pytest.mark.parametrize("kind", KINDS)
def test_make_fx_prims_functionalized_keeps_view_writes(kind):
    f = _prog(kind)
    a = ember.randn(4, 3)
    gm = make_fx(f, functionalize=True, decomposition_table=decomposition_table())(a.clone())
    x, xr = ember.randn(4, 3), None
    xr = x.clone()
    outs, mutated = gm(x.clone())
    ref = f(xr)
    for o, r in zip(outs, ref):
        np.testing.assert_array_equal(o.numpy(), r.numpy())
    if kind != "alias_of_intermediate":
        np.testing.assert_array_equal(mutated[0].numpy(), xr.numpy())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("kind", KINDS)
def test_compiled_keeps_view_writes(kind, backend):
    f = _prog(kind)
    a = ember.randn(4, 3)
    ar = a.clone()
    ember.dynamo.reset()
    out = ember.compile(f, backend=backend)(a)
    ref = f(ar)
    np.testing.assert_array_equal(a.numpy(), ar.numpy())
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("training", [False, True])
def test_inplace_on_view_of_a_view_input_compiles(backend, training, caplog):
    """The input is a transposed view of a tensor outside the graph. Its base is no value of
    the graph (as a constant it would hold no data): functionalization writes into the
    input itself instead (``put`` at the slice's positions in it), and aot writes the input
    back. Until session 16 aot ran such graphs eagerly; now they compile, values and the
    weight's gradient as eager's, twice (the second call on the compiled graph)."""
    import logging

    def f(a, w):
        a[:, 1:].add_(100.0)
        return (a * w,)

    def mk():
        return ember.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3)).T

    w = ember.randn(3, 4, requires_grad=training)
    ember.dynamo.reset()
    cf = ember.compile(f, backend=backend)
    with caplog.at_level(logging.DEBUG, logger="ember.aot"):
        for _ in range(2):
            a, ar = mk(), mk()
            out, ref = cf(a, w), f(ar, w)
            np.testing.assert_array_equal(a.numpy(), ar.numpy())
            np.testing.assert_array_equal(a._base.numpy(), ar._base.numpy())
            np.testing.assert_array_equal(out[0].detach().numpy(), ref[0].detach().numpy())
            if training:
                g = ember.autograd.grad(out[0].sum(), w)[0]
                gr = ember.autograd.grad(ref[0].sum(), w)[0]
                np.testing.assert_array_equal(g.numpy(), gr.numpy())
    assert not any("running it eagerly" in r.getMessage() for r in caplog.records)
