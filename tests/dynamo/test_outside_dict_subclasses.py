"""dict-subclass objects passed into a compiled frame from outside (HuggingFace's ``ModelOutput``
look-alike returned by an uncompiled model, OrderedDict/dict/defaultdict subclasses): indexing by
key and position, attribute access, keys/values/items, iteration, ``len``/``in`` are traced
without a graph break; the type and the keys are guarded; writes break the graph."""
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, fields
from typing import Any, Optional

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, random_tensor

RNG = np.random.default_rng(17)


def _x(*shape):
    return random_tensor(RNG, *(shape or (3, 4)))


class ModelOutputLike(OrderedDict):
    """After the semantics of transformers' ``ModelOutput``: dataclass fields that are not None
    become items, item and attribute writes mirror each other, ``out[i]`` indexes the tuple of
    values, ``pop``/``update`` are refused."""

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def pop(self, *args, **kwargs):
        raise Exception(f"You cannot use ``pop`` on a {self.__class__.__name__} instance.")

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclass
class Out(ModelOutputLike):
    logits: Any = None
    loss: Optional[Any] = None
    hidden_states: Optional[Any] = None


class Other(Out):
    pass


def head(out, w):
    total = out["logits"] @ w + out.loss + out[0].sum() * len(out)
    for k in out:
        total = total + out[k].mean() * len(k)
    for k, v in out.items():
        total = total - v.sum()
    ks = list(out.keys())
    return total * len(ks), "hidden_states" in out, out.hidden_states is None, tuple(out.keys())


def _out():
    return Out(logits=_x(3, 4), loss=_x(1))


def test_model_output_from_outside_traced_in_one_graph():
    o, w = _out(), _x(4, 2)
    assert_one_graph(head, o, w)
    cnt = CountingBackend()
    cf = ember.compile(head, backend=cnt)
    for _ in range(3):
        o, w = _out(), _x(4, 2)
        got, ref = cf(o, w), head(o, w)
        np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-5, atol=1e-6)
        assert got[1:] == ref[1:]
    assert cnt.frame_count == 1            # same type and keys: no recompile


def test_keys_and_type_guarded():
    cnt = CountingBackend()
    cf = ember.compile(head, backend=cnt)
    w = _x(4, 2)
    cf(_out(), w)
    o = Out(logits=_x(3, 4), loss=_x(1), hidden_states=_x())          # another key set
    got, ref = cf(o, w), head(o, w)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-5, atol=1e-6)
    assert got[1:] == ref[1:] == (True, False, ("logits", "loss", "hidden_states"))
    assert cnt.frame_count == 2
    o = Other(logits=_x(3, 4), loss=_x(1))                               # another class
    got, ref = cf(o, w), head(o, w)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-5, atol=1e-6)
    assert cnt.frame_count == 3


def test_returned_and_passed_through_by_identity():
    def f(out):
        return out, out.logits * 2

    o = _out()
    r, y = ember.compile(f, backend="eager")(o)
    assert r is o and list(o.keys()) == ["logits", "loss"]
    np.testing.assert_allclose(y.numpy(), (o.logits * 2).numpy())


def test_mutation_breaks_the_graph_and_matches_eager():
    def f(out):
        y = out.logits + 1
        out["extra"] = y
        return y * 2

    o_e, o_c = _out(), None
    o_c = Out(logits=o_e.logits, loss=o_e.loss)
    ref = f(o_e)
    got = ember.compile(f, backend="eager")(o_c)
    np.testing.assert_allclose(got.numpy(), ref.numpy())
    assert list(o_c.keys()) == list(o_e.keys()) == ["logits", "loss", "extra"]
    assert o_c.extra is o_c["extra"]
    ex = dynamo.explain(f)(_out())
    assert ex.graph_break_count >= 1
    assert any("outside the compiled frame" in str(r) for r in ex.break_reasons), ex.break_reasons


def test_refused_method_raises_as_eager():
    def f(out):
        try:
            out.pop("loss")
            msg = ""
        except Exception as e:
            msg = str(e)
        return out.logits + 1, msg

    o = _out()
    assert_one_graph(f, o)
    got, ref = ember.compile(f, backend="eager")(o), f(o)
    assert got[1] == ref[1] and "pop" in got[1]


class Plain(dict):
    def total(self):
        return sum(self.values())


class Counts(defaultdict):
    pass


def test_plain_dict_and_defaultdict_subclasses():
    def f(d, c, x):
        return x * d.total() + x * len(d) + x * c["a"] + x * len(c), sorted(d), "b" in c

    d = Plain(a=1.5, b=2.5)
    c = Counts(int, a=3)
    x = _x()
    assert_one_graph(f, d, c, x)
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    got, ref = cf(d, c, x), f(d, c, x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-6)
    assert got[1:] == ref[1:]
    d2 = Plain(a=4.0, b=2.5)                  # a value changed: constants are guarded
    got, ref = cf(d2, c, x), f(d2, c, x)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy(), rtol=1e-6)
    assert cnt.frame_count == 2

    def g(c, x):
        return x * c["missing"]               # defaultdict inserts: a write, not traced
    c2 = Counts(int, a=3)
    c3 = Counts(int, a=3)
    np.testing.assert_allclose(ember.compile(g, backend="eager")(c2, x).numpy(), g(c3, x).numpy())
    assert dict(c2) == dict(c3) == {"a": 3, "missing": 0}


def test_values_match_torch_reference():
    torch = pytest.importorskip("torch")
    o, w = _out(), _x(4, 2)
    got = ember.compile(head, backend="aot_eager")(o, w)[0]
    tl, tloss, tw = (torch.tensor(t.numpy()) for t in (o.logits, o.loss, w))
    ref = tl @ tw + tloss + tl.sum() * 2
    ref = ref + tl.mean() * 6 + tloss.mean() * 4 - tl.sum() - tloss.sum()
    np.testing.assert_allclose(got.numpy(), (ref * 2).numpy(), rtol=1e-5, atol=1e-5)


def test_same_object_passed_twice_is_one_tracker():
    def f(a, b):
        return a["logits"] + b["loss"], a is b

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    o = _out()
    got, ref = cf(o, o), f(o, o)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] is ref[1] is True
    o2 = _out()
    got, ref = cf(o, o2), f(o, o2)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] is ref[1] is False
    assert cnt.frame_count == 2
    got = cf(o, o)                       # the aliasing entry, whichever entry is tried first
    assert got[1] is True and cnt.frame_count == 2
