"""nn.init.dirac_ / eye_ / sparse_ and their deprecated aliases, against torch 2.13."""
import math
import warnings

import numpy as np
import pytest

import ember
from oracle import assert_same_error


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 2, 3, 5), 3), ((2, 5, 3, 4, 2), 2), ((3, 7, 5, 5), 1)])
def test_dirac_matches_torch(shape, groups):
    torch = _torch()
    rng = np.random.default_rng(0)
    start = rng.standard_normal(shape).astype(np.float32)
    e = ember.tensor(start, requires_grad=True)
    t = torch.tensor(start, requires_grad=True)
    out = ember.nn.init.dirac_(e, groups)
    torch.nn.init.dirac_(t, groups)
    assert out is e and e.requires_grad and e.grad_fn is None
    np.testing.assert_array_equal(e.detach().numpy(), t.detach().numpy())


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4)])
def test_eye_matches_torch(shape):
    torch = _torch()
    e = ember.randn(*shape)
    t = torch.randn(*shape)
    ember.nn.init.eye_(e)
    torch.nn.init.eye_(t)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.nn.init.dirac_(m.empty(3, 3)),
    lambda m: m.nn.init.dirac_(m.empty(3, 3, 3, 3, 3, 3)),
    lambda m: m.nn.init.dirac_(m.empty(4, 3, 3), groups=3),
    lambda m: m.nn.init.eye_(m.empty(3)),
    lambda m: m.nn.init.eye_(m.empty(2, 3, 4)),
    lambda m: m.nn.init.sparse_(m.empty(2, 3, 4), 0.5),
])
def test_errors_match_torch(call):
    torch = _torch()
    assert_same_error(lambda: call(ember), lambda: call(torch))


@pytest.mark.parametrize("rows,cols,sparsity", [(10, 4, 0.1), (7, 5, 0.5), (9, 3, 0.99), (6, 6, 0.0)])
def test_sparse_zero_count_per_column(rows, cols, sparsity):
    g = ember.Generator().manual_seed(1234)
    ember.manual_seed(5)          # (the zeroed rows come from the default generator, as PyTorch's)
    w = ember.empty(rows, cols)
    ember.nn.init.sparse_(w, sparsity, std=0.5, generator=g)
    arr = w.numpy()
    expected = math.ceil(sparsity * rows)
    assert ((arr == 0).sum(axis=0) == expected).all()
    nz = arr[arr != 0]
    assert nz.size == rows * cols - expected * cols
    # same seed, same draw
    g2 = ember.Generator().manual_seed(1234)
    ember.manual_seed(5)
    w2 = ember.empty(rows, cols)
    ember.nn.init.sparse_(w2, sparsity, std=0.5, generator=g2)
    np.testing.assert_array_equal(arr, w2.numpy())


def test_sparse_std():
    g = ember.Generator().manual_seed(7)
    w = ember.empty(400, 200)
    ember.nn.init.sparse_(w, 0.25, std=0.3, generator=g)
    nz = w.numpy()[w.numpy() != 0]
    assert abs(nz.std() - 0.3) < 0.01 and abs(nz.mean()) < 0.01


@pytest.mark.parametrize("name,args", [("eye", ((3, 4),)), ("dirac", ((2, 2, 3),)), ("sparse", ((5, 4), 0.5))])
def test_deprecated_aliases_warn_like_torch(name, args):
    torch = _torch()
    shape, *rest = args
    msgs = []
    for m in (ember, torch):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            w = m.empty(*shape)
            out = getattr(m.nn.init, name)(w, *rest)
        assert out is w
        msgs.append([(r.category, str(r.message)) for r in rec])
        assert rec[0].filename == __file__
    assert msgs[0] == msgs[1]
    assert getattr(ember.nn.init, name).__name__ == name
