"""``ember.signal``: PyTorch's ``torch.signal`` (the ``windows`` submodule)."""
from . import windows  # noqa: F401

__all__ = ["windows"]
