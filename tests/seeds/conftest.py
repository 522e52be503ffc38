"""Shared fixtures for the seed-article tests.

Every example runs twice: once with ``import ember as torch`` (the
requirement) and once with real PyTorch (the oracle: it proves that the
expected strings and numbers written in these tests are what PyTorch really
does). The PyTorch run is skipped where torch is not installed.

Printed output is compared after :func:`norm`, which hides object addresses
(``<MulBackward0 object at 0x7f...>`` -> ``<MulBackward0 object at 0x...>``)
and spells PyTorch's ``torch.`` prefix as ``ember.``.
"""

from __future__ import annotations

import pytest

from seedlib import Lib


@pytest.fixture(params=["ember", "torch"])
def lib(request) -> Lib:
    if request.param == "torch":
        pytest.importorskip("torch")
    return Lib(request.param)
