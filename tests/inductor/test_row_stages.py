"""Pointwise siblings of a column reduction run in its row loop (``scheduler.row_stage``): a bias
gradient ``sum(dy * g, 0)`` beside the ``dy * g`` it sums (kept for the weight's product) is one
pass over ``dy`` and ``g`` where the reduction splits over chunks of whole rows; without the
split (small sums) the stage is a loop of its own ahead of the column blocks, in the same kernel.
Values against eager, the fused node written where the reduction reads, and the siblings that
stay apart: another walk of the shared input, a read of the sums, an in-place update, the knob
off, the Triton backend's scheduler."""
import numpy as np
import pytest

import ember.prims as P

from ._helpers import assert_same, compile_and_run, patched_config, rand


def _bias_grad(dims):
    def fn(dy, g):
        t = P.mul(dy, g)
        return t, P.sum(t, dims)
    return fn


def _check(cf, got, want, x, g, dims):
    assert_same(got[0], want[0])                    # the pointwise values: the same bits
    exact = (x.numpy().astype(np.float64) * g.numpy()).sum(tuple(dims))
    np.testing.assert_allclose(got[1], exact, rtol=1e-5, atol=1e-5)
    return cf.compiled.source


@pytest.mark.parametrize("shape,dims,split", [
    ((1024, 1024), [0], True),          # the split chunks' rows host the stage
    ((64, 1024), [0], False),           # a loop of its own before the column blocks
    ((8, 128, 256), [0, 1], True),      # two reduced dims
    ((300, 37), [0], False),            # a column block of 37, rows of 37
    ((2, 3, 300, 40), [0, 1, 2], True),
    ((1, 300, 40), [0, 1], False),      # a size-1 reduced dim
])
def test_sibling_of_a_column_sum_runs_in_its_row_loop(shape, dims, split):
    with patched_config(combo_kernels=False, outer_reduction_split_min_work=(1 if split else 1 << 40),
                        outer_reduction_split_idle_min_work=(1 if split else 1 << 40)):
        x, g = rand(*shape), rand(*shape)
        cf, got, want = compile_and_run(_bias_grad(dims), x, g)
    src = _check(cf, got, want, x, g, dims)
    assert cf.compiled.n_kernels == 1
    assert "row stage written at" in src
    assert ("chunk" in src) == split
    if split:       # inside the chunks' loop over whole rows
        assert src.index("for (int64_t chunk") < src.index("row stage written at") < src.index("xblk")
    else:           # before the column blocks
        assert src.index("row stage written at") < src.index("xblk")


@pytest.mark.parametrize("knobs", [{"outer_reduction": False}, {"outer_reduction_split": False},
                                   {"outer_row_stages": False}])
def test_other_loops_give_the_same_values(knobs):
    """Without the interchanged loops the group runs as any other (the stage's inner loop over
    the reduced rows, written at the same positions); with row stages off the sibling is a
    kernel of its own."""
    x, g = rand(513, 300), rand(513, 300)
    with patched_config(combo_kernels=False, **knobs):
        cf, got, want = compile_and_run(_bias_grad([0]), x, g)
    src = _check(cf, got, want, x, g, [0])
    assert ("row stage written at" in src) == (knobs == {"outer_reduction_split": False})
    assert cf.compiled.n_kernels == (2 if knobs == {"outer_row_stages": False} else 1)


def test_a_sibling_walking_the_input_transposed_stays_apart():
    """``dy.T * h`` shares ``dy`` with the column sum but reads it down the columns: no element
    of it is the one the reduction reads at the same step."""
    x, h = rand(256, 256), rand(256, 256)

    def fn(dy, h):
        return P.mul(P.permute(dy, [1, 0]), h), P.sum(P.mul(dy, dy), [0])
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(fn, x, h)
    assert_same(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    assert "row stage written at" not in cf.compiled.source and cf.compiled.n_kernels == 2


def test_a_sibling_reading_the_reduction_stays_apart():
    """``dy - sum(dy, 0)`` needs the finished sums: a kernel after the reduction's."""
    x = rand(128, 64)

    def fn(dy):
        s = P.sum(dy, [0])
        return s, P.sub(dy, P.broadcast_in_dim(s, [128, 64], [1]))
    with patched_config(combo_kernels=False):
        cf, got, want = compile_and_run(fn, x)
    assert_same(got[1], want[1], rtol=1e-4, atol=1e-4)     # (sums in double against float32)
    assert "row stage written at" not in cf.compiled.source


def test_float16_sibling_and_int_sum():
    """The stage stores in the buffer's dtype; an integer column sum hosts it as well."""
    rng = np.random.default_rng(5)
    from ember.tensor import _make
    a = _make(rng.integers(-9, 9, size=(640, 96)).astype(np.int32))
    b = _make(rng.standard_normal((640, 96)).astype(np.float16))

    def fn(a, b):
        return P.mul(P.convert_element_type(a, b.dtype), b), P.sum(P.mul(a, a), [0])
    with patched_config(combo_kernels=False, outer_reduction_split_min_work=1):
        cf, got, want = compile_and_run(fn, a, b)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
    assert "row stage written at" in cf.compiled.source


def test_only_the_cpp_backend_asks_for_row_stages():
    """``Scheduler(graph)`` (the Triton backend's) keeps the sibling in a group of its own."""
    from ember.inductor.compile_fx import _ensure_meta
    from ember.inductor.graph import GraphLowering
    from ember.inductor.scheduler import FusedGroup, Scheduler
    from ember.inductor.virtualized import set_graph
    from ._helpers import make_fx as trace
    inputs = [rand(256, 128), rand(256, 128)]
    gm = trace(_bias_grad([0]))(*inputs)
    _ensure_meta(gm, inputs)
    counts = {}
    for flag in (False, True):
        graph = GraphLowering(gm, inputs).run()
        with set_graph(graph):
            counts[flag] = sum(isinstance(g, FusedGroup) for g in Scheduler(graph, row_stages=flag).groups)
    assert counts == {False: 2, True: 1}


def test_dense_bijection():
    """A stage is written where the reduction reads only when that index visits every element
    once: strides that tile the sizes, no offset, no overlap, no gap, no broadcast."""
    from ember.inductor.ir import index_vars
    from ember.inductor.scheduler import _dense_bijection
    x0, = index_vars("x", 1)
    r0, r1 = index_vars("r", 2)
    assert _dense_bijection(1024 * r0 + x0, [x0, r0], [1024, 64])
    assert _dense_bijection(32768 * r0 + 256 * r1 + x0, [x0, r0, r1], [256, 8, 128])
    assert _dense_bijection(x0 * 8 + r0, [x0, r0], [5, 8])               # columns outermost
    assert _dense_bijection(1024 * r0 + x0 + 7 * r1, [x0, r0, r1], [1024, 64, 1])  # a size-1 dim
    assert not _dense_bijection(1024 * r0 + x0 + 1024, [x0, r0], [1024, 64])   # shifted a row
    assert not _dense_bijection(512 * r0 + x0, [x0, r0], [1024, 64])           # rows overlap
    assert not _dense_bijection(2048 * r0 + x0, [x0, r0], [1024, 64])          # gaps
    assert not _dense_bijection(x0, [x0, r0], [1024, 64])                      # broadcast over rows
    assert not _dense_bijection(-1024 * r0 + x0, [x0, r0], [1024, 64])         # a reversed walk


def test_a_flat_sibling_of_a_narrower_reduction_compiles():
    """A 1-d sibling of a reduction with a 2-d output would narrow the group to depth 1, where
    that reduction cannot split: no row stage is asked of it (the ResNet backward's BatchNorm
    sums beside a flat ReLU mask once failed to compile here)."""
    x, w = rand(32, 128, 8, 8), rand(128)

    def fn(x, w):
        s = P.sum(x, [2, 3])                                     # [32, 128]
        return P.mul(s, P.broadcast_in_dim(w, [32, 128], [1])), P.mul(w, 3.0)
    with patched_config(combo_kernels=False, debug_lowering=True):
        cf, got, want = compile_and_run(fn, x, w)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert_same(got[1], want[1])


def test_an_in_place_update_is_not_a_row_stage_written_over_a_later_read():
    """``y = (x * 3).sum(0); x.add_(w); y + x.sum(0)``: ``x + w`` joins the first sum's row loop,
    which runs before the second sum's loop; written into ``x`` itself (the in-place update of a
    mutated input) it would be read back there as the old value. Row stages get buffers of
    their own (scheduler.inplace_outputs)."""
    import ember

    def fn(x, w):
        y = (x * 3).sum(0)
        x.add_(w)
        return y + x.sum(0)
    ember.dynamo.reset()
    cf = ember.compile(fn, backend="inductor")
    for _ in range(2):
        x0, w = ember.randn(40, 24), ember.randn(40, 24)
        xe, xc = x0.clone(), x0.clone()
        want, got = fn(xe, w), cf(xc, w)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(xc.numpy(), xe.numpy())
