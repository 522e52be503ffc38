"""ember/ops/shape_extra.py vs PyTorch: diff, trace, diag_embed, rot90, repeat_interleave, unfold,
glu, kron, block_diag, meshgrid, cartesian_prod, combinations, tril/triu_indices, cdist, atleast_*d.

Values, dtypes, shapes (and strides where PyTorch makes a view or a strided result), gradients,
errors, and one compiled function using several of the composites."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from oracle import assert_close, gradcheck_fn, needs_torch, rand_array, tensor_pair, torch

SET = settings(max_examples=15, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


both = tensor_pair     # (ember, torch, ember view, torch view)


def run_both(fn, arrays, noncontig=False, grad=True, strides=False):
    """``fn(module, *tensors)`` under ember and torch; values, dtypes, shapes (strides if asked),
    and the float64 gradients of ``sum(out * cotangent)``."""
    pairs = [both(a, noncontig, grad and a.dtype.kind == "f") for a in arrays]
    oe, ot = fn(ember, *[p[2] for p in pairs]), fn(torch, *[p[3] for p in pairs])
    oes = oe if isinstance(oe, (tuple, list)) else (oe,)
    ots = ot if isinstance(ot, (tuple, list)) else (ot,)
    assert len(oes) == len(ots)
    assert_close(oes, ots)
    if strides:
        for a, b in zip(oes, ots):
            if b.numel() > 1:
                assert a.stride() == b.stride(), (a.stride(), b.stride())
    leaves = [(p[0], p[1]) for p, a in zip(pairs, arrays) if grad and a.dtype.kind == "f"]
    diffable = [(a, b) for a, b in zip(oes, ots) if b.requires_grad]
    if leaves and diffable:
        cots = [np.random.standard_normal(tuple(b.shape)) for _, b in diffable]
        le = sum(((a * ember.tensor(c)).sum() for (a, _), c in zip(diffable, cots)), ember.tensor(0.0))
        lt = sum(((b * torch.tensor(c)).sum() for (_, b), c in zip(diffable, cots)), torch.tensor(0.0))
        ge = ember.autograd.grad(le, [e for e, _ in leaves], allow_unused=True)
        gt = torch.autograd.grad(lt, [t for _, t in leaves], allow_unused=True)
        for a, b in zip(ge, gt):
            if b is None:
                assert a is None or not np.any(a.numpy())
            else:
                assert_close(a, b)
    return oe, ot


def same_error(fn, exc=(RuntimeError, IndexError, TypeError, NotImplementedError, ValueError)):
    """Both raise, with the same exception type and message."""
    with pytest.raises(exc) as te:
        fn(torch)
    with pytest.raises(type(te.value)) as ee:
        fn(ember)
    assert str(ee.value) == str(te.value), (str(ee.value), str(te.value))


def f64(*shape):
    return rand_array(shape, "float64")


# ---------------------------------------------------------------------- diff
@needs_torch
@SET
@given(shapes, st.integers(0, 4), st.data(), st.booleans())
def test_diff(shape, n, data, noncontig):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    pre = data.draw(st.integers(0, 2))
    app = data.draw(st.integers(0, 2))
    d = dim % nd
    arrays = [f64(*shape)]
    extra = []
    for k in (pre, app):
        if k:
            s = list(shape)
            s[d] = k
            arrays.append(f64(*s))
        extra.append(bool(k))

    def fn(m, x, *more):
        it = iter(more)
        p = next(it) if extra[0] else None
        a = next(it) if extra[1] else None
        return m.diff(x, n, dim, prepend=p, append=a)
    run_both(fn, arrays, noncontig=noncontig)


@needs_torch
def test_diff_dtypes_and_method():
    b = rand_array((3, 5), "bool")
    run_both(lambda m, x: m.diff(x, 2), [b])
    i = rand_array((4, 3), "int32")
    run_both(lambda m, x: x.diff(dim=0), [i])
    # an int input with a float prepend promotes, as cat does
    run_both(lambda m, x, p: m.diff(x, prepend=p), [rand_array((2, 3), "int64"), f64(2, 1)], grad=False)
    run_both(lambda m, x: m.diff(x, 9), [f64(2, 3)])               # past the length: empty
    run_both(lambda m, x: m.diff(x, 1, 0), [f64(0, 3)])
    x = ember.randn(3)
    y = ember.diff(x, 0)
    assert y is not x and np.array_equal(y.numpy(), x.numpy())


@needs_torch
def test_diff_errors():
    same_error(lambda m: m.diff(m.tensor(1.0)))
    same_error(lambda m: m.diff(m.ones(3), -1))
    same_error(lambda m: m.diff(m.ones(2, 3), prepend=m.ones(3)))
    with pytest.raises(TypeError, match="prepend"):
        ember.diff(ember.ones(3), prepend=1.0)
    same_error(lambda m: m.diff(m.ones(2, 3), dim=2))


def test_diff_gradcheck():
    assert gradcheck_fn(lambda m, x, p: m.diff(x, 2, 0, prepend=p), [f64(4, 3), f64(1, 3)])


# ---------------------------------------------------------------------- trace
@needs_torch
def test_trace():
    for shape in [(3, 4), (4, 3), (1, 1), (0, 3)]:
        run_both(lambda m, x: m.trace(x), [f64(*shape)])
        run_both(lambda m, x: x.trace(), [f64(*shape)], noncontig=True)
    run_both(lambda m, x: m.trace(x), [rand_array((3, 3), "int32")])           # int64 result
    run_both(lambda m, x: m.trace(x.float()), [f64(3, 3)])
    same_error(lambda m: m.trace(m.ones(3)))
    same_error(lambda m: m.trace(m.ones(3, 3, dtype=m.bool)))


# ---------------------------------------------------------------------- diag_embed
@needs_torch
@SET
@given(shapes, st.integers(-3, 3), st.data())
def test_diag_embed(shape, offset, data):
    nd = len(shape) + 1
    d1 = data.draw(st.integers(-nd, nd - 1))
    d2 = data.draw(st.integers(-nd, nd - 1).filter(lambda v: v % nd != d1 % nd))
    run_both(lambda m, x: m.diag_embed(x, offset, d1, d2), [f64(*shape)], strides=True)
    run_both(lambda m, x: x.diag_embed(offset, d1, d2), [f64(*shape)], noncontig=True)


@needs_torch
def test_diag_embed_special():
    x = np.array([[np.inf, np.nan, 1.0]])
    run_both(lambda m, x: m.diag_embed(x), [x], grad=False)     # no inf*0 off the diagonal
    run_both(lambda m, x: m.diag_embed(x, -1), [rand_array((2, 3), "bool")])
    run_both(lambda m, x: m.diag_embed(x, 2), [rand_array((3,), "int64")])
    same_error(lambda m: m.diag_embed(m.ones(2, 3), 0, 1, -2))
    same_error(lambda m: m.diag_embed(m.ones(2, 3), 0, 0, 3))
    assert gradcheck_fn(lambda m, x: m.diag_embed(x, 1, 0, 2), [f64(2, 3)])


# ---------------------------------------------------------------------- rot90
@needs_torch
@SET
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), st.integers(-5, 5), st.data(),
       st.booleans())
def test_rot90(shape, k, data, noncontig):
    nd = len(shape)
    d0 = data.draw(st.integers(-nd, nd - 1))
    d1 = data.draw(st.integers(-nd, nd - 1).filter(lambda v: v % nd != d0 % nd))
    # strides only for a contiguous input: ember's flip returns a contiguous result where PyTorch's
    # keeps a transposed input's layout, so an odd k of a transposed input differs in layout only
    run_both(lambda m, x: m.rot90(x, k, (d0, d1)), [f64(*shape)], noncontig=noncontig, strides=not noncontig)
    run_both(lambda m, x: x.rot90(k, [d0, d1]), [f64(*shape)])


@needs_torch
def test_rot90_errors():
    same_error(lambda m: m.rot90(m.ones(2, 3), 1, (0,)))
    same_error(lambda m: m.rot90(m.ones(2, 3), 1, (0, 1, 0)))
    same_error(lambda m: m.rot90(m.ones(3), 1))
    same_error(lambda m: m.rot90(m.ones(2, 3), 1, (1, 1)))
    x = ember.randn(2, 3)
    y = ember.rot90(x, 4)
    assert y.is_contiguous() and not np.shares_memory(y._data, x._data)


# ---------------------------------------------------------------------- repeat_interleave
@needs_torch
@SET
@given(shapes, st.integers(0, 3), st.data(), st.booleans())
def test_repeat_interleave_int(shape, reps, data, noncontig):
    nd = len(shape)
    dim = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    run_both(lambda m, x: m.repeat_interleave(x, reps, dim), [f64(*shape)], noncontig=noncontig)
    run_both(lambda m, x: x.repeat_interleave(reps, dim=dim), [f64(*shape)])


@needs_torch
@SET
@given(shapes, st.data(), st.booleans())
def test_repeat_interleave_tensor(shape, data, noncontig):
    nd = len(shape)
    dim = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
    n = int(np.prod(shape)) if dim is None else shape[dim]
    length = data.draw(st.sampled_from([n, 1]))
    reps = np.array(data.draw(st.lists(st.integers(0, 3), min_size=length, max_size=length)), dtype=np.int64)
    if data.draw(st.booleans()) and length == 1:
        reps = reps.reshape(())
    rdt = data.draw(st.sampled_from(["int64", "int32"]))
    run_both(lambda m, x: m.repeat_interleave(x, m.tensor(reps.astype(rdt)), dim), [f64(*shape)],
             noncontig=noncontig)
    total = int(reps.sum()) * (n if length == 1 else 1)
    run_both(lambda m, x: x.repeat_interleave(m.tensor(reps), dim, output_size=total), [f64(*shape)])


@needs_torch
def test_repeat_interleave_forms():
    for reps in ([2, 0, 3, 1], [0, 0], [], [4]):
        for dt in ("int64", "int32"):
            r = np.array(reps, dtype=dt)
            run_both(lambda m, r: m.repeat_interleave(r), [r])
    run_both(lambda m, x: m.repeat_interleave(x, 3), [np.array(2.5)])
    same_error(lambda m: m.repeat_interleave(m.tensor(2.5), m.tensor(3), 0))
    with pytest.raises(IndexError):
        ember.repeat_interleave(ember.tensor(2.5), 3, 0)
    run_both(lambda m, x: m.repeat_interleave(x, 2, 1), [rand_array((2, 3), "int32")])
    run_both(lambda m, x: m.repeat_interleave(x, m.tensor([1, 2]), 0), [f64(2, 0)])


@needs_torch
def test_repeat_interleave_errors():
    x = lambda m: m.ones(3, 4)  # noqa: E731
    same_error(lambda m: m.repeat_interleave(x(m), -1))
    same_error(lambda m: m.repeat_interleave(x(m), m.tensor([1, -2, 0]), dim=0))
    same_error(lambda m: m.repeat_interleave(x(m), m.tensor([1, 2]), dim=0))
    same_error(lambda m: m.repeat_interleave(x(m), m.tensor([[1, 2, 0]]), dim=0))
    same_error(lambda m: m.repeat_interleave(x(m), m.tensor([1.0, 2.0, 0.0]), dim=0))
    same_error(lambda m: m.repeat_interleave(x(m), 2, dim=2))
    same_error(lambda m: m.repeat_interleave(x(m), 2, dim=0, output_size=5))
    with pytest.raises(RuntimeError, match="output_size"):
        ember.repeat_interleave(x(ember), ember.tensor([1, 2, 0]), dim=0, output_size=5)
    with pytest.raises(TypeError, match="repeats"):
        ember.repeat_interleave(x(ember), 1.5)


def test_repeat_interleave_data_dependent_under_tracing():
    """A tensor of repeats needs their sum for the output length: a fake trace without
    output_size raises a DataDependentOutputError naming the op and the way out."""
    from ember.fx.experimental.proxy_tensor import make_fx
    from ember.fx.fake_tensor import DataDependentOutputError
    x, r = ember.randn(3, 4), ember.tensor([1, 0, 2])
    with pytest.raises(DataDependentOutputError, match="repeat_interleave.*output_size"):
        make_fx(lambda x, r: ember.repeat_interleave(x, r, dim=0), tracing_mode="fake")(x, r)
    gm = make_fx(lambda x, r: ember.repeat_interleave(x, r, dim=0, output_size=3), tracing_mode="fake")(x, r)
    ref = ember.repeat_interleave(x, r, dim=0)
    assert np.array_equal(gm(x, r).numpy(), ref.numpy())
    # compiled: the data-dependent call graph-breaks and runs eagerly, still correct
    ember.dynamo.reset()
    cf = ember.compile(lambda x, r: ember.repeat_interleave(x, r, dim=0) * 2, backend="inductor")
    assert np.allclose(cf(x, r).numpy(), ref.numpy() * 2)


def test_repeat_interleave_gradcheck():
    assert gradcheck_fn(lambda m, x: m.repeat_interleave(x, m.tensor([2, 0, 3]), 0), [f64(3, 2)])
    assert gradcheck_fn(lambda m, x: m.repeat_interleave(x, 2, -1), [f64(3, 2)])


# ---------------------------------------------------------------------- unfold
def same_view(a, b):
    assert tuple(a.shape) == tuple(b.shape)
    if b.numel():
        # the stride of a size-1 dim is immaterial (torch.tensor keeps numpy's odd ones)
        big = [i for i, n in enumerate(b.shape) if n > 1]
        assert [a.stride()[i] for i in big] == [b.stride()[i] for i in big], (a.stride(), b.stride())
        assert a.storage_offset() == b.storage_offset()
        assert a.is_contiguous() == b.is_contiguous()
    assert (a._base is not None) == (b._base is not None)


@needs_torch
@SET
@given(shapes, st.data(), st.booleans(), st.booleans())
def test_unfold(shape, data, noncontig, sliced):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    n = shape[dim] - (1 if sliced and shape[dim] > 1 and dim % nd == 0 else 0)
    size = data.draw(st.integers(0, n))
    step = data.draw(st.integers(1, 3))
    arr = f64(*shape)

    def fn(m, x):
        if sliced and x.shape[0] > 1:
            x = x[1:]
        return x.unfold(dim, size, step)
    le, lt, e, t = both(arr, noncontig, True)
    oe, ot = fn(ember, e), fn(torch, t)
    assert_close(oe, ot)
    same_view(oe, ot)
    assert np.shares_memory(oe._data, le._data) or oe.numel() == 0
    c = np.random.standard_normal(tuple(ot.shape))
    (oe * ember.tensor(c)).sum().backward()
    (ot * torch.tensor(c)).sum().backward()
    assert_close(le.grad, lt.grad)           # overlapping windows add up


@needs_torch
def test_unfold_view_semantics_and_errors():
    x = ember.arange(10.0)
    w = x.unfold(0, 4, 3)
    assert w._base is x
    x[3] = 100.0                             # a write to the base shows in both windows holding it
    assert w[0, 3].item() == 100.0 and w[1, 0].item() == 100.0
    run_both(lambda m, x: x.unfold(0, 1, 1), [np.array(2.0)])
    run_both(lambda m, x: x.unfold(-1, 0, 2), [np.array(2.0)])
    same_error(lambda m: m.ones(3, 4).unfold(1, 5, 1))
    same_error(lambda m: m.ones(3, 4).unfold(1, -1, 1))
    same_error(lambda m: m.ones(3, 4).unfold(1, 2, 0))
    same_error(lambda m: m.ones(3, 4).unfold(2, 2, 1))
    same_error(lambda m: m.tensor(2.0).unfold(0, 2, 1))
    assert not hasattr(ember, "unfold") or not hasattr(torch, "unfold")


def test_unfold_gradcheck():
    assert gradcheck_fn(lambda m, x: x.unfold(1, 3, 1) * 1.0, [f64(2, 5)])


# ---------------------------------------------------------------------- glu / kron
@needs_torch
@SET
@given(shapes, st.data())
def test_glu(shape, data):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    shape = list(shape)
    shape[dim] *= 2
    run_both(lambda m, x: m.nn.functional.glu(x, dim), [f64(*shape)], noncontig=True)
    run_both(lambda m, x: m.nn.functional.glu(x.float(), dim), [f64(*shape)], grad=False)


@needs_torch
def test_glu_errors():
    same_error(lambda m: m.nn.functional.glu(m.tensor(1.0)))
    same_error(lambda m: m.nn.functional.glu(m.ones(3, 3)))
    same_error(lambda m: m.nn.functional.glu(m.ones(3, 4, dtype=m.int64)))
    x = ember.randn(2, 6)
    assert np.allclose(ember.glu(x).numpy(), ember.nn.functional.glu(x).numpy())


@needs_torch
@SET
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple),
       st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple))
def test_kron(sa, sb):
    run_both(lambda m, a, b: m.kron(a, b), [f64(*sa), f64(*sb)])
    # transposed inputs (PyTorch's own kron fails on some of them, so its side gets row-major
    # copies: .contiguous() keeps a transposed view with a size-1 dim as it is, odd strides and all)
    def kron(m, a, b):
        if m is ember:
            return a.kron(b)
        fmt = torch.contiguous_format
        return a.clone(memory_format=fmt).kron(b.clone(memory_format=fmt))
    run_both(kron, [f64(*sa), f64(*sb)], noncontig=True)


@needs_torch
def test_kron_dtypes():
    run_both(lambda m, a, b: m.kron(a, b), [rand_array((2, 3), "int32"), f64(2)])
    run_both(lambda m, a, b: m.kron(a, b), [rand_array((2, 3), "int64"), rand_array((0, 2), "int64")])
    assert gradcheck_fn(lambda m, a, b: m.kron(a, b), [f64(2, 3), f64(3, 2)])


# ---------------------------------------------------------------------- block_diag
@needs_torch
def test_block_diag():
    run_both(lambda m, a, b, c: m.block_diag(a, b, c), [f64(2, 3), f64(4), np.array(1.5)])
    run_both(lambda m, a, b: m.block_diag(a, b), [f64(0, 2), f64(2, 0)])
    run_both(lambda m, a: m.block_diag(a), [f64(3, 2)], noncontig=True)
    run_both(lambda m, a, b: m.block_diag(a, b), [rand_array((2, 2), "int32"), f64(1, 3)])
    run_both(lambda m, a, b: m.block_diag(a, b), [rand_array((2, 2), "bool"), rand_array((1,), "int64")])
    run_both(lambda m: m.block_diag(), [])
    same_error(lambda m: m.block_diag(m.ones(2, 2, 2)))
    same_error(lambda m: m.block_diag(m.ones(2), m.ones(1, 2, 2)))
    assert gradcheck_fn(lambda m, a, b: m.block_diag(a, b), [f64(2, 3), f64(3)])


# ---------------------------------------------------------------------- meshgrid / cartesian_prod
@needs_torch
@SET
@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.sampled_from(["ij", "xy"]), st.booleans())
def test_meshgrid(sizes, indexing, as_list):
    arrays = [f64(n) for n in sizes]

    def fn(m, *ts):
        return m.meshgrid(list(ts), indexing=indexing) if as_list else m.meshgrid(*ts, indexing=indexing)
    le = [ember.tensor(a) for a in arrays]
    lt = [torch.tensor(a) for a in arrays]
    oe, ot = fn(ember, *le), fn(torch, *lt)
    assert isinstance(oe, tuple) and len(oe) == len(ot)
    for a, b in zip(oe, ot):
        assert_close(a, b)
        same_view(a, b)
    run_both(fn, arrays)


@needs_torch
def test_meshgrid_warning_and_errors():
    a, b = ember.randn(3), ember.randn(2)
    with pytest.warns(UserWarning, match="indexing argument"):
        ga, gb = ember.meshgrid(a, b)
    assert tuple(ga.shape) == (3, 2)                      # 'ij'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.meshgrid(a, b, indexing="xy")
    run_both(lambda m, s, v: m.meshgrid(s, v, indexing="ij"), [np.array(2.0), f64(3)])
    same_error(lambda m: m.meshgrid(m.ones(3), m.ones(2).double(), indexing="ij"))
    same_error(lambda m: m.meshgrid(m.ones(3), m.ones(2), indexing="foo"))
    same_error(lambda m: m.meshgrid(indexing="ij"))
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor"):
        ember.meshgrid(ember.ones(3), ember.ones(2, 2), indexing="ij")


@needs_torch
def test_cartesian_prod():
    run_both(lambda m, a, b, c: m.cartesian_prod(a, b, c), [f64(3), f64(2), f64(4)])
    run_both(lambda m, a: m.cartesian_prod(a), [f64(3)])
    run_both(lambda m, a, b: m.cartesian_prod(a, b), [rand_array((3,), "int64"), rand_array((0,), "int64")])
    same_error(lambda m: m.cartesian_prod(m.ones(3, 2)))
    same_error(lambda m: m.cartesian_prod(m.ones(3), m.ones(2, dtype=m.int64)))
    assert gradcheck_fn(lambda m, a, b: m.cartesian_prod(a, b), [f64(3), f64(2)])


# ---------------------------------------------------------------------- combinations
@needs_torch
@SET
@given(st.integers(0, 6), st.integers(0, 4), st.booleans())
def test_combinations(n, r, repl):
    run_both(lambda m, x: m.combinations(x, r, repl), [f64(n)])
    run_both(lambda m, x: m.combinations(x, r=r, with_replacement=repl), [rand_array((n,), "int32")])


@needs_torch
def test_combinations_errors():
    same_error(lambda m: m.combinations(m.ones(3, 2)))
    same_error(lambda m: m.combinations(m.ones(3), -1))
    assert gradcheck_fn(lambda m, x: m.combinations(x, 2, True), [f64(4)])


# ---------------------------------------------------------------------- tril / triu indices
@needs_torch
@SET
@given(st.integers(0, 6), st.integers(0, 6), st.integers(-7, 7), st.sampled_from([None, "int32", "int64"]))
def test_tri_indices(row, col, offset, dt):
    for name in ("tril_indices", "triu_indices"):
        kw = {} if dt is None else {"dtype": getattr(ember, dt)}
        kt = {} if dt is None else {"dtype": getattr(torch, dt)}
        assert_close(getattr(ember, name)(row, col, offset, **kw), getattr(torch, name)(row, col, offset, **kt))


@needs_torch
def test_tri_indices_errors():
    same_error(lambda m: m.tril_indices(-1, 3))
    same_error(lambda m: m.triu_indices(3, -2))
    same_error(lambda m: m.tril_indices(3, 3, dtype=m.float32))


# ---------------------------------------------------------------------- cdist
@needs_torch
@SET
@given(st.sampled_from([2.0, 1.0, float("inf"), 0.0, 3.0, 0.5]), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 3), st.sampled_from([(), (2,), (3, 1)]), st.sampled_from([(), (1,), (2,)]))
def test_cdist(p, rows1, rows2, cols, b1, b2):
    grad = p != 0.0
    run_both(lambda m, a, b: m.cdist(a, b, p), [f64(*b1, rows1, cols), f64(*b2, rows2, cols)], grad=grad)


@needs_torch
def test_cdist_special():
    a = f64(3, 4)
    # identical rows: a zero distance, whose gradient is zero (not NaN)
    for p in (2.0, 1.0, float("inf"), 3.0):
        run_both(lambda m, x, y: m.cdist(x, y, p=p), [a, a.copy()])
    run_both(lambda m, x, y: m.cdist(x.float(), y.float()), [f64(30, 3), f64(40, 3)], grad=False)
    run_both(lambda m, x, y: m.cdist(x, y), [f64(0, 3), f64(4, 3)])
    run_both(lambda m, x, y: m.cdist(x, y), [f64(2, 0), f64(4, 0)], grad=False)
    run_both(lambda m, x, y: m.cdist(x, y), [f64(4, 3), f64(2, 3)], noncontig=True)
    same_error(lambda m: m.cdist(m.ones(3), m.ones(4, 3)))
    same_error(lambda m: m.cdist(m.ones(2, 3), m.ones(4, 4)))
    same_error(lambda m: m.cdist(m.ones(2, 3), m.ones(4, 3), p=-1))
    same_error(lambda m: m.cdist(m.ones(2, 3, dtype=m.int64), m.ones(4, 3, dtype=m.int64)))
    same_error(lambda m: m.cdist(m.ones(2, 3), m.ones(4, 3).double()))
    assert gradcheck_fn(lambda m, x, y: m.cdist(x, y), [f64(2, 3, 4), f64(2, 5, 4)])


# ---------------------------------------------------------------------- atleast_nd
@needs_torch
def test_atleast():
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)]:
            run_both(lambda m, x: getattr(m, name)(x), [f64(*shape)], strides=True)
        run_both(lambda m, x, y: getattr(m, name)(x, y), [f64(), f64(3)])
        run_both(lambda m, x, y: getattr(m, name)([x, y]), [f64(2, 3), f64()])
        x = ember.randn(*(2, 3, 4, 5)[:int(name[-2])])
        assert getattr(ember, name)(x) is x


@needs_torch
def test_tensor_methods_match_torch():
    for name in ("diff", "trace", "diag_embed", "rot90", "repeat_interleave", "kron", "unfold", "glu", "cdist",
                 "combinations", "block_diag", "meshgrid", "cartesian_prod", "tril_indices"):
        assert hasattr(ember.Tensor, name) == hasattr(torch.Tensor, name), name
    for name in ("diff", "trace", "diag_embed", "rot90", "repeat_interleave", "kron", "block_diag", "meshgrid",
                 "cartesian_prod", "combinations", "tril_indices", "triu_indices", "cdist", "atleast_1d"):
        assert hasattr(ember, name), name


# ---------------------------------------------------------------------- compiled
def test_compile_composites_match_eager():
    def f(x, y, v):
        a = ember.diff(x, 1, 0, append=y[:1])
        b = ember.rot90(x, 1, (0, 1))
        c = ember.diag_embed(v, 1)
        d = ember.kron(v, y[0])
        e = ember.repeat_interleave(x, 2, dim=-1)
        u = x.unfold(1, 2, 1)
        g = ember.nn.functional.glu(x, 1)
        h = ember.cdist(x, y)
        k = ember.block_diag(x, v)
        gx, gy = ember.meshgrid(v, y[0], indexing="xy")
        m = ember.cartesian_prod(v, v)
        t = ember.trace(x)
        cb = ember.combinations(v, 2)
        return (a.sum() + b.exp().sum() + c.sum() + d.sum() + e.sum() + (u * 2).sum() + g.sum() + h.sum()
                + k.sum() + (gx * gy).sum() + m.sum() + t + cb.prod(1).sum())
    ember.dynamo.reset()
    x, y, v = ember.randn(3, 4), ember.randn(5, 4), ember.randn(3)
    cf = ember.compile(f, backend="inductor")
    for _ in range(2):
        ref = f(x, y, v)
        out = cf(x, y, v)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
        x, y, v = ember.randn(3, 4), ember.randn(5, 4), ember.randn(3)
    # gradients through the compiled function
    xs = [t.clone().requires_grad_() for t in (x, y, v)]
    xr = [t.clone().requires_grad_() for t in (x, y, v)]
    ge = ember.autograd.grad(cf(*xs), xs)
    gr = ember.autograd.grad(f(*xr), xr)
    for a, b in zip(ge, gr):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)


@needs_torch
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_matmul_path_matches_torch(mode):
    """p=2 with more than 25 rows (or use_mm_for_euclid_dist) takes |a|^2 + |b|^2 - 2 a.b, one
    matmul, not a (P, R, M) difference tensor; values and gradients as torch's, including rows
    that coincide (distance 0: gradient 0, not NaN)."""
    g = np.random.default_rng(21)
    a, b = g.standard_normal((2, 30, 8)), g.standard_normal((2, 40, 8))
    b[:, 3] = a[:, 5]
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    de, dt = ember.cdist(ea, eb, compute_mode=mode), torch.cdist(ta, tb, compute_mode=mode)
    np.testing.assert_allclose(de.detach().numpy(), dt.detach().numpy(), rtol=1e-10, atol=1e-7)
    w = g.standard_normal(tuple(dt.shape))
    for x, y in zip(ember.autograd.grad(de, [ea, eb], ember.tensor(w)), torch.autograd.grad(dt, [ta, tb], torch.tensor(w))):
        assert np.isfinite(x.numpy()).all()
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-8, atol=1e-7)
