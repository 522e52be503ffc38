"""AOT: joint graphs, functionalization, partitioners and the runtime wrapper, against eager."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.aot import aot_function, default_partition, min_cut_partition, trace_joint
from ember.aot.backends import _identity_compiler
from ember.func import functional_call


def _decomp_choices():
    out = [None]
    try:
        from ember.prims.table import decomposition_table  # noqa: F401
        out.append("prims")
    except Exception:   # noqa: BLE001 - prims may not exist on this checkout
        pass
    return out


def _table(kind):
    if kind is None:
        return None
    from ember.prims.table import decomposition_table
    return decomposition_table()


def _compile(fn, inputs, decomp=None, budget=None):
    return aot_function(fn, inputs, fw_compiler=_identity_compiler, decompositions=_table(decomp),
                        memory_budget=budget)


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


# ------------------------------------------------------------------ functions
def test_pointwise_function_values_grads_and_grad_fn():
    def f(x, y):
        return ((x * y).exp() * 2 + x).sum(), (x * 3).detach()

    x = ember.randn(3, 4, requires_grad=True)
    y = ember.randn(3, 4, requires_grad=True)
    m = _compile(f, [x, y])
    out, side = m(x, y)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    assert not side.requires_grad
    out.backward()
    gx, gy = x.grad, y.grad
    x.grad = y.grad = None
    ref, ref_side = f(x, y)
    ref.backward()
    _close(out, ref)
    _close(side, ref_side)
    _close(gx, x.grad)
    _close(gy, y.grad)


def test_new_inputs_reuse_compiled_graphs_and_accumulate():
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = ember.randn(4, 3), ember.randn(3, 5, requires_grad=True)
    m = _compile(f, [x, w])
    for _ in range(3):
        x2 = ember.randn(4, 3)
        m(x2, w).backward()
    acc = w.grad
    w.grad = None
    # eager, same inputs again, is what accumulated: recompute with fresh draws is not comparable,
    # so check one step exactly
    x3 = ember.randn(4, 3)
    m(x3, w).backward()
    g_compiled = w.grad
    w.grad = None
    f(x3, w).backward()
    _close(g_compiled, w.grad)
    assert acc.shape == w.shape


def test_inference_path_when_no_grad():
    def f(x, w):
        return (x @ w).relu()

    x, w = ember.randn(4, 3), ember.randn(3, 5, requires_grad=True)
    m = _compile(f, [x, w])
    with ember.no_grad():
        out = m(x, w)
    assert out.grad_fn is None
    _close(out, f(x, w))


def test_retain_graph_hooks_and_create_graph():
    def f(x):
        return (x.sin() * x).sum()

    x = ember.randn(5, requires_grad=True)
    m = _compile(f, [x])
    out = m(x)
    seen = []
    out.register_hook(lambda g: seen.append(g.item()))
    out.backward(retain_graph=True)
    out.backward()
    assert seen == [1.0, 1.0]
    g_twice = x.grad.clone()
    x.grad = None
    f(x).backward()
    _close(g_twice, 2 * x.grad)
    # double backward: correct and differentiable (eager fallback)
    (g,) = ember.autograd.grad(m(x), [x], create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), [x])
    x2 = x.detach().requires_grad_()
    (r,) = ember.autograd.grad(f(x2), [x2], create_graph=True)
    (rr,) = ember.autograd.grad(r.sum(), [x2])
    _close(g, r)
    _close(gg, rr)


# ------------------------------------------------------------------ functionalization
def test_inplace_on_view_of_input_is_written_back():
    def f(x, y):
        x[0].mul_(3)
        x[:, 1].add_(y[:, 0])
        return (x * y).sum()

    x, y = ember.randn(3, 4), ember.randn(3, 4, requires_grad=True)
    xc = x.clone()
    m = _compile(f, [xc.clone(), y])
    out = m(xc, y)
    ref_x = x.clone()
    ref = f(ref_x, y)
    _close(out, ref)
    _close(xc, ref_x)


def test_batchnorm_running_stats_update_like_eager():
    bn = nn.BatchNorm1d(6)
    bn_ref = copy.deepcopy(bn)
    names = [n for n, _ in bn.named_parameters()] + [n for n, _ in bn.named_buffers()]

    def f(x, *tensors):
        return functional_call(bn, dict(zip(names, tensors)), (x,)).pow(2).mean()

    tensors = [t for _, t in bn.named_parameters()] + [t for _, t in bn.named_buffers()]
    x = ember.randn(8, 6)
    m = _compile(f, [x] + tensors)
    for step in range(3):
        xs = ember.randn(8, 6)
        out = m(xs, *tensors)
        out.backward()
        ref = bn_ref(xs).pow(2).mean()
        ref.backward()
        _close(out, ref)
        _close(bn.running_mean, bn_ref.running_mean)
        _close(bn.running_var, bn_ref.running_var)
        assert int(bn.num_batches_tracked.item()) == int(bn_ref.num_batches_tracked.item()) == step + 1
        _close(bn.weight.grad, bn_ref.weight.grad)


# ------------------------------------------------------------------ partitioners
def test_min_cut_saves_less_than_baseline_and_matches():
    def f(x, w):
        h = x @ w
        return (h.sigmoid() * h.tanh() + h.exp()).sum()

    x, w = ember.randn(8, 16), ember.randn(16, 32, requires_grad=True)
    joint = trace_joint(f, [x, w])
    _, _, _, base = default_partition(joint)
    fw, bw, saved, cut = min_cut_partition(joint)
    assert cut.saved_bytes < base.saved_bytes, (str(base), str(cut))
    assert cut.recomputed
    # the matmul is never recomputed
    assert not any("mm" in n or "matmul" in n for n in cut.recomputed), cut.recomputed
    assert "saved tensor" in str(cut)
    for budget in (1.0, 0.0):
        m = _compile(f, [x, w], budget=budget)
        m(x, w).backward()
        g = w.grad
        w.grad = None
        f(x, w).backward()
        _close(g, w.grad, 1e-4)
        w.grad = None


# ------------------------------------------------------------------ models over AdamW steps
def _mlp():
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))


def _cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 2 * 2, 4))


class _Block(nn.Module):
    def __init__(self, d=16, heads=4, classes=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.head(x.mean(dim=1))


class _LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, batch_first=True)
        self.head = nn.Linear(12, 4)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


_MODELS = {
    "mlp": (_mlp, lambda: ember.randn(16, 10)),
    "cnn": (_cnn, lambda: ember.randn(4, 3, 8, 8)),
    "transformer": (_Block, lambda: ember.randn(4, 5, 16)),
    "lstm": (_LSTMNet, lambda: ember.randn(4, 5, 6)),
}


@pytest.mark.parametrize("decomp", _decomp_choices())
@pytest.mark.parametrize("kind", sorted(_MODELS))
def test_training_steps_match_eager(kind, decomp):
    build, data = _MODELS[kind]
    ember.manual_seed(0)
    model = build()
    ref = copy.deepcopy(model)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    loss_fn = nn.CrossEntropyLoss()

    def step_fn(x, y, *ps):
        return loss_fn(functional_call(model, dict(zip(names, ps)), (x,)), y)

    x0, y0 = data(), ember.randint(0, 4, (data().shape[0],))
    compiled = _compile(step_fn, [x0, y0] + params, decomp)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = ember.optim.AdamW(ref.parameters(), lr=1e-2)
    for _ in range(3):
        x, y = data(), ember.randint(0, 4, (x0.shape[0],))
        opt.zero_grad()
        opt_ref.zero_grad()
        loss = compiled(x, y, *params)
        loss.backward()
        loss_ref = loss_fn(ref(x), y)
        loss_ref.backward()
        _close(loss, loss_ref, 1e-4)
        for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=n)
        opt.step()
        opt_ref.step()


def test_dynamic_joint_graph_serves_other_sizes():
    def f(x, w):
        return ((x @ w).softmax(-1) * x.sum(1, keepdim=True)).sum()

    w = ember.randn(3, 5, requires_grad=True)
    m = aot_function(f, [ember.randn(4, 3), w], fw_compiler=_identity_compiler,
                     decompositions=_table("prims") if "prims" in _decomp_choices() else None, dynamic=True)
    for n in (4, 7, 2):
        x = ember.randn(n, 3)
        out = m(x, w)
        out.backward()
        g = w.grad
        w.grad = None
        ref = f(x, w)
        ref.backward()
        _close(out, ref)
        _close(g, w.grad)
        w.grad = None


def test_ember_compile_backend_aot_eager_matches_eager_over_adamw_steps():
    ember.manual_seed(0)
    model = _mlp()
    ref = copy.deepcopy(model)
    compiled = ember.compile(model, backend="aot_eager")
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = ember.optim.AdamW(ref.parameters(), lr=1e-2)
    for _ in range(3):
        x = ember.randn(16, 10)
        opt.zero_grad()
        opt_ref.zero_grad()
        loss = compiled(x).pow(2).mean()
        loss.backward()
        loss_ref = ref(x).pow(2).mean()
        loss_ref.backward()
        assert type(loss.grad_fn).__name__ != "NoneType"
        _close(loss, loss_ref, 1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            _close(p.grad, q.grad, 1e-5)
        opt.step()
        opt_ref.step()


def test_aot_logs_print_graphs(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_LOGS", "aot_graphs,aot_joint_graph")

    def f(x, w):
        return (x * w).sum()

    m = _compile(f, [ember.randn(3), ember.randn(3, requires_grad=True)])
    m(ember.randn(3), ember.randn(3, requires_grad=True))
    out = capsys.readouterr().err
    assert "aot joint graph" in out and "aot forward graph" in out and "aot backward graph" in out
    assert "saved tensor" in out


def test_outputs_that_are_views_of_inputs_alias_them():
    def f(x, w):
        return x[1:].t(), (x * w).sum(), x

    x = ember.randn(4, 3)
    w = ember.randn(3, requires_grad=True)
    m = _compile(f, [x, w])
    view, s, same = m(x, w)
    ref_view, ref_s, _ = f(x, w)
    _close(view, ref_view)
    _close(s, ref_s)
    assert view.stride() == ref_view.stride() and view.storage_offset() == ref_view.storage_offset()
    view.mul_(0)                  # writes through the output reach the input, as eagerly
    assert float(x[1:].abs().sum()) == 0.0
    same.add_(1)
    assert float(x[0].sum()) != 0.0
    # a view of an input that requires grad: gradients flow through the view
    y = ember.randn(4, 3, requires_grad=True)
    m2 = _compile(lambda y: (y[::2] * 2, y.sum()), [y])
    v, t = m2(y)
    (v.sum() + t).backward()
    g = y.grad
    y.grad = None
    v2, t2 = (lambda y: (y[::2] * 2, y.sum()))(y)
    (v2.sum() + t2).backward()
    _close(g, y.grad)
    z = ember.randn(4, 3, requires_grad=True)
    m3 = _compile(lambda z: z.view(-1)[2:5], [z])
    out = m3(z)
    out.sum().backward()
    assert out._base is z and float(z.grad.sum()) == 3.0


def test_outputs_aliasing_each_other_stay_aliased():
    def f(x, w):
        h = x @ w
        return h, h.view(-1)[1:], h.sum()

    x, w = ember.randn(3, 4), ember.randn(4, 5, requires_grad=True)
    m = _compile(f, [x, w])
    h, tail, s = m(x, w)
    rh, rtail, rs = f(x, w)
    _close(h, rh)
    _close(tail, rtail)
    (tail.sum() * 2 + s).backward()
    g = w.grad
    w.grad = None
    (rtail.sum() * 2 + rs).backward()
    _close(g, w.grad)
    with ember.no_grad():
        tail.zero_()
    assert float(h.view(-1)[1:].abs().sum()) == 0.0 and float(h.view(-1)[0]) == float(rh.view(-1)[0])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_output_that_is_a_prefix_of_another_is_regenerated_from_it(backend):
    """``(v[0:3], v)``: the prefix comes first and is itself a contiguous buffer at offset 0;
    v was regenerated as a 7x9 view of that 3x9 output and read past its end (garbage rows,
    found by the fuzzer, seed 1534). The larger output is the base, the prefix its view."""
    def f(x):
        v = x * 8.0
        return v[0:3], v, v[2:, 1:]

    data = np.random.default_rng(4).standard_normal((7, 9)).astype(np.float32)
    cf = ember.compile(f, backend=backend)
    for grad in (False, True):
        with ember.set_grad_enabled(grad):
            got = cf(ember.tensor(data.copy()))
        want = f(ember.tensor(data.copy()))
        for g, w in zip(got, want):
            _close(g, w)
        assert got[0]._base is got[1] and got[2]._base is got[1]     # aliased as eagerly
        with ember.no_grad():
            got[0].zero_()
        assert float(got[1][:3].abs().sum()) == 0.0
    ember.compiler.reset()


def test_index_assignment_into_an_input_is_written_back():
    def f(x, idx, v):
        x[idx] = v
        return x.sum()

    x, idx, v = ember.randn(5, 3), ember.tensor([0, 3]), ember.randn(2, 3)
    m = _compile(f, [x.clone(), idx, v])
    xc, xr = x.clone(), x.clone()
    _close(m(xc, idx, v), f(xr, idx, v))
    _close(xc, xr)


def test_memory_budget_that_cannot_be_met_warns(caplog):
    def f(x, w):
        return (x @ w).exp().sum()

    x, w = ember.randn(4, 8), ember.randn(8, 8, requires_grad=True)
    joint = trace_joint(f, [x, w])
    from ember.aot import partition
    with caplog.at_level("WARNING", logger="ember.aot"):
        partition(joint, 0.01)
    assert "cannot be met" in caplog.text


def test_pointwise_chain_min_cut_saves_at_most_half():
    def chain(x, w):
        y = x * w
        for _ in range(9):
            y = (y.sin() + 0.5) if _ % 2 else y.tanh() * 1.5
        return y.sum()

    x = ember.randn(1_000_000)
    w = ember.randn(1_000_000, requires_grad=True)
    joint = trace_joint(chain, [x, w], decompositions=_table("prims") if "prims" in _decomp_choices() else None)
    *_, base = default_partition(joint)
    *_, cut = min_cut_partition(joint)
    assert cut.saved_bytes * 2 <= base.saved_bytes, (str(base), str(cut))
    assert "recomputed in backward" in str(cut)
    grads = []
    for budget in (1.0, 0.0):
        m = _compile(chain, [x, w], "prims" if "prims" in _decomp_choices() else None, budget=budget)
        m(x, w).backward()
        grads.append(w.grad)
        w.grad = None
    chain(x, w).backward()
    _close(grads[0], grads[1], 1e-6)
    _close(grads[1], w.grad, 1e-5)


def test_data_dependent_op_raises_a_clear_error_and_dynamo_breaks_there():
    from ember.aot import AOTUnsupported

    def f(x):
        return (x[ember.nonzero(x > 0).squeeze(1)] * 2).sum()

    with pytest.raises(AOTUnsupported, match="nonzero") as err:
        trace_joint(f, [ember.randn(6, requires_grad=True)])
    assert err.value.op == "nonzero"
    x = ember.randn(6, requires_grad=True)
    cf = ember.compile(f, backend="aot_eager")
    out = cf(x)
    _close(out, f(x))


def test_default_partition_saves_transcendentals_a_budget_recomputes_them():
    """GELU(tanh) between two products (a transformer MLP): with no memory budget the cut does
    not go above the tanh -- its result is saved, not recomputed in the backward; with a budget
    (compute traded for memory) it is recomputed, saving fewer bytes. Gradients agree."""
    from ember.aot.partition import partition

    def f(x, w1, w2):
        u = x @ w1
        t = (0.79788456 * (u + 0.044715 * u * u * u)).tanh()
        return ((0.5 * u * (1.0 + t)) @ w2).sum()

    x = ember.randn(64, 32)
    w1, w2 = ember.randn(32, 128, requires_grad=True), ember.randn(128, 16, requires_grad=True)
    joint = trace_joint(f, [x, w1, w2], decompositions=_table("prims") if "prims" in _decomp_choices() else None)
    *_, fast = partition(joint)
    *_, lean = partition(joint, 0.0)
    assert not any("tanh" in n for n in fast.recomputed), str(fast)
    assert any("tanh" in n for n in lean.recomputed), str(lean)
    assert lean.saved_bytes < fast.saved_bytes
    grads = []
    for budget in (None, 0.0):
        m = _compile(f, [x, w1, w2], "prims" if "prims" in _decomp_choices() else None, budget=budget)
        m(x, w1, w2).backward()
        grads.append((w1.grad, w2.grad))
        w1.grad = w2.grad = None
    f(x, w1, w2).backward()
    for (g1, g2) in grads:
        _close(g1, w1.grad, 1e-4)
        _close(g2, w2.grad, 1e-4)
