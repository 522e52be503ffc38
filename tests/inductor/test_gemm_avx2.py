"""ember's GEMM at the edges of its micro-tile (AVX2: 6 x 16, AVX-512: 12 x 32, read from the
library): every clipped tile height and width, K across and inside packed slices, odd, negative
and zero strides, transposed views, batches, the pre-packed right operand, one and two threads;
all against a float64 product."""

import numpy as np
import pytest

from ember.inductor import gemm

from ._helpers import patched_config as _patched

if not gemm.available():
    pytest.skip(f"ember's GEMM is not built here: {gemm.unavailable_reason()}", allow_module_level=True)

_rng = np.random.default_rng()


@pytest.fixture(autouse=True)
def _every_product_on_ember(monkeypatch):
    """The edges of the kernel, whatever the AVX2 build's routing would pick (tested below)."""
    monkeypatch.setattr(gemm, "route_to_numpy", False)
_INFO = gemm.kernel_info()
MR, NR, KC = _INFO["mr"], _INFO["nr"], _INFO["kc"]


def _close(got, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1e-30
    k = a.shape[-1]
    err = (np.abs(got - ref) / scale).max() if got.size else 0.0
    assert err <= 4e-7 * max(k, 1) ** 0.5 + 1e-6, err


def _run(a, b):
    out = np.full(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.nan, np.float32)
    before = gemm.calls()
    with _patched(gemm_min_macs=0):
        assert gemm.matmul(a, b, out) is out
    assert gemm.calls() - before == 1, "the product went to numpy"
    _close(out, a, b)
    return out


def _mat(rows, cols, transposed=False):
    if transposed:
        return _rng.standard_normal((cols, rows), dtype=np.float32).T
    return _rng.standard_normal((rows, cols), dtype=np.float32)


def test_kernel_shape_matches_the_cpu():
    """The micro-tile the library reports is the one of the instruction set it was built for,
    and ``pack_b`` pads to that width."""
    assert (_INFO["isa"], MR, NR) in ((512, 12, 32), (256, 6, 16))
    b = _mat(7, NR + 1)
    with _patched(gemm_min_macs=0):
        pb = gemm.pack_b(b)
    assert pb.packed.size == 7 * 2 * NR


@pytest.mark.parametrize("threads", [1, 2])
def test_every_clipped_tile(threads):
    """A full tile row and column, then a clipped one of every height 1..MR and width 1..NR; K
    one past a packed slice, so the second slice accumulates into clipped tiles too."""
    k = KC + 1
    b_full = _mat(k, 2 * NR)
    a_full = _mat(2 * MR, k)
    with _patched(threads=threads):
        for mr in range(1, MR + 1):
            a = a_full[:MR + mr]
            for nr in range(1, NR + 1):
                _run(a, b_full[:, :NR + nr])


@pytest.mark.parametrize("k", [1, 7, KC - 1, KC, KC + 1, 2 * KC + 5])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_depths_and_transposed_views(k, ta, tb):
    """K inside, at and across packed slices, with A and B as transposed views (each packing path:
    row-major, column-major; the 8 x 8 register transposes' ragged K tails)."""
    m, n = 2 * MR + 5, 3 * NR - 3
    _run(_mat(m, k, ta), _mat(k, n, tb))


def test_odd_and_negative_strides():
    """Every other / every third element, and flipped (negative-stride) views: the general
    packing paths."""
    m, k, n = 3 * MR + 1, KC + 37, 2 * NR + 5
    a = _rng.standard_normal((2 * m, 3 * k), dtype=np.float32)[::2, ::3]
    b = _rng.standard_normal((3 * k, 2 * n), dtype=np.float32)[::3, ::2]
    _run(a, b)
    _run(a[::-1], b[:, ::-1])
    _run(a[:, ::-1], b[::-1])
    _run(np.swapaxes(_rng.standard_normal((3 * k, m), dtype=np.float32), 0, 1)[:, ::3], b)


@pytest.mark.parametrize("threads", [1, 2])
def test_batched(threads):
    """Batches fewer and more than the threads, a strided batch dimension, and a right operand
    broadcast over the batch (batch stride 0)."""
    with _patched(threads=threads):
        for batch in (1, 3):
            a = _rng.standard_normal((batch, MR + 3, 70), dtype=np.float32)
            b = _rng.standard_normal((batch, NR + 9, 70), dtype=np.float32).transpose(0, 2, 1)
            _run(a, b)
        a = _rng.standard_normal((10, 2 * MR - 1, 40), dtype=np.float32)[::2]
        b = np.broadcast_to(_mat(40, NR + 3), (5, 40, NR + 3))
        _run(a, b)


def test_zero_depth_batched_writes_zeros():
    a, b = np.empty((3, MR + 1, 0), np.float32), np.empty((3, 0, NR + 1), np.float32)
    out = np.full((3, MR + 1, NR + 1), np.nan, np.float32)
    with _patched(gemm_min_macs=0):
        gemm.matmul(a, b, out)
    assert (out == 0).all()


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_b_edges(threads):
    """The pre-packed right operand at every clipped width, K across slices, both layouts of B;
    bit for bit the per-product packing, and close to float64."""
    k = KC + 3
    with _patched(threads=threads, gemm_min_macs=0):
        for tb in (False, True):
            b_full = _mat(k, 2 * NR, tb)
            a = _mat(2 * MR + 1, k)
            for nr in range(1, NR + 1):
                b = b_full[:, :NR + nr]
                pb = gemm.pack_b(b)
                assert pb.packed is not None
                got, want = np.empty((a.shape[0], b.shape[1]), np.float32), np.empty((a.shape[0], b.shape[1]), np.float32)
                gemm.matmul_packed(a, pb, got)
                gemm.matmul(a, b, want)
                np.testing.assert_array_equal(got, want)
                _close(got, a, b)


@pytest.mark.parametrize("m,n,k,ta,tb", [(64, 1024, 1024, False, True), (1024, 256, 64, True, False),
                                          (300, 200, 520, False, False), (32, 1024, 256, False, True)])
def test_model_shapes_two_threads(m, n, k, ta, tb):
    """Shapes of the benchmark models (an MLP's forward and weight gradient, an LSTM step) split
    over two threads: rows, else columns."""
    with _patched(threads=2):
        _run(_mat(m, k, ta), _mat(k, n, tb))


@pytest.mark.parametrize("threads", [1, 2])
def test_measured_routing(monkeypatch, threads):
    """The AVX2 build sends the products numpy's OpenBLAS ran faster on the 2-core AVX2 box to
    numpy (bit for bit numpy's answer), the others to ember; the AVX-512 build keeps all."""
    monkeypatch.setattr(gemm, "route_to_numpy", True)
    avx2 = _INFO["isa"] == 256
    cases = [  # (batch, m, k, n, goes to numpy on AVX2 with 1 thread, with 2)
        (0, 128, 64, 128, True, True),         # small: the call's fixed cost
        (4, 128, 64, 128, False, False),       # batched: ember
        (0, 64, 1024, 1024, True, False),      # short, one thread: OpenBLAS
        (0, 1024, 256, 256, False, False),     # tall: ember
    ]
    with _patched(threads=threads):
        for batch, m, k, n, np1, np2 in cases:
            a = _rng.standard_normal(((batch,) if batch else ()) + (m, k), dtype=np.float32)
            b = _rng.standard_normal(((batch,) if batch else ()) + (k, n), dtype=np.float32)
            out = np.empty(a.shape[:-1] + (n,), np.float32)
            before = gemm.calls()
            gemm.matmul(a, b, out)
            to_numpy = avx2 and (np1 if threads == 1 else np2)
            assert gemm.calls() - before == (0 if to_numpy else 1), (batch, m, k, n, threads)
            if to_numpy:
                np.testing.assert_array_equal(out, np.matmul(a, b))
            else:
                _close(out, a, b)


def test_refuses_without_avx2_or_avx512(monkeypatch, tmp_path):
    """Built where the CPU has neither (an older x86-64, ARM: the macros undefined here), the
    source stops at its #error, the reason names it, and products are numpy's."""
    with open(gemm._SOURCE_PATH) as f:
        source = f.read()
    src = tmp_path / "gemm_native.cpp"
    src.write_text("#undef __AVX512F__\n#undef __AVX2__\n#undef __FMA__\n" + source)
    monkeypatch.setattr(gemm, "_SOURCE_PATH", str(src))
    monkeypatch.setattr(gemm, "_state", {"tried": False, "fn": None, "why": None})
    assert not gemm.available()
    assert "neither AVX-512F nor AVX2 with FMA" in gemm.unavailable_reason()
    assert gemm.kernel_info() is None
    a, b = _mat(MR + 1, 300), _mat(300, NR + 1)
    out = np.empty((MR + 1, NR + 1), np.float32)
    gemm.matmul(a, b, out)
    np.testing.assert_array_equal(out, np.matmul(a, b))
