"""A graph break whose next instruction is an ``EXTENDED_ARG`` prefix (session 51).

``if bool(t.mean() < 0):`` breaks the graph at the call to ``bool``. When the ``if`` body spans
more than 255 code units, the jump after the call carries an ``EXTENDED_ARG`` prefix. The resume
function's target was that prefix. The ``bytecode`` package folds such prefixes into the jump, so
the target was "not found", and the frame ran eagerly. The bytecode fuzzer hit this in 18 of 300
programs. The resume function now starts at the jump itself.
"""
import pytest

import ember
from ember import dynamo


def _long_if(n_stmts):
    body = "\n".join(f"        t = t * 1.0001 + {k % 7}" for k in range(n_stmts))
    src = f'''
def f(a):
    t = a * 2
    if bool(t.mean() < 0):
{body}
    else:
        t = t - 1
    return t.sum(0)
'''
    ns = {"ember": ember}
    exec(compile(src, f"<long if {n_stmts}>", "exec"), ns)
    return ns["f"]


@pytest.mark.parametrize("n_stmts", [3, 80])
def test_break_before_a_long_jump_resumes_compiled(n_stmts):
    f = _long_if(n_stmts)
    dynamo.reset()
    cf = ember.compile(f, backend="eager")
    for sign in (1.0, -1.0):
        a = ember.rand(4, 3) * sign
        assert ember.allclose(cf(a), f(a))
    reasons = [r for _, r in dynamo.fallback_reasons]
    assert not any("resume" in r and "not" in r for r in reasons), reasons
    assert dynamo.counters["eager_fallback"] == 0, reasons
