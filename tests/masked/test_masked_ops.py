"""ember.masked's functions against torch.masked: values, dtypes, shapes, fully masked-out
slices, mask broadcasting, dim None/int/tuple, keepdim, dtype=, gradients, errors."""
import math
import warnings

import numpy as np
import pytest

import ember
from ember import masked as EM

from oracle import assert_close, assert_same_error

torch = pytest.importorskip("torch")

TDT = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
       "int16": torch.int16, "bool": torch.bool}
EDT = {"float32": ember.float32, "float64": ember.float64, "int32": ember.int32, "int64": ember.int64,
       "int16": ember.int16, "bool": ember.bool}


def _data(rng, shape, dt):
    if dt.startswith("float"):
        return rng.standard_normal(shape).astype(dt)
    if dt == "bool":
        return rng.random(shape) > 0.5
    return rng.integers(-4, 5, shape).astype(dt)


def _mask(rng, shape, full_row=True):
    """A random mask with a fully masked-out slice along every dim's first index."""
    m = rng.random(shape) > 0.4
    if full_row and len(shape) >= 2:
        m[0] = False              # a fully masked-out slice of dim 1.. reductions
        m[:, -1] = False
    return m


def _pair(arr, requires_grad=False):
    e = ember.tensor(arr.copy())
    t = torch.from_numpy(arr.copy())
    if requires_grad:
        e.requires_grad_(True)
        t.requires_grad_(True)
    return e, t


def _run(name, x, m, args=(), kwargs=None, *, grad=False, seed=0):
    """Call masked.<name> on ember and torch; compare value and (optionally) input gradient."""
    kwargs = kwargs or {}
    ex, tx = _pair(x, grad)
    em, tm = _pair(m)
    ekw = {k: (EDT[v] if k == "dtype" and v else v) for k, v in kwargs.items()}
    tkw = {k: (TDT[v] if k == "dtype" and v else v) for k, v in kwargs.items()}
    eo = getattr(EM, name)(ex, *args, mask=em, **ekw)
    to = getattr(torch.masked, name)(tx, *args, mask=tm, **tkw)
    assert_close(eo, to, msg=f"{name}{args}{kwargs}")
    if grad:
        g = np.random.default_rng(seed).standard_normal(tuple(to.shape)).astype(x.dtype)
        eo.backward(ember.tensor(g))
        to.backward(torch.from_numpy(g))
        assert_close(ex.grad, tx.grad, msg=f"grad of {name}{args}{kwargs}")
    return eo, to


REDUCTIONS = ["sum", "prod", "amax", "amin", "mean", "logsumexp", "norm", "var", "std"]
DIMS = [None, 0, 1, -1, (0, 2), (2, 0, 1)]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_reductions_float(name, dt):
    rng = np.random.default_rng(abs(hash((name, dt))) % 2**32)
    for trial in range(3):
        shape = (3, 4, 2)
        x, m = _data(rng, shape, dt), _mask(rng, shape)
        for dim in DIMS:
            for keepdim in (False, True):
                args = (2.0, dim) if name == "norm" else (dim,)
                grad = dt == "float64" and name not in ("amax", "amin") and trial == 0
                _run(name, x, m, args, {"keepdim": keepdim}, grad=grad)


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dt", ["int32", "int64", "int16", "bool"])
def test_reductions_int(name, dt):
    rng = np.random.default_rng(7)
    x, m = _data(rng, (3, 5), dt), _mask(rng, (3, 5))
    for dim in (None, 0, 1, (0, 1)):
        if dt == "bool" and name in ("amax", "amin"):
            assert_same_error(lambda: EM.amax(ember.tensor(x), dim, mask=ember.tensor(m)),
                              lambda: torch.masked.amax(torch.from_numpy(x), dim, mask=torch.from_numpy(m)))
            continue
        _run(name, x, m, (dim,))


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "mean", "logsumexp"])
def test_dtype_argument(name):
    rng = np.random.default_rng(3)
    x, m = _data(rng, (4, 3), "float32"), _mask(rng, (4, 3))
    _run(name, x, m, (1,), {"dtype": "float64"})


def test_fully_masked_identities():
    """Fully masked-out slices give the reduction's identity (nan where it has none)."""
    x = np.arange(6, dtype="float64").reshape(2, 3) + 1
    m = np.array([[False] * 3, [True, False, True]])
    expect = {"sum": 0.0, "prod": 1.0, "amax": -math.inf, "amin": math.inf, "mean": math.nan,
              "logsumexp": -math.inf, "var": math.nan, "std": math.nan, "median": math.nan}
    for name, val in expect.items():
        eo, to = _run(name, x, m, (1,))
        got = float(eo[0].item())
        assert (math.isnan(got) and math.isnan(val)) or got == val, (name, got)
    eo, _ = _run("norm", x, m, (-math.inf, 1))
    assert float(eo[0].item()) == math.inf


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(name):
    rng = np.random.default_rng(11)
    for dt in ("float32", "float64", "int64"):
        x, m = _data(rng, (4, 5), dt), _mask(rng, (4, 5), full_row=False)
        for dim in (None, 0, 1):
            for keepdim in (False, True):
                _run(name, x, m, (dim,), {"keepdim": keepdim})
        _run(name, x, m, (1,), {"dtype": "int64"})


def test_median():
    rng = np.random.default_rng(5)
    for dt in ("float32", "float64"):
        x, m = _data(rng, (4, 6), dt), _mask(rng, (4, 6))
        for dim in (0, 1, -1):
            _run("median", x, m, (dim,), {"keepdim": dim == 0})
    x, m = _data(rng, (3, 4), "int64"), np.ones((3, 4), bool)
    m[1, 2] = False
    _run("median", x, m, (1,))
    m[0] = False            # a fully masked-out row of an integer input: torch's ValueError
    assert_same_error(lambda: EM.median(ember.tensor(x), 1, mask=ember.tensor(m)),
                      lambda: torch.masked.median(torch.from_numpy(x), 1, mask=torch.from_numpy(m)))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative(name):
    rng = np.random.default_rng(13)
    for dt in ("float32", "float64", "int32"):
        x, m = _data(rng, (3, 5), dt), _mask(rng, (3, 5))
        for dim in (0, 1, -1):
            _run(name, x, m, (dim,), grad=dt == "float64")
        _run(name, x, m, (1,), {"dtype": "float64" if dt != "int32" else "int64"})


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_normalizations(name):
    rng = np.random.default_rng(17)
    for dt in ("float32", "float64"):
        x, m = _data(rng, (4, 5), dt), _mask(rng, (4, 5), full_row=False)
        m[:, 0] = True       # no fully masked-out slice: those give nan (checked below)
        for dim in (0, 1, -1):
            _run(name, x, m, (dim,), grad=dt == "float64")
        _run(name, x, m, (1,), {"dtype": "float64"})
    x, m = _data(rng, (3, 4), "float64"), _mask(rng, (3, 4))
    _run(name, x, m, (1,))          # with fully masked-out rows (nan rows, as torch)


def test_normalize():
    rng = np.random.default_rng(19)
    for ord in (1.0, 2.0, 3.0, math.inf):
        x, m = _data(rng, (4, 5), "float64"), _mask(rng, (4, 5), full_row=False)
        m[:, 1] = True
        for dim in (0, 1):
            _run("normalize", x, m, (ord, dim), grad=True)
    _run("normalize", x, m, (2.0, 1), {"eps": 0.5})


def test_norm_orders():
    rng = np.random.default_rng(23)
    x, m = _data(rng, (4, 5), "float64"), _mask(rng, (4, 5), full_row=False)
    m[:, 2] = True
    for ord in (0.0, 1.0, 2.0, 3.5, math.inf, -math.inf):
        for dim in (None, 0, (0, 1)):
            _run("norm", x, m, (ord, dim), grad=ord not in (0.0, math.inf, -math.inf))


def test_var_std_correction():
    rng = np.random.default_rng(29)
    x, m = _data(rng, (4, 6), "float64"), _mask(rng, (4, 6))
    for name in ("var", "std"):
        for kw in ({"unbiased": False}, {"unbiased": True}, {"correction": 0}, {"correction": 2}):
            args = (1, kw.pop("unbiased")) if "unbiased" in kw else (1,)
            _run(name, x, m, args, dict(kw, keepdim=True), grad=True)
    xi = _data(rng, (4, 6), "int64")
    _run("var", xi, m, (1,))         # integer input: computed in float32, as torch


def test_logaddexp():
    rng = np.random.default_rng(31)
    for dt in ("float32", "float64"):
        a, b = _data(rng, (3, 4), dt), _data(rng, (3, 4), dt)
        ma, mb = _mask(rng, (3, 4)), _mask(rng, (3, 4))
        ea, ta = _pair(a, True)
        eb, tb = _pair(b, True)
        eo = EM.logaddexp(ea, eb, input_mask=ember.tensor(ma), other_mask=ember.tensor(mb))
        to = torch.masked.logaddexp(ta, tb, input_mask=torch.from_numpy(ma), other_mask=torch.from_numpy(mb))
        assert_close(eo, to)
        if dt == "float64":
            # both sides masked out: -inf + -inf, whose gradient is nan in both; weight those 0
            g = rng.standard_normal((3, 4)) * (ma | mb)
            (eo * ember.tensor(g)).nan_to_num().sum().backward()
            (to * torch.from_numpy(g)).nan_to_num().sum().backward()
            assert_close(ea.grad, ta.grad)
            assert_close(eb.grad, tb.grad)
        eo2 = EM.logaddexp(ea, eb, input_mask=ember.tensor(ma | mb), other_mask=ember.tensor(mb))
        to2 = torch.masked.logaddexp(ta, tb, input_mask=torch.from_numpy(ma | mb), other_mask=torch.from_numpy(mb))
        assert_close(eo2, to2)


def test_mask_broadcasting_and_non_bool_mask():
    rng = np.random.default_rng(37)
    x = _data(rng, (3, 4), "float64")
    for m in (rng.random(4) > 0.5, rng.random((1, 4)) > 0.5, rng.random((3, 1)) > 0.3):
        for name in ("sum", "mean", "amax", "softmax"):
            args = (1,) if name == "softmax" else (0,)
            _run(name, x, m, args, grad=name != "amax")
    mi = (rng.random((3, 4)) > 0.5).astype("int64")      # converted to bool, as torch
    _run("sum", x, mi, (1,))
    _run("mean", x, mi.astype("float32"), (0,))


def test_mask_none_and_zero_dim():
    rng = np.random.default_rng(41)
    x = _data(rng, (3, 4), "float64")
    ex, tx = _pair(x)
    for name in ("sum", "mean", "amax", "var", "logsumexp"):
        assert_close(getattr(EM, name)(ex, 1), getattr(torch.masked, name)(tx, 1))
    s = np.array(2.5)
    for mval in (True, False):
        for name in ("sum", "amax", "mean", "prod"):
            _run(name, s, np.array(mval), ())


def test_errors_match_torch():
    x, m = np.ones((2, 3)), np.ones((2, 3), bool)
    ex, tx = _pair(x)
    em, tm = _pair(m)
    cases = [
        ("sum", (ex, 2), (tx, 2), {}),
        ("sum", (ex, (0, 0)), (tx, (0, 0)), {}),
        ("amax", (ex, -3), (tx, -3), {}),
        ("sum", (ex, 0), (tx, 0), {"mask": "3d"}),
        ("mean", (ember.tensor([1, 2]), 0), (torch.tensor([1, 2]), 0), {"mask": "1d"}),
    ]
    for name, eargs, targs, kw in cases:
        emk = {"3d": ember.ones((1, 2, 3), dtype=ember.bool), "1d": ember.ones(2, dtype=ember.bool)}.get(
            kw.get("mask"), em)
        tmk = {"3d": torch.ones((1, 2, 3), dtype=torch.bool), "1d": torch.ones(2, dtype=torch.bool)}.get(
            kw.get("mask"), tm)
        assert_same_error(lambda: getattr(EM, name)(*eargs, mask=emk),
                          lambda: getattr(torch.masked, name)(*targs, mask=tmk))


def test_sparse_input_refused():
    s = ember.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    with pytest.raises(NotImplementedError, match=r"ember.masked.sum: a sparse input \(layout"):
        EM.sum(s, 0, mask=ember.ones((2, 2), dtype=ember.bool))
    with pytest.raises(NotImplementedError, match="sparse mask"):
        EM.softmax(ember.ones(2, 2), 0, mask=ember.ones((2, 2), dtype=ember.bool).to_sparse())
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        EM.sum([1.0, 2.0], mask=None)


def test_gradcheck_float64():
    """Finite differences of the masked functions in float64 (masked-out elements get 0)."""
    rng = np.random.default_rng(43)
    x = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    m = ember.tensor(rng.random((3, 4)) > 0.3)
    m[:, 0] = True
    fns = [lambda t: EM.sum(t * t, 1, mask=m), lambda t: EM.mean(t.sin(), 0, mask=m),
           lambda t: EM.softmax(t, 1, mask=m), lambda t: EM.log_softmax(t, 1, mask=m).masked_fill(~m, 0.0),
           lambda t: EM.var(t, 1, mask=m), lambda t: EM.logsumexp(t, 1, mask=m),
           lambda t: EM.normalize(t, 2.0, 1, mask=m), lambda t: EM.cumprod(t, 1, mask=m)]
    for fn in fns:
        assert ember.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-5)
