"""draft_export: exports data-dependent code by specializing to the observed values, with runtime
asserts and a report (failure kinds and user locations) as torch's draft mode; sound exports
report success; a narrowed Dim is recorded and exported as Dim.AUTO."""
import copy
import io
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, draft_export, load, save
from ember.export.draft_export import FailureType, _assert_value


def _np(t):
    return np.asarray(t.detach().numpy())


def _branchy(nn_):
    class Branchy(nn_.Module):
        def __init__(self):
            super().__init__()
            self.l = nn_.Linear(2, 2)
            self.bn = nn_.BatchNorm1d(2)

        def forward(self, x, y):
            n = x.sum().item()
            if n > 0:
                return self.bn(self.l(y)) * 2
            return y - 1
    return Branchy()


def _draft(*a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return draft_export(*a, **k)


def test_data_dependent_branch_specialized_with_asserts():
    m = _branchy(nn)
    ref = copy.deepcopy(m)
    x = ember.tensor([1.0, 2.0, 0.5])
    ep = _draft(m, (x, ember.randn(4, 2)))
    assert int(m.bn.num_batches_tracked.item()) == 0       # the trace ran on copies of the state
    rep = ep._report
    assert not rep.successful() and len(rep.failures) == 1
    f = rep.failures[0]
    assert f.failure_type == FailureType.DATA_DEPENDENT_ERROR
    assert f.data["user_stack"][0].startswith(f"File {__file__}") and "n = x.sum().item()" in f.data["user_stack"][1]
    assert f.data["specialized"] == [(f"test_draft_export.py:{f.data['user_stack'][0].split('lineno ')[1].split(',')[0]}",
                                      3.5)]
    text = str(rep)
    assert "1 issue(s) found during export" in text and "1. Data dependent error." in text
    mm = ep.module()
    for _ in range(3):
        y = ember.randn(4, 2)
        xp = x[ember.randperm(3)]          # same sum, other order: the recorded branch holds
        np.testing.assert_allclose(_np(mm(xp, y)), _np(ref(xp, y)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(mm.bn.running_mean), _np(ref.bn.running_mean), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        mm(-x, ember.randn(4, 2))           # the other branch: refused, not silently wrong
    # every value has its layout recorded, as export's nodes do; the asserts survive save/load
    assert all("val" in n.meta for n in ep.graph.nodes if n.op == "call_function"
               and n.target is not _assert_value)
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        load(buf).module()(-x, ember.randn(4, 2))


def test_report_kinds_match_torch():
    torch = pytest.importorskip("torch")
    tm = _branchy(torch.nn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tep = torch.export.draft_export(tm, (torch.tensor([1.0, 2.0, 0.5]), torch.randn(4, 2)))
    ep = _draft(_branchy(nn), (ember.tensor([1.0, 2.0, 0.5]), ember.randn(4, 2)))
    assert [f.failure_type.name for f in ep._report.failures] == [f.failure_type.name for f in tep._report.failures]
    assert ep._report.successful() == tep._report.successful() is False
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        tep.module()(torch.tensor([-1.0, -2.0, -0.5]), torch.randn(4, 2))

    class Ok(nn.Module):
        def forward(self, x):
            return x * 2
    ok = draft_export(Ok(), (ember.randn(3),))
    assert ok._report.successful() and ok._report.failures == []
    assert "Congratulations: No issues are found during export" in str(ok._report)


def test_data_dependent_output_shape():
    class Masked(nn.Module):
        def forward(self, x):
            return x[x > 0] * 2
    x = ember.randn(7)
    ep = _draft(Masked(), (x,))
    assert ep._report.failures[0].failure_type == FailureType.DATA_DEPENDENT_ERROR
    assert "boolean-mask" in ep._report.failures[0].data["expr"]
    for _ in range(3):
        x = ember.randn(7)
        np.testing.assert_allclose(_np(ep.module()(x)), _np(x[x > 0] * 2))


def test_narrowed_dim_recorded_and_relaxed():
    class Gate(nn.Module):
        def forward(self, x):
            if x.shape[0] > 4:
                return x * 2
            return x
    with pytest.warns(UserWarning, match="1 issue"):
        ep = draft_export(Gate(), (ember.randn(6),), dynamic_shapes={"x": {0: Dim("b", min=2, max=10)}})
    f = ep._report.failures[0]
    assert f.failure_type == FailureType.CONSTRAINT_VIOLATION_ERROR and "b = Dim('b', min=5, max=10)" in f.data["message"]
    assert [repr(v) for v in ep.range_constraints.values()] == ["VR[5, 10]"]   # the relaxed Dim keeps its max (torch)
    x = ember.randn(9)
    np.testing.assert_allclose(_np(ep.module()(x)), _np(x * 2))
    with pytest.raises(AssertionError, match="Guard failed"):
        ep.module()(ember.randn(3))


def test_dynamic_shapes_with_data_dependent_code_is_refused():
    with pytest.raises(NotImplementedError, match="data-dependent code with dynamic_shapes"):
        _draft(_branchy(nn), (ember.ones(3), ember.randn(4, 2)), dynamic_shapes={"x": None, "y": {0: Dim.AUTO}})
