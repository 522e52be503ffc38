"""Combo kernels (``codegen/combo.py``): consecutive independent kernels run in one OpenMP
parallel region as ``omp for nowait`` loop nests; dependent ones never share a region."""
import re

import numpy as np
import pytest

import ember
from ember import prims as P
from ember.inductor import config as icfg
from ember.inductor.codegen import combo

from ._helpers import assert_same, compile_and_run, rand

NOWAIT_FOR = re.compile(r"#pragma omp for( simd)? schedule\((static|dynamic, \d+)\) nowait")


def _nowait_loops(src):
    """Work-shared loops of a combo region (static halves, or chunks for heavy rows)."""
    return len(NOWAIT_FOR.findall(src))


def _independent_three(a, b, c):
    return P.add(P.mul(a, 2.0), 1.0), P.exp(b), P.sum(P.mul(c, c), [0])


def test_independent_kernels_share_one_region():
    args = rand(300, 200), rand(50000), rand(64, 512)
    cf, got, want = compile_and_run(_independent_three, *args)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    src = cf.compiled.source
    assert cf.compiled.n_kernels == 1 and "combo_kernel" in src
    assert _nowait_loops(src) == 3 and src.count("#pragma omp parallel") == 1
    again = [t.numpy() for t in cf(*args)]        # the pool and the second call
    for g, w in zip(again, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)


def test_ablation_gives_separate_kernels_and_the_same_values():
    args = rand(300, 200), rand(50000), rand(64, 512)
    icfg.combo_kernels = False
    try:
        cf, got, want = compile_and_run(_independent_three, *args)
    finally:
        icfg.combo_kernels = True
    assert cf.compiled.n_kernels == 3 and "combo_kernel" not in cf.compiled.source
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)


def test_dependent_kernels_are_not_combined():
    # a row sum, a division by it, then a column sum of the result: each reads the one before
    def fn(x):
        s = P.sum(x, [1])
        y = P.div(x, P.broadcast_in_dim(s, [256, 300], [0]))
        return P.sum(y, [0])
    x = rand(256, 300, lo=0.5, hi=2.0)
    cf, got, want = compile_and_run(fn, x)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
    src = cf.compiled.source
    # whatever was fused, no loop nest reading another's output shares its region
    assert _nowait_loops(src) <= 1 or cf.compiled.n_kernels >= 2


class _G(combo.FusedGroup):
    def __init__(self, writes, reads):
        self._w, self._r = set(writes), set(reads)

    def names(self):
        return self._w

    def read_names(self):
        return self._r | self._w


@pytest.mark.parametrize("a,b,inplace,ok", [
    ((["b1"], ["x"]), (["b2"], ["y"]), {}, True),
    ((["b1"], ["x"]), (["b2"], ["b1"]), {}, False),           # b reads a's output
    ((["b1"], ["x"]), (["b2"], ["y"]), {"b2": "x"}, False),   # b overwrites a's input in place
    ((["b1"], ["x"]), (["b2"], ["y"]), {"b1": "y"}, False),   # a overwrites b's input in place
    ((["b1"], ["x"]), (["b2"], ["x"]), {}, True),             # both read the same input
    ((["b1"], ["x"]), (["b2"], ["y"]), {"b1": "p", "b2": "p"}, False),
])
def test_independence(a, b, inplace, ok):
    assert combo._independent(_G(*a), _G(*b), inplace) is ok


def test_symbolic_size_kernels_are_left_alone():
    src = ('extern "C" void kernel0(void* a_obj, const int64_t s0)\n{\n'
           '    const float* __restrict__ a = static_cast<const float*>(EMBER_DATA(a_obj));\n'
           '    #pragma omp parallel for if((s0) >= 32768)\n    for (int64_t x0 = 0; x0 < s0; ++x0) {\n'
           '    }\n}\n')
    assert combo._split(src) is None


def test_compiled_adamw_step_is_one_region_and_matches_eager(monkeypatch):
    import importlib
    cfx = importlib.import_module("ember.inductor.compile_fx")
    graphs = []
    real = cfx.compile_graph

    def record(*a, **k):
        graphs.append(real(*a, **k))
        return graphs[-1]
    monkeypatch.setattr(cfx, "compile_graph", record)
    ember.manual_seed(0)
    ps = [ember.nn.Parameter(ember.randn(40, 30)) for _ in range(6)]
    qs = [ember.nn.Parameter(p.detach().clone()) for p in ps]
    for p, q in zip(ps, qs):
        p.grad = ember.randn(40, 30)
        q.grad = p.grad.clone()
    opt_c, opt_e = ember.optim.AdamW(ps, lr=0.01), ember.optim.AdamW(qs, lr=0.01)
    step = ember.compile(opt_c.step)
    for _ in range(3):
        step()
        opt_e.step()
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    # the parameters and state are computed in place (Scheduler.inplace_outputs); each input a
    # kernel overwrites is read through a pointer derived from its output's, never through a
    # second __restrict__ pointer to the same array
    steady = graphs[-1]
    inplace = re.findall(r"^    (buf\d+) = (arg\d+)  # in place$", steady.wrapper_src, re.M)
    assert len(inplace) >= 3 * len(ps)
    kernels = steady.source.split('extern "C" void ')[1:]
    for buf, arg in inplace:
        writer = [k for k in kernels if f"void* {buf}_obj" in k.split("\n", 1)[0]]
        assert len(writer) == 1, buf
        if f"void* {arg}_obj" in writer[0].split("\n", 1)[0]:
            assert not re.search(rf"\* __restrict__ {arg} =", writer[0]), arg
            assert re.search(rf"const float\* {arg} = {buf};", writer[0]), arg


def test_siblings_reading_an_input_at_different_indices_keep_their_own_loops():
    """Two reductions of one input alike only in their sizes (per-channel and per-image sums
    of an NCHW tensor with N == C): no shared access, so no shared loop nest."""
    def fn(x):
        return P.sum(x, [0, 2]), P.sum(x, [1, 2])
    x = rand(32, 32, 64)
    cf, got, want = compile_and_run(fn, x)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    src = cf.compiled.source
    nests = src.count("#pragma omp parallel for") + _nowait_loops(src)
    assert nests >= 2, src


def _row_reductions(x):
    return P.sum(x, [1]), P.amax(x, [1])


def _gate_blocks(x):
    # an LSTM's gates: column blocks of one pre-activation buffer, indices a constant apart
    return P.tanh(P.slice(x, [0, 0], [32, 256])), P.exp(P.slice(x, [0, 512], [32, 768]))


@pytest.mark.parametrize("fn,shape", [(_row_reductions, (64, 300)), (_gate_blocks, (32, 1024))],
                         ids=["same-index", "column-blocks"])
def test_siblings_walking_a_shared_input_alike_share_a_loop(fn, shape):
    cf, got, want = compile_and_run(fn, rand(*shape))
    for g, w in zip(got, want):
        # (atol: a row sum of 300 draws from [-2, 2] can cancel to near 0, where eager's float32
        # pairwise sum and the kernel's double accumulator differ by a few 1e-6; seen at 3.4e-6)
        assert_same(g, w, rtol=1e-5, atol=2e-5)
    assert cf.compiled.n_kernels == 1 and "combo_kernel" not in cf.compiled.source


def test_thread_count_moves_to_the_region():
    args = rand(300, 200), rand(50000), rand(64, 512)
    icfg.threads = 2
    try:
        cf, got, want = compile_and_run(_independent_three, *args)
    finally:
        icfg.threads = None
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    prag = [ln.strip() for ln in cf.compiled.source.splitlines() if "#pragma omp parallel" in ln]
    assert prag == ["#pragma omp parallel num_threads(2)"]


def _scalars_and_a_loop(s, t, x):
    # two size-() kernels (an optimizer's step counts) beside one parallel loop nest
    return P.add(s, 1.0), P.mul(t, 3.0), P.exp(x)


def test_straight_line_kernels_join_the_region_as_single_blocks():
    args = rand(), rand(), rand(300, 200)
    cf, got, want = compile_and_run(_scalars_and_a_loop, *args)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6, atol=1e-6)
    src = cf.compiled.source
    assert cf.compiled.n_kernels == 1 and "combo_kernel" in src, src
    assert src.count("#pragma omp parallel") == 1
    assert src.count("#pragma omp single nowait") == 2 and _nowait_loops(src) == 1


def test_a_run_of_straight_line_kernels_is_one_plain_function():
    def fn(s, t, u):
        return P.add(s, 1.0), P.mul(t, 3.0), P.sub(u, 2.0)
    args = rand(), rand(), rand()
    cf, got, want = compile_and_run(fn, *args)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-6, atol=1e-6)
    src = cf.compiled.source
    assert cf.compiled.n_kernels == 1 and "combo_kernel" in src
    assert "#pragma omp parallel" not in src and "omp single" not in src


def test_straight_line_code_that_returns_is_not_combined():
    src = ('extern "C" void kernel0(void* a_obj)\n{\n'
           '    float* __restrict__ a = static_cast<float*>(EMBER_DATA(a_obj));\n'
           '    if (a[0] < 0) return;\n    a[0] = 1.0f;\n}\n')
    assert combo._split(src) is None
    ok = src.replace("    if (a[0] < 0) return;\n", "")
    assert combo._split(ok) is not None
