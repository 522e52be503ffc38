"""Neural-network ops of the tensor-parallel patterns: softmax over a whole dim, layer norm over
whole trailing dims, and embedding lookups from a row- or column-sharded table."""
from __future__ import annotations

import ember

from .._dispatch import Plan, register
from ..placement_types import Partial, Replicate, Shard

_R = Replicate()


def _whole_dims_plan(pl, dims):
    """Placements keeping every Shard except those on ``dims``; Partial reduced first."""
    want = tuple(_R if (isinstance(p, Shard) and p.dim in dims) or isinstance(p, Partial) else p
                 for p in pl)
    return want, want


@register("_softmax", "_log_softmax", "softmax", "log_softmax")
def softmax_rule(call):
    x = call.args[0]
    d = call.get(1, "dim") % max(x.ndim, 1)
    if call.name in ("_log_softmax", "log_softmax") and _loss_parallel_dim(call, x, d) is not None:
        return _parallel_log_softmax(call, x, d)
    want, out = _whole_dims_plan(call.placements_of(x), {d})
    args = list(call.args)
    args[0] = call.local(x, want)
    return Plan(args, call.kwargs, out=out)


@register("native_layer_norm")
def layer_norm_rule(call):
    x = call.args[0]
    k = len(call.get(1, "normalized_shape"))
    want, out = _whole_dims_plan(call.placements_of(x), set(range(x.ndim - k, x.ndim)))
    args = list(call.args)
    args[0] = call.local(x, want)
    for j, name in ((2, "weight"), (3, "bias")):
        w = call.get(j, name)
        if w is not None:
            call.set(j, name, call.replicated(w), args)
    return Plan(args, call.kwargs, out=[out, out, out])


@register("embedding")
def embedding_rule(call):
    weight, idx = call.args[0], call.args[1]
    out_nd = idx.ndim + 1
    want_w, want_i, out = [], [], []
    vocab_sharded = []
    for i in range(call.mesh.ndim):
        pw, pi = call.placements_of(weight)[i], call.placements_of(idx)[i]
        if pw == Shard(1):
            want_w.append(pw), want_i.append(_R), out.append(Shard(out_nd - 1))
        elif pw == Shard(0) and not any(q == Shard(0) for q in call.placements_of(weight)[:i]):
            want_w.append(pw), want_i.append(_R), out.append(Partial("sum"))
            vocab_sharded.append(i)
        elif isinstance(pi, Shard):
            want_w.append(_R), want_i.append(pi), out.append(pi)
        else:
            want_w.append(_R), want_i.append(_R), out.append(_R)
    args = list(call.args)
    args[0] = call.local(weight, want_w)
    args[1] = call.local(idx, want_i)
    if not vocab_sharded:
        return Plan(args, call.kwargs, out=tuple(out))
    if len(vocab_sharded) > 1:
        raise NotImplementedError("ember.distributed.tensor: embedding with the vocabulary sharded over more "
                                  "than one mesh dim is not supported")
    mesh_dim = vocab_sharded[0]
    rows = weight.shape[0]
    off, n = Shard.chunk_bounds(rows, call.mesh.size(mesh_dim), call.mesh.get_local_rank(mesh_dim))

    def masked_lookup(w, ids, *rest, **kw):
        """Rows this rank holds; zeros for the others (the ranks' results add up to the lookup)."""
        outside = (ids < off) | (ids >= off + n)
        local_ids = ember.where(outside, ember.zeros_like(ids), ids - off)
        if n == 0:
            return ember.zeros(tuple(ids.shape) + (w.shape[1],), dtype=w.dtype)
        got = ember.nn.functional.embedding(local_ids, w)
        return ember.where(outside.unsqueeze(-1), ember.zeros_like(got), got)
    return Plan(args, call.kwargs, out=tuple(out), run=masked_lookup)


@register("embedding_dense_backward")
def embedding_backward_rule(call):
    grad = call.args[0]
    nd = grad.ndim
    want, out = [], []
    for i in range(call.mesh.ndim):
        p = call.placements_of(grad)[i]
        if p == Shard(nd - 1):
            want.append(p), out.append(Shard(1))
        elif isinstance(p, Partial) and p.reduce_op == "sum":
            want.append(p), out.append(p)
        else:
            want.append(_R), out.append(_R)
    args = list(call.args)
    args[0] = call.local(grad, want)
    args[1] = call.replicated(args[1])
    return Plan(args, call.kwargs, out=tuple(out))


# ---------------------------------------------------------------------- loss_parallel
def _loss_parallel_dim(call, x, class_dim):
    """The mesh dim sharding the class dim when loss_parallel is on and it applies (1-D meshes)."""
    from ..parallel.loss import enabled
    if not enabled() or not call.is_dt(x) or call.mesh.ndim != 1:
        return None
    return 0 if x.placements[0] == Shard(class_dim) else None


def _parallel_log_softmax(call, x, d):
    """log_softmax over a sharded class dim: the max and the sum of exponentials are all-reduced."""
    from .. import _collectives as C
    mesh = call.mesh
    local = x._local_tensor
    m = C.all_reduce(local.amax(d, keepdim=True) if local.shape[d] else
                     ember.full_like(local.sum(d, keepdim=True), float("-inf")), mesh, 0, "max")
    shifted = local - m
    lse = ember.log(C.all_reduce(ember.exp(shifted).sum(d, keepdim=True), mesh, 0, "sum"))
    out = shifted - lse
    return Plan([out], {}, out=x.placements, run=lambda t: t)


def _class_bounds(call, classes):
    mesh = call.mesh
    return Shard.chunk_bounds(classes, mesh.size(0), mesh.get_local_rank(0))


@register("nll_loss_nd")
def nll_loss_rule(call):
    x, target = call.args[0], call.get(1, "target")
    if _loss_parallel_dim(call, x, 1 if x.ndim > 1 else 0) is None:
        from .._dispatch import replicate_fallback
        return replicate_fallback(call)
    weight = call.get(2, "weight")
    reduction, ignore = call.get(3, "reduction", 1), call.get(4, "ignore_index", -100)
    t = call.replicated(target)
    w = call.replicated(weight) if weight is not None else None
    lsm = x._local_tensor
    off, n = _class_bounds(call, x.shape[1 if x.ndim > 1 else 0])
    valid = t != ignore
    mine = valid & (t >= off) & (t < off + n)
    t_local = ember.where(mine, t - off, ember.zeros_like(t))
    if lsm.ndim == 1:
        picked = lsm[t_local] if n else ember.zeros((), dtype=lsm.dtype)
    else:
        picked = lsm.gather(1, t_local.unsqueeze(1)).squeeze(1) if n else ember.zeros(t.shape, dtype=lsm.dtype)
    safe_t = ember.where(valid, t, ember.zeros_like(t))
    wt = w[safe_t] * valid.to(lsm.dtype) if w is not None else valid.to(lsm.dtype)
    elem = ember.where(mine, -picked * wt, ember.zeros_like(picked))
    total = wt.sum()
    if reduction == 0:
        loss = elem
    elif reduction == 2:
        loss = elem.sum()
    else:
        loss = elem.sum() / total
    rep = (Replicate(),)
    return Plan([loss, total], {}, out=[(Partial("sum"),), rep], run=lambda a, b: (a, b))


@register("_nll_loss_backward")
def nll_loss_backward_rule(call):
    """Under loss_parallel: the whole gradient (it needs only the targets), cut to the class shard."""
    from ..parallel.loss import enabled
    from .._dispatch import replicate_fallback
    if not enabled() or call.mesh.ndim != 1:
        return replicate_fallback(call)
    args, kwargs = call.all_replicated()
    shape = tuple(call.get(1, "self_size"))
    cdim = 1 if len(shape) > 1 else 0

    def run(*a, **k):
        from .. import _collectives as C
        return C.shard_slice(call.func(*a, **k), call.mesh, 0, cdim)
    return Plan(args, kwargs, out=(Shard(cdim),), run=run)
