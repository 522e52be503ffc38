"""ember.save / ember.load round trips; pickles and unsupported objects are refused."""
from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn as nn
from oracle import HAVE_TORCH, torch


def _round_trip(obj, **kw):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **kw)


def test_containers_and_scalars():
    obj = {"a": [1, 2.5, float("inf"), float("nan"), True, None, "s"], "t": (1, (2, 3)), 7: {"deep": [[]]},
           "big": 2 ** 70, "size": ember.Size([2, 3]), "dt": ember.float16}
    got = _round_trip(obj)
    assert got["a"][:3] == [1, 2.5, float("inf")] and np.isnan(got["a"][3]) and got["a"][4:] == [True, None, "s"]
    assert got["t"] == (1, (2, 3)) and got[7] == {"deep": [[]]} and got["big"] == 2 ** 70
    assert got["size"] == ember.Size([2, 3]) and got["dt"] is ember.float16


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
def test_tensor_dtypes(dtype):
    t = (ember.randn(3, 4) * 10).to(getattr(ember, dtype))
    got = _round_trip({"t": t, "view": t.t(), "scalar": ember.tensor(3.0).to(getattr(ember, dtype))})
    assert got["t"].dtype is t.dtype and tuple(got["t"].shape) == (3, 4)
    assert np.array_equal(got["t"].float().numpy(), t.float().numpy())
    assert np.array_equal(got["view"].float().numpy(), t.t().float().numpy())
    assert tuple(got["scalar"].shape) == ()


def test_parameters_and_identity():
    p = nn.Parameter(ember.ones(2))
    q = nn.Parameter(ember.ones(2), requires_grad=False)
    r = ember.zeros(2, requires_grad=True)
    got = _round_trip([p, p, q, r])
    assert isinstance(got[0], nn.Parameter) and got[0].requires_grad and got[0] is got[1]
    assert isinstance(got[2], nn.Parameter) and not got[2].requires_grad
    assert not isinstance(got[3], nn.Parameter) and got[3].requires_grad


def test_module_and_optimizer_state_dicts(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.LSTM(4, 2))
    opt = ember.optim.AdamW(model.parameters(), lr=0.01)
    model[0](ember.randn(5, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    ember.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, path)
    ck = ember.load(str(path))
    assert isinstance(ck["model"], OrderedDict) and list(ck["model"]) == list(model.state_dict())
    assert ck["model"]._metadata == model.state_dict()._metadata
    m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.LSTM(4, 2))
    m2.load_state_dict(ck["model"])
    for a, b in zip(m2.state_dict().values(), model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())
    o2 = ember.optim.AdamW(m2.parameters(), lr=0.01)
    o2.load_state_dict(ck["opt"])
    assert o2.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    assert ck["epoch"] == 3
    assert _round_trip(model.state_dict(), map_location="cpu").keys() == model.state_dict().keys()


def test_file_holds_no_pickle():
    # ember's JSON format (no pickle) is written on request; the default is torch's zip format
    buf = io.BytesIO()
    ember.save({"w": ember.ones(2)}, buf)
    assert "archive/data.pkl" in zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
    buf = io.BytesIO()
    ember.save({"w": ember.ones(2)}, buf, _use_new_zipfile_serialization=False)
    z = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    assert all(not n.endswith(".pkl") for n in z.namelist())
    assert b"\x80\x04" not in z.read("ember_manifest.json")


def test_refuses_pickles_and_junk():
    # (behaviour changed in session 31: torch.save zip files load with a weights-only unpickler,
    # tests/test_checkpoint_interop.py; a bare pickle is read as torch's legacy format)
    buf = io.BytesIO(pickle.dumps({"a": 1}))
    with pytest.raises(RuntimeError, match="Invalid magic number"):
        ember.load(buf)
    with pytest.raises(RuntimeError, match="not an ember.save / torch.save file"):
        ember.load(io.BytesIO(b"hello world"))


def test_unsupported_types_raise_type_error():
    class Thing:
        pass

    # ember's JSON format refuses them (the default torch format pickles them, as torch.save)
    with pytest.raises(TypeError, match="Thing"):
        ember.save({"x": [Thing()]}, io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(TypeError, match="set"):
        ember.save({1, 2}, io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(TypeError, match="Linear"):
        ember.save(nn.Linear(2, 2), io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(TypeError, match="pickle"):
        ember.save({}, io.BytesIO(), pickle_module=pickle)
