"""BSR / BSC tensors against torch 2.13: factories (and their shape / invariant errors),
conversions among COO/CSR/CSC/BSR/BSC, accessors, repr, products with dense, autograd."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

from ._sparse_helpers import dense_np, np_of
from ._sparse_helpers import same_error as _err, same_as_torch as _same, torch_pair as _pair

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
warnings.filterwarnings("ignore", message=".*Sparse BSR|.*Sparse BSC|.*Sparse CSR|.*invariant checks")


def _blocky(seed, shape=(6, 6), block=(2, 3), density=0.5, dt=np.float64, zero_inside=0.3):
    """A random matrix whose nonzeros sit in random blocks (with zeros inside some blocks)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dt)
    nr, nc = shape[-2] // block[0], shape[-1] // block[1]
    keep = rng.random(shape[:-2] + (nr, nc)) < density
    mask = np.repeat(np.repeat(keep, block[0], axis=-2), block[1], axis=-1)
    x[~mask] = 0
    x[rng.random(shape) < zero_inside] = 0
    return x





@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [(2, 3), (3, 3), (1, 2), (6, 1)])
@pytest.mark.parametrize("layout", ["bsr", "bsc"])
def test_dense_to_blocked_matches_torch(seed, block, layout):
    x = _blocky(seed, (6, 6), block, dt=np.float32 if seed % 2 else np.float64)
    e, t = _pair(x)
    eb, tb = getattr(e, f"to_sparse_{layout}")(block), getattr(t, f"to_sparse_{layout}")(block)
    _same(eb, tb)
    comp, plain = ("crow_indices", "col_indices") if layout == "bsr" else ("ccol_indices", "row_indices")
    np.testing.assert_array_equal(np_of(getattr(eb, comp)()), getattr(tb, comp)().numpy())
    np.testing.assert_array_equal(np_of(getattr(eb, plain)()), getattr(tb, plain)().numpy())
    # to_sparse(layout=, blocksize=) is the same conversion
    lay = getattr(ember, f"sparse_{layout}")
    _same(e.to_sparse(layout=lay, blocksize=block), tb)


@pytest.mark.parametrize("seed", range(3))
def test_conversions_among_layouts(seed):
    x = _blocky(seed, (4, 6), (2, 3))
    e, t = _pair(x)
    sources = {"coo": (e.to_sparse(), t.to_sparse()), "csr": (e.to_sparse_csr(), t.to_sparse_csr()),
               "csc": (e.to_sparse_csc(), t.to_sparse_csc()),
               "bsr": (e.to_sparse_bsr((2, 3)), t.to_sparse_bsr((2, 3))),
               "bsc": (e.to_sparse_bsc((2, 3)), t.to_sparse_bsc((2, 3)))}
    for name, (es, ts) in sources.items():
        for target in ("bsr", "bsc"):
            _same(getattr(es, f"to_sparse_{target}")((2, 3)), getattr(ts, f"to_sparse_{target}")((2, 3)))
        ec, tc = es.to_sparse_coo(), ts.to_sparse_coo()
        assert repr(ec) == repr(tc).replace("torch.", "ember."), name
        for target in ("csr", "csc"):
            if name in ("bsr", "bsc"):
                _err(lambda: getattr(es, f"to_sparse_{target}")(), lambda: getattr(ts, f"to_sparse_{target}")())
            else:
                _same(getattr(es, f"to_sparse_{target}")(), getattr(ts, f"to_sparse_{target}")())


def test_explicit_zeros_keep_their_blocks():
    # a specified zero (or duplicates summing to zero) makes its block specified, as in torch
    ec = ember.sparse_coo_tensor(ember.tensor([[0, 0], [4, 4]]), ember.tensor([1., -1.]), (4, 6))
    tc = torch.sparse_coo_tensor(torch.tensor([[0, 0], [4, 4]]), torch.tensor([1., -1.]), (4, 6))
    _same(ec.to_sparse_bsr((2, 3)), tc.to_sparse_bsr((2, 3)))
    er = ember.sparse_csr_tensor(ember.tensor([0, 1, 1, 1, 1]), ember.tensor([4]), ember.tensor([0.]), (4, 6))
    tr = torch.sparse_csr_tensor(torch.tensor([0, 1, 1, 1, 1]), torch.tensor([4]), torch.tensor([0.]), (4, 6))
    _same(er.to_sparse_bsc((2, 3)), tr.to_sparse_bsc((2, 3)))


def test_conversion_errors_match_torch():
    x = np.random.default_rng(0).standard_normal((4, 6))
    e, t = _pair(x)
    eb, tb = e.to_sparse_bsr((2, 3)), t.to_sparse_bsr((2, 3))
    _err(lambda: e.to_sparse_bsr((3, 3)), lambda: t.to_sparse_bsr((3, 3)))
    _err(lambda: e.to_sparse_bsr((2, 3, 1)), lambda: t.to_sparse_bsr((2, 3, 1)))
    _err(lambda: e.to_sparse_bsr(None), lambda: t.to_sparse_bsr(None), TypeError)
    _err(lambda: e.to_sparse(layout=ember.sparse_bsr), lambda: t.to_sparse(layout=torch.sparse_bsr))
    _err(lambda: e.to_sparse(layout=ember.sparse_csr, blocksize=(2, 3)),
         lambda: t.to_sparse(layout=torch.sparse_csr, blocksize=(2, 3)))
    _err(lambda: e.to_sparse(blocksize=(2, 3)), lambda: t.to_sparse(blocksize=(2, 3)))
    _err(lambda: eb.to_sparse_bsr((1, 3)), lambda: tb.to_sparse_bsr((1, 3)))
    _err(lambda: eb.to_sparse_bsc((1, 3)), lambda: tb.to_sparse_bsc((1, 3)))
    _err(lambda: eb.ccol_indices(), lambda: tb.ccol_indices())
    _err(lambda: eb.row_indices(), lambda: tb.row_indices())
    _err(lambda: eb.indices(), lambda: tb.indices())
    assert eb.is_sparse is False and eb.is_sparse_csr is False
    _same(eb.to_sparse_bsr((2, 3)), tb.to_sparse_bsr((2, 3)))
    _same(e.to_sparse_bsr(2), t.to_sparse_bsr(2))


def _idx(a):
    return ember.tensor(np.asarray(a)), torch.tensor(np.asarray(a))


@pytest.mark.parametrize("fn", ["bsr", "bsc"])
def test_factory_shape_errors_match_torch(fn):
    rng = np.random.default_rng(1)

    def both(c, p, v, size, **kw):
        (ec, tc), (ep, tp) = _idx(c), _idx(p)
        ev, tv = _pair(np.asarray(v))
        ef, tf = getattr(ember, f"sparse_{fn}_tensor"), getattr(torch, f"sparse_{fn}_tensor")
        args_e = (ec, ep, ev) + ((size,) if size is not None else ())
        args_t = (tc, tp, tv) + ((size,) if size is not None else ())
        return (lambda: ef(*args_e, check_invariants=True, **kw)), (lambda: tf(*args_t, check_invariants=True, **kw))
    v = rng.standard_normal((2, 2, 3))
    e, t = both([0, 1, 2], [0, 1], v, None)
    _same(e(), t())
    e, t = both([0, 1, 2], [0, 1], v, (4, 6))
    _same(e(), t())
    bad = [([0, 1, 2], [0, 1], v, (4, 5)), ([0, 1, 2], [0, 1], v[0], (4, 6)), ([0, 1, 2], [0, 1], v[:, 0, 0], (4, 6)),
           ([0, 1, 2], [0, 1], rng.standard_normal((3, 2, 3)), (4, 6)), ([0, 1, 2, 2], [0, 1], v, (4, 6)),
           ([0, 1, 2], [0, 2], v, (4, 6)), ([1, 1, 2], [0, 1], v, (4, 6)), ([0, 1, 3], [0, 1], v, (4, 6)),
           ([0, 2, 2], [1, 0], v, (4, 6)), ([0, 2, 2], [1, 1], v, (4, 6)), ([[0, 1, 2]] * 2, [0, 1], v, (4, 6)),
           ([[0, 1, 2]] * 2, [[0, 1]] * 2, rng.standard_normal((2, 2, 2, 3)), (3, 4, 6)),
           ([0, 1, 2], [0, 1], v, (2, 4, 6))]
    for c, p, vv, size in bad:
        if fn == "bsc" and size is not None and len(size) == 2:
            size = (size[0], size[1])
        e, t = both(c, p, vv, size)
        try:
            t()
        except RuntimeError:
            _err(e, t)
        else:
            _same(e(), t())


def test_factory_dtype_and_batched_dense():
    rng = np.random.default_rng(3)
    v = rng.standard_normal((2, 2, 2, 3, 4)).astype(np.float32)
    (ec, tc), (ep, tp) = _idx([[0, 1, 2], [0, 0, 2]]), _idx([[0, 1], [0, 1]])
    ev, tv = _pair(v)
    e = ember.sparse_bsr_tensor(ec, ep, ev, (2, 4, 6, 4), dtype=ember.float64)
    t = torch.sparse_bsr_tensor(tc, tp, tv, (2, 4, 6, 4), dtype=torch.float64)
    _same(e, t)
    e = ember.sparse_compressed_tensor(ec, ep, ev, layout=ember.sparse_bsc)
    t = torch.sparse_compressed_tensor(tc, tp, tv, layout=torch.sparse_bsc)
    _same(e, t)
    _err(lambda: ember.sparse_bsr_tensor(ember.tensor([0., 1., 2.]), ep[0], ev[0], check_invariants=True),
         lambda: torch.sparse_bsr_tensor(torch.tensor([0., 1., 2.]), tp[0], tv[0], check_invariants=True))


@pytest.mark.parametrize("seed", range(3))
def test_blocked_matmul_and_addmm(seed):
    rng = np.random.default_rng(seed)
    x = _blocky(seed, (6, 4), (2, 2))
    d = rng.standard_normal((4, 5))
    e, t = _pair(x)
    ed, td = _pair(d)
    eb, tb = e.to_sparse_bsr((2, 2)), t.to_sparse_bsr((2, 2))
    np.testing.assert_allclose(np_of(eb @ ed), (tb @ td).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np_of(ember.mm(eb, ed)), torch.mm(tb, td).numpy(), rtol=1e-12, atol=1e-12)
    einp, tinp = _pair(rng.standard_normal((6, 5)))
    np.testing.assert_allclose(np_of(ember.addmm(einp, eb, ed, beta=0.5, alpha=2.0)),
                               torch.addmm(tinp, tb, td, beta=0.5, alpha=2.0).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np_of(eb @ ed[:, 0]), (tb @ td[:, 0]).numpy(), rtol=1e-12, atol=1e-12)
    # non-square blocks and BSC: torch's CPU kernels refuse (MKL); ember computes them (checked densely)
    eb2 = e.to_sparse_bsr((3, 2))
    ec2 = e.to_sparse_bsc((2, 4))
    for s in (eb2, ec2):
        np.testing.assert_allclose(np_of(s @ ed), x @ d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np_of(ember.tensor(d.T) @ s.t()), d.T @ x.T, rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="cannot be multiplied|Expected dim"):
        eb @ ember.ones(5, 2, dtype=ember.float64)


@pytest.mark.parametrize("layout", ["bsr", "bsc"])
def test_blocked_values_ops(layout):
    x = _blocky(5, (4, 6), (2, 3))
    e, t = _pair(x)
    eb, tb = getattr(e, f"to_sparse_{layout}")((2, 3)), getattr(t, f"to_sparse_{layout}")((2, 3))
    _same(eb * 2, tb * 2)
    _same(eb + eb, tb + tb)
    _same(eb.t(), tb.t())
    _same(eb.transpose(0, 1), tb.transpose(0, 1))
    _same(eb.clone(), tb.clone())
    _same(eb.to(ember.float32), tb.to(torch.float32))
    _same(eb.detach(), tb.detach())
    np.testing.assert_allclose(np_of(eb.sum()), tb.sum().numpy())


def test_blocked_autograd():
    rng = np.random.default_rng(7)
    v = rng.standard_normal((2, 2, 2))
    x = rng.standard_normal((4, 3))
    ev = ember.tensor(v, requires_grad=True)
    tv = torch.tensor(v, requires_grad=True)
    eb = ember.sparse_bsr_tensor(ember.tensor([0, 1, 2]), ember.tensor([0, 1]), ev, (4, 4))
    tb = torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), tv, (4, 4))
    w = rng.standard_normal((4, 4))
    (eb.to_dense() * ember.tensor(w)).sum().backward()
    (tb.to_dense() * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np_of(ev.grad), tv.grad.numpy())
    ev.grad = None
    tv.grad = None
    eb = ember.sparse_bsr_tensor(ember.tensor([0, 1, 2]), ember.tensor([0, 1]), ev, (4, 4))
    tb = torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), tv, (4, 4))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x)
    ((eb @ ex) ** 2).sum().backward()
    ((tb @ tx) ** 2).sum().backward()
    np.testing.assert_allclose(np_of(ev.grad), tv.grad.numpy(), rtol=1e-12)
    a = tb.detach().to_dense().numpy()      # torch has no BSC @ dense for the dense operand's gradient
    np.testing.assert_allclose(np_of(ex.grad), a.T @ (2 * a @ x), rtol=1e-12)
    # a BSR leaf in mm gets torch's dense gradient
    el = ember.tensor(rng.standard_normal((4, 4))).to_sparse_bsr((2, 2)).requires_grad_()
    tl = torch.tensor(np_of(el.to_dense())).to_sparse_bsr((2, 2)).requires_grad_()
    (el @ ember.tensor(x)).sum().backward()
    (tl @ torch.tensor(x)).sum().backward()
    assert el.grad.layout == "strided" and tl.grad.layout == torch.strided
    np.testing.assert_allclose(np_of(el.grad), tl.grad.numpy())
    # to_dense of a BSR leaf: a BSR gradient with its pattern (torch raises here)
    el.grad = None
    el.to_dense().sum().backward()
    assert el.grad.layout is ember.sparse_bsr
    np.testing.assert_allclose(dense_np(el.grad), np.ones((4, 4)))


def test_blocked_gradcheck_through_conversion():
    rng = np.random.default_rng(11)
    # no zeros: a finite-difference step must not change which blocks are specified
    x = ember.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((4, 3)))

    def f(x):
        return (x.to_sparse_bsc((2, 2)).to_sparse_bsr((2, 2)) @ w).sin()
    assert ember.autograd.gradcheck(f, (x,))


def test_empty_and_zero():
    e = ember.zeros(4, 6).to_sparse_bsr((2, 3))
    t = torch.zeros(4, 6).to_sparse_bsr((2, 3))
    _same(e, t)
    eb = ember.tensor(_blocky(1, (4, 6), (2, 3))).to_sparse_bsr((2, 3))
    eb.zero_()
    assert eb._nnz() == 0 and np.all(dense_np(eb) == 0)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("layout", ["bsr", "bsc"])
def test_blocked_binary_ops(seed, layout):
    # torch 2.13's CPU kernels refuse BSR/BSC +, -, *, / (MKL and "unsupported tensor layout"
    # errors): ember's results are checked against the dense computation, and keep the layout
    x, y = _blocky(seed, (4, 6), (2, 3)), _blocky(seed + 10, (4, 6), (2, 3))
    ex, ey = ember.tensor(x), ember.tensor(y)
    a, b = getattr(ex, f"to_sparse_{layout}")((2, 3)), getattr(ey, f"to_sparse_{layout}")((2, 3))
    for got, want in [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a * ey, x * y), (a / 2, x / 2),
                      (ey + a, x + y)]:
        if got.layout != "strided":
            assert got.layout is a.layout and got._st.blocksize == (2, 3)
        np.testing.assert_allclose(dense_np(got), want, rtol=1e-12, atol=1e-12)
    _same(ember.zeros_like(a), torch.zeros_like(getattr(torch.tensor(x), f"to_sparse_{layout}")((2, 3))))


def test_blocked_shape_errors_match_torch():
    e, t = _pair(np.random.default_rng(0).standard_normal((2, 4, 6)))
    _err(lambda: e.to_sparse_bsr((2, 3)).t(), lambda: t.to_sparse_bsr((2, 3)).t())
    _err(lambda: e[0, 0].to_sparse_bsr((1, 1)), lambda: t[0, 0].to_sparse_bsr((1, 1)), IndexError)
    _err(lambda: ember.zeros(2, 4, layout=ember.sparse_bsr), lambda: torch.zeros(2, 4, layout=torch.sparse_bsr))


@settings(max_examples=30, deadline=None)
@given(bh=st.integers(1, 3), bw=st.integers(1, 3), nr=st.integers(1, 3), nc=st.integers(1, 3),
       density=st.floats(0.0, 1.0), layout=st.sampled_from(["bsr", "bsc"]), seed=st.integers(0, 2 ** 16),
       dense=st.sampled_from([(), (2,)]))
def test_random_block_patterns_match_torch(bh, bw, nr, nc, density, layout, seed, dense):
    """Random blocksizes, block grids, densities and dense dims: the blocked tensor, its COO form,
    the conversion to the other blocked layout and back, and the product with a dense matrix."""
    rng = np.random.default_rng(seed)
    shape = (nr * bh, nc * bw) + dense
    x = rng.standard_normal(shape)
    keep = np.repeat(np.repeat(rng.random((nr, nc)) < density, bh, 0), bw, 1)
    x[~keep] = 0
    e, t = _pair(x)
    dd = len(dense)
    es = getattr(e, f"to_sparse_{layout}")((bh, bw), dense_dim=dd or None)
    ts = getattr(t, f"to_sparse_{layout}")((bh, bw), dense_dim=dd or None)
    _same(es, ts)
    other = "bsc" if layout == "bsr" else "bsr"
    _same(getattr(es, f"to_sparse_{other}")((bh, bw)), getattr(ts, f"to_sparse_{other}")((bh, bw)))
    assert repr(es.to_sparse_coo()) == repr(ts.to_sparse_coo()).replace("torch.", "ember.")
    if not dense:
        d = rng.standard_normal((nc * bw, 2))
        np.testing.assert_allclose(np_of(es @ ember.tensor(d)), x @ d, rtol=1e-12, atol=1e-12)


def test_int32_indices_are_kept_through_compressed_conversions():
    rng = np.random.default_rng(4)
    v = rng.standard_normal((2, 2, 3))
    ei, ti = (lambda a: ember.tensor(a, dtype=ember.int32)), (lambda a: torch.tensor(a, dtype=torch.int32))
    e = ember.sparse_bsr_tensor(ei([0, 1, 2]), ei([0, 1]), ember.tensor(v), (4, 6))
    t = torch.sparse_bsr_tensor(ti([0, 1, 2]), ti([0, 1]), torch.tensor(v), (4, 6))
    _same(e, t)
    for fe, ft in [(lambda s: s.crow_indices(), lambda s: s.crow_indices()),
                   (lambda s: s.to_sparse_bsc((2, 3)).row_indices(), lambda s: s.to_sparse_bsc((2, 3)).row_indices()),
                   (lambda s: s.t().ccol_indices(), lambda s: s.t().ccol_indices()),
                   (lambda s: (s * 2).col_indices(), lambda s: (s * 2).col_indices()),
                   (lambda s: s.to_sparse_coo()._indices(), lambda s: s.to_sparse_coo()._indices())]:
        a, b = fe(e), ft(t)
        assert str(a.dtype).replace("ember.", "") == str(b.dtype).replace("torch.", "")
        np.testing.assert_array_equal(np_of(a), b.numpy())
    c = ember.sparse_csr_tensor(ei([0, 1, 2]), ei([1, 0]), ember.tensor(v[:, 0, 0]), (2, 2))
    assert c.to_sparse_csc().ccol_indices().dtype is ember.int32
    assert ember.tensor(v[0]).to_sparse_csr().crow_indices().dtype is ember.int64


def test_conversion_grad_fn_names_match_torch():
    x = np.random.default_rng(9).standard_normal((2, 4))
    e, t = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for fe, ft in [(lambda a: a.to_sparse_csr(), lambda a: a.to_sparse_csr()),
                   (lambda a: a.to_sparse_csc(), lambda a: a.to_sparse_csc()),
                   (lambda a: a.to_sparse_bsr((1, 2)), lambda a: a.to_sparse_bsr((1, 2))),
                   (lambda a: a.to_sparse_bsc((2, 1)), lambda a: a.to_sparse_bsc((2, 1))),
                   (lambda a: a.to_sparse(), lambda a: a.to_sparse()),
                   (lambda a: a.to_sparse_csr().to_sparse_csc(), lambda a: a.to_sparse_csr().to_sparse_csc()),
                   (lambda a: a.to_sparse_bsr((1, 2)).to_sparse_coo(), lambda a: a.to_sparse_bsr((1, 2)).to_sparse_coo())]:
        assert repr(fe(e)) == repr(ft(t)).replace("torch.", "ember.")


def test_factory_grad_fn_matches_torch():
    v = np.random.default_rng(2).standard_normal((2, 1, 2))
    ev, tv = ember.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    e = ember.sparse_bsr_tensor(ember.tensor([0, 1, 2]), ember.tensor([0, 1]), ev, (2, 4))
    t = torch.sparse_bsr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), tv, (2, 4))
    assert repr(e) == repr(t).replace("torch.", "ember.")
    (e.to_dense() * 2).sum().backward()
    (t.to_dense() * 2).sum().backward()
    np.testing.assert_array_equal(np_of(ev.grad), tv.grad.numpy())
