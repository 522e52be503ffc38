"""A try region that starts at an ``EXTENDED_ARG`` prefix no longer stops resume functions (session 55).

The fuzzer found frames running eagerly on 3.13 with "exception table of the frame not
understood". A try body ends with a jump over its handlers; when the handlers are long (over
255 code units) the jump needs an ``EXTENDED_ARG`` prefix, and when an outer try covers it,
an exception-table entry starts at the prefix. Building a resume function, the depth of each
entry was looked up by the offset of the instruction the ``bytecode`` package saw -- which has
the prefix folded into it, at a later offset -- so none was found and the frame ran eagerly
(correctly, but uncompiled). Each version is checked: the frame compiles around its break."""
import sys

import numpy as np
import pytest

import ember
from ember import dynamo

from ._util import CountingBackend

LOG = []

# nested try blocks with long handlers (3.11 and 3.13 start a try region at an EXTENDED_ARG in
# both; 3.12 lays the handlers out elsewhere and in neither)
_SOURCES = ['''
def f(x, k):
    try:
        try:
            try:
                y = x * 2
            except RuntimeError as e:
                y = x{long}
        except ValueError as e2:
            y = x{long}
    except ValueError as e3:
        y = x - 1
    finally:
        LOG.append("fin")
    for i in range(k):
        y = y + 1
        LOG.append(y[0].tolist())        # (a graph break: a resume function is built)
    return y
''', '''
def f(x, k):
    try:
        try:
            try:
                y = x * 2
            except RuntimeError as e:
                y = x{long}
            finally:
                LOG.append("in")
        except ValueError as e2:
            y = x{long}
    except ValueError as e3:
        y = x{long}
    finally:
        LOG.append("fin")
    for i in range(k):
        y = y + 1
        LOG.append(y[0].tolist())
    return y
''']


def _frame(src):
    ns = {"LOG": LOG, "ember": ember}
    exec(compile(src.format(long=" + x" * 150), "<test_resume_extended_arg>", "exec"), ns)
    return ns["f"]


def _starts_at_a_prefix(f):
    import dis
    starts = {e.start for e in dis._parse_exception_table(f.__code__)}
    return bool(starts & {i.offset for i in dis.get_instructions(f.__code__) if i.opname == "EXTENDED_ARG"})


@pytest.mark.parametrize("src", _SOURCES)
def test_a_frame_whose_try_region_starts_at_an_extended_arg_compiles_around_its_break(src):
    f = _frame(src)
    if sys.version_info[:2] != (3, 12):
        assert any(_starts_at_a_prefix(_frame(s)) for s in _SOURCES), \
            "no frame here has a try region starting at an EXTENDED_ARG any more"
    x = ember.tensor(np.random.default_rng(55).standard_normal((2, 3)).astype(np.float32))
    LOG.clear()
    want = f(x, 3)
    want_log = list(LOG)
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(f, backend=be)
    LOG.clear()
    got = cf(x, 3)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert LOG == want_log
    reasons = [r for _, r in dynamo.fallback_reasons]
    assert not any("exception table" in r for r in reasons), reasons
    assert be.graphs, "nothing compiled"
