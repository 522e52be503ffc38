"""print() of symbolic sizes inside compiled frames (session 53): replayed after the graph with the
values computed from this call's input sizes, not a graph break and not a guard per size.

Before, ``print(x.shape)`` under dynamic shapes broke the graph there ("print() of a symbolic
size"): the replay only knew constants. Now the sizes are recomputed as the call starts, the
way a symbolic int the frame returns is (``OutputGraph.sym_int_expr``)."""
import io

import numpy as np

import ember
from ember import dynamo

from ._util import CountingBackend, random_tensor

_rng = np.random.default_rng(53)

OUT = io.StringIO()


def _run(fn, shapes, dynamic):
    """(eager text, compiled text, backend) over calls with inputs of ``shapes``."""
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(fn, backend=be, dynamic=dynamic)
    texts = []
    for compiled in (False, True):
        OUT.seek(0)
        OUT.truncate()
        for sx, sy in shapes:
            x, y = random_tensor(_rng, *sx), random_tensor(_rng, *sy)
            got = (cf if compiled else fn)(x, y)
            np.testing.assert_allclose(got.numpy(), (x * 2 + 1).numpy(), rtol=1e-6)
        texts.append(OUT.getvalue())
    return texts[0], texts[1], be


def sizes(x, y):
    z = x * 2
    print("n =", x.shape[0], x.shape, len(y), y.size(1) * 3, file=OUT)
    print([x.shape[0], 2], (y.shape[0] - 1,), x.size(), sep=";", end="|\n", file=OUT)
    print(x.shape[0] * y.shape[0] + 7, x.numel(), file=OUT)
    return z + 1


# (no size equal to another in one call: equal sizes share a symbol, "duck sizing", and a later
# call where they differ recompiles)
SHAPES = [((3, 4), (6, 2)), ((5, 4), (8, 3)), ((7, 4), (2, 5)), ((9, 4), (10, 6))]


def test_symbolic_sizes_print_this_calls_values_without_recompiling():
    eager, compiled, be = _run(sizes, SHAPES, dynamic=True)
    assert compiled == eager
    assert "ember.Size([7, 4])" in compiled and "[9, 2];(9,);ember.Size([9, 4])|" in compiled
    assert be.frame_count == 1                     # one graph for every size: no guard on a value
    assert not dynamo.fallback_reasons


def test_automatic_dynamic_prints_after_the_recompile():
    """Without ``dynamic=``: the first call compiles static sizes (constants), the second a
    symbolic graph, and later sizes reuse it; every call prints its own sizes."""
    eager, compiled, be = _run(sizes, SHAPES, dynamic=None)
    assert compiled == eager
    assert be.frame_count == 2
    assert not dynamo.fallback_reasons


def halves(x, y):
    z = x * 2
    print(x.shape[0] / 2, file=OUT)       # a symbolic float: still a break, still the right text
    return z + 1


def test_symbolic_float_still_breaks_and_prints_right():
    eager, compiled, _ = _run(halves, SHAPES[:3], dynamic=True)
    assert compiled == eager == "1.5\n2.5\n3.5\n"


def test_logging_arguments_may_be_symbolic_sizes():
    import logging
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    log = logging.getLogger("ember.test.print_symbolic_s53")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.addHandler(Keep())

    def logs(x, y):
        log.info("rows %d of %s", x.shape[0], tuple(x.shape))
        return x * 2 + 1
    eager = []
    for sx, sy in SHAPES:
        logs(random_tensor(_rng, *sx), None)
    eager, records[:] = list(records), []
    dynamo.reset()
    be = CountingBackend()
    cf = ember.compile(logs, backend=be, dynamic=True)
    for sx, sy in SHAPES:
        cf(random_tensor(_rng, *sx), None)
    assert records == eager == [f"rows {sx[0]} of {sx}" for sx, _ in SHAPES]
    assert be.frame_count == 1 and not dynamo.fallback_reasons
