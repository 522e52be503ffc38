"""``flags(module, **switches)``: set a backend module's switches inside a ``with`` block."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def set_flags(module, **switches):
    unknown = [k for k in switches if not hasattr(module, k)]
    if unknown:
        raise TypeError(f"{module.__name__}.flags() got unexpected switches {unknown}")
    old = {k: getattr(module, k) for k in switches}
    for k, v in switches.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)
