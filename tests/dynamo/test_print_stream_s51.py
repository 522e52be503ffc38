"""``print(..., file=stream)`` in a compiled frame is replayed after the graph, not a graph break.

Dynamo already replays constant ``print`` calls to stdout after the graph (``variables/
logging_calls.py``). Before session 51, any ``file=`` argument broke the graph: ``sys.stderr``,
a module's ``io.StringIO``, a stream passed in. Now a stream that lives outside the frame is
guarded by identity and written by the replayed call. The text and its order match eager's.
A different stream object compiles again. A stream made inside the frame still breaks the graph.
"""
import contextlib
import io
import sys

import ember
from ember import dynamo

from ._util import run_and_capture

OUT = io.StringIO()


def _compare(f, *args, fresh_out=True):
    """Run ``f`` eagerly and compiled; return (eager result, compiled result, eager text,
    compiled text), where text is stdout + OUT's contents."""
    def run(fn):
        OUT.seek(0)
        OUT.truncate()
        so = io.StringIO()
        with contextlib.redirect_stdout(so):
            r = fn(*args)
        return r, so.getvalue() + "#" + OUT.getvalue()
    want, t_want = run(f)
    got, t_got = run(ember.compile(f, backend="eager"))
    return want, got, t_want, t_got


def _to_module_stream(a):
    a = a * 2
    print("first", a.shape[0], file=OUT)
    print("to stdout")
    print("second", end="|", file=OUT, flush=True)
    print("stdout again", file=sys.stdout)
    print("stdout by None", file=None)
    return a + 1


def test_print_to_a_module_stream_is_replayed_without_a_break():
    dynamo.reset()
    want, got, t_want, t_got = _compare(_to_module_stream, ember.randn(3))
    assert ember.equal(want, got)
    assert t_got == t_want == "to stdout\nstdout again\nstdout by None\n#first 3\nsecond|"
    assert dynamo.counters["graph_breaks"] == 0 and dynamo.counters["eager_fallback"] == 0


def _to_stderr(a):
    b = a.relu()
    print("warning-ish", b.dim(), file=sys.stderr)
    return b * 3


def test_print_to_stderr_is_replayed(capsys):
    want, got, e1, e2 = run_and_capture(_to_stderr, (ember.randn(4),), capsys, stream="err")
    assert ember.equal(want, got) and e1 == e2 == "warning-ish 1\n"
    assert dynamo.counters["graph_breaks"] == 0


def _to_argument(a, stream):
    print("to", "stream", sep="-", end=";", file=stream)
    return a - 1


def test_a_stream_argument_is_guarded_by_identity():
    dynamo.reset()
    cf = ember.compile(_to_argument, backend="eager")
    s1, s2 = io.StringIO(), io.StringIO()
    x = ember.randn(2)
    for s in (s1, s2, s1, s1):
        assert ember.equal(cf(x, s), x - 1)
    assert s1.getvalue() == "to-stream;" * 3 and s2.getvalue() == "to-stream;"
    assert dynamo.counters["recompiles"] == 1 and dynamo.counters["graph_breaks"] == 0


def _to_local_stream(a):
    buf = io.StringIO()
    print("local", a.shape[0], file=buf)
    return a * 4, buf.getvalue()


def test_a_stream_made_in_the_frame_still_breaks():
    dynamo.reset()
    want, got, t_want, t_got = _compare(_to_local_stream, ember.randn(5))
    assert ember.equal(want[0], got[0]) and want[1] == got[1] == "local 5\n"
    assert dynamo.counters["graph_breaks"] + dynamo.counters["eager_fallback"] >= 1


def _print_then_read(a):
    a = a * 2
    print("line", file=OUT)
    seen = OUT.getvalue()
    return a, seen


def test_reading_the_stream_after_the_print_sees_the_line():
    dynamo.reset()
    want, got, t_want, t_got = _compare(_print_then_read, ember.randn(3))
    assert want[1] == got[1] == "line\n" and t_want == t_got
