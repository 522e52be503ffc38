"""ember.export.save / load: a file round-trip preserves results, state and signature."""
import io

import numpy as np

import ember
from ember.export import Dim, export, load, save

from ._models import LinBN, randomize_bn


def _np(t):
    return np.asarray(t.detach().numpy())


def test_roundtrip_file_static(tmp_path):
    m = randomize_bn(LinBN()).eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    path = tmp_path / "prog.ep"
    save(ep, str(path))
    ep2 = load(str(path))
    assert [s.arg.name for s in ep2.graph_signature.input_specs] == [s.arg.name for s in ep.graph_signature.input_specs]
    assert set(ep2.state_dict) == set(ep.state_dict)
    x, y = ember.randn(5, 4), ember.randn(5, 3)
    want = m(x, y=y)
    got = ep2.module()(x, y=y)
    np.testing.assert_allclose(_np(got["b"]), _np(want["b"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(got["a"][0]), _np(want["a"][0]), rtol=1e-5, atol=1e-5)


def test_roundtrip_dynamic_train_mode():
    m = randomize_bn(LinBN()).train()
    b = Dim("b", min=2, max=32)
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)}, dynamic_shapes={"x": {0: b}, "y": {0: b}})
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    ep2 = load(buf)
    assert [repr(v) for v in ep2.range_constraints.values()] == [repr(v) for v in ep.range_constraints.values()]
    m1, m2 = ep.module(), ep2.module()
    for n in (3, 11):
        x, y = ember.randn(n, 4), ember.randn(n, 3)
        np.testing.assert_allclose(_np(m2(x, y=y)["b"]), _np(m1(x, y=y)["b"]), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(m2.bn.running_mean), _np(m1.bn.running_mean), rtol=1e-5, atol=1e-6)
    import pytest
    with pytest.raises(AssertionError, match="<= 32"):
        m2(ember.randn(40, 4), y=ember.randn(40, 3))


def test_load_rejects_other_files(tmp_path):
    import pytest
    p = tmp_path / "x.bin"
    p.write_bytes(b"not a program")
    with pytest.raises(RuntimeError, match="not an exported program file"):
        load(str(p))


def test_loads_format_1_files():
    """Files written before format 2 (pytree specs pickled as objects, no module_call_graph) load."""
    import pickle
    from ember.export.pytree_types import spec_from_record
    m = randomize_bn(LinBN()).eval()
    ep = export(m, (ember.randn(5, 4),), {"y": ember.randn(5, 3)})
    buf = io.BytesIO()
    save(ep, buf)
    rec = pickle.loads(buf.getvalue())
    rec["format"] = ("ember.export", 1)
    rec["in_spec"], rec["out_spec"] = spec_from_record(rec["in_spec"]), spec_from_record(rec["out_spec"])
    del rec["module_call_graph"], rec["state_aliases"]
    ep1 = load(io.BytesIO(pickle.dumps(rec)))
    x, y = ember.randn(5, 4), ember.randn(5, 3)
    np.testing.assert_allclose(_np(ep1.module()(x, y=y)["b"]), _np(m(x, y=y)["b"]), rtol=1e-5, atol=1e-5)
    rec["format"] = ("ember.export", 99)
    import pytest
    with pytest.raises(RuntimeError, match="not an ember.export file of format"):
        load(io.BytesIO(pickle.dumps(rec)))
