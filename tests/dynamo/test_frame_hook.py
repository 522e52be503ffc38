"""The PEP 523 hook (ember._C._eval_frame): protocol, skipping, re-entrancy, refcounts."""
import sys
import threading

import pytest

ef = pytest.importorskip("ember._C._eval_frame")


def _run_with(cb, fn, *args, **kwargs):
    prev = ef.set_eval_frame(cb)
    try:
        return fn(*args, **kwargs)
    finally:
        ef.set_eval_frame(prev)


def add(a, b=2, *args, k=3, **kw):
    return a + b + k + sum(args) + sum(kw.values())


def test_install_uninstall_returns_previous():
    assert not ef.is_installed()
    cb = lambda *a: None  # noqa: E731
    assert ef.set_eval_frame(cb) is None
    assert ef.is_installed()
    assert ef.set_eval_frame(None) is cb
    assert not ef.is_installed()
    assert ef.get_eval_frame_callback() is None


def test_callback_sees_bound_argument_slots():
    seen = []

    def cb(code, func, *slots):
        if code is add.__code__:
            seen.append((func, slots))
        return None

    assert _run_with(cb, lambda: add(1, 5, 7, k=1, z=4)) == 18
    (func, slots), = seen
    assert func is add
    assert slots == (1, 5, 1, (7,), {"z": 4})


def test_replacement_callable_result_and_exception():
    def cb(code, func, *slots):
        if code is add.__code__:
            return lambda f, *s: ("replaced", f is add, s)
        return None

    assert _run_with(cb, lambda: add(10)) == ("replaced", True, (10, 2, 3, (), {}))

    def boom(x):
        return x

    def cb2(code, func, *slots):
        if code is boom.__code__:
            def raiser(f, x):
                raise ValueError(f"inner {x}")
            return raiser
        return None

    with pytest.raises(ValueError, match="inner 3"):
        _run_with(cb2, boom, 3)


def test_generators_and_skipped_codes_are_not_hooked():
    names = []

    def gen(n):
        yield from range(n)

    def plain(x):
        return x + 1

    def cb(code, func, *slots):
        names.append(code.co_name)
        return None

    ef.mark_skip(plain.__code__)
    try:
        assert _run_with(cb, lambda: (list(gen(3)), plain(1))) == ([0, 1, 2], 2)
    finally:
        ef.unmark_skip(plain.__code__)
    assert "gen" not in names and "plain" not in names
    assert not ef.is_skipped(plain.__code__)


def test_reentrancy_callback_frames_are_not_hooked():
    calls = []

    def helper(x):
        return x * 2

    def cb(code, func, *slots):
        calls.append(code.co_name)
        helper(1)  # would recurse forever if the hook were live here
        return None

    assert _run_with(cb, helper, 4) == 8
    assert calls.count("helper") == 1


def test_nested_frames_under_replacement_are_hooked():
    names = []

    def inner(x):
        return x + 1

    def outer(x):
        return x

    def cb(code, func, *slots):
        names.append(code.co_name)
        if code is outer.__code__:
            return lambda f, x: inner(x)
        return None

    assert _run_with(cb, outer, 1) == 2
    assert "inner" in names


def test_no_reference_leaks():
    obj = object()

    def ident(x):
        return x

    def cb(code, func, *slots):
        return (lambda f, x: x) if code is ident.__code__ else None

    before = sys.getrefcount(obj)
    _run_with(cb, lambda: [ident(obj) for _ in range(1000)])
    assert sys.getrefcount(obj) == before

    def raiser_code(x):
        return x

    def cb2(code, func, *slots):
        if code is raiser_code.__code__:
            def r(f, x):
                raise KeyError(x)
            return r
        return None

    def loop():
        for _ in range(200):
            try:
                raiser_code(obj)
            except KeyError:
                pass

    import gc
    gc.collect()
    before = sys.getrefcount(obj)
    _run_with(cb2, loop)
    gc.collect()
    assert sys.getrefcount(obj) == before


def test_callback_is_per_thread():
    names = []

    def work(x):
        return x + 1

    def cb(code, func, *slots):
        names.append((threading.get_ident(), code.co_name))
        return None

    other = []
    prev = ef.set_eval_frame(cb)
    try:
        t = threading.Thread(target=lambda: other.append(work(1)))
        t.start()
        t.join()
    finally:
        ef.set_eval_frame(prev)
    assert other == [2]
    assert all(tid == threading.get_ident() for tid, _ in names)


def test_many_arguments_use_heap_path():
    src = "def many(" + ", ".join(f"a{i}" for i in range(40)) + "):\n    return a0 + a39\n"
    ns = {}
    exec(src, ns)
    many = ns["many"]

    def cb(code, func, *slots):
        if code is many.__code__:
            return lambda f, *s: sum(s)
        return None

    assert _run_with(cb, many, *range(40)) == sum(range(40))
