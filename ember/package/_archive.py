"""The archive container: torch.package's zip layout, written and read with ``zipfile``.

Every record lives under one top folder named after the file (``model.pt`` -> ``model/``,
a buffer -> ``archive/``), as torch's zip writer lays it out; readers strip that folder, so
record names are archive-relative (``.data/extern_modules``, ``my_pkg/model.pkl``,
``my_pkg/__init__.py``). Records are stored uncompressed. An unzipped package directory
can be read too.
"""
from __future__ import annotations

import glob
import os
import zipfile

__all__ = ["ArchiveWriter", "open_reader"]


class ArchiveWriter:
    def __init__(self, f):
        if isinstance(f, (str, os.PathLike)):
            path = os.fspath(f)
            self._fh = open(path, "wb")
            self._owned = True
            self.archive_name = os.path.splitext(os.path.basename(path))[0] or "archive"
        else:
            if not hasattr(f, "write"):
                raise TypeError(f"PackageExporter: f must be a path (str or os.PathLike) or a writable binary "
                                f"buffer, got {type(f).__name__}")
            self._fh = f
            self._owned = False
            self.archive_name = "archive"
        self._zip = zipfile.ZipFile(self._fh, "w", compression=zipfile.ZIP_STORED)

    def write_record(self, name: str, data: bytes):
        self._zip.writestr(f"{self.archive_name}/{name}", data)

    def close(self):
        self._zip.close()
        if self._owned:
            self._fh.close()
        elif hasattr(self._fh, "flush"):
            self._fh.flush()


class _ZipReader:
    def __init__(self, f):
        try:
            self._zip = zipfile.ZipFile(f)
        except zipfile.BadZipFile:
            raise RuntimeError("PackageImporter: not a package archive (not a zip file)") from None
        names = [n for n in self._zip.namelist() if not n.endswith("/")]
        if not names:
            raise RuntimeError("PackageImporter: not a package archive (the zip file is empty)")
        top = names[0].partition("/")[0]
        self._records = {}
        for n in names:
            head, sep, rest = n.partition("/")
            if head != top or not sep:
                raise RuntimeError(f"PackageImporter: not a package archive (record {n!r} is not under the "
                                   f"archive's top folder {top!r}/)")
            self._records[rest] = n

    def get_record(self, name):
        try:
            return self._zip.read(self._records[name])
        except KeyError:
            raise KeyError(f"PackageImporter: the archive has no record {name!r}") from None

    def has_record(self, name):
        return name in self._records

    def get_all_records(self):
        return list(self._records)


class _DirectoryReader:
    """An unzipped package: records are files under ``directory``."""

    def __init__(self, directory):
        self.directory = directory

    def get_record(self, name):
        with open(os.path.join(self.directory, name), "rb") as fh:
            return fh.read()

    def has_record(self, name):
        return os.path.isfile(os.path.join(self.directory, name))

    def get_all_records(self):
        root = self.directory.rstrip("/")
        return [p[len(root) + 1:] for p in glob.glob(f"{glob.escape(root)}/**", recursive=True)
                if not os.path.isdir(p)]


def open_reader(file_or_buffer):
    """(reader, filename) for a path, a package directory, or a readable binary buffer."""
    if isinstance(file_or_buffer, (str, os.PathLike)):
        path = os.fspath(file_or_buffer)
        if os.path.isdir(path):
            return _DirectoryReader(path), path
        return _ZipReader(path), path
    if not hasattr(file_or_buffer, "read"):
        raise TypeError(f"PackageImporter: file_or_buffer must be a path, a directory or a readable binary "
                        f"buffer, got {type(file_or_buffer).__name__}")
    return _ZipReader(file_or_buffer), "<binary>"
