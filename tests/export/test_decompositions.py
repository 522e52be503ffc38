"""default_decompositions() / CustomDecompTable and run_decompositions(table): popped ops stay
whole, custom entries are used, the table behaves as torch's dict-like table."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import CustomDecompTable, default_decompositions, export


class GeluSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 3)

    def forward(self, x):
        return ember.nn.functional.gelu(self.l(x)).softmax(-1)


def _targets(ep):
    # an aten overload (aten.gelu.default) by its op's name, as ember's prims by theirs
    return {n.target.overloadpacket.__name__ if hasattr(n.target, "overloadpacket")
            else getattr(n.target, "__name__", str(n.target)) for n in ep.graph.nodes if n.op == "call_function"}


def _np(t):
    return np.asarray(t.detach().numpy())


def test_table_is_dict_like_and_lazy():
    t = default_decompositions()
    assert isinstance(t, CustomDecompTable) and isinstance(t, dict)
    assert not t.has_materialized
    n = len(t)
    assert t.has_materialized and n > 50
    assert ember.gelu in t and "gelu" in t and "no_such_op" not in t
    assert t["gelu"] is t.get(ember.gelu)
    c = t.copy()
    fn = c.pop(ember.gelu)
    assert callable(fn) and ember.gelu not in c and ember.gelu in t and len(c) == n - 1
    with pytest.raises(KeyError):
        c.pop(ember.gelu)
    assert c.pop(ember.gelu, None) is None
    assert len(dict(c.items())) == n - 1 and len(c.materialize()) == n - 1
    c[ember.gelu] = fn
    assert len(c) == n and c == t
    with pytest.raises(TypeError, match="must be an ember op"):
        c[object()] = fn
    with pytest.raises(TypeError, match="must be callable"):
        c["gelu"] = 3


def test_popped_op_stays_whole_and_results_match():
    torch = pytest.importorskip("torch")
    m = GeluSoftmax()
    ep = export(m, (ember.randn(2, 3),))
    full = ep.run_decompositions(default_decompositions())
    assert _targets(full) == _targets(ep.run_decompositions())
    assert "gelu" not in _targets(full) and "addmm" not in _targets(full)
    t = default_decompositions()
    t.pop("gelu")
    part = ep.run_decompositions(t)
    assert "gelu" in _targets(part) and "_softmax" not in _targets(part)
    assert _targets(ep.run_decompositions({})) == _targets(ep)           # an empty table decomposes nothing
    for _ in range(3):
        x = ember.randn(2, 3)
        want = m(x)
        for p in (full, part):
            np.testing.assert_allclose(_np(p.module()(x)), _np(want), rtol=1e-5, atol=1e-6)
    # torch: the same edit keeps the same op whole
    tm = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.GELU())
    tt = torch.export.default_decompositions()
    assert torch.ops.aten.gelu.default not in tt      # core ATen keeps gelu; ember decomposes it by default
    tt[torch.ops.aten.gelu.default] = lambda x, approximate="none": x * 0.5
    tep = torch.export.export(tm, (torch.randn(2, 3),)).run_decompositions(tt)
    assert "aten.gelu" not in str(tep.graph)


def test_custom_entry_is_used():
    m = GeluSoftmax()
    ep = export(m, (ember.randn(2, 3),))
    t = default_decompositions()
    t[ember.gelu] = lambda x, approximate="none": ember.relu(x)     # a different function on purpose
    dep = ep.run_decompositions(t)
    x = ember.randn(2, 3)
    want = ember.relu(m.l(x)).softmax(-1)
    np.testing.assert_allclose(_np(dep.module()(x)), _np(want), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="decomp_table must be a dict"):
        ep.run_decompositions(["gelu"])
