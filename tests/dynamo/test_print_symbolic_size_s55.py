"""``print(y.shape)`` of a symbolic size prints the call's numbers (session 55).

The bytecode fuzzer found it once it compared what programs print to stdout: after an automatic
dynamic recompile, ``print(t.shape)`` of an intermediate printed ``ember.Size([s0, 3])`` where
Python prints ``ember.Size([5, 3])``. A replayed print recomputes the symbolic ints in its
arguments from the inputs' sizes (``OutputGraph.replay_value_expr``), but a ``Size`` was not seen
as holding any (``constant._has_symbolic`` looked into plain tuples and lists only), so the
traced Size itself, symbols and all, was handed to print."""
import contextlib
import io

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend


def _shapes(x):
    y = x * 2
    print(y.shape)
    print((y.shape, 1), [y.shape])
    print("rows", y.shape, sep=": ")
    return y


def _run(fn, sizes):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for n in sizes:
            fn(ember.tensor(np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)))
    return out.getvalue()


def test_printed_symbolic_sizes_are_the_calls_numbers():
    sizes = (4, 4, 5, 6, 7)
    want = _run(_shapes, sizes)
    dynamo.reset()
    be = CountingBackend()
    got = _run(ember.compile(_shapes, backend=be), sizes)
    assert got == want
    assert "s0" not in got
    assert len(be.graphs) <= 2          # (the print is replayed: no graph break, no recompile per size)
