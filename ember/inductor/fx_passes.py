"""Graph rewrites on the prims graph before lowering.

``batch_matmuls``: independent matrix products that share their right operand become one
product. An unrolled RNN multiplies every step's input by the same weight
(``x_t @ W_ih.T`` for t = 1..T; in the backward ``g_t @ W_ih`` for every step's input
gradient): T small BLAS calls of M = batch rows each, far below the BLAS's peak at M = 32
and each paying a call and a thread wake-up. ``cat([a_1, ..., a_T]) @ B`` is one call at
M = T * batch; the step results are row slices (views) of it. Values are the same products
(each row of the result depends only on its own row of the left operand). When the left
operands are every step of one input in order (``x[:, t]`` of x [B, T, K]), the product is
``x.reshape(B * T, K) @ W`` instead -- rows in x's own order, no concatenation copying the
steps into (t, b) order -- and step t's result the strided view ``[:, t]`` of it (the
compiled LSTM's inference step 1.02-1.07x).

Legality: the left operands must not depend on any product of the batch (a recurrence's
``h_t @ W_hh`` never batches: ``h_t`` needs the step before). Nodes the left operands need
that come later in the graph than the first product are moved before it, in their order; they
cannot depend on the batch either, since the left operands would then. Static 2-d float
products only; the right operands count as the same when they are the same node or the same
view (``permute``/``reshape``/...) chain of one node.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional

from . import config

log = logging.getLogger("ember.inductor.fusion")

_VIEWS = {"prims.permute", "prims.reshape", "prims.squeeze", "prims.broadcast_in_dim", "prims.slice",
          "prims.expand_dims"}


def _op(node) -> Optional[str]:
    op = getattr(node.target, "_ember_op", None) if node.op == "call_function" else None
    return op.name if op is not None else None


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if hasattr(v, "op") and hasattr(v, "users"):
        return ("node", v)
    return v


def _canon(node, memo: Dict) -> object:
    """A key equal for the same node or the same view chain of one node."""
    if node in memo:
        return memo[node]
    name = _op(node)
    if name in _VIEWS and node.args and hasattr(node.args[0], "users"):
        key = (name, _canon(node.args[0], memo), _freeze(node.args[1:]), _freeze(sorted(node.kwargs.items())))
    else:
        key = ("node", node)
    memo[node] = key
    return key


def _meta(node):
    m = node.meta.get("tensor_meta")
    return m if m is not None and hasattr(m, "shape") else None


def _static_2d(node) -> bool:
    m = _meta(node)
    return m is not None and len(m.shape) == 2 and all(type(s) is int for s in m.shape) and \
        m.dtype.is_floating_point


def batch_matmuls(gm, min_batch: int = 4):
    """``gm`` with the rewrites applied: a rewritten copy, or ``gm`` itself when nothing
    applies. The caller's module is never changed (aot caches it, and the FX-graph cache
    keys a warm compile by the graph as aot hands it over)."""
    if not config.batch_matmuls or sum(1 for n in gm.graph.nodes if _op(n) == "prims.mm") < min_batch:
        return gm
    import copy

    from ..fx.graph_module import GraphModule
    new = GraphModule(gm, copy.deepcopy(gm.graph))
    object.__setattr__(new, "meta", dict(getattr(gm, "meta", {}) or {}))
    return new if _batch_matmuls(new, min_batch) else gm


def _batch_matmuls(gm, min_batch: int) -> bool:
    """Rewrite ``gm`` in place; True when it changed."""
    graph = gm.graph
    nodes = list(graph.nodes)
    memo: Dict = {}
    groups: Dict[object, List] = {}
    for n in nodes:
        if _op(n) == "prims.mm" and len(n.args) == 2 and _static_2d(n) and all(
                hasattr(a, "users") and _static_2d(a) for a in n.args):
            groups.setdefault((_canon(n.args[1], memo), _meta(n).dtype), []).append(n)
    changed = False
    for members in groups.values():
        if len(members) < min_batch:
            continue
        batch = _independent_batch(nodes, members)
        if len(batch) >= min_batch:
            _rewrite(graph, nodes, batch)
            nodes = list(graph.nodes)
            changed = True
    for root in [n for n in graph.nodes if _op(n) == "prims.add"]:
        changed |= _sum_of_products(graph, root, min_batch)
    if changed:
        graph.eliminate_dead_code()
        gm.recompile()
    return changed


def _independent_batch(nodes, members) -> List:
    """The members (in graph order) none of whose left operands depends on an earlier one."""
    bit = {m: 1 << i for i, m in enumerate(members)}
    anc: Dict = {}
    for n in nodes:
        b = 0
        for a in n.all_input_nodes:
            b |= anc.get(a, 0)
        anc[n] = b | bit.get(n, 0)
    batch, taken = [], 0
    for m in members:
        if anc[m.args[0]] & taken:
            continue
        batch.append(m)
        taken |= bit[m]
    return batch


def _rewrite(graph, nodes, batch) -> None:
    from .. import prims
    from ..fx.passes.shape_prop import TensorMetadata
    pos = {n: i for i, n in enumerate(nodes)}
    first = batch[0]
    # everything the left operands need from after the first product moves before it
    need, stack = set(), [m.args[0] for m in batch]
    while stack:
        n = stack.pop()
        if n in need or pos[n] < pos[first]:
            continue
        need.add(n)
        stack.extend(n.all_input_nodes)
    for n in sorted(need, key=pos.__getitem__):
        first.prepend(n)
    lefts = [m.args[0] for m in batch]
    rows = [_meta(a).shape[0] for a in lefts]
    K, N = _meta(lefts[0]).shape[1], _meta(first).shape[1]
    dtype = _meta(first).dtype
    total = sum(rows)

    def meta(shape):
        return TensorMetadata(tuple(shape), dtype, (shape[1], 1), False)
    whole = _steps_of_one(lefts)
    if whole is not None:
        _rewrite_steps(graph, first, batch, whole, N, dtype)
        return
    with graph.inserting_before(first):
        cat = graph.call_function(prims.cat, (lefts, 0))
        cat.meta["tensor_meta"] = meta((total, K))
        prod = graph.call_function(prims.mm, (cat, first.args[1]))
        prod.meta["tensor_meta"] = meta((total, N))
        start = 0
        for m, r in zip(batch, rows):
            piece = graph.call_function(prims.slice, (prod, [start, 0], [start + r, N]))
            piece.meta["tensor_meta"] = TensorMetadata((r, N), dtype, (N, 1), False)
            start += r
            m.replace_all_uses_with(piece)
    for m in batch:
        graph.erase_node(m)
    log.debug("batched %d matmuls sharing a right operand into one (%d x %d x %d)", len(batch), total, K, N)


def _steps_of_one(lefts):
    """``(x, B, T, K)`` when the left operands are ``x[:, 0], ..., x[:, T-1]`` in order (an
    unrolled RNN's inputs, ``squeeze(slice(x, [0, t, 0], [B, t + 1, K]), 1)``) of one static
    3-d ``x`` [B, T, K]; else None."""
    x = None
    for t, a in enumerate(lefts):
        if _op(a) != "prims.squeeze" or [int(d) for d in a.args[1]] != [1]:
            return None
        sl = a.args[0]
        if _op(sl) != "prims.slice" or len(sl.args) < 3 or not hasattr(sl.args[0], "users"):
            return None
        base, m = sl.args[0], _meta(sl.args[0])
        if x is None:
            x = base
            if m is None or len(m.shape) != 3 or not all(type(v) is int for v in m.shape) or \
                    m.shape[1] != len(lefts):
                return None
            B, T, K = m.shape
        if base is not x or list(sl.args[1]) != [0, t, 0] or list(sl.args[2]) != [B, t + 1, K] or \
                (len(sl.args) > 3 and sl.args[3] is not None and list(sl.args[3]) != [1, 1, 1]):
            return None
    return x, B, T, K


def _rewrite_steps(graph, first, batch, whole, N, dtype) -> None:
    """The batch of ``x[:, t] @ W`` as ``x.reshape(B * T, K) @ W`` -- rows in x's own (b, t)
    order, so no concatenation copies the steps into (t, b) order first -- with step t's
    result the strided view ``prod.reshape(B, T, N)[:, t]`` (each row of the product depends
    only on its own row of the left operand: the same values)."""
    from .. import prims
    from ..fx.passes.shape_prop import TensorMetadata
    x, B, T, K = whole
    with graph.inserting_before(first):
        flat = graph.call_function(prims.reshape, (x, [B * T, K]))
        flat.meta["tensor_meta"] = TensorMetadata((B * T, K), dtype, (K, 1), False)
        prod = graph.call_function(prims.mm, (flat, first.args[1]))
        prod.meta["tensor_meta"] = TensorMetadata((B * T, N), dtype, (N, 1), False)
        prod3 = graph.call_function(prims.reshape, (prod, [B, T, N]))
        prod3.meta["tensor_meta"] = TensorMetadata((B, T, N), dtype, (T * N, N, 1), False)
        for t, m in enumerate(batch):
            sl = graph.call_function(prims.slice, (prod3, [0, t, 0], [B, t + 1, N], [1, 1, 1]))
            sl.meta["tensor_meta"] = TensorMetadata((B, 1, N), dtype, (T * N, N, 1), False)
            piece = graph.call_function(prims.squeeze, (sl, [1]))
            piece.meta["tensor_meta"] = TensorMetadata((B, N), dtype, (T * N, 1), False)
            m.replace_all_uses_with(piece)
    for m in batch:
        graph.erase_node(m)
    log.debug("batched %d matmuls over the steps of one input: %d x %d x %d, no concatenation", len(batch),
              B * T, K, N)


def _swap_chain(node):
    """(base, parity): ``node`` = ``base`` under a chain of single-use 2-d transposes."""
    parity = 0
    while _op(node) == "prims.permute" and [int(d) for d in node.args[1]] == [1, 0]:
        base = node.args[0]
        if len(base.users) != 1:
            break
        node, parity = base, parity ^ 1
    return node, parity


def _sum_of_products(graph, root, min_batch) -> bool:
    """``p_1 + p_2 + ... + p_n`` (a chain of single-use adds) where every ``p_i`` is a product
    ``a_i @ b_i`` (or all their transposes): a weight gradient accumulated over an unrolled
    loop's steps, one small-K product per step. It is one product of the concatenations,
    ``cat(a_i, 1) @ cat(b_i, 0)``, with K = the steps' K summed."""
    from .. import prims
    from ..fx.passes.shape_prop import TensorMetadata
    if not root.users or not all(hasattr(a, "users") for a in root.args[:2]) or any(
            _op(u) == "prims.add" and len(root.users) == 1 for u in root.users):
        return False     # not the top of a chain
    leaves, stack = [], [root]
    while stack:
        n = stack.pop()
        if _op(n) == "prims.add" and (n is root or len(n.users) == 1) and len(n.args) == 2 and \
                all(hasattr(a, "users") for a in n.args):
            stack.extend(reversed(n.args))
        else:
            leaves.append(n)
    if len(leaves) < min_batch or len(set(leaves)) != len(leaves):
        return False
    prods, parities = [], set()
    for leaf in leaves:
        if len(leaf.users) != 1:
            return False
        base, parity = _swap_chain(leaf)
        if _op(base) != "prims.mm" or len(base.users) != 1 or not _static_2d(base) or \
                not all(hasattr(a, "users") and _static_2d(a) for a in base.args):
            return False
        prods.append(base)
        parities.add(parity)
    if len(parities) != 1 or len({_meta(p).dtype for p in prods}) != 1 or \
            len({tuple(_meta(p).shape) for p in prods}) != 1:
        return False
    M, N = _meta(prods[0]).shape
    K = sum(_meta(p.args[0]).shape[1] for p in prods)
    dtype = _meta(prods[0]).dtype
    with graph.inserting_before(root):
        a = _cat(graph, [p.args[0] for p in prods], 1, (M, K), dtype)
        b = _cat(graph, [p.args[1] for p in prods], 0, (K, N), dtype)
        out = graph.call_function(prims.mm, (a, b))
        out.meta["tensor_meta"] = TensorMetadata((M, N), dtype, (N, 1), False)
        if parities.pop():
            out = graph.call_function(prims.permute, (out, [1, 0]))
            out.meta["tensor_meta"] = TensorMetadata((N, M), dtype, (1, N), False)
    root.replace_all_uses_with(out)
    log.debug("summed %d matmuls as one (%d x %d x %d)", len(prods), M, K, N)
    return True


def _cat(graph, items, dim, shape, dtype):
    """``cat(items, dim)`` of 2-d nodes; when every item is a transpose ``c_i.T`` (a weight
    gradient's ``g_t.T``), ``cat(c_i, 1 - dim).T`` instead: the pieces are copied row by
    row and the product reads the transpose through its strides."""
    from .. import prims
    from ..fx.passes.shape_prop import TensorMetadata
    bases = [i.args[0] for i in items if _op(i) == "prims.permute" and [int(d) for d in i.args[1]] == [1, 0]]
    if len(bases) == len(items) and all(_static_2d(c) for c in bases):
        c = graph.call_function(prims.cat, (bases, 1 - dim))
        c.meta["tensor_meta"] = TensorMetadata((shape[1], shape[0]), dtype, (shape[0], 1), False)
        t = graph.call_function(prims.permute, (c, [1, 0]))
        t.meta["tensor_meta"] = TensorMetadata(tuple(shape), dtype, (1, shape[0]), False)
        return t
    c = graph.call_function(prims.cat, (items, dim))
    c.meta["tensor_meta"] = TensorMetadata(tuple(shape), dtype, (shape[1], 1), False)
    return c
