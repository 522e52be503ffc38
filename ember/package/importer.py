"""Importers: where a PackageExporter looks modules up, and how it names objects.

``sys_importer`` is the ordinary Python import system. A ``PackageImporter`` is an importer
too, so objects loaded from one package can be re-packaged by listing it first in an
``OrderedImporter``. ``get_name`` is the round trip pickling relies on: it returns a
``(module, qualname)`` such that importing the module and walking the name gives back the
very same object, or raises ``ObjNotFoundError`` / ``ObjMismatchError``.
"""
from __future__ import annotations

import importlib
import logging
import pickle
from abc import ABC, abstractmethod

from ._mangling import demangle, get_mangle_prefix, is_mangled

__all__ = ["ObjNotFoundError", "ObjMismatchError", "Importer", "OrderedImporter", "sys_importer"]

log = logging.getLogger(__name__)


class ObjNotFoundError(Exception):
    """Raised when an importer cannot find an object by searching for its name."""


class ObjMismatchError(Exception):
    """Raised when an importer found a different object with the same name as the user-provided one."""


def _walk(root, qualname: str):
    obj = root
    for part in qualname.split("."):
        if part == "<locals>":
            raise AttributeError(f"Can't get local attribute {qualname!r} on {root!r}")
        obj = getattr(obj, part)
    return obj


class Importer(ABC):
    """An environment to import modules from (see the module docstring)."""

    modules: dict

    @abstractmethod
    def import_module(self, module_name: str):
        """Import ``module_name`` from this environment (the contract of importlib.import_module)."""

    def get_name(self, obj, name=None):
        if name is None and obj and pickle._Pickler.dispatch.get(type(obj)) is None:
            reduce = getattr(obj, "__reduce__", None)   # objects that pickle as a global name
            if reduce is not None:
                try:
                    rv = reduce()
                    if isinstance(rv, str):
                        name = rv
                except Exception:
                    pass
        if name is None:
            name = getattr(obj, "__qualname__", None)
        if name is None:
            name = obj.__name__
        module_name = demangle(self.whichmodule(obj, name))
        try:
            obj2 = _walk(self.import_module(module_name), name)
        except (ImportError, KeyError, AttributeError):
            raise ObjNotFoundError(f"{obj} was not found as {module_name}.{name}") from None
        if obj is obj2:
            return module_name, name

        def origin(o):
            mod = self.whichmodule(o, name)
            if is_mangled(mod):
                return mod, get_mangle_prefix(mod), f"the importer for {get_mangle_prefix(mod)}"
            return mod, "the current Python environment", "'sys_importer'"

        m1, loc1, imp1 = origin(obj)
        m2, loc2, imp2 = origin(obj2)
        raise ObjMismatchError(
            f"\n\nThe object provided is from '{m1}', which is coming from {loc1}."
            f"\nHowever, when we import '{m2}', it's coming from {loc2}."
            f"\nTo fix this, make sure this 'PackageExporter's importer lists {imp1} before {imp2}.")

    def whichmodule(self, obj, name: str) -> str:
        """The module ``obj`` belongs to: its ``__module__``, else a search of this importer's modules."""
        module_name = getattr(obj, "__module__", None)
        if module_name is not None:
            return module_name
        for module_name, module in list(self.modules.items()):
            if module_name in ("__main__", "__mp_main__") or module is None:
                continue
            try:
                if _walk(module, name) is obj:
                    return module_name
            except AttributeError:
                pass
        return "__main__"


class _SysImporter(Importer):
    """The default behaviour of Python: importlib.import_module and sys.modules."""

    @property
    def modules(self):
        import sys
        return sys.modules

    def import_module(self, module_name: str):
        return importlib.import_module(module_name)

    def whichmodule(self, obj, name: str) -> str:
        module_name = getattr(obj, "__module__", None)
        if module_name is not None:
            return module_name
        return pickle.whichmodule(obj, name)

    def __repr__(self):
        return "sys_importer"


sys_importer = _SysImporter()


class OrderedImporter(Importer):
    """Tries its importers in order; the first that succeeds wins."""

    def __init__(self, *importers):
        self._importers = list(importers)

    @staticmethod
    def _is_package_dummy(module):
        """An empty package node of an archive (``a`` when only ``a.b`` was interned): skip it,
        so that a later importer can provide the real ``a``."""
        if not getattr(module, "__torch_package__", False) or not hasattr(module, "__path__"):
            return False
        return getattr(module, "__file__", None) is None

    def import_module(self, module_name: str):
        last_err = None
        for importer in self._importers:
            if not isinstance(importer, Importer):
                raise TypeError(f"{importer} is not a Importer. All importers in OrderedImporter must inherit "
                                "from Importer.")
            try:
                module = importer.import_module(module_name)
            except ModuleNotFoundError as err:
                last_err = err
                continue
            if self._is_package_dummy(module):
                continue
            return module
        if last_err is not None:
            raise last_err
        raise ModuleNotFoundError(module_name)

    def get_name(self, obj, name=None):
        for importer in self._importers:
            try:
                return importer.get_name(obj, name)
            except (ObjNotFoundError, ObjMismatchError) as e:
                log.warning("Tried to call get_name with obj %s, and name %s on %s and got %s", obj, name,
                            importer, e)
        raise ObjNotFoundError(f"Could not find obj {obj} and name {name} in any of the importers "
                               f"{self._importers}")

    def whichmodule(self, obj, name: str) -> str:
        for importer in self._importers:
            module_name = importer.whichmodule(obj, name)
            if module_name != "__main__":
                return module_name
        return "__main__"
