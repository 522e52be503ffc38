"""Pointwise kernels of many stages over many buffers run stage by stage over blocks
(``scheduler._stage_major_blocks``): an LSTM backward's cell-state recurrence recomputed from
the saved gates, every step's state and its tanh written out. Values against eager, the loop
structure on the generated source, and the kernels that keep one loop over every element."""
import re

import numpy as np
import pytest

import ember.prims as P

from ._helpers import assert_same, compile_and_run, patched_config, rand


def _recurrence(steps):
    """c_t = f_t * c_{t-1} + i_t * g_t for ``steps`` steps; outputs every c_t and tanh(c_t)."""
    def fn(c0, *gates):
        outs, c = [], c0
        for t in range(steps):
            i, f, g = gates[3 * t:3 * t + 3]
            c = P.add(P.mul(f, c), P.mul(i, g))
            outs += [c, P.tanh(c)]
        return tuple(outs)
    return fn


def _inputs(shape, steps):
    return [rand(*shape)] + [rand(*shape, lo=0.0, hi=1.0) for _ in range(3 * steps)]


def _stage_loops(src, block):
    """SIMD loops over one block's elements in the generated source."""
    return len(re.findall(rf"for \(int64_t r0 = 0; r0 < {block}; \+\+r0\)", src))


def _compiled_source(shape, steps, **knobs):
    """The recurrence compiled (values checked against eager): its C++ source."""
    with patched_config(combo_kernels=False, **knobs):
        cf, got, want = compile_and_run(_recurrence(steps), *_inputs(shape, steps))
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6, atol=1e-6)
    return cf.compiled.source


@pytest.mark.parametrize("shape,block", [((32, 256), 256), ((8192,), 256), ((6, 640), 640), ((5, 600), 600)])
def test_the_recurrence_runs_stage_by_stage_and_matches_eager(shape, block):
    """Rows of the right size are the blocks; a flat range is cut into blocks of 256."""
    steps = 12
    assert _stage_loops(_compiled_source(shape, steps), block) >= 2 * steps


@pytest.mark.parametrize("shape,steps,knobs", [
    ((32, 256), 12, {"stage_major_block": 0}),       # switched off
    ((32, 256), 3, {}),                              # 16 buffers: under stage_major_min_streams
    ((1000,), 12, {}),                               # a size the block does not divide
])
def test_other_kernels_keep_one_loop_over_every_element(shape, steps, knobs):
    assert "r0" not in _compiled_source(shape, steps, **knobs)


def test_only_the_cpp_backend_asks_for_blocks():
    """The Triton backend's scheduler (``Scheduler(graph)``) keeps the group's own loops."""
    from ember.inductor.compile_fx import _ensure_meta
    from ember.inductor.graph import GraphLowering
    from ember.inductor.scheduler import FusedGroup, Scheduler
    from ember.inductor.virtualized import set_graph
    from ._helpers import make_fx as trace
    steps = 12
    inputs = _inputs((32, 256), steps)
    gm = trace(_recurrence(steps))(*inputs)
    _ensure_meta(gm, inputs)
    depths = {}
    for flag in (False, True):
        graph = GraphLowering(gm, inputs).run()
        with set_graph(graph):
            groups = [g for g in Scheduler(graph, stage_major=flag).groups if isinstance(g, FusedGroup)]
        depths[flag] = [g.p for g in groups if len(g.nodes) >= 8]
    assert depths == {False: [2], True: [1]}
