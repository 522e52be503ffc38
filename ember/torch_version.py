"""``ember.torch_version``: torch's module of the version class (``torch.torch_version.TorchVersion``),
for code that imports the class from there to compare versions. ember's version class is
``ember.version.EmberVersion``; ``TorchVersion`` names it here."""
from .version import EmberVersion as TorchVersion, InvalidVersion, __version__

__all__ = ["TorchVersion", "InvalidVersion", "Version", "internal_version", "__version__"]

try:                                       # torch re-exports packaging's Version class here
    from packaging.version import Version
except ImportError:                        # pragma: no cover - packaging is optional
    Version = None

internal_version = __version__
