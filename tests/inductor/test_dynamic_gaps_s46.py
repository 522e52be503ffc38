"""dynamic=True gaps (session 46): programs that compiled once per shape, graph-broke or fell back
to eager where torch.compile(dynamic=True) compiles one graph for every size.

* interpolate after a strided conv: the resize's ``reshape(-1, n_in)`` divided the expanded numel
  by the conv's floor size, a FloorDiv sympy cannot cancel, which inductor refused in an index
  (the graph ran eagerly) -- and the expansions cost seconds of tracing;
* bicubic interpolate built its weights in numpy from the sizes (a graph break);
* cross_entropy(label_smoothing=...) and scaled_dot_product_attention made a symbolic size a
  Python float (``eps / C``, ``1 / sqrt(E)``): a recompile for every class count / head dim;
* adaptive average pooling built its matrices in numpy: every input size recompiled.

Compared with ember eager (values and gradients), with ``strict_dynamic`` (a per-shape
fallback or a failed lowering raises) and no recompile across sizes.
"""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F


def _rand(shape, seed, grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    t = ember.from_numpy(a)
    return t.requires_grad_(True) if grad else t


def _check_sizes(f, make_args, sizes, grad_pos=(0,), rtol=1e-5, atol=1e-6):
    """``f`` compiled with dynamic=True against eager on every size: values, gradients of the
    args at ``grad_pos``, and no recompile."""
    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, size in enumerate(sizes):
        args = make_args(size, k)
        twin = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, ember.Tensor) else a
                for a in args]
        got, want = c(*args), f(*twin)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
        if grad_pos:
            g = _rand(tuple(want.shape), 100 + k)
            (got * g).sum().backward()
            (want * g).sum().backward()
            for i in grad_pos:
                np.testing.assert_allclose(args[i].grad.numpy(), twin[i].grad.numpy(), rtol=rtol, atol=atol)
    assert ember.dynamo.counters["recompiles"] == 0


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_interpolate_after_strided_conv_is_one_compiled_graph(strict_dynamic, mode):
    ember.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
    for p in conv.parameters():
        p.requires_grad_(False)

    def f(x):
        return F.interpolate(conv(x), scale_factor=0.5, mode=mode)

    # (forward only: a strided conv's input gradient specialises the parity of the size, by design)
    _check_sizes(f, lambda s, k: (_rand(s, k),), [(2, 3, 17, 23), (3, 3, 20, 26), (2, 3, 31, 15)], grad_pos=())


@pytest.mark.parametrize("kw", [dict(scale_factor=0.5), dict(scale_factor=1.75), dict(size=(7, 9)),
                                dict(scale_factor=2.0, align_corners=True)])
def test_bicubic_interpolate_is_one_graph_with_symbolic_sizes(strict_dynamic, kw):
    def f(x):
        return F.interpolate(x * 2, mode="bicubic", **kw)

    _check_sizes(f, lambda s, k: (_rand(s, k, grad=True),), [(2, 3, 9, 13), (3, 2, 16, 11), (2, 4, 5, 6)])


@pytest.mark.parametrize("target", ["index", "probs"])
def test_cross_entropy_label_smoothing_keeps_the_class_count_symbolic(strict_dynamic, target):
    def f(x, t, w):
        return F.cross_entropy(x, t, weight=w, label_smoothing=0.2)

    def make(size, k):
        n, c = size
        rng = np.random.default_rng(k)
        if target == "index":
            t = ember.from_numpy(rng.integers(0, c, (n,)))
        else:
            t = _rand((n, c), 50 + k).softmax(-1)
        return _rand((n, c), k, grad=True), t, ember.from_numpy(rng.uniform(0.5, 2, (c,)).astype(np.float32))

    _check_sizes(f, make, [(6, 5), (7, 8), (9, 11)])


def test_sdpa_keeps_the_head_dim_symbolic(strict_dynamic):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def make(size, k):
        return tuple(_rand(size, 3 * k + i, grad=True) for i in range(3))

    _check_sizes(f, make, [(2, 3, 5, 8), (2, 3, 6, 16), (2, 3, 7, 12)], grad_pos=(0, 1, 2))


@pytest.mark.parametrize("fn,out,sizes", [
    (F.adaptive_avg_pool1d, 3, [(2, 3, 7), (3, 2, 12), (2, 4, 3)]),
    (F.adaptive_avg_pool2d, (4, 5), [(2, 3, 4, 5), (3, 2, 9, 11), (2, 3, 13, 7)]),
    (F.adaptive_avg_pool2d, (None, 3), [(2, 3, 4, 5), (3, 2, 9, 11)]),
    (F.adaptive_avg_pool3d, (2, 3, 2), [(2, 3, 4, 5, 6), (3, 2, 5, 7, 3)]),
])
def test_adaptive_avg_pool_needs_no_guard_on_the_input_size(strict_dynamic, fn, out, sizes):
    def f(x):
        return fn(x * 1.5, out)

    _check_sizes(f, lambda s, k: (_rand(s, k, grad=True),), sizes)


@pytest.mark.parametrize("pool", [dict(kernel_size=2), dict(kernel_size=3, stride=2, ceil_mode=True),
                                  dict(kernel_size=3, stride=2, padding=1)])
def test_backward_with_only_pooled_sizes_is_compiled(strict_dynamic, caplog, pool):
    """The backward of ``(avg_pool2d(x) * w).exp().sum()`` (x not requiring grad) gets only
    floor(s2/2)-high tensors: s2 was read back from linear sizes only, so it ran in the fx
    Interpreter. It is read back from the floor (exactly, s2 guarded even for kernel 2; or as
    any size with that floor, the graph using s2 only inside it)."""
    def f(x, w):
        return (F.avg_pool2d(x, **pool) * w).exp().sum()

    def make(size, k):
        return _rand(size, k) * 0.3, _rand((3, 1, 1), 20 + k, grad=True)

    sizes = [(2, 3, 10, 12), (3, 3, 14, 8), (2, 3, 18, 6)] if pool["kernel_size"] == 2 else \
        [(2, 3, 10, 12), (3, 3, 15, 9), (2, 3, 18, 7)]
    with caplog.at_level("WARNING", logger="ember.inductor"):
        _check_sizes(f, make, sizes, grad_pos=(1,), rtol=1e-5, atol=1e-5)
    assert "fx Interpreter" not in caplog.text


@pytest.mark.parametrize("fn,out,sizes", [
    (F.adaptive_max_pool1d, 3, [(2, 3, 7), (3, 2, 12), (2, 4, 3)]),
    (F.adaptive_max_pool2d, (4, 5), [(2, 3, 4, 5), (3, 2, 9, 11), (2, 3, 13, 7)]),
    (F.adaptive_max_pool2d, (None, 3), [(2, 3, 4, 5), (3, 2, 9, 11)]),
])
def test_adaptive_max_pool_needs_no_guard_on_the_input_size(strict_dynamic, fn, out, sizes):
    """The window taps were laid out in numpy from the sizes (a recompile for every input
    size, also when the output size equals the input size on one call and not the next). Ties,
    a NaN and an all -inf row check the eager choice of index (first maximum in row-major
    order, NaN wins; the window's start when all of it is -inf)."""
    def f(x):
        vals, ind = fn(x * 1.5, out, return_indices=True)
        return vals + ind.to(vals.dtype) * 1000.0

    def make(size, k):
        a = np.random.default_rng(k).standard_normal(size).astype(np.float32)
        a[..., 1] = a[..., 0]                       # ties
        a[0, 0, ..., 2] = np.nan if k == 1 else a[0, 0, ..., 2]
        a[-1, -1, ...] = -np.inf
        return (ember.from_numpy(a).requires_grad_(True),)

    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, size in enumerate(sizes):
        (x,) = make(size, k)
        x2 = x.detach().clone().requires_grad_(True)
        got, want = c(x), f(x2)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        g = _rand(tuple(want.shape), 100 + k)
        (got * g).sum().backward()
        (want * g).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert ember.dynamo.counters["recompiles"] == 0


def test_sdpa_half_with_symbolic_head_dim_scales_as_eager(strict_dynamic):
    """The symbolic 1/sqrt(E) multiplies in float32 as eager's Python-float scalar does (a 0-d
    float32 operand of a compiled half op would be rounded to half first)."""
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, e in enumerate([8, 16, 12]):
        q, kk, v = (_rand((2, 3, 5, e), 10 * k + i).to(ember.float16) for i in range(3))
        np.testing.assert_array_equal(c(q, kk, v).float().numpy(), f(q, kk, v).float().numpy())
    assert ember.dynamo.counters["recompiles"] == 0
