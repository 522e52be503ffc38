"""ember's own float32 GEMM (``inductor/gemm.py``): products of every layout against a float64
reference, the fallbacks to numpy's matmul, and compiled graphs that use it."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember.inductor import config, gemm

from ._helpers import patched_config as _patched

if not gemm.available():
    pytest.skip(f"ember's GEMM is not built here: {gemm.unavailable_reason()}", allow_module_level=True)

_rng = np.random.default_rng()


@pytest.fixture(autouse=True)
def _every_product_on_ember(monkeypatch):
    """These tests are about the kernel: the AVX2 build's routing of some shapes to numpy
    (``gemm.route_to_numpy``, tested in test_gemm_avx2.py) is off."""
    monkeypatch.setattr(gemm, "route_to_numpy", False)




def _operand(batch, rows, cols, transposed, step):
    """A float32 [batch?, rows, cols] view: transposed storage and/or every ``step``-th column."""
    shape = (rows, cols * step) if not transposed else (cols * step, rows)
    if batch:
        shape = (batch,) + shape
    a = _rng.standard_normal(shape).astype(np.float32)
    if transposed:
        a = np.swapaxes(a, -1, -2)
    return a[..., ::step]


def _check(a, b):
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    before = gemm.calls()
    got = gemm.matmul(a, b, out)
    assert got is out
    ref = a.astype(np.float64) @ b.astype(np.float64)
    k = a.shape[-1]
    # float32 accumulation over k terms: relative to the sum of |terms|
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1e-30
    assert (np.abs(out - ref) / scale).max() <= 4e-7 * max(k, 1) ** 0.5 + 1e-6
    return gemm.calls() - before


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 90), k=st.integers(1, 300), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([0, 1, 3]), step=st.sampled_from([1, 2]))
def test_products_match_float64(m, n, k, ta, tb, batch, step):
    """Edges of the 12 x 32 tile, K across packed slices (256), transposed and strided operands."""
    with _patched(gemm_min_macs=0):
        used = _check(_operand(batch, m, k, ta, step), _operand(batch, k, n, tb, 1))
    assert used == 1


@pytest.mark.parametrize("m,n,k", [(1024, 256, 1024), (300, 1100, 520), (32, 1024, 256), (2100, 40, 64)])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False)])
def test_large_products_match_float64(m, n, k, ta, tb):
    """Several NC/MC blocks and both ways of splitting a product over threads."""
    assert _check(_operand(0, m, k, ta, 1), _operand(0, k, n, tb, 1)) == 1


def test_batched_product_over_threads():
    a, b = _operand(64, 128, 64, False, 1), _operand(64, 64, 128, True, 1)
    assert _check(a, b) == 1


def test_zero_depth_writes_zeros():
    a, b = np.empty((5, 0), np.float32), np.empty((0, 7), np.float32)
    out = np.full((5, 7), np.nan, np.float32)
    with _patched(gemm_min_macs=0):
        gemm.matmul(a, b, out)
    assert (out == 0).all()


def test_fallbacks_to_numpy():
    """float64, a strided output, mismatched batches, tiny products and ``config.gemm = "blas"``
    go to numpy's matmul (bit for bit numpy's answer)."""
    a32, b32 = _operand(0, 40, 50, False, 1), _operand(0, 50, 60, False, 1)
    cases = [(a32.astype(np.float64), b32.astype(np.float64), np.empty((40, 60))),
             (a32, b32, np.empty((60, 40), np.float32).T),
             (_operand(3, 40, 50, False, 1), _operand(1, 50, 60, False, 1), np.empty((3, 40, 60), np.float32)),
             (a32[:2, :3], b32[:3, :4], np.empty((2, 4), np.float32))]
    for a, b, out in cases:
        before = gemm.calls()
        gemm.matmul(a, b, out)
        assert gemm.calls() == before
        want = np.empty(out.T.shape, out.dtype).T if not out.flags.c_contiguous else np.empty_like(out)
        np.testing.assert_array_equal(out, np.matmul(a, b, want))   # numpy, into the same layout
    with _patched(gemm="blas"):
        out = np.empty((40, 60), np.float32)
        before = gemm.calls()
        gemm.matmul(a32, b32, out)
        assert gemm.calls() == before
        np.testing.assert_array_equal(out, a32 @ b32)


def test_unbuilt_library_falls_back(monkeypatch):
    """Where the library did not build (no compiler, no AVX-512) every product is numpy's."""
    for entry in ("fn", "np", "np_packed"):       # none of its entries is bound then
        monkeypatch.setitem(gemm._state, entry, None)
    a, b = _operand(0, 64, 64, False, 1), _operand(0, 64, 64, False, 1)
    out = np.empty((64, 64), np.float32)
    before = gemm.calls()
    gemm.matmul(a, b, out)
    assert gemm.calls() == before
    np.testing.assert_array_equal(out, a @ b)


def test_compiled_linear_and_bmm_use_it():
    """A compiled Linear (weight transposed) and attention-style batched products run on ember's
    GEMM and match eager, forward and backward."""
    lin = ember.nn.Linear(300, 200)
    x = ember.randn(96, 300, requires_grad=True)
    q, kk = ember.randn(4, 64, 32, requires_grad=True), ember.randn(4, 32, 64, requires_grad=True)

    def f(x, q, kk):
        return ember.nn.functional.gelu(lin(x)).sum() + (q @ kk).softmax(-1).pow(2).sum()

    before = gemm.calls()
    out = ember.compile(f)(x, q, kk)
    out.backward()
    assert gemm.calls() - before >= 5       # forward: 2; backward: grad x, grad W, 2 for bmm
    grads = [t.grad.numpy().copy() for t in (x, q, kk, lin.weight)]
    for t in (x, q, kk, lin.weight):
        t.grad = None
    ref = f(x, q, kk)
    ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=2e-5)
    for g, t in zip(grads, (x, q, kk, lin.weight)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=2e-4, atol=2e-5)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 90), k=st.integers(1, 600), ta=st.booleans(), tb=st.booleans(),
       step=st.sampled_from([1, 2]))
def test_packed_right_operand_matches_per_product_packing(m, n, k, ta, tb, step):
    """``pack_b`` once + ``matmul_packed`` computes what ``matmul`` does, bit for bit (the same
    micro-kernel over the same packed layout; K across several 256-deep slices)."""
    a, b = _operand(0, m, k, ta, step), _operand(0, k, n, tb, step)
    with _patched(gemm_min_macs=0):
        pb = gemm.pack_b(b)
        assert pb.packed is not None
        got, want = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
        for i in range(2):                  # the packed copy is reusable
            if i:
                a = _operand(0, m, k, ta, step)
            before = gemm.calls()
            assert gemm.matmul_packed(a, pb, got) is got
            assert gemm.calls() - before == 1
            gemm.matmul(a, b, want)
            np.testing.assert_array_equal(got, want)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1e-30
    assert (np.abs(got - ref) / scale).max() <= 4e-7 * k ** 0.5 + 1e-6


@pytest.mark.parametrize("m,n,k,tb", [(64, 1024, 1024, True), (64, 1024, 1024, False), (120, 1100, 520, True),
                                       (121, 70, 300, False), (250, 1000, 300, True)])
def test_short_blocks_match_the_blocked_path(m, n, k, tb):
    """A thread's block of at most 120 rows packs B strip by strip (``gemm_part_short``); the
    pre-packed operand always takes the blocked path, which packs a whole slice first. Same
    tiles, same order of sums: the same bits, on shapes with ragged strips, several K slices and
    both layouts of B (m = 250: both sides blocked, columns split over the threads)."""
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((n, k), dtype=np.float32).T if tb else rng.standard_normal((k, n), dtype=np.float32)
    got, want = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
    gemm.matmul(a, b, got)
    gemm.matmul_packed(a, gemm.pack_b(b), want)
    np.testing.assert_array_equal(got, want)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert (np.abs(got - ref) / scale).max() <= 4e-7 * k ** 0.5


def test_packed_right_operand_fallbacks():
    """No packed copy for float64 or under ``config.gemm = "blas"``; a float64 left operand or a
    strided output with a packed float32 B: numpy's matmul of the original operand."""
    b64 = _operand(0, 50, 60, False, 1).astype(np.float64)
    pb = gemm.pack_b(b64)
    assert pb.packed is None
    a64 = _operand(0, 40, 50, False, 1).astype(np.float64)
    out = np.empty((40, 60))
    gemm.matmul_packed(a64, pb, out)
    np.testing.assert_array_equal(out, a64 @ b64)
    with _patched(gemm="blas"):
        assert gemm.pack_b(b64.astype(np.float32)).packed is None
    b32 = _operand(0, 50, 60, True, 1)
    pb = gemm.pack_b(b32)
    a32 = _operand(0, 40, 50, False, 1)
    out = np.empty((60, 40), np.float32).T
    before = gemm.calls()
    gemm.matmul_packed(a32, pb, out)
    assert gemm.calls() == before
    np.testing.assert_array_equal(out, np.matmul(a32, b32, np.empty((60, 40), np.float32).T))


def test_compiled_rnn_packs_its_recurrent_weight_once():
    """An RNN unrolled over steps multiplies by the same weight at every step: the compiled
    graph packs it once (forward: ``w.T``; backward: ``w``) and matches eager, gradients too."""
    # scaled so the recurrence contracts: float32 rounding differences do not grow step by step
    w = (ember.randn(96, 96) * 0.1).requires_grad_()
    u = (ember.randn(96, 40) * 0.1).requires_grad_()
    xs = ember.randn(6, 24, 40)

    def f(xs):
        h = ember.zeros(24, 96)
        for t in range(xs.shape[0]):
            h = (h @ w.T + xs[t] @ u.T).tanh()
        return h.pow(2).sum()

    import importlib
    compile_fx = importlib.import_module("ember.inductor.compile_fx")
    sources = []
    orig = compile_fx.CompiledGraph.__init__

    def spy(self, graph, source, wrapper_src, *a, **kw):
        sources.append(wrapper_src)
        orig(self, graph, source, wrapper_src, *a, **kw)

    compile_fx.CompiledGraph.__init__ = spy
    try:
        with _patched(gemm_min_macs=0):
            out = ember.compile(f)(xs)
            out.backward()
    finally:
        compile_fx.CompiledGraph.__init__ = orig
    packs = [ln for s in sources for ln in s.splitlines() if "_gemm_pack_b(" in ln]
    assert len(packs) >= 2, sources                          # the forward's and the backward's
    assert all(ln.count("_gemm_pack_b(") == 1 for ln in packs)
    got = [out.item(), w.grad.numpy().copy(), u.grad.numpy().copy()]
    w.grad = u.grad = None
    ref = f(xs)
    ref.backward()
    np.testing.assert_allclose(got[0], ref.item(), rtol=1e-5)
    np.testing.assert_allclose(got[1], w.grad.numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(got[2], u.grad.numpy(), rtol=2e-4, atol=2e-4)


def test_background_build_is_waited_for_not_bypassed(monkeypatch):
    """``build_in_background`` (called when a float32 product is lowered) builds on a thread;
    a product computed while it runs waits for it and runs on ember's GEMM -- never numpy's
    for some calls and ember's for later ones, which would change bits by timing."""
    import threading
    import time
    import types
    real = gemm._build
    started = threading.Event()

    def slow_build():
        started.set()
        time.sleep(0.4)
        return real()

    def no_numpy_matmul(*a, **k):
        raise AssertionError("the product took numpy's path while the GEMM was building")
    # numpy as gemm.py sees it, but its matmul refuses
    fake_np = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    fake_np.matmul = no_numpy_matmul
    monkeypatch.setattr(gemm, "_state", {"tried": False, "fn": None, "why": None})
    monkeypatch.setattr(gemm, "_build", slow_build)
    gemm.build_in_background()
    assert started.wait(5)
    monkeypatch.setattr(gemm, "np", fake_np)
    a, b = _rng.standard_normal((200, 300), np.float32), _rng.standard_normal((300, 250), np.float32)
    out = np.empty((200, 250), np.float32)
    gemm.matmul(a, b, out)
    assert gemm._state["tried"] and gemm._state["fn"] is not None
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    gemm.build_in_background()       # already built: nothing starts
    assert not gemm._state.get("building") or gemm._state["tried"]


def test_fork_during_a_background_build_does_not_hang_the_child(monkeypatch):
    """A process forked while the build thread holds the GEMM's lock (a DataLoader worker
    started right after ``ember.compile``): the child's first product must not wait forever."""
    import multiprocessing as mp
    import os
    import threading
    import time
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    real = gemm._build
    started, release = threading.Event(), threading.Event()

    def slow_build():
        started.set()
        release.wait(10)
        return real()
    monkeypatch.setattr(gemm, "_state", {"tried": False, "fn": None, "why": None})
    monkeypatch.setattr(gemm, "_build", slow_build)
    gemm.build_in_background()
    assert started.wait(5)
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        a = np.ones((300, 300), np.float32)
        out = np.empty((300, 300), np.float32)
        gemm.matmul(a, a, out)
        q.put(float(out[0, 0]))
    p = ctx.Process(target=child)
    p.start()
    time.sleep(0.2)
    release.set()                        # (the parent's build may finish; the child's lock is its own)
    p.join(60)
    alive = p.is_alive()
    if alive:
        p.kill()
    assert not alive, "the forked child hung on the GEMM lock"
    assert q.get(timeout=5) == 300.0


def _pointer_path_only(*_a, **_k):
    raise AssertionError("the product took the pointer path")


def test_numpy_array_layout_is_the_checked_one():
    """The entries that read arrays in C are bound here (numpy's ``PyArrayObject_fields``)."""
    assert gemm._numpy_layout() is not None
    assert gemm._state["np"] is not None and gemm._state["np_packed"] is not None


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 90), k=st.integers(1, 300), ta=st.booleans(), tb=st.booleans(),
       batch=st.sampled_from([0, 1, 3]), step=st.sampled_from([1, 2]), flip=st.booleans())
def test_array_entry_matches_the_pointer_path(m, n, k, ta, tb, batch, step, flip):
    """``ember_sgemm_np`` (the arrays read in C) against the pointer-passing call: the same
    kernel, so the same bits, for transposed, strided and reversed operands; the pointer path
    is not taken (it would raise)."""
    a, b = _operand(batch, m, k, ta, step), _operand(batch, k, n, tb, 1)
    if flip:
        a = a[..., ::-1, :]                          # negative row strides
    out = np.empty(a.shape[:-1] + (n,), np.float32)
    want = np.empty_like(out)
    with _patched(gemm_min_macs=0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(gemm._state, "np", None)
            gemm.matmul(a, b, want)
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(gemm._state, "fn", _pointer_path_only)
            before = gemm.calls()
            assert gemm.matmul(a, b, out) is out
            assert gemm.calls() == before + 1
    np.testing.assert_array_equal(out, want)


def test_array_entry_declines_what_it_does_not_take(monkeypatch):
    """A strided output, mismatched batches, a size below ``gemm_min_macs``, rank 4, float64:
    the entry writes nothing and the general path decides (numpy's matmul, bit for bit)."""
    calls = []
    real = gemm._state["np"]
    monkeypatch.setitem(gemm._state, "np", lambda *a: calls.append(real(*a)) or calls[-1])
    a32, b32 = _operand(0, 40, 50, False, 1), _operand(0, 50, 60, False, 1)
    cases = [(a32, b32, np.empty((60, 40), np.float32).T),
             (_operand(3, 40, 50, False, 1), _operand(1, 50, 60, False, 1), np.empty((3, 40, 60), np.float32)),
             (a32[:2, :3], b32[:3, :4], np.empty((2, 4), np.float32)),
             (a32.reshape(2, 2, 10, 50), np.broadcast_to(b32, (2, 2, 50, 60)), np.empty((2, 2, 10, 60), np.float32)),
             (a32.astype(np.float64), b32.astype(np.float64), np.empty((40, 60)))]
    for a, b, out in cases:
        before = gemm.calls()
        gemm.matmul(a, b, out)
        assert gemm.calls() == before
        want = np.empty(out.T.shape, out.dtype).T if not out.flags.c_contiguous else np.empty_like(out)
        np.testing.assert_array_equal(out, np.matmul(a, b, want))
    assert calls == [1, 1, 1, 1]                     # asked and declined; float64 never asked


@pytest.mark.parametrize("m,n,k,tb", [(32, 1024, 256, True), (7, 40, 300, False), (130, 33, 17, True)])
def test_packed_array_entry_matches_the_pointer_path(monkeypatch, m, n, k, tb):
    b = _operand(0, k, n, tb, 1)
    pb = gemm.pack_b(b)
    a = _operand(0, m, k, False, 2)
    out, want = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
    with _patched(gemm_min_macs=0):
        with monkeypatch.context() as mp:
            mp.setitem(gemm._state, "np_packed", None)
            gemm.matmul_packed(a, pb, want)
        with monkeypatch.context() as mp:
            mp.setitem(gemm._state, "fn", _pointer_path_only)
            mp.setattr(gemm._state["lib"], "ember_sgemm_packed", _pointer_path_only)
            gemm.matmul_packed(a, pb, out)
    np.testing.assert_array_equal(out, want)
