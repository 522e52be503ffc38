"""Helpers for the seed-article tests (see conftest.py)."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import numpy as np
import pytest

_ADDRESS = re.compile(r" object at 0x[0-9a-fA-F]+>")


def norm(text: str) -> str:
    """Printed output with addresses hidden and ``torch.`` spelled ``ember.``."""
    return _ADDRESS.sub(" object at 0x...>", text).replace("torch.", "ember.")


class Lib:
    """The framework under test, reachable the way the articles import it."""

    def __init__(self, root: str):
        self.name = root
        self.torch = importlib.import_module(root)

    def mod(self, dotted: str) -> ModuleType:
        """``lib.mod("nn.functional")`` is ``import <root>.nn.functional``."""
        return importlib.import_module(f"{self.name}.{dotted}")

    @property
    def nn(self):
        return self.mod("nn")

    @property
    def F(self):
        return self.mod("nn.functional")

    @property
    def optim(self):
        return self.mod("optim")

    @property
    def autograd(self):
        return self.mod("autograd")

    def __repr__(self):
        return f"Lib({self.name})"


def to_np(t) -> np.ndarray:
    """A tensor's values as a float64/int numpy array (works for ember and torch)."""
    t = t.detach() if hasattr(t, "detach") else t
    if hasattr(t, "numpy"):
        try:
            return np.array(t.numpy())
        except Exception:
            pass
    return np.array(t.tolist())


def seed_all(lib: Lib, seed: int | None = None) -> None:
    """Seed the framework's RNG with a fresh (or given) seed."""
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**31 - 1))
    lib.torch.manual_seed(seed)


def require_compile(lib) -> None:
    """Skip an example that calls ``torch.compile`` while ember has no compiler yet.

    The skip disappears by itself once ``ember.dynamo`` exists (the dynamo issue)."""
    if lib.name != "ember":
        return
    try:
        importlib.import_module("ember.dynamo.eval_frame")
    except ImportError:
        pytest.skip("ember.compile lands with the dynamo issue; the compiled path is not built yet")
