"""The C fast path of compiled entries' guards (ember/_C/guards.c, session 34): a tensor's check
(type, dtype, device, shape, strides, requires_grad) is one ``TensorGuard`` call, a dict's keys
one ``keys_are`` call. Pinned here: every kind of change still fails the guard, with the C checks
and with the Python expressions they replace (the fallback where the extension is not built);
the recompile log names the failing guard in both; the C checks answer as the expressions do on
many tensor pairs; and the fast path is the one taken (counted by the extension)."""
from __future__ import annotations

import collections
import logging

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.dynamo import guards

from ._util import CountingBackend

MODES = ["c", "python"]


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    """'c': the C checks (the extension must be built: ``pip install -e .``); 'python': the
    expressions used where it is not."""
    if request.param == "python":
        monkeypatch.setattr(guards, "_CGUARDS", None)
        monkeypatch.setattr(guards, "_keys_are", guards._py_keys_are)
    else:
        assert guards._CGUARDS is not None, "ember._C._guards is not built: run `pip install -e .`"
    return request.param


class _Src:
    def __init__(self, e):
        self.e = e

    def expr(self):
        return self.e


def _guard_for(t, dyn=None):
    """A compiled guard function checking argument ``a0`` against ``t`` (the current mode)."""
    def func(a):
        return a
    gs = guards.GuardSet(func)
    if dyn is None:
        gs.tensor_match(_Src("a0"), t)
    else:
        gs.dynamic_tensor_match(_Src("a0"), t, dyn)
    g = gs.compile(1)
    return lambda x: g(func, x), g


class Sub(ember.Tensor):
    pass


def _variants():
    """Name -> (base tensor maker, changed tensor maker): the changed one must fail the base's guard."""
    return {
        "dtype": lambda b: b.double(),
        "shape": lambda b: ember.randn(b.shape[0] + 1, b.shape[1]),
        "rank": lambda b: ember.randn(b.shape[0] * b.shape[1]),
        "strides": lambda b: ember.randn(b.shape[1], b.shape[0]).t(),      # same shape, a view
        "sliced view": lambda b: ember.randn(b.shape[0], 2 * b.shape[1])[:, ::2],
        "requires_grad": lambda b: ember.randn(*b.shape, requires_grad=True),
        "subclass": lambda b: ember.randn(*b.shape).as_subclass(Sub),
        "Parameter": lambda b: nn.Parameter(ember.randn(*b.shape), requires_grad=False),
        "device": lambda b: ember.randn(*b.shape, device="meta"),
    }


@pytest.mark.parametrize("kind", list(_variants()))
def test_each_change_fails_the_tensor_guard(mode, kind):
    base = ember.randn(4, 3)
    check, g = _guard_for(base)
    assert ("o" in g.source and "_data).shape" not in g.source) == (mode == "c")
    assert check(base) and check(ember.randn(4, 3))           # fresh values, same layout: passes
    assert not check(_variants()[kind](base))


@pytest.mark.parametrize("kind", list(_variants()))
def test_each_change_recompiles_and_the_log_names_the_guard(mode, kind, caplog):
    ember.dynamo.reset()
    cnt = CountingBackend()

    def f(x):
        return x * 2 + 1

    cf = ember.compile(f, backend=cnt, dynamic=False)
    base = ember.randn(4, 3)
    cf(base)
    cf(ember.randn(4, 3))
    assert cnt.frame_count == 1
    n = ember.dynamo.counters["recompiles"]
    with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
        cf(_variants()[kind](base))
    assert ember.dynamo.counters["recompiles"] == n + 1      # (a meta tensor then runs eagerly)
    msgs = [r.getMessage() for r in caplog.records if "guard failed" in r.getMessage()]
    assert msgs and "guard failed: a0 is a Tensor(dtype=ember.float32, device=cpu, shape=(4, 3), " \
                    "strides=(3, 1), requires_grad=False)" in msgs[0], msgs


def test_data_and_set_replacing_the_array_fail_the_guard(mode):
    ember.dynamo.reset()
    cnt = CountingBackend()
    w = ember.randn(4, 3)

    def f(x):
        return x * w

    cf = ember.compile(f, backend=cnt, dynamic=False)
    x = ember.randn(4, 3)
    cf(x)
    cf(x)
    assert cnt.frame_count == 1
    w.data = ember.randn(4, 3)                 # same layout through .data: still served
    cf(x)
    assert cnt.frame_count == 1
    w.data = ember.randn(3, 4).t()             # another layout through .data
    out = cf(x)
    assert cnt.frame_count == 2
    np.testing.assert_allclose(out.numpy(), (x * w).numpy())
    w.data = ember.randn(4, 3).double()        # another dtype through .data
    cf(x)
    assert cnt.frame_count == 3
    w.set_(ember.randn(4, 6).double()[:, ::2])  # set_: a view with other strides
    out = cf(x)
    assert cnt.frame_count == 4
    np.testing.assert_allclose(out.numpy(), (x * w).numpy(), rtol=1e-6)
    x.set_(ember.randn(2, 6))                   # the argument itself, another shape
    with pytest.raises(RuntimeError):
        cf(x)                                   # (traced anew: 2x6 * 4x3 does not broadcast)
    assert cnt.frame_count == 4


def test_recompile_reasons_are_the_same_in_both_modes(monkeypatch, caplog):
    def reasons():
        ember.dynamo.reset()
        caplog.clear()

        def f(a, b, d):
            return a + b * d["k"]

        cf = ember.compile(f, backend=CountingBackend(), dynamic=False)
        a, b = ember.randn(3), ember.randn(3)
        cf(a, b, {"k": 2.0})
        with caplog.at_level(logging.INFO, logger="ember.dynamo.recompiles"):
            cf(a, b.double(), {"k": 2.0})
            cf(a, b.double(), {"k": 2.0, "j": 1})
        return [r.getMessage() for r in caplog.records if "guard failed" in r.getMessage()]

    fast = reasons()
    monkeypatch.setattr(guards, "_CGUARDS", None)
    monkeypatch.setattr(guards, "_keys_are", guards._py_keys_are)
    slow = reasons()
    assert len(fast) == 2 and fast == slow
    assert "a1 is a Tensor(dtype=ember.float32" in fast[0]
    assert "a2 has keys ['k']" in fast[1]


def _tensors():
    r = np.random.default_rng(34)
    base = ember.tensor(r.standard_normal((4, 6)).astype(np.float32))
    out = [base, base.t(), base[:, ::2], base[1:3], base[:, 1:2], ember.randn(4, 6), ember.randn(6, 4).t(),
           ember.randn(4, 6).double(), ember.randn(4, 6, requires_grad=True), ember.randn(()),
           ember.randn(0, 6), ember.randn(4, 1), ember.randn(4, 1).expand(4, 6), ember.randn(24),
           ember.randn(4, 6).as_subclass(Sub), nn.Parameter(ember.randn(4, 6)), ember.randn(4, 6, device="meta"),
           ember.randint(0, 5, (4, 6)), ember.randn(2, 4, 6)[0], ember.randn(4, 6).to(ember.float16)]
    return out


def test_c_checks_answer_as_the_python_expressions(monkeypatch):
    assert guards._CGUARDS is not None, "ember._C._guards is not built: run `pip install -e .`"
    ts = _tensors()
    dyn_sets = [None, None, {0}, {1}, {0, 1}]
    fast = []
    for t in ts:
        for dyn in dyn_sets:
            if dyn is not None and (t.ndim != 2 or not t.is_contiguous()):
                continue
            fast.append((t, dyn, _guard_for(t, dyn)[0]))
    monkeypatch.setattr(guards, "_CGUARDS", None)
    n = 0
    for t, dyn, check in fast:
        slow = _guard_for(t, dyn)[0]
        for u in ts:
            assert check(u) == slow(u), (tuple(t.shape), t.stride(), dyn, tuple(u.shape), u.stride(), u.dtype)
            n += check(u)
    assert n > len(fast)            # some pairs pass (each tensor its own), many fail


def test_errors_inside_the_c_check_fail_it():
    G = guards._CGUARDS
    assert G is not None
    t = ember.randn(2, 3)
    g = G.TensorGuard(ember.Tensor, t.dtype, t.device, "_requires_grad", False, (2, 3), (12, 4), 4)
    assert g(t) and not g(ember.randn(3, 2))

    class Odd(ember.Tensor):
        @property
        def _data(self):
            raise ValueError("no array")

    odd = ember.randn(2, 3).as_subclass(Odd)
    g2 = G.TensorGuard(Odd, t.dtype, t.device, "_requires_grad", False, (2, 3), (12, 4), 4)
    assert g2(odd) is False                       # the exception is a failed check, cleared
    u = ember.randn(2, 3)
    u._data = [[1, 2, 3], [4, 5, 6]]              # no shape attribute: failed, cleared
    assert g(u) is False
    with pytest.raises(TypeError):
        g()
    with pytest.raises(TypeError):
        G.TensorGuard(ember.Tensor, t.dtype, t.device, "_requires_grad", 1, (2, 3), (12, 4), 4)
    with pytest.raises(TypeError):
        G.TensorGuard(ember.Tensor, t.dtype, t.device, "_requires_grad", False, (2, 3), (12,), 4)


def test_keys_are_matches_the_list_comparison():
    G = guards._CGUARDS
    assert G is not None

    class Key(str):
        def __eq__(self, other):
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    dd = collections.defaultdict(int, a=1, b=2)
    cases = [({"a": 1, "b": 2}, ("a", "b")), ({"a": 1, "b": 2}, ("b", "a")), ({"a": 1}, ("a", "b")),
             ({"a": 1, "b": 2}, ("a",)), ({}, ()), (od, ("b", "a")), (od, ("a", "b")), (dd, ("a", "b")),
             ({Key("a"): 1}, ("a",)), ({1: 0, 2.5: 1}, (1, 2.5)), ({(1, 2): 0}, ((1, 2),))]
    for d, keys in cases:
        assert G.keys_are(d, keys) == (list(d.keys()) == list(keys)), (d, keys)
    assert G.keys_are(5, ()) is False and G.keys_are(None, ("a",)) is False


def test_the_fast_path_is_taken_for_arguments_modules_and_optimizer_state():
    G = guards._CGUARDS
    assert G is not None
    ember.dynamo.reset()

    def f(a, b):
        return a * b

    cf = ember.compile(f, backend=CountingBackend())
    a, b = ember.randn(5), ember.randn(5)
    cf(a, b)
    before = G.counters()
    for _ in range(10):
        cf(a, b)
    after = G.counters()
    assert after[0] - before[0] == 20 and after[1] == before[1]      # two tensors a call, none failed

    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    cm = ember.compile(model, backend=CountingBackend())
    x = ember.randn(2, 6)
    cm(x)
    before = G.counters()
    cm(x)
    assert G.counters()[0] - before[0] == 5          # the input and four parameters

    params = [nn.Parameter(ember.randn(3, 2)) for _ in range(3)]
    for p in params:
        p.grad = ember.randn(3, 2)
    opt = ember.optim.AdamW(params, lr=1e-2)
    step = ember.compile(opt.step, backend=CountingBackend())
    for _ in range(3):
        step()
    before = G.counters()
    step()
    # param, grad, step, exp_avg, exp_avg_sq of each parameter, and nothing failed on the way
    assert G.counters()[0] - before[0] == 15 and G.counters()[1] == before[1]
    p0 = params[0]
    opt.state[p0]["exp_avg"] = opt.state[p0]["exp_avg"].t().contiguous().t()   # another stride
    ref = [p.detach().clone() for p in params]
    before = G.counters()
    step()
    assert G.counters()[1] > before[1]                # the failed check was the C one
    assert not any(np.array_equal(p.detach().numpy(), r.numpy()) for p, r in zip(params, ref))


def test_guard_filter_fn_still_sees_one_entry_per_tensor(mode):
    ember.dynamo.reset()
    seen = []

    def keep_all(entries):
        seen.extend(entries)
        return [True] * len(entries)

    lin = nn.Linear(4, 2)
    cf = ember.compile(lin, backend=CountingBackend(), options={"guard_filter_fn": keep_all})
    cf(ember.randn(3, 4))
    tm = [e for e in seen if e.guard_type == "TENSOR_MATCH"]
    assert sorted(e.is_parameter for e in tm) == [False, True, True]
    assert all(e.name and e.orig_guard[1].startswith(e.name + " is a ") for e in tm)

    def drop_tensor_checks(entries):
        return [e.guard_type != "TENSOR_MATCH" for e in entries]

    ember.dynamo.reset()
    cnt = CountingBackend()
    g = ember.compile(lambda x: x + 1, backend=cnt, dynamic=False, options={"guard_filter_fn": drop_tensor_checks})
    g(ember.randn(3))
    g(ember.randn(3).double())                      # not checked any more: served by the entry
    assert cnt.frame_count == 1


def test_roots_distinct_matches_memory_sharing():
    G = guards._CGUARDS
    assert G is not None
    r = np.random.default_rng(7)
    base = ember.randn(6, 5)
    pool = [base, base[1:], base[:, 2], base[2:][1:], base.t(), ember.randn(3), ember.randn(3).view(3, 1),
            ember.randn(2, 2)] + [ember.randn(2) for _ in range(30)]
    for _ in range(200):
        k = int(r.integers(0, 24))
        ts = [pool[i] for i in r.choice(len(pool), size=k, replace=bool(r.integers(0, 2)))]
        want = guards._memory_sharing(*ts)[:k] == tuple(range(k)) if ts else True
        assert G.roots_distinct(*ts) == want == guards._py_roots_distinct(*ts)
    assert G.roots_distinct(base, None) is False            # not a tensor: a failed check


def test_memory_sharing_guard_in_c_and_python(mode):
    """A graph that writes an input is keyed to how its inputs share memory: a call whose inputs
    share where the traced ones did not (or the reverse) compiles again, in both modes."""
    ember.dynamo.reset()
    cnt = CountingBackend()

    def f(a, b):
        a.add_(1)
        return a * b

    cf = ember.compile(f, backend=cnt, dynamic=False)
    x, y = ember.randn(4), ember.randn(4)
    ex, ey = x.clone(), y.clone()
    out = cf(x, y)
    np.testing.assert_allclose(out.numpy(), ((ex + 1) * ey).numpy(), rtol=1e-6)
    cf(ember.randn(4), ember.randn(4))
    assert cnt.frame_count == 1
    has = [("__roots_distinct(" in s) for s in gs_sources(cf)]
    assert has and (any(has) if mode == "c" else not any(has))
    assert any("__memory_sharing(" in s for s in gs_sources(cf)) == (mode == "python")
    z = ember.randn(8)
    a, b = z[:4], z[4:]                                    # two views of one tensor
    ez = z.clone()
    out = cf(a, b)
    assert cnt.frame_count == 2
    np.testing.assert_allclose(out.numpy(), ((ez[:4] + 1) * ez[4:]).numpy(), rtol=1e-6)


def gs_sources(cf):
    from ember.dynamo.convert_frame import _caches
    return [e.guard.source for c in _caches.values() for e in c.entries if e.guard is not None]
