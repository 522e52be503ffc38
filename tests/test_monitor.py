"""ember.monitor against torch.monitor: Stat windows and aggregations, events, handlers."""
import datetime
import random
import time

import pytest

import ember.monitor as M

A = M.Aggregation
ALL = [A.VALUE, A.MEAN, A.COUNT, A.SUM, A.MAX, A.MIN]
LONG = datetime.timedelta(days=365)      # windows that never end during a test


@pytest.fixture
def events():
    got = []
    h = M.register_event_handler(got.append)
    yield got
    M.unregister_event_handler(h)


def _as_names(d):
    return {k.name: v for k, v in d.items()}


def test_aggregation_enum_matches_torch():
    torch = pytest.importorskip("torch")
    assert {k: v.value for k, v in A.__members__.items()} == \
        {k: int(v.value) for k, v in torch.monitor.Aggregation.__members__.items()}
    assert str(A.SUM) == str(torch.monitor.Aggregation.SUM) == "Aggregation.SUM"
    assert repr(A.MEAN) == repr(torch.monitor.Aggregation.MEAN)
    assert M.SUM is A.SUM and M.VALUE is A.VALUE


def test_max_samples_windows_match_torch_random():
    torch = pytest.importorskip("torch")
    T = torch.monitor
    rng = random.Random()
    for _ in range(20):
        aggs = rng.sample(range(6), rng.randint(1, 6))
        max_samples = rng.randint(1, 6)
        values = [rng.choice([rng.uniform(-10, 10), rng.randint(-5, 5)]) for _ in range(rng.randint(0, 15))]
        ours_ev, theirs_ev = [], []
        h1 = M.register_event_handler(ours_ev.append)
        h2 = T.register_event_handler(theirs_ev.append)
        try:
            name = f"s{rng.randrange(1000)}"
            s = M.Stat(name, [ALL[i] for i in aggs], LONG, max_samples)
            t = T.Stat(name, [T.Aggregation.__members__[ALL[i].name] for i in aggs], LONG, max_samples)
            assert s.name == t.name
            assert _as_names(s.get()) == _as_names(t.get())
            for v in values:
                s.add(v)
                t.add(v)
                assert s.count == t.count
                ours, theirs = _as_names(s.get()), _as_names(t.get())
                assert ours.keys() == theirs.keys()
                for k in ours:
                    assert ours[k] == pytest.approx(theirs[k], rel=1e-12, abs=1e-12)
        finally:
            M.unregister_event_handler(h1)
            T.unregister_event_handler(h2)
        assert len(ours_ev) == len(theirs_ev)
        for a, b in zip(ours_ev, theirs_ev):
            assert a.name == b.name == M.STAT_EVENT
            assert a.data.keys() == b.data.keys()
            for k in a.data:
                assert a.data[k] == pytest.approx(b.data[k], rel=1e-12)


def test_time_window_publishes_on_next_add(events):
    s = M.Stat("lat", [A.SUM, A.COUNT, A.MEAN, A.MAX, A.MIN], datetime.timedelta(milliseconds=50))
    vals = [random.uniform(0, 5) for _ in range(4)]
    for v in vals:
        s.add(v)
    assert s.count == 4 and _as_names(s.get()) == {"SUM": 0.0, "COUNT": 0.0, "MEAN": 0.0, "MAX": 0.0, "MIN": 0.0}
    time.sleep(0.12)
    s.add(100.0)                         # a new window: the old one is published, then 100 counted
    assert s.count == 1
    got = _as_names(s.get())
    assert got["COUNT"] == 4 and got["SUM"] == pytest.approx(sum(vals))
    assert got["MAX"] == max(vals) and got["MIN"] == min(vals) and got["MEAN"] == pytest.approx(sum(vals) / 4)
    assert len(events) == 1 and events[0].name == "torch.monitor.Stat"
    assert list(events[0].data) == ["lat.count", "lat.sum", "lat.mean", "lat.max", "lat.min"]
    assert isinstance(events[0].timestamp, datetime.datetime)
    time.sleep(0.12)
    time.sleep(0.0)
    s.add(1.0)
    assert _as_names(s.get())["SUM"] == 100.0 and len(events) == 2
    time.sleep(0.12)
    s2 = M.Stat("empty", [A.SUM], datetime.timedelta(milliseconds=50))
    time.sleep(0.12)
    s2.add(1.0)                          # the previous window saw nothing: no event
    assert len(events) == 2


def test_values_after_max_samples_are_dropped_until_next_window(events):
    s = M.Stat("x", [A.SUM, A.COUNT], datetime.timedelta(milliseconds=50), 2)
    s.add(1)
    s.add(2)
    s.add(40)                            # this window is closed: dropped
    assert s.count == 0 and _as_names(s.get()) == {"SUM": 3.0, "COUNT": 2.0}
    assert [e.data for e in events] == [{"x.count": 2.0, "x.sum": 3.0}]
    time.sleep(0.12)
    s.add(5)
    assert s.count == 1 and _as_names(s.get()) == {"SUM": 0.0, "COUNT": 0.0}
    assert len(events) == 1


def test_event_and_handlers_match_torch():
    torch = pytest.importorskip("torch")
    T = torch.monitor
    ts = datetime.datetime(2024, 5, 6, 7, 8, 9)
    data = {"a": 1, "b": 2.5, "c": "s", "d": True}
    e, t = M.Event("n", ts, data), T.Event(name="n", timestamp=ts, data=data)
    assert e.name == t.name and e.timestamp == t.timestamp and e.data == t.data
    assert type(e.data["d"]) is type(t.data["d"]) is float     # torch's binding stores bools as floats
    assert type(e.data["a"]) is type(t.data["a"]) is int
    with pytest.raises(TypeError, match=r"data\['x'\] must be a str, float, int or bool"):
        M.Event("n", ts, {"x": [1]})
    with pytest.raises(TypeError, match="timestamp must be a datetime"):
        M.Event("n", 3.0, {})
    seen = []
    h = M.register_event_handler(lambda ev: seen.append(ev.name))
    M.log_event(e)
    M.unregister_event_handler(h)
    M.log_event(e)
    assert seen == ["n"]
    with pytest.raises(ValueError, match="not registered"):
        M.unregister_event_handler(h)

    def boom(ev):
        raise RuntimeError("handler failed")
    h = M.register_event_handler(boom)
    try:
        with pytest.raises(RuntimeError, match="handler failed"):     # propagates, as torch's
            M.log_event(e)
    finally:
        M.unregister_event_handler(h)
    assert isinstance(h, M.EventHandlerHandle)
    with pytest.raises(TypeError):
        M.data_value_t()


def test_stat_argument_errors():
    with pytest.raises(TypeError, match="window_size must be a datetime.timedelta"):
        M.Stat("x", [A.SUM], 3)
    with pytest.raises(TypeError, match="Aggregation members"):
        M.Stat("x", ["sum"], LONG)
    with pytest.raises(ValueError, match="window_size must be positive"):
        M.Stat("x", [A.SUM], datetime.timedelta(0))
    s = M.Stat("x", [A.SUM], LONG)
    with pytest.raises(TypeError, match="v must be a number"):
        s.add("a")


class _RecordingWriter:
    def __init__(self):
        self.calls = []

    def add_scalar(self, tag, value, global_step=None, walltime=None):
        self.calls.append((tag, value, walltime))


def test_tensorboard_handler(tmp_path):
    w = _RecordingWriter()
    handler = M.TensorboardEventHandler(w)
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5)
    handler(M.Event("other", ts, {"a": 1.0}))
    handler(M.Event(M.STAT_EVENT, ts, {"s.sum": 3.0, "s.count": 2.0}))
    assert w.calls == [("s.sum", 3.0, ts.timestamp()), ("s.count", 2.0, ts.timestamp())]
    # the real writer (the optional tensorboard package): a Stat event ends up in an event file
    pytest.importorskip("tensorboard")
    from ember.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(str(tmp_path))
    h = M.register_event_handler(M.TensorboardEventHandler(writer))
    try:
        s = M.Stat("loss", [A.MEAN], LONG, 2)
        s.add(random.random())
        s.add(random.random())
    finally:
        M.unregister_event_handler(h)
        writer.close()
    files = list(tmp_path.glob("events.out.tfevents.*"))
    assert files and b"loss.mean" in files[0].read_bytes()


def test_destroyed_stat_publishes_its_window(events):
    torch = pytest.importorskip("torch")
    theirs = []
    h = torch.monitor.register_event_handler(theirs.append)
    try:
        vals = [random.uniform(-3, 3) for _ in range(3)]
        s = M.Stat("d", [A.SUM, A.COUNT], LONG)
        t = torch.monitor.Stat("d", [torch.monitor.Aggregation.SUM, torch.monitor.Aggregation.COUNT], LONG)
        for v in vals:
            s.add(v)
            t.add(v)
        assert events == [] and theirs == []
        del s, t
    finally:
        torch.monitor.unregister_event_handler(h)
    assert len(events) == len(theirs) == 1
    assert events[0].data == pytest.approx(theirs[0].data)
