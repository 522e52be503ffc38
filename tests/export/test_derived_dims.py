"""Derived Dims (``2 * dx``, ``dx + 1``) in dynamic_shapes, as torch.export 2.13: names, ranges,
range_constraints, values on fresh sizes, and the call-time checks of the relation."""
import numpy as np
import pytest

import ember
from ember.export import Dim, export

torch = pytest.importorskip("torch")
from torch.export import Dim as TDim  # noqa: E402


def _models(lib):
    class Shift(lib.nn.Module):
        def forward(self, x, y):
            return x[1:] + y

    class Pairs(lib.nn.Module):
        def forward(self, x, y):
            return x.reshape(-1, 2).sum(1) + y
    return Shift(), Pairs()


_EXPRS = [lambda d: 2 * d, lambda d: d + 1, lambda d: d * 3 + 2, lambda d: (d + 1) * 2, lambda d: d - 1 + 3]


@pytest.mark.parametrize("k", range(len(_EXPRS)))
def test_derived_dim_name_and_range_as_torch(k):
    for args in ({}, {"max": 10}, {"min": 3, "max": 9}):
        mine, theirs = _EXPRS[k](Dim("dx", **args)), _EXPRS[k](TDim("dx", **args))
        assert repr(mine) == repr(theirs) and mine.__name__ == theirs.__name__
        assert mine.min == int(theirs.min)
        from ember.export.dynamic_shapes import int_oo
        assert ("int_oo" if mine.max == int_oo else mine.max) == \
            ("int_oo" if str(theirs.max) == "int_oo" else int(theirs.max))


def test_bad_derivations_raise_torchs_errors():
    dx, tdx = Dim("dx"), TDim("dx")
    for f in (lambda d: d * d, lambda d: d + d, lambda d: d * 2.5, lambda d: 3 - d, lambda d: (d - 1).min):
        with pytest.raises(Exception) as theirs:
            f(tdx)
        with pytest.raises(type(theirs.value), match=str(theirs.value).split("Dim(")[0][:40].replace("(", r"\(")):
            f(dx)


def _ranges(ep):
    return {str(k): repr(v) for k, v in ep.range_constraints.items()}


@pytest.mark.parametrize("which,spec,sizes", [
    (0, lambda D: ({0: D("dx", max=10) + 1}, {0: D("dx", max=10)}), [(7, 6), (3, 2), (11, 10)]),
    (1, lambda D: ({0: 2 * D("dx", max=10)}, {0: D("dx", max=10)}), [(12, 6), (4, 2), (20, 10)]),
])
def test_export_with_derived_dims_matches_torch(which, spec, sizes):
    rng = np.random.default_rng()
    m, tm = _models(ember)[which], _models(torch)[which]
    dx, tdx = Dim("dx", max=10), TDim("dx", max=10)
    ds = spec(lambda name, **kw: dx)
    tds = spec(lambda name, **kw: tdx)
    x0 = (5, 4) if which == 0 else (8, 4)
    ep = export(m, (ember.randn(x0[0]), ember.randn(x0[1])), dynamic_shapes={"x": ds[0], "y": ds[1]})
    tep = torch.export.export(tm, (torch.randn(x0[0]), torch.randn(x0[1])), dynamic_shapes={"x": tds[0], "y": tds[1]})
    # same expressions and ranges, up to the symbol's name
    theirs = {k.replace(str(next(iter(tep.range_constraints.keys() - {k for k in tep.range_constraints
                                                                          if not k.is_Symbol}))), "s"): v
              for k, v in _ranges(tep).items()}
    root = next(k for k in ep.range_constraints if k.is_Symbol)
    mine = {k.replace(str(root), "s"): v for k, v in _ranges(ep).items()}
    assert mine == theirs
    for nx, ny in sizes:
        x, y = rng.standard_normal(nx).astype(np.float32), rng.standard_normal(ny).astype(np.float32)
        got = ep.module()(ember.tensor(x), ember.tensor(y)).numpy()
        want = tep.module()(torch.tensor(x), torch.tensor(y)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_call_time_checks_of_the_relation():
    _, m = _models(ember)
    _, tm = _models(torch)
    dx, tdx = Dim("dx", max=10), TDim("dx", max=10)
    ep = export(m, (ember.randn(8), ember.randn(4)), dynamic_shapes={"x": {0: 2 * dx}, "y": {0: dx}})
    tep = torch.export.export(tm, (torch.randn(8), torch.randn(4)), dynamic_shapes={"x": {0: 2 * tdx}, "y": {0: tdx}})
    for nx, ny in ((12, 5), (24, 12)):
        with pytest.raises(AssertionError, match="Guard failed"):
            tep.module()(torch.randn(nx), torch.randn(ny))
        with pytest.raises(AssertionError, match="Guard failed"):
            ep.module()(ember.randn(nx), ember.randn(ny))
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] == 2\*y.size\(\)\[0\]"):
        ep.module()(ember.randn(12), ember.randn(5))


def test_example_inputs_must_agree_with_the_derivation():
    _, m = _models(ember)
    dx = Dim("dx", max=10)
    from ember.export import UserError
    with pytest.raises(UserError, match=r"Dim 'dx' is used for x.size\(\)\[0\] \(as 2\*dx\) \(size 4\) and y.size\(\)\[0\] \(size 5\)"):
        export(m, (ember.randn(8), ember.randn(5)), dynamic_shapes={"x": {0: 2 * dx}, "y": {0: dx}})
    with pytest.raises(UserError, match="to be 2\\*dx for an integer dx"):
        export(m, (ember.randn(7), ember.randn(4)), dynamic_shapes={"x": {0: 2 * dx}, "y": {0: dx}})


def test_root_used_only_through_derived_dims_is_refused_naming_it():
    _, m = _models(ember)
    with pytest.raises(NotImplementedError, match="derived Dim 2\\*dx .* root Dim 'dx'"):
        export(m, (ember.randn(8), ember.randn(4)), dynamic_shapes={"x": {0: 2 * Dim("dx")}, "y": None})
