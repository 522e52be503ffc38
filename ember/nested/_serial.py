"""``ember.save`` / ``ember.load`` of nested tensors (torch.save round-trips them too).

A nested tensor is saved as its buffer (an ordinary tensor node, so map_location and the
storage format are the dense ones) plus its structure as plain lists: where each component
starts and how many rows it takes, each component's stored shape, the permutation, the
layout, the jagged ``offsets`` / ``lengths`` tensors when it has them, and ``requires_grad``.
It loads as a new leaf over the loaded buffer (a jagged tensor gets a fresh ragged size ``j<n>``,
as torch's does); autograd history is not saved, as for dense tensors.
"""
from __future__ import annotations

from .. import _layout as L
from ._tensor import wrap


def saved_node(writer, nt, path):
    """The manifest node of ``nt`` (``writer``: serialization's ``_Writer``)."""
    def enc(t, what):
        return None if t is None else writer.encode(t.detach(), f"{path}.{what}")
    return {"t": "nested", "layout": "jagged" if nt._nlayout is L.jagged else "strided",
            "values": enc(nt._vals, "values()"),
            "starts": [int(x) for x in nt._starts], "lens": [int(x) for x in nt._lens],
            "stored": [list(s) for s in nt._stored], "perm": None if nt._perm is None else list(nt._perm),
            "packed": bool(nt._packed), "offsets": enc(nt._offsets_t, "offsets()"),
            "lengths": enc(nt._lengths_t, "lengths()"), "requires_grad": bool(nt.requires_grad)}


def from_node(reader, node):
    """The nested tensor a ``saved_node`` describes (``reader``: serialization's ``_Reader``)."""
    layout = L.jagged if node["layout"] == "jagged" else L.strided
    vals = reader.decode(node["values"])
    dec = (lambda k: None if node.get(k) is None else reader.decode(node[k]))
    nt = wrap(vals, node["starts"], node["lens"], [tuple(s) for s in node["stored"]], node["perm"], layout,
              packed=node["packed"], offsets_t=dec("offsets"), lengths_t=dec("lengths"))
    if node.get("requires_grad"):
        nt.requires_grad_(True)
    return nt
