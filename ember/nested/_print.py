"""``repr`` of nested tensors, as PyTorch prints them.

strided: ``nested_tensor([\\n  <component repr, indented>,\\n  ...\\n])`` with the
components printed as leaves (``requires_grad=True`` when the nested tensor
requires grad) and the nested tensor's own ``requires_grad=True`` /
``grad_fn=<...>`` after the list; jagged: ``NestedTensor(size=(2, j1, 3),
offsets=tensor([0, 2, 3]), contiguous=True)`` (with ``lengths`` views are
not contiguous), with ``requires_grad=True`` / ``grad_fn=<MulBackward0 object at 0x...>``
before ``contiguous`` as torch's.
"""
from __future__ import annotations

from .. import _layout as L


def _component_repr(c, requires_grad):
    c = c.detach()
    if requires_grad:
        c.requires_grad_(True)
    return repr(c)


def nested_repr(nt):
    rg = nt.requires_grad
    if nt.layout is L.jagged:
        size = ", ".join(str(s) for s in nt.size())
        offs = nt.offsets()
        # torch prints the grad_fn object's own repr here ("<MulBackward0 object at 0x...>")
        fn = nt.grad_fn if rg else None
        grad = "" if not rg else ", requires_grad=True" if fn is None else f", grad_fn={fn!r}"
        return f"NestedTensor(size=({size}), offsets={offs!r}{grad}, contiguous={nt.is_contiguous()})"
    parts = []
    for c in nt.unbind():
        text = _component_repr(c, rg)
        parts.append("  " + text.replace("\n", "\n  "))
    body = ",\n".join(parts)
    tail = ""
    if rg:
        fn = nt.grad_fn
        tail = ", requires_grad=True" if fn is None else f", grad_fn=<{type(fn).__name__}>"
    if not parts:
        return f"nested_tensor([\n\n]{tail})"
    return f"nested_tensor([\n{body}\n]{tail})"
