"""Memory layouts: ``ember.strided``, ``ember.sparse_coo``, ``ember.sparse_csr``, ...

PyTorch exposes each layout as a singleton of ``torch.layout`` whose repr is
``torch.<name>``. ember's layouts are the same kind of singleton, printed
``ember.<name>`` as ember prints its dtypes (``ember.float64``): tensor reprs
are PyTorch's with ``torch.`` replaced by ``ember.``. ember used
the plain string ``"strided"`` before sparse tensors existed, and code (ours
and users') compares ``t.layout == "strided"`` or passes ``layout="strided"``:
a layout therefore compares equal to its own name (and hashes like it), so
those comparisons keep working.
"""
from __future__ import annotations


class layout:
    """A tensor layout (``torch.layout``): one instance per name, made below."""

    __slots__ = ("_name",)
    _BY_NAME: dict = {}

    def __new__(cls, name=None):
        if name is None or name not in cls._BY_NAME:
            raise TypeError("cannot create 'ember.layout' instances")
        return cls._BY_NAME[name]

    @classmethod
    def _make(cls, name):
        self = object.__new__(cls)
        self._name = name
        cls._BY_NAME[name] = self
        return self

    def __repr__(self):
        return f"ember.{self._name}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self._name
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._name)

    def __reduce__(self):
        return (_by_name, (self._name,))


def _by_name(name):
    return layout._BY_NAME[name]


strided = layout._make("strided")
sparse_coo = layout._make("sparse_coo")
sparse_csr = layout._make("sparse_csr")
sparse_csc = layout._make("sparse_csc")
sparse_bsr = layout._make("sparse_bsr")
sparse_bsc = layout._make("sparse_bsc")
_mkldnn = layout._make("_mkldnn")
jagged = layout._make("jagged")   # ember.nested's packed-values layout


def as_layout(value):
    """``value`` (a layout or its name, e.g. ``"strided"``) as a layout; None stays None."""
    if value is None or isinstance(value, layout):
        return value
    if isinstance(value, str) and value in layout._BY_NAME:
        return layout._BY_NAME[value]
    raise TypeError(f"expected a torch.layout, got {type(value).__name__}")
