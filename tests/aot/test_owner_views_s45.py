"""A compiled graph's output that is a view of a non-contiguous input owning its memory (a
``channels_last`` batch; a permuted result passed to the graph after a break): aot rebuilt the
view with the public ``as_strided``, which refuses such tensors -- a RuntimeError for valid
programs (timm with channels_last, a Mixtral MoE's ``one_hot(...).permute`` indexed after a break).
The view is now built over the input's dense memory: the same values, aliasing and gradients
as eagerly (``aot.runtime._owner_view``)."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _cl(seed=0):
    x = ember.from_numpy(np.random.default_rng(seed).standard_normal((2, 3, 4, 5)).astype(np.float32))
    return x.contiguous(memory_format=ember.channels_last)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_a_channels_last_input_is_a_view(backend):
    def f(m):
        return m[0], m[:, 1:].sum()

    dynamo.reset()
    xe, xc = _cl(), _cl()
    assert not xc.is_contiguous() and xc._base is None
    we, wc = f(xe), ember.compile(f, backend=backend)(xc)
    np.testing.assert_array_equal(wc[0].numpy(), we[0].numpy())
    np.testing.assert_allclose(wc[1].numpy(), we[1].numpy(), rtol=1e-6)
    wc[0].mul_(3)                  # written through the output: reaches the input, as eagerly
    we[0].mul_(3)
    np.testing.assert_array_equal(xc.numpy(), xe.numpy())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_of_a_channels_last_input_gets_its_gradient(backend):
    def f(m):
        return m[1, :, 2:] * 1.0, (m * m).sum()

    dynamo.reset()
    xe, xc = _cl(1).requires_grad_(True), _cl(1).requires_grad_(True)
    a, b = f(xe)
    (a.sum() * 2 + b).backward()
    a, b = ember.compile(f, backend=backend)(xc)
    (a.sum() * 2 + b).backward()
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def test_permuted_result_indexed_after_a_graph_break():
    def f(x):
        m = (x * 2).permute(1, 0)          # a fresh, non-contiguous result (owns its memory)
        dynamo.graph_break()
        return m[0], m.sum()

    dynamo.reset()
    x = ember.randn(3, 4)
    got, want = ember.compile(f)(x), f(x)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    f(xe)[0].sum().backward()
    ember.compile(f)(xc)[0].sum().backward()
    np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
