"""Max pooling windows that hold no input element (dilation skips over it, only padding left).

PyTorch gives -inf (the lowest integer for integer inputs) and sends no gradient from such a
window. Ember's native loop gave 0, and its numpy path named a padding position as the argmax,
whose flat index is another element of the input (its gradient landed there) or -1 (the backward's
bincount raised). Both paths run here, eagerly and compiled, against PyTorch and each other.
"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import _native_small


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(_native_small, "lib", lambda: None)
    return request.param


# (shape, kernel, stride, padding, dilation): each has a window entirely in padding. PyTorch allows
# padding up to half the kernel, so such a window needs kernel 2, padding 1 and a dilation past
# the input (taps -1 and n) along some dimension -- which makes that dimension's output 1 wide.
CASES = [
    ((1, 1, 1, 1), 2, 1, 1, 2),
    ((2, 3, 4, 3), (2, 2), 1, (0, 1), (1, 4)),
    ((2, 2, 2, 1), (2, 2), (1, 2), 1, (3, 2)),
]


def _windows_all_padding(shape, k, s, p, d):
    """A window with no input element exists (so the case tests what it claims)."""
    k, s, p, d = ([v] * 2 if isinstance(v, int) else list(v) for v in (k, s, p, d))
    for i, n in enumerate(shape[2:]):
        out = (n + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
        for o in range(out):
            if all(not (0 <= o * s[i] - p[i] + t * d[i] < n) for t in range(k[i])):
                return True
    return False


@pytest.mark.parametrize("case", CASES)
def test_values_match_torch_and_no_gradient_flows(case, path):
    torch = pytest.importorskip("torch")
    shape, k, s, p, d = case
    assert _windows_all_padding(shape, k, s, p, d)
    xn = np.random.default_rng(0).standard_normal(shape)
    x = ember.tensor(xn, requires_grad=True)
    v, i = F.max_pool2d(x, k, s, p, d, return_indices=True)
    vt = torch.nn.functional.max_pool2d(torch.tensor(xn), k, s, p, d)
    np.testing.assert_array_equal(v.detach().numpy(), vt.numpy())
    assert np.isneginf(v.detach().numpy()).all() and (i.numpy() == -1).all()
    # the output does not depend on the input: zero gradient. (PyTorch 2.13 returns an index
    # past the window for these and scatters the gradient onto other elements, or aborts the
    # process when that index is outside the input: not a reference here.)
    v.backward(ember.tensor(np.random.default_rng(1).standard_normal(v.shape)))
    assert (x.grad.numpy() == 0).all()


def test_integer_input_gives_the_lowest_integer(path):
    x = ember.tensor(np.arange(1, 7, dtype=np.int64).reshape(1, 1, 3, 2))
    v = F.max_pool2d(x, (1, 2), 1, (0, 1), (1, 3))
    assert v.numpy().tolist() == [[[[np.iinfo(np.int64).min]] * 3]]


def test_minus_inf_window_names_an_input_position(path):
    # a window whose input elements are all -inf: the argmax is one of them, never the padding
    xn = np.full((1, 1, 1, 3), -np.inf)
    x = ember.tensor(xn, requires_grad=True)
    v, i = F.max_pool2d(x, (1, 3), 1, (0, 1), return_indices=True)
    assert i.numpy().ravel().tolist() == [0, 0, 1]
    v.backward(ember.ones_like(v))
    assert x.grad.numpy().ravel().tolist() == [2.0, 1.0, 0.0]


@pytest.mark.parametrize("case", CASES[:2])
def test_compiled_matches_eager(case, path):
    shape, k, s, p, d = case
    xn = np.random.default_rng(2).standard_normal(shape).astype(np.float32)

    def f(x, y):
        return F.max_pool2d(x, k, s, p, d).mul(2), F.max_pool2d(y, 2, 1, 1).mul(3)

    yn = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    xe, ye = (ember.tensor(a, requires_grad=True) for a in (xn, yn))
    ve, we = f(xe, ye)
    (ve.clamp(min=-1).sum() + we.sum()).backward()
    xc, yc = (ember.tensor(a, requires_grad=True) for a in (xn, yn))
    out, wc = ember.compile(f)(xc, yc)
    (out.clamp(min=-1).sum() + wc.sum()).backward()
    assert np.isneginf(out.detach().numpy()).any()
    np.testing.assert_array_equal(out.detach().numpy(), ve.detach().numpy())
    np.testing.assert_array_equal(wc.detach().numpy(), we.detach().numpy())
    np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
    np.testing.assert_array_equal(yc.grad.numpy(), ye.grad.numpy())


def test_double_backward_through_padding_window(path):
    # the gradient of the pooled gradient gathers by index; index -1 reads nothing (zero)
    xn = np.random.default_rng(3).standard_normal((1, 1, 2, 3))
    x = ember.tensor(xn, requires_grad=True)
    v = F.max_pool2d(x, 2, 1, 1, (1, 4))
    g = ember.tensor(np.random.default_rng(4).standard_normal(v.shape), requires_grad=True)
    (gx,) = ember.autograd.grad(v, x, g, create_graph=True)
    w = ember.tensor(np.random.default_rng(5).standard_normal(xn.shape))
    (gg,) = ember.autograd.grad((gx * w).sum(), g)
    idx = F.max_pool2d(x, 2, 1, 1, (1, 4), return_indices=True)[1].numpy()
    want = np.where(idx >= 0, w.numpy().reshape(1, 1, -1)[..., np.maximum(idx, 0).reshape(-1)].reshape(idx.shape), 0)
    np.testing.assert_allclose(gg.numpy(), want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_minus_inf_border_sends_gradient_to_an_input_element(dynamic):
    # -inf inputs next to the padding: the compiled argmax named the padding tap (the fill ties),
    # whose flat index is the previous row's last element -- the gradient landed there
    def f(x):
        return F.max_pool2d(x, 3, 1, 1)

    cf = ember.compile(f, dynamic=dynamic)
    for w in (4, 6):
        xn = np.random.default_rng(w).standard_normal((2, 2, 3, w)).astype(np.float32)
        xn[..., 0] = -np.inf
        xn[0, 0, :, :2] = -np.inf
        g = np.random.default_rng(w + 1).standard_normal((2, 2, 3, w)).astype(np.float32)
        xe, xc = ember.tensor(xn, requires_grad=True), ember.tensor(xn, requires_grad=True)
        ve, vc = f(xe), cf(xc)
        ve.backward(ember.tensor(g))
        vc.backward(ember.tensor(g))
        np.testing.assert_array_equal(vc.detach().numpy(), ve.detach().numpy())
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-6, atol=1e-6)
        _, ie = F.max_pool2d(xe, 3, 1, 1, return_indices=True)
        _, ic = ember.compile(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), dynamic=dynamic)(xc)
        np.testing.assert_array_equal(ic.numpy(), ie.numpy())
