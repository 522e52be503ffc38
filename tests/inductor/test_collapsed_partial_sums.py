"""Double sums in collapsed simd nests (a batch norm's per-channel sums over N, H and W) add float
partials per outer iteration (``codegen/cpp_strips.collapsed_partial_sums``): the rewrite on the
generator's text, the nests it leaves alone, and the values against float64 sums."""
import numpy as np
import pytest

import ember.prims as P
from ember.inductor import config
from ember.inductor.codegen.cpp_strips import collapsed_partial_sums
from ember.tensor import _make

from ._helpers import compile_and_run


def _nest(sizes=("32", "32", "32"), pragma="#pragma omp simd reduction(+:tmp0) reduction(+:tmp1) collapse(3)",
          acc="double"):
    lines = [f"        {acc} tmp0 = static_cast<{acc}>(0);", f"        {acc} tmp1 = static_cast<{acc}>(0);",
             "        " + pragma]
    ind = "        "
    for d, n in enumerate(sizes):
        lines.append(f"{ind}{'    ' * d}for (int64_t r{d} = 0; r{d} < {n}; ++r{d}) {{")
    b = ind + "    " * len(sizes)
    lines += [f"{b}float tmp4 = a[1024*r0 + 32*r1 + r2];", f"{b}float tmp5 = tmp4 * tmp4;",
              f"{b}tmp0 = tmp0 + tmp4;", f"{b}tmp1 = tmp1 + tmp5;"]
    for d in reversed(range(len(sizes))):
        lines.append(f"{ind}{'    ' * d}}}")
    lines.append("        out[0] = tmp0;")
    return lines


def test_rewrite_takes_the_outer_loop_out_of_the_collapse():
    out = collapsed_partial_sums(_nest())
    text = "\n".join(out)
    assert text.index("for (int64_t r0") < text.index("float tmp0_p = 0.0f;") < text.index("collapse(2)")
    assert "#pragma omp simd reduction(+:tmp0_p) reduction(+:tmp1_p) collapse(2)" in text
    assert "tmp0_p = tmp0_p + tmp4;" in text and "tmp1_p = tmp1_p + tmp5;" in text
    after = text[text.index("tmp1_p = tmp1_p + tmp5;"):]
    assert after.index("tmp0 = tmp0 + static_cast<double>(tmp0_p);") < after.index("out[0] = tmp0;")
    assert text.count("{") == text.count("}")
    # two loops: the inner one keeps no collapse clause
    two = "\n".join(collapsed_partial_sums(_nest(sizes=("8", "512"), pragma="#pragma omp simd reduction(+:tmp0) "
                                                                           "reduction(+:tmp1) collapse(2)")))
    assert "collapse" not in two and "#pragma omp simd reduction(+:tmp0_p) reduction(+:tmp1_p)" in two


@pytest.mark.parametrize("case", [
    dict(pragma="#pragma omp parallel for simd reduction(+:tmp0) reduction(+:tmp1) collapse(3)"),   # parallel
    dict(sizes=("4", "64", "64")),               # inner extent 4096 > config.strip_loops
    dict(sizes=("32", "s0", "32")),              # a symbolic extent
    dict(sizes=("512", "4", "8")),               # inner extent 32: too short to gain
    dict(acc="float"),                           # float accumulators: nothing to split
])
def test_nests_left_alone(case):
    lines = _nest(**case)
    assert collapsed_partial_sums(lines) == lines


def test_switched_off_with_strips():
    old = config.strip_loops
    config.strip_loops = 0
    try:
        assert collapsed_partial_sums(_nest()) == _nest()
    finally:
        config.strip_loops = old


def test_per_channel_sums_against_float64():
    """Batch norm's backward shape of reduction: per channel over N, H, W, four sums sharing a
    loop, values drawn with a large mean (cancellation in the centred product)."""
    rng = np.random.default_rng()
    g = (rng.standard_normal((16, 8, 16, 16)) + 3).astype(np.float32)
    x = (rng.standard_normal((16, 8, 16, 16)) * 2 - 1).astype(np.float32)

    def f(g, x):
        dims = [0, 2, 3]
        return P.sum(g, dims), P.sum(P.mul(g, x), dims), P.sum(P.mul(x, x), dims), P.sum(x, dims)
    cf, got, _ = compile_and_run(f, _make(g), _make(x))
    src = cf.compiled.source
    assert "_p = 0.0f;" in src and "collapse(2)" in src, src
    g64, x64 = g.astype(np.float64), x.astype(np.float64)
    want = [g64.sum((0, 2, 3)), (g64 * x64).sum((0, 2, 3)), (x64 * x64).sum((0, 2, 3)), x64.sum((0, 2, 3))]
    terms = [np.abs(g64).sum((0, 2, 3)), np.abs(g64 * x64).sum((0, 2, 3)), (x64 * x64).sum((0, 2, 3)),
             np.abs(x64).sum((0, 2, 3))]
    for k, (a, w, t) in enumerate(zip(got, want, terms)):
        # the float32 products themselves round (half an ulp each); the partials add at most
        # ~70 eps of the sum of magnitudes (16 lanes of 64 values, then 16 lanes)
        err = np.abs(a.astype(np.float64) - w) / t
        assert err.max() < 70 * np.finfo(np.float32).eps, (k, err.max())
