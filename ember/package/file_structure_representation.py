"""``PackageImporter.file_structure()``: the archive's files as a printable tree."""
from __future__ import annotations

from ._glob import GlobGroup

__all__ = ["Directory"]

_TEE, _LAST, _ROOT = "\u251c\u2500\u2500 ", "\u2514\u2500\u2500 ", "\u2500\u2500\u2500 "
_BRANCH, _SPACE = "\u2502   ", "    "


class Directory:
    """A directory (``is_dir``) or file node of a package's file tree; ``children`` by name."""

    def __init__(self, name: str, is_dir: bool):
        self.name = name
        self.is_dir = is_dir
        self.children: dict = {}

    def _get_dir(self, parts):
        node = self
        for part in parts:
            node = node.children.setdefault(part, Directory(part, True))
        return node

    def _add_file(self, file_path: str):
        *dirs, name = file_path.split("/")
        self._get_dir(dirs).children[name] = Directory(name, False)

    def has_file(self, filename: str) -> bool:
        """Whether ``filename`` (a ``/``-separated path relative to this directory) exists here."""
        head, _, rest = filename.partition("/")
        child = self.children.get(head)
        if child is None:
            return False
        return True if not rest else child.has_file(rest)

    def __str__(self):
        lines = []
        self._render(lines, "", _ROOT)
        return "".join(lines)

    def _render(self, lines, preamble, pointer):
        # directories first, then files, each sorted by name (torch's layout)
        lines.append(f"{preamble}{pointer}{self.name}\n")
        preamble += _BRANCH if pointer == _TEE else _SPACE
        dirs = sorted(k for k, v in self.children.items() if v.is_dir)
        files = sorted(k for k, v in self.children.items() if not v.is_dir)
        for i, key in enumerate(dirs):
            last = i == len(dirs) - 1 and not files
            self.children[key]._render(lines, preamble, _LAST if last else _TEE)
        for i, key in enumerate(files):
            lines.append(f"{preamble}{_LAST if i == len(files) - 1 else _TEE}{key}\n")


def _create_directory_from_file_list(filename, file_list, include="**", exclude=()):
    """The tree named ``filename`` of the files in ``file_list`` that match include/exclude."""
    pattern = GlobGroup(include, exclude=exclude, separator="/")
    top = Directory(filename, True)
    for f in file_list:
        if pattern.matches(f):
            top._add_file(f)
    return top
