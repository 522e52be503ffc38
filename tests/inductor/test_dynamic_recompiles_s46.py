"""dynamic=True recompiles (session 46, round 2): decompositions that asked a Python question of a
symbolic size (a guard on its remainder modulo the stride), so every other input parity compiled
again, where torch.compile(dynamic=True) compiles one graph:

* pooling's pad config took ``max(need - size - p, 0)`` of the high padding (avg_pool2d(x, 2):
  one graph for even sizes, one for odd); max pooling's padding-tap masking now runs whenever
  padding may be present (a symbolic high amount not known to be <= 0);
* a strided conv's weight gradient compared its result's extent with the kernel size.

Compared with ember eager (values and gradients), with ``strict_dynamic`` (a per-shape
fallback or a failed lowering raises) and no recompile across sizes.
"""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.dynamo.convert_frame import counters


def _rand(shape, seed, grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    t = ember.from_numpy(a)
    return t.requires_grad_(True) if grad else t


def _check_sizes(f, make_args, sizes, grad_pos=(0,), rtol=1e-5, atol=1e-5):
    """``f`` compiled with dynamic=True against eager on every size: values, gradients of the
    args at ``grad_pos`` (none: run under no_grad), and no recompile."""
    ember.compiler.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, size in enumerate(sizes):
        args = make_args(size, k)
        twin = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, ember.Tensor) else a
                for a in args]
        if not grad_pos:
            with ember.no_grad():
                got, want = c(*args), f(*twin)
        else:
            got, want = c(*args), f(*twin)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
        if grad_pos:
            g = _rand(tuple(want.shape), 100 + k)
            (got * g).sum().backward()
            (want * g).sum().backward()
            for i in grad_pos:
                np.testing.assert_allclose(args[i].grad.numpy(), twin[i].grad.numpy(), rtol=rtol, atol=atol)
    assert counters["recompiles"] == 0


_PARITY_SIZES = [(10, 12), (11, 13), (14, 9), (7, 8)]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)])
def test_avg_pool_does_not_recompile_on_input_parity(strict_dynamic, kw, grad):
    def f(x):
        return F.avg_pool2d(x, **kw)

    _check_sizes(f, lambda hw, k: [_rand((2, 3) + hw, k, grad)], _PARITY_SIZES, grad_pos=(0,) if grad else ())


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True),
                                dict(kernel_size=2, stride=2, dilation=2, padding=1, ceil_mode=True)])
def test_max_pool_does_not_recompile_on_input_parity(strict_dynamic, kw, grad):
    def f(x):
        return F.max_pool2d(x, **kw)

    _check_sizes(f, lambda hw, k: [_rand((2, 3) + hw, k, grad)], _PARITY_SIZES, grad_pos=(0,) if grad else ())


@pytest.mark.parametrize("padding", [1, 0])
def test_max_pool_with_symbolic_padding_masks_padding_taps(strict_dynamic, padding):
    """A -inf input in a window that overlaps padding: the argmax (and so the gradient) must name
    the input element, not a padding tap holding the same fill (symbolic high padding in ceil
    mode still runs the masking). padding=0: ceil-mode windows past the input, values only (a
    window's first tap is then inside the input and wins a tie anyway)."""
    def f(x):
        return F.max_pool2d(x, 3, stride=2, padding=padding, ceil_mode=True)

    def make(hw, k):
        a = np.random.default_rng(k).standard_normal((1, 2) + hw).astype(np.float32)
        a[..., -1, :] = -np.inf
        a[..., :, -1] = -np.inf
        a[..., 0, :] = -np.inf
        return [ember.from_numpy(a).requires_grad_(True)]

    _check_sizes(f, make, _PARITY_SIZES)


@pytest.mark.parametrize("conv_kw", [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=3),
                                     dict(kernel_size=2, stride=2, dilation=2, padding=1)])
def test_strided_conv_weight_grad_does_not_recompile_on_input_parity(strict_dynamic, conv_kw):
    ember.manual_seed(0)
    conv = nn.Conv2d(3, 4, **conv_kw)
    twin = nn.Conv2d(3, 4, **conv_kw)
    twin.load_state_dict(conv.state_dict())
    ember.compiler.reset()
    c = ember.compile(lambda x: conv(x), backend="inductor", dynamic=True)
    for k, hw in enumerate([(17, 23), (20, 26), (31, 15), (18, 19)]):
        x = _rand((2, 3) + hw, k)          # (input not requiring grad: the weight gradient only)
        got, want = c(x), twin(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
        g = _rand(tuple(want.shape), 50 + k)
        (got * g).sum().backward()
        (want * g).sum().backward()
        np.testing.assert_allclose(conv.weight.grad.numpy(), twin.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(conv.bias.grad.numpy(), twin.bias.grad.numpy(), rtol=1e-4, atol=1e-4)
        conv.zero_grad()
        twin.zero_grad()
    assert counters["recompiles"] == 0


# ---------------------------------------------------------------------- unfold / fold
# unfold reshaped its convolution's output with -1 (numel // (N*C*K) of the expanded numel, a
# FloorDiv inductor refused as a size: the graph ran eagerly), and unfold and fold built a
# (C*K)-row kernel over range(C) for a C-group convolution (a recompile for every channel count);
# fold took int() of a symbolic output_size and unfold compared its two block counts (min()).
_UNFOLD_KW = [dict(kernel_size=2), dict(kernel_size=2, dilation=2), dict(kernel_size=3, stride=2, padding=1),
              dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1), padding=(1, 0))]


@pytest.mark.parametrize("kw", _UNFOLD_KW)
def test_unfold_is_one_graph_for_every_size_and_channel_count(strict_dynamic, kw):
    def f(x):
        return F.unfold(x, **kw).cos()

    sizes = [(2, 3, 9, 13), (3, 4, 8, 11), (2, 5, 12, 10), (3, 2, 11, 9)]
    if kw.get("stride", 1) != 1:
        # odd sizes only: the strided backward's input gradient guards on the parity (deliberate)
        sizes = [(2, 3, 9, 13), (3, 4, 11, 9), (2, 5, 13, 11), (3, 2, 7, 15)]
    _check_sizes(f, lambda s, k: [_rand(s, k, True)], sizes)


@pytest.mark.parametrize("stride", [1, 2])
def test_fold_of_unfold_keeps_the_output_size_symbolic(strict_dynamic, stride):
    def f(x):
        return F.fold(F.unfold(x, 2, stride=stride) * 1.5, x.shape[-2:], 2, stride=stride)

    # (stride 2: even sizes -- the conv input gradient's parity guard is deliberate)
    sizes = [(2, 3, 8, 12), (3, 4, 6, 10), (2, 3, 10, 4), (3, 2, 12, 6)]
    _check_sizes(f, lambda s, k: [_rand(s, k, True)], sizes)


def test_fold_with_padding_and_dilation_is_one_graph(strict_dynamic):
    def f(cols, h, w):
        return F.fold(cols, (h, w), (2, 3), dilation=(1, 2), padding=1, stride=1).sin()

    def make(hw, k):
        c = 2 + k % 3
        h, w = hw
        L = (h + 2 - 1 - 1 + 1) * (w + 2 - 4 - 1 + 1)
        return [_rand((2, c * 6, L), k, True), h, w]

    ember.compiler.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, hw in enumerate([(7, 9), (8, 6), (5, 11)]):
        args = make(hw, k)
        twin = args[0].detach().clone().requires_grad_(True)
        got, want = c(*args), f(twin, *args[1:])
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
        g = _rand(tuple(want.shape), 7 + k)
        (got * g).sum().backward()
        (want * g).sum().backward()
        np.testing.assert_allclose(args[0].grad.numpy(), twin.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert counters["recompiles"] == 0


@pytest.mark.parametrize("kw", _UNFOLD_KW)
def test_unfold_and_fold_eager_match_torch(kw):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((2, 3, 9, 10)).astype(np.float32)
    u = F.unfold(ember.from_numpy(a), **kw)
    tu = torch.nn.functional.unfold(torch.from_numpy(a), **kw)
    np.testing.assert_allclose(u.numpy(), tu.numpy(), rtol=1e-6, atol=1e-6)
    cols = np.random.default_rng(4).standard_normal(tuple(tu.shape)).astype(np.float32)
    r = F.fold(ember.from_numpy(cols), (9, 10), **kw)
    tr = torch.nn.functional.fold(torch.from_numpy(cols), (9, 10), **kw)
    np.testing.assert_allclose(r.numpy(), tr.numpy(), rtol=1e-5, atol=1e-5)
    # unbatched
    np.testing.assert_allclose(F.unfold(ember.from_numpy(a[0]), **kw).numpy(),
                               torch.nn.functional.unfold(torch.from_numpy(a[0]), **kw).numpy(), rtol=1e-6)
    np.testing.assert_allclose(F.fold(ember.from_numpy(cols[0]), (9, 10), **kw).numpy(),
                               torch.nn.functional.fold(torch.from_numpy(cols[0]), (9, 10), **kw).numpy(),
                               rtol=1e-5, atol=1e-5)
