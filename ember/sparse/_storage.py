"""What a sparse tensor puts where a dense tensor keeps its array.

Every dense kernel of ember's dispatcher reads ``tensor._data`` (a numpy or
cupy array) and computes on it; nothing on the way asks for the layout. A
sparse tensor is a ``Tensor`` too (``isinstance(s, ember.Tensor)`` is true, as
in PyTorch), so any op not written for sparse layouts reaches such a kernel.
To make that fail loudly instead of computing on garbage, a sparse tensor's
``_data`` is a ``SparseStorage``: it answers the metadata the dispatcher and
the autograd engine read without looking at values (``shape``, ``ndim``), and
*everything else* -- numpy's array protocols, ufuncs, attribute reads such as
``.strides`` or ``.dtype``, indexing, arithmetic, truthiness -- raises
PyTorch's ``NotImplementedError`` ("Could not run 'aten::cumsum' with
arguments from the 'SparseCPU' backend"). The op's name is found on the
stack: the dispatcher's frames hold the ``OpDef`` being run.
"""
from __future__ import annotations

import sys

from .._refusing_storage import RefusingStorage


def backend_name(layout, device) -> str:
    """PyTorch's dispatch-key name of a sparse layout on a device: SparseCPU, SparseCsrCPU, ..."""
    from .. import _layout as L
    base = "Sparse" if layout is L.sparse_coo else "SparseCsr"
    dev = getattr(device, "type", "cpu")
    return base + ("CPU" if dev == "cpu" else dev.upper())


def _running_op():
    """The ``OpDef`` whose kernel (or meta) is on the stack, innermost first; None if none."""
    from ..ops.registry import OpDef
    f = sys._getframe(2)
    depth = 0
    while f is not None and depth < 60:
        if f.f_code.co_filename.startswith("<ember op"):
            # a generated binding or run function: its namespace holds the op as ``_op``
            cand = f.f_globals.get("_op")
            if isinstance(cand, OpDef):
                return cand
        loc = f.f_locals
        for cand in (loc.get("op"), loc.get("self")):   # registry.dispatch / OpDef.run
            if isinstance(cand, OpDef):
                return cand
        f = f.f_back
        depth += 1
    return None


def unsupported_error(layout, device, what=None) -> NotImplementedError:
    """PyTorch's error for an op with no kernel for a sparse layout, naming the op and layout."""
    op = _running_op()
    backend = backend_name(layout, device)
    if op is not None:
        name = op.name
        return NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the '{backend}' backend. ember.sparse "
            f"has no {layout} implementation of '{name}' (the supported operations are listed in "
            f"ember.sparse's documentation); convert the tensor with .to_dense() first.")
    return NotImplementedError(
        f"ember.sparse: {what or 'this operation'} is not supported for a tensor with layout {layout} "
        f"('{backend}' backend): it needs dense storage, which a sparse tensor does not have; "
        f"convert the tensor with .to_dense() first.")


class SparseStorage(RefusingStorage):
    """The ``_data`` of a sparse tensor: its shape, and an error for any other use."""

    __slots__ = ("shape", "ndim", "_layout", "_device")

    def __init__(self, shape, layout, device):
        self.shape = tuple(int(s) for s in shape)
        self.ndim = len(self.shape)
        self._layout = layout
        self._device = device

    def _fail(self, what):
        raise unsupported_error(self._layout, self._device, what)

    def __repr__(self):
        return f"<sparse storage of layout {self._layout}, shape {self.shape}>"

