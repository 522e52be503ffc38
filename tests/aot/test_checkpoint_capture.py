"""``ember.utils.checkpoint`` inside a compiled function is captured, not a graph break.

dynamo inlines the checkpointed function and tags its nodes (``meta["recompute"]``); aot
carries the tags into the joint graph; both partitioners then save the region's inputs and
recompute its values in the backward -- matmuls included, random draws excepted. A region
dynamo cannot capture whole (a ``print``, a side effect, keyword arguments with ``use_reentrant=True``) makes the
checkpoint call a graph break, run eagerly, as before."""
from __future__ import annotations

import copy
from contextlib import nullcontext as _nullcontext

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import dynamo
from ember.aot import aot_function
from ember.aot.backends import _interpreter_compiler
from ember.utils.checkpoint import checkpoint, checkpoint_sequential


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


_rng = np.random.default_rng(20240611)


def _randn(*shape, requires_grad=False):
    t = ember.tensor(_rng.standard_normal(shape).astype(np.float32))
    return t.requires_grad_(True) if requires_grad else t


def _randomize(model):
    """Parameters drawn from the test's numpy generator (never zeros, never ember's stream)."""
    with ember.no_grad():
        for p in model.parameters():
            p.copy_(_randn(*p.shape) * 0.5)
    return model


class _Recorder:
    """An aot backend (prims run by the fx Interpreter) keeping each AOTModule (its partition
    report) and each backward graph."""

    def __init__(self, budget=None):
        self.budget = budget
        self.modules = []
        self.backward_graphs = []

    def __call__(self, gm, example_inputs):
        def bw_compiler(g, ex):
            self.backward_graphs.append(g)
            return _interpreter_compiler(g, ex)
        m = aot_function(gm, example_inputs, fw_compiler=_interpreter_compiler, bw_compiler=bw_compiler,
                         decompositions="prims", memory_budget=self.budget)
        self.modules.append(m)
        return m

    @property
    def report(self):
        reports = [m.report for m in self.modules if m.report is not None]
        assert len(reports) == 1, reports
        return reports[0]


def _same(got, want, tol=1e-5):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol)


def _train_and_compare(model, compiled_model, make_input, steps=2, loss=lambda out: (out * out).sum()):
    """Forward values and gradients (parameters and input) of eager vs compiled, step by step."""
    for _ in range(steps):
        x = make_input()
        xe, xc = x.detach().clone().requires_grad_(True), x.detach().clone().requires_grad_(True)
        model.zero_grad()
        compiled_model.zero_grad()
        want, got = model(xe), compiled_model(xc)
        _same(got, want)
        loss(want).backward()
        loss(got).backward()
        _same(xc.grad, xe.grad)
        for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
            assert q.grad is not None, name
            _same(q.grad, p.grad)


# ------------------------------------------------------------------ models
class MLPNet(nn.Module):
    """An MLP block checkpointed (a bound method, with a keyword argument) between two layers."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.out = nn.Linear(16, 3)

    def block(self, h, scale=1.0):
        return self.fc2(F.gelu(self.fc1(h))) * scale

    def forward(self, x):
        h = F.relu(self.inp(x))
        h = checkpoint(self.block, h, use_reentrant=False, scale=0.5)
        return self.out(h.tanh())


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.l1 = nn.Linear(d, 2 * d)
        self.l2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


class LoopNet(nn.Module):
    """Checkpointed modules (the module itself is the function) in a loop with residuals."""

    def __init__(self, n=3, d=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for b in self.blocks:
            x = x + checkpoint(b, x, use_reentrant=False)
        return x


class LambdaNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        return checkpoint(lambda t, k: self.lin(t).sin() * k, x, 2.0, use_reentrant=False)


# ------------------------------------------------------------------ values and gradients
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_checkpointed_mlp_block_matches_eager(backend):
    model = _randomize(MLPNet())
    compiled = ember.compile(copy.deepcopy(model), backend=backend)
    _train_and_compare(model, compiled, lambda: _randn(4, 6))


@pytest.mark.parametrize("budget", [1.0, None])
def test_checkpointed_modules_in_a_loop_match_eager(budget):
    model = _randomize(LoopNet())
    rec = _Recorder(budget)
    compiled = ember.compile(copy.deepcopy(model), backend=rec)
    _train_and_compare(model, compiled, lambda: _randn(4, 8))


def test_checkpointed_lambda_with_positional_extra_argument_matches_eager():
    model = _randomize(LambdaNet())
    compiled = ember.compile(copy.deepcopy(model), backend="aot_eager")
    _train_and_compare(model, compiled, lambda: _randn(3, 5))


def test_checkpoint_sequential_is_captured_and_matches_eager():
    seq = _randomize(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = seq

        def forward(self, x):
            return checkpoint_sequential(self.seq, 2, x, use_reentrant=False)

    model = Net()
    ex = dynamo.explain(copy.deepcopy(model))(_randn(4, 6))
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), str(ex)
    compiled = ember.compile(copy.deepcopy(model), backend="aot_eager")
    _train_and_compare(model, compiled, lambda: _randn(4, 6))


# ------------------------------------------------------------------ capture: one graph, tagged nodes
def test_explain_shows_one_graph_and_tagged_regions():
    model = _randomize(LoopNet(n=3))
    ex = dynamo.explain(model)(_randn(4, 8))
    assert ex.graph_count == 1 and ex.graph_break_count == 0, str(ex)
    ops = ex.ops_per_graph[0]
    regions = {}
    for n in ops:
        if n.meta.get("recompute") == "checkpoint":
            regions.setdefault(n.meta["checkpoint_region"], []).append(n)
    assert sorted(regions) == [1, 2, 3]
    for nodes in regions.values():      # linear, relu, linear per block
        assert len(nodes) == 3, [n.name for n in nodes]
    # the residual adds are outside the regions
    adds = [n for n in ops if getattr(n.target, "__name__", n.target) in ("add", "iadd")]
    assert adds and all("recompute" not in n.meta for n in adds)


# ------------------------------------------------------------------ partition
def _names(report):
    return [name for name, _, _ in report.saved]


@pytest.mark.parametrize("budget", [1.0, None])
def test_checkpointed_matmul_is_recomputed_not_saved(budget):
    model = _randomize(MLPNet())
    rec = _Recorder(budget)
    compiled = ember.compile(copy.deepcopy(model), backend=rec)
    x = _randn(4, 6, requires_grad=True)
    compiled(x).sum().backward()
    report = rec.report
    # fc1's matmul is computed again in the backward (with budget 1.0 not fc2's: its output is
    # not needed there, the backward reads the tanh after the region, which is saved) ...
    mms = [r for r in report.recomputed if r == "mm" or r.startswith("mm_")]
    assert len(mms) >= 1, str(report)
    assert not any(n in _names(report) for n in mms), str(report)
    bw = rec.backward_graphs[-1]
    bw_nodes = {n.name for n in bw.graph.nodes}
    assert set(mms) <= bw_nodes
    # ... from the region's input (relu's output) and the parameters, which are saved
    assert "maximum" in _names(report), str(report)
    assert "recomputed in backward" in str(report)

    # without the checkpoint no matmul is recomputed (min-cut never recomputes one)
    class Plain(MLPNet):
        def forward(self, x):
            return self.out(self.block(F.relu(self.inp(x)), scale=0.5).tanh())

    plain = Plain()
    plain.load_state_dict(model.state_dict())
    rec2 = _Recorder(budget)
    ember.compile(plain, backend=rec2)(x).sum().backward()
    assert not any(r == "mm" or r.startswith("mm_") for r in rec2.report.recomputed), str(rec2.report)
    assert rec2.report.saved_bytes > report.saved_bytes


def test_loop_saves_each_region_input():
    model = _randomize(LoopNet(n=3))
    rec = _Recorder(None)
    compiled = ember.compile(copy.deepcopy(model), backend=rec)
    compiled(_randn(4, 8, requires_grad=True)).sum().backward()
    saved = _names(rec.report)
    # inputs of blocks 2 and 3 (the residual sums), not the hidden activations (4x16)
    activations = [(name, shape) for name, shape, _ in rec.report.saved if shape == "[4, 16]"]
    assert not activations, str(rec.report)
    assert sum(1 for name, shape, _ in rec.report.saved if shape == "[4, 8]") == 3, str(rec.report)
    assert any(n.startswith("add") for n in saved), str(rec.report)


def test_aot_cache_key_tells_checkpointed_graphs_apart():
    from ember.aot import cache

    rec = _Recorder()
    model = _randomize(MLPNet())
    ember.compile(model, backend=rec)(_randn(4, 6, requires_grad=True)).sum().backward()
    aot = rec.modules[0]
    stripped = copy.deepcopy(aot.fn)
    for n in stripped.graph.nodes:
        n.meta.pop("recompute", None)
        n.meta.pop("checkpoint_region", None)
    plain = aot_function(stripped, aot.example_inputs, fw_compiler=_interpreter_compiler, decompositions="prims")
    assert cache.key_lines(aot, True) != cache.key_lines(plain, True)


# ------------------------------------------------------------------ random ops
def test_dropout_in_region_saves_the_mask_and_gradients_follow_the_forward():
    """Compiled draws are not eager's (Philox in the graph), so no comparison with eager under a
    seed: what must hold is that the backward uses the forward's mask, not a new draw."""
    def region(x, w):
        return F.dropout(x * w, 0.5, True).sin()

    def f(x, w):
        return checkpoint(region, x, w, use_reentrant=False)

    rec = _Recorder()
    cf = ember.compile(f, backend=rec)
    x = _randn(256)
    for _ in range(2):
        w = _randn(256, requires_grad=True)
        out = cf(x, w)
        out.sum().backward()
        o, xv, wv = out.detach().numpy(), x.numpy(), w.detach().numpy()
        kept = o != 0
        assert 0.3 < kept.mean() < 0.7
        # out = sin(2 x w m)  =>  d sum(out) / dw = cos(2 x w m) * 2 x m
        want = np.cos(2 * xv * wv * kept) * 2 * xv * kept
        np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    report = rec.report
    assert report.checkpoint_random, str(report)
    assert "random ops in checkpointed regions" in str(report)
    bw = rec.backward_graphs[-1]
    assert not any("rand" in n.name or "rng" in n.name for n in bw.graph.nodes), bw.code
    # same seed, same draw (and the same gradient)
    w0 = _randn(256)
    grads = []
    for _ in range(2):
        ember.manual_seed(7)
        w = w0.clone().requires_grad_(True)
        cf(x, w).sum().backward()
        grads.append(w.grad.numpy().copy())
    np.testing.assert_array_equal(grads[0], grads[1])


# ------------------------------------------------------------------ falling back: a break at the call
def _break_reasons(ex):
    return " | ".join(r for _, r, _ in ex.break_reasons)


def test_print_in_region_breaks_at_the_checkpoint_call_and_matches_eager(capsys):
    lin = _randomize(nn.Linear(4, 4))

    def region(t):
        print("in the region")
        return lin(t).tanh()

    def f(x):
        return checkpoint(region, x, use_reentrant=False).sum()

    ex = dynamo.explain(f)(_randn(3, 4))
    assert ex.graph_break_count >= 1 and "activation checkpointing" in _break_reasons(ex), str(ex)
    capsys.readouterr()
    x = _randn(3, 4)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    want = f(xe)
    want.backward()
    eager_prints = capsys.readouterr().out.count("in the region")
    ge = lin.weight.grad.numpy().copy()
    lin.zero_grad()
    got = ember.compile(f, backend="aot_eager")(xc)
    got.backward()
    assert capsys.readouterr().out.count("in the region") == eager_prints == 2
    _same(got, want)
    _same(xc.grad, xe.grad)
    np.testing.assert_allclose(lin.weight.grad.numpy(), ge, rtol=1e-5, atol=1e-6)


def test_uncapturable_region_called_from_a_helper_breaks_at_the_checkpoint_call():
    """Inlined into the frame's function, the failing region breaks the frame at the helper's
    call; the helper's own frame then breaks at the checkpoint call: no break inside the
    region either way."""
    lin, pre = _randomize(nn.Linear(4, 4)), _randomize(nn.Linear(4, 4))

    def region(t):
        print("in the region")
        return lin(t).tanh()

    def helper(h):
        return checkpoint(region, h * 2, use_reentrant=False) + 1

    def f(x):
        return helper(pre(x).relu()).sum()

    ex = dynamo.explain(f)(_randn(3, 4))
    assert ex.graph_break_count == 2, str(ex)
    assert all("activation checkpointing" in r for _, r, _ in ex.break_reasons), str(ex)
    x = _randn(3, 4)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    f(xe).backward()
    ge = [p.grad.numpy().copy() for p in (lin.weight, pre.weight)]
    lin.zero_grad()
    pre.zero_grad()
    ember.compile(f, backend="aot_eager")(xc).backward()
    _same(xc.grad, xe.grad)
    for p, g in zip((lin.weight, pre.weight), ge):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)


def _regions(ex):
    return {n.meta["checkpoint_region"] for ops in ex.ops_per_graph for n in ops
            if n.meta.get("recompute") == "checkpoint"}


@pytest.mark.filterwarnings("ignore:ember.utils.checkpoint")
@pytest.mark.parametrize("use_reentrant", [True, None])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_reentrant_checkpoint_of_an_input_requiring_grad_is_a_region(use_reentrant, backend):
    """``use_reentrant=True`` (or unset: True, with a warning) with an input that requires grad
    has the plain function's gradients: captured as a recomputed region (it was a graph break)."""
    model = _randomize(Block())

    def f(x):
        return checkpoint(model, x, use_reentrant=use_reentrant)

    ex = dynamo.explain(f)(_randn(2, 8, requires_grad=True))
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), str(ex)
    assert _regions(ex) == {1}
    x = _randn(2, 8)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    with pytest.warns(UserWarning, match="use_reentrant") if use_reentrant is None else _nullcontext():
        (f(xe) ** 2).sum().backward()
    ge = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    (ember.compile(f, backend=backend)(xc) ** 2).sum().backward()
    _same(xc.grad, xe.grad)
    for p, g in zip(model.parameters(), ge):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:None of the inputs")
def test_reentrant_checkpoint_without_grad_inputs_records_no_autograd_like_eager():
    """Eager's reentrant checkpoint runs the function under ``no_grad`` when no input requires
    grad: its output does not require grad although the block has parameters. Captured as a
    ``no_grad`` block (not a region); an input that requires grad recompiles (the tensor guard's
    ``requires_grad``) into a region with gradients."""
    model = _randomize(Block())

    def f(x):
        return checkpoint(model, x, use_reentrant=True) * 2

    x = _randn(3, 8)
    want = f(x)
    assert not want.requires_grad
    ex = dynamo.explain(f)(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), str(ex)
    assert _regions(ex) == set()
    cf = ember.compile(f, backend="aot_eager")
    got = cf(x)
    assert not got.requires_grad
    _same(got, want)
    xc = x.clone().requires_grad_(True)
    out = cf(xc)
    assert out.requires_grad
    out.sum().backward()
    xe = x.clone().requires_grad_(True)
    model.zero_grad()
    f(xe).sum().backward()
    _same(xc.grad, xe.grad)


def test_reentrant_checkpoint_with_function_keyword_arguments_breaks_as_eager_raises():
    model = _randomize(Block())

    def f(x):
        return checkpoint(lambda t, k: model(t) * k, x, use_reentrant=True, k=2.0)

    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        f(_randn(2, 8, requires_grad=True))
    dynamo.reset()
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        ember.compile(f, backend="aot_eager")(_randn(2, 8, requires_grad=True))


def test_reentrant_checkpoint_sequential_is_captured():
    seq = _randomize(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))

    def f(x):
        return checkpoint_sequential(seq, 2, x, use_reentrant=True)

    ex = dynamo.explain(f)(_randn(4, 6, requires_grad=True))
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), str(ex)
    assert _regions(ex) == {1}
    x = _randn(4, 6)
    xe, xc = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    f(xe).sum().backward()
    ge = [p.grad.numpy().copy() for p in seq.parameters()]
    seq.zero_grad()
    ember.compile(f, backend="aot_eager")(xc).sum().backward()
    _same(xc.grad, xe.grad)
    for p, g in zip(seq.parameters(), ge):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)


def test_region_writing_outside_state_breaks_and_matches_eager():
    """BatchNorm's running statistics: eager's recomputation updates them a second time, so the
    region runs eagerly (captured, they would be updated once)."""
    model = _randomize(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)))
    compiled_copy = copy.deepcopy(model)

    def make(m):
        return lambda x: checkpoint(m, x, use_reentrant=False).tanh()

    ex = dynamo.explain(make(copy.deepcopy(model)))(_randn(6, 4, requires_grad=True))
    assert "writes in place" in _break_reasons(ex), str(ex)
    x = _randn(6, 4)
    make(model)(x.clone().requires_grad_(True)).sum().backward()
    ember.compile(make(compiled_copy), backend="aot_eager")(x.clone().requires_grad_(True)).sum().backward()
    _same(compiled_copy[1].running_mean, model[1].running_mean)
    _same(compiled_copy[1].running_var, model[1].running_var)
    _same(compiled_copy[0].weight.grad, model[0].weight.grad)


def test_region_with_a_side_effect_on_an_outside_list_breaks():
    seen = []
    lin = _randomize(nn.Linear(3, 3))

    def region(t):
        seen.append(1)
        return lin(t)

    ex = dynamo.explain(lambda x: checkpoint(region, x, use_reentrant=False).sum())(_randn(2, 3, requires_grad=True))
    assert ex.graph_break_count >= 1 and "activation checkpointing" in _break_reasons(ex), str(ex)


def test_no_grad_call_is_captured_as_inference():
    model = _randomize(MLPNet())
    compiled = ember.compile(copy.deepcopy(model), backend="aot_eager")
    x = _randn(4, 6)
    with ember.no_grad():
        got, want = compiled(x), model(x)
    assert not got.requires_grad
    _same(got, want)
