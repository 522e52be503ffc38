"""ember._logging (torch._logging's API) driving ember's compiler loggers; errors as torch's."""
import logging
import os
import subprocess
import sys
import warnings

import pytest

import ember
import ember._logging as L
from ember._logging import _internal


@pytest.fixture(autouse=True)
def _reset_logs(monkeypatch):
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    L.set_logs()
    yield
    L.set_logs()


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def collect():
    attached = []

    def attach(name):
        h = _Collect()
        logging.getLogger(name).addHandler(h)
        attached.append((name, h))
        return h
    yield attach
    for name, h in attached:
        logging.getLogger(name).removeHandler(h)


def _graph_break_fn(x):
    y = x * 2
    y = ember.tensor(y.numpy().tolist())      # Tensor.numpy(): a graph break
    return y + 1


def test_graph_breaks_artifact_on_and_off(collect):
    h = collect("ember.dynamo.graph_breaks")
    L.set_logs(graph_breaks=True)
    ember.compile(_graph_break_fn, backend="eager")(ember.randn(3))
    assert any("Graph break" in m and "numpy" in m for m in h.messages)
    n = len(h.messages)
    L.set_logs()                 # a new call replaces the settings: graph breaks are off again
    assert logging.getLogger("ember.dynamo.graph_breaks").level == logging.NOTSET
    assert not any(isinstance(x, _internal._Handler) for x in logging.getLogger("ember.dynamo.graph_breaks").handlers)
    ember.compile(lambda x: _graph_break_fn(x) * 3, backend="eager")(ember.randn(3))
    assert len(h.messages) == n


@pytest.mark.parametrize("artifact,logger,backend", [
    ("aot_graphs", "ember.aot.aot_graphs", "aot_eager"),
    ("graph_code", "ember.dynamo.graph_code", "eager"),
    ("guards", "ember.dynamo.guards", "eager"),
    ("output_code", "ember.inductor.output_code", "inductor"),
])
def test_artifacts_reach_embers_loggers(collect, artifact, logger, backend):
    h = collect(logger)
    L.set_logs(**{artifact: True})

    def f(x):
        return (x * 3).cos() - 1
    ember.compile(f, backend=backend)(ember.randn(4, requires_grad=artifact == "aot_graphs"))
    assert h.messages, f"{artifact} wrote nothing to {logger}"


def test_component_levels():
    L.set_logs(dynamo=logging.INFO)
    assert logging.getLogger("ember.dynamo").level == logging.INFO
    # at INFO a component does not turn its artifacts on (torch's rule)
    assert not logging.getLogger("ember.dynamo.graph_breaks").isEnabledFor(logging.INFO)
    L.set_logs(dynamo=logging.DEBUG, aot=logging.WARNING)
    assert logging.getLogger("ember.dynamo.graph_breaks").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("ember.aot").level == logging.WARNING
    L.set_logs(all=logging.ERROR, modules={"ember.optim": logging.DEBUG})
    assert logging.getLogger("ember").level == logging.ERROR
    assert logging.getLogger("ember.optim").level == logging.DEBUG
    L.set_logs()
    assert logging.getLogger("ember").level == logging.NOTSET
    assert logging.getLogger("ember.dynamo").level == logging.NOTSET


def test_set_logs_errors_match_torch():
    torch = pytest.importorskip("torch")
    cases = [dict(foo=True), dict(modules={"nonexistent_module_xyz": True}), dict(graph_breaks=3),
             dict(dynamo="x"), dict(modules={"graph_breaks": 5}), dict(inductor=7)]
    try:
        for kw in cases:
            with pytest.raises(Exception) as ours:
                L.set_logs(**kw)
            with pytest.raises(Exception) as theirs:
                torch._logging.set_logs(**kw)
            assert type(ours.value) is type(theirs.value), kw
            assert str(ours.value) == str(theirs.value), kw
    finally:
        torch._logging.set_logs()


def test_torch_logs_invalid_message_matches_torch():
    torch = pytest.importorskip("torch")
    from torch._logging import _internal as T
    with pytest.raises(ValueError) as info:
        _internal._parse_log_settings("graph_breaks,bogus_name")
    assert str(info.value) == T._invalid_settings_err_msg("graph_breaks,bogus_name")
    assert _internal._parse_log_settings("+dynamo,-inductor,graph_breaks,aot") == [
        ("dynamo", logging.DEBUG), ("inductor", logging.ERROR), ("graph_breaks", True), ("aot", logging.INFO)]
    with pytest.raises(ValueError, match="TORCH_LOGS Info"):
        _internal._parse_log_settings("help")


def test_torch_logs_environment_variable():
    env = dict(os.environ, TORCH_LOGS="+dynamo,graph_breaks")
    code = ("import logging, ember; print(logging.getLogger('ember.dynamo').level, "
            "logging.getLogger('ember.dynamo.graph_breaks').level)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["10", "10"]
    env["TORCH_LOGS"] = "not_a_log_name"
    out = subprocess.run([sys.executable, "-c", "import ember"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "Invalid log settings: not_a_log_name" in out.stderr


def test_set_logs_ignored_while_torch_logs_is_set(monkeypatch, caplog):
    monkeypatch.setenv("TORCH_LOGS", "dynamo")
    with caplog.at_level(logging.WARNING, logger="ember._logging._internal"):
        L.set_logs(dynamo=logging.DEBUG)
    assert "ignoring call to set_logs" in caplog.text
    assert logging.getLogger("ember.dynamo").level == logging.NOTSET


def test_artifact_without_ember_output_warns():
    with pytest.warns(UserWarning, match="writes no 'graph_sizes' logs"):
        L.set_logs(graph_sizes=True)


def test_get_artifact_logger(collect):
    torch = pytest.importorskip("torch")
    lg = L.getArtifactLogger("my.module", "graph_sizes")
    assert lg.name == "my.module.__graph_sizes"
    h = collect("my.module.__graph_sizes")
    lg.debug("hidden")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.set_logs(graph_sizes=True)
    lg.debug("shown %d", 3)
    lg2 = L.getArtifactLogger("other.mod", "graph_sizes")     # made after set_logs: on as well
    assert lg2.isEnabledFor(logging.DEBUG)
    assert h.messages == ["shown 3"]
    with pytest.raises(ValueError) as ours:
        L.getArtifactLogger("m", "nope")
    with pytest.raises(ValueError) as theirs:
        torch._logging.getArtifactLogger("m", "nope")
    assert str(ours.value) == str(theirs.value)


def test_trace_structured_calls_payload_only_when_enabled(monkeypatch):
    # (this pytest attaches its capture handlers to non-propagating loggers: start from none)
    monkeypatch.setattr(L.trace_log, "handlers", [])
    calls = []

    def payload():
        calls.append(1)
        return {"k": [1, 2]}
    L.trace_structured("my_event", lambda: {"a": 1}, payload_fn=payload)
    assert calls == []
    h = _Collect()
    records = []
    h.emit = records.append
    L.trace_log.addHandler(h)
    try:
        L.trace_structured("my_event", lambda: {"a": 1}, payload_fn=payload)
    finally:
        L.trace_log.removeHandler(h)
    assert calls == [1] and len(records) == 1
    assert records[0].metadata["my_event"] == {"a": 1} and "has_payload" in records[0].metadata
    assert '"k"' in records[0].payload
    with pytest.raises(AssertionError, match="reserved"):
        L.trace_structured("rank")
    with pytest.raises(AssertionError, match="payload_fn should be callable"):
        L.trace_structured("x", payload_fn=3)


def test_lazy_string_and_warning_once(caplog):
    calls = []
    lazy = L.LazyString(lambda a, b=0: calls.append(1) or f"v={a + b}", 2, b=3)
    lg = logging.getLogger("ember.test_lazy")
    lg.debug("%s", lazy)             # not enabled: never formatted
    assert calls == []
    assert str(lazy) == "v=5" and calls == [1]
    lg2 = logging.getLogger("ember.test_warning_once")
    with caplog.at_level(logging.WARNING, logger="ember.test_warning_once"):
        for _ in range(3):
            L.warning_once(lg2, "only once %s", "please")
        L.warning_once(lg2, "a different one")
    assert caplog.text.count("only once please") == 1 and "a different one" in caplog.text


def test_each_record_is_printed_once(capsys):
    L.set_logs(all=logging.INFO, dynamo=logging.DEBUG, graph_breaks=True)
    logging.getLogger("ember.dynamo").info("dynamo line %d", 1)
    logging.getLogger("ember.dynamo.graph_breaks").info("break line")
    logging.getLogger("ember.optim").debug("hidden: ember is at INFO")
    logging.getLogger("ember.optim").warning("optim line")
    L.set_logs()
    logging.getLogger("ember.dynamo").info("after reset")
    err = capsys.readouterr().err
    assert err.count("dynamo line 1") == 1 and err.count("break line") == 1 and err.count("optim line") == 1
    assert "hidden" not in err and "after reset" not in err
    assert "[ember graph_breaks] break line" in err
    line = next(x for x in err.splitlines() if "dynamo line 1" in x)
    assert line.startswith("I") and "test_logging_api.py:" in line and line.endswith("] dynamo line 1")
    assert logging.getLogger("ember").propagate is True
