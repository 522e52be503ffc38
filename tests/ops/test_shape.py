"""Shape and view ops vs PyTorch: values, gradients, grad_fn names, view geometry, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, check_against_torch, gradcheck_fn, needs_torch, rand_array, tensor_pair, torch

pytestmark = needs_torch

SET = settings(max_examples=12, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def pair(shape, dtype="float64", requires_grad=True, noncontig=False):
    return tensor_pair(rand_array(shape, dtype), noncontig, requires_grad)


def same_geometry(a, b):
    assert tuple(a.shape) == tuple(b.shape)
    assert a.stride() == b.stride(), (a.stride(), b.stride())
    assert a.storage_offset() == b.storage_offset(), (a.storage_offset(), b.storage_offset())
    assert a.is_contiguous() == b.is_contiguous()


def run_view(fn, shape, noncontig=False, dtype="float64", name=True, shares=True):
    """fn(m, x) under both; compare values, geometry, memory sharing, grad_fn name and gradients."""
    le, lt, e, t = pair(shape, dtype, True, noncontig)
    he, ht = e * 1 if not noncontig else e, t * 1 if not noncontig else t
    oe, ot = fn(ember, he), fn(torch, ht)
    oes = oe if isinstance(oe, (tuple, list)) else (oe,)
    ots = ot if isinstance(ot, (tuple, list)) else (ot,)
    assert len(oes) == len(ots)
    for a, b in zip(oes, ots):
        assert_close(a, b)
        if b._base is not None:   # torch made a view: ember must too, with the same geometry
            same_geometry(a, b)
            assert a._base is not None
            assert not shares or np.shares_memory(a._data, he._data) or a.numel() == 0
        if name and b.grad_fn is not None:
            assert a.grad_fn is not None and a.grad_fn.name() == b.grad_fn.name(), (a.grad_fn, b.grad_fn)
    cots = [np.random.standard_normal(tuple(b.shape)) for b in ots]
    se = sum(((a * ember.tensor(c, dtype=a.dtype)).sum() for a, c in zip(oes, cots)), ember.tensor(0.0))
    stt = sum(((b * torch.tensor(c, dtype=b.dtype)).sum() for b, c in zip(ots, cots)), torch.tensor(0.0))
    se.backward()
    stt.backward()
    assert_close(le.grad, lt.grad)
    return oe, ot


# ---------------------------------------------------------------------- existing view ops
@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_transpose_permute_t_squeeze_unsqueeze(shape, nc, data):
    nd = len(shape)
    d0 = data.draw(st.integers(-nd, nd - 1))
    d1 = data.draw(st.integers(-nd, nd - 1))
    run_view(lambda m, x: x.transpose(d0, d1), shape, nc)
    perm = data.draw(st.permutations(range(nd)))
    run_view(lambda m, x: x.permute(*perm), shape, nc)
    u = data.draw(st.integers(-nd - 1, nd))
    run_view(lambda m, x: x.unsqueeze(u), shape, nc)
    run_view(lambda m, x: x.squeeze(), shape, nc)
    run_view(lambda m, x: x.squeeze(d0), shape, nc)
    run_view(lambda m, x: x.squeeze((d0,)), shape, nc)
    if nd <= 2:
        run_view(lambda m, x: x.t(), shape, nc)


@SET
@given(shape=shapes, nc=st.booleans())
def test_view_reshape_flatten(shape, nc):
    run_view(lambda m, x: x.reshape(-1), shape, nc)
    run_view(lambda m, x: x.flatten(), shape, nc)
    run_view(lambda m, x: x.flatten(1) if x.ndim > 1 else x.flatten(0), shape, nc)
    run_view(lambda m, x: x.reshape(x.shape[0], -1), shape, nc)
    if not nc:
        run_view(lambda m, x: x.view(-1), shape)
        run_view(lambda m, x: x.view_as(x), shape)


def test_flatten_unflatten_specifics():
    run_view(lambda m, x: x.flatten(1, 2), (2, 3, 4, 2))
    run_view(lambda m, x: x.flatten(0, 1), (2, 3, 4), noncontig=True)
    run_view(lambda m, x: x.unflatten(1, (2, -1)), (3, 4, 5))
    run_view(lambda m, x: x.unflatten(-1, (5, 1)), (3, 4, 5), noncontig=True)
    run_view(lambda m, x: m.flatten(x.sum()), (3,), shares=False)
    x = ember.randn(2, 3)
    assert x.flatten(1, 1) is x
    with pytest.raises(RuntimeError, match=r"unflatten: Provided sizes \[3, -1\] don't multiply up to the size of dim 1 \(4\)"):
        ember.zeros(3, 4).unflatten(1, (3, -1))
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        ember.zeros(3, 4).flatten(1, 0)


def test_view_errors():
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        ember.zeros(3, 4).t().view(-1)
    with pytest.raises(RuntimeError, match=r"shape '\[2, -1, 5\]' is invalid for input of size 12"):
        ember.zeros(3, 4).view(2, -1, 5)


@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_expand(shape, nc, data):
    sizes = tuple(data.draw(st.sampled_from([s, -1])) if s != 1 else data.draw(st.sampled_from([1, 3, -1]))
                  for s in shape)
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2))
    run_view(lambda m, x: x.expand(*lead, *sizes), shape, nc)
    le = ember.zeros(*shape)
    run_view(lambda m, x: x.expand_as(m.zeros(*lead, *shape)), shape, nc)


# ---------------------------------------------------------------------- select / slice / narrow / diagonal
@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_select_narrow(shape, nc, data):
    nd = len(shape)
    d = data.draw(st.integers(-nd, nd - 1))
    n = shape[d]
    i = data.draw(st.integers(-n, n - 1))
    run_view(lambda m, x: x.select(d, i), shape, nc)
    start = data.draw(st.integers(-n, n - 1))
    length = data.draw(st.integers(0, n - (start % n)))
    run_view(lambda m, x: x.narrow(d, start, length), shape, nc)
    run_view(lambda m, x: m.narrow(x, d, start, length), shape, nc)


def test_select_narrow_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(IndexError, match=r"select\(\): index 3 out of range for tensor of size \[3, 4\] at dimension 0"):
        x.select(0, 3)
    with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(2\) exceeds dimension size \(3\)"):
        x.narrow(0, 2, 2)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.select(2, 0)


@SET
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), nc=st.booleans(), data=st.data())
def test_diagonal(shape, nc, data):
    nd = len(shape)
    d1 = data.draw(st.integers(-nd, nd - 1))
    d2 = data.draw(st.integers(-nd, nd - 1).filter(lambda v: v % nd != d1 % nd))
    off = data.draw(st.integers(-5, 5))
    run_view(lambda m, x: x.diagonal(off, d1, d2), shape, nc)
    run_view(lambda m, x: m.diagonal(x, offset=off, dim1=d1, dim2=d2), shape, nc)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        ember.zeros(*shape).diagonal(0, d1, d1)


def test_diagonal_gradcheck_and_double_backward():
    a = np.random.randn(3, 4)
    assert gradcheck_fn(lambda m, x: x.diagonal(1), [a])
    # double backward through DiagonalBackward vs torch
    xe, xt = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ge, = ember.autograd.grad((xe.diagonal(-1) ** 3).sum(), [xe], create_graph=True)
    gt, = torch.autograd.grad((xt.diagonal(-1) ** 3).sum(), [xt], create_graph=True)
    assert_close(ge, gt)
    assert_close(ember.autograd.grad((ge * ge).sum(), [xe])[0], torch.autograd.grad((gt * gt).sum(), [xt])[0])


@pytest.mark.parametrize("shape,k", [((4,), 0), ((4,), 1), ((3,), -2), ((3, 4), 0), ((3, 4), 1), ((4, 3), -1),
                                     ((3, 4), 5)])
def test_diag(shape, k):
    run_view(lambda m, x: m.diag(x, k), shape)
    run_view(lambda m, x: x.diag(k), shape, noncontig=True)
    assert gradcheck_fn(lambda m, x: m.diag(x, k), [np.random.randn(*shape)])


# ---------------------------------------------------------------------- split / chunk / unbind
@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_split_chunk_unbind(shape, nc, data):
    nd = len(shape)
    d = data.draw(st.integers(-nd, nd - 1))
    n = shape[d]
    ss = data.draw(st.integers(1, n + 1))
    run_view(lambda m, x: x.split(ss, d), shape, nc)
    run_view(lambda m, x: m.split(x, ss, dim=d), shape, nc)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    run_view(lambda m, x: x.split(sizes, d), shape, nc)
    run_view(lambda m, x: x.split_with_sizes(sizes, d), shape, nc)
    ch = data.draw(st.integers(1, 5))
    run_view(lambda m, x: x.chunk(ch, d), shape, nc)
    run_view(lambda m, x: x.unbind(d), shape, nc)
    run_view(lambda m, x: m.unbind(x, d), shape, nc)
    run_view(lambda m, x: x.tensor_split(ch, d), shape, nc)
    run_view(lambda m, x: x.tensor_split(cuts, d), shape, nc)


def test_split_partial_grads():
    # only some outputs used: the others contribute zeros
    x = ember.randn(5, 3, requires_grad=True)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    a, b, c = x.split(2)
    ta, tb, tc = t.split(2)
    (b * 3).sum().backward()
    (tb * 3).sum().backward()
    assert_close(x.grad, t.grad)
    x.grad = None
    t.grad = None
    u = x.unbind(1)
    tu = t.unbind(1)
    (u[2] ** 2).sum().backward()
    (tu[2] ** 2).sum().backward()
    assert_close(x.grad, t.grad)


def test_split_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"split_with_sizes expects split_sizes to sum exactly to 3"):
        x.split([1, 1], 0)
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
        x.chunk(0)
    assert len(ember.zeros(0).chunk(3)) == len(torch.zeros(0).chunk(3))
    assert [tuple(p.shape) for p in ember.zeros(5).chunk(3)] == [tuple(p.shape) for p in torch.zeros(5).chunk(3)]


# ---------------------------------------------------------------------- cat / stack
@SET
@given(shape=shapes, nc=st.booleans(), data=st.data(), k=st.integers(1, 3))
def test_cat_stack(shape, nc, data, k):
    nd = len(shape)
    d = data.draw(st.integers(-nd, nd - 1))
    shp = [list(shape) for _ in range(k)]
    for s in shp:
        s[d] = data.draw(st.integers(0, 3))
    arrays = [rand_array(tuple(s), "float64") for s in shp]
    for dt in ("float32", "float64"):
        check_against_torch(lambda m, *xs: m.cat(xs, d), arrays, dtype=dt, noncontig=nc)
        check_against_torch(lambda m, *xs: m.concat(list(xs), dim=d), arrays, dtype=dt)
        check_against_torch(lambda m, *xs: m.concatenate(xs, axis=d), arrays, dtype=dt)
    same = [rand_array(shape, "float64") for _ in range(k)]
    sd = data.draw(st.integers(-nd - 1, nd))
    check_against_torch(lambda m, *xs: m.stack(xs, sd), same, noncontig=nc)
    check_against_torch(lambda m, *xs: m.hstack(xs), same)
    check_against_torch(lambda m, *xs: m.vstack(xs), same)
    check_against_torch(lambda m, *xs: m.dstack(xs), same)


def test_cat_grad_fn_and_promotion():
    run_view(lambda m, x: m.cat([x, x * 2], 1), (2, 3))
    run_view(lambda m, x: m.stack([x, x * 2], 1), (2, 3))
    # dtype promotion across inputs, legacy empty 1-d tensors skipped for shapes
    for dts in [("int32", "float64"), ("int64", "int32"), ("bool", "int8"), ("float32", "float64"),
                ("uint8", "int8")]:
        a = rand_array((2, 3), dts[0])
        b = rand_array((1, 3), dts[1])
        oe = ember.cat([ember.tensor(a), ember.tensor(b)])
        ot = torch.cat([torch.tensor(a), torch.tensor(b)])
        assert_close(oe, ot)
        oe = ember.stack([ember.tensor(a), ember.tensor(a.astype(dts[1]))])
        ot = torch.stack([torch.tensor(a), torch.tensor(a.astype(dts[1]))])
        assert_close(oe, ot)
    e = ember.cat([ember.ones(2, 3, dtype=ember.int32), ember.zeros(0), ember.ones(1, 3)])
    t = torch.cat([torch.ones(2, 3, dtype=torch.int32), torch.zeros(0), torch.ones(1, 3)])
    assert_close(e, t)
    # gradient through a mixed-dtype cat flows back in each input's dtype
    a = ember.randn(2, dtype=ember.float32, requires_grad=True)
    b = ember.randn(3, dtype=ember.float64, requires_grad=True)
    ember.cat([a, b]).sum().backward()
    assert a.grad.dtype is ember.float32 and b.grad.dtype is ember.float64
    e = ember.zeros(0, requires_grad=True)
    x = ember.randn(2, 3, requires_grad=True)
    ember.cat([e, x]).sum().backward()
    assert_close(x.grad, torch.ones(2, 3))


def test_cat_stack_errors():
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 0. Expected size 4 "
                                           r"but got size 3 for tensor number 1 in the list"):
        ember.cat([ember.zeros(3, 4), ember.zeros(2, 3)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[3, 4\] at "
                                           r"entry 0 and \[2, 4\] at entry 1"):
        ember.stack([ember.zeros(3, 4), ember.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor \\(at position 0\\) cannot be concatenated"):
        ember.cat([ember.tensor(1.0)])
    with pytest.raises(ValueError, match="expected a non-empty list of Tensors"):
        ember.cat([])
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions"):
        ember.cat([ember.zeros(2, 3), ember.zeros(2, 3, 1)])


def test_cat_gradcheck():
    assert gradcheck_fn(lambda m, a, b: m.cat([a, b], 1), [np.random.randn(2, 3), np.random.randn(2, 1)])
    assert gradcheck_fn(lambda m, a, b: m.stack([a, b], 2), [np.random.randn(2, 3), np.random.randn(2, 3)])


# ---------------------------------------------------------------------- flip / roll / tril / repeat / movedim
@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_flip_roll(shape, nc, data):
    nd = len(shape)
    dims = data.draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
    run_view(lambda m, x: x.flip(dims), shape, nc)
    run_view(lambda m, x: m.flip(x, dims), shape, nc)
    sh = data.draw(st.integers(-6, 6))
    run_view(lambda m, x: x.roll(sh), shape, nc)
    rd = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=2))
    shifts = data.draw(st.lists(st.integers(-5, 5), min_size=len(rd), max_size=len(rd)))
    run_view(lambda m, x: m.roll(x, shifts, rd), shape, nc)
    run_view(lambda m, x: x.roll(sh, rd[0]), shape, nc)
    if nd >= 2:
        run_view(lambda m, x: m.fliplr(x), shape, nc)
    run_view(lambda m, x: m.flipud(x), shape, nc)


def test_flip_is_a_copy_and_reversed():
    x = ember.arange(6.0).reshape(2, 3)
    y = x.flip(0)
    y[0, 0] = 100.0
    assert x[1, 0].item() == 3.0
    assert [r.tolist() for r in reversed(x)] == [r.tolist() for r in reversed(torch.arange(6.0).reshape(2, 3))]
    assert [r.tolist() for r in x] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.flip(0, 0)


@SET
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), nc=st.booleans(),
       k=st.integers(-4, 4))
def test_tril_triu(shape, nc, k):
    run_view(lambda m, x: x.tril(k), shape, nc)
    run_view(lambda m, x: m.triu(x, diagonal=k), shape, nc)
    le, lt, e, t = pair(shape, requires_grad=False)
    assert_close(e.clone().tril_(k), t.clone().tril_(k))
    assert_close(e.clone().triu_(k), t.clone().triu_(k))


def test_tril_error():
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        ember.zeros(3).tril()


@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_repeat_tile(shape, nc, data):
    nd = len(shape)
    reps = data.draw(st.lists(st.integers(0, 3), min_size=nd, max_size=nd + 2))
    run_view(lambda m, x: x.repeat(*reps), shape, nc)
    run_view(lambda m, x: x.repeat(reps), shape, nc)
    treps = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=nd + 1))
    run_view(lambda m, x: x.tile(treps), shape, nc)
    run_view(lambda m, x: m.tile(x, tuple(treps)), shape, nc)
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        ember.zeros(3, 4).repeat(2)


def test_repeat_gradcheck():
    assert gradcheck_fn(lambda m, x: x.repeat(2, 1, 3), [np.random.randn(2, 3)])
    assert gradcheck_fn(lambda m, x: x.roll((1, -2), (0, 1)), [np.random.randn(2, 3)])


@SET
@given(shape=shapes, nc=st.booleans(), data=st.data())
def test_movedim_swapaxes(shape, nc, data):
    nd = len(shape)
    k = data.draw(st.integers(1, nd))
    src = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=k, max_size=k, unique_by=lambda v: v % nd))
    dst = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=k, max_size=k, unique_by=lambda v: v % nd))
    run_view(lambda m, x: x.movedim(src, dst), shape, nc)
    run_view(lambda m, x: m.moveaxis(x, src[0], dst[0]), shape, nc)
    a, b = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
    run_view(lambda m, x: x.swapaxes(a, b), shape, nc)
    run_view(lambda m, x: m.swapdims(x, a, b), shape, nc)


# ---------------------------------------------------------------------- as_strided / clone / contiguous / to
def test_as_strided_geometry_and_grad():
    run_view(lambda m, x: x.as_strided((2, 2), (1, 2)), (3, 4))
    run_view(lambda m, x: x.as_strided((2, 2), (4, 1), 3), (3, 4))
    # overlapping windows: gradients accumulate
    run_view(lambda m, x: m.as_strided(x, (3, 3), (1, 1)), (6,))


def test_clone_contiguous_to_copy():
    run_view(lambda m, x: x.clone(), (3, 4), noncontig=True)
    oe, ot = run_view(lambda m, x: x.contiguous(), (3, 4), noncontig=True)
    assert oe.is_contiguous() and oe.stride() == ot.stride()
    x = ember.randn(3, 4)
    assert x.contiguous() is x
    run_view(lambda m, x: x.to(m.float32), (3, 4))
    c = x.clone()
    c[0, 0] = 5.0
    assert x[0, 0].item() != 5.0 or x[0, 0].item() == 5.0 and False


def test_views_share_memory_and_version():
    x = ember.zeros(3, 4)
    views = [x.view(-1), x.view(4, 3), x[0], x[:, 1:3], x.t(), x.transpose(0, 1), x.unsqueeze(0), x.expand(2, 3, 4),
             x.diagonal(), x.narrow(1, 1, 2), x.select(1, 2), x.permute(1, 0), x.split(1)[0], x.unbind(1)[0],
             x.chunk(2, 1)[1], x.movedim(0, 1), x.flatten(), x.unflatten(1, (2, 2)), x[None], x[...],
             x.as_strided((2,), (5,))]
    for v in views:
        assert v._version == 0
    x.add_(1)
    for v in views:
        assert v._version == 1
        assert np.shares_memory(v._data, x._data)
    views[0].mul_(3)
    assert x._version == 2 and views[3]._version == 2
    assert x.sum().item() == 36.0
    # a view of a view writes through to the base
    x[1:, 1:][0, 0] = 7.0
    assert x[1, 1].item() == 7.0
    # non-views don't share
    for c in [x.flip(0), x.roll(1), x.repeat(1, 1), x.tril(), x[[0, 1]], x.clone(), x.contiguous().t().contiguous()]:
        assert not np.shares_memory(c._data, x._data)


def test_view_geometry_noncontig_chains():
    base_e = ember.arange(120.0).reshape(4, 5, 6)
    base_t = torch.arange(120.0).reshape(4, 5, 6)
    chains = [
        lambda x: x.transpose(0, 2)[1:, ::2].diagonal(0, 0, 2),
        lambda x: x[:, 1].t().unsqueeze(1)[..., 2:],
        lambda x: x.permute(2, 0, 1)[::3].narrow(2, 1, 3).split(2, 1)[1],
        lambda x: x[1::2, :, None, 1:5:3].squeeze(2).unbind(2)[1],
        lambda x: x.diagonal(1, 1, 2).expand(2, 4, 5),
        lambda x: x[:, ::2].movedim(0, 2).flatten(0, 1),
        lambda x: x.unflatten(2, (2, 3)).chunk(2, 3)[1],
    ]
    for f in chains:
        a, b = f(base_e), f(base_t)
        assert_close(a, b)
        same_geometry(a, b)


@needs_torch
@pytest.mark.parametrize("offset", [0, 2])
def test_as_strided_backward_on_a_transposed_input(offset):
    """The gradient lands at the input's own element positions (the backward records the
    input's strides: it once assumed a contiguous input)."""
    b = np.random.randn(4, 5)
    g = np.random.randn(2, 3)
    x = ember.from_numpy(b.copy()).T.requires_grad_()
    tx = torch.from_numpy(b.copy()).T.requires_grad_()
    (x.as_strided((2, 3), (1, 4), offset) * ember.from_numpy(g)).sum().backward()
    (tx.as_strided((2, 3), (1, 4), offset) * torch.from_numpy(g)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


# ---------------------------------------------------------------------- output layouts
LAYOUT_OPS = {
    "cat": lambda m, x: m.cat([x, x * 2]),
    "cat_dim1": lambda m, x: m.cat([x, x], 1),
    "stack": lambda m, x: m.stack([x, x + 1]),
    "stack_last": lambda m, x: m.stack([x, x], -1),
    "roll": lambda m, x: m.roll(x, 1, 0),
    "roll_two_dims": lambda m, x: m.roll(x, (1, -1), (0, 1)),
    "clone_contiguous_format": lambda m, x: x.clone(memory_format=m.contiguous_format),
    "clone_preserve_format": lambda m, x: x.clone(memory_format=m.preserve_format),
    "contiguous": lambda m, x: x.contiguous(),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_OPS))
@pytest.mark.parametrize("layout", ["transposed", "permuted3d", "sliced"])
def test_output_strides_match_torch(name, layout):
    """cat/stack/roll of transposed inputs came out transposed (numpy's layout): a following
    .view() refused them, where PyTorch's contiguous results view fine."""
    arr = rand_array((3, 4, 5), "float32")
    if layout == "transposed":
        ex, tx = ember.tensor(arr[0]).t(), torch.tensor(arr[0]).t()
    elif layout == "permuted3d":
        ex, tx = ember.tensor(arr).permute(2, 0, 1), torch.tensor(arr).permute(2, 0, 1)
    else:
        ex, tx = ember.tensor(arr)[:, ::2], torch.tensor(arr)[:, ::2]
    oe, ot = LAYOUT_OPS[name](ember, ex), LAYOUT_OPS[name](torch, tx)
    assert oe.stride() == ot.stride(), (oe.stride(), ot.stride())
    np.testing.assert_array_equal(oe.numpy(), ot.numpy())
    if ot.is_contiguous():
        assert tuple(oe.view(-1).shape) == (ot.numel(),)


def test_clone_channels_last_and_bad_format():
    arr = rand_array((2, 3, 4, 5), "float32")
    oe = ember.tensor(arr).clone(memory_format=ember.channels_last)
    ot = torch.tensor(arr).clone(memory_format=torch.channels_last)
    assert oe.stride() == ot.stride()
    np.testing.assert_array_equal(oe.numpy(), ot.numpy())
    with pytest.raises(RuntimeError, match="rank 4"):
        ember.ones(2, 3).clone(memory_format=ember.channels_last)
