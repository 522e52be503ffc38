"""dynamic_shapes=: Dim ranges, Dim.AUTO/DYNAMIC/STATIC, range_constraints, module() accepting
sizes in range and rejecting others, and "Constraints violated" errors as torch's."""
import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.nn as nn
from ember.export import ConstraintViolationError, Dim, UserError, ValueRange, export

from ._models import LinBN, randomize_bn


def _np(t):
    return np.asarray(t.detach().numpy())


class _Shared:
    ep = None


def _batch_ep():
    if _Shared.ep is None:
        b = Dim("batch", min=2, max=64)
        m = randomize_bn(LinBN()).eval()
        _Shared.ep = (m, export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)},
                                dynamic_shapes={"x": {0: b}, "y": {0: b}}))
    return _Shared.ep


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 64))
def test_any_batch_in_range_matches_eager(n):
    m, ep = _batch_ep()
    x, y = ember.randn(n, 4), ember.randn(n, 3)
    np.testing.assert_allclose(_np(ep.module()(x, y=y)["b"]), _np(m(x, y=y)["b"]), rtol=1e-5, atol=1e-5)


def test_range_constraints_and_printing():
    _, ep = _batch_ep()
    assert list(ep.range_constraints.values()) == [ValueRange(2, 64)]     # one symbol per Dim, as torch
    y_ph = next(n for n in ep.graph.nodes if n.name == "y")
    assert "VR[2, 64]" in str(ep)
    x_ph = next(n for n in ep.graph.nodes if n.name == "x")
    assert str(x_ph.meta["val"].shape[0]).startswith("s")
    assert str(y_ph.meta["val"].shape[0]) == str(x_ph.meta["val"].shape[0])


def test_out_of_range_and_inconsistent_sizes_rejected():
    _, ep = _batch_ep()
    mm = ep.module()
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] <= 64"):
        mm(ember.randn(100, 4), y=ember.randn(100, 3))
    with pytest.raises(AssertionError, match=r"x.size\(\)\[1\] == 4"):
        mm(ember.randn(5, 5), y=ember.randn(5, 3))
    with pytest.raises(AssertionError, match=r"y.size\(\)\[0\] == x.size\(\)\[0\]"):
        mm(ember.randn(6, 4), y=ember.randn(7, 3))


def test_train_mode_dynamic_batch_updates_stats():
    m = randomize_bn(LinBN()).train()
    ref = copy.deepcopy(m)
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)},
                dynamic_shapes=({0: Dim("b")}, {0: Dim("b")}))
    mm = ep.module()
    for n in (3, 17):
        x, y = ember.randn(n, 4), ember.randn(n, 3)
        np.testing.assert_allclose(_np(mm(x, y=y)["b"]), _np(ref(x, y=y)["b"]), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(mm.bn.running_var), _np(ref.bn.running_var), rtol=1e-5, atol=1e-6)


class _View(nn.Module):
    def forward(self, x):
        return x.view(5, -1)


class _Branch(nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x + 1
        return x - 1


def test_specialisation_of_a_dim_raises_naming_it():
    with pytest.raises(ConstraintViolationError, match=r"Constraints violated \(n\)!(.|\n)*specialized it to be "
                                                       r"a constant \(5\)(.|\n)*Suggested fixes:\n  n = 5"):
        export(_View(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim("n")}})
    with pytest.raises(ConstraintViolationError, match="specialized it to be a constant"):
        export(_View(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.DYNAMIC}})


def test_narrowed_range_raises_with_fix():
    with pytest.raises(ConstraintViolationError, match=r"Not all values of n = x.size\(\)\[0\] in the specified "
                                                       r"range(.|\n)*n = Dim\('n', min=5\)"):
        export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim("n")}})


def test_torch_raises_the_same_cases():
    torch = pytest.importorskip("torch")
    from torch.export import Dim as TDim, export as texport

    class TView(torch.nn.Module):
        def forward(self, x):
            return x.view(5, -1)

    class TBranch(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 4:
                return x + 1
            return x - 1
    for mod in (TView(), TBranch()):
        with pytest.raises(Exception, match=r"Constraints violated \(n\)"):
            texport(mod, (torch.randn(5, 4),), dynamic_shapes={"x": {0: TDim("n")}})
    # and AUTO narrows silently in both
    tep = texport(TBranch(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: TDim.AUTO}})
    ep = export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert [(v.lower) for v in ep.range_constraints.values()] == [int(v.lower) for v in tep.range_constraints.values()]


def test_auto_and_dynamic_accept_narrowing():
    for spec in (Dim.AUTO, Dim.DYNAMIC):
        ep = export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: spec}})
        assert list(ep.range_constraints.values()) == [ValueRange(5, ep.range_constraints[next(iter(
            ep.range_constraints))].upper)]
        mm = ep.module()
        x = ember.randn(9, 4)
        np.testing.assert_allclose(_np(mm(x)), _np(x) + 1, rtol=1e-6)
        with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] >= 5"):
            mm(ember.randn(3, 4))
    ep = export(_View(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})   # specialised silently
    assert ep.module()(ember.randn(5, 4)).shape == (5, 4)


def test_static_spec_and_tuple_form():
    ep = export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": (Dim.STATIC, None)})
    assert ep.range_constraints == {}
    with pytest.raises(AssertionError, match=r"x.size\(\)\[0\] == 5"):
        ep.module()(ember.randn(6, 4))


def test_distinct_dims_required_equal():
    class T(nn.Module):
        def forward(self, x, y):
            return x + y
    with pytest.raises(ConstraintViolationError, match=r"The values of b = y.size\(\)\[0\] and a = x.size\(\)\[0\] "
                                                       r"must always be equal"):
        export(T(), (ember.randn(5, 4), ember.randn(5, 4)), dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    ep = export(T(), (ember.randn(5, 4), ember.randn(5, 4)), dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("a")}})
    a = ember.randn(8, 4)
    np.testing.assert_allclose(_np(ep.module()(a, a)), _np(a) * 2, rtol=1e-6)


def test_spec_errors():
    with pytest.raises(UserError, match=r"top-level keys must be the arg names \['x'\]"):
        export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"z": {0: Dim.AUTO}})
    with pytest.raises(UserError, match="within the range"):
        export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: Dim("n", min=6)}})
    n = Dim("n")
    with pytest.raises(UserError, match="the same Dim declares equal sizes"):
        export(_Branch(), (ember.randn(5, 4),), dynamic_shapes={"x": {0: n, 1: n}})
    with pytest.raises(ValueError, match="inconsistent"):
        Dim("n", min=5, max=3)
    with pytest.raises(NotImplementedError, match="where a positive integer was expected"):
        Dim("n") * 2.5                      # derived dims are increasing integer-linear only (torch)
