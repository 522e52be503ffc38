"""Dynamic shapes end to end: dynamo's symbolic graphs through the aot_eager and inductor backends.

A graph dynamo captures with symbolic sizes (``dynamic=True``, or automatic dynamic after a size
change) is compiled by aot *once*, on dynamo's fakes and in dynamo's ShapeEnv, and then serves
every size its guards admit: the graph compilers are called once per graph (forward + backward),
never again for a new batch or sequence length, and forward and gradients match eager at every
size. Compilations are counted with counting graph compilers (``_interpreter_compiler`` for
aot_eager, ``compile_graph`` for inductor)."""
import copy
import logging
import math
import os
import sys

import numpy as np
import pytest

import ember
from ember import dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from benchmarks import models  # noqa: E402

BACKENDS = ["aot_eager", "inductor"]


class Counts:
    def __init__(self):
        self.graphs = 0


@pytest.fixture
def counts(monkeypatch):
    """Counts graph compilations of both backends (forward, backward and inference graphs)."""
    import ember.aot.backends as ab
    import ember.inductor.compile_fx  # noqa: F401
    cfx = sys.modules["ember.inductor.compile_fx"]
    c = Counts()
    interp, compile_graph = ab._interpreter_compiler, cfx.compile_graph

    def counting_interp(gm, ex):
        c.graphs += 1
        return interp(gm, ex)

    def counting_compile(*a, **k):
        c.graphs += 1
        return compile_graph(*a, **k)

    monkeypatch.setattr(ab, "_interpreter_compiler", counting_interp)
    monkeypatch.setattr(cfx, "compile_graph", counting_compile)
    # a fallback to per-shape compilation or to eager would hide a failure: make it raise
    monkeypatch.setattr(ember.aot.config, "debug_dynamic", True)
    monkeypatch.setattr(ember.inductor.config, "debug_lowering", True)
    return c


def _check_step(model, ref, compiled, x, loss):
    out = compiled(x)
    loss(out, x).backward()
    want = ref(x)
    loss(want, x).backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=2e-4, atol=2e-5)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-3, atol=3e-5, err_msg=name)
        p.grad = None
        q.grad = None


def _run_model(which, backend, dynamic, counts, sizes, make_input, scale):
    ember.manual_seed(0)
    case = getattr(models, which)(ember, scale)
    model = case.model
    ref = copy.deepcopy(model)
    compiled = ember.compile(model, backend=backend, dynamic=dynamic)
    seen = []
    for size in sizes:
        _check_step(model, ref, compiled, make_input(model, *size), case.loss)
        seen.append((dynamo.convert_frame.counters["compiled"], counts.graphs))
    return seen


def _mlp_input(model, b):
    return ember.randn(b, model[0].in_features)


def _gpt_input(model, b, t):
    return ember.randint(0, 512, (b, t))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_dynamic_true_compiles_once(backend, counts):
    seen = _run_model("mlp", backend, True, counts, [(5,), (7,), (11,), (13,), (17,)], _mlp_input, 0.05)
    # one dynamo graph, one forward + one backward compilation, for every batch size
    assert seen == [(1, 2)] * 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_automatic_dynamic_compiles_once_after_the_recompile(backend, counts):
    seen = _run_model("mlp", backend, None, counts, [(5,), (7,), (11,), (13,), (17,)], _mlp_input, 0.05)
    # static first graph; the size change makes the batch symbolic: one more graph, then none
    assert [s[0] for s in seen] == [1, 2, 2, 2, 2]
    assert seen[1][1] == seen[-1][1]
    assert len({s[1] for s in seen[1:]}) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_graph_compiles_once(backend, counts):
    ember.manual_seed(0)
    model = models.mlp(ember, 0.05).model
    cm = ember.compile(model, backend=backend, dynamic=True)
    with ember.no_grad():
        for b in (5, 7, 11, 13):
            x = ember.randn(b, model[0].in_features)
            np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=2e-4, atol=2e-5)
    assert dynamo.convert_frame.counters["compiled"] == 1
    assert counts.graphs == 1


def test_sizes_matching_a_width_by_chance_add_no_guard(counts):
    """batch*sequence == width at the first call: broadcasts compare shapes as expressions, so
    nothing pins s0*s1 to 64 (the entry serves other sizes)."""
    nn = ember.nn
    ember.manual_seed(0)
    lin = nn.Linear(64, 64)
    cf = ember.compile(lambda x: lin(x).relu(), backend="aot_eager", dynamic=True)
    for b, t in ((2, 32), (3, 7), (4, 16)):
        x = ember.randn(b, t, 64)
        np.testing.assert_allclose(cf(x).detach().numpy(), lin(x).relu().detach().numpy(), rtol=1e-5, atol=1e-6)
    assert dynamo.convert_frame.counters["compiled"] == 1
    guards = [e.info["guards"] for c in dynamo.convert_frame._caches.values() for e in c.entries if e.fn]
    size_guards = [g for g in guards[0].splitlines() if "size guard" in g]
    assert [g.split(":")[0] for g in size_guards] == ["size guard Eq(s2, 64)"]   # the width only


@pytest.mark.parametrize("dynamic", [True, None])
def test_nanogpt_aot_eager_batch_and_sequence(dynamic, counts):
    sizes = [(2, 5), (3, 7), (4, 9), (5, 11), (6, 13)]
    seen = _run_model("nanogpt", "aot_eager", dynamic, counts, sizes, _gpt_input, 0.1)
    if dynamic:
        assert seen == [(1, 2)] * 5
    else:
        assert [s[0] for s in seen] == [1, 2, 2, 2, 2]
        assert len({s[1] for s in seen[1:]}) == 1


def test_nanogpt_inductor_automatic_dynamic(counts):
    sizes = [(2, 5), (3, 7), (4, 9), (5, 11)]
    seen = _run_model("nanogpt", "inductor", None, counts, sizes, _gpt_input, 0.1)
    assert [s[0] for s in seen] == [1, 2, 2, 2]
    assert len({s[1] for s in seen[1:]}) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_aot_guard_goes_to_dynamo(backend, counts):
    """``alpha=`` of a size: dynamo's own trace needs no guard (one graph with the eager
    backend), aot's needs the value and specialises it. The guard is dynamo's, so another size
    recompiles at the dynamo level (and the answer is right): never a wrong graph reused."""
    def f(x):
        return x.add(x.sin(), alpha=x.size(0))

    alive = []      # (a dropped compiled function's entries go with it)

    def run(be):
        dynamo.reset()
        cf = ember.compile(f, backend=be, dynamic=True)
        alive.append(cf)
        for n in (5, 7, 5):
            x = ember.randn(n, 3)
            np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6)
        return dynamo.convert_frame.counters["compiled"]

    assert run("eager") == 1
    assert run(backend) == 2
    guards = [e.info["guards"] for c in dynamo.convert_frame._caches.values() for e in c.entries if e.fn]
    assert len(guards) == 2 and all("size guard Eq(s0, " in g for g in guards)


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_as_tensor_operand_stays_symbolic(backend, counts):
    def f(x):
        return ((x * x.size(0)).sin() + (x.size(1) - x) / x.size(0), (x > 0).to(ember.int32) * x.size(1))

    cf = ember.compile(f, backend=backend, dynamic=True)
    for n, m in ((5, 3), (7, 4), (9, 6), (11, 2)):
        x = ember.randn(n, m)
        for got, want in zip(cf(x), f(x)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert dynamo.convert_frame.counters["compiled"] == 1


# programs with sizes flowing into creation ops and arithmetic: (program, graphs for 3 sizes)
_PROGRAMS = {
    "arange": (lambda x: x + ember.arange(x.size(1)), 1),
    "arange_float": (lambda x: x * ember.arange(x.size(1), dtype=ember.float32), 1),
    "ones_shape": (lambda x: x + ember.ones(x.shape), 1),
    "new_zeros": (lambda x: x.new_zeros(x.size(0), 3).sum(1, keepdim=True) + x, 1),
    "view": (lambda x: x.view(x.size(0), -1).sum(1), 1),
    "mask": (lambda x: x.masked_fill(ember.ones(x.size(0), x.size(1)).tril() == 0, 0.5), 1),
    # floats derived from sizes specialise with a guard (as torch's specialize_float): exact, per size
    "pow_float": (lambda x: x * x.size(-1) ** -0.5, 3),
    "sqrt": (lambda x: x / math.sqrt(x.size(-1)), 3),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_sizes_into_creation_ops(name, backend, counts):
    f, graphs = _PROGRAMS[name]
    cf = ember.compile(f, backend=backend, dynamic=True)
    for shape in ((4, 6), (5, 8), (7, 10)):
        x = ember.randn(*shape, requires_grad=True)
        got, want = cf(x), f(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        (g,) = ember.autograd.grad(got.sum(), [x])
        (w,) = ember.autograd.grad(want.sum(), [x])
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    assert dynamo.convert_frame.counters["compiled"] == graphs
    assert counts.graphs == 2 * graphs
    assert not dynamo.fallback_reasons


def test_per_shape_fallback_is_logged_and_correct(monkeypatch, caplog):
    """A trace that cannot run on symbolic sizes falls back to one static compilation per shape,
    with the reason logged (never an unchecked guard)."""
    import ember.aot.joint as joint

    def refuse(*a, **k):
        raise NotImplementedError("refused for the test")
    monkeypatch.setattr(joint, "_trace_shared", refuse)

    def f(x):
        return x.view(x.size(0), -1).tanh() * 2.0

    cf = ember.compile(f, backend="aot_eager", dynamic=True)
    with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
        for n in (5, 7, 9):
            x = ember.randn(n, 2, 3)
            np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert dynamo.convert_frame.counters["compiled"] == 1
    assert any("once per input shape" in r.getMessage() and "refused for the test" in r.getMessage()
               for r in caplog.records)
