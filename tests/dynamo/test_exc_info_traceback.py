"""``sys.exc_info()`` / ``sys.exception()`` and ``e.__traceback__`` inside except blocks of traced
code: the type and exception are the traced ones, the traceback can be None-checked and compared;
anything else about a traceback breaks the graph with a reason (the code then runs eagerly)."""
import sys

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, random_tensor

RNG = np.random.default_rng(41)


def _x():
    return random_tensor(RNG, 3, 4)


def _fail(v):
    raise KeyError(v)


def test_exc_info_in_except_block():
    def f(x):
        try:
            y = x * 2
            _fail("k")
        except KeyError as e:
            t, v, tb = sys.exc_info()
            ok = (t is KeyError, v is e, tb is not None, tb is None, e.__traceback__ is not None,
                  tb == None, tb != None, bool(tb), sys.exception() is e)  # noqa: E711
            y = y + (1.0 if all(ok[i] for i in (0, 1, 2, 4, 6, 7, 8)) else -100.0)
            return y, ok
        return x, ()

    x = _x()
    assert_one_graph(f, x)
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for _ in range(2):
        x = _x()
        got, ref = cf(x), f(x)
        np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
        assert got[1] == ref[1] == (True, True, True, False, True, False, True, True, True)
    assert cnt.frame_count == 1


def test_traceback_of_exception_not_raised_is_none_and_nested_handlers():
    def f(x):
        fresh = ValueError("not raised")
        none_before = fresh.__traceback__ is None
        try:
            raise fresh
        except ValueError as e:
            after = e.__traceback__ is not None
            try:
                raise TypeError("inner")
            except TypeError:
                inner = sys.exc_info()[0] is TypeError
            outer = sys.exc_info()[0] is ValueError
        return x + 1, (none_before, after, inner, outer)

    x = _x()
    assert_one_graph(f, x)
    got, ref = ember.compile(f, backend="eager")(x), f(x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] == ref[1] == (True, True, True, True)


def test_traceback_contents_break_with_reason():
    def f(x):
        try:
            _fail("k")
        except KeyError:
            tb = sys.exc_info()[2]
            return x + 1, tb.tb_lineno > 0

    x = _x()
    ex = dynamo.explain(f)(x)
    assert ex.graph_break_count >= 1 or ex.graph_count == 0
    assert any("traceback" in str(r) for r in ex.break_reasons), ex.break_reasons
    got, ref = ember.compile(f, backend="eager")(x), f(x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] is ref[1] is True


def test_exc_info_outside_handler_sees_the_callers_exception():
    def f(x):
        t = sys.exc_info()[0]
        return x * 2, t

    x = _x()
    ex = dynamo.explain(f)(x)
    assert any("sys.exc_info() outside an except block" in str(r) for r in ex.break_reasons), ex.break_reasons
    cf = ember.compile(f, backend="eager")
    assert cf(x)[1] is None
    try:
        raise IndexError("caller's")
    except IndexError:
        out, t = cf(x)
    assert t is IndexError
    np.testing.assert_allclose(out.numpy(), (x * 2).numpy())


def test_returning_a_traceback_breaks():
    def f(x):
        try:
            _fail(1)
        except KeyError as e:
            return x - 1, e.__traceback__

    x = _x()
    out, tb = ember.compile(f, backend="eager")(x)
    np.testing.assert_allclose(out.numpy(), (x - 1).numpy())
    assert tb is not None and tb.tb_frame is not None


def test_with_traceback_and_assignment_before_raise():
    def f(x):
        try:
            try:
                _fail("inner")
            except KeyError as e:
                tb = e.__traceback__
                new = RuntimeError("wrapped")
                same = new.with_traceback(tb) is new and new.__traceback__ is tb
                new.__traceback__ = None
                cleared = new.__traceback__ is None
                raise new.with_traceback(tb) from e
        except RuntimeError as r:
            return x * 3, (same, cleared, r.__traceback__ is not None, r.__cause__ is not None)

    x = _x()
    assert_one_graph(f, x)
    got, ref = ember.compile(f, backend="eager")(x), f(x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] == ref[1] == (True, True, True, True)


def test_setting_traceback_after_raise_breaks():
    def f(x):
        try:
            _fail("k")
        except KeyError as e:
            e.__traceback__ = None
            return x + 2, e.__traceback__ is None

    x = _x()
    ex = dynamo.explain(f)(x)
    assert any("after it was raised" in str(r) for r in ex.break_reasons), ex.break_reasons
    got = ember.compile(f, backend="eager")(x)
    np.testing.assert_allclose(got[0].numpy(), (x + 2).numpy())
    assert got[1] is True


def test_traceback_module_calls_break_with_reason():
    import traceback

    def f(x):
        try:
            _fail("k")
        except KeyError as e:
            return x + 1, len(traceback.format_exc()) > 0, len(traceback.format_tb(e.__traceback__)) > 0

    x = _x()
    ex = dynamo.explain(f)(x)
    assert any("traceback.format_exc() reads real traceback" in str(r) for r in ex.break_reasons), ex.break_reasons
    got = ember.compile(f, backend="eager")(x)
    np.testing.assert_allclose(got[0].numpy(), (x + 1).numpy())
    assert got[1:] == (True, True)
