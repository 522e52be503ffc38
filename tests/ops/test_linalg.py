"""Linear algebra vs PyTorch: mm/bmm/addmm/baddbmm/mv/dot/matmul/outer/einsum/linear/bilinear —
values, gradients, node names, dtypes, errors, finite differences and double backward."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ember
import ember.nn.functional as F
from oracle import assert_close, check_against_torch, gradcheck_fn, needs_torch, rand_array, torch

pytestmark = needs_torch

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLOATS = ("float32", "float64")
side = st.integers(1, 5)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else {}


def _name(t):
    return type(t.grad_fn).__name__


# ---------------------------------------------------------------------- mm family
@FAST
@given(n=side, k=side, p=side, dtype=st.sampled_from(FLOATS), nc=st.booleans())
def test_mm(n, k, p, dtype, nc):
    check_against_torch(lambda m, a, b: m.mm(a, b), [rand_array((n, k)), rand_array((k, p))], dtype=dtype,
                        noncontig=nc, **_tol(dtype))


@FAST
@given(b=side, n=side, k=side, p=side, dtype=st.sampled_from(FLOATS), nc=st.booleans())
def test_bmm(b, n, k, p, dtype, nc):
    check_against_torch(lambda m, x, y: m.bmm(x, y), [rand_array((b, n, k)), rand_array((b, k, p))],
                        dtype=dtype, noncontig=nc, **_tol(dtype))


@FAST
@given(n=side, k=side, p=side, dtype=st.sampled_from(FLOATS), bias=st.sampled_from(["full", "row", "scalar"]),
       beta=st.sampled_from([1, 0.5, 0]), alpha=st.sampled_from([1, 2.0]))
def test_addmm(n, k, p, dtype, bias, beta, alpha):
    bshape = {"full": (n, p), "row": (p,), "scalar": ()}[bias]
    out, _ = check_against_torch(lambda m, s, a, b: m.addmm(s, a, b, beta=beta, alpha=alpha),
                                 [rand_array(bshape), rand_array((n, k)), rand_array((k, p))], dtype=dtype,
                                 **_tol(dtype))
    assert _name(out) == "AddmmBackward0"


@FAST
@given(b=side, n=side, k=side, p=side, dtype=st.sampled_from(FLOATS), beta=st.sampled_from([1, 0.5]),
       alpha=st.sampled_from([1, -1.5]))
def test_baddbmm(b, n, k, p, dtype, beta, alpha):
    out, _ = check_against_torch(lambda m, s, x, y: m.baddbmm(s, x, y, beta=beta, alpha=alpha),
                                 [rand_array((n, p)), rand_array((b, n, k)), rand_array((b, k, p))], dtype=dtype,
                                 **_tol(dtype))
    assert _name(out) == "BaddbmmBackward0"


@FAST
@given(n=side, k=side, dtype=st.sampled_from(FLOATS))
def test_mv_dot_outer(n, k, dtype):
    out, _ = check_against_torch(lambda m, a, v: m.mv(a, v), [rand_array((n, k)), rand_array((k,))], dtype=dtype,
                                 **_tol(dtype))
    assert _name(out) == "MvBackward0"
    out, _ = check_against_torch(lambda m, a, b: m.dot(a, b), [rand_array((k,)), rand_array((k,))], dtype=dtype,
                                 **_tol(dtype))
    assert _name(out) == "DotBackward0"
    out, _ = check_against_torch(lambda m, a, b: m.outer(a, b), [rand_array((n,)), rand_array((k,))],
                                 dtype=dtype)
    assert _name(out) == "MulBackward0"


def test_addmm_inplace():
    s = rand_array((2, 4))
    a, b = rand_array((2, 3)), rand_array((3, 4))
    e = ember.tensor(s)
    t = torch.tensor(s)
    e.addmm_(ember.tensor(a), ember.tensor(b), beta=0.5, alpha=2)
    t.addmm_(torch.tensor(a), torch.tensor(b), beta=0.5, alpha=2)
    assert_close(e, t, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3,), (3,), "DotBackward0"),
    ((2, 3), (3,), "MvBackward0"),
    ((3,), (3, 4), None),
    ((2, 3), (3, 4), "MmBackward0"),
    ((5, 2, 3), (3, 4), "UnsafeViewBackward0"),
    ((5, 2, 3), (3,), "UnsafeViewBackward0"),
    ((3,), (5, 3, 4), "UnsafeViewBackward0"),
    ((2, 3), (5, 3, 4), "CloneBackward0"),
    ((5, 2, 3), (5, 3, 4), "UnsafeViewBackward0"),
    ((2, 1, 2, 3), (5, 3, 4), "UnsafeViewBackward0"),
    ((1, 2, 3), (4, 1, 3, 2), "UnsafeViewBackward0"),
    ((2, 5, 2, 3), (3,), "UnsafeViewBackward0"),
]


@pytest.mark.parametrize("sa,sb,name", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_shapes(sa, sb, name, dtype):
    out, ref = check_against_torch(lambda m, a, b: m.matmul(a, b), [rand_array(sa), rand_array(sb)], dtype=dtype,
                                   **_tol(dtype))
    if name is not None:
        assert _name(out) == _name(ref) == name
    # the operator form too
    check_against_torch(lambda m, a, b: a @ b, [rand_array(sa), rand_array(sb)], dtype=dtype, **_tol(dtype))


@FAST
@given(batch_a=st.lists(st.integers(1, 3), max_size=2), batch_b=st.lists(st.integers(1, 3), max_size=2),
       n=side, k=side, p=side, nc=st.booleans())
def test_matmul_broadcast_random(batch_a, batch_b, n, k, p, nc):
    # make batch dims broadcastable: where both present and unequal, set one to 1
    la, lb = len(batch_a), len(batch_b)
    ba, bb = list(batch_a), list(batch_b)
    for i in range(1, min(la, lb) + 1):
        if ba[-i] != bb[-i]:
            bb[-i] = 1
    check_against_torch(lambda m, a, b: m.matmul(a, b), [rand_array(tuple(ba) + (n, k)),
                                                         rand_array(tuple(bb) + (k, p))],
                        dtype="float64", noncontig=nc)


def test_matmul_integer():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = ember.tensor(a) @ ember.tensor(b)
    ref = torch.tensor(a) @ torch.tensor(b)
    assert out.dtype is ember.int64
    assert_close(out, ref)
    assert_close(ember.matmul(ember.tensor(a[0]), ember.tensor(b)), torch.matmul(torch.tensor(a[0]), torch.tensor(b)))
    bt = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    assert_close(ember.tensor(a) @ ember.tensor(bt), torch.tensor(a) @ torch.tensor(bt))


def test_matmul_noncontig_expanded():
    x = ember.randn(3, 1, 4).expand(3, 5, 4)
    w = ember.randn(6, 4)
    out = x @ w.t()
    ref = torch.tensor(x._data) @ torch.tensor(w._data).t()
    assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_mm_errors():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        ember.mm(ember.randn(2, 3), ember.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        ember.randn(2, 3) @ ember.randn(4, 5)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        ember.mm(ember.randn(2, 3), ember.randn(3, 5, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"):
        ember.randn(2, 3) @ ember.randn(3, 5, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="self must be a matrix"):
        ember.mm(ember.randn(3), ember.randn(3, 5))
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        ember.matmul(ember.tensor(1.0), ember.randn(3))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        ember.matmul(ember.randn(3), ember.randn(4))
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"):
        ember.mv(ember.randn(2, 3), ember.randn(4))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        ember.bmm(ember.randn(2, 3), ember.randn(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"Expected size for first two dimensions of batch2 tensor to be: "
                                           r"\[2, 3\] but got: \[2, 4\]."):
        ember.bmm(ember.randn(2, 2, 3), ember.randn(2, 4, 4))
    # torch's own texts agree
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        torch.mm(torch.randn(2, 3), torch.randn(4, 5))


def test_mm_gradcheck_and_double_backward():
    a, b = rand_array((3, 4), "float64"), rand_array((4, 2), "float64")
    assert gradcheck_fn(lambda m, x, y: m.mm(x, y), [a, b])
    xa = ember.tensor(a, requires_grad=True)
    xb = ember.tensor(b, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda x, y: ember.mm(x, y), (xa, xb))
    assert ember.autograd.gradgradcheck(lambda x, y: ember.matmul(x, y),
                                        (ember.tensor(rand_array((2, 3, 4), "float64"), requires_grad=True),
                                         ember.tensor(rand_array((4, 2), "float64"), requires_grad=True)))
    assert ember.autograd.gradgradcheck(lambda s, x, y: ember.addmm(s, x, y, beta=0.5, alpha=2.0),
                                        (ember.tensor(rand_array((2,), "float64"), requires_grad=True),
                                         ember.tensor(rand_array((3, 4), "float64"), requires_grad=True),
                                         ember.tensor(rand_array((4, 2), "float64"), requires_grad=True)))


def test_mm_double_backward_vs_torch():
    a, b = rand_array((3, 4), "float64"), rand_array((4, 2), "float64")
    res = []
    for m in (ember, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.tensor(b, requires_grad=True)
        out = (m.mm(x, y) ** 2).sum()
        gx, = (ember if m is ember else torch).autograd.grad(out, (x,), create_graph=True)
        ggx = (ember if m is ember else torch).autograd.grad((gx * gx).sum(), (x, y))
        res.append((gx, ggx))
    assert_close(res[0][0], res[1][0])
    assert_close(list(res[0][1]), list(res[1][1]))


# ---------------------------------------------------------------------- einsum
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,i->", [(3,), (3,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("i,ij,j", [(2,), (2, 3), (3,)]),
    ("iij->j", [(2, 2, 3)]),
    ("ab,ab->a", [(1, 3), (2, 3)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM)
@pytest.mark.parametrize("dtype", FLOATS)
def test_einsum(eq, shapes, dtype):
    check_against_torch(lambda m, *xs: m.einsum(eq, *xs), [rand_array(s) for s in shapes], dtype=dtype,
                        **_tol(dtype))


@pytest.mark.parametrize("eq,shapes", [EINSUM[0], EINSUM[5], EINSUM[6], EINSUM[10], EINSUM[15]])
def test_einsum_gradcheck_gradgrad(eq, shapes):
    arrs = [rand_array(s, "float64") for s in shapes]
    assert gradcheck_fn(lambda m, *xs: m.einsum(eq, *xs), arrs)
    ins = [ember.tensor(a, requires_grad=True) for a in arrs]
    assert ember.autograd.gradgradcheck(lambda *xs: ember.einsum(eq, *xs), ins)


def test_einsum_list_form_and_errors():
    a, b = rand_array((2, 3)), rand_array((3, 4))
    assert_close(ember.einsum("ij,jk->ik", [ember.tensor(a), ember.tensor(b)]),
                 torch.einsum("ij,jk->ik", [torch.tensor(a), torch.tensor(b)]), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="einsum"):
        ember.einsum("ij,jk->ik", ember.tensor(a))
    with pytest.raises(RuntimeError, match="einsum"):
        ember.einsum("ij->k", ember.tensor(a))
    with pytest.raises(RuntimeError, match="einsum"):
        ember.einsum("ijk->i", ember.tensor(a))


# ---------------------------------------------------------------------- linear / bilinear
@FAST
@given(lead=st.lists(st.integers(1, 3), max_size=2), k=side, p=side, bias=st.booleans(),
       dtype=st.sampled_from(FLOATS), nc=st.booleans())
def test_linear(lead, k, p, bias, dtype, nc):
    arrs = [rand_array(tuple(lead) + (k,)), rand_array((p, k))] + ([rand_array((p,))] if bias else [])
    out, ref = check_against_torch(lambda m, x, w, *b: (F if m is ember else torch.nn.functional).linear(x, w, *b),
                                   arrs, dtype=dtype, noncontig=nc, **_tol(dtype))
    if len(lead) == 1 and bias and not nc:
        assert _name(out) == _name(ref) == "AddmmBackward0"
    if len(lead) == 1 and not bias and not nc:
        assert _name(out) == _name(ref) == "MmBackward0"


def test_linear_grad_fn_names():
    x, w, b = ember.randn(4, 3), ember.randn(5, 3, requires_grad=True), ember.randn(5, requires_grad=True)
    assert _name(F.linear(x, w, b)) == "AddmmBackward0"
    assert _name(F.linear(ember.randn(2, 4, 3), w, b)) == "ViewBackward0"
    assert _name(ember.linear(x, w)) == "MmBackward0"


def test_linear_gradcheck_gradgrad():
    arrs = [rand_array((2, 3, 4), "float64"), rand_array((5, 4), "float64"), rand_array((5,), "float64")]
    assert gradcheck_fn(lambda m, x, w, b: F.linear(x, w, b), arrs)
    ins = [ember.tensor(a, requires_grad=True) for a in arrs]
    assert ember.autograd.gradgradcheck(lambda x, w, b: F.linear(x, w, b), ins)
    ins2 = [ember.tensor(rand_array((3, 4), "float64"), requires_grad=True), ins[1], ins[2]]
    assert ember.autograd.gradgradcheck(lambda x, w, b: F.linear(x, w, b), ins2)


@pytest.mark.parametrize("dtype", FLOATS)
def test_bilinear(dtype):
    arrs = [rand_array((4, 3)), rand_array((4, 2)), rand_array((5, 3, 2)), rand_array((5,))]
    check_against_torch(lambda m, a, b, w, c: (F if m is ember else torch.nn.functional).bilinear(a, b, w, c),
                        arrs, dtype=dtype, **_tol(dtype))
    assert gradcheck_fn(lambda m, a, b, w, c: F.bilinear(a, b, w, c), [a.astype(np.float64) for a in arrs])


def test_linear_errors():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 2x5\)"):
        F.linear(ember.randn(4, 3), ember.randn(5, 2))
