"""A data-dependent index that does not change along the inner loop (an embedding row read
across its width) has its bounds check before that loop, not inside the simd loop (a call
there made GCC's vector code of nanoGPT's embedding + layer-norm kernel 8x slower); the check
still raises IndexError for a bad index, and is skipped where the inner loop does not run (a
0-element view reads nothing; a statically zero-width table's indices are checked by a kernel of
their own, as eager checks them)."""
import re

import numpy as np
import pytest

import ember
import ember.nn.functional as F

from ._helpers import assert_same

RNG = np.random.default_rng()


def _checks_inside_simd_loops(src):
    """Index checks whose nearest enclosing loop is a ``#pragma omp simd`` loop."""
    lines = src.splitlines()
    found = []
    for i, ln in enumerate(lines):
        if "ember_flag_index_error();" not in ln or ln.lstrip().startswith("static"):
            continue
        ind = len(ln) - len(ln.lstrip())
        for j in range(i - 1, -1, -1):
            s = lines[j]
            if s.strip() and len(s) - len(s.lstrip()) < ind and s.lstrip().startswith("for ("):
                if lines[j - 1].strip().startswith("#pragma omp simd"):
                    found.append(ln.strip())
                break
    return found


def _compiled_source(fn, *args):
    from ember.inductor import compile_fx
    from ember.prims.table import decompose
    gm = decompose(fn)(*args)
    cf = compile_fx(gm, list(args))
    assert cf.compiled is not None, cf.eager_reason
    return cf, cf.compiled.source


def _embed_norm(idx, table, pos):
    x = F.embedding(idx, table) + pos
    return F.layer_norm(x, (x.shape[-1],))


def test_row_gather_checks_before_the_simd_loop_and_matches_eager():
    idx = ember.tensor(RNG.integers(0, 50, (4, 9)))
    table = ember.tensor(RNG.standard_normal((50, 40)).astype(np.float32))
    pos = ember.tensor(RNG.standard_normal((9, 40)).astype(np.float32))
    cf, src = _compiled_source(_embed_norm, idx, table, pos)
    assert "ember_flag_index_error();" in src
    assert _checks_inside_simd_loops(src) == [], src
    got, want = cf(idx, table, pos), _embed_norm(idx, table, pos)
    assert_same(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    bad = ember.tensor(np.where(RNG.random((4, 9)) < 0.2, 50, RNG.integers(0, 50, (4, 9))))
    with pytest.raises(IndexError):
        cf(bad, table, pos)
    with pytest.raises(IndexError):
        _embed_norm(bad, table, pos)


def test_symbolic_width_checks_where_the_row_is_not_empty():
    """Dynamic shapes: the row width is a size symbol, so the hoisted check tests it is > 0."""
    def f(idx, table):
        return F.embedding(idx, table) * 2.0
    ember.dynamo.reset()
    cf = ember.compile(f, dynamic=True)
    for width in (7, 12):
        idx = ember.tensor(RNG.integers(0, 30, (5,)))
        table = ember.tensor(RNG.standard_normal((30, width)).astype(np.float32))
        np.testing.assert_array_equal(cf(idx, table).numpy(), f(idx, table).numpy())
        with pytest.raises(IndexError):
            cf(ember.tensor([3, 30, 1]), table)


def test_zero_width_embedding_checks_its_indices_as_eager():
    """A zero-width table selects no element, so the selection's loop never reads an index;
    eager still raises on an out-of-range one, and so does the compiled graph (a kernel of its
    own checks the indices: lowering._check_indices). In-range indices give the empty rows."""
    table = ember.tensor(np.zeros((30, 0), np.float32))
    ember.dynamo.reset()
    cf = ember.compile(lambda idx, t: F.embedding(idx, t))
    good = ember.tensor(RNG.integers(0, 30, (4, 3)))
    assert tuple(cf(good, table).shape) == (4, 3, 0)
    for bad in ([3, 30, 1], [-31, 2]):
        with pytest.raises(IndexError):
            F.embedding(ember.tensor(bad), table)
        with pytest.raises(IndexError):
            cf(ember.tensor(bad), table)
    assert tuple(cf(ember.tensor(np.zeros((0,), np.int64)), table).shape) == (0, 0)


def test_symbolic_width_that_reaches_zero_checks_its_indices():
    """``t[:, 2:]`` of a table whose width is dynamic: the selection's width is ``s - 2``, zero
    when the table is 2 wide (dynamo recompiles there on a guard of the output's size, and the
    new graph keeps the width symbolic). Its loop then never reads an index, and the hoisted
    check is skipped with it; the indices are checked by a kernel of their own, so an
    out-of-range one raises as eager does (it gave an empty result before). Wider tables: the
    values and the error as before."""
    f = lambda idx, t: F.embedding(idx, t[:, 2:])  # noqa: E731
    ember.dynamo.reset()
    cf = ember.compile(f, dynamic=True)
    for width in (5, 7, 2, 9):
        table = ember.tensor(RNG.standard_normal((30, width)).astype(np.float32))
        good = ember.tensor(RNG.integers(0, 30, (4, 3)))
        np.testing.assert_array_equal(cf(good, table).numpy(), f(good, table).numpy())
        for bad in ([3, 30, 1], [-1, 2]):
            with pytest.raises(IndexError):
                f(ember.tensor(bad), table)
            with pytest.raises(IndexError):
                cf(ember.tensor(bad), table)


def test_hoisted_check_text_names_the_inner_extent_only_when_symbolic():
    from ember.inductor.codegen.cpp import CppOps
    import sympy
    x0, r0, s0 = sympy.symbols("x0 r0 s0", integer=True)

    class _K:
        overrides = {}
    ops = CppOps(_K(), [], "", hoist=([], "", {"r0"}), ranges={x0: (0, 4), r0: (0, s0)})
    assert ops._inner_loops_run() == " && (s0) > 0"
    ops = CppOps(_K(), [], "", hoist=([], "", {"r0"}), ranges={x0: (0, 4), r0: (0, 8)})
    assert ops._inner_loops_run() == ""
    ops = CppOps(_K(), [], "", hoist=([], "", {"r0"}), ranges={x0: (0, 4), r0: (0, 0)})
    assert ops._inner_loops_run() is False
    ops = CppOps(_K(), [], "", hoist=([], "", {"r1"}), ranges={x0: (0, 4)})
    assert ops._inner_loops_run() is None
    assert re.match(r"^ && \(s0\) > 0$", CppOps(_K(), [], "", hoist=([], "", {"r0"}),
                                                 ranges={r0: (0, s0)})._inner_loops_run())
