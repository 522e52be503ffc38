"""The aot cache's alias key (``_alias_groups``) against its definition: per input, the first
earlier input of the same tensor or whose elements may overlap (``np.may_share_memory``)."""
import random

import numpy as np
import pytest

import ember
from ember.aot.cache import _alias_groups, _byte_bounds
from ember.tensor import _data_ptr


def _pairwise(inputs):
    arrays = [t._data for t in inputs]
    roots = []
    for t in inputs:
        while t._base is not None:
            t = t._base
        roots.append(t)
    out, first = [], []
    for i, a in enumerate(arrays):
        g = i
        for j in range(i):
            if roots[j] is roots[i] or np.may_share_memory(a, arrays[j]):
                g = first[j]
                break
        first.append(g)
        out.append(str(g) if g == i else f"{g}@{_data_ptr(a) - _data_ptr(arrays[g])}")
    return out


def _view(rng, b):
    k = rng.random()
    if k < 0.25:
        return b
    if k < 0.45 and b.dim() == 2 and b.shape[0] > 1:
        return b[rng.randint(0, b.shape[0] - 1):]
    if k < 0.6 and b.dim() == 2:
        return b.t()
    if k < 0.75 and b.shape[-1] > 1:
        return b[..., ::2]
    if k < 0.9:
        return b[..., :1]
    return ember.randn(2, 3)


@pytest.mark.parametrize("seed", range(4))
def test_alias_groups_match_pairwise_overlap(seed):
    rng = random.Random(seed)
    for _ in range(300):
        bases = [ember.randn(rng.randint(0, 4), rng.randint(1, 5)) for _ in range(3)]
        inputs = []
        for _ in range(rng.randint(1, 8)):
            inputs.append(_view(rng, rng.choice(bases + inputs)))
        assert _alias_groups(inputs) == _pairwise(inputs)


def test_byte_bounds_match_numpy():
    from numpy.lib.array_utils import byte_bounds
    a = np.random.default_rng(0).standard_normal((5, 6, 7))
    for v in (a, a[::-1], a[:, ::-2, 1:], a.transpose(2, 0, 1)[::-1, :, ::3], a[3:4, 2, ::-1]):
        assert _byte_bounds(v) == byte_bounds(v)
