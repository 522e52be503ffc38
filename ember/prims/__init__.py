"""``ember.prims``: the closed set of primitive ops the compiler lowers.

Every other op decomposes into these (``ember.prims.decompositions``), so a
backend only ever has to implement this list. Each prim is an ``OpDef`` in
``ember.ops.registry.OPS`` under ``"prims.<name>"`` with the tag ``prim``, a
SymInt-safe meta function, a numpy reference kernel (so prims run eagerly)
and a docstring with its exact semantics. Prims do no type promotion and no
implicit broadcasting (see ``_defprim``): decompositions make both explicit
with ``convert_element_type`` and ``broadcast_in_dim``.

Modules: ``elementwise`` (unary/binary math, comparisons, logical/bitwise,
``where``, ``convert_element_type``), ``reductions`` (sum/prod/amax/amin/
any/all, argmax/argmin, var, cumsum/cumprod), ``views`` (broadcast_in_dim,
reshape, permute, squeeze, expand_dims, slice, as_strided, cat, pad, flip,
clone), ``indexing`` (gather, scatter, scatter_add, scatter_amax/amin,
index_select, index_put), ``creation`` (iota, full), ``random`` (counter-based Philox
4x32-10), ``extern`` (mm, bmm, convolution, sort, topk: kept whole).
"""
from __future__ import annotations

from ..ops import _binding_cache
from ._defprim import PRIMS, PrimError

with _binding_cache.group("prims"):   # the prims' bindings' code objects, cached on disk
    from . import elementwise as _elementwise  # noqa: F401
    from . import reductions as _reductions  # noqa: F401
    from . import views as _views  # noqa: F401
    from . import indexing as _indexing  # noqa: F401
    from . import creation as _creation  # noqa: F401
    from . import random as _random  # noqa: F401
    from . import extern as _extern  # noqa: F401

from .table import decompose, decomposition_table, register_decomposition  # noqa: E402,F401

for _name, _b in PRIMS.items():
    globals()[_name] = _b

__all__ = sorted(PRIMS)


def all_prims():
    """{short name: OpDef} of every prim."""
    return {n: b._ember_op for n, b in PRIMS.items()}
