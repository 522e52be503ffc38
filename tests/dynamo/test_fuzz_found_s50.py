"""Dynamo bugs found by the bytecode program fuzzer (``test_fuzz_bytecode_s50.py``), pinned.

Each case compares the compiled function with the plain one over calls whose int/float
arguments or globals change (automatic dynamic then traces them unspecialised)."""
from __future__ import annotations

import io

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend


def _x():
    return ember.randn(2, 3)


def test_str_format_of_an_unspecialised_int():
    """``'{}'.format(k)`` printed the symbol (``s0``) once k was traced as a symbolic size."""
    def f(a, k):
        return a + 1, "{}:{}".format(k, a.dim()), "{k}".format(k=k), f"{k}", str(k)
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    for k in (2, 3, 7):
        x = _x()
        assert cf(x, k)[1:] == f(x, k)[1:]


def test_isinstance_of_an_unspecialised_int():
    """``isinstance(k, int)`` was False once k was traced as a symbolic size (a wrong branch)."""
    def f(a, k):
        return a + 1, isinstance(k, int), (a * 2 if isinstance(k, int) else a)
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    for k in (1, 5, 2.5, True, 7):
        x = _x()
        got, want = cf(x, k), f(x, k)
        assert got[1] == want[1], k
        np.testing.assert_array_equal(got[2].numpy(), want[2].numpy())


COUNTER = 0
LOG = []


def test_global_read_before_its_replayed_write():
    """``LOG.append(COUNTER); COUNTER += 1``: the replayed append read the global after the
    replayed write (LOG got [0, 1, 3])."""
    global COUNTER

    def f(a):
        global COUNTER
        LOG.append(COUNTER)
        COUNTER += 1
        return a * 2
    dynamo.reset()
    COUNTER = 0
    LOG.clear()
    cf = ember.compile(f, backend="eager")
    for _ in range(4):
        cf(_x())
    assert (COUNTER, LOG) == (4, [0, 1, 2, 3])


OUT = io.StringIO()


def _many_locals(a, b):
    t0, t1, t2, t3, t4, t5, t6, t7 = a + 0, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7
    t8, t9 = b + 8, b + 9
    for i in range(1):
        for j in range(1):
            dynamo.graph_break()          # with two iterators on the stack
    u, w = a * 2, b * 3                   # locals 14 and 15 here; past 15 in the resume function
    return (u, w, t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, i + j)


def test_resume_function_with_many_locals():
    """Python 3.13 packs two local indices into 4 bits each in LOAD_FAST_LOAD_FAST; the resume
    function renumbers its locals (the stack slots come first), and past 15 the pair was packed
    wrong -- a returned tuple held another local (fuzzer, 3.13, hash-seed dependent), or the
    resume function did not map back and the frame ran eagerly. Resume functions split those
    superinstructions."""
    dynamo.reset()
    cnt = CountingBackend()
    cf = ember.compile(_many_locals, backend=cnt)
    for _ in range(2):
        a, b = _x(), _x()
        got, want = cf(a, b), _many_locals(a, b)
        assert [type(g) for g in got] == [type(w) for w in want]
        for g, w in zip(got, want):
            if isinstance(w, ember.Tensor):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
            else:
                assert g == w
    # both halves compiled: the resume function was built (it had failed to map back to the
    # original before, and the frame ran eagerly)
    assert cnt.frame_count == 2


def test_float16_times_an_unspecialised_float():
    """``s * x`` with x float16 and s a float argument that changed: eager computes float32(x) *
    float32(s) rounded once; the 0-d float64 input it was traced as is rounded to float16 by the
    op first (1 ulp off in about half the elements). The float is now used by value."""
    def f(x, s):
        return s * x, x + s, x * s - 1
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    rng = np.random.default_rng(50)
    for _ in range(6):
        x = ember.tensor(rng.standard_normal(64).astype(np.float16))
        s = float(np.float32(rng.standard_normal()))
        for g, w in zip(cf(x, s), f(x, s)):
            assert g.dtype == w.dtype == ember.float16
            np.testing.assert_array_equal(g.numpy(), w.numpy())
