"""Short products with B = W^T (a Linear's weight), which ember's GEMM computes as C^T = W @ A^T
(``gemm_part_wt`` in ``gemm_native.cpp``): W's rows read in place (copied first where their
stride is a multiple of 2 KB), A^T packed, C^T's tiles transposed into C after the last K slice.
Both instruction sets: the AVX-512 build where the CPU has it and the AVX2 variant (the source
built with ``__AVX512F__`` undefined). Each product is compared bit for bit with the pre-packed
path (``matmul_packed``, which never takes this one: same sums, same order) and with float64."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ember.inductor import gemm

from ._helpers import patched_config as _patched

if not gemm.available():
    pytest.skip(f"ember's GEMM is not built here: {gemm.unavailable_reason()}", allow_module_level=True)

_NATIVE_ISA = gemm.kernel_info()["isa"]


@pytest.fixture(scope="module", params=["native", "avx2"])
def kernel(request, tmp_path_factory):
    """The GEMM library under test, loaded in place of the native one for the module."""
    mp = pytest.MonkeyPatch()
    mp.setattr(gemm, "route_to_numpy", False)
    if request.param == "avx2":
        if _NATIVE_ISA == 256:
            mp.undo()
            pytest.skip("the native build is the AVX2 variant")
        with open(gemm._SOURCE_PATH) as f:
            source = f.read()
        src = tmp_path_factory.mktemp("avx2") / "gemm_native.cpp"
        src.write_text("#undef __AVX512F__\n" + source)
        mp.setattr(gemm, "_SOURCE_PATH", str(src))
        mp.setattr(gemm, "_state", {"tried": False, "fn": None, "why": None})
        assert gemm.available(), gemm.unavailable_reason()
    info = gemm.kernel_info()
    assert info["isa"] == (256 if request.param == "avx2" else _NATIVE_ISA)
    yield info
    mp.undo()


def _half_strip(info):
    return info["nr"] // 2


def _weight(rng, n, k, row_stride):
    """W [n, k] with rows ``row_stride`` floats apart (the rest of each row poisoned with NaN)."""
    store = np.full((n, row_stride), np.nan, np.float32)
    store[:, :k] = rng.standard_normal((n, k), dtype=np.float32)
    return store[:, :k]


def _whole_rows_per_thread(info, m, n, threads):
    """Whether each thread's part keeps all m rows: one thread, or the columns split (a wide
    product, at least two strips of columns); a row split hands the threads whole micro-tiles
    of rows (12 or 6), rarely whole halves of strips. (A product too small to be split runs on
    one thread either way.)"""
    return threads == 1 or (m < n and n >= 2 * info["nr"])


def _product(a, w, threads):
    """(C through matmul, C through the pre-packed path, weight-rows parts taken)."""
    got, want = np.full((a.shape[0], w.shape[0]), np.nan, np.float32), np.empty((a.shape[0], w.shape[0]), np.float32)
    with _patched(gemm_min_macs=0, threads=threads):
        before = gemm.weight_rows_parts()
        assert gemm.matmul(a, w.T, got) is got
        taken = gemm.weight_rows_parts() - before
        gemm.matmul_packed(a, gemm.pack_b(w.T), want)
    return got, want, taken


def _close(got, a, w):
    ref = a.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(w.T).astype(np.float64) + 1e-30
    assert (np.abs(got - ref) / scale).max() <= 4e-7 * max(a.shape[1], 1) ** 0.5 + 1e-6


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("halves", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("n,k,row_stride", [(1024, 1024, 1024), (2100, 40, 40), (37, 300, 300), (13, 257, 300), (5, 7, 7),
                                            (100, 600, 1024), (12, 256, 512), (2, 1, 1)])
def test_same_bits_as_the_packed_path(kernel, threads, halves, n, k, row_stride):
    """Rows in whole halves of a strip (one vector or two per micro-tile row), W's tile heights
    (n below, at and across the micro-tile's MR; 1024 and 2100 rows: W in several chunks of
    tiles), K inside, at and across 256-deep slices, row strides that are read in place and ones
    (512, 1024 floats) that are copied first."""
    rng = np.random.default_rng(halves * 1000 + n + k)
    m = halves * _half_strip(kernel)
    assert m <= 96                  # (6 halves of a 32-wide strip at most)
    a, w = rng.standard_normal((m, k), dtype=np.float32), _weight(rng, n, k, row_stride)
    got, want, taken = _product(a, w, threads)
    if _whole_rows_per_thread(kernel, m, n, threads):
        assert taken >= 1, "the product did not take the weight-rows path"
    np.testing.assert_array_equal(got, want)
    _close(got, a, w)


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_left_operand_views(kernel, layout):
    """A^T is packed from any strides: a transposed A (a weight gradient's X^T) and every other
    column of a wider array."""
    rng = np.random.default_rng(7)
    m, k, n = 2 * _half_strip(kernel), 520, 70
    if layout == "transposed":
        a = rng.standard_normal((k, m), dtype=np.float32).T
    else:
        a = rng.standard_normal((m, 2 * k), dtype=np.float32)[:, ::2]
    w = _weight(rng, n, k, k)
    got, want, taken = _product(a, w, 2)
    assert taken >= 1
    np.testing.assert_array_equal(got, want)
    _close(got, a, w)


def test_nan_and_inf_propagate_as_in_the_packed_path(kernel):
    rng = np.random.default_rng(3)
    m, k, n = 2 * _half_strip(kernel), 300, 40
    a, w = rng.standard_normal((m, k), dtype=np.float32), _weight(rng, n, k, 512)
    w[3, 17], w[30, 299], a[5, 0] = np.nan, np.inf, -np.inf
    got, want, taken = _product(a, w, 1)
    assert taken >= 1
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[:, 3]).all() and np.isnan(got[5]).any()


def test_the_thread_split_does_not_change_the_bits(kernel):
    """The MLP's 64 x 1024 x 1024: columns split over two threads, each part on this path, the
    same bits as one thread."""
    rng = np.random.default_rng(11)
    a, w = rng.standard_normal((64, 1024), dtype=np.float32), _weight(rng, 1024, 1024, 1024)
    one, _, t1 = _product(a, w, 1)
    two, _, t2 = _product(a, w, 2)
    assert t1 == 1 and t2 == 2
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("m", [1, 7, 100, 121])
def test_other_row_counts_keep_the_packed_strips(kernel, m):
    """A padded strip (rows not a whole number of halves) or more than 96 rows: the products
    pack W^T's strips as before, and are still right."""
    rng = np.random.default_rng(m)
    assert m % _half_strip(kernel) != 0 or m > 96     # (the rows chosen for both builds)
    a, w = rng.standard_normal((m, 300), dtype=np.float32), _weight(rng, 50, 300, 300)
    got, want, taken = _product(a, w, 1)
    assert taken == 0
    np.testing.assert_array_equal(got, want)
    _close(got, a, w)


def test_contiguous_b_keeps_the_packed_strips(kernel):
    """B row-major ([K, N], N contiguous) is not W^T: no swap."""
    rng = np.random.default_rng(5)
    m = 2 * _half_strip(kernel)
    a, b = rng.standard_normal((m, 256), dtype=np.float32), rng.standard_normal((256, 64), dtype=np.float32)
    out = np.empty((m, 64), np.float32)
    with _patched(gemm_min_macs=0):
        before = gemm.weight_rows_parts()
        gemm.matmul(a, b, out)
        assert gemm.weight_rows_parts() == before
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(halves=st.integers(1, 6), n=st.integers(1, 90), k=st.integers(1, 700), pad=st.sampled_from([0, 3, 16]),
       threads=st.sampled_from([1, 2]))
def test_drawn_shapes(kernel, halves, n, k, pad, threads):
    """Drawn shapes on each build: bit for bit with the packed path, close to float64."""
    m = halves * _half_strip(kernel)
    rng = np.random.default_rng()
    a, w = rng.standard_normal((m, k), dtype=np.float32), _weight(rng, n, k, k + pad)
    got, want, taken = _product(a, w, threads)
    if _whole_rows_per_thread(kernel, m, n, threads):
        assert taken >= 1
    np.testing.assert_array_equal(got, want)
    _close(got, a, w)


@pytest.mark.parametrize("threads", [1, 2])
def test_batched_products(kernel, threads):
    """A batch of products with B[b] = W[b]^T (attention's ``q @ k.transpose(-2, -1)`` over a
    transposed view): each matrix on this path, bit for bit with its own pre-packed product."""
    rng = np.random.default_rng(13)
    m, k, n, batch = 2 * _half_strip(kernel), 64, 128, 6
    a = rng.standard_normal((batch, m, k), dtype=np.float32)
    w = rng.standard_normal((batch, n, k), dtype=np.float32)
    got = np.full((batch, m, n), np.nan, np.float32)
    with _patched(gemm_min_macs=0, threads=threads):
        before = gemm.weight_rows_parts()
        assert gemm.matmul(a, np.swapaxes(w, 1, 2), got) is got
        assert gemm.weight_rows_parts() - before >= batch
        for q in range(batch):
            want = np.empty((m, n), np.float32)
            gemm.matmul_packed(a[q], gemm.pack_b(w[q].T), want)
            np.testing.assert_array_equal(got[q], want)
    _close(got.reshape(-1, n)[:m], a[0], w[0])
