"""Writes ``_aten_schemas.json``: torch's ``aten`` operator overloads, their schema strings and tags.

Run once, at development time, with torch installed (ember itself never imports torch)::

    python -m ember.ops._aten_schemas_gen

The file holds, for every ``aten::`` op torch registers, each overload's name (torch's
``OpOverload._overloadname``: ``Tensor``, ``Scalar``, ``dim_IntList``, ``default`` ...), the schema
text after the op's name (``(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor``) and the
indices of its tags in ``tags`` (``torch.Tag``'s members in value order). ``_aten_namespace`` reads
it on first use to give ``ember.ops.aten.<op>`` torch's overloads.
"""
from __future__ import annotations

import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_aten_schemas.json")


def build():
    import torch

    tags = sorted(torch.Tag.__members__.values(), key=lambda t: int(t.value))
    tag_names = [t.name for t in tags]
    packets = sorted({s.name[len("aten::"):] for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")})
    ops = {}
    for name in packets:
        try:
            pkt = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        entry = {}
        for ov in pkt.overloads():
            op = getattr(pkt, ov)
            text = str(op._schema)
            head = f"aten::{name}" + (f".{op._schema.overload_name}" if op._schema.overload_name else "")
            assert text.startswith(head + "("), (text, head)
            entry[ov] = [text[len(head):], sorted(tag_names.index(t.name) for t in op.tags)]   # torch's overload order kept
        if entry:
            ops[name] = entry
    return {"torch_version": torch.__version__.split("+")[0], "tags": tag_names, "ops": ops}


def main():
    data = build()
    # one op a line: a regenerated table diffs op by op
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}"
             for k, v in sorted(data["ops"].items())]
    with open(OUT, "w") as f:
        f.write('{"torch_version":%s,\n"tags":%s,\n"ops":{\n' % (json.dumps(data["torch_version"]),
                                                               json.dumps(data["tags"])))
        f.write(",\n".join(lines))
        f.write("\n}}\n")
    n = sum(len(v) for v in data["ops"].values())
    print(f"wrote {OUT}: {len(data['ops'])} ops, {n} overloads (torch {data['torch_version']})")


if __name__ == "__main__":
    main()
