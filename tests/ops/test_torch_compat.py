"""Legacy tensor types, sym_* helpers, nonzero_static, Tensor.prelu / resize / resize_as /
as_subclass and ember.resize_as_ against torch."""
import math
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng()

TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]


def tname(dt):
    return str(dt).replace("torch.", "")


@pytest.mark.parametrize("name", TYPES)
def test_legacy_constructors(name):
    T, E = getattr(torch, name), getattr(ember, name)
    data = [[1, 0, 3], [4, 5, 0]]
    t, e = T(data), E(data)
    assert tname(t.dtype) == e.dtype.name
    np.testing.assert_array_equal(np.asarray(e._data).astype(np.float64), t.to(torch.float64).numpy())
    for args in [(2, 3), (torch.Size([4]),), (), (0,)]:
        eargs = tuple(ember.Size(a) if isinstance(a, torch.Size) else a for a in args)
        t, e = T(*args), E(*eargs)
        assert tuple(t.shape) == tuple(e.shape) and tname(t.dtype) == e.dtype.name
    assert isinstance(E([1]), E) and isinstance(T([1]), T)
    other = "LongTensor" if name != "LongTensor" else "FloatTensor"
    assert not isinstance(E([1]), getattr(ember, other))
    assert not isinstance(1, E)
    assert E.dtype.name == tname(T.dtype)
    assert repr(E) == f"<class 'ember.{name}'>"


def test_legacy_type_alias_and_errors():
    x = ember.tensor([1.0, 2.0])
    y = ember.FloatTensor(x)
    assert y is not x
    y[0] = 7.0
    assert float(x[0]) == 7.0       # an alias of the memory, as torch
    assert isinstance(ember.tensor([1]), ember.LongTensor) == isinstance(torch.tensor([1]), torch.LongTensor)
    assert isinstance(ember.tensor([1]), ember.IntTensor) == isinstance(torch.tensor([1]), torch.IntTensor)
    np.testing.assert_array_equal(np.asarray(ember.IntTensor([1.7, -1.7])._data),
                                  torch.IntTensor([1.7, -1.7]).numpy())
    np.testing.assert_array_equal(np.asarray(ember.FloatTensor((2, 3))._data), torch.FloatTensor((2, 3)).numpy())
    for args, exc in [((ember.tensor([1.0]),), TypeError), (("a",), TypeError), ((2, "a"), TypeError),
                      ((-1,), RuntimeError), ((2.5,), TypeError)]:
        targs = tuple(torch.tensor([1.0]) if isinstance(a, ember.Tensor) else a for a in args)
        with pytest.raises(exc):
            (torch.DoubleTensor if isinstance(args[0], ember.Tensor) else torch.FloatTensor)(*targs)
        with pytest.raises(exc):
            (ember.DoubleTensor if isinstance(args[0], ember.Tensor) else ember.FloatTensor)(*args)
    with pytest.raises(TypeError):
        torch.FloatTensor([1, 2], dtype=torch.float64)
    with pytest.raises(TypeError):
        ember.FloatTensor([1, 2], dtype=ember.float64)
    assert ember.FloatTensor(device="cpu").shape == (0,)
    # Tensor.type with a legacy type class converts, as torch
    assert ember.tensor([1.5]).type(ember.IntTensor).dtype is ember.int32
    assert torch.tensor([1.5]).type(torch.IntTensor).dtype is torch.int32
    assert ember.tensor([1.5]).type() == "ember.FloatTensor"


@settings(max_examples=40, deadline=None)
@given(a=st.integers(-50, 50) | st.floats(-50, 50), b=st.integers(-50, 50) | st.floats(-50, 50))
def test_sym_numeric(a, b):
    for fn in ("sym_max", "sym_min"):
        r, e = getattr(torch, fn)(a, b), getattr(ember, fn)(a, b)
        assert r == e and type(r) is type(e)
    for fn in ("sym_float", "sym_int"):
        r, e = getattr(torch, fn)(a), getattr(ember, fn)(a)
        assert r == e and type(r) is type(e)
    assert ember.sym_sum([a, b, 3]) == torch.sym_sum([a, b, 3])
    assert ember.sym_not(a) == torch.sym_not(a)
    if a >= 0:
        assert ember.sym_sqrt(a) == torch.sym_sqrt(a)
    assert ember.sym_ite(a > b, 1, 2) == torch.sym_ite(a > b, 1, 2)


def test_sym_errors():
    for fn in (lambda m: m.sym_max("a", 2), lambda m: m.sym_ite(1, 2, 3), lambda m: m.sym_ite(True, 1, 2.0),
               lambda m: m.sym_min(m.tensor(1), 2)):
        with pytest.raises(AssertionError):
            fn(torch)
        with pytest.raises(AssertionError):
            fn(ember)
    with pytest.raises(ValueError):
        ember.sym_sqrt(-1)
    with pytest.raises(ValueError):
        ember.sym_int(float("nan"))
    assert ember.sym_max(True, 2) == torch.sym_max(True, 2)


def test_sym_with_symbolic_sizes():
    from ember.fx.experimental.symbolic_shapes import ShapeEnv, SymInt
    env = ShapeEnv()
    s = env.create_symbol(5, source="x.size(0)")
    assert isinstance(s, SymInt)
    m = ember.sym_max(s, 3)
    assert isinstance(m, SymInt) and m.hint() == 5
    assert ember.sym_min(s, 3).hint() == 3
    assert ember.sym_int(s) is s
    assert ember.sym_float(s) == 5.0
    assert ember.sym_sum([s, s, 1]).hint() == 11
    assert ember.sym_ite(s > 2, "a", "b") == "a"
    assert bool(ember.sym_not(s > 7))
    assert ember.sym_sqrt(s) == math.sqrt(5)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3), size=st.integers(0, 12),
       fill=st.integers(-3, 3), density=st.floats(0, 1))
def test_nonzero_static(shape, size, fill, density):
    a = RNG.standard_normal(shape) * (RNG.random(shape) < density)
    t = torch.nonzero_static(torch.tensor(a), size=size, fill_value=fill)
    e = ember.nonzero_static(ember.tensor(a), size=size, fill_value=fill)
    assert tuple(t.shape) == tuple(e.shape) and e.dtype is ember.int64
    np.testing.assert_array_equal(np.asarray(e._data), t.numpy())
    e2 = ember.tensor(a).nonzero_static(size=size)
    np.testing.assert_array_equal(np.asarray(e2._data), torch.tensor(a).nonzero_static(size=size).numpy())


def test_nonzero_static_errors():
    x = ember.tensor([1.0, 0.0])
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.nonzero_static(x, size=-1)
    with pytest.raises(TypeError, match="'size' must be int"):
        ember.nonzero_static(x, size=2.0)
    with pytest.raises(TypeError, match="'fill_value' must be int"):
        ember.nonzero_static(x, size=2, fill_value=1.5)
    with pytest.raises(TypeError):
        ember.nonzero_static(x)


def test_prelu_method():
    x, w = RNG.standard_normal((2, 3, 4)), RNG.random(3)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    to, eo = tx.prelu(tw), ex.prelu(ew)
    np.testing.assert_allclose(np.asarray(eo.detach()._data), to.detach().numpy())
    g = RNG.standard_normal((2, 3, 4))
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    np.testing.assert_allclose(np.asarray(ex.grad._data), tx.grad.numpy())
    np.testing.assert_allclose(np.asarray(ew.grad._data), tw.grad.numpy())


def test_resize_deprecated_and_resize_as():
    x = RNG.standard_normal((2, 6))
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        to = tx.resize(3, 4)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        eo = ex.resize(3, 4)
    np.testing.assert_array_equal(np.asarray(eo.detach()._data), to.detach().numpy())
    g = RNG.standard_normal((3, 4))
    to.backward(torch.tensor(g))
    eo.backward(ember.tensor(g))
    np.testing.assert_array_equal(np.asarray(ex.grad._data), tx.grad.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="autograd's resize can only change the shape"):
            tx.resize(5)
        with pytest.raises(RuntimeError, match="autograd's resize can only change the shape"):
            ex.resize(5)
        with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
            r = ex.resize_as(ember.zeros(12))
        assert tuple(r.shape) == (12,)
    # in place: torch.resize_as_ on contiguous tensors (shrink keeps the leading elements, grow keeps them)
    for n in (3, 12):
        t = torch.tensor(x.copy())
        e = ember.tensor(x.copy())
        tr = torch.resize_as_(t, torch.zeros(n))
        er = ember.resize_as_(e, ember.zeros(n))
        assert er is e and tuple(er.shape) == tuple(tr.shape)
        np.testing.assert_array_equal(np.asarray(er._data)[:min(n, 12)], tr.numpy()[:min(n, 12)])
    e = ember.tensor(x.copy())
    e.resize_(4, 3)
    np.testing.assert_array_equal(np.asarray(e._data), x.reshape(4, 3))
    with pytest.raises(RuntimeError, match="non-contiguous"):
        ember.tensor(x.copy()).t().resize_(3)
    with pytest.raises(TypeError):
        ember.resize_as_(ember.zeros(2), [1, 2])


def test_as_subclass():
    class TT(torch.Tensor):
        pass

    class ET(ember.Tensor):
        pass

    x = RNG.standard_normal(3)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    ts, es = tx.as_subclass(TT), ex.as_subclass(ET)
    assert type(es) is ET and isinstance(es, ember.Tensor)
    assert es.requires_grad == ts.requires_grad
    (es * 2).sum().backward()
    (ts * 2).sum().backward()
    np.testing.assert_array_equal(np.asarray(ex.grad._data), tx.grad.numpy())
    plain = ember.tensor(x.copy())
    sub = plain.as_subclass(ET)
    sub[0] = 42.0
    assert float(plain[0]) == 42.0        # same memory
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        torch.tensor(x).as_subclass(int)
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        ember.tensor(x).as_subclass(int)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 30), D=st.integers(1, 3), lead=st.booleans(), data=st.data())
def test_histogramdd(n, D, lead, data):
    shape = ((2, n) if lead else (n,)) + (D,)
    x = RNG.standard_normal(shape)
    kind = data.draw(st.sampled_from(["int", "ints", "tensors"]))
    if kind == "int":
        bins_t = bins_e = data.draw(st.integers(1, 5))
    elif kind == "ints":
        bins_t = bins_e = data.draw(st.lists(st.integers(1, 5), min_size=D, max_size=D))
    else:
        ed = [np.sort(RNG.standard_normal(data.draw(st.integers(2, 5)))) for _ in range(D)]
        bins_t, bins_e = [torch.tensor(e) for e in ed], [ember.tensor(e) for e in ed]
    rng_ = None
    if kind != "tensors" and data.draw(st.booleans()):
        rng_ = []
        for _ in range(D):
            lo = float(RNG.uniform(-2, 0))
            rng_ += [lo, lo + float(RNG.uniform(0.5, 3))]
    w = RNG.random(shape[:-1]) if data.draw(st.booleans()) else None
    density = data.draw(st.booleans())
    kw_t = dict(range=rng_, weight=None if w is None else torch.tensor(w), density=density)
    kw_e = dict(range=rng_, weight=None if w is None else ember.tensor(w), density=density)
    t = torch.histogramdd(torch.tensor(x), bins_t, **kw_t)
    e = ember.histogramdd(ember.tensor(x), bins_e, **kw_e)
    np.testing.assert_allclose(np.asarray(e.hist._data), t.hist.numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)
    assert len(e.bin_edges) == len(t.bin_edges)
    for a, b in zip(e.bin_edges, t.bin_edges):
        np.testing.assert_array_equal(np.asarray(a._data), b.numpy())
    h, edges = e
    assert h is e.hist


def test_histogramdd_errors():
    x = RNG.standard_normal((10, 2))
    cases = [(lambda m, x: m.histogramdd(x, bins=[3]), RuntimeError),
             (lambda m, x: m.histogramdd(x.to(m.int64), bins=3), NotImplementedError),
             (lambda m, x: m.histogramdd(x, bins=3, weight=m.ones(10, 1, dtype=m.float64)), RuntimeError),
             (lambda m, x: m.histogramdd(x[:, 0], bins=3), RuntimeError),
             (lambda m, x: m.histogramdd(x, bins=3, range=[0., 1.]), RuntimeError),
             (lambda m, x: m.histogramdd(x, bins=3, range=[1., 0., 0., 1.]), RuntimeError)]
    for fn, exc in cases:
        with pytest.raises(exc) as te:
            fn(torch, torch.tensor(x))
        with pytest.raises(exc) as ee:
            fn(ember, ember.tensor(x))
        assert str(te.value).split(":")[0].strip() in str(ee.value) or exc is NotImplementedError


def test_legacy_isinstance_under_compile():
    """dynamo asks the metaclass (the dtype test), not the Python type, and guards on dtype."""
    def f(x):
        if isinstance(x, ember.FloatTensor):
            return x * 2 + ember.sym_max(x.shape[0], 3)
        return x - 1
    cf = ember.compile(f, backend="eager")
    for dt in (ember.float32, ember.float64, ember.float32):
        x = ember.tensor(RNG.standard_normal(2), dtype=dt)
        np.testing.assert_array_equal(np.asarray(cf(x)._data), np.asarray(f(x)._data))
