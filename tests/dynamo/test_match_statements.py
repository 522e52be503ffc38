"""match statements (MATCH_SEQUENCE / MATCH_MAPPING / MATCH_KEYS / MATCH_CLASS / GET_LEN) are
traced: one graph, the eager result, a recompile when the subject's shape of data changes."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dynamo

from ._util import random_tensor

_rng = np.random.default_rng(17)


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Cfg:
    __match_args__ = ("kind", "scale")

    def __init__(self, kind, scale):
        self.kind, self.scale = kind, scale


def dispatch(t, spec):
    match spec:
        case {"act": "relu", "scale": s}:
            return t.relu() * s
        case ("gelu", s):
            return F.gelu(t) * s
        case [a, b, *rest] if len(rest) > 1:
            return t * (a + b + len(rest))
        case Point(x=px, y=0):
            return t + px
        case Point(px, py):
            return t * px - py
        case Cfg("silu", sc):
            return F.silu(t) * sc
        case int(n) | float(n):
            return t + n
        case str() as name:
            return t * len(name)
        case _:
            return -t


SPECS = [{"act": "relu", "scale": 2.0}, ("gelu", 3.0), [1, 2, 3, 4], [1, 2], Point(2.0, 0), Point(2.0, 5.0),
         Cfg("silu", 0.5), Cfg("relu", 1.0), 7, 2.5, "abc", None, {"act": "tanh"}, {"scale": 1.0, "act": "relu"}]


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.mark.parametrize("i", range(len(SPECS)))
def test_each_case_is_one_graph_and_matches_eager(i):
    x = random_tensor(_rng, 5)
    spec = SPECS[i]
    ex = dynamo.explain(dispatch)(x, spec)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
    assert ember.allclose(ember.compile(dispatch)(x, spec), dispatch(x, spec))


def test_one_compiled_function_follows_changing_subjects(monkeypatch):
    monkeypatch.setattr(dynamo.config, "recompile_limit", 64)     # one entry per kind of subject
    compiled = ember.compile(dispatch)
    x = random_tensor(_rng, 3)
    for spec in SPECS + SPECS[::-1]:
        assert ember.allclose(compiled(x, spec), dispatch(x, spec)), spec


def test_pattern_errors_are_the_programs():
    def too_many(t, p):
        match p:
            case Point(1, 2, 3):
                return t
        return t + 1

    with pytest.raises(TypeError, match=r"Point\(\) accepts 2 positional sub-patterns \(3 given\)"):
        ember.compile(too_many)(random_tensor(_rng, 2), Point(1, 2))


def test_tensor_subject_and_mapping_subclass():
    from collections import OrderedDict

    def f(t, cfg):
        match t:
            case ember.Tensor(ndim=1):
                base = t * 2
            case _:
                base = t
        match cfg:
            case {"bias": b, **rest}:
                return base + b + len(rest)
        return base

    x = random_tensor(_rng, 4)
    cfg = OrderedDict(bias=0.5, a=1, b=2)
    ex = dynamo.explain(f)(x, cfg)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
    assert ember.allclose(ember.compile(f)(x, cfg), f(x, cfg))
