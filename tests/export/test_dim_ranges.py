"""Dim / Dim.AUTO / Dim.DYNAMIC ranges as torch.export 2.13 prints them: a named Dim's own
``[min, max]`` (min 0 by default), a hint's bounds clamped to >= 2, narrowing by the program,
the spelling of Dims and hints, and draft_export's relaxed Dims keeping their max."""
import numpy as np
import pytest

import ember
from ember.export import ConstraintViolationError, Dim, export

torch = pytest.importorskip("torch")
from torch.export import Dim as TDim  # noqa: E402


def _models(lib):
    class Plain(lib.nn.Module):
        def forward(self, x):
            return x * 2

    class Branch(lib.nn.Module):
        def forward(self, x):
            if x.shape[0] > 4:
                return x + 1
            return x - 1
    return Plain(), Branch()


# (ember spec, torch spec) built the same way
_SPECS = [
    lambda D: D("b"), lambda D: D("b", min=3), lambda D: D("b", max=10), lambda D: D("b", min=1, max=10),
    lambda D: D("b", min=2), lambda D: D.AUTO, lambda D: D.DYNAMIC, lambda D: D.AUTO(min=0, max=10),
    lambda D: D.AUTO(min=1), lambda D: D.DYNAMIC(max=10), lambda D: D.AUTO(min=8), lambda D: D.DYNAMIC(min=0),
]


def _ranges(ep):
    return [(int(v.lower), "int_oo" if "int_oo" in repr(v) else int(v.upper)) for v in ep.range_constraints.values()]


def _outcome(lib, export_fn, D, spec_fn, which):
    m = _models(lib)[which]
    try:
        ep = export_fn(m, (lib.randn(6, 4),), dynamic_shapes={"x": {0: spec_fn(D)}})
    except Exception as e:  # noqa: BLE001 - compared with torch's outcome
        lines = [ln for ln in str(e).split("\n") if ln.strip().startswith(("b = Dim", "- Not all"))]
        return ("error", [ln.replace("L['x']", "x").strip() for ln in lines])
    return ("ok", _ranges(ep), [repr(v) for v in ep.range_constraints.values()])


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("k", range(len(_SPECS)))
def test_range_constraints_match_torch(k, which):
    mine = _outcome(ember, export, Dim, _SPECS[k], which)
    theirs = _outcome(torch, torch.export.export, TDim, _SPECS[k], which)
    assert mine == theirs


@pytest.mark.parametrize("k", range(len(_SPECS)))
def test_spelling_matches_torch(k):
    assert repr(_SPECS[k](Dim)) == repr(_SPECS[k](TDim))
    assert str(_SPECS[k](Dim)) == str(_SPECS[k](TDim))


def test_dim_attributes_and_bad_bounds_as_torch():
    for args in ({}, {"min": 3}, {"max": 10}):
        d, td = Dim("b", **args), TDim("b", **args)
        from ember.export.dynamic_shapes import int_oo
        assert (d.min, "int_oo" if d.max == int_oo else d.max) == \
            (int(td.min), "int_oo" if str(td.max) == "int_oo" else int(td.max))
    with pytest.raises(ValueError, match=r"Cannot create Dim with inconsistent min=3, max=3"):
        Dim("b", min=3, max=3)
    with pytest.raises(TypeError, match="is not callable"):
        Dim.AUTO(min=1)(max=3)
    with pytest.raises(AssertionError, match="min must be <= max"):
        Dim.DYNAMIC(min=5, max=3)
    assert Dim.AUTO(max=3) == Dim.AUTO(max=3) and Dim.AUTO != Dim.DYNAMIC


def test_unbounded_named_dim_accepts_sizes_zero_and_one_like_torch():
    rng = np.random.default_rng()
    plain, _ = _models(ember)
    tplain, _ = _models(torch)
    ep = export(plain, (ember.randn(6, 4),), dynamic_shapes={"x": {0: Dim("b")}})
    tep = torch.export.export(tplain, (torch.randn(6, 4),), dynamic_shapes={"x": {0: TDim("b")}})
    for n in (0, 1, 9):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        got = ep.module()(ember.tensor(x)).numpy()
        want = tep.module()(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want)
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] <= 10"):
        export(plain, (ember.randn(6, 4),), dynamic_shapes={"x": {0: Dim.AUTO(max=10)}}).module()(ember.randn(11, 4))


def test_bounded_hint_outside_the_example_is_kept_as_torch():
    """torch clamps the range to a hint's min even past the example (no error at export)."""
    plain, _ = _models(ember)
    ep = export(plain, (ember.randn(6, 4),), dynamic_shapes={"x": {0: Dim.AUTO(min=8)}})
    assert _ranges(ep) == [(8, "int_oo")]
    with pytest.raises(AssertionError, match=r">= 8"):
        ep.module()(ember.randn(6, 4))


@pytest.mark.parametrize("spec", [lambda D: D("b", max=10), lambda D: D("b", min=3, max=10),
                                  lambda D: D.DYNAMIC(max=10)])
def test_draft_export_relaxes_a_dim_keeping_its_max(spec):
    import warnings
    _, branch = _models(ember)
    _, tbranch = _models(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = ember.export.draft_export(branch, (ember.randn(6, 4),), dynamic_shapes={"x": {0: spec(Dim)}})
        tep = torch.export.draft_export(tbranch, (torch.randn(6, 4),), dynamic_shapes={"x": {0: spec(TDim)}})
    assert _ranges(ep) == _ranges(tep) == [(5, 10)]
    with pytest.raises(AssertionError, match=r"<= 10"):
        ep.module()(ember.randn(11, 4))


def test_narrowing_a_named_dim_still_raises():
    _, branch = _models(ember)
    with pytest.raises(ConstraintViolationError, match=r"b = Dim\('b', min=5, max=10\)"):
        export(branch, (ember.randn(6, 4),), dynamic_shapes={"x": {0: Dim("b", max=10)}})
