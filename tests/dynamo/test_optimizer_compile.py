"""ember.compile(opt.step): the whole optimizer update captured as one graph, equal to eager.

The first compiled call initialises the optimizer state (its own graph: the state dict's keys
change, so the steady-state entry is compiled on the second call); from then on every call
reuses one graph with no break. Parameters and state must be *identical* to an eager optimizer
stepped beside it: the eager step and the graph run the same float32 element-wise arithmetic
(the graph receives the bias corrections as float64 0-d tensors where eager passes Python
floats; both are converted to float32 by the op)."""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import ember
from ember import dynamo, nn
from ._util import CountingBackend

SEED = 1234


def _model():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))


def _grads(models, x):
    for m in models:
        m.zero_grad()
        (m(x) ** 2).mean().backward()


def _same(a, b, exact=True):
    a, b = a.detach().numpy(), b.detach().numpy()
    if exact:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _same_state(opt_a, opt_b, exact=True):
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert list(sa["state"]) == list(sb["state"])
    for k in sa["state"]:
        assert list(sa["state"][k]) == list(sb["state"][k])
        for key, v in sa["state"][k].items():
            _same(v, sb["state"][k][key], exact)


def _run(make_opt, backend, steps=5, params=None, exact=True, grads=None):
    """Step a compiled and an eager optimizer side by side on the same gradients."""
    ember.manual_seed(SEED)
    model = _model()
    ref = copy.deepcopy(model)
    opt = make_opt(model if params is None else params(model))
    opt_ref = make_opt(ref if params is None else params(ref))
    cstep = ember.compile(opt.step, backend=backend)
    for i in range(steps):
        x = ember.randn(5, 6)
        (grads or _grads)([model, ref], x)
        assert cstep() is None
        opt_ref.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            _same(p, q, exact)
    _same_state(opt, opt_ref, exact)
    return model, ref, opt, opt_ref, cstep


OPTIMIZERS = {
    "adamw": lambda m: ember.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.05),
    "adam": lambda m: ember.optim.Adam(m.parameters(), lr=1e-2),
    "adam-amsgrad-l2-maximize": lambda m: ember.optim.Adam(m.parameters(), lr=1e-2, amsgrad=True,
                                                           weight_decay=0.1, maximize=True),
    "adamw-amsgrad": lambda m: ember.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.8, 0.95), amsgrad=True),
    "sgd-momentum": lambda m: ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, dampening=0.1,
                                              weight_decay=0.01),
    "sgd-nesterov": lambda m: ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True),
    "sgd-plain": lambda m: ember.optim.SGD(m.parameters(), lr=0.05),
    "rmsprop": lambda m: ember.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.5, centered=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_is_one_graph_and_matches_eager(name):
    cnt = CountingBackend()
    _run(OPTIMIZERS[name], cnt, steps=5)
    # call 1: state initialisation; call 2: the steady-state graph, reused by calls 3-5
    # (plain SGD keeps no state: one graph from the first call)
    stateless = name == "sgd-plain"
    assert cnt.frame_count == 1 + (not stateless), (cnt.frame_count, dynamo.fallback_reasons)
    assert dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["recompiles"] == (not stateless)
    assert dynamo.counters["internal_errors"] == 0
    steady = cnt.graphs[-1]
    n_params = len(list(_model().parameters()))
    ops = [n for n in steady.graph.nodes if n.op in ("call_function", "call_method")]
    inputs = [n for n in steady.graph.nodes if n.op == "placeholder"]
    assert len(ops) > n_params and len(inputs) >= 2 * n_params   # every parameter's update is in it


def test_explain_reports_one_graph_no_break():
    ember.manual_seed(SEED)
    model = _model()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    _grads([model], ember.randn(5, 6))
    opt.step()   # state exists: the steady-state trace
    out = dynamo.explain(opt.step)()
    assert out.graph_count == 1 and out.graph_break_count == 0, str(out)
    assert "lerp_" in str(out) and "addcmul_" in str(out)


def test_param_groups_with_different_lr_and_hyperparameters():
    def params(m):
        layers = [m[0], m[2], m[4]]
        return [{"params": layers[0].parameters(), "lr": 0.05},
                {"params": layers[1].parameters(), "betas": (0.8, 0.9)},
                {"params": layers[2].parameters(), "weight_decay": 0.0, "amsgrad": True}]
    cnt = CountingBackend()
    _run(lambda ps: ember.optim.AdamW(ps, lr=1e-2), cnt, params=params)
    assert cnt.frame_count == 2 and dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons


def test_param_without_grad_is_skipped_and_a_new_grad_recompiles():
    frozen = []

    def grads(models, x):
        _grads(models, x)
        if frozen:
            for m in models:
                m[2].weight.grad = None   # this parameter is skipped by both optimizers

    cnt = CountingBackend()
    ember.manual_seed(SEED)
    model, ref = _model(), None
    ref = copy.deepcopy(model)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = ember.optim.AdamW(ref.parameters(), lr=1e-2)
    cstep = ember.compile(opt.step, backend=cnt)
    for i in range(6):
        if i == 2:
            frozen.append(True)
        if i == 4:
            frozen.clear()
        grads([model, ref], ember.randn(5, 6))
        w_before = model[2].weight.detach().clone()
        cstep()
        opt_ref.step()
        if i in (2, 3):
            _same(model[2].weight, w_before)
        for p, q in zip(model.parameters(), ref.parameters()):
            _same(p, q)
    _same_state(opt, opt_ref)
    # init, steady, steady without the grad (a guard on `.grad is None` failed), steady again (cached)
    assert cnt.frame_count == 3, dynamo.fallback_reasons
    assert dynamo.counters["graph_breaks"] == 0


def test_first_step_with_some_grads_missing_initialises_only_those():
    def grads(models, x):
        _grads(models, x)
        for m in models:
            m[0].bias.grad = None
    cnt = CountingBackend()
    _, _, opt, opt_ref, _ = _run(OPTIMIZERS["adam"], cnt, steps=3, grads=grads)
    assert len(opt.state) == len(opt_ref.state) == len(list(_model().parameters())) - 1


def test_changed_lr_recompiles_on_the_float_value():
    cnt = CountingBackend()
    ember.manual_seed(SEED)
    model = _model()
    ref = copy.deepcopy(model)
    opt, opt_ref = ember.optim.AdamW(model.parameters(), lr=1e-2), ember.optim.AdamW(ref.parameters(), lr=1e-2)
    cstep = ember.compile(opt.step, backend=cnt)
    for i in range(4):
        if i == 2:
            for o in (opt, opt_ref):
                o.param_groups[0]["lr"] = 5e-3
        _grads([model, ref], ember.randn(5, 6))
        cstep()
        opt_ref.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            _same(p, q)
    assert cnt.frame_count == 3
    assert any("lr" in e.info.get("guards", "") for c in dynamo.convert_frame._caches.values()
               for e in c.entries)


def test_state_dict_round_trip_after_compiled_steps():
    model, ref, opt, opt_ref, _ = _run(OPTIMIZERS["adamw"], CountingBackend(), steps=3)
    sd = opt.state_dict()
    # a fresh optimizer loading the compiled one's state continues exactly like the eager one
    opt2 = ember.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    opt2.load_state_dict(sd)
    _same_state(opt2, opt_ref)
    cnt = CountingBackend()
    cstep2 = ember.compile(opt2.step, backend=cnt)
    for _ in range(3):
        _grads([model, ref], ember.randn(5, 6))
        cstep2()
        opt_ref.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            _same(p, q)
    _same_state(opt2, opt_ref)
    assert cnt.frame_count == 1   # loaded state: the steady-state graph from the first call
    assert float(opt2.state_dict()["state"][0]["step"]) == 6.0


@pytest.mark.parametrize("name", ["adamw", "adam-amsgrad-l2-maximize", "sgd-nesterov"])
def test_inductor_step_matches_eager(name, monkeypatch):
    """The C++ kernels compute the same float32 operations; with contraction into FMAs off
    (inductor's default lets g++ fuse a*b+c, one rounding instead of two) they are bit-identical."""
    from ember.inductor import config as icfg
    monkeypatch.setattr(icfg, "cpp_flags", list(icfg.cpp_flags) + ["-ffp-contract=off"])
    _run(OPTIMIZERS[name], "inductor", steps=4)
    assert dynamo.counters["compiled"] == 2 and dynamo.counters["graph_breaks"] == 0, dynamo.fallback_reasons
    assert dynamo.counters["eager_fallback"] == 0


def test_inductor_default_flags_close_to_eager():
    _run(OPTIMIZERS["adamw"], "inductor", steps=3, exact=False)
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["eager_fallback"] == 0


def test_step_hooks_run_and_are_guarded():
    ember.manual_seed(SEED)
    model = _model()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    cnt = CountingBackend()
    cstep = ember.compile(opt.step, backend=cnt)
    _grads([model], ember.randn(5, 6))
    cstep()
    calls = []
    h = opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    cstep()   # the hook dict's keys changed: retraced; a call into a lambda that appends to an
    h.remove()  # outside list is not captured (graph break), and the hook still runs once
    assert calls == ["post"]


# ------------------------------------------------------------------ the constructs, in user code
def test_dict_keyed_by_tensors_and_defaultdict_insertion():
    from collections import defaultdict
    ws = [ember.randn(3), ember.randn(4)]
    state = defaultdict(dict)

    def f(ws, state):
        out = []
        for w in ws:
            s = state[w]
            if len(s) == 0:
                s["acc"] = ember.zeros_like(w)
            s["acc"].add_(w * 2)
            out.append(s["acc"].sum())
        return out

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    eager_state = defaultdict(dict)
    for _ in range(3):
        got = cf(ws, state)
        exp = f(ws, eager_state)
        for a, b in zip(got, exp):
            _same(a, b)
    assert [id(k) for k in state] == [id(w) for w in ws]
    for w in ws:
        _same(state[w]["acc"], eager_state[w]["acc"])
    assert cnt.frame_count == 2 and dynamo.counters["graph_breaks"] == 0   # init, then steady
    # a new key object: the identity guard on the dict's keys fails, and it is retraced
    ws.append(ember.randn(2))
    cf(ws, state)
    assert cnt.frame_count == 3 and len(state) == 3


def test_itertools_chain_over_dict_values():
    import itertools
    from collections import OrderedDict
    a, b = OrderedDict(x=1.5, y=2.0), {"z": 3.0}

    def f(t):
        for v in itertools.chain(a.values(), b.values()):
            t = t * v
        for v in itertools.chain.from_iterable([[1.0], (2.0,)]):
            t = t + v
        return t

    cnt = CountingBackend()
    x = ember.randn(4)
    _same(ember.compile(f, backend=cnt)(x), f(x))
    assert cnt.frame_count == 1 and dynamo.counters["graph_breaks"] == 0


def test_non_operator_ember_function_names_the_reason():
    def f(x):
        return x * ember.nn.init._calculate_fan_in_and_fan_out(x)[0]

    out = dynamo.explain(f)(ember.randn(3, 4))
    reason = " ".join(r for _, r, _ in out.break_reasons)
    assert "_calculate_fan_in_and_fan_out is an ember function" in reason
    assert "not an operator" in reason and "returned tuple" in reason


# ------------------------------------------------------------------ inductor writes mutated inputs in place
def _wrapper_sources():
    from ember.dynamo import convert_frame
    out = []
    for c in convert_frame._caches.values():
        for e in c.entries:
            if e.fn is not None:
                out.append(e)
    return out


def test_inductor_updates_parameters_and_state_in_place():
    """The kernels store into the parameters' and state tensors' own arrays: the arrays are the
    same objects after the step (nothing was copied back into them)."""
    ember.manual_seed(SEED)
    model = _model()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    cstep = ember.compile(opt.step, backend="inductor")
    _grads([model], ember.randn(5, 6))
    cstep()
    arrays = [p._data for p in model.parameters()]
    states = [opt.state[p]["exp_avg"]._data for p in model.parameters()]
    from ember.aot import runtime
    copies, wrapped = [], []
    orig = runtime._write_back

    def spy(inputs, positions, values):
        copies.extend(i for i, v in zip(positions, values) if v._data is not inputs[i]._data)
        # the compiled graph hands back the input tensors themselves, not new wrappers
        wrapped.extend(i for i, v in zip(positions, values) if v is not inputs[i])
        return orig(inputs, positions, values)
    runtime._write_back = spy
    try:
        before = [a.copy() for a in arrays]
        cstep()
    finally:
        runtime._write_back = orig
    assert all(p._data is a for p, a in zip(model.parameters(), arrays))
    assert all(opt.state[p]["exp_avg"]._data is a for p, a in zip(model.parameters(), states))
    assert all(not np.array_equal(a, b) for a, b in zip(arrays, before))   # they did change
    assert copies == []   # no mutated input needed a copy back
    assert wrapped == []


@pytest.mark.parametrize("case", ["old_value_read_later", "transposed_read", "returned_old_value"])
def test_inductor_in_place_only_where_no_old_value_is_read_later(case):
    """A mutated input whose old value is still read after the write (by a later kernel, or at
    another element) must not be overwritten early: those graphs stay exact."""
    def old_value_read_later(x, w):
        y = (x * 3).sum(0)          # a reduction (its own kernel) reading the old value ...
        x.add_(w)                   # ... and the mutation
        return y + x.sum(0)

    def transposed_read(x, w):
        x.add_(x.t() * w)           # element (i, j) needs the old x[j, i]
        return x.sum()

    def returned_old_value(x, w):
        old = x.clone()
        x.mul_(w)
        return old, x * 2

    fn = {"old_value_read_later": old_value_read_later, "transposed_read": transposed_read,
          "returned_old_value": returned_old_value}[case]
    cf = ember.compile(fn, backend="inductor")
    for _ in range(3):
        x0, w = ember.randn(6, 6), ember.randn(6, 6)
        xe, xc = x0.clone(), x0.clone()
        exp, got = fn(xe, w), cf(xc, w)
        for a, b in zip(exp if isinstance(exp, tuple) else (exp,), got if isinstance(got, tuple) else (got,)):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-5)   # sums: order
        np.testing.assert_allclose(xc.numpy(), xe.numpy(), rtol=1e-6, atol=1e-6)
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["eager_fallback"] == 0


def test_guard_reads_shared_sources_once_and_still_catches_changes():
    """An optimizer step's guard checks every parameter, gradient and state tensor behind the
    same chains of reads; the generated guard reads each shared chain once into a local
    (``__sN = ...``) instead of re-walking it from the argument per check, and drops the
    ``x is x`` checks a second read of the same source used to add. It must still fail on
    every change it guarded before: a gradient of another shape, a parameter list of other
    length, a state tensor of another dtype."""
    from ember.dynamo import convert_frame
    ember.manual_seed(SEED)
    model = _model()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    cnt = CountingBackend()
    cstep = ember.compile(opt.step, backend=cnt)
    for _ in range(3):
        _grads([model], ember.randn(5, 6))
        cstep()
    assert cnt.frame_count == 2
    code = type(opt).step.__code__
    entries = [e for c, cache in convert_frame._caches.items() for e in cache.entries
               if c.co_name == code.co_name and c.co_filename == code.co_filename]
    src = entries[-1].guard.source
    assert src.count("a0.param_groups") == 1, src            # read once, then a local
    assert "['params']" in src and src.count("['params']") == 1, src
    assert not re.search(r"if not \((\S+) is \1\):", src), src
    g, args = entries[-1].guard, (type(opt).step, opt, None)
    assert g(*args)
    w = model[2].weight
    saved = w.grad
    w.grad = ember.randn(16, 8).t()                           # other strides
    assert not g(*args)
    w.grad = saved
    assert g(*args)
    st = opt.state[w]
    m = st["exp_avg"]
    st["exp_avg"] = m.double()                                # another dtype in the state
    assert not g(*args)
    st["exp_avg"] = m
    opt.param_groups[0]["params"].append(ember.randn(2, requires_grad=True))
    assert not g(*args)
    opt.param_groups[0]["params"].pop()
    assert g(*args)


@pytest.mark.parametrize("name", ["adamw", "sgd-momentum", "rmsprop"])
def test_a_scheduled_learning_rate_is_not_specialised_after_it_changes(name):
    """An LR scheduler changes ``param_groups[0]['lr']`` every step: each value compiled the
    step again until the recompile limit sent it to eager for good. After the first change the
    lr is read unspecialized (a graph input), so the steps reuse one graph, matching eager."""
    cnt = CountingBackend()
    ember.manual_seed(SEED)
    model = _model()
    ref = copy.deepcopy(model)
    opt, opt_ref = OPTIMIZERS[name](model), OPTIMIZERS[name](ref)
    scheds = [ember.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.8) for o in (opt, opt_ref)]
    cstep = ember.compile(opt.step, backend=cnt)
    for i in range(10):
        _grads([model, ref], ember.randn(5, 6))
        cstep()
        opt_ref.step()
        for s in scheds:
            s.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            _same(p, q, exact=False)
    assert cnt.frame_count <= 2, [e.info.get("guards") for c in dynamo.convert_frame._caches.values()
                                   for e in c.entries][-1:]
    assert dynamo.counters["eager_fallback"] == 0


def test_a_function_without_locals_is_compiled():
    """``def step(): opt.step()`` -- PyTorch's recipe for compiling an optimizer -- has a frame
    with no local slot, which the frame hook cannot finish with its stub: it ran eagerly,
    silently. ember.compile now gives such a function one unused local."""
    cnt = CountingBackend()
    ember.manual_seed(SEED)
    model = _model()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.step()

    cstep = ember.compile(step, backend=cnt)
    for _ in range(3):
        _grads([model], ember.randn(5, 6))
        cstep()
    assert cnt.frame_count == 1
    assert ember.compile(lambda: 3, backend=cnt)() == 3
