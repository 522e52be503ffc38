"""ember.package: torch.package for ember -- self-contained archives of code, pickled objects
(tensors in ember's storage format) and resources, loaded back hermetically.

``PackageExporter`` writes (package_exporter.py), ``PackageImporter`` reads
(package_importer.py); ``sys_importer`` / ``OrderedImporter`` (importer.py) say where the
exporter finds modules. The archive layout is torch.package's: ``<name>/.data/...``,
``<name>/<package>/<resource>``, ``<name>/<module path>.py``.
"""
from .analyze.is_from_package import is_from_package
from .file_structure_representation import Directory
from ._glob import GlobGroup
from .importer import Importer, ObjMismatchError, ObjNotFoundError, OrderedImporter, sys_importer
from .package_exporter import EmptyMatchError, PackageExporter, PackagingError, PackagingErrorReason
from .package_importer import PackageImporter

__all__ = ["is_from_package", "Directory", "GlobGroup", "Importer", "ObjMismatchError", "ObjNotFoundError",
           "OrderedImporter", "sys_importer", "EmptyMatchError", "PackageExporter", "PackagingError",
           "PackagingErrorReason", "PackageImporter"]
