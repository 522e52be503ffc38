"""ember.futures (Future, collect_all, wait_all) and ember.jit.fork/wait, against torch 2.13."""
import threading
import time

import pytest

import ember
import ember.futures as ef


def _torch():
    return pytest.importorskip("torch")


def _mods():
    torch = _torch()
    return [(ember, ef), (torch, torch.futures)]


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - compared across frameworks
        return (type(exc).__name__, str(exc).split("\n")[0])


def test_lifecycle_matches_torch():
    results = []
    for _, fut in _mods():
        f = fut.Future()
        r = [f.done()]
        f.set_result(3)
        r += [f.done(), f.wait(), f.value(), _outcome(lambda: f.set_result(4))]
        g = fut.Future()
        g.set_exception(ValueError("bad"))
        r += [g.done(), _outcome(g.wait), _outcome(g.value), _outcome(lambda: fut.Future().set_exception(3))]
        results.append(r)
    assert results[0] == results[1]
    assert ember.jit.Future is ef.Future and ember.futures is ef


def test_then_chains_values_and_errors_like_torch():
    results = []
    for _, fut in _mods():
        r = []
        h = fut.Future()
        c = h.then(lambda f: f.wait() * 2).then(lambda f: f.wait() + 1)
        assert not c.done()
        h.set_result(5)
        r.append(c.wait())
        h = fut.Future()
        c = h.then(lambda f: 1 / 0)
        h.set_result(5)
        r.append(_outcome(c.wait))
        h = fut.Future()
        c = h.then(lambda f: f.wait())
        h.set_exception(KeyError("k"))
        r.append(_outcome(c.wait))
        done = fut.Future()
        done.set_result(1)
        r.append(done.then(lambda f: f.value() + 1).wait())
        results.append(r)
    assert results[0] == results[1]
    assert results[0][1] == ("RuntimeError", "Got the following error when running the callback: ZeroDivisionError: "
                                              "division by zero")


def test_add_done_callback_order_and_errors():
    for _, fut in _mods():
        seen = []
        f = fut.Future()
        f.add_done_callback(lambda x: seen.append(("a", x.value())))
        f.add_done_callback(lambda x: 1 / 0)              # logged, not raised
        f.add_done_callback(lambda x: seen.append(("b", x.value())))
        assert f.add_done_callback(lambda x: None) is None
        f.set_result(9)
        f.add_done_callback(lambda x: seen.append(("late", x.value())))
        assert seen == [("a", 9), ("b", 9), ("late", 9)]


def test_collect_all_and_wait_all_match_torch():
    results = []
    for _, fut in _mods():
        r = []
        a, b = fut.Future(), fut.Future()
        both = fut.collect_all([a, b])
        r.append(both.done())
        a.set_result(1)
        r.append(both.done())
        b.set_result(2)
        got = both.wait()
        r += [both.done(), [g.value() for g in got], fut.wait_all([a, b])]
        c, d = fut.Future(), fut.Future()
        d.set_exception(ValueError("e"))
        c.set_result(1)
        r += [_outcome(lambda: fut.wait_all([c, d])), _outcome(fut.collect_all([c, d]).wait)]
        r += [fut.wait_all([]), fut.collect_all([]).wait()]
        r.append(_outcome(lambda: fut.collect_all([1]))[0])
        results.append(r)
    assert results[0] == results[1]


def test_wait_blocks_until_another_thread_completes():
    f = ef.Future()
    all_of = ef.collect_all([f])
    threading.Thread(target=lambda: (time.sleep(0.05), f.set_result(7))).start()
    assert f.wait() == 7
    assert [x.value() for x in all_of.wait()] == [7]


def test_value_of_pending_future_and_devices():
    with pytest.raises(RuntimeError, match="not completed yet"):
        ef.Future().value()
    assert not ef.Future(devices=["cpu"]).done()
    with pytest.raises(NotImplementedError, match="only CPU devices"):
        ef.Future(devices=["cuda:0"])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_jit_fork_runs_synchronously_like_torch():
    torch = _torch()
    for m in (ember, torch):
        calls = []
        fut = m.jit.fork(lambda a, b=0: calls.append(a) or a + b, 2, b=5)
        assert calls == [2] and fut.done() and m.jit.wait(fut) == 7 and fut.value() == 7
        assert isinstance(fut, m.futures.Future if m is ember else torch._C.Future)

        def bad():
            raise ValueError("in fork")
        with pytest.raises(ValueError, match="in fork"):
            m.jit.fork(bad)
    x = ember.randn(3, requires_grad=True)
    y = ember.jit.wait(ember.jit.fork(lambda t: (t * 2).sum(), x))
    y.backward()
    assert (x.grad.numpy() == 2).all()


def test_jit_fork_and_wait_are_deprecated_like_torch():
    torch = _torch()
    got = []
    for m in (ember, torch):
        with pytest.warns(DeprecationWarning) as rec:
            m.jit.wait(m.jit.fork(lambda: 1))
        got.append([str(w.message).replace("ember", "torch") for w in rec])
    assert got[0] == got[1]
