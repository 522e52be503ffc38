"""``del`` statements in compiled frames (DELETE_ATTR, DELETE_DEREF, DELETE_GLOBAL): objects made
in the frame lose the attribute while tracing; outside objects, nn.Modules (``del self.cache``)
and Python modules lose it after the graph ran, in program order with attribute writes; a read
after the deletion raises what CPython raises; whether the name existed is guarded."""
import types

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend, assert_one_graph, random_tensor

RNG = np.random.default_rng(21)


def _x(*shape):
    return random_tensor(RNG, *(shape or (3, 4)))


class Box:
    pass


def test_del_attr_of_object_made_in_frame():
    def f(x):
        b = Box()
        b.a = x + 1
        b.c = x * 2
        del b.a
        try:
            b.a
            hit = 1.0
        except AttributeError:
            hit = 2.0
        return b.c * hit, hasattr(b, "a"), hasattr(b, "c")

    x = _x()
    assert_one_graph(f, x)
    out, ha, hc = ember.compile(f, backend="eager")(x)
    ref = f(x)
    np.testing.assert_allclose(out.numpy(), ref[0].numpy())
    assert (ha, hc) == (ref[1], ref[2]) == (False, True)


def test_del_missing_attr_of_object_made_in_frame_raises_like_eager():
    def f(x):
        b = Box()
        try:
            del b.nothing
        except AttributeError as e:
            return x + 1, str(e)
        return x, ""

    x = _x()
    assert_one_graph(f, x)
    out, msg = ember.compile(f, backend="eager")(x)
    assert msg == f(x)[1] == "'Box' object has no attribute 'nothing'"
    np.testing.assert_allclose(out.numpy(), (x + 1).numpy())


class Cached(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)

    def forward(self, x):
        self.cache = self.lin(x)
        y = self.cache.relu()
        del self.cache
        return y + 1


def test_del_self_cache_in_module_forward():
    m = Cached()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    for _ in range(3):
        x = _x()
        np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
        assert not hasattr(m, "cache") and "cache" not in m.__dict__
    assert cnt.frame_count == 1
    ex = dynamo.explain(m)(_x())
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


class Stateful(ember.nn.Module):
    def forward(self, x):
        y = x * self.scale
        del self.scale
        if hasattr(self, "scale"):
            y = y * 100
        return y


def test_del_outside_module_attribute_happens_after_graph_and_guards_presence():
    m = Stateful()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    for s in (2.0, 3.0):
        x = _x()
        m.scale = s
        out = cm(x)
        np.testing.assert_allclose(out.numpy(), (x * s).numpy(), rtol=1e-6)
        assert "scale" not in m.__dict__
    # the attribute is gone now: eager raises AttributeError reading it; so does compiled
    x = _x()
    with pytest.raises(AttributeError, match="scale"):
        m(x)
    with pytest.raises(AttributeError, match="scale"):
        cm(x)


def test_del_attr_in_program_order_with_writes_and_read_after_raises():
    def f(x, obj):
        obj.a = x.sum()
        del obj.a
        obj.a = 5
        obj.b = 1
        del obj.b
        try:
            obj.b
            missing = False
        except AttributeError:
            missing = True
        return x + obj.a, missing

    o_eager, o_comp = Box(), Box()
    o_eager.b = o_comp.b = 0
    x = _x()
    ref = f(x, o_eager)
    cnt = CountingBackend()
    got = ember.compile(f, backend=cnt)(x, o_comp)
    np.testing.assert_allclose(got[0].numpy(), ref[0].numpy())
    assert got[1] is ref[1] is True
    assert vars(o_comp) == vars(o_eager) == {"a": 5}
    assert cnt.frame_count == 1


def test_del_attr_guard_recompiles_when_presence_changes():
    def f(x, obj):
        try:
            del obj.tag
            return x + 1
        except AttributeError:
            return x - 1

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    x = _x()
    o = Box()
    o.tag = 1
    np.testing.assert_allclose(cf(x, o).numpy(), (x + 1).numpy())
    assert not hasattr(o, "tag")
    o2 = Box()
    o2.tag = 2
    np.testing.assert_allclose(cf(x, o2).numpy(), (x + 1).numpy())
    assert cnt.frame_count == 1           # same presence: no recompile
    np.testing.assert_allclose(cf(x, Box()).numpy(), (x - 1).numpy())
    assert cnt.frame_count == 2           # absent now: recompiled


def test_del_attr_before_graph_break_is_visible_to_the_breaking_call():
    seen = []

    def probe(o):
        seen.append(hasattr(o, "tmp"))

    def f(x, obj):
        obj.tmp = 1
        del obj.tmp
        y = x * 2
        dynamo.graph_break()
        probe(obj)
        return y + 1

    o = Box()
    x = _x()
    out = ember.compile(f, backend="eager")(x, o)
    np.testing.assert_allclose(out.numpy(), (x * 2 + 1).numpy())
    assert seen == [False] and not hasattr(o, "tmp")


def test_del_python_module_attribute():
    mod = types.ModuleType("scratch_mod")

    def g(x):
        y = x * 2
        del mod.val
        return y, hasattr(mod, "val")

    mod.val = 1
    cnt = CountingBackend()
    x = _x()
    out, has = ember.compile(g, backend=cnt)(x)
    np.testing.assert_allclose(out.numpy(), (x * 2).numpy())
    assert has is False and not hasattr(mod, "val") and cnt.frame_count == 1


def test_del_deref_cell_variable_then_read_raises():
    def f(x):
        k = 3.0

        def g():
            return k

        y = x * g()
        del k
        try:
            g()
        except NameError as e:
            return y, str(e)
        return y, ""

    x = _x()
    assert_one_graph(f, x)
    out, msg = ember.compile(f, backend="eager")(x)
    ref = f(x)
    np.testing.assert_allclose(out.numpy(), ref[0].numpy())
    assert msg == ref[1] and "free variable 'k'" in msg


def test_del_deref_read_in_own_frame_raises_unbound_local():
    def f(x):
        k = x + 1

        def g():
            return k * 2

        y = g()
        del k
        try:
            return k
        except UnboundLocalError as e:
            return y, str(e)

    x = _x()
    assert_one_graph(f, x)
    out, msg = ember.compile(f, backend="eager")(x)
    ref = f(x)
    np.testing.assert_allclose(out.numpy(), ref[0].numpy())
    assert msg == ref[1]


def test_del_deref_of_unbound_cell_raises():
    def f(x):
        def g():
            return k

        try:
            del k
        except UnboundLocalError:
            return x + 1
        k = 1
        return x

    x = _x()
    np.testing.assert_allclose(ember.compile(f, backend="eager")(x).numpy(), f(x).numpy())
    assert_one_graph(f, x)


GLOBAL_SCALE = 2.0


def _set_global(v):
    global GLOBAL_SCALE
    GLOBAL_SCALE = v


def test_del_global_replayed_after_graph_and_read_raises():
    def f(x):
        global GLOBAL_SCALE
        y = x * GLOBAL_SCALE
        del GLOBAL_SCALE
        try:
            GLOBAL_SCALE
            gone = False
        except NameError:
            gone = True
        return y, gone

    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    try:
        for v in (2.0, 2.0):
            _set_global(v)
            x = _x()
            out, gone = cf(x)
            np.testing.assert_allclose(out.numpy(), (x * v).numpy())
            assert gone is True and "GLOBAL_SCALE" not in globals()
        assert cnt.frame_count == 1
        # absent at the call: eager raises NameError at the read; the compiled frame too
        with pytest.raises(NameError, match="GLOBAL_SCALE"):
            cf(_x())
    finally:
        _set_global(2.0)


def test_del_global_absent_is_name_error_in_trace():
    def f(x):
        global NEVER_DEFINED_GLOBAL
        try:
            del NEVER_DEFINED_GLOBAL
        except NameError as e:
            return x + 1, str(e)
        return x, ""

    x = _x()
    assert_one_graph(f, x)
    out, msg = ember.compile(f, backend="eager")(x)
    assert msg == f(x)[1] == "name 'NEVER_DEFINED_GLOBAL' is not defined"


def test_del_grad_of_input_tensor():
    def f(p, x):
        y = p * x
        del p.grad
        return y, p.grad is None

    p = ember.randn(3, 4, requires_grad=True)
    (p * 2).sum().backward()
    assert p.grad is not None
    x = _x()
    cnt = CountingBackend()
    out, none = ember.compile(f, backend=cnt)(p, x)
    np.testing.assert_allclose(out.detach().numpy(), (p * x).detach().numpy())
    assert none is True and p.grad is None and cnt.frame_count == 1


class Bag(dict):
    pass


def test_del_attr_of_dict_subclass_made_in_frame():
    def f(x):
        b = Bag(k=x)
        b.note = x * 2
        b.other = 1
        del b.note
        return b, hasattr(b, "note"), b["k"] + 1

    x = _x()
    assert_one_graph(f, x)
    b, has, y = ember.compile(f, backend="eager")(x)
    assert type(b) is Bag and vars(b) == {"other": 1} and list(b) == ["k"] and has is False
    np.testing.assert_allclose(y.numpy(), (x + 1).numpy())
