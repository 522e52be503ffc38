"""``repr`` of sparse tensors, character for character PyTorch's (``torch.`` -> ``ember.``).

PyTorch prints a COO tensor as its indices and values tensors followed by
``size``, ``nnz``, ``dtype`` (when not a default one), ``layout`` and the
autograd suffix, each suffix on its own line; a compressed tensor as its
compressed indices, plain indices and values, with the suffixes wrapped at the
line width like a dense tensor's. The bodies are formatted by ember's dense
printer (``ember._tensor_str.tensor_str``).
"""
from __future__ import annotations

from .. import _tensor_str as ts
from ._tensor import COO, ROW_COMPRESSED


def _body(arr, indent):
    """``_tensor_str`` of one constituent tensor, with PyTorch's ``, size=`` for an empty one."""
    text = ts.tensor_str(arr, indent)
    if arr.size == 0:
        text += ", size=" + str(tuple(int(s) for s in arr.shape))
    return text


def _add_suffixes(body, suffixes, indent, force_newline):
    opts = ts._OPTS
    out = [body]
    last = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if force_newline or last + len(suffix) + 2 > opts.linewidth:
            out.append(",\n" + " " * indent + suffix)
            last = indent + len(suffix)
            force_newline = False
        else:
            out.append(", " + suffix)
            last += len(suffix) + 2
    out.append(")")
    return "".join(out)


def sparse_repr(t):
    st = t._st
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{ts.format_device(t.device)}'")
    default = ts._current_default_dtype()
    has_default_dtype = t.dtype.name in ts._unnamed_dtypes(default)
    suffixes.append("size=" + str(tuple(st.shape)))
    suffixes.append(f"nnz={st.nnz}")
    if not has_default_dtype:
        suffixes.append("dtype=" + ts.format_dtype(t.dtype.name))
    vals = t._vals._data
    if st.layout is COO:
        ip, vp = "indices=tensor(", "values=tensor("
        body = (ip + _body(st.indices, indent + len(ip)) + "),\n" + " " * indent
                + vp + _body(vals, indent + len(vp)) + ")")
    else:
        cname, pname = ("crow", "col") if st.layout in ROW_COMPRESSED else ("ccol", "row")
        cp, pp, vp = f"{cname}_indices=tensor(", f"{pname}_indices=tensor(", "values=tensor("
        body = (cp + _body(st.compressed, indent + len(cp)) + "),\n" + " " * indent
                + pp + _body(st.plain, indent + len(pp)) + "),\n" + " " * indent
                + vp + _body(vals, indent + len(vp)) + ")")
    suffixes.append("layout=" + ts.DTYPE_PREFIX + st.layout._name)
    gf = t.grad_fn
    if gf is not None:
        suffixes.append(f"grad_fn=<{ts._grad_fn_display_name(gf)}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent, force_newline=st.layout is COO)
