"""Calls of methods implemented in C on objects dynamo does not model break the graph.

Before session 52, reading such a method (``buf.getvalue`` of an ``io.StringIO``, ``arr.append``
of an ``array.array``) raised at the attribute read, where no graph break can be made, so the
whole frame ran eagerly. Now the read gives an opaque bound method whose call breaks the graph:
the code before and after it is compiled, the call runs eagerly in between with the method read
again from the object (the class's method is guarded unchanged and not shadowed).
"""
import array
import io

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

OUT = io.StringIO()


def _write_then_read(x):
    y = x.sin() * 2
    OUT.write("n=%d;" % x.shape[0])
    text = OUT.getvalue()
    return y.cos() + len(text)


def _fresh_out():
    OUT.seek(0)
    OUT.truncate()


def _run_both(fn, make_args, reset=_fresh_out, calls=3):
    """(counting backend, [(eager result, compiled result, eager state, compiled state)])."""
    dynamo.reset()
    cnt = CountingBackend()
    compiled = ember.compile(fn, backend=cnt)
    rows = []
    for _ in range(calls):
        args = make_args()
        reset()
        want = fn(*args)
        s_want = OUT.getvalue()
        reset()
        got = compiled(*args)
        rows.append((want, got, s_want, OUT.getvalue()))
    return cnt, rows


def test_a_module_stream_is_written_and_read_between_graphs():
    rng = np.random.default_rng(52)
    cnt, rows = _run_both(_write_then_read, lambda: (random_tensor(rng, 5),))
    for want, got, s_want, s_got in rows:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        assert s_got == s_want == "n=5;"
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons
    assert cnt.frame_count == 2                      # before the write and after the read
    assert any("StringIO.write" in r for _, r in dynamo.fallback_reasons)


def test_an_argument_object_and_an_inlined_helper():
    def helper(buf, t):
        buf.append(float(t.shape[0]))
        return t * 3

    def f(x, buf):
        y = helper(buf, x + 1)
        buf.extend([1.0, 2.0])
        return y.exp(), len(buf)

    rng = np.random.default_rng(7)
    dynamo.reset()
    compiled = ember.compile(f, backend="eager")
    for n in (4, 6):
        x = random_tensor(rng, n)
        b1, b2 = array.array("d", [0.5]), array.array("d", [0.5])
        want, got = f(x, b1), compiled(x, b2)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
        assert got[1] == want[1] and b1 == b2
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons


def test_another_object_type_recompiles():
    """The guard on the class's method: a list in place of the array takes a new entry (its
    ``append`` is a list method dynamo models) and both give eager's results."""
    def f(x, buf):
        buf.append(1.5)
        return x * len(buf)

    rng = np.random.default_rng(3)
    dynamo.reset()
    compiled = ember.compile(f, backend="eager")
    x = random_tensor(rng, 3)
    for make in (lambda: array.array("d"), list, lambda: array.array("d")):
        b1, b2 = make(), make()
        np.testing.assert_allclose(compiled(x, b2).numpy(), f(x, b1).numpy())
        assert list(b1) == list(b2)
    assert dynamo.counters["eager_fallback"] == 0, dynamo.fallback_reasons


def test_a_shadowing_instance_attribute_is_seen():
    """An object whose instance dict later holds a function under the method's name: the guard
    fails and the new entry calls the instance's function, as Python does."""
    class Buf(io.StringIO):
        pass

    def f(x, buf):
        buf.write("a")
        return x + 1

    rng = np.random.default_rng(11)
    dynamo.reset()
    compiled = ember.compile(f, backend="eager")
    x = random_tensor(rng, 2)
    b = Buf()
    compiled(x, b)
    assert b.getvalue() == "a"
    seen = []
    b.write = lambda s: seen.append(s)
    np.testing.assert_allclose(compiled(x, b).numpy(), (x + 1).numpy())
    assert seen == ["a"] and b.getvalue() == "a"


def test_the_method_object_itself_is_not_modelled():
    """Anything but a call (here comparing it) still runs the frame eagerly, correctly."""
    def f(x, buf):
        same = buf.getvalue == buf.getvalue
        return x + 1, same

    buf = io.StringIO()
    dynamo.reset()
    x = random_tensor(np.random.default_rng(1), 2)
    got = ember.compile(f, backend="eager")(x, buf)
    want = f(x, buf)
    assert got[1] == want[1]
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
