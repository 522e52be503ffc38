"""Autograd engine semantics (seed 003): graph structure, freeing, retain_graph,
create_graph, autograd.grad, hooks, saved-tensor hooks and version checks,
grad modes, anomaly mode, deep chains. Values are checked against exact
closed forms or against PyTorch where it is installed."""
import gc
import math
import sys
import warnings

import numpy as np
import pytest

import ember
from oracle import HAVE_TORCH, assert_close, needs_torch

if HAVE_TORCH:
    import torch


def t(v, **kw):
    return ember.tensor(v, **kw)


# ---------------------------------------------------------------------- structure
def test_node_names_and_next_functions():
    x = t(2.0, requires_grad=True)
    y = x * 3
    z = y + 2
    loss = z ** 2
    assert loss.grad_fn.name() == "PowBackward0"
    nf = loss.grad_fn.next_functions
    assert len(nf) == 1 and nf[0][0] is z.grad_fn and nf[0][1] == 0
    nf = z.grad_fn.next_functions
    assert nf[0][0] is y.grad_fn and nf[1] == (None, 0)
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    assert repr(loss.grad_fn).startswith("<PowBackward0 object at 0x")
    # the same leaf used twice shares one AccumulateGrad node
    w = x * x
    assert w.grad_fn.next_functions[0][0] is w.grad_fn.next_functions[1][0]


def test_leaf_and_requires_grad_flags():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="floating point"):
        t([1, 2]).requires_grad_()
    assert not t([1.0]).requires_grad and t([1.0]).grad_fn is None


def test_seed_values():
    x = t(2.0, requires_grad=True)
    (x ** 2 + 3 * x + 1).backward()
    assert x.grad.item() == 7.0
    x = t(3.0, requires_grad=True)
    ((x * 2 + 1) ** 2).backward()
    assert x.grad.item() == 28.0
    x = t(2.0, requires_grad=True)
    ((x * 3 + 2) ** 2).backward()
    assert x.grad.item() == 48.0


# ---------------------------------------------------------------------- freeing and retain_graph
def test_backward_twice_raises_and_retain_graph_allows():
    x = t([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.detach().clone()
    y.backward()
    assert_close(x.grad, 2 * g1.numpy())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_accumulation_and_zeroing():
    x = t([1.0, -1.0, 3.0], requires_grad=True)
    for k in range(1, 4):
        (x * x).sum().backward()
        assert_close(x.grad, k * 2 * np.array([1.0, -1.0, 3.0], dtype=np.float32))
    x.grad = None
    (x * 5).sum().backward()
    assert_close(x.grad, np.full(3, 5.0, dtype=np.float32))


def test_grad_not_aliased_between_leaves():
    a = t([1.0, 2.0], requires_grad=True)
    b = t([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    a.grad.mul_(10)
    assert_close(b.grad, np.ones(2, dtype=np.float32))


def test_nonscalar_backward_needs_gradient():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(t([1.0, 0.5]))
    assert_close(x.grad, np.array([2.0, 1.0], dtype=np.float32))
    with pytest.raises(RuntimeError, match="does not require grad"):
        t([1.0]).sum().backward()


def test_nonleaf_grad_warns_and_retain_grad():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.detach() * 3
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None
    y2 = x * 3
    y2.retain_grad()
    (y2 * y2).sum().backward()
    assert_close(y2.grad, 2 * y2.detach().numpy())
    assert not z.requires_grad


# ---------------------------------------------------------------------- autograd.grad / higher order
def test_grad_and_higher_order():
    x = t(2.0, requires_grad=True)
    y = x ** 3
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    assert g.item() == 12.0 and g.requires_grad
    (g2,) = ember.autograd.grad(g, x)
    assert g2.item() == 12.0
    assert x.grad is None  # grad() never touches .grad


def test_grad_allow_unused_and_materialize():
    x = t(1.0, requires_grad=True)
    u = t(1.0, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="^The differentiated Tensor at index 1 appears to not have been used in the graph"):
        ember.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = ember.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)
    assert gx.item() == 2.0 and gu is None
    gx, gu = ember.autograd.grad(y, [x, u], materialize_grads=True)
    assert gu.item() == 0.0


def test_grad_wrt_intermediate():
    x = t([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = ember.autograd.grad(y, h)
    assert_close(gh, 2 * h.detach().numpy())


def test_hessian_via_double_grad():
    x = t([1.0, 2.0, 3.0], requires_grad=True)
    y = (x ** 2).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    (h,) = ember.autograd.grad(g.sum(), x)
    assert_close(h, np.full(3, 2.0, dtype=np.float32))


def test_jacobian_loop_from_seed():
    def f(x):
        return ember.stack([x[0] ** 2 + x[1], x[0] * x[1] ** 2])
    x = t([2.0, 3.0]).requires_grad_()
    y = f(x)
    J = ember.zeros(2, 2)
    for i in range(2):
        go = ember.zeros_like(y)
        go[i] = 1
        J[i] = ember.autograd.grad(y, x, go, retain_graph=True)[0]
    assert_close(J, np.array([[4.0, 1.0], [9.0, 12.0]], dtype=np.float32))


@needs_torch
def test_functional_api_matches_torch():
    from ember.autograd import functional as EF
    import torch.autograd.functional as TF
    a = np.random.default_rng().standard_normal(3).astype(np.float32)

    def fe(x):
        return (x.exp() * x).sum()

    def ft(x):
        return (x.exp() * x).sum()

    def ge(x):
        return x * x.sin() if hasattr(x, "sin") else None

    assert_close(EF.jacobian(lambda x: x * 2 + x * x, t(a)),
                 TF.jacobian(lambda x: x * 2 + x * x, torch.tensor(a, dtype=torch.float32)))
    assert_close(EF.hessian(fe, t(a)), TF.hessian(ft, torch.tensor(a, dtype=torch.float32)), rtol=1e-4,
                 atol=1e-5)
    v = np.random.default_rng().standard_normal(3).astype(np.float32)
    oe, ve = EF.vjp(lambda x: x * x, t(a), t(v))
    ot, vt = TF.vjp(lambda x: x * x, torch.tensor(a, dtype=torch.float32), torch.tensor(v, dtype=torch.float32))
    assert_close(ve, vt)
    oe, je = EF.jvp(lambda x: x * x * 3, t(a), t(v))
    ot, jt = TF.jvp(lambda x: x * x * 3, torch.tensor(a, dtype=torch.float32),
                    torch.tensor(v, dtype=torch.float32))
    assert_close(je, jt)
    oe, he = EF.hvp(fe, t(a), t(v))
    ot, ht = TF.hvp(ft, torch.tensor(a, dtype=torch.float32), torch.tensor(v, dtype=torch.float32))
    assert_close(he, ht, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- hooks
def test_tensor_hook_on_leaf_clips():
    x = t(5.0, requires_grad=True)
    y = x ** 2
    h = x.register_hook(lambda g: ember.clamp(g, -1, 1))
    y.backward()
    assert x.grad.item() == 1.0
    h.remove()
    x.grad = None
    (x ** 2).backward()
    assert x.grad.item() == 10.0


def test_tensor_hook_on_intermediate_modifies_flow():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.detach().clone()) or g * 10)
    (y * y).sum().backward()
    assert_close(seen[0], 2 * y.detach().numpy())
    assert_close(x.grad, 10 * 2 * 2 * y.detach().numpy())


def test_node_hooks_and_prehooks():
    x = t([1.0, 2.0], requires_grad=True)
    y = x * 3
    calls = []
    y.grad_fn.register_prehook(lambda go: calls.append("pre"))
    y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
    y.sum().backward()
    assert calls == ["pre", "post"]


def test_post_accumulate_hook():
    x = t([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.detach().clone()))
    (x * 4).sum().backward()
    assert_close(seen[0], np.full(2, 4.0, dtype=np.float32))


def test_saved_tensors_hooks():
    packed = []

    def pack(x):
        packed.append(tuple(x.shape))
        return x.detach().numpy().copy()

    def unpack(a):
        return ember.tensor(a)

    x = t([1.0, 2.0, 3.0], requires_grad=True)
    with ember.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x * x).sum()
    assert packed
    y.backward()
    assert_close(x.grad, np.array([2.0, 4.0, 6.0], dtype=np.float32))


# ---------------------------------------------------------------------- version counter
def test_inplace_modification_of_saved_tensor_raises():
    a = t([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = b * b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected "
                                           "version 0"):
        c.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    a = t([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        a.add_(1)
    with ember.no_grad():
        a.add_(1)
    assert_close(a, np.array([2.0, 3.0], dtype=np.float32))
    assert a._version == 1


@needs_torch
def test_inplace_rebases_history_like_torch():
    v = np.random.default_rng().standard_normal(4).astype(np.float32)
    xe = t(v, requires_grad=True)
    xt = torch.tensor(v, requires_grad=True)
    for m, x in ((ember, xe), (torch, xt)):
        h = x * 2
        h.mul_(x)
        h.add_(3)
        h.exp_()
        h.sum().backward()
    assert_close(xe.grad, xt.grad, rtol=1e-5)


def test_detach_shares_storage_and_version():
    x = t([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    d.add_(1)
    assert x._version == 1
    assert_close(x.detach(), np.array([2.0, 3.0], dtype=np.float32))


# ---------------------------------------------------------------------- grad modes
def test_grad_modes():
    x = t([1.0], requires_grad=True)
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    with ember.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ember.is_grad_enabled()
    with ember.inference_mode():
        assert not (x * 2).requires_grad

    @ember.no_grad()
    def f(v):
        return v * 2
    assert not f(x).requires_grad and ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    assert ember.is_grad_enabled()


# ---------------------------------------------------------------------- custom Function
class CustomExp(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        r = x.exp()
        ctx.save_for_backward(r)
        return r

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r


def test_custom_function():
    x = t(1.0, requires_grad=True)
    y = CustomExp.apply(x)
    assert type(y.grad_fn).__name__ == "CustomExpBackward"
    assert repr(y.grad_fn).startswith("<ember.autograd.function.CustomExpBackward object at")
    y.backward()
    assert abs(x.grad.item() - math.e) < 1e-6
    assert str(x.grad) == "tensor(2.7183)"


def test_custom_function_ctx_features():
    class F(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            ctx.k = k
            ctx.mark_non_differentiable  # attribute exists
            assert ctx.needs_input_grad == (True, False, False)
            idx = (a > 0)
            ctx.mark_non_differentiable(idx)
            return a * k, idx

        @staticmethod
        @ember.autograd.once_differentiable
        def backward(ctx, g, gidx):
            assert not ember.is_grad_enabled()
            return g * ctx.k, None, None

    a = t([1.0, -2.0], requires_grad=True)
    out, idx = F.apply(a, 3.0, t([1.0]))
    assert not idx.requires_grad
    out.sum().backward()
    assert_close(a.grad, np.full(2, 3.0, dtype=np.float32))


def test_custom_function_mark_dirty():
    class AddOneInplace(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = t([1.0, 2.0], requires_grad=True)
    h = a * 2
    out = AddOneInplace.apply(h)
    assert out is h and h._version >= 1
    (out * out).sum().backward()
    assert_close(a.grad, 2 * 2 * (np.array([2.0, 4.0]) + 1).astype(np.float32))


def test_custom_function_wrong_grad_count():
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return (g,)

    a = t([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(a, t([2.0], requires_grad=True)).sum().backward()


def test_custom_function_setup_context_style():
    class Sq(ember.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = t([3.0], requires_grad=True)
    Sq.apply(x).sum().backward()
    assert x.grad.item() == 6.0


# ---------------------------------------------------------------------- anomaly mode
def test_anomaly_mode_reports_nan_with_forward_trace():
    class NaNGrad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = t([1.0], requires_grad=True)
    with ember.autograd.detect_anomaly():
        y = NaNGrad.apply(x)
        with pytest.raises(RuntimeError, match="returned nan values in its 0th output"):
            with pytest.warns(RuntimeWarning, match="Traceback of forward call"):
                y.sum().backward()
    assert not ember.autograd.is_anomaly_enabled()


# ---------------------------------------------------------------------- scale
def test_deep_chain_backward_no_recursion():
    x = t(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0
    del y
    gc.collect()


def test_diamond_dependency_counting():
    x = t([2.0], requires_grad=True)
    a = x * 2
    b = a * 3
    c = a * 4
    d = b + c          # d = 14x
    e = d * a          # e = 28x^2
    e.sum().backward()
    assert x.grad.item() == 56 * 2.0


def test_backward_inputs_argument():
    x = t([1.0], requires_grad=True)
    w = t([2.0], requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and w.grad.item() == 1.0


# ---------------------------------------------------------------------- checkpoint
def test_checkpoint_matches_plain():
    from ember.utils.checkpoint import checkpoint
    rng = np.random.default_rng()
    v = rng.standard_normal((4, 3)).astype(np.float32)

    def block(z):
        return (z.exp() * z).sum(1)

    x1 = t(v, requires_grad=True)
    block(x1).sum().backward()
    x2 = t(v, requires_grad=True)
    checkpoint(block, x2, use_reentrant=False).sum().backward()
    assert_close(x2.grad, x1.grad.numpy())
