"""Random sparse tensors for the sparse tests, made the same way in ember and (when present) torch."""
from __future__ import annotations

import numpy as np

import ember


def random_coo_arrays(rng, shape, sparse_dim=None, density=None, duplicates=False, dtype=np.float64,
                      nnz=None):
    """(indices int64 (sparse_dim, nnz), values (nnz, *dense)) with random positions: unique ones,
    or with some positions repeated (an uncoalesced tensor) when ``duplicates``."""
    sd = len(shape) if sparse_dim is None else sparse_dim
    sparse_shape, dense_shape = tuple(shape[:sd]), tuple(shape[sd:])
    total = int(np.prod(sparse_shape)) if sparse_shape else 1
    if nnz is None:
        density = rng.uniform(0.1, 0.7) if density is None else density
        nnz = max(1, int(round(total * density))) if total else 0
    nnz = min(nnz, total)
    lin = rng.choice(total, size=nnz, replace=False) if total else np.zeros(0, np.int64)
    if duplicates and nnz:
        extra = rng.choice(lin, size=max(1, nnz // 2))
        lin = np.concatenate([lin, extra])
        rng.shuffle(lin)
    else:
        rng.shuffle(lin)
    if sparse_shape:
        idx = np.stack(np.unravel_index(lin, sparse_shape)).astype(np.int64)
    else:
        idx = np.zeros((0, lin.shape[0]), np.int64)
    vals = rng.standard_normal((lin.shape[0],) + dense_shape).astype(dtype)
    vals[vals == 0] = 0.5
    return idx.reshape(sd, -1), vals


def ember_coo(idx, vals, shape, **kw):
    return ember.sparse_coo_tensor(ember.tensor(idx), ember.tensor(vals), shape, **kw)


def torch_coo(torch, idx, vals, shape, **kw):
    return torch.sparse_coo_tensor(torch.from_numpy(idx.copy()), torch.from_numpy(vals.copy()), shape, **kw)


def np_of(t):
    """numpy values of an ember or torch dense tensor."""
    if hasattr(t, "numpy"):
        try:
            return t.detach().numpy()
        except Exception:
            pass
    return np.asarray(t.detach()._data)


def dense_np(t):
    return np_of(t.to_dense() if t.layout != "strided" and str(t.layout) != "torch.strided" else t)


# ---------------------------------------------------------------------- comparisons with torch
def torch_pair(x):
    """``x`` (a numpy array) as an ember tensor and a torch tensor."""
    import torch
    return ember.tensor(x), torch.from_numpy(x.copy())


def same_as_torch(e, t):
    """A sparse ember tensor equal to torch's: layout, repr, shape, nnz, dims, values, dense."""
    assert str(e.layout).replace("ember.", "") == str(t.layout).replace("torch.", "")
    assert repr(e) == repr(t).replace("torch.", "ember."), f"\n{e!r}\n{t!r}"
    assert tuple(e.shape) == tuple(t.shape) and e._nnz() == t._nnz()
    assert e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()
    np.testing.assert_array_equal(np_of(e.values()), t.values().detach().numpy())
    np.testing.assert_allclose(dense_np(e), t.to_dense().detach().numpy())


def same_error(fe, ft, exc=RuntimeError):
    """``fe()`` (ember) raises ``exc`` with the message ``ft()`` (torch) raises."""
    import pytest
    with pytest.raises(exc) as te:
        ft()
    with pytest.raises(exc) as ee:
        fe()
    assert str(ee.value) == str(te.value).replace("torch.", "ember.")
