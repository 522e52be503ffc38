"""Tensor arguments that share memory, and graphs that write to them.

A compiled graph that writes to an input is traced for the memory sharing of that call: aot
functionalizes writes to inputs that share no memory as independent, and runs a graph whose
write lands in memory that several inputs share eagerly. A later call whose arguments share
memory differently (f(b[0:5], b[2:7]) after f(x, y)) must not reuse it: the write to ``a``
has to show in ``b``. Every pair of layouts, first call then second, is checked against eager
(results and the memory the arguments live in), through the in-memory guards and through the
aot disk cache (a fresh dynamo with the cache the first layout filled)."""
import numpy as np
import pytest

import ember
from ember import dynamo


def _data(seed):
    return ember.tensor(np.random.default_rng(seed).standard_normal(20).astype(np.float32))


# each layout: data (20 fresh values) -> (the tensors that own the memory, the two arguments)
LAYOUTS = {
    "two tensors": lambda d: ((d[:5].clone(), d[5:10].clone()),) * 2,
    "views of two tensors": lambda d: (lambda x, y: ((x, y), (x[0:5], y[3:8])))(d[:10].clone(), d[10:].clone()),
    "disjoint views of one": lambda d: (lambda b: ((b,), (b[0:5], b[5:10])))(d[:10].clone()),
    "overlapping views": lambda d: (lambda b: ((b,), (b[0:5], b[2:7])))(d[:10].clone()),
    "a tensor and its view": lambda d: (lambda c: ((c,), (c, c[:])))(d[:5].clone()),
    "one row, two view objects": lambda d: (lambda b: ((b,), (b.view(2, 5)[1], b.view(2, 5)[1])))(d[:10].clone()),
}


def _write_first(a, b):
    a.add_(1.0)
    return b * 2.0


def _write_second(a, b):
    b.mul_(3.0)
    return a - 1.0


def _write_both(a, b):
    a.mul_(2.0)
    b.add_(a)
    return a + b


def _run(fn, layout, seed):
    owners, args = LAYOUTS[layout](_data(seed))
    out = fn(*args)
    return out.numpy().copy(), [o.numpy().copy() for o in owners]


def _check(cf, fn, layout, seed):
    got, got_mem = _run(cf, layout, seed)
    want, want_mem = _run(fn, layout, seed)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"result, {layout}")
    for g, w in zip(got_mem, want_mem):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"memory, {layout}")


@pytest.mark.parametrize("fn", [_write_first, _write_second, _write_both], ids=lambda f: f.__name__)
@pytest.mark.parametrize("first", list(LAYOUTS))
def test_a_call_sharing_memory_differently_is_not_served_by_the_first_graph(fn, first):
    cf = ember.compile(fn, backend="aot_eager")
    _check(cf, fn, first, 1)
    for i, second in enumerate(LAYOUTS):
        _check(cf, fn, second, 2 + i)
        _check(cf, fn, first, 20 + i)      # and back: the first layout's graph is still right


@pytest.mark.parametrize("first", ["views of two tensors", "two tensors"])
def test_the_aot_cache_tells_views_of_one_tensor_from_views_of_two(first, tmp_path, monkeypatch):
    """Through the aot disk cache: an entry made for two tensors' views is looked up for disjoint
    and then overlapping views of one tensor (the key itself: test_aot_cache)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_AOT_CACHE", raising=False)
    _check(ember.compile(_write_first, backend="aot_eager"), _write_first, first, 1)
    dynamo.reset()
    cf = ember.compile(_write_first, backend="aot_eager")
    _check(cf, _write_first, "disjoint views of one", 2)
    _check(cf, _write_first, "overlapping views", 3)


def test_inductor_graph_is_not_reused_for_overlapping_views():
    cf = ember.compile(_write_first)
    _check(cf, _write_first, "views of two tensors", 1)
    _check(cf, _write_first, "overlapping views", 2)
    _check(cf, _write_first, "views of two tensors", 3)


def test_only_graphs_that_write_have_the_sharing_guard():
    """The check walks every tensor argument's views: only graphs that write pay for it."""
    def pure(a, b):
        return a * b + 1.0

    def writes(a, b):
        a.add_(b)
        return a

    for fn, guarded in ((pure, False), (writes, True)):
        cf = ember.compile(fn, backend="aot_eager")     # (alive: a dropped one's entries go with it)
        cf(ember.randn(4), ember.randn(4))
        entry = dynamo.convert_frame._caches[fn.__code__].entries[0]
        assert ("share memory as when traced" in str(entry.guard.guard_set)) is guarded
