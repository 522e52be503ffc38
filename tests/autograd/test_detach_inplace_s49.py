"""``Tensor.detach_()`` and views, against torch: detach_ on a view (any view: made with or
without grad, of a leaf or not, multi-output) raises PyTorch's error; detach_ on a base leaves
the views taken before it with their history and gives those taken after none; a detach() /
.data alias is no view and detaches."""
from __future__ import annotations

import numpy as np
import pytest

import ember

_VIEW_MSG = ("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) "
             "for training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and "
             "hence detach_() cannot be called on these gradients. To fix this error, please refer to the "
             "Optimizer.zero_grad() function in {lib}/optim/optimizer.py as the solution.")


def _data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _views(lib, a):
    """Each kind of view detach_ must refuse, built from the leaf data ``a``."""
    def grad_base():
        return lib.tensor(a, requires_grad=True) * 2

    def in_no_grad():
        y = grad_base()
        with lib.no_grad():
            return y[0]
    return {
        "select": lambda: grad_base()[0],
        "view": lambda: grad_base().view(-1),
        "view_of_view": lambda: grad_base()[1:][0],
        "unbind": lambda: grad_base().unbind(0)[1],
        "made_in_no_grad": in_no_grad,
        "of_leaf": lambda: lib.tensor(a, requires_grad=True)[0],
        "of_plain": lambda: lib.tensor(a)[0],
        "of_detached": lambda: grad_base().detach()[0],
    }


@pytest.mark.parametrize("kind", list(_views(ember, _data(0, 2, 2))))
@pytest.mark.parametrize("spelling", ["method", "function"])
def test_detach_inplace_on_a_view_raises_like_torch(kind, spelling):
    torch = pytest.importorskip("torch")
    a = _data(1, 3, 4)
    for lib in (ember, torch):
        v = _views(lib, a)[kind]()
        with pytest.raises(RuntimeError) as err:
            v.detach_() if spelling == "method" else lib.detach_(v)
        assert str(err.value) == _VIEW_MSG.format(lib=lib.__name__)


def _detach_base_with_views(lib, a, g):
    """Views taken before and after ``y.detach_()``: their state, and the gradient a loss on
    the earlier view (and on a view of it) sends to the leaf."""
    x = lib.tensor(a, requires_grad=True)
    y = x * 2 + 1
    z = y[0]
    zz = z[1:]
    out = y.detach_()
    w = y[1]
    state = dict(returns_self=out is y, y=(y.requires_grad, y.grad_fn is None, y.is_leaf),
                 z=(z.requires_grad, type(z.grad_fn).__name__), zz=(zz.requires_grad, type(zz.grad_fn).__name__),
                 w=(w.requires_grad, w.grad_fn is None))
    ((z * lib.tensor(g[0])).sum() + (zz * zz).sum()).backward()
    return state, x.grad.numpy(), y.numpy().copy()


def test_detach_inplace_on_a_base_keeps_earlier_views_history_like_torch():
    torch = pytest.importorskip("torch")
    a, g = _data(2, 3, 4), _data(3, 1, 4)
    got, ge, ye = _detach_base_with_views(ember, a, g)
    want, gt, yt = _detach_base_with_views(torch, a, g)
    assert got == want
    assert want["z"] == (True, "SelectBackward0") and want["w"] == (False, True)
    np.testing.assert_allclose(ye, yt, rtol=1e-6)
    np.testing.assert_allclose(ge, gt, rtol=1e-5, atol=1e-6)
    # float64 reference: d/dx of sum(2 x0 * g) + sum((2 x0[1:] + 1)^2)
    ref = np.zeros((3, 4))
    ref[0] = 2 * g[0].astype(np.float64)
    ref[0, 1:] += 4 * (2 * a[0, 1:].astype(np.float64) + 1)
    np.testing.assert_allclose(ge, ref, rtol=1e-5, atol=1e-5)


def test_detach_and_data_aliases_detach_in_place_like_torch():
    torch = pytest.importorskip("torch")
    a = _data(4, 3, 4)
    for lib in (ember, torch):
        y = lib.tensor(a, requires_grad=True) * 3
        for alias in (y.detach(), y.data):
            assert alias.detach_() is alias and not alias.requires_grad and alias.grad_fn is None
        assert y.requires_grad and y.grad_fn is not None      # the aliased tensor keeps its history


def _inplace_after_detach(lib, a, where):
    x = lib.tensor(a, requires_grad=True)
    y = x * 2
    z = y[0]
    y.detach_()
    if where == "view":
        try:
            z.mul_(3)
        except RuntimeError as e:
            return str(e)
        return "no error"
    y.mul_(3)                      # the base changes under the earlier view
    assert z.requires_grad
    z.sum().backward()
    return type(z.grad_fn).__name__, x.grad, z.detach().numpy().copy()


def test_inplace_on_an_earlier_view_after_detach_raises_like_torch():
    torch = pytest.importorskip("torch")
    a = _data(5, 3, 4)
    got, want = _inplace_after_detach(ember, a, "view"), _inplace_after_detach(torch, a, "view")
    assert got == want == "a view of a leaf Variable that requires grad is being used in an in-place operation."


def test_base_changed_after_detach_cuts_the_earlier_view_like_torch():
    torch = pytest.importorskip("torch")
    a = _data(6, 3, 4)
    (fe, ge, ze), (ft, gt, zt) = _inplace_after_detach(ember, a, "base"), _inplace_after_detach(torch, a, "base")
    assert fe == ft == "AsStridedBackward0"
    assert ge is None and gt is None           # no gradient for values the view no longer holds
    np.testing.assert_allclose(ze, zt, rtol=1e-6)
