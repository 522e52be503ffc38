"""What Python source imports: an AST scan (nothing is executed).

Returns ``(module, attr)`` pairs in first-seen order: ``import a.b`` gives ``("a.b", None)``,
``from a import b`` gives ``("a", "b")`` (``b`` may be a submodule or an object: the exporter
decides), relative imports are resolved against the module's package, and literal
``__import__("x", ..., fromlist=[...], level=n)`` calls are understood too.
"""
from __future__ import annotations

import ast

__all__ = ["resolve_name", "find_imports"]


def resolve_name(name: str, package: str, level: int) -> str:
    """The absolute name of a relative import ``from <level dots><name> import ...``."""
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        raise ValueError("attempted relative import beyond top-level package")
    return f"{bits[0]}.{name}" if name else bits[0]


class _ImportScanner(ast.NodeVisitor):
    def __init__(self, package: str):
        self.package = package
        self.refs = {}

    def _abs(self, name, level):
        return resolve_name(name or "", self.package, level) if level else name

    def visit_Import(self, node):
        for alias in node.names:
            self.refs[(alias.name, None)] = True

    def visit_ImportFrom(self, node):
        base = self._abs(node.module, node.level or 0)
        for alias in node.names:
            self.refs[(base, None if alias.name == "*" else alias.name)] = True

    def visit_Call(self, node):
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "__import__"):
            return
        args = {i: a for i, a in enumerate(node.args)}
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        name_node = args.get(0, kw.get("name"))
        from_node = args.get(3, kw.get("fromlist"))
        level_node = args.get(4, kw.get("level"))
        try:      # only literal arguments can be followed statically
            name = ast.literal_eval(name_node)
            fromlist = list(ast.literal_eval(from_node)) if from_node is not None else []
            level = ast.literal_eval(level_node) if level_node is not None else 0
        except (ValueError, TypeError, SyntaxError):
            return
        if not isinstance(name, str):
            return
        if not fromlist:
            self.refs[(name, None)] = True
            parent = name.rpartition(".")[0]
            if parent:
                self.refs[(self._abs(parent, level), None)] = True
            return
        base = self._abs(name, level)
        for item in fromlist:
            self.refs[(base, None if item == "*" else item)] = True


def find_imports(src: str, package: str) -> list:
    """``(module, attr_or_None)`` pairs that ``src`` (a module of package ``package``) imports."""
    scanner = _ImportScanner(package)
    scanner.visit(ast.parse(src))
    return list(scanner.refs)
