"""Indexing vs PyTorch: Python getitem/setitem over generated index expressions, and the
gather/scatter/index_* / take/put / masked_select / nonzero ops (values, gradients, gradcheck, errors)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, check_against_torch, gradcheck_fn, needs_torch, rand_array, torch

pytestmark = needs_torch

SET = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------------- index expressions
@st.composite
def index_exprs(draw, shape):
    """(shape, list of index items) where items are ('int', i) / ('slice', s) / None / Ellipsis /
    ('list', [...]) / ('tensor', array) / ('mask', bool array) / ('bool', b)."""
    items = []
    d = 0
    used_ell = False
    nd = len(shape)
    k = draw(st.integers(0, nd + 2))
    for _ in range(k):
        remaining = nd - d
        choices = ["none", "bool"]
        if not used_ell:
            choices.append("ell")
        if remaining > 0:
            choices += ["int", "slice", "slice", "list", "tensor", "mask"]
        c = draw(st.sampled_from(choices))
        if c == "none":
            items.append(None)
        elif c == "bool":
            items.append(("bool", draw(st.booleans())))
        elif c == "ell":
            used_ell = True
            items.append(Ellipsis)
            # an ellipsis spans at least 0 dims; afterwards we can't know the exact position, so only
            # generate items that fit from the right
            d = nd - min(nd - d, draw(st.integers(0, nd - d)))
        elif c == "int":
            n = shape[d]
            items.append(("int", draw(st.integers(-n, n - 1))))
            d += 1
        elif c == "slice":
            n = shape[d]
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            items.append(("slice", slice(start, stop, step)))
            d += 1
        elif c == "list":
            n = shape[d]
            items.append(("list", draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3))))
            d += 1
        elif c == "tensor":
            n = shape[d]
            ishape = draw(st.sampled_from([(2,), (1,), (2, 1), (3,)]))
            items.append(("tensor", np.array(draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(ishape)),
                                                           max_size=int(np.prod(ishape))))).reshape(ishape)))
            d += 1
        else:
            k2 = draw(st.integers(1, min(2, remaining)))
            mshape = shape[d:d + k2]
            items.append(("mask", np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(mshape)),
                                                         max_size=int(np.prod(mshape))))).reshape(mshape)))
            d += k2
    return items


def build(items, mod):
    out = []
    for it in items:
        if it is None or it is Ellipsis:
            out.append(it)
        elif it[0] in ("int", "slice", "bool", "list"):
            out.append(it[1])
        elif it[0] == "tensor":
            out.append(mod.tensor(it[1]))
        else:
            out.append(mod.tensor(it[1]))
    return tuple(out)


def torch_or_error(fn):
    try:
        return fn(), None
    except (IndexError, RuntimeError, ValueError) as e:
        return None, e


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@SET
@given(shape=shapes, data=st.data(), single=st.booleans())
def test_getitem_matches_torch(shape, data, single):
    items = data.draw(index_exprs(shape))
    arr = rand_array(shape, "float64")
    xe = ember.tensor(arr, requires_grad=True)
    xt = torch.tensor(arr, requires_grad=True)
    he, ht = xe * 1, xt * 1
    ie, it = build(items, ember), build(items, torch)
    if single and len(ie) == 1:
        ie, it = ie[0], it[0]
    rt, err = torch_or_error(lambda: ht[it])
    if err is not None:
        with pytest.raises(type(err)):
            he[ie]
        return
    re = he[ie]
    assert_close(re, rt)
    assert re.grad_fn.name() == rt.grad_fn.name(), (items, re.grad_fn, rt.grad_fn)
    if rt._base is not None:
        assert re._base is not None and np.shares_memory(re._data, he._data) or re.numel() == 0
        assert re.stride() == rt.stride() and re.storage_offset() == rt.storage_offset()
    c = rand_array(tuple(rt.shape), "float64")
    (re * ember.tensor(c)).sum().backward()
    (rt * torch.tensor(c)).sum().backward()
    assert_close(xe.grad, xt.grad)


@SET
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), data=st.data(),
       kind=st.sampled_from(["scalar", "tensor", "grad_tensor", "int_value"]))
def test_setitem_matches_torch(shape, data, kind):
    items = data.draw(index_exprs(shape))
    arr = rand_array(shape, "float64")
    xe = ember.tensor(arr, requires_grad=True)
    xt = torch.tensor(arr, requires_grad=True)
    he, ht = xe * 1, xt * 1
    ie, it = build(items, ember), build(items, torch)
    tgt, err = torch_or_error(lambda: ht[it])
    if err is not None:
        with pytest.raises(type(err)):
            he[ie] = 1.0
        return
    vshape = tuple(tgt.shape)
    # sometimes a broadcastable value with fewer dims or a leading 1
    vshape = data.draw(st.sampled_from([vshape, vshape[1:], (1,) + vshape]))
    ve = vt = None
    if any(isinstance(i, tuple) and i[0] == "bool" for i in items):
        kind = "scalar"   # torch's x[True] = tensor path has shape quirks we don't copy
    if kind == "tensor" and any(isinstance(i, tuple) and i[0] == "mask" for i in items):
        kind = "grad_tensor"   # torch's mask path casts or rejects a dtype mismatch depending on shapes
    if kind == "scalar":
        ve = vt = 2.5
    elif kind == "int_value":
        ve = vt = 3
    else:
        varr = rand_array(vshape, "float32" if kind == "tensor" else "float64")
        ve = ember.tensor(varr, requires_grad=kind == "grad_tensor")
        vt = torch.tensor(varr, requires_grad=kind == "grad_tensor")
    _, err = torch_or_error(lambda: ht.__setitem__(it, vt))
    if err is not None:
        with pytest.raises(type(err)):
            he[ie] = ve
        return
    he[ie] = ve
    assert_close(he, ht)
    assert he.grad_fn.name() == tname(ht.grad_fn), (items, he.grad_fn, ht.grad_fn)
    c = rand_array(shape, "float64")
    (he * ember.tensor(c)).sum().backward()
    (ht * torch.tensor(c)).sum().backward()
    assert_close(xe.grad, xt.grad)
    if kind == "grad_tensor":
        assert_close(ve.grad, vt.grad)


def tname(fn):
    """torch's node name, normalised (its C++ CopySlices prints a namespace; fill_ has several overloads)."""
    return re.sub(r"FillBackward\d", "FillBackward0", fn.name().replace("torch::autograd::", ""))


def test_getitem_grad_fn_names():
    x = ember.randn(3, 4, 5, requires_grad=True)
    h = x * 1
    names = {"x[0]": (h[0], "SelectBackward0"), "x[:, 1:3]": (h[:, 1:3], "SliceBackward0"),
             "x[..., None]": (h[..., None], "UnsqueezeBackward0"), "x[...]": (h[...], "AliasBackward0"),
             "x[[0, 1]]": (h[[0, 1]], "IndexBackward0"), "x[h > 0]": (h[h > 0], "IndexBackward0"),
             "x[tensor(1)]": (h[ember.tensor(1)], "SelectBackward0"), "x[True]": (h[True], "IndexBackward0")}
    for k, (t, n) in names.items():
        assert t.grad_fn.name() == n, k


def test_advanced_placement_rule():
    arr = rand_array((2, 3, 4, 5), "float64")
    e, t = ember.tensor(arr), torch.tensor(arr)
    for idx in [(slice(None), [0, 1], slice(None), [1, 2]),          # separated: advanced dims first
                (slice(None), [0, 1], [1, 2]),                       # adjacent: in place
                (slice(None), [0, 1], 0, [1, 2]),                    # int between: a select, adjacent
                ([0, 1], slice(None), 0),
                (slice(None), [[0], [1]], slice(None), [1, 2, 3]),
                (Ellipsis, [0, 2]), ([1], None, [2]), (None, [1], [2], None)]:
        ie = tuple(ember.tensor(i) if isinstance(i, list) else i for i in idx)
        it = tuple(torch.tensor(i) if isinstance(i, list) else i for i in idx)
        assert_close(e[ie], t[it])
    # a nested list at top level is a tuple (legacy numpy rule), a flat list is a tensor
    x = ember.tensor(rand_array((3, 4), "float64"))
    xt = torch.tensor(x.numpy())
    assert_close(x[[0, 2]], xt[[0, 2]])
    assert_close(x[[[0, 1], [1, 2]]], xt[[[0, 1], [1, 2]]])
    assert_close(x[[0, slice(None)]], xt[[0, slice(None)]])
    assert_close(x[np.array([0, 2])], xt[np.array([0, 2])])
    assert_close(x[[]], xt[[]])


def test_repeated_indices_accumulate_grad():
    for idx in ([0, 0, 2, 0], [[1, 1], [0, 1]]):
        check_against_torch(lambda m, x: x[m.tensor(idx)], [rand_array((3, 4), "float64")], dtype="float64")
        check_against_torch(lambda m, x: x[:, m.tensor(idx)], [rand_array((3, 4), "float64")], dtype="float32")
    assert gradcheck_fn(lambda m, x: x[m.tensor([0, 0, 2])], [np.random.randn(3, 2)])
    assert gradcheck_fn(lambda m, x: x[m.tensor([[True, False], [True, True], [False, True]])],
                        [np.random.randn(3, 2)])


def test_getitem_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 4"):
        x[:, 7]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[[5]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        x[-4]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[ember.tensor([1.0])]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[:, ::0]
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match the shape of the "
                                         r"indexed tensor \[3, 4\] at index 0"):
        x[ember.ones(2, dtype=ember.bool)]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        ember.tensor(1.0)[0]
    with pytest.raises(IndexError, match="an index can only have a single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be broadcast together with "
                                         r"shapes \[2\], \[3\]"):
        x[[0, 1], [0, 1, 2]]


def test_setitem_semantics():
    x = ember.zeros(3, 4)
    v0 = x._version
    x[0] = 1.0
    assert x._version == v0 + 1
    x[[1, 2], [0, 3]] = ember.tensor([5.0, 6.0])
    x[x > 5] = 0.0
    x[:, 1:3] = ember.tensor([[7.0, 8.0]])           # broadcast
    x[1] = ember.tensor([[1, 2, 3, 4]])              # leading 1-dim dropped, int cast to float
    t = torch.zeros(3, 4)
    t[0] = 1.0
    t[[1, 2], [0, 3]] = torch.tensor([5.0, 6.0])
    t[t > 5] = 0.0
    t[:, 1:3] = torch.tensor([[7.0, 8.0]])
    t[1] = torch.tensor([[1, 2, 3, 4]])
    assert_close(x, t)
    xi = ember.zeros(3, dtype=ember.int64)
    xi[0] = 2.7
    xi[1:] = ember.tensor([1.9, -1.2])
    ti = torch.zeros(3, dtype=torch.int64)
    ti[0] = 2.7
    ti[1:] = torch.tensor([1.9, -1.2])
    assert_close(xi, ti)
    # a view sees the write
    v = x[1]
    x[1, 2] = 42.0
    assert v[2].item() == 42.0 and v._version == x._version
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[3\\] cannot be broadcast to "
                                           "indexing result of shape \\[2\\]"):
        x[[0, 1], 0] = ember.tensor([1.0, 2.0, 3.0])


def test_setitem_autograd():
    for setter in [lambda h, m: h.__setitem__(0, 0.0), lambda h, m: h.__setitem__((slice(None), 1), 3.0),
                   lambda h, m: h.__setitem__(m.tensor([0, 2]), 1.0), lambda h, m: h.__setitem__(..., 2.0),
                   lambda h, m: h.__setitem__((h > 0), 0.0)]:
        arr = rand_array((3, 4), "float64")
        xe, xt = ember.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)
        he, ht = xe * 2, xt * 2
        setter(he, ember)
        setter(ht, torch)
        assert he.grad_fn.name() == tname(ht.grad_fn)
        (he * he).sum().backward()
        (ht * ht).sum().backward()
        assert_close(xe.grad, xt.grad)
    # the value receives the gradient of the region it was written to, the base does not
    for make in [lambda m: m.zeros(3, 4), lambda m: m.zeros(3, 4)[:, :]]:
        he, ht = make(ember), make(torch)
        ve = ember.tensor(rand_array((4,), "float64"), requires_grad=True)
        vt = torch.tensor(ve.detach().numpy(), requires_grad=True)
        he[1] = ve
        ht[1] = vt
        assert he.requires_grad
        (he * ember.arange(12.0).reshape(3, 4)).sum().backward()
        (ht * torch.arange(12.0).reshape(3, 4)).sum().backward()
        assert_close(ve.grad, vt.grad)
    he, ht = ember.zeros(3, 4, dtype=ember.float64), torch.zeros(3, 4, dtype=torch.float64)
    ve = ember.tensor(rand_array((2, 4), "float64"), requires_grad=True)
    vt = torch.tensor(ve.detach().numpy(), requires_grad=True)
    he[[0, 0]] = ve
    ht[[0, 0]] = vt
    assert he.grad_fn.name() == tname(ht.grad_fn)
    # leaf errors
    x = ember.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x[[0]] = 1.0
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
        x[...] = 1.0
    with ember.no_grad():
        x[0] = 1.0
    assert x[0].sum().item() == 4.0


# ---------------------------------------------------------------------- gather / scatter
def _index_for(shape, dim, n_src, rng, ishape=None):
    ishape = ishape or tuple(rng.integers(1, s + 1) for s in shape)
    ishape = list(ishape)
    ishape[dim] = rng.integers(1, 4)
    return rng.integers(0, n_src, size=tuple(ishape)).astype(np.int64)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), data=st.data(),
       dtype=st.sampled_from(["float32", "float64"]))
def test_gather_scatter(shape, data, dtype):
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    d = dim % nd
    idx = _index_for(shape, d, shape[d], rng)
    nc = data.draw(st.booleans())
    check_against_torch(lambda m, x, i: m.gather(x, dim, i), [rand_array(shape), idx], dtype=dtype, noncontig=nc)
    check_against_torch(lambda m, x, i: x.gather(dim, i), [rand_array(shape), idx], dtype=dtype)
    # scatter-style: index entries must be unique along dim for a deterministic result
    ishape = list(idx.shape)
    ishape[d] = min(ishape[d], shape[d])
    perm = np.argsort(rng.random(tuple(ishape[:d]) + (shape[d],) + tuple(ishape[d + 1:])), axis=d)
    uidx = np.take(perm, np.arange(ishape[d]), axis=d).astype(np.int64)
    src = rand_array(tuple(uidx.shape))
    big_src = rand_array(tuple(s + 1 for s in uidx.shape))
    check_against_torch(lambda m, x, i, s: x.scatter(dim, i, s), [rand_array(shape), uidx, src], dtype=dtype)
    check_against_torch(lambda m, x, i, s: m.scatter(x, dim, i, s), [rand_array(shape), uidx, big_src], dtype=dtype,
                        grad=False)   # torch's backward rejects a src larger than index
    check_against_torch(lambda m, x, i: x.scatter(dim, i, 1.5), [rand_array(shape), uidx], dtype=dtype)
    check_against_torch(lambda m, x, i: x.scatter(dim, i, value=-2.0), [rand_array(shape), uidx], dtype=dtype)
    check_against_torch(lambda m, x, i, s: x.scatter_add(dim, i, s), [rand_array(shape), idx,
                                                                      rand_array(idx.shape)], dtype=dtype)
    check_against_torch(lambda m, x, i, s: m.scatter_add(x, dim, i, s), [rand_array(shape), idx,
                                                                         rand_array(tuple(s + 1 for s in idx.shape))],
                        dtype=dtype, grad=False)
    for red in ("sum", "mean", "amax", "amin"):
        for inc in (True, False):
            check_against_torch(lambda m, x, i, s: x.scatter_reduce(dim, i, s, red, include_self=inc),
                                [rand_array(shape), idx, rand_array(idx.shape)], dtype=dtype)
    for red in ("add", "multiply"):
        check_against_torch(lambda m, x, i, s: x.scatter(dim, i, s, reduce=red),
                            [rand_array(shape), idx, rand_array(idx.shape)], dtype=dtype, grad=False)


def test_gather_scatter_grad_fn_and_gradcheck():
    x = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
    i = ember.tensor([[0, 1, 2, 0]])
    s = ember.randn(1, 4, dtype=ember.float64, requires_grad=True)
    assert x.gather(0, i).grad_fn.name() == "GatherBackward0"
    assert x.scatter(0, i, s).grad_fn.name() == "ScatterBackward0"
    assert x.scatter(0, i, 1.0).grad_fn.name() == "ScatterBackward1"
    assert x.scatter_add(0, i, s).grad_fn.name() == "ScatterAddBackward0"
    assert x.scatter_reduce(0, i, s, "sum").grad_fn.name() == "ScatterReduceBackward0"
    idx = np.array([[0, 1, 2, 0], [2, 2, 1, 0]])
    assert gradcheck_fn(lambda m, x: x.gather(0, m.tensor(idx)), [np.random.randn(3, 4)])
    assert gradcheck_fn(lambda m, x, s: x.scatter_add(0, m.tensor(idx), s), [np.random.randn(3, 4),
                                                                             np.random.randn(2, 4)])
    assert gradcheck_fn(lambda m, x, s: x.scatter(1, m.tensor([[0, 3], [1, 2]]), s),
                        [np.random.randn(2, 4), np.random.randn(2, 2)])
    assert gradcheck_fn(lambda m, x, s: x.scatter_reduce(0, m.tensor(idx), s, "mean"),
                        [np.random.randn(3, 4), np.random.randn(2, 4)])
    # in-place variants bump the version counter
    y = ember.zeros(3, 4)
    y.scatter_(0, i, 1.0)
    y.scatter_add_(0, i, ember.ones(1, 4))
    assert y._version == 2 and y.sum().item() == 8.0


def test_gather_scatter_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x.gather(0, ember.tensor([[5]]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(0, ember.tensor([0]))
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter(0, ember.tensor([[0]]), ember.ones(1, 1, dtype=ember.float64))


# ---------------------------------------------------------------------- index_select / index_add / ...
@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), data=st.data(),
       dtype=st.sampled_from(["float32", "float64"]))
def test_index_family(shape, data, dtype):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    d = dim % nd
    n = shape[d]
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=4)), dtype=np.int64)
    nidx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=4)), dtype=np.int64)
    uidx = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=n, unique=True)), dtype=np.int64)
    sshape = list(shape)
    sshape[d] = len(idx)
    ushape = list(shape)
    ushape[d] = len(uidx)
    nc = data.draw(st.booleans())
    check_against_torch(lambda m, x, i: x.index_select(dim, i), [rand_array(shape), idx], dtype=dtype, noncontig=nc)
    check_against_torch(lambda m, x, i, s: x.index_add(dim, i, s), [rand_array(shape), idx, rand_array(tuple(sshape))],
                        dtype=dtype, noncontig=nc)
    check_against_torch(lambda m, x, i, s: m.index_add(x, dim, i, s, alpha=-1.5),
                        [rand_array(shape), idx, rand_array(tuple(sshape))], dtype=dtype)
    check_against_torch(lambda m, x, i, s: x.index_copy(dim, i, s), [rand_array(shape), uidx,
                                                                     rand_array(tuple(ushape))], dtype=dtype)
    check_against_torch(lambda m, x, i: x.index_fill(dim, i, -3.0), [rand_array(shape), nidx], dtype=dtype)
    check_against_torch(lambda m, x, i, v: x.index_fill(dim, i, v), [rand_array(shape), idx, rand_array(())],
                        dtype=dtype)


def test_index_family_misc():
    x = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
    i = ember.tensor([0, 2])
    assert x.index_select(0, i).grad_fn.name() == "IndexSelectBackward0"
    assert x.index_add(0, i, ember.ones(2, 4, dtype=ember.float64)).grad_fn.name() == "IndexAddBackward0"
    assert x.index_copy(0, i, ember.ones(2, 4, dtype=ember.float64)).grad_fn.name() == "IndexCopyBackward0"
    assert x.index_fill(0, i, 1.0).grad_fn.name() == "IndexFillBackward0"
    assert x.index_fill(0, i, ember.tensor(1.0, dtype=ember.float64)).grad_fn.name() == "IndexFillBackward1"
    assert x.index_put((i,), ember.tensor(1.0, dtype=ember.float64)).grad_fn.name() == "IndexPutBackward0"
    assert x.take(i).grad_fn.name() == "TakeBackward0"
    assert x.put(i, ember.ones(2, dtype=ember.float64)).grad_fn.name() == "PutBackward0"
    assert x.masked_select(x > 0).grad_fn.name() == "MaskedSelectBackward0"
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(0, ember.tensor([5]))
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.index_select(0, ember.tensor([[0]]))
    with pytest.raises(IndexError, match="out of range: tried to access index 12 on a tensor of 12 elements."):
        x.take(ember.tensor([12]))
    with pytest.raises(RuntimeError, match="index_fill_ only supports a 0-dimensional value tensor"):
        x.detach().index_fill(0, i, ember.ones(2, dtype=ember.float64))
    y = ember.zeros(3, 4)
    for f in [lambda: y.index_add_(0, i, ember.ones(2, 4)), lambda: y.index_copy_(1, i, ember.ones(3, 2)),
              lambda: y.index_fill_(0, i, 2.0), lambda: y.index_put_((i,), ember.tensor(1.0)),
              lambda: y.put_(i, ember.ones(2)), lambda: y.index_put_((i, i), ember.tensor(3.0), accumulate=True)]:
        v = y._version
        assert f() is y
        assert y._version == v + 1
    assert gradcheck_fn(lambda m, x: x.index_select(1, m.tensor([3, 0, 3])), [np.random.randn(2, 4)])
    assert gradcheck_fn(lambda m, x, s: x.index_add(0, m.tensor([1, 1]), s, alpha=2.0),
                        [np.random.randn(3, 2), np.random.randn(2, 2)])
    assert gradcheck_fn(lambda m, x, s: x.index_copy(0, m.tensor([2, 0]), s),
                        [np.random.randn(3, 2), np.random.randn(2, 2)])
    assert gradcheck_fn(lambda m, x, v: x.index_fill(1, m.tensor([1]), v), [np.random.randn(3, 2), np.random.randn()])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_index_put_take_put_masked_select(dtype):
    a = rand_array((3, 4), "float64")
    i0, i1 = np.array([0, 2, 0]), np.array([1, 3, 1])
    check_against_torch(lambda m, x, v: x.index_put((m.tensor(i0), m.tensor(i1)), v, accumulate=True),
                        [a, rand_array((3,))], dtype=dtype)
    check_against_torch(lambda m, x, v: m.index_put(x, (m.tensor([0, 2]),), v), [a, rand_array((4,))], dtype=dtype)
    check_against_torch(lambda m, x, v: x.index_put((m.tensor([[True, False, True, True]] * 3),), v),
                        [a, rand_array(())], dtype=dtype)
    check_against_torch(lambda m, x: x.take(m.tensor([[0, 11], [5, 5]])), [a], dtype=dtype)
    check_against_torch(lambda m, x: m.take(x, m.tensor([-1, 3])), [a], dtype=dtype, noncontig=True)
    check_against_torch(lambda m, x, s: x.put(m.tensor([1, 5, 1]), s, accumulate=True), [a, rand_array((3,))],
                        dtype=dtype)
    check_against_torch(lambda m, x, s: x.put(m.tensor([1, 5]), s), [a, rand_array((2,))], dtype=dtype)
    mask = rand_array((3, 4), "bool")
    check_against_torch(lambda m, x, k: x.masked_select(k), [a, mask], dtype=dtype, noncontig=True)
    check_against_torch(lambda m, x, k: m.masked_select(x, k), [rand_array((4,)), mask], dtype=dtype)
    check_against_torch(lambda m, x, k: m.masked_select(x, k), [rand_array((3, 1)), mask], dtype=dtype)
    assert gradcheck_fn(lambda m, x, v: x.index_put((m.tensor([0, 0]),), v, accumulate=True),
                        [np.random.randn(3, 2), np.random.randn(2)])
    assert gradcheck_fn(lambda m, x: x.take(m.tensor([0, 0, 4])), [np.random.randn(3, 2)])
    assert gradcheck_fn(lambda m, x, s: x.put(m.tensor([0, 0, 4]), s, accumulate=True),
                        [np.random.randn(3, 2), np.random.randn(3)])
    assert gradcheck_fn(lambda m, x: x.masked_select(m.tensor([True, False])), [np.random.randn(3, 2)])


def test_index_put_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        x.index_put((ember.tensor([0]),), ember.tensor(1.0, dtype=ember.float64))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_put_((ember.tensor([3]),), ember.tensor(1.0))


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple))
def test_nonzero_argwhere_where(shape):
    arr = rand_array(shape, "int64") * (rand_array(shape, "bool"))
    e, t = ember.tensor(arr), torch.tensor(arr)
    assert_close(e.nonzero(), t.nonzero())
    assert_close(ember.nonzero(e), torch.nonzero(t))
    assert_close(ember.argwhere(e), torch.argwhere(t))
    assert_close(e.nonzero(as_tuple=True), t.nonzero(as_tuple=True))
    assert_close(ember.nonzero(e, as_tuple=True), torch.nonzero(t, as_tuple=True))
    assert_close(ember.where(e > 0), torch.where(t > 0))
    assert not e.nonzero().requires_grad


def test_iter_and_unbind():
    x = ember.randn(3, 2, requires_grad=True)
    rows = list(x)
    assert len(rows) == 3 and rows[0].grad_fn.name() == "UnbindBackward0"
    sum(r.sum() * (i + 1) for i, r in enumerate(rows)).backward()
    assert_close(x.grad, torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(ember.tensor(1.0))


def test_empty_broadcast_index_skips_bounds():
    """An advanced index that broadcasts with an empty mask selects nothing: torch checks no
    bounds then (found by hypothesis: ``x[..., False, [1]]`` on a [2, 1] tensor)."""
    arr = rand_array((2, 1), "float64")
    for key in [(Ellipsis, False, [1]), (Ellipsis, False, [0])]:
        re, rt = ember.tensor(arr)[key], torch.tensor(arr)[key]
        assert tuple(re.shape) == tuple(rt.shape) == (2, 0)
    with pytest.raises(IndexError):
        ember.tensor(arr)[..., True, [1]]
    with pytest.raises(IndexError):
        torch.tensor(arr)[..., True, [1]]
