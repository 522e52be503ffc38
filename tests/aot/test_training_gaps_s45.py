"""Compiled training vs eager: gaps found by the s45 probes.

A compiled model returning several outputs of which the loss uses only some: eagerly the engine
never reaches the parameters that only the unused outputs lead to (their ``.grad`` stays None,
so the optimizer skips them), while the compiled backward got zero tangents for the unused
outputs and gave those parameters zero gradients -- the optimizer then stepped them (weight
decay, momentum, Adam state), a silent divergence from eager.

A create_graph=True backward through a compiled function one of whose inputs requires grad but
was passed detached (no path to the outputs) raised instead of giving that input None (MAML's
inner step through ``functional_call``)."""
import copy

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dynamo, nn


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=tol, atol=tol)


class _TwoHeads(nn.Module):
    """A trunk and two heads; also returns the trunk's activation."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)
        self.aux = nn.Linear(8, 2)

    def forward(self, x):
        h = ember.tanh(self.trunk(x))
        return self.head(h), self.aux(h), h


def _models():
    ember.manual_seed(0)
    m1 = _TwoHeads()
    return m1, copy.deepcopy(m1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("use_h", [False, True])
def test_unused_outputs_leave_their_parameters_without_grad(backend, use_h):
    m1, m2 = _models()
    dynamo.reset()
    cm = ember.compile(m2, backend=backend)
    x, y = ember.randn(5, 6), ember.randn(5, 3)

    def loss(outs):
        out, _aux, h = outs
        return F.mse_loss(out, y) + (h.pow(2).mean() if use_h else 0)

    loss(m1(x)).backward()
    loss(cm(x)).backward()
    assert m1.aux.weight.grad is None and m1.aux.bias.grad is None
    assert m2.aux.weight.grad is None and m2.aux.bias.grad is None
    for name in ("trunk.weight", "trunk.bias", "head.weight", "head.bias"):
        _close(m1.get_parameter(name).grad, m2.get_parameter(name).grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_unused_head_is_not_stepped_by_the_optimizer(backend):
    # AdamW: with a zero gradient instead of None the unused head decayed and got Adam state
    m1, m2 = _models()
    o1 = ember.optim.AdamW(m1.parameters(), lr=0.01, weight_decay=0.1)
    o2 = ember.optim.AdamW(m2.parameters(), lr=0.01, weight_decay=0.1)
    dynamo.reset()
    cm = ember.compile(m2, backend=backend)
    for _ in range(3):
        x, y = ember.randn(5, 6), ember.randn(5, 3)
        for m, o in ((m1, o1), (cm, o2)):
            o.zero_grad()
            F.mse_loss(m(x)[0], y).backward()
            o.step()
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        _close(p1, p2)
    assert len(o2.state[m2.aux.weight]) == 0
    _close(m1.aux.weight, m2.aux.weight, tol=0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_each_output_alone_gets_its_own_gradients(backend):
    # the same compiled graph, backward from one output and then from the other
    m1, m2 = _models()
    dynamo.reset()
    cm = ember.compile(m2, backend=backend)
    x = ember.randn(5, 6)
    e_out, e_aux, _ = m1(x)
    c_out, c_aux, _ = cm(x)
    e_aux.sum().backward(retain_graph=True)
    c_aux.sum().backward(retain_graph=True)
    assert m2.head.weight.grad is None and m2.head.bias.grad is None
    _close(m1.aux.weight.grad, m2.aux.weight.grad)
    _close(m1.trunk.weight.grad, m2.trunk.weight.grad)
    e_out.pow(2).sum().backward()
    c_out.pow(2).sum().backward()
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        _close(p1.grad, p2.grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_create_graph_with_an_unused_output(backend):
    # the create_graph=True backward differentiates the original function eagerly: the unused
    # output's missing gradient is left out there too
    m1, m2 = _models()
    dynamo.reset()
    cm = ember.compile(m2, backend=backend)
    x1 = ember.randn(5, 6, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    for m, x in ((m1, x1), (cm, x2)):
        out = m(x)[0]
        g, = ember.autograd.grad(out.sum(), x, create_graph=True)
        (out.pow(2).mean() + g.pow(2).sum()).backward()
    assert m2.aux.weight.grad is None
    for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        if p1.grad is None:
            assert p2.grad is None, n
        else:
            _close(p1.grad, p2.grad)


def test_unused_outputs_after_an_aot_cache_hit(fresh_cache):
    # the second compile finds the graphs in the aot cache (no joint graph is traced): which
    # tangents each gradient reads comes back with the cached entry
    from ember.aot import cache
    m1, m2 = _models()
    x, y = ember.randn(5, 6), ember.randn(5, 3)
    hits = []
    for m in (m1, m2):
        dynamo.reset()
        hits.append(cache.stats["hits"])
        F.mse_loss(ember.compile(m, backend="aot_eager")(x)[0], y).backward()
        assert m.aux.weight.grad is None and m.aux.bias.grad is None
        _close(m1.head.weight.grad, m.head.weight.grad)
    assert cache.stats["hits"] > hits[1] == hits[0]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_create_graph_with_an_input_used_only_detached(backend):
    # an input that requires grad but reaches the outputs only through .detach() is passed to
    # the compiled function detached; the create_graph=True backward (re-run eagerly) asked the
    # engine for its gradient anyway: "One of the differentiated Tensors does not require grad"
    def f(x, w):
        return (x * x * 3).sum() + w.detach().sum()

    dynamo.reset()
    x = ember.randn(4, requires_grad=True)
    w = ember.randn(3, requires_grad=True)
    out = ember.compile(f, backend=backend)(x, w)
    g, = ember.autograd.grad(out, x, create_graph=True)
    _close(x * 6, g)
    g.sum().backward()
    _close(ember.full((4,), 6.0), x.grad)
    assert w.grad is None


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_maml_inner_step_through_functional_call(backend):
    # MAML: the inner gradient with create_graph=True on a compiled function (functional_call
    # breaks the graph: the resumed graph receives the parameters only to pass them on)
    from ember.func import functional_call
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = ember.randn(5, 6), ember.randn(5, 3)

    def outer(params, x, y):
        loss = F.mse_loss(functional_call(m, params, (x,)), y)
        grads = ember.autograd.grad(loss, list(params.values()), create_graph=True)
        fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
        return F.mse_loss(functional_call(m, fast, (x,)), y)

    p1 = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    p2 = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    dynamo.reset()
    outer(p1, x, y).backward()
    ember.compile(outer, backend=backend)(p2, x, y).backward()
    for k in p1:
        _close(p1[k].grad, p2[k].grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gradient_penalty_through_batch_norm_updates_running_stats_once(backend):
    # the create_graph=True backward re-runs the function eagerly: it updated the running stats
    # (and num_batches_tracked) a second time; it now runs on copies of the written inputs
    ember.manual_seed(0)
    m1 = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 1))
    m2 = copy.deepcopy(m1)
    dynamo.reset()
    cm = ember.compile(m2, backend=backend)
    x = ember.randn(7, 6)

    def penalty(m):
        xi = x.clone().requires_grad_()
        out = m(xi)
        g, = ember.autograd.grad(out.sum(), xi, create_graph=True)
        return out.mean() + ((g.norm(2, dim=1) - 1) ** 2).mean()

    penalty(m1).backward()
    penalty(cm).backward()
    assert int(m2[1].num_batches_tracked) == int(m1[1].num_batches_tracked) == 1
    _close(m1[1].running_mean, m2[1].running_mean)
    _close(m1[1].running_var, m2[1].running_var)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        _close(p1.grad, p2.grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_double_backward_through_dropout_raises(backend):
    # the eager re-run drew another dropout mask: the gradients were those of another function
    # (about half the elements of d out/d x were zero where out was not, and the reverse)
    def f(x, w):
        return ember.nn.functional.dropout(x * w, 0.5)

    dynamo.reset()
    x = (ember.rand(100) + 0.5).requires_grad_()
    w = (ember.rand(100) + 0.5).requires_grad_()
    out = ember.compile(f, backend=backend)(x, w)
    with pytest.raises(RuntimeError, match="random numbers"):
        ember.autograd.grad(out.sum(), x, create_graph=True)
    g, = ember.autograd.grad(out.sum(), x)          # a first-order gradient is fine
    assert bool(((g != 0) == (out != 0)).all())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_double_backward_reading_a_written_input_raises(backend):
    # the outputs read the input's value from before the call; the eager re-run started from the
    # updated value (gradients off by the update, and the update applied twice)
    def f(x, buf):
        buf.add_(1)
        return (x * buf).sum()

    dynamo.reset()
    x = ember.randn(4, requires_grad=True)
    buf = ember.randn(4)
    before = buf.clone()
    out = ember.compile(f, backend=backend)(x, buf)
    with pytest.raises(RuntimeError, match="written in place"):
        ember.autograd.grad(out, x, create_graph=True)
    _close(before + 1, buf)
