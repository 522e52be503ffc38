"""PyTorch checkpoint interop: torch.save -> ember.load (weights-only unpickler), ember.save ->
torch.load, round trips, and pickling ember tensors / Parameters / modules."""
import copy
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn


def _torch():
    return pytest.importorskip("torch")


def _tsave(obj, **kw):
    torch = _torch()
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    b.seek(0)
    return b


def _esave(obj, **kw):
    b = io.BytesIO()
    ember.save(obj, b, **kw)
    b.seek(0)
    return b


def test_torch_state_dict_into_ember_module():
    torch = _torch()
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5))
    tm.train()
    tm(torch.randn(8, 3, 6, 6))        # running stats away from their initial values
    tm.eval()
    em = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    sd = ember.load(_tsave(tm.state_dict()))
    assert isinstance(sd, OrderedDict) and list(sd) == list(tm.state_dict())
    assert sd._metadata == tm.state_dict()._metadata
    em.load_state_dict(sd)
    em.eval()
    x = np.random.default_rng().standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    assert sd["1.num_batches_tracked"].dtype is ember.int64 and int(sd["1.num_batches_tracked"]) == 1


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
                                  "int64", "bool", "complex64", "complex128"])
def test_dtypes_from_torch(name):
    torch = _torch()
    dt = getattr(torch, name)
    g = torch.randn(3, 4, dtype=torch.complex128 if dt.is_complex else torch.float64) * 50
    t = (g > 0) if dt is torch.bool else g.to(dt)
    got = ember.load(_tsave({"t": t, "v": t.t()[1:]}))
    assert got["t"].dtype is getattr(ember, name) and tuple(got["t"].shape) == (3, 4)
    conv = (lambda a: a.float()) if name == "bfloat16" else (lambda a: a)
    np.testing.assert_array_equal(conv(got["t"]).numpy(), conv(t).numpy())
    np.testing.assert_array_equal(conv(got["v"]).numpy(), conv(t.t()[1:]).numpy())
    # back to torch
    back = torch.load(_esave(got), weights_only=True)
    assert back["t"].dtype is dt and torch.equal(back["t"], t) and torch.equal(back["v"], t.t()[1:])


def test_views_stay_views_and_parameters():
    torch = _torch()
    a = torch.randn(5, 6)
    p = torch.nn.Parameter(torch.randn(3))
    frozen = torch.nn.Parameter(torch.randn(2), requires_grad=False)
    leaf = torch.randn(2, requires_grad=True)
    sd = {"a": a, "v": a[1:, ::2].t(), "flat": a.view(-1)[7:20], "p": p, "f": frozen, "leaf": leaf}
    got = ember.load(_tsave(sd))
    for k in ("v", "flat"):
        assert got[k].untyped_storage().data_ptr() == got["a"].untyped_storage().data_ptr()
        assert got[k].stride() == sd[k].stride() and got[k].storage_offset() == sd[k].storage_offset()
        np.testing.assert_array_equal(got[k].numpy(), sd[k].numpy())
    got["a"].add_(1)                                  # one storage: writes show through the views
    np.testing.assert_array_equal(got["v"].numpy(), (sd["v"] + 1).numpy())
    assert isinstance(got["p"], nn.Parameter) and got["p"].requires_grad
    assert isinstance(got["f"], nn.Parameter) and not got["f"].requires_grad
    assert not isinstance(got["leaf"], nn.Parameter) and got["leaf"].requires_grad
    back = torch.load(_esave(got), weights_only=True)
    assert back["v"].untyped_storage().data_ptr() == back["a"].untyped_storage().data_ptr()
    assert back["v"].stride() == sd["v"].stride() and back["flat"].storage_offset() == 7
    assert isinstance(back["p"], torch.nn.Parameter) and not back["f"].requires_grad and back["leaf"].requires_grad


def test_nested_containers_and_scalars():
    torch = _torch()
    obj = {"epoch": 3, "lr": 0.1, "name": "run", "flags": [True, None], "tup": (1, torch.Size([2, 3])),
           "dt": torch.bfloat16, "set": {1, 2}, "cplx": 1 + 2j, "inf": float("inf"), "dev": torch.device("cpu"),
           "deep": [{"x": (torch.arange(4), OrderedDict(y=torch.randn(2)))}], "b": b"raw"}
    got = ember.load(_tsave(obj))
    assert got["epoch"] == 3 and got["lr"] == 0.1 and got["flags"] == [True, None] and got["set"] == {1, 2}
    assert got["tup"] == (1, ember.Size([2, 3])) and isinstance(got["tup"][1], ember.Size)
    assert got["dt"] is ember.bfloat16 and got["cplx"] == 1 + 2j and got["inf"] == float("inf")
    assert got["dev"] == ember.device("cpu") and got["b"] == b"raw"
    assert got["deep"][0]["x"][0].tolist() == [0, 1, 2, 3]
    assert isinstance(got["deep"][0]["x"][1], OrderedDict)
    back = torch.load(_esave(got), weights_only=True)
    assert back["tup"][1] == torch.Size([2, 3]) and isinstance(back["tup"][1], torch.Size)
    assert back["dt"] is torch.bfloat16 and back["dev"] == torch.device("cpu")
    assert torch.equal(back["deep"][0]["x"][1]["y"], obj["deep"][0]["x"][1]["y"])


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_malicious_pickle_refused(tmp_path):
    b = _tsave({"w": _torch().ones(2), "x": _Evil()})
    with pytest.raises(pickle.UnpicklingError, match=r"(?s)Weights only load failed.*GLOBAL (posix|os)\.system"):
        ember.load(b)
    # hand-written pickle too (GLOBAL builtins eval), in a zip laid out as torch's
    p = tmp_path / "evil.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02cbuiltins\neval\nX\x06\x00\x00\x001 + 1\x85R.")
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL builtins.eval was not an allowed global"):
        ember.load(p)


def test_map_location_and_cuda_location():
    torch = _torch()
    t = torch.randn(3)
    for ml in (None, "cpu", ember.device("cpu"), {"cpu": "cpu"}):
        np.testing.assert_array_equal(ember.load(_tsave({"t": t}), map_location=ml)["t"].numpy(), t.numpy())
    seen = []
    got = ember.load(_tsave({"t": t}), map_location=lambda s, loc: seen.append(loc))
    assert seen == ["cpu"] and got["t"].tolist() == t.tolist()


def test_ember_save_is_torch_format_and_old_format_loads(tmp_path):
    torch = _torch()
    x = ember.randn(4, 3)
    path = tmp_path / "ck.pt"
    ember.save({"x": x}, path)
    names = zipfile.ZipFile(path).namelist()
    assert "ck/data.pkl" in names and "ck/byteorder" in names and "ck/data/0" in names
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.tensor(x.numpy()))
    old = _esave({"x": x, "n": 1}, _use_new_zipfile_serialization=False)
    assert "ember_manifest.json" in zipfile.ZipFile(old).namelist()
    old.seek(0)
    got = ember.load(old)
    assert got["n"] == 1 and got["x"].tolist() == x.tolist()


def test_round_trip_module_state_dict_and_optimizer():
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    opt = ember.optim.Adam(m.parameters(), lr=1e-2)
    m(ember.randn(5, 3)).sum().backward()
    opt.step()
    ck = {"model": m.state_dict(), "opt": opt.state_dict(), "epoch": 2}
    got = ember.load(_esave(ck))
    m2 = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    m2.load_state_dict(got["model"])
    x = ember.randn(2, 3)
    assert ember.equal(m(x), m2(x))
    opt2 = ember.optim.Adam(m2.parameters(), lr=1e-2)
    opt2.load_state_dict(got["opt"])
    assert ember.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_whole_module_needs_weights_only_false():
    m = nn.Linear(3, 2)
    b = _esave(m)
    with pytest.raises(pickle.UnpicklingError, match="Linear was not an allowed global"):
        ember.load(b)
    b.seek(0)
    m2 = ember.load(b, weights_only=False)
    x = ember.randn(4, 3)
    assert type(m2) is nn.Linear and ember.equal(m2(x), m(x))


def test_torch_whole_module_weights_only_false_maps_to_ember():
    torch = _torch()
    b = _tsave({"w": torch.nn.Parameter(torch.randn(2)), "dt": torch.float16})
    got = ember.load(b, weights_only=False)
    assert isinstance(got["w"], nn.Parameter) and got["dt"] is ember.float16


def test_pickle_tensors():
    a = ember.randn(3, 4, requires_grad=True)
    base = ember.randn(4, 5)
    v = base.t()[1:]
    p = nn.Parameter(ember.randn(2))
    h = ember.randn(3).to(ember.bfloat16)
    r = pickle.loads(pickle.dumps({"a": a, "base": base, "v": v, "p": p, "h": h, "again": a}))
    assert r["a"].requires_grad and r["a"].is_leaf and ember.equal(r["a"], a) and r["again"] is r["a"]
    assert r["v"].stride() == v.stride() and r["v"].storage_offset() == v.storage_offset()
    assert r["v"].untyped_storage().data_ptr() == r["base"].untyped_storage().data_ptr()
    assert r["v"].untyped_storage().data_ptr() != v.untyped_storage().data_ptr()
    assert isinstance(r["p"], nn.Parameter) and ember.equal(r["p"], p)
    assert r["h"].dtype is ember.bfloat16 and ember.equal(r["h"], h)
    c = copy.copy(pickle.loads(pickle.dumps(base)))
    assert ember.equal(c, base)


def test_pickle_whole_module():
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    m2 = pickle.loads(pickle.dumps(m))
    x = ember.randn(2, 3)
    assert ember.equal(m(x), m2(x))
    assert m2[0].weight.untyped_storage().data_ptr() != m[0].weight.untyped_storage().data_ptr()


def test_torch_legacy_format():
    torch = _torch()
    a = torch.randn(3, 4)
    sd = {"a": a, "v": a.t()[1:], "h": torch.randn(5).to(torch.bfloat16), "p": torch.nn.Parameter(torch.randn(2))}
    got = ember.load(_tsave(sd, _use_new_zipfile_serialization=False))
    np.testing.assert_array_equal(got["v"].numpy(), sd["v"].numpy())
    assert got["v"].untyped_storage().data_ptr() == got["a"].untyped_storage().data_ptr()
    assert got["h"].dtype is ember.bfloat16 and got["h"].float().tolist() == sd["h"].float().tolist()
    assert isinstance(got["p"], nn.Parameter)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL (posix|os).system"):
        ember.load(_tsave({"x": _Evil()}, _use_new_zipfile_serialization=False))
    with pytest.raises(RuntimeError, match="Invalid magic number"):
        ember.load(io.BytesIO(pickle.dumps({"a": 1})))
