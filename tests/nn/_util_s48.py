"""Helpers of the session-48 nn tests: run one snippet under ember and torch and compare."""
from __future__ import annotations

import numpy as np
import pytest


def torch_or_skip():
    return pytest.importorskip("torch")


def _outcome(fn, lib):
    try:
        return "ok", fn(lib)
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return "err", e


def _norm_msg(e):
    """The message with the library's own names (torch.Size / ember.Size, ...) made neutral."""
    return str(e).replace("torch.", "LIB.").replace("ember.", "LIB.")


def same_error(fn):
    """``fn(lib)`` raises under both libraries, with the same exception type and message."""
    import ember
    torch = torch_or_skip()
    kt, t = _outcome(fn, torch)
    ke, e = _outcome(fn, ember)
    assert kt == "err", f"torch did not raise: {t!r}"
    assert ke == "err", f"ember did not raise (torch: {type(t).__name__}: {t})"
    assert type(e).__name__ == type(t).__name__, (type(e), e, type(t), t)
    assert _norm_msg(e) == _norm_msg(t)


def as_np(x):
    if x is None:
        return None
    if hasattr(x, "detach"):
        x = x.detach()
        if getattr(x, "is_sparse", False):
            x = x.to_dense()
        return x.numpy()
    return np.asarray(x)


def close(a, b, rtol=1e-5, atol=1e-6):
    a, b = as_np(a), as_np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
