"""print(), warnings.warn() and logging calls with constant arguments inside compiled frames are
replayed after the graph (no graph break) and write exactly what eager writes: the same text, the
same warning locations and registry behaviour, the same log-record caller fields."""
import io
import logging
import warnings

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

_rng = np.random.default_rng(11)


def _x(*shape):
    return random_tensor(_rng, *shape)


def _graphs_and_breaks(fn, *args):
    ex = dynamo.explain(fn)(*args)
    return ex.graph_count, ex.graph_break_count


def printing(x):
    print("shape", x.shape, sep=":")
    y = x + 1
    for i in range(2):
        print(f"step {i} dtype={y.dtype}", end="|\n")
    print([1, 2], {"k": (3, None)}, flush=True)
    return y * 2


def test_print_of_constants_is_replayed_in_order(capsys):
    x = _x(3, 4)
    expected = printing(x)
    eager_out = capsys.readouterr().out
    cnt = CountingBackend()
    cf = ember.compile(printing, backend=cnt)
    for _ in range(2):
        got = cf(x)
        assert capsys.readouterr().out == eager_out
        np.testing.assert_allclose(got.numpy(), expected.numpy())
    assert cnt.frame_count == 1
    assert _graphs_and_breaks(printing, x) == (1, 0)


def test_print_before_a_break_comes_before_the_breaking_call(capsys):
    def f(x):
        print("before")
        y = x.sin()
        v = y.sum().item()        # a graph break: its own output goes between
        print("after")
        return y * v
    x = _x(4)
    f(x)
    eager_out = capsys.readouterr().out
    ember.compile(f, backend=CountingBackend())(x)
    assert capsys.readouterr().out == eager_out


def test_list_printed_then_mutated_prints_the_old_value(capsys):
    def f(x):
        items = [1]
        print(items)
        items.append(2)
        print(items)
        return x * len(items)
    x = _x(2)
    f(x)
    eager_out = capsys.readouterr().out
    ember.compile(f, backend=CountingBackend())(x)
    assert capsys.readouterr().out == eager_out == "[1]\n[1, 2]\n"


def test_non_constant_prints_still_break(capsys):
    # (``file=sys.stderr`` broke here too until session 51, and a symbolic size until session
    # 53; both are replayed now: test_print_stream_s51.py, test_print_symbolic_s53.py)
    def print_tensor(x):
        y = x + 1
        print(y)
        return y
    x = _x(3)
    print_tensor(x)
    eager = capsys.readouterr()
    cf = ember.compile(print_tensor, backend=CountingBackend())
    cf(x)
    got = capsys.readouterr()
    assert (got.out, got.err) == (eager.out, eager.err)
    dynamo.reset()
    ex = dynamo.explain(print_tensor)(x)
    capsys.readouterr()
    assert ex.graph_break_count == 1


def test_config_off_restores_the_break(monkeypatch, capsys):
    monkeypatch.setattr(dynamo.config, "replay_logging_calls", False)
    assert _graphs_and_breaks(printing, _x(2, 2))[1] == 4     # one break per print


def _warn_helper():
    warnings.warn("deprecated helper", DeprecationWarning, stacklevel=2)


def warning_program(x):
    warnings.warn("careful")
    _warn_helper()
    return x.exp()


def _record_warnings(fn, x, n):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        globals().pop("__warningregistry__", None)
        for _ in range(n):
            fn(x)
    return [(str(r.message), r.category, r.filename, r.lineno) for r in w]


def test_warnings_keep_location_category_and_once_per_location():
    x = _x(3)
    eager = _record_warnings(warning_program, x, 3)
    assert len(eager) == 2          # "default": once per location
    cf = ember.compile(warning_program, backend=CountingBackend())
    assert _record_warnings(cf, x, 3) == eager
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _graphs_and_breaks(warning_program, x) == (1, 0)


def test_warning_under_error_filter_raises_before_the_work():
    def f(x):
        warnings.warn("stop")
        return x + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="stop"):
            ember.compile(f, backend=CountingBackend())(_x(2))


def test_warning_with_stacklevel_outside_the_frame_breaks():
    def f(x):
        warnings.warn("caller's problem", stacklevel=2)
        return x + 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.compile(f, backend=CountingBackend())(_x(2))
    assert [str(r.message) for r in w] == ["caller's problem"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _graphs_and_breaks(f, _x(2))[1] == 1


_log = logging.getLogger("ember.tests.logging_calls")


def logging_program(x):
    _log.info("width %d of %s", x.shape[-1], "x")
    _log.debug("hidden %d", 1)
    _log.log(logging.WARNING, "level %s", "warning")
    logging.getLogger("ember.tests.logging_calls").propagate  # noqa: B018 -- a read, no effect
    y = x * 3
    if _log.isEnabledFor(logging.DEBUG):
        y = y + 1
    return y


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.levelname, record.getMessage(), record.pathname, record.lineno,
                             record.funcName, record.name))


@pytest.fixture
def collected():
    h = _Collect()
    _log.addHandler(h)
    old = _log.level
    _log.setLevel(logging.INFO)
    yield h
    _log.removeHandler(h)
    _log.setLevel(old)


def test_logger_records_match_eager(collected):
    x = _x(2, 5)
    expected = logging_program(x)
    eager = list(collected.records)
    collected.records.clear()
    cnt = CountingBackend()
    cf = ember.compile(logging_program, backend=cnt)
    np.testing.assert_allclose(cf(x).numpy(), expected.numpy())
    assert collected.records == eager and len(eager) == 2
    # the level is a guard: enabling DEBUG recompiles and both the branch and the records follow
    _log.setLevel(logging.DEBUG)
    collected.records.clear()
    expected = logging_program(x)
    eager = list(collected.records)
    collected.records.clear()
    np.testing.assert_allclose(cf(x).numpy(), expected.numpy())
    assert collected.records == eager and len(eager) == 3
    assert cnt.frame_count == 2


def test_root_logging_functions(monkeypatch):
    stream = io.StringIO()
    root = logging.getLogger()
    h = logging.StreamHandler(stream)
    h.setFormatter(logging.Formatter("%(levelname)s %(funcName)s:%(lineno)d %(message)s"))
    root.addHandler(h)
    try:
        def f(x):
            logging.warning("root says %s", "hi")
            return x - 1
        x = _x(3)
        f(x)
        eager = stream.getvalue()
        stream.truncate(0)
        stream.seek(0)
        ember.compile(f, backend=CountingBackend())(x)
        assert stream.getvalue() == eager and "root says hi" in eager
    finally:
        root.removeHandler(h)


def test_exc_info_breaks(collected):
    def f(x):
        _log.error("boom", exc_info=True)
        return x + 1
    x = _x(2)
    ex = dynamo.explain(f)(x)
    assert ex.graph_break_count == 1


def test_printing_a_tensor_at_a_break_does_not_hook_embers_repr_code(capsys):
    # the repr of a tensor builds ember's print options (a dataclass whose __init__ is generated
    # code): that frame is ember's, not the user's, and neither compiled nor reported
    def f(x):
        y = x * 2
        print(y)
        return y + 1
    ex = dynamo.explain(f)(_x(3))
    capsys.readouterr()
    assert ex.graph_break_count == 1, ex.break_reasons
    assert "of a tensor" in ex.break_reasons[0][1]


def test_prints_before_an_op_that_raises_at_run_time_are_made(capsys):
    # the graph raises (an index out of range, unknown while tracing): the frame re-runs eagerly,
    # so the print before the failing op happens, as in eager
    def f(x, idx):
        print("before the gather")
        return x[idx] + 1
    x = _x(4)
    cf = ember.compile(f)
    cf(x, ember.tensor([0, 1]))
    capsys.readouterr()
    bad = ember.tensor([0, 9])
    with pytest.raises(IndexError):
        f(x, bad)
    eager = capsys.readouterr().out
    with pytest.raises(IndexError):
        cf(x, bad)
    assert capsys.readouterr().out == eager == "before the gather\n"


def test_print_in_a_frame_with_in_place_ops_breaks_there(capsys):
    # a graph that writes its input and can raise (a tensor index) cannot be re-run: the print
    # is a graph break again (one that cannot raise is replayed: test_graph_raises_s52.py)
    def f(x, i):
        x.mul_(2)
        print("doubled")
        x.add_(1)
        return x[i]
    i = ember.tensor([0, 2])
    a, b = _x(3), None
    b = a.clone()
    want = f(a, i)
    eager = capsys.readouterr().out
    cnt = CountingBackend()
    got = ember.compile(f, backend=cnt)(b, i)
    assert capsys.readouterr().out == eager
    np.testing.assert_allclose(b.numpy(), a.numpy())
    np.testing.assert_allclose(got.numpy(), want.numpy())
    ex = dynamo.explain(f)(_x(3), i)
    capsys.readouterr()
    assert ex.graph_break_count >= 1
    assert any("replayed" in r[1] for r in ex.break_reasons), ex.break_reasons
