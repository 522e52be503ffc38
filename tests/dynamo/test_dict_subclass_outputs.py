"""dict subclasses made inside a compiled frame -- HuggingFace's ``ModelOutput`` pattern (a
``@dataclass`` subclass of ``OrderedDict`` whose ``__post_init__``/``__setitem__``/``__setattr__``
keep items and attributes in step) and plain dict/OrderedDict/defaultdict subclasses -- are
traced whole and returned as real instances of their class equal to eager's."""
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Optional

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import assert_one_graph, assert_same, check, random_tensor

RNG = np.random.default_rng(11)


def _x(*shape):
    return random_tensor(RNG, *(shape or (3, 4)))


class ModelOutputLike(OrderedDict):
    """Written after the semantics of transformers' ``ModelOutput`` (not its code): the
    dataclass fields that are not None become items, in order; item and attribute writes
    mirror each other; ``out[i]`` indexes ``to_tuple()``; mutating methods other than item
    assignment are refused."""

    def __post_init__(self):
        class_fields = fields(self)
        if not len(class_fields):
            raise ValueError(f"{self.__class__.__name__} has no fields.")
        if not all(f.default is None for f in class_fields[1:]):
            raise ValueError(f"{self.__class__.__name__} should not have more than one required field.")
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, f.name) is None for f in class_fields[1:])
        if other_fields_are_none and not isinstance(first_field, ember.Tensor) and isinstance(first_field, dict):
            for key, value in first_field.items():
                self[key] = value
        else:
            for f in class_fields:
                v = getattr(self, f.name)
                if v is not None:
                    self[f.name] = v

    def __delitem__(self, *args, **kwargs):
        raise Exception(f"You cannot use ``__delitem__`` on a {self.__class__.__name__} instance.")

    def setdefault(self, *args, **kwargs):
        raise Exception(f"You cannot use ``setdefault`` on a {self.__class__.__name__} instance.")

    def pop(self, *args, **kwargs):
        raise Exception(f"You cannot use ``pop`` on a {self.__class__.__name__} instance.")

    def update(self, *args, **kwargs):
        raise Exception(f"You cannot use ``update`` on a {self.__class__.__name__} instance.")

    def __getitem__(self, k):
        if isinstance(k, str):
            inner_dict = dict(self.items())
            return inner_dict[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclass
class Out(ModelOutputLike):
    logits: Any = None
    loss: Optional[Any] = None
    hidden_states: Optional[Any] = None


def _check_same_output(a, b):
    assert type(a) is type(b)
    assert_same(dict(a), dict(b))
    assert sorted(vars(a)) == sorted(vars(b))
    for k in vars(a):
        assert_same(vars(a)[k], vars(b)[k], k)


def model_forward(x, w):
    h = x @ w
    logits = h.relu()
    loss = (logits ** 2).mean()
    out = Out(logits=logits, loss=loss)
    total = out.logits.sum() + out["loss"] + out[0].mean() + len(out) + len(out.to_tuple())
    keys = [k for k in out]
    flags = ("loss" in out, "hidden_states" in out, keys, list(out.keys()))
    out.hidden_states = h * 2          # (not a key yet: only the attribute)
    out["logits"] = logits + total     # item and attribute both
    return out, flags


def test_model_output_built_used_and_returned():
    x, w = _x(3, 4), _x(4, 5)
    assert_one_graph(model_forward, x, w)
    expected = model_forward(x, w)
    got = ember.compile(model_forward, backend="eager")(x, w)
    _check_same_output(expected[0], got[0])
    assert expected[1] == got[1]
    assert got[0].to_tuple()[0] is got[0].logits
    check(model_forward, lambda: (_x(3, 4), _x(4, 5)))


def test_model_output_values_items_iteration_and_index():
    def f(x):
        o = Out(logits=x + 1, hidden_states=x * 3)
        acc = x * 0
        for k, v in o.items():
            acc = acc + v * len(k)
        for v in o.values():
            acc = acc - v
        a, b = o.to_tuple()
        return acc + o[1] + o[-1] + a - b, tuple(o), o.get("loss"), o.get("logits") is o.logits
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_model_output_with_dict_first_field_and_refused_methods():
    def f(x):
        o = Out({"a": x, "b": x * 2})          # the first field holds a dict: its items become the items
        try:
            o.pop("a")
            refused = 0
        except Exception as e:
            refused = len(str(e))
        return o, refused
    assert_one_graph(f, _x())
    expected, got = f(_x()), ember.compile(f, backend="eager")(_x())
    assert type(got[0]) is Out and list(got[0]) == ["a", "b"] and got[1] == expected[1]
    check(f, lambda: (_x(),))


def test_model_output_returned_from_a_module():
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(4, 2)

        def forward(self, x, labels=None):
            logits = self.lin(x)
            loss = None
            if labels is not None:
                loss = ((logits - labels) ** 2).mean()
            return Out(logits=logits, loss=loss)

    net = Net()
    x, y = _x(3, 4), _x(3, 2)
    assert_one_graph(net, x, y)
    cnet = ember.compile(net, backend="eager")
    _check_same_output(net(x, y), cnet(x, y))
    _check_same_output(net(x), cnet(x))
    got = cnet(x, y)
    got.loss.backward()
    assert net.lin.weight.grad is not None


class PlainDict(dict):
    pass


class PlainOD(OrderedDict):
    def total(self):
        return sum(self.values())


class Counter(defaultdict):
    pass


def test_plain_dict_subclasses():
    def f(x):
        d = PlainDict(a=x, b=x + 1)
        d["c"] = x * 2
        od = PlainOD([("u", x), ("v", x - 1)])
        od["w"] = x.sum()
        c = Counter(list)
        c["k"].append(x)
        c["k"].append(x * 3)
        del d["a"]
        return d, od, c, od.total(), len(c["k"]), isinstance(od, OrderedDict), {**d}
    assert_one_graph(f, _x())
    expected, got = f(_x()), ember.compile(f, backend="eager")(_x())
    for e, g in zip(expected[:3], got[:3]):
        assert type(g) is type(e) and list(g) == list(e)
    assert got[2].default_factory is list
    check(f, lambda: (_x(),))


class WithMissing(dict):
    def __missing__(self, key):
        return len(key)


def test_missing_hook_and_dict_copy():
    def f(x):
        d = WithMissing(a=x)
        return x * d["abc"] + d["a"], dict(d), is_dataclass(d)
    assert_one_graph(f, _x())
    check(f, lambda: (_x(),))


def test_unmodelled_dict_subclass_still_correct():
    class Weird(dict):
        def __getattr__(self, name):          # attribute access to items
            try:
                return self[name]
            except KeyError:
                raise AttributeError(name)

    def f(x):
        d = Weird(a=x)
        return d.a * 2
    x = _x()
    assert_same(f(x), ember.compile(f, backend="eager")(x))
