"""Decompositions of ember's ops into prims, one module per op family.

``pointwise``, ``reductions``, ``creation`` (this file's owner) and ``shape``,
``indexing``, ``linalg``, ``nn`` register their functions with
:func:`register_decomposition` on import. Use
:func:`~ember.prims.table.decomposition_table` / :func:`decompose` to get
the table; importing this package loads every family.
"""
from __future__ import annotations

import importlib
import warnings

from ..table import decompose, decomposition_table, register_decomposition  # noqa: F401

__all__ = ["register_decomposition", "decomposition_table", "decompose"]

# shape first: the other families import its helpers
_FAMILIES = ("shape", "pointwise", "reductions", "creation", "indexing", "linalg", "nn")
for _name in _FAMILIES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:
        # a family not written yet: the coverage report lists its ops as missing
        if _e.name != f"{__name__}.{_name}":
            raise


# ---------------------------------------------------------------------- eager layouts
# Ops whose kernels lay out their results by PyTorch's rules rather than numpy's (row-major
# reductions, softmax and cumulative ops; preserve_format copies; NHWC in, NHWC out: see
# ``ember.ops._meta.preserve_strides``). Their prims follow numpy's rules, so a decomposed
# graph could return, say, a softmax of a transposed input transposed where eager returns it
# row-major; the compiler writes its outputs with the strides of the graph's last nodes. The
# decompositions of these ops therefore end with the copy that gives each output the
# strides of the op's own meta function -- nothing is added where they already agree (a
# row-major input, the common case).
_EAGER_LAYOUT_OPS = (
    "flip", "roll", "tril", "triu", "repeat", "_to_copy", "cat", "sort", "argsort", "index_put",
    "index_fill", "masked_fill", "sum", "mean", "prod", "amax", "amin", "var", "std", "var_mean",
    "std_mean", "linalg_vector_norm", "logsumexp", "all", "any", "cumsum", "cumprod", "_softmax",
    "_log_softmax", "logsigmoid", "native_layer_norm", "native_batch_norm", "native_group_norm",
    "_gather_axes", "_resample", "convolution", "max_pool_with_indices", "avg_pool", "fill", "copy",
)


def _relayout(t, want):
    """``t`` (a traced value) with the element strides ``want`` of the eager result, made by
    prims: a row-major clone, or a clone taken in ``want``'s dim order and permuted back.
    Layouts are compared by example values and ignore size-1 dims (no guards)."""
    from ...ops import _meta
    from ember import prims
    shape = tuple(t.shape)
    hs = [_meta._hint(n) for n in shape]
    if 0 in hs:
        return t
    have = [_meta._hint(s) for s in t.stride()]
    want = [_meta._hint(s) for s in want]
    if all(a == b for a, b, n in zip(have, want, hs) if n != 1):
        return t
    order = tuple(sorted(range(len(shape)), key=lambda d: (-want[d], d)))
    dense = _meta.strides_for_permutation(hs, order)
    if any(a != b for a, b, n in zip(dense, want, hs) if n != 1):
        return t                    # not a dense layout: nothing prims can express
    if order == tuple(range(len(shape))):
        return prims.clone(t)
    inverse = tuple(sorted(range(len(shape)), key=lambda d: order[d]))
    return prims.permute(prims.clone(prims.permute(t, order)), inverse)


def _in_eager_layout(op, fn):
    from ...tensor import Tensor

    def decomposition(*args, **kwargs):
        out = fn(*args, **kwargs)
        if out is NotImplemented:
            return out
        try:
            with warnings.catch_warnings():        # the kernel's advice was given once already
                warnings.simplefilter("ignore")
                want = op.meta(*args, **kwargs)
        except Exception:       # noqa: BLE001 - no layout to follow: the decomposition's stands
            return out
        if isinstance(out, Tensor):
            return _relayout(out, want.estrides) if hasattr(want, "estrides") else out
        if isinstance(out, (tuple, list)) and isinstance(want, (tuple, list)) and len(out) == len(want):
            fixed = [_relayout(o, w.estrides) if isinstance(o, Tensor) and hasattr(w, "estrides") else o
                     for o, w in zip(out, want)]
            return type(out)(fixed) if isinstance(out, tuple) else fixed
        return out
    decomposition.__name__ = getattr(fn, "__name__", op.name)
    decomposition.__wrapped__ = fn
    return decomposition


def _wrap_eager_layouts():
    from ...ops.registry import OPS
    from .. import table as _table
    for name in _EAGER_LAYOUT_OPS:
        op = OPS.get(name)
        fn = _table._TABLE.get(op) if op is not None else None
        if fn is None or op.meta is None:
            continue
        wrapped = _in_eager_layout(op, fn)
        _table._TABLE[op] = wrapped
        op.decomp = wrapped


_wrap_eager_layouts()
