"""The generated guard reads a chain of attribute reads/constant subscripts that several checks
share once, into a local (``guards._hoisted_body``). Pinned here on hand-written checks: what is
hoisted, what is left alone (string literals, method calls, names the checks bind themselves),
and that the guard's answers are those of the checks evaluated one by one."""
from __future__ import annotations

import types

from ember.dynamo.guards import GuardSet, _hoisted_body


def test_shared_chains_are_read_once_in_order():
    body = _hoisted_body(["type(a0.cfg) is o1", "a0.cfg.depth == 3", "a0.cfg['k'][0] == 'a0.cfg.depth'",
                          "list(a0.cfg.keys()) == o2", "a0.other == 1"])
    lines = [ln.strip() for ln in body.splitlines()]
    assert lines[0] == "__s0 = a0.cfg"                     # before the first check that reads it
    assert lines[1] == "if not (type(__s0) is o1):"
    assert "if not (__s0.depth == 3):" in lines
    assert "if not (__s0['k'][0] == 'a0.cfg.depth'):" in lines     # the string is a value
    assert "if not (list(__s0.keys()) == o2):" in lines             # a call, not a read
    assert "if not (a0.other == 1):" in lines                       # read once: left in place
    assert sum(ln.startswith("__s") for ln in lines) == 1


def test_nested_shared_prefixes_and_bound_names():
    body = _hoisted_body([
        "type(__t := a0.groups[0]['params'][0]) is o1 and __t.dtype is o2",
        "type(__t := a0.groups[0]['params'][1]) is o1 and __t.dtype is o2",
        "a0.groups[0]['params'][1].grad is a0.groups[0]['params'][1].grad",
    ])
    lines = [ln.strip() for ln in body.splitlines()]
    assert lines[:3] == ["__s0 = a0.groups", "__s1 = __s0[0]", "__s2 = __s1['params']"]
    assert body.count("a0.") == 1
    assert "if not (type(__t := __s2[0]) is o1 and __t.dtype is o2):" in lines   # read once: in place
    assert "__s3 = __s2[1]" in lines
    assert "if not (type(__t := __s3) is o1 and __t.dtype is o2):" in lines
    assert not any(ln.startswith("__s") and "__t" in ln for ln in lines)          # per-check names
    assert lines[-1] == "__s4 = __s3.grad"               # ``x is x``: the read is the whole check


def test_hoisted_guard_answers_like_the_checks():
    gs = GuardSet(lambda a: a)
    for e in ["type(a0.cfg) is dict", "a0.cfg['n'] == 3", "len(a0.cfg['items']) == 2",
              "a0.cfg['items'][0].x == 1", "a0.cfg['items'][1].x == 2", "a0.name == 'a0.cfg'"]:
        gs.add(e)
    guard = gs.compile(1)
    assert guard.source.count("a0.cfg") == 2 and "== 'a0.cfg'" in guard.source   # read once; a value

    def obj(n=3, xs=(1, 2), cfg_type=dict, name="a0.cfg"):
        items = [types.SimpleNamespace(x=x) for x in xs]
        cfg = cfg_type(n=n, items=items) if cfg_type is dict else types.SimpleNamespace(n=n)
        return types.SimpleNamespace(cfg=cfg, name=name)

    f = gs.globals["G"]
    func = types.SimpleNamespace(__globals__=f)
    assert guard(func, obj())
    assert not guard(func, obj(n=4))
    assert not guard(func, obj(xs=(1, 3)))
    assert not guard(func, obj(xs=(1,)))                       # IndexError: a failed guard
    assert not guard(func, obj(cfg_type=types.SimpleNamespace))
    assert not guard(func, obj(name="other"))
    assert not guard(func, types.SimpleNamespace())            # AttributeError: a failed guard
