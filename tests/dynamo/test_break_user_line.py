"""A graph break's instruction runs from a frame naming the user's line (ember/dynamo/user_line.py).

An error raised by the call at a graph break (``y.item()`` on a vector, ``if y:`` on a vector)
must show the user's file, function and line in its traceback, as eager does, and the frame
hook's re-raise stub must not add an entry of its own (ember/_C/eval_frame.c)."""
import sys
import traceback

import pytest

import ember
from ember.dynamo import reset


@pytest.fixture(autouse=True)
def _fresh():
    reset()
    yield
    reset()


def _line_of(fn, text):
    import inspect
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _frames(exc):
    return traceback.extract_tb(exc.__traceback__)


def item_of_vector(x):
    y = x.sin()
    print("break here")
    z = y.item()
    return y + z


def truth_of_vector(x):
    y = x.cos() + 1
    if y:
        return y
    return -y


@pytest.mark.parametrize("fn, text, what", [
    (item_of_vector, "z = y.item()", "cannot be converted to Scalar"),
    (truth_of_vector, "if y:", "ambiguous"),
])
def test_error_at_the_break_names_the_user_line(fn, text, what):
    x = ember.randn(4)
    with pytest.raises(RuntimeError, match=what) as eager:
        fn(x)
    with pytest.raises(RuntimeError, match=what) as compiled:
        ember.compile(fn, backend="eager")(x)
    line = _line_of(fn, text)
    want = (__file__, fn.__name__, line)
    assert want in [(f.filename, f.name, f.lineno) for f in _frames(eager.value)]
    frames = _frames(compiled.value)
    assert want in [(f.filename, f.name, f.lineno) for f in frames], [(f.filename, f.name, f.lineno) for f in frames]
    # the frame shows the user's source text
    hit = [f for f in frames if (f.filename, f.name, f.lineno) == want][0]
    assert hit.line.strip() == text
    assert not [f for f in frames if "raise_stub" in f.name]
    text_tb = "".join(traceback.format_exception(compiled.value))
    assert text in text_tb


def test_error_in_a_resumed_frame_after_two_breaks():
    def f(x):
        y = x * 2
        print("first")
        y = y + 1
        print("second")
        return y[7]
    with pytest.raises(IndexError) as e:
        ember.compile(f, backend="eager")(ember.randn(3))
    names = [(fr.filename, fr.lineno) for fr in _frames(e.value)]
    assert (__file__, _line_of(f, "return y[7]")) in names
    assert not [fr for fr in _frames(e.value) if "raise_stub" in fr.name]


EMBER_DIR = ember.__file__.rsplit("/", 1)[0] + "/"


@ember._dynamo.disable
def _caller_of_me():
    """Runs eagerly at a graph break: which frame outside ember called it?"""
    frame = sys._getframe(1)
    while frame.f_code.co_filename.startswith(EMBER_DIR):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno


def test_callee_at_a_break_sees_the_user_line_as_its_caller():
    def f(x):
        y = x + 1
        where = _caller_of_me()
        return y, where
    x = ember.randn(3)
    _, eager_where = f(x)
    y, compiled_where = ember.compile(f, backend="eager")(x)
    assert compiled_where == eager_where == (__file__, "f", _line_of(f, "where = _caller_of_me()"))
    assert ember.allclose(y, x + 1)


def test_break_inside_try_still_reaches_the_handler():
    def f(x):
        y = x.sin()
        try:
            z = y.item()
        except RuntimeError:
            z = -1.0
        return y + z
    x = ember.randn(3)
    assert ember.allclose(ember.compile(f, backend="eager")(x), f(x))


def test_results_unchanged_and_one_caller_per_site():
    from ember.dynamo import user_line

    def f(x):
        y = x * 3
        _caller_of_me()
        return y - 1
    x = ember.randn(5)
    cf = ember.compile(f, backend="eager")
    for _ in range(3):
        assert ember.allclose(cf(x), x * 3 - 1)
    line = _line_of(f, "_caller_of_me()")
    sites = [k for k in user_line._CACHE if k[0] == __file__ and k[1] == "f" and k[2][0] == line]
    assert len(sites) == 1
