"""Exporting ordinary models (conv net, transformer layer, embedding) with dynamic sizes: the
program, its saved copy and its prim decomposition equal eager on fresh inputs."""
import io

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.export import Dim, export, load, save


def _np(t):
    return np.asarray(t.detach().numpy())


def _first(o):
    return o[0] if isinstance(o, tuple) else o


def _roundtrip(ep):
    buf = io.BytesIO()
    save(ep, buf)
    buf.seek(0)
    return load(buf)


@pytest.mark.parametrize("name", ["cnn", "transformer", "embedding"])
def test_model(name):
    ember.manual_seed(7)
    if name == "cnn":
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10)).eval()
        args, ds = (ember.randn(2, 3, 8, 8),), {"input": {0: Dim("b", max=32)}}
        others = [(ember.randn(5, 3, 8, 8),), (ember.randn(2, 3, 8, 8),)]
    elif name == "transformer":
        m = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
        args, ds = (ember.randn(2, 5, 16),), {"src": {0: Dim("b"), 1: Dim("s", max=64)}}
        others = [(ember.randn(3, 7, 16),), (ember.randn(2, 5, 16),)]
    else:
        m = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4))
        args, ds = (ember.randint(0, 10, (3, 5)),), {"input": {1: Dim.AUTO}}
        others = [(ember.randint(0, 10, (3, 9)),)]
    ep = export(m, args, dynamic_shapes=ds)
    loaded = _roundtrip(ep)
    for a in others:
        want = _first(m(*a))
        np.testing.assert_allclose(_np(_first(ep.module()(*a))), _np(want), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(_np(_first(loaded.module()(*a))), _np(want), rtol=1e-4, atol=1e-5)
    dep = ep.run_decompositions()
    a = others[0]
    np.testing.assert_allclose(_np(_first(dep.module()(*a))), _np(_first(m(*a))), rtol=1e-4, atol=1e-5)
