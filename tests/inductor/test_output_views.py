"""Graph outputs that are views (a reshape, a permute) of a computed value: written out
as that value and returned as a strided view of it, as eager's view would be.

Why it matters: a training forward saves ``h = x @ w + b`` for the backward in another
shape than the one its consumer (GELU) computes in. Before, the saved view got a kernel of
its own that recomputed ``h`` beside the GELU kernel that also computes it (two passes over
``x @ w``); now the one kernel writes both. And ``compile(lambda a: (a * 2).t())`` returned
contiguous memory where eager returns a transposed view."""
import numpy as np

import ember
import ember.prims as P

from ._helpers import assert_same, compile_and_run, rand


def _one_loop_nest(cf):
    """One kernel, and not a combo of independent loop nests (which counts as one kernel)."""
    return cf.compiled.n_kernels == 1 and "combo_kernel" not in cf.compiled.source


def _gelu_tanh(h):
    c = P.mul(P.add(h, P.mul(P.mul(P.mul(h, h), h), 0.044715)), 0.7978845608)
    return P.mul(P.mul(h, 0.5), P.add(P.tanh(c), 1.0))


def test_saved_reshape_of_a_computed_value_shares_its_consumers_kernel():
    x, w, b = rand(64, 32), rand(32, 48), rand(48)

    def f(x, w, b):
        h = P.add(P.mm(x, w), P.broadcast_in_dim(b, [64, 48], [1]))
        return _gelu_tanh(h), P.reshape(h, [4, 16, 48])

    cf, got, want = compile_and_run(f, x, w, b)
    for g, e in zip(got, want):
        assert_same(g, e, rtol=1e-5, atol=1e-5)
    assert _one_loop_nest(cf)                  # one loop after the matmul writes both outputs
    saved = got[1]
    assert saved.strides == (16 * 48 * 4, 48 * 4, 4) and saved.base is not None   # a view


def test_permute_and_reshape_of_computed_values_have_eager_strides():
    x = rand(6, 10)

    def f(x):
        y = P.mul(x, 3.0)
        z = P.exp(x)
        return P.permute(y, [1, 0]), P.reshape(P.permute(P.reshape(z, [2, 3, 10]), [0, 2, 1]), [20, 3])

    cf, got, want = compile_and_run(f, x)
    assert_same(got[0], want[0], rtol=1e-6)
    assert_same(got[1], want[1], rtol=1e-6)
    assert got[0].strides == (4, 40)           # the transposed view of a (6, 10) buffer
    assert got[1].flags.c_contiguous            # a reshape that copies in eager too

    t = ember.randn(3, 4)
    fn = ember.compile(lambda a: (a * 2).t())
    out = fn(t)
    assert out.stride() == (t * 2).t().stride() == (1, 4)
    np.testing.assert_array_equal(out.numpy(), (t * 2).t().numpy())


def test_a_slice_of_a_computed_value_writes_only_the_slice():
    x = rand(64, 64)

    def f(x):
        return P.slice(P.mul(x, 2.0), [0, 0], [8, 64])

    cf, got, want = compile_and_run(f, x)
    assert_same(got[0], want[0])
    assert got[0].shape == (8, 64) and got[0].flags.c_contiguous and got[0].base is None


def test_pointwise_output_of_a_transposed_input_keeps_eager_layout():
    """numpy (and PyTorch) keep a permuted input's order in an elementwise result; the
    compiled output is written in that order and has the same strides."""
    x = ember.randn(3, 4)
    y = ember.randn(2, 3, 4, 5).permute(0, 2, 3, 1)
    cases = [(lambda a: a * 2, x.t()), (lambda a: (a * 2).exp() + a, x.t()), (lambda a: ember.relu(a) * 3, y)]
    for fn, a in cases:
        out, ref = ember.compile(fn)(a), fn(a)
        assert out.stride() == ref.stride() and out.stride() != ref.contiguous().stride()
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    from ember.inductor import config
    old, config.output_eager_layout = config.output_eager_layout, False
    try:
        out = ember.compile(lambda a: a * 2 + 1)(x.t())   # the knob off: contiguous, as before
        assert out.stride() == (3, 1)
    finally:
        config.output_eager_layout = old


def test_sibling_over_other_sizes_joins_the_consumers_loop():
    """``h = x @ w + b`` written out as [64, 48] beside its GELU computed over [4, 16, 48] (a
    Linear on a 3-D input): the same elements in the same order, so one loop writes both."""
    x, w, b = rand(64, 32), rand(32, 48), rand(48)

    def f(x, w, b):
        h = P.add(P.mm(x, w), P.broadcast_in_dim(b, [64, 48], [1]))
        return _gelu_tanh(P.reshape(h, [4, 16, 48])), h

    cf, got, want = compile_and_run(f, x, w, b)
    for g, e in zip(got, want):
        assert_same(g, e, rtol=1e-5, atol=1e-5)
    assert _one_loop_nest(cf)


def test_matmul_operand_and_output_views_of_one_value_share_its_buffer():
    """Attention's ``y.transpose(1, 2).contiguous()`` both multiplied (as [B*T, C]) and saved
    for the backward (as [B, T, C]): written out once, both uses are views of it."""
    y, w = rand(4, 8, 16), rand(16, 5)

    def f(y, w):
        c = P.clone(P.permute(P.mul(y, 2.0), [1, 0, 2]))          # [8, 4, 16]
        return P.mm(P.reshape(c, [32, 16]), w), P.reshape(c, [8, 64])

    cf, got, want = compile_and_run(f, y, w)
    for g, e in zip(got, want):
        assert_same(g, e, rtol=1e-5, atol=1e-5)
    assert _one_loop_nest(cf)


def test_compiled_outputs_alias_their_inputs_exactly_when_eager_does():
    """A compiled ``clone()`` / ``contiguous()`` of a transposed input (or a view of one) owns its
    memory, as eager's: it once returned a view of the input it copies (writes to it reached
    the input), and ``x.t().contiguous()`` came back transposed. Views -- and ``contiguous()``
    of a contiguous tensor, which is the tensor itself -- share the input's memory, as in eager."""
    x = ember.randn(3, 4)
    fns = [lambda a: a.clone(), lambda a: a.t().clone(), lambda a: a.t().contiguous(),
           lambda a: a.clone().t(), lambda a: a.clone().reshape(12), lambda a: a.t().contiguous()[1:],
           lambda a: a.t(), lambda a: a.view(12), lambda a: a[1:], lambda a: a.contiguous()[1:]]
    aliasing = []
    for fn in fns:
        ember.dynamo.reset()
        out, ref = ember.compile(fn)(x), fn(x)
        shares = np.shares_memory(out.numpy(), x.numpy())
        assert shares == np.shares_memory(ref.numpy(), x.numpy())
        assert out.stride() == ref.stride()
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
        if not shares:
            before = x.numpy().copy()
            out.add_(1.0)
            np.testing.assert_array_equal(x.numpy(), before)
        aliasing.append(shares)
    assert aliasing == [False] * 6 + [True] * 4
    ember.dynamo.reset()
