"""In-place ops on views under autograd (CopySlices, regenerated view grad_fns), compared with torch."""
import numpy as np
import pytest

import ember
from oracle import assert_close, needs_torch, rand_array, torch

pytestmark = needs_torch


def both(fn, shape=(3, 4), dtype="float64"):
    """Run fn(m, x) with a fresh leaf x under ember and torch; compare the output and x.grad of
    sum(out * c)."""
    arr = rand_array(shape, dtype)
    xe, xt = ember.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)
    oe, ot = fn(ember, xe), fn(torch, xt)
    assert_close(oe, ot)
    c = rand_array(tuple(ot.shape), dtype)
    (oe * ember.tensor(c)).sum().backward()
    (ot * torch.tensor(c)).sum().backward()
    assert_close(xe.grad, xt.grad)
    return oe, ot


def name(fn):
    return fn.name().replace("torch::autograd::", "") if fn is not None else None


def test_inplace_on_column_view():
    def f(m, x):
        y = x.clone()
        y[:, 0].mul_(2)
        return y
    oe, ot = both(f)
    assert name(oe.grad_fn) == name(ot.grad_fn) == "CopySlices"


@pytest.mark.parametrize("view", [lambda y: y.view(-1), lambda y: y[1:], lambda y: y.t(), lambda y: y[:, ::2],
                                  lambda y: y.diagonal(), lambda y: y.unsqueeze(0)[0, 1], lambda y: y.narrow(1, 1, 2),
                                  lambda y: y[1:, 1:].transpose(0, 1), lambda y: y[..., None]])
@pytest.mark.parametrize("op", ["add", "mul", "exp", "setitem"])
def test_inplace_on_views_then_use_base(view, op):
    def f(m, x):
        y = x * 1.5
        v = view(y)
        if op == "add":
            v.add_(1)
        elif op == "mul":
            v.mul_(v.detach() + 2)
        elif op == "exp":
            v.exp_()
        else:
            v[...] = 3.0
        return y * y
    both(f)


def test_chain_of_views_and_multiple_inplace():
    def f(m, x):
        y = x.clone()
        a = y[1:]
        b = a[:, 1:3]
        b.mul_(x[0, :2])          # value depends on the leaf too
        a[0].add_(5)
        y.t()[0].sub_(y[2].detach()[:3])
        return y * y
    both(f)


def test_view_taken_before_inplace_on_base_is_regenerated():
    def f(m, x):
        y = x * 2
        v = y[1]                  # view made before the in-place
        y.mul_(3)
        return v * v              # v must see the new values and route grad through the base
    oe, ot = both(f)
    xe = ember.randn(3, 4, requires_grad=True)
    xt = torch.tensor(xe.detach().numpy(), requires_grad=True)
    ye, yt = xe * 2, xt * 2
    ve, vt = ye[1], yt[1]
    assert name(ve.grad_fn) == name(vt.grad_fn) == "SelectBackward0"
    ye.mul_(3)
    yt.mul_(3)
    assert name(ve.grad_fn) == name(vt.grad_fn) == "AsStridedBackward0"


def test_inplace_on_base_seen_by_several_views():
    def f(m, x):
        y = x + 0
        v1, v2 = y[:, :2], y.view(-1)
        y.add_(x.detach())        # base modified
        v1.mul_(2)                # then a view
        return v2 * 3 + v1.sum()
    both(f)


def test_version_counters_shared():
    x = ember.zeros(3, 4)
    v = x.view(-1)
    w = x[1]
    assert v._version == w._version == x._version == 0
    v.add_(1)
    assert x._version == w._version == 1
    w.mul_(2)
    x[0, 0] = 7.0
    assert v._version == 3 and x._version == 3
    assert x.sum().item() == torch.tensor([[7.0, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1]]).sum().item()
    d = x.detach()
    d.zero_()
    assert x._version == 4 and x.sum().item() == 0.0


def test_leaf_view_errors():
    x = ember.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        x[0].add_(1)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        x.view(-1).mul_(2)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x.add_(1)
    with ember.no_grad():
        x[0].add_(1)
        x.view(-1).mul_(1)
    assert x._version == 2


def test_saved_tensor_version_error_after_inplace_on_view():
    x = ember.randn(3, 4, requires_grad=True)
    y = x * 1
    z = y * y                     # saves y
    y[0].add_(1)                  # modifies y through a view
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        z.sum().backward()
    # the same through a view's own save
    x2 = ember.randn(3, 4, requires_grad=True)
    y2 = x2 * 1
    v = y2[1]
    w = v * v                     # saves the view v
    y2.mul_(2)                    # the base changes: v's version moves with it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_setitem_value_gets_gradient_through_views():
    def f(m, x):
        base = m.zeros(4, 5, dtype=x.dtype)
        base[1:3, ::2] = x[:2, :3] * 2
        base[0] = x[2, 0]
        base[[3, 3], [0, 4]] = x[0, :2]
        return base
    oe, ot = both(f)


def test_inplace_on_unbind_and_split_outputs_values():
    # PyTorch forbids in-place on multi-output views under autograd; ember allows it (more
    # permissive) and still gives correct values and gradients through CopySlices.
    x = ember.randn(3, 4, requires_grad=True)
    y = x * 1
    a, b = y.split(2)
    with ember.no_grad():
        b.mul_(0)
    assert y[2].sum().item() == 0.0


def test_iter_reversed():
    x = ember.arange(6.0).reshape(3, 2)
    assert [r.tolist() for r in reversed(x)] == [[4.0, 5.0], [2.0, 3.0], [0.0, 1.0]]
    assert [r.tolist() for r in x] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
