"""Pickling and unpickling through an Importer.

The exporter's pickler names every class and function by ``Importer.get_name``, which
demangles names of modules loaded from packages: an instance of ``<ember_package_0>.m.Model``
pickles as ``m.Model``, i.e. by reference to the source packaged with it. That needs the
pure-Python pickler (the C pickler's global lookup cannot be replaced); with the plain
``sys_importer`` the faster C pickler does the same job. Tensors never reach either pickler's
object machinery: the exporter's ``persistent_id`` turns them into storage records.
"""
from __future__ import annotations

import pickle
import types

from .importer import ObjMismatchError, ObjNotFoundError, _walk, sys_importer

__all__ = ["PackagePickler", "PackageUnpickler", "create_pickler"]


class PackagePickler(pickle._Pickler):
    """A pickler that finds globals through ``importer`` (see the module docstring)."""

    def __init__(self, importer, file, protocol, persistent_id=None):
        super().__init__(file, protocol=protocol)
        self.importer = importer
        self._persistent_id_fn = persistent_id
        # a private copy: functions are saved by our save_global, not _Pickler's
        self.dispatch = pickle._Pickler.dispatch.copy()
        self.dispatch[types.FunctionType] = PackagePickler.save_global

    def persistent_id(self, obj):
        return None if self._persistent_id_fn is None else self._persistent_id_fn(obj)

    def save_global(self, obj, name=None):
        try:
            module_name, name = self.importer.get_name(obj, name)
        except (ObjNotFoundError, ObjMismatchError) as err:
            raise pickle.PicklingError(f"Can't pickle {obj}: {err}") from err
        module = self.importer.import_module(module_name)
        parent_name, _, last = name.rpartition(".")
        parent = _walk(module, parent_name) if parent_name else module
        if self.proto >= 4:
            self.save(module_name)
            self.save(name)
            self.write(pickle.STACK_GLOBAL)
        elif parent is not module:          # a nested qualname: getattr(parent, last)
            self.save_reduce(getattr, (parent, last))
        else:
            self.write(pickle.GLOBAL + module_name.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n")
        self.memoize(obj)


class _SysPickler(pickle.Pickler):
    """The C pickler plus a persistent_id hook (used when the importer is ``sys_importer``)."""

    def __init__(self, file, protocol, persistent_id=None):
        super().__init__(file, protocol=protocol)
        self._persistent_id_fn = persistent_id

    def persistent_id(self, obj):
        return None if self._persistent_id_fn is None else self._persistent_id_fn(obj)


def create_pickler(data_buf, importer, protocol=3, persistent_id=None):
    if importer is sys_importer:
        return _SysPickler(data_buf, protocol, persistent_id)
    return PackagePickler(importer, data_buf, protocol, persistent_id)


class PackageUnpickler(pickle.Unpickler):
    """An unpickler that imports every global through ``importer`` (a PackageImporter)."""

    def __init__(self, importer, file, persistent_load=None):
        super().__init__(file)
        self._importer = importer
        self._persistent_load_fn = persistent_load

    def find_class(self, module, name):
        return _walk(self._importer.import_module(module), name)

    def persistent_load(self, pid):
        if self._persistent_load_fn is None:
            raise pickle.UnpicklingError("A load persistent id instruction was encountered, but no "
                                         "persistent_load function was specified.")
        return self._persistent_load_fn(pid)
