"""The per-call path of compiled graphs: the OpenMP wait policy set at import,
the matmul externs (no copies of transposed operands, preallocated outputs,
fused bias), and the wrapper/runtime layers (buffer reuse across calls that
never hands a caller memory a later call overwrites)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember

PY = sys.executable


# ---------------------------------------------------------------------- OpenMP wait policy
def _run(code, env_policy=None):
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    r = subprocess.run([PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


# a libgomp loaded before ember, as torch's import does (torch ships its own libgomp.so.1);
# the system's is loaded directly so the test needs no torch (3.12/3.13 have none)
_LOAD_GOMP = "import ctypes, ctypes.util\nctypes.CDLL(ctypes.util.find_library('gomp') or 'libgomp.so.1')\n"

_COMPILE_TWO = """
    import os
    print("POLICY", os.environ.get("OMP_WAIT_POLICY"))
    f = ember.compile(lambda x: x.sin() + 1.5)
    g = ember.compile(lambda x: x.cos() * 2.5)
    x = ember.randn(8)
    import numpy as np
    np.testing.assert_allclose(f(x).numpy(), np.sin(x.numpy()) + 1.5, rtol=1e-6)
    np.testing.assert_allclose(g(x).numpy(), np.cos(x.numpy()) * 2.5, rtol=1e-6)
"""


def test_import_sets_passive_policy_and_libgomp_loaded_later_is_fine():
    out, err = _run("import ember\n" + _LOAD_GOMP + textwrap.dedent(_COMPILE_TWO))
    assert "POLICY passive" in out
    assert "OMP_WAIT_POLICY" not in err


def test_libgomp_loaded_before_ember_warns_once_with_the_fix():
    # a libgomp (torch's, at its import) initialised without the variable
    out, err = _run(_LOAD_GOMP + "import ember\n" + textwrap.dedent(_COMPILE_TWO))
    assert "POLICY passive" in out
    assert err.count("export OMP_WAIT_POLICY=passive") == 1, err
    assert "libgomp" in err


def test_user_policy_is_kept_and_not_warned_about():
    out, err = _run(_LOAD_GOMP + "import ember\n" + textwrap.dedent(_COMPILE_TWO), env_policy="active")
    assert "POLICY active" in out
    assert "OMP_WAIT_POLICY" not in err


def test_loaded_libgomp_reads_the_process_maps():
    out, _ = _run("""
        import ctypes, ctypes.util, os
        import ember
        from ember import _openmp
        before = _openmp.loaded_libgomp()
        ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
        after = _openmp.loaded_libgomp()
        print("BEFORE", before)
        print("AFTER", ["libgomp" in os.path.basename(p) for p in after])
    """)
    assert "BEFORE []" in out
    assert "AFTER [True]" in out


# ---------------------------------------------------------------------- wrapper: buffers and views
import threading  # noqa: E402

import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import prims as P  # noqa: E402
from ember.inductor import config as icfg  # noqa: E402

from ._helpers import assert_same, compile_and_run, rand  # noqa: E402


def _mlp_prims(x, w1, b1, w2):
    """x @ w1^T + b1 -> gelu (one fused kernel) -> @ w2^T: intermediates (the first matmul's
    output, the gelu) between two externs, and three outputs."""
    h = P.add(P.mm(x, P.permute(w1, [1, 0])), P.broadcast_in_dim(b1, [8, 32], [1]))
    g = P.mul(h, P.mul(P.add(P.erf(P.mul(h, 0.7071067811865476)), 1.0), 0.5))
    y = P.mm(g, P.permute(w2, [1, 0]))
    return y, P.exp(y), P.permute(y, [1, 0])


def _mlp_args():
    return [rand(8, 16), rand(32, 16), rand(32), rand(12, 32)]


def _globals(cf):
    return cf.compiled._call.__globals__


def test_outputs_fresh_and_values_kept_after_later_calls():
    args = _mlp_args()
    cf, got, want = compile_and_run(_mlp_prims, *args)
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    first = [t.numpy().copy() for t in cf(*args)]
    outs1 = [t.numpy() for t in cf(*args)]
    args2 = _mlp_args()
    outs2 = [t.numpy() for t in cf(*args2)]
    # the first call's outputs were not overwritten by the second call
    for a, b in zip(outs1, first):
        np.testing.assert_array_equal(a, b)
    ref2 = [t.numpy() for t in cf.gm(*args2)]
    for g, w in zip(outs2, ref2):
        assert_same(g, w, rtol=1e-5, atol=1e-5)
    # outputs never share memory with each other (except the declared view) or across calls
    assert not np.shares_memory(outs1[0], outs1[1])
    assert np.shares_memory(outs1[0], outs1[2])        # y.T is a view of y, as eagerly
    for a in outs1:
        for b in outs2:
            assert not np.shares_memory(a, b)


def test_intermediates_pooled_across_calls_never_outputs():
    args = _mlp_args()
    cf, _, _ = compile_and_run(_mlp_prims, *args)
    glb = _globals(cf)
    src = cf.compiled.wrapper_src
    assert "def _new_pool():" in src and "_pools" in glb
    outs = [t.numpy() for t in cf(*args)]
    (pool,) = glb["_pools"]               # one pool, back on the list after the call
    assert len(pool) >= 1
    outs2 = [t.numpy() for t in cf(*args)]
    (pool2,) = glb["_pools"]
    assert pool2 is pool                   # the same memory on every call
    for p in pool:
        for o in outs + outs2:
            assert not np.shares_memory(p, o)


def test_pooling_off_allocates_per_call():
    old = icfg.reuse_buffers_across_calls
    icfg.reuse_buffers_across_calls = False
    try:
        args = _mlp_args()
        cf, got, want = compile_and_run(_mlp_prims, *args)
    finally:
        icfg.reuse_buffers_across_calls = old
    assert "_new_pool" not in cf.compiled.wrapper_src
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-5, atol=1e-5)


def test_concurrent_calls_get_their_own_pools():
    args = _mlp_args()
    cf, _, _ = compile_and_run(_mlp_prims, *args)
    inputs = [_mlp_args() for _ in range(4)]
    refs = [[t.numpy() for t in cf.gm(*a)] for a in inputs]
    errors = []

    def work(k):
        try:
            for _ in range(30):
                got = [t.numpy() for t in cf(*inputs[k])]
                for g, w in zip(got, refs[k]):
                    # (BLAS may split a product differently when called from several threads at
                    # once: last-bit differences; another call's data would be O(1) off)
                    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_transposed_operands_are_views_not_copies():
    """x @ w.T, v.T @ x and a batched x^T @ v: numpy receives transposed views (BLAS transpose
    flags), no copy kernel, no as_strided."""
    def fn(x, w, v):
        return P.mm(x, P.permute(w, [1, 0])), P.mm(P.permute(v, [1, 0]), x), \
            P.bmm(P.permute(P.reshape(x, [2, 4, 16]), [0, 2, 1]), P.reshape(v, [2, 4, 16]))
    x, w, v = rand(8, 16), rand(12, 16), rand(8, 16)
    cf, got, want = compile_and_run(fn, x, w, v)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
    src = cf.compiled.wrapper_src
    assert cf.compiled.n_kernels == 0
    assert "arg1.T" in src and "as_strided" not in src and "_strided_view" not in src
    assert src.count("# mm") == 3
    assert "ascontiguousarray" not in src and ".copy(" not in src


def test_strided_and_offset_matmul_operands():
    """Slices with steps and offsets (not a permutation): an ndarray view over the buffer."""
    def fn(x, w):
        xs = P.slice(x, [0, 1], [8, 33], [1, 2])          # every other column from 1
        ws = P.slice(w, [2, 0], [18, 12])                  # rows 2..17
        return P.mm(xs, ws), P.mm(P.permute(ws, [1, 0]), P.permute(xs, [1, 0]))
    x, w = rand(8, 40), rand(20, 12)
    cf, got, want = compile_and_run(fn, x, w)
    for g, ww in zip(got, want):
        assert_same(g, ww, rtol=1e-5, atol=1e-5)
    assert "_as_view(" in cf.compiled.wrapper_src
    out2 = [t.numpy() for t in cf(rand(8, 40), rand(20, 12))]
    assert out2[0].shape == (8, 12)


def test_bias_epilogue_is_one_kernel_after_the_matmul():
    args = _mlp_args()
    cf, got, want = compile_and_run(_mlp_prims, *args)
    lines = [ln.strip() for ln in cf.compiled.wrapper_src.splitlines()]
    mm = [i for i, ln in enumerate(lines) if ln.endswith("# mm")]
    assert len(mm) == 2
    between = [ln for ln in lines[mm[0] + 1:mm[1]] if ln.startswith("_kernel")]
    assert len(between) == 1                                  # bias + gelu fused after the mm


def test_compiled_training_gradients_two_steps():
    ember.manual_seed(3)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    cmodel = ember.compile(model)
    for step in range(2):
        x = ember.randn(6, 16)
        target = ember.randn(6, 8)
        for p in model.parameters():
            p.grad = None
        loss = F.mse_loss(model(x), target)
        loss.backward()
        want = [p.grad.numpy().copy() for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        closs = F.mse_loss(cmodel(x), target)
        closs.backward()
        got = [p.grad.numpy() for p in model.parameters()]
        np.testing.assert_allclose(closs.item(), loss.item(), rtol=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_dynamic_sizes_allocate_per_call():
    def fn(x, w):
        h = P.tanh(P.mm(x, w))
        return P.mm(h, P.permute(w, [1, 0]))
    x, w = rand(5, 16), rand(16, 16)
    cf, got, want = compile_and_run(fn, x, w, dynamic=True)
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
    for n in (7, 3):
        x2 = rand(n, 16)
        assert_same(cf(x2, w).numpy(), cf.gm(x2, w).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [(), (3,)])
def test_product_used_transposed_is_computed_transposed(batch):
    """In a backward graph, ``(a @ b).T`` (a weight gradient) is computed as ``b.T @ a.T`` into
    a C-ordered buffer: the gradient is contiguous (the engine adopts it without a copy), with no
    ``.T`` view returned; a doubly transposed use reads the product as is. In a graph whose
    outputs the caller sees, the output keeps eager's strides: a transposed view of the product."""
    nd = len(batch) + 2
    sw = list(range(nd - 2)) + [nd - 1, nd - 2]

    def once(a, b):
        return P.permute(P.mm(a, b) if not batch else P.bmm(a, b), sw)

    def twice(a, b):
        return P.permute(once(a, b), sw)
    a, b = rand(*batch, 7, 5), rand(*batch, 5, 9)
    for fn, shape in ((once, (*batch, 9, 7)), (twice, (*batch, 7, 9))):
        cf, got, want = compile_and_run(fn, a, b, gradients=True)
        assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
        assert got[0].shape == shape and got[0].flags.c_contiguous
        assert ".T" not in cf.compiled.wrapper_src.split("return")[-1]
    cf, got, want = compile_and_run(once, a, b)        # a user-visible output: eager's strides
    assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert got[0].strides == want[0].strides and not got[0].flags.c_contiguous
    icfg.transposed_products = False
    try:
        cf, got, want = compile_and_run(once, a, b, gradients=True)
        assert_same(got[0], want[0], rtol=1e-5, atol=1e-5)
        assert not got[0].flags.c_contiguous          # the ablation returns the transposed view
    finally:
        icfg.transposed_products = True


def test_compiled_transposed_product_has_eager_strides_and_weight_grads_stay_contiguous():
    """``compile(lambda a, b: (a @ b).t())`` returns the transposed view eager returns (as
    torch.compile does); a compiled Linear's weight gradient is still C-ordered."""
    a, b = ember.randn(4, 5), ember.randn(5, 6)
    f = ember.compile(lambda a, b: (a @ b).t(), backend="inductor")
    got, want = f(a, b), (a @ b).t()
    assert got.stride() == want.stride() and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    lin = ember.nn.Linear(5, 6)
    ember.compile(lin, backend="inductor")(ember.randn(4, 5)).sum().backward()
    assert lin.weight.grad.stride() == (5, 1)


def test_multi_use_view_of_a_computation_is_computed_once():
    """A reshape of an expensive pointwise value read by two matmuls, one of them transposed
    (the gelu backward feeding the input and weight gradients): the value is written once and
    the transposed matmul reads a view of it -- not a second, transposed evaluation."""
    def fn(x, w, v):
        t = x
        for _ in range(6):
            t = P.mul(P.add(P.tanh(t), t), t)
        t2 = P.reshape(t, [24, 16])
        return P.mm(t2, w), P.mm(P.permute(t2, [1, 0]), v)
    args = rand(4, 6, 16), rand(16, 8), rand(24, 5)
    cf, got, want = compile_and_run(fn, *args)
    for g, ww in zip(got, want):
        # six rounds of (tanh(t) + t) * t reach ~1e25: a product's sum can cancel to far below
        # its terms, so the absolute tolerance scales with the largest entry
        assert_same(g, ww, rtol=1e-4, atol=1e-5 * float(np.abs(np.asarray(ww, np.float64)).max()))
    mms = [ln.strip() for ln in cf.compiled.wrapper_src.splitlines() if ln.strip().endswith("# mm")]
    first = mms[0].split("(")[1].split(",")[0]
    assert mms[1].split("(")[1].split(",")[0] == first + ".T"
