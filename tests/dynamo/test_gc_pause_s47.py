"""The cyclic garbage collector is held off while dynamo traces and the backend compiles, and is
back on (or left off, where the user turned it off) afterwards."""
import gc

import ember


def _recording_backend(seen):
    def backend(gm, example_inputs):
        seen.append(gc.isenabled())
        return gm.forward
    return backend


def test_gc_paused_during_compile_and_restored():
    ember.compiler.reset()
    seen = []
    f = ember.compile(lambda x: (x * 2).sin(), backend=_recording_backend(seen))
    assert gc.isenabled()
    x = ember.randn(5)
    assert ember.allclose(f(x), (x * 2).sin())
    assert seen == [False] and gc.isenabled()


def test_gc_left_off_when_the_user_turned_it_off():
    ember.compiler.reset()
    seen = []
    f = ember.compile(lambda x: x.cos() + 1, backend=_recording_backend(seen))
    gc.disable()
    try:
        f(ember.randn(3))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False]


def test_gc_restored_after_a_failing_compile():
    ember.compiler.reset()

    def broken(gm, example_inputs):
        raise RuntimeError("backend failure for the test")

    f = ember.compile(lambda x: x.exp(), backend=broken)
    try:
        f(ember.randn(3))
    except Exception:
        pass
    assert gc.isenabled()
