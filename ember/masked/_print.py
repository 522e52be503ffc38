"""``repr`` of a MaskedTensor in PyTorch's format: nested brackets, ``{:8.4f}`` for floats,
``str()`` for ints and bools, and ``--`` (right-aligned to 8) for masked-out elements."""
from __future__ import annotations

_FMT = "{0:8.4f}"


def _fmt(v):
    return _FMT.format(v) if isinstance(v, float) else str(v)


def _rows(data, mask):
    """data / mask: nested Python lists of one tensor's elements (at least 1-d)."""
    if not isinstance(data[0] if data else None, list):
        elems = [_fmt(d) for d in data]
        # as PyTorch: the width is 8 when any element is masked out, else the widest element
        width = max((8 if not m else len(e) for e, m in zip(elems, mask)), default=0)
        return "[" + ", ".join(e if m else "--".rjust(width) for e, m in zip(elems, mask)) + "]"
    subs = [_rows(d, m) for d, m in zip(data, mask)]
    subs = ["\n".join("  " + line for line in s.split("\n")) for s in subs]
    return "[\n" + ",\n".join(subs) + "\n]"


def masked_repr(mt):
    data, mask = mt._masked_data, mt._masked_mask
    if data.dim() == 0:
        m = bool(mask.item())
        return f"MaskedTensor({_fmt(data.item()) if m else '--'}, {m})"
    s = _rows(data.tolist(), mask.tolist())
    return "MaskedTensor(\n" + "\n".join("  " + line for line in s.split("\n")) + "\n)"
