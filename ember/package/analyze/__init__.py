"""Questions about objects and packages (``is_from_package``)."""
from .is_from_package import is_from_package

__all__ = ["is_from_package"]
