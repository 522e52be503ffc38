"""``is_from_package``: was this module or object loaded from a package?"""
from types import ModuleType

from .._mangling import is_mangled

__all__ = ["is_from_package"]


def is_from_package(obj) -> bool:
    """True for modules loaded by a PackageImporter and instances of classes defined in them
    (objects of externed modules come from the host: False)."""
    if type(obj) is ModuleType:
        return is_mangled(obj.__name__)
    return is_mangled(type(obj).__module__)
