"""``PackageExporter``: writes code, pickled objects and resources into one archive.

How a package is built: every ``save_*`` call adds nodes to a dependency graph. Source of
interned modules is scanned (AST, nothing executed) for imports; pickles are scanned for the
globals they reference. Each discovered module is given an action by the first user pattern
that matches it (``intern``: copy its source and follow its imports; ``extern``: load it from
the host at import time; ``mock``: replace it with a stub whose attributes refuse to be used;
``deny``: an error). ``ember`` itself and the standard library (except ``sys`` and ``io``) are
extern without asking. ``close()`` validates the graph (every problem reported at once in a
``PackagingError``) and only then writes the sources.

Tensors inside pickles are stored in ember's own storage format: the pickle holds a
persistent id carrying the JSON node ``ember.save`` writes for the tensor, and its bytes are the
record ``.data/<n>.storage`` (little-endian, C order).
"""
from __future__ import annotations

import io
import json
import os
import pickletools
import platform
import sys
import uuid
from collections import OrderedDict, defaultdict
from enum import Enum
from pathlib import Path

from ._archive import ArchiveWriter
from ._dependencies import find_imports
from ._digraph import DiGraph
from ._glob import GlobGroup
from ._mangling import demangle, is_mangled
from ._package_pickler import create_pickler
from .importer import Importer, OrderedImporter, sys_importer

__all__ = ["PackageExporter", "PackagingError", "PackagingErrorReason", "EmptyMatchError"]

ARCHIVE_VERSION = "6"      # torch.package's .data/version (its readers check it)


class _ModuleProviderAction(Enum):
    INTERN = 1
    EXTERN = 2
    MOCK = 3
    DENY = 4
    REPACKAGED_MOCK_MODULE = 5     # the archive's own _mock module, when re-packaging
    SKIP = 6                       # torch_package_importer: provided by every PackageImporter


class PackagingErrorReason(Enum):
    """Why a module could not be packaged (the sections of a PackagingError's report)."""

    def __repr__(self):
        return f"<{self.__class__.__name__}.{self.name}>"

    IS_EXTENSION_MODULE = "Module is a C extension module. torch.package supports Python modules only."
    NO_DUNDER_FILE = "Module had no __file__ defined."
    SOURCE_FILE_NOT_FOUND = "Module had a __file__, but we could not find it in your filesystem."
    DEPENDENCY_RESOLUTION_FAILED = "Dependency resolution failed."
    NO_ACTION = "Module did not match against any action pattern. Extern, mock, or intern it."
    DENIED = "Module was denied by a pattern."
    MOCKED_BUT_STILL_USED = ("Module was mocked out, but is still being used in the package. Please intern or "
                             "extern the mocked modules if objects are supposed to be in the package.")


class _PatternInfo:
    def __init__(self, action, allow_empty):
        self.action = action
        self.allow_empty = allow_empty
        self.was_matched = False


class EmptyMatchError(Exception):
    """An ``intern``/``extern``/``mock`` pattern given ``allow_empty=False`` matched no module."""


_DISALLOWED_MODULES = ("sys", "io")


class PackagingError(Exception):
    """Every problem found while packaging, grouped by reason (``dependency_graph`` holds the graph)."""

    def __init__(self, dependency_graph, debug=False):
        broken = defaultdict(list)
        for name, attrs in dependency_graph.nodes.items():
            if attrs.get("error") is not None:
                broken[attrs["error"]].append(name)
        out = io.StringIO()
        out.write("\n")
        for reason, names in broken.items():
            out.write(f"* {reason.value}\n")
            for name in names:
                out.write(f"    {name}\n")
                context = dependency_graph.nodes[name].get("error_context")
                if context is not None:
                    out.write(f"      Context: {context}\n")
                if name in _DISALLOWED_MODULES:
                    out.write("      Note: While we usually use modules in the python standard library from the "
                              f"local environment, `{name}` has a lot of system level access and therefore can "
                              f"pose a security risk. We heavily recommend removing `{name}` from your packaged "
                              "code. However, if that is not possible, add it to the extern list by calling "
                              f'PackageExporter.extern("`{name}`")\n')
                if debug:
                    out.write(f"      A path to {name}: {' -> '.join(dependency_graph.first_path(name))}\n")
        if not debug:
            out.write("\nSet debug=True when invoking PackageExporter for a visualization of where broken "
                      "modules are coming from!\n")
        self.dependency_graph = dependency_graph
        super().__init__(out.getvalue())


def _is_stdlib(top_level: str) -> bool:
    return top_level in sys.stdlib_module_names


def _normalize_resource(resource: str) -> str:
    parent, name = os.path.split(resource)
    if parent:
        raise ValueError(f"{resource!r} must be only a file name")
    return name


def _read_source(filename) -> str:
    with open(filename, "rb") as fh:
        return fh.read().decode("utf-8")


_MOCK_IMPL = """\
from _mock import MockedObject
def __getattr__(attr: str):
    return MockedObject(__name__ + '.' + attr, _suppress_err=True)
"""


class PackageExporter:
    """Write a package: ``with PackageExporter("model.pt") as e: e.intern("my_models.**");
    e.save_pickle("model", "model.pkl", model)`` (see the module docstring)."""

    def __init__(self, f, importer=sys_importer, debug: bool = False):
        if isinstance(importer, Importer):
            self.importer = importer
        else:
            if not isinstance(importer, (list, tuple)):
                raise TypeError("importer arg should be an Importer or a sequence of Importers, "
                                f"got {type(importer)} instead.")
            self.importer = OrderedImporter(*importer)
        self.debug = debug
        self._archive = ArchiveWriter(f)
        self._written_files = set()
        self._closed = False
        self.dependency_graph = DiGraph()
        self.patterns = {}
        self._unique_id = 0
        self._extern_hooks = OrderedDict()
        self._mock_hooks = OrderedDict()
        self._intern_hooks = OrderedDict()
        self.serialized_reduces = {}
        self._tensor_writer = None            # ember.save's encoder (tensor nodes + raw storages), on first use
        self._tensor_nodes = {}               # id(tensor or storage) -> its JSON node text
        self._storages_written = 0

    # ------------------------------------------------------------------ patterns
    def _add_pattern(self, action, include, exclude, allow_empty):
        self._check_open()
        self.patterns[GlobGroup(include, exclude=exclude)] = _PatternInfo(action, allow_empty)

    def intern(self, include, *, exclude=(), allow_empty: bool = True):
        """Package the matching modules' source and follow their imports."""
        self._add_pattern(_ModuleProviderAction.INTERN, include, exclude, allow_empty)

    def extern(self, include, *, exclude=(), allow_empty: bool = True):
        """Load the matching modules from the host environment at import time."""
        self._add_pattern(_ModuleProviderAction.EXTERN, include, exclude, allow_empty)

    def mock(self, include, *, exclude=(), allow_empty: bool = True):
        """Replace the matching modules with stubs whose every attribute refuses to be used."""
        self._add_pattern(_ModuleProviderAction.MOCK, include, exclude, allow_empty)

    def deny(self, include, *, exclude=()):
        """Make a dependency on a matching module a PackagingError."""
        self._add_pattern(_ModuleProviderAction.DENY, include, exclude, True)

    # ------------------------------------------------------------------ hooks
    def _register(self, table, hook):
        from ..utils.hooks import RemovableHandle
        handle = RemovableHandle(table)
        table[handle.id] = hook
        return handle

    def register_extern_hook(self, hook):
        """``hook(exporter, module_name)`` runs for each externed module when the package is written."""
        return self._register(self._extern_hooks, hook)

    def register_mock_hook(self, hook):
        """``hook(exporter, module_name)`` runs for each mocked module when the package is written."""
        return self._register(self._mock_hooks, hook)

    def register_intern_hook(self, hook):
        """``hook(exporter, module_name)`` runs for each interned module when the package is written."""
        return self._register(self._intern_hooks, hook)

    # ------------------------------------------------------------------ modules
    def get_unique_id(self) -> str:
        """An id handed out only once in this package."""
        ret = str(self._unique_id)
        self._unique_id += 1
        return ret

    def _import_module(self, module_name):
        try:
            return self.importer.import_module(module_name)
        except ModuleNotFoundError:
            if not is_mangled(module_name):
                raise
            raise ModuleNotFoundError(f"Module not found: '{module_name}'. Make sure the PackageImporter that "
                                      "created this module is present in `self.importer`") from None

    def _module_exists(self, module_name) -> bool:
        try:
            self._import_module(module_name)
            return True
        except Exception:
            return False

    def _get_dependencies(self, src, module_name, is_package):
        package = module_name if is_package else module_name.rpartition(".")[0]
        try:
            pairs = find_imports(src, package)
        except Exception as e:
            self.dependency_graph.add_node(module_name, error=PackagingErrorReason.DEPENDENCY_RESOLUTION_FAILED,
                                           error_context=str(e))
            return []
        deps = {}
        for mod, attr in pairs:
            # `from pack import sub` with `sub` a submodule depends on pack.sub only
            if attr is not None and self._module_exists(f"{mod}.{attr}"):
                deps[f"{mod}.{attr}"] = True
            elif self._module_exists(mod):
                deps[mod] = True
        return list(deps)

    def save_source_string(self, module_name: str, src: str, is_package: bool = False, dependencies: bool = True):
        """Package ``src`` as the source of ``module_name`` (a package's ``__init__`` if ``is_package``)."""
        self._check_open()
        if not isinstance(module_name, str) or not module_name:
            raise TypeError(f"save_source_string: module_name must be a non-empty str, got {module_name!r}")
        self.dependency_graph.add_node(module_name, source=src, is_package=is_package, provided=True,
                                       action=_ModuleProviderAction.INTERN)
        if dependencies:
            for dep in self._get_dependencies(src, module_name, is_package):
                self.dependency_graph.add_edge(module_name, dep)
                self.add_dependency(dep)

    def save_source_file(self, module_name: str, file_or_directory: str, dependencies: bool = True):
        """Package a source file, or every ``.py`` file of a directory tree under ``module_name``."""
        path = Path(file_or_directory)
        if not path.is_dir():
            self.save_source_string(module_name, _read_source(path), path.name == "__init__.py", dependencies)
            return
        base = module_name.replace(".", "/")
        todo = []       # all files first, so that their dependencies resolve to the directory's modules
        for p in sorted(path.glob("**/*.py")):
            archived = f"{base}/{p.relative_to(path).as_posix()}"
            if p.name == "__init__.py":
                todo.append((archived[:-len("/__init__.py")].replace("/", "."), _read_source(p), True))
            else:
                todo.append((archived[:-len(".py")].replace("/", "."), _read_source(p), False))
        for name, src, is_pkg in todo:
            self.save_source_string(name, src, is_pkg, dependencies)

    def _can_implicitly_extern(self, module_name):
        top = module_name.partition(".")[0]
        return top == "ember" or (top not in _DISALLOWED_MODULES and _is_stdlib(top))

    def add_dependency(self, module_name: str, dependencies: bool = True):
        """Give ``module_name`` the action of the first pattern that matches it (see the module docstring)."""
        node = self.dependency_graph.nodes.get(module_name)
        if node is not None and node.get("provided") is True:
            return
        if module_name == "torch_package_importer":
            self.dependency_graph.add_node(module_name, action=_ModuleProviderAction.SKIP, provided=True)
            return
        if module_name == "_mock":
            self.dependency_graph.add_node(module_name, action=_ModuleProviderAction.REPACKAGED_MOCK_MODULE,
                                           provided=True)
            return
        if self._can_implicitly_extern(module_name):
            self.dependency_graph.add_node(module_name, action=_ModuleProviderAction.EXTERN, provided=True)
            return
        for pattern, info in self.patterns.items():
            if pattern.matches(module_name):
                info.was_matched = True
                self.dependency_graph.add_node(module_name, action=info.action, provided=True)
                if info.action is _ModuleProviderAction.DENY:
                    self.dependency_graph.add_node(module_name, error=PackagingErrorReason.DENIED)
                elif info.action is _ModuleProviderAction.INTERN:
                    self._intern_module(module_name, dependencies)
                return
        self.dependency_graph.add_node(module_name, error=PackagingErrorReason.NO_ACTION)

    def save_module(self, module_name: str, dependencies: bool = True):
        """Package the source of the (importable) module ``module_name``."""
        if not isinstance(module_name, str):
            raise TypeError("save_module() expects a string input, did you perhaps mean to pass `__name__`?")
        self._check_open()
        self._intern_module(module_name, dependencies)

    def _source_of(self, module):
        import linecache
        from importlib.machinery import SourceFileLoader
        filename = None
        spec = getattr(module, "__spec__", None)
        if spec is not None and isinstance(getattr(spec, "loader", None), SourceFileLoader):
            try:
                filename = spec.loader.get_filename(module.__name__)
            except ImportError:
                pass
        if filename is None:
            filename = getattr(module, "__file__", None)
        if isinstance(filename, str) and filename.endswith(".py"):
            lines = linecache.getlines(filename, module.__dict__)
            if lines:
                return "".join(lines)
        if getattr(module, "__torch_package__", False) and hasattr(module.__loader__, "get_source"):
            return module.__loader__.get_source(module.__name__)   # a module loaded from another package
        return None

    def _intern_module(self, module_name, dependencies):
        import importlib.machinery
        module = self._import_module(module_name)
        module_name = demangle(module_name)       # imported fine: safe to store the plain name
        is_package = hasattr(module, "__path__")
        source = self._source_of(module)
        if source is None:
            filename = getattr(module, "__file__", None)
            context = None
            if filename is None:
                reason = PackagingErrorReason.NO_DUNDER_FILE
            elif filename.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                reason = PackagingErrorReason.IS_EXTENSION_MODULE
            else:
                reason = PackagingErrorReason.SOURCE_FILE_NOT_FOUND
                context = f"filename: {filename}"
            self.dependency_graph.add_node(module_name, action=_ModuleProviderAction.INTERN, is_package=is_package,
                                           error=reason, error_context=context, provided=True)
            return
        self.dependency_graph.add_node(module_name, action=_ModuleProviderAction.INTERN, is_package=is_package,
                                       source=source, provided=True)
        if dependencies:
            for dep in self._get_dependencies(source, module_name, is_package):
                self.dependency_graph.add_edge(module_name, dep)
                self.add_dependency(dep)

    # ------------------------------------------------------------------ pickles and resources
    def _persistent_id(self, obj):
        from ..storage import TypedStorage, UntypedStorage
        from ..tensor import Tensor
        if isinstance(obj, (Tensor, UntypedStorage, TypedStorage)):
            text = self._tensor_nodes.get(id(obj))
            if text is None:
                if self._tensor_writer is None:
                    from ..serialization import _Writer
                    self._tensor_writer = _Writer()
                node = self._tensor_writer.encode(obj, path=f"a {type(obj).__name__} in a pickle")
                text = self._tensor_nodes[id(obj)] = json.dumps(node, separators=(",", ":"))
            return ("ember", text)
        if hasattr(obj, "__reduce_package__"):
            if id(obj) not in self.serialized_reduces:
                self.serialized_reduces[id(obj)] = ("reduce_package", id(obj), *obj.__reduce_package__(self))
            return self.serialized_reduces[id(obj)]
        return None

    def _flush_storages(self):
        if self._tensor_writer is None:
            return
        storages = self._tensor_writer.storages
        for i in range(self._storages_written, len(storages)):
            self._write(f".data/{i}.storage", storages[i])
            storages[i] = b""             # written: drop the bytes, keep the numbering
        self._storages_written = len(storages)

    def save_pickle(self, package: str, resource: str, obj, dependencies: bool = True, pickle_protocol: int = 3):
        """Pickle ``obj`` as ``<package>/<resource>``; classes and functions are saved by reference to
        their modules, which become dependencies of the package (see the module docstring)."""
        self._check_open()
        if pickle_protocol not in (3, 4):
            raise AssertionError(f"torch.package only supports pickle protocols 3 and 4, got {pickle_protocol}")
        filename = self._filename(package, resource)
        buf = io.BytesIO()
        create_pickler(buf, self.importer, pickle_protocol, self._persistent_id).dump(obj)
        data = buf.getvalue()
        node_name = f"<{package}.{resource}>"
        self.dependency_graph.add_node(node_name, action=_ModuleProviderAction.INTERN, provided=True, is_pickle=True)
        if dependencies:
            mocked = defaultdict(list)
            globals_used = _pickled_globals(data)
            for module, field in globals_used:
                if self._can_implicitly_extern(module):
                    continue
                for pattern, info in self.patterns.items():
                    if pattern.matches(module):
                        if info.action is _ModuleProviderAction.MOCK:
                            mocked[module].append(field)
                        break
            for module in dict.fromkeys(m for m, _ in globals_used):
                self.dependency_graph.add_edge(node_name, module)
                if module in mocked:
                    self.dependency_graph.add_node(
                        module, action=_ModuleProviderAction.MOCK, error=PackagingErrorReason.MOCKED_BUT_STILL_USED,
                        error_context=f"Object(s) '{mocked[module]}' from module `{module}` was mocked out during "
                                      f"packaging but is being used in resource - `{resource}` in package "
                                      f"`{package}`. ", provided=True)
                else:
                    self.add_dependency(module)
        self._flush_storages()
        self._write(filename, data)

    def save_text(self, package: str, resource: str, text: str):
        """Store ``text`` (UTF-8) as ``<package>/<resource>``."""
        if not isinstance(text, str):
            raise TypeError(f"save_text: text must be a str, got {type(text).__name__}")
        return self.save_binary(package, resource, text.encode("utf-8"))

    def save_binary(self, package, resource, binary: bytes):
        """Store raw bytes as ``<package>/<resource>``."""
        self._check_open()
        if not isinstance(binary, (bytes, bytearray, memoryview)):
            raise TypeError(f"save_binary: binary must be bytes, got {type(binary).__name__}")
        self._write(self._filename(package, resource), bytes(binary))

    # ------------------------------------------------------------------ writing
    def _check_open(self):
        if self._closed:
            raise RuntimeError("PackageExporter: this package was already closed; create a new PackageExporter")

    def _filename(self, package, resource):
        return f"{package.replace('.', '/')}/{_normalize_resource(resource)}"

    def _write(self, filename, data):
        if filename in self._written_files:
            raise AssertionError(f"Tried to write file '{filename}', but it already exists in this archive. "
                                 "Please file a bug.")
        if is_mangled(filename):
            raise AssertionError(f"Tried to save a torch.package'd module as '{filename}'. Directly saving "
                                 "torch.package'd modules is not allowed.")
        self._written_files.add(filename)
        self._archive.write_record(filename, data.encode("utf-8") if isinstance(data, str) else data)

    def _write_source_string(self, module_name, src, is_package=False):
        self._write(module_name.replace(".", "/") + ("/__init__.py" if is_package else ".py"), src)

    def _write_mock_file(self):
        if "_mock.py" not in self._written_files:
            self._write_source_string("_mock", _read_source(Path(__file__).parent / "_mock.py"))

    def _validate_dependency_graph(self):
        for attrs in self.dependency_graph.nodes.values():
            if "error" in attrs:
                raise PackagingError(self.dependency_graph, debug=self.debug)
        for pattern, info in self.patterns.items():
            if not info.allow_empty and not info.was_matched:
                raise EmptyMatchError(f"Exporter did not match any modules to {pattern}, which was marked as "
                                      "allow_empty=False")

    def _execute_dependency_graph(self):
        self._validate_dependency_graph()
        externs = []
        A = _ModuleProviderAction
        for name, attrs in self.dependency_graph.nodes.items():
            action = attrs["action"]
            if action is A.EXTERN:
                for hook in list(self._extern_hooks.values()):
                    hook(self, name)
                externs.append(name)
            elif action is A.MOCK:
                for hook in list(self._mock_hooks.values()):
                    hook(self, name)
                self._write_mock_file()
                self._write_source_string(name, _MOCK_IMPL, hasattr(self._import_module(name), "__path__"))
            elif action is A.INTERN:
                for hook in list(self._intern_hooks.values()):
                    hook(self, name)
                if attrs.get("is_pickle"):
                    continue
                self._write_source_string(name, attrs["source"], attrs["is_package"])
            elif action is A.REPACKAGED_MOCK_MODULE:
                self._write_mock_file()
            # SKIP: nothing to write
        self._write(".data/extern_modules", "\n".join(externs) + "\n")

    def close(self):
        """Validate the dependency graph and write the package (``with`` does this on exit)."""
        self._check_open()
        try:
            self._execute_dependency_graph()
        except BaseException:
            self._finalize()      # a closed, incomplete archive; the error says what is wrong
            raise
        self._write(".data/python_version", platform.python_version())
        self._write(".data/version", ARCHIVE_VERSION + "\n")
        self._write("byteorder", sys.byteorder)
        self._write(".data/serialization_id", uuid.uuid4().hex + uuid.uuid4().hex[:8])
        self._finalize()

    def _finalize(self):
        self._closed = True
        self._archive.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, tb):
        if exc_type is not None:      # leave a closed (but unusable) archive; the error propagates
            if not self._closed:
                self._finalize()
            return
        self.close()

    # ------------------------------------------------------------------ inspection
    def dependency_graph_string(self) -> str:
        """The dependency graph in graphviz dot syntax."""
        return self.dependency_graph.to_dot()

    def all_paths(self, src: str, dst: str) -> str:
        """Dot text of the subgraph of every dependency path from ``src`` to ``dst``."""
        return self.dependency_graph.all_paths(src, dst)

    def _nodes_with_action(self, action):
        return sorted(n for n, a in self.dependency_graph.nodes.items()
                      if a.get("action") is action and "is_pickle" not in a)

    def externed_modules(self):
        return self._nodes_with_action(_ModuleProviderAction.EXTERN)

    def interned_modules(self):
        return self._nodes_with_action(_ModuleProviderAction.INTERN)

    def mocked_modules(self):
        return self._nodes_with_action(_ModuleProviderAction.MOCK)

    def denied_modules(self):
        return self._nodes_with_action(_ModuleProviderAction.DENY)

    def get_rdeps(self, module_name: str):
        """The modules (and pickles) that depend on ``module_name``."""
        return list(self.dependency_graph._pred.get(module_name, {}))


def _pickled_globals(data: bytes):
    """``(module, name)`` of every global a protocol 3/4 pickle references, in order.

    Protocol 3 names globals inline (GLOBAL "module name"); protocol 4 pushes the two strings
    (possibly fetched back from the memo) before STACK_GLOBAL, so the last two strings seen
    are the module and the name."""
    out = []
    memo = {}
    recent = [None, None]          # the last two values pushed (None: not a string)
    count = 0
    for op, arg, _pos in pickletools.genops(data):
        name = op.name
        if name == "GLOBAL":
            module, _, field = arg.partition(" ")
            out.append((module, field))
            recent = [recent[1], None]
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            recent = [recent[1], arg]
        elif name == "MEMOIZE":
            memo[count] = recent[1]
            count += 1
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = recent[1]
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            recent = [recent[1], memo.get(arg)]
        elif name == "STACK_GLOBAL":
            if isinstance(recent[0], str) and isinstance(recent[1], str):
                out.append((recent[0], recent[1]))
            recent = [None, None]
        elif name not in ("PROTO", "FRAME"):
            recent = [recent[1], None]
    return out
