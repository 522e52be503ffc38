"""``PackageImporter``: loads code and objects from a package, hermetically.

Modules come from the archive's source, never from the host, except those the archive lists
as extern (``.data/extern_modules``) and a few always allowed (``numpy``, ``builtins``). Each
importer has its own module table (``self.modules``, not ``sys.modules``) and gives its modules
mangled names (``<ember_package_N>.name``): loading the same package twice gives two distinct
sets of classes, and neither clashes with the host's modules. Packaged code imports through
a patched ``__import__`` that resolves names in this importer.
"""
from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import importlib.util
import inspect
import io
import linecache
import weakref

from ._archive import open_reader
from ._dependencies import resolve_name
from ._mangling import PackageMangler, demangle
from ._package_pickler import PackageUnpickler
from .file_structure_representation import _create_directory_from_file_list
from .importer import Importer

__all__ = ["PackageImporter"]

IMPLICIT_IMPORT_ALLOWLIST = ("numpy", "numpy.core", "numpy.core._multiarray_umath", "builtins")


class _PackageNode:
    def __init__(self, source_file):
        self.source_file = source_file
        self.children = {}


class _ModuleNode:
    __slots__ = ("source_file",)

    def __init__(self, source_file):
        self.source_file = source_file


class _ExternNode:
    pass


_NEEDS_LOADING = object()
_package_imported_modules = weakref.WeakValueDictionary()    # mangled name -> module, for inspect.getfile


class PackageImporter(Importer):
    """Open a package written by PackageExporter (see the module docstring)."""

    def __init__(self, file_or_buffer, module_allowed=lambda module_name: True):
        self.zip_reader, self.filename = open_reader(file_or_buffer)
        self.root = _PackageNode(None)
        self.modules = {}
        if not self.zip_reader.has_record(".data/extern_modules"):
            raise RuntimeError(f"PackageImporter: {self.filename!r} is not a torch.package archive (it has no "
                               ".data/extern_modules record)")
        self.extern_modules = self.zip_reader.get_record(".data/extern_modules").decode("utf-8").splitlines()
        for name in self.extern_modules:
            if not module_allowed(name):
                raise ImportError(f"package '{file_or_buffer}' needs the external module '{name}' but that module "
                                  "has been disallowed")
            self._add_extern(name)
        for record in self.zip_reader.get_all_records():
            self._add_file(record)
        self.patched_builtins = builtins.__dict__.copy()
        self.patched_builtins["__import__"] = self.__import__
        self.modules["torch_package_importer"] = self    # packaged code may reach its importer
        self._mangler = PackageMangler()
        self.last_map_location = None

    # ------------------------------------------------------------------ public API
    def import_module(self, name: str, package=None):
        """Load ``name`` from the package (once; later calls return the same module)."""
        return self._gcd_import(self._mangler.demangle(name))

    def load_binary(self, package: str, resource: str) -> bytes:
        return self.zip_reader.get_record(self._zipfile_path(package, resource))

    def load_text(self, package: str, resource: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.load_binary(package, resource).decode(encoding, errors)

    def load_pickle(self, package: str, resource: str, map_location=None):
        """Unpickle ``<package>/<resource>``, importing the classes it names from this package."""
        from ..serialization import _Reader
        data = self.zip_reader.get_record(self._zipfile_path(package, resource))
        reader = _Reader(_StorageRecords(self.zip_reader), map_location)
        loaded_reduces = {}

        def persistent_load(saved_id):
            if not isinstance(saved_id, tuple) or not saved_id:
                raise RuntimeError(f"PackageImporter.load_pickle: malformed persistent id {saved_id!r}")
            kind, rest = saved_id[0], saved_id[1:]
            if isinstance(kind, bytes):
                kind = kind.decode("ascii")
            if kind == "ember":
                import json
                node = json.loads(rest[0])
                if node.get("t") == "tensor" and node["id"] in reader.tensors:
                    return reader.tensors[node["id"]]
                return reader.decode(node)
            if kind == "reduce_package":
                if len(rest) == 2:
                    func, args = rest
                    return func(self, *args)
                reduce_id, func, args = rest
                if reduce_id not in loaded_reduces:
                    loaded_reduces[reduce_id] = func(self, *args)
                return loaded_reduces[reduce_id]
            if kind == "storage":
                raise NotImplementedError("ember.package: this pickle holds tensors in torch's storage format "
                                          "(written by torch.package); ember reads only packages whose tensors "
                                          "ember.package wrote")
            raise RuntimeError("Unknown typename for persistent_load, expected 'ember', 'storage' or "
                               f"'reduce_package' but got '{kind}'")

        self.last_map_location = map_location
        try:
            return PackageUnpickler(self, io.BytesIO(data), persistent_load).load()
        finally:
            self.last_map_location = None

    def id(self) -> str:
        """This importer's mangle parent, e.g. ``<ember_package_0>``."""
        return self._mangler.parent_name()

    def file_structure(self, *, include="**", exclude=()):
        """The archive's files as a :class:`Directory` tree (filtered by glob patterns over paths)."""
        return _create_directory_from_file_list(self.filename, self.zip_reader.get_all_records(), include, exclude)

    def python_version(self):
        """The Python version the package was written with (None if it was not recorded)."""
        if self.zip_reader.has_record(".data/python_version"):
            return self.zip_reader.get_record(".data/python_version").decode("utf-8").strip()
        return None

    def get_source(self, module_name) -> str:
        module = self.import_module(demangle(module_name))
        return self.zip_reader.get_record(demangle(module.__file__)).decode("utf-8")

    def get_resource_reader(self, fullname):
        """importlib.resources support for packaged packages: their resources are archive records."""
        try:
            package = self._get_package(fullname)
        except (ImportError, TypeError):
            return None
        if package.__loader__ is not self:
            return None
        return _PackageResourceReader(self, fullname)

    # ------------------------------------------------------------------ the module tree
    def _get_or_create_package(self, atoms):
        cur = self.root
        for i, atom in enumerate(atoms):
            node = cur.children.get(atom)
            if node is None:
                node = cur.children[atom] = _PackageNode(None)
            if isinstance(node, _ExternNode):
                return node
            if isinstance(node, _ModuleNode):
                raise ImportError(f"inconsistent module structure. module {'.'.join(atoms[:i])} is not a package, "
                                  "but has submodules")
            cur = node
        return cur

    def _add_file(self, filename):
        *prefix, last = filename.split("/")
        if prefix and prefix[0] == ".data":
            return
        package = self._get_or_create_package(prefix)
        if isinstance(package, _ExternNode):
            raise ImportError(f"inconsistent module structure. package contains a module file {filename} that is a "
                              "subpackage of a module marked external.")
        if last == "__init__.py":
            package.source_file = filename
        elif last.endswith(".py"):
            package.children[last[:-3]] = _ModuleNode(filename)

    def _add_extern(self, name):
        *prefix, last = name.split(".")
        package = self._get_or_create_package(prefix)
        if not isinstance(package, _ExternNode):     # else a shorter extern already covers it
            package.children[last] = _ExternNode()

    # ------------------------------------------------------------------ loading
    def _make_module(self, name, filename, is_package, parent):
        mangled_filename = self._mangler.mangle(filename) if filename else None
        spec = importlib.machinery.ModuleSpec(name, self, origin="<package_importer>", is_package=is_package)
        module = importlib.util.module_from_spec(spec)
        self.modules[name] = module
        module.__name__ = self._mangler.mangle(name)
        ns = module.__dict__
        ns.update(__spec__=spec, __loader__=self, __file__=mangled_filename, __cached__=None,
                  __builtins__=self.patched_builtins, __torch_package__=True)
        _package_imported_modules[module.__name__] = module
        self._install_on_parent(parent, name, module)
        if filename is not None:
            linecache.lazycache(mangled_filename, ns)   # tracebacks and inspect.getsource see the source
            source = self.zip_reader.get_record(filename).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            try:
                exec(compile(source, mangled_filename, "exec", dont_inherit=True), ns)
            except BaseException:
                self.modules.pop(name, None)
                raise
        return module

    def _load_module(self, name, parent):
        cur = self.root
        for atom in name.split("."):
            if not isinstance(cur, _PackageNode) or atom not in cur.children:
                if name in IMPLICIT_IMPORT_ALLOWLIST:
                    module = self.modules[name] = importlib.import_module(name)
                    return module
                raise ModuleNotFoundError(
                    f'No module named "{name}" in self-contained archive "{self.filename}" and the module is also '
                    f"not in the list of allowed external modules: {self.extern_modules}", name=name)
            cur = cur.children[atom]
            if isinstance(cur, _ExternNode):
                module = self.modules[name] = importlib.import_module(name)
                return module
        return self._make_module(name, cur.source_file, isinstance(cur, _PackageNode), parent)

    def _install_on_parent(self, parent, name, module):
        if parent:
            parent_module = self.modules[parent]
            if getattr(parent_module, "__loader__", None) is self:
                setattr(parent_module, name.rpartition(".")[2], module)

    def _find_and_load(self, name):
        module = self.modules.get(name, _NEEDS_LOADING)
        if module is None:
            raise ModuleNotFoundError(f"import of {name} halted; None in sys.modules", name=name)
        if module is not _NEEDS_LOADING:
            if name == "os":
                self.modules["os.path"] = module.path
            return module
        parent = name.rpartition(".")[0]
        if parent:
            if parent not in self.modules:
                self._gcd_import(parent)
            if name in self.modules:          # importing the parent imported it
                return self.modules[name]
            if not hasattr(self.modules[parent], "__path__"):
                raise ModuleNotFoundError(f"No module named {name!r}; {parent!r} is not a package", name=name)
        module = self._load_module(name, parent)
        self._install_on_parent(parent, name, module)
        return module

    def _gcd_import(self, name, package=None, level=0):
        if not isinstance(name, str):
            raise TypeError(f"module name must be str, not {type(name)}")
        if level < 0:
            raise ValueError("level must be >= 0")
        if level > 0:
            if not isinstance(package, str):
                raise TypeError("__package__ not set to a string")
            if not package:
                raise ImportError("attempted relative import with no known parent package")
            name = resolve_name(name, package, level)
        elif not name:
            raise ValueError("Empty module name")
        return self._find_and_load(name)

    def _handle_fromlist(self, module, fromlist, *, recursive=False):
        module_name = demangle(module.__name__)
        if not hasattr(module, "__path__"):
            return module
        for x in fromlist:
            if not isinstance(x, str):
                where = module_name + ".__all__" if recursive else "``from list''"
                raise TypeError(f"Item in {where} must be str, not {type(x).__name__}")
            if x == "*":
                if not recursive and hasattr(module, "__all__"):
                    self._handle_fromlist(module, module.__all__, recursive=True)
            elif not hasattr(module, x):
                from_name = f"{module_name}.{x}"
                try:
                    self._gcd_import(from_name)
                except ModuleNotFoundError as exc:
                    # `from pkg import name` where name is neither a submodule nor an attribute:
                    # the import statement itself raises ImportError afterwards
                    if exc.name == from_name and self.modules.get(from_name, _NEEDS_LOADING) is not None:
                        continue
                    raise
        return module

    def __import__(self, name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            module = self._gcd_import(name)
        else:
            g = globals if globals is not None else {}
            package = g.get("__package__")
            if package is None:
                spec = g.get("__spec__")
                package = spec.parent if spec is not None else g["__name__"].rpartition(".")[0]
            module = self._gcd_import(name, package, level)
        if fromlist:
            return self._handle_fromlist(module, fromlist)
        if level == 0:
            return self._gcd_import(name.partition(".")[0])
        if not name:
            return module
        cut = len(name) - len(name.partition(".")[0])
        module_name = demangle(module.__name__)
        return self.modules[module_name[:len(module_name) - cut]]

    def _get_package(self, package):
        if hasattr(package, "__spec__"):
            if package.__spec__.submodule_search_locations is None:
                raise TypeError(f"{package.__spec__.name!r} is not a package")
            return package
        module = self.import_module(package)
        if module.__spec__.submodule_search_locations is None:
            raise TypeError(f"{package!r} is not a package")
        return module

    def _zipfile_path(self, package, resource=None):
        from .package_exporter import _normalize_resource
        name = demangle(self._get_package(package).__name__).replace(".", "/")
        return name if resource is None else f"{name}/{_normalize_resource(resource)}"

    def __repr__(self):
        return f"<PackageImporter {self.id()} of {self.filename!r}>"


class _PackageResourceReader:
    """importlib.abc.ResourceReader over one package of an archive."""

    def __init__(self, importer, fullname):
        self.importer = importer
        self.fullname = fullname

    def open_resource(self, resource):
        return io.BytesIO(self.importer.load_binary(self.fullname, resource))

    def resource_path(self, resource):
        raise FileNotFoundError(f"{resource!r} of {self.fullname!r} lives inside a package archive, not on disk")

    def is_resource(self, name):
        return self.importer.zip_reader.has_record(self.importer._zipfile_path(self.fullname, name))

    def contents(self):
        prefix = self.importer._zipfile_path(self.fullname) + "/"
        seen = {}
        for record in self.importer.zip_reader.get_all_records():
            if record.startswith(prefix):
                seen[record[len(prefix):].partition("/")[0]] = True
        return iter(seen)


class _StorageRecords:
    """ember.serialization's reader reads ``storages/<n>``; a package keeps them as ``.data/<n>.storage``."""

    def __init__(self, zip_reader):
        self._zip_reader = zip_reader

    def read(self, name):
        kind, _, n = name.partition("/")
        if kind != "storages":
            raise KeyError(name)
        return self._zip_reader.get_record(f".data/{n}.storage")


_orig_getfile = inspect.getfile


def _getfile(obj):
    """inspect.getfile for classes defined in packaged modules (their ``__module__`` is mangled)."""
    if inspect.isclass(obj):
        module = _package_imported_modules.get(obj.__module__)
        if module is not None:
            return module.__file__
    return _orig_getfile(obj)


if getattr(inspect.getfile, "__module__", None) != __name__:
    inspect.getfile = _getfile
