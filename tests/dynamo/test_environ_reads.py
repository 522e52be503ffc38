"""Reading environment variables inside a compiled frame folds the value and guards it: setting
or unsetting the variable between calls recompiles, so the result always follows eager."""
import os

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, random_tensor

_rng = np.random.default_rng(21)
_VAR = "EMBER_TEST_ENV_SCALE"


def reads_env(x):
    scale = float(os.environ.get(_VAR, "1.0"))
    if "EMBER_TEST_ENV_FLAG" in os.environ:
        x = x.relu()
    if os.getenv("EMBER_TEST_ENV_MODE", default="a") == "b":
        x = x * 10
    return x * scale


def test_env_reads_follow_the_environment(monkeypatch):
    for k in (_VAR, "EMBER_TEST_ENV_FLAG", "EMBER_TEST_ENV_MODE"):
        monkeypatch.delenv(k, raising=False)
    cnt = CountingBackend()
    cf = ember.compile(reads_env, backend=cnt)
    x = random_tensor(_rng, 6)
    settings = [{}, {_VAR: "2.5"}, {_VAR: "2.5", "EMBER_TEST_ENV_FLAG": ""}, {"EMBER_TEST_ENV_MODE": "b"}, {}]
    for env in settings:
        for k in (_VAR, "EMBER_TEST_ENV_FLAG", "EMBER_TEST_ENV_MODE"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        np.testing.assert_allclose(cf(x).numpy(), reads_env(x).numpy(), rtol=1e-6)
    assert cnt.frame_count == 4          # the last setting is the first again: a cache hit
    assert_one_graph(reads_env, x)


def test_missing_key_raises_like_eager(monkeypatch):
    monkeypatch.delenv(_VAR, raising=False)

    def f(x):
        return x * float(os.environ[_VAR])
    x = random_tensor(_rng, 3)
    try:
        f(x)
    except KeyError:
        pass
    else:
        raise AssertionError("eager did not raise")
    cf = ember.compile(f, backend=CountingBackend())
    try:
        cf(x)
    except KeyError:
        return
    raise AssertionError("compiled did not raise KeyError")


def test_writing_the_environment_breaks(monkeypatch):
    monkeypatch.delenv(_VAR, raising=False)

    def f(x):
        os.environ[_VAR] = "3"
        return x + 1
    ex = dynamo.explain(f)(random_tensor(_rng, 2))
    assert ex.graph_break_count >= 1
    assert os.environ[_VAR] == "3"
