"""Every name of torch.export.__all__ is in ember.export; the small ones behave as torch's."""
import dataclasses
import io
import pickle

import pytest

import ember
import ember.export as eexport
from ember.export import DEFAULT_PICKLE_PROTOCOL, ExportBackwardSignature, export, load, save


def test_torch_export_names_present():
    torch = pytest.importorskip("torch")
    missing = [n for n in torch.export.__all__ if not hasattr(eexport, n)]
    assert missing == []
    assert set(torch.export.__all__) <= set(eexport.__all__)


def test_small_names_as_torch():
    torch = pytest.importorskip("torch")
    assert DEFAULT_PICKLE_PROTOCOL == torch.export.DEFAULT_PICKLE_PROTOCOL
    assert [f.name for f in dataclasses.fields(ExportBackwardSignature)] == \
        [f.name for f in dataclasses.fields(torch.export.ExportBackwardSignature)]
    sig = ExportBackwardSignature({"g0": "fc.weight"}, {"g1": "x"}, "loss")
    assert sig == ExportBackwardSignature({"g0": "fc.weight"}, {"g1": "x"}, "loss")
    assert isinstance(eexport.Dim("b"), eexport.Constraint.__args__)


def test_save_pickle_protocol():
    class M(ember.nn.Module):
        def forward(self, x):
            return x + 1
    ep = export(M(), (ember.randn(2),))
    buf = io.BytesIO()
    save(ep, buf)
    assert buf.getvalue()[:2] == b"\x80\x02"            # protocol 2 by default, as torch
    buf = io.BytesIO()
    save(ep, buf, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    buf.seek(0)
    x = ember.randn(2)
    assert ember.equal(load(buf).module()(x), x + 1)
    with pytest.raises(ValueError, match="pickle_protocol must be an int"):
        save(ep, io.BytesIO(), pickle_protocol=1)
