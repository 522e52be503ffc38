"""Sources: where a value the translator read lives, as a Python expression.

Every value that comes from outside the frame (arguments, globals, closure
cells, attributes and items of those) carries a source. Guards and the
runtime input extraction are both generated from ``source.expr()``, so the
value a guard checks is exactly the value the graph receives.

Expressions are written against the names the generated functions define:
``a0, a1, ...`` (argument slots), ``__func`` (the function object), ``G``
(its globals dict) and ``B`` (builtins)."""


class Source:
    def expr(self) -> str:
        raise NotImplementedError

    def name(self) -> str:
        """A readable identifier for placeholders (``L_x``, ``self_weight``)."""
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self.expr() == other.expr()

    def __hash__(self):
        return hash(self.expr())

    def __repr__(self):
        return f"{type(self).__name__}({self.expr()})"


class LocalSource(Source):
    def __init__(self, varname, index):
        self.varname, self.index = varname, index

    def expr(self):
        return f"a{self.index}"

    def name(self):
        return f"L_{self.varname}"


class GlobalSource(Source):
    def __init__(self, gname):
        self.gname = gname

    def expr(self):
        return f"G[{self.gname!r}]"

    def name(self):
        return f"G_{self.gname}"


class BuiltinSource(Source):
    def __init__(self, bname):
        self.bname = bname

    def expr(self):
        return f"B[{self.bname!r}]"

    def name(self):
        return f"B_{self.bname}"


class ClosureSource(Source):
    def __init__(self, fn_source, index, varname):
        self.fn_source, self.index, self.varname = fn_source, index, varname

    def expr(self):
        return f"{self.fn_source.expr()}.__closure__[{self.index}].cell_contents"

    def name(self):
        return f"C_{self.varname}"


class FuncSource(Source):
    """The frame's own function object."""

    def expr(self):
        return "__func"

    def name(self):
        return "func"


class GuardGlobalSource(Source):
    """An object ember itself holds (a ``substitute_in_graph`` polyfill), reachable from the
    guard and compiled functions under the name ``GuardSet.ref`` gave it (``oN``): gives the
    values read through it (its closure cells, its globals) real sources, so their mutations
    are replayed and reads guarded like any outside value's."""

    def __init__(self, ref, label):
        self.ref, self.label = ref, label

    def expr(self):
        return self.ref

    def name(self):
        return f"O_{self.label}"


class AttrSource(Source):
    # expr() is kept once made: sources are never changed, and comparing them (``__eq__``: an
    # optimizer step looks each parameter's grad up among the graph inputs) built every chain's
    # text again, ~17,000 expr() calls in a 40-parameter AdamW step's trace
    def __init__(self, base, attr):
        self.base, self.attr = base, attr
        self._expr = None

    def expr(self):
        e = self._expr
        if e is None:
            e = self._expr = f"{self.base.expr()}.{self.attr}"
        return e

    def name(self):
        if self.attr in ("_parameters", "_buffers", "_modules"):
            return self.base.name()
        return f"{self.base.name()}_{self.attr}"


class GetItemSource(Source):
    def __init__(self, base, key):
        self.base, self.key = base, key
        self._expr = None

    def expr(self):
        e = self._expr
        if e is None:
            e = self._expr = f"{self.base.expr()}[{self.key!r}]"
        return e

    def name(self):
        return f"{self.base.name()}_{self.key}"


def placeholder_name(source) -> str:
    import re
    n = re.sub(r"\W", "_", source.name())
    return n if n and not n[0].isdigit() else "_" + n
