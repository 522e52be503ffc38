"""A code's cache entries: the entry whose guard passed last is tried first, so a frame with an
entry for a one-off state (an optimizer's first step, before its state exists) does not pay
that entry's failing guard on every later call. The entries keep their compile order."""
from __future__ import annotations

import numpy as np

import ember
from ember.dynamo import convert_frame


def _counting(entry, calls, name):
    guard = entry.guard

    def counted(*a):
        calls.append(name)
        return guard(*a)
    entry.guard = counted


def test_the_last_passing_entry_is_tried_first():
    def f(x):
        return x * 2 + 1

    cf = ember.compile(f, dynamic=False)
    a, b = ember.randn(3), ember.randn(5)
    cf(a)
    cf(b)                                   # a second entry (static sizes)
    cache = convert_frame._caches[f.__code__]
    first, second = cache.entries           # compile order is kept
    calls = []
    _counting(first, calls, "first")
    _counting(second, calls, "second")
    for _ in range(3):
        np.testing.assert_allclose(cf(b).numpy(), b.numpy() * 2 + 1, rtol=1e-6)
    assert calls == ["second"] * 3          # the newest entry first: the old one is never tried
    calls.clear()
    np.testing.assert_allclose(cf(a).numpy(), a.numpy() * 2 + 1, rtol=1e-6)
    assert calls == ["second", "first"]     # a miss on the hot entry, then the others in order
    calls.clear()
    cf(a)
    cf(a)
    assert calls == ["first", "first"]      # the entry that passed is now tried first
    assert cache.entries == [first, second]
