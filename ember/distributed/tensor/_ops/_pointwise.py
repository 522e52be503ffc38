"""Pointwise ops (unary, binary with broadcasting, in-place): an output dim is sharded where an
input shards the matching (non-broadcast) dim; Partial survives only ops linear in it."""
from __future__ import annotations

from ember.tensor import Tensor

from .._dispatch import Plan, register
from ..placement_types import Partial, Replicate, Shard

# every tensor operand Partial (same reduce op): the result is Partial
_LINEAR_ALL = {"add", "add_", "sub", "sub_"}
# exactly one Partial operand, at a position it enters linearly (others Replicate): Partial
_LINEAR_AT = {"mul": (0, 1), "mul_": (0, 1), "div": (0,), "div_": (0,), "neg": (0,), "neg_": (0,),
              "true_divide": (0,)}
# copies of their one input: any Partial survives
_COPIES = {"alias", "_to_copy", "detach", "positive", "view_as", "to"}


def _operands(call):
    """(position-or-key, tensor) of the tensor operands that take part in broadcasting."""
    out = []
    for i, a in enumerate(call.args):
        if isinstance(a, Tensor) and (call.is_dt(a) or a.ndim > 0):
            out.append((i, a))
    for k, a in call.kwargs.items():
        if isinstance(a, Tensor) and (call.is_dt(a) or a.ndim > 0):
            out.append((k, a))
    return out


def _broadcast_shape(shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for j, n in enumerate(s):
            k = nd - len(s) + j
            if n != 1:
                out[k] = n
    return out


def _partial_result(call, i, ops):
    """The Partial an output may keep on mesh dim ``i`` (None: reduce first)."""
    parts = [(key, t) for key, t in ops if call.is_dt(t) and isinstance(t.placements[i], Partial)]
    if not parts:
        return None
    kinds = {t.placements[i] for _, t in parts}
    if len(kinds) != 1:
        return None
    p = next(iter(kinds))
    name = call.name
    if name in _COPIES and len(ops) == 1:
        return p
    if p.reduce_op not in ("sum", "avg"):
        return None
    if name in _LINEAR_ALL:
        # a Partial plus a tensor (made Partial too, as torch does); never plus a plain number
        numbers = [a for a in call.args[:2] if not isinstance(a, Tensor)]
        if not numbers and len(ops) == 2:
            return p
        return None
    at = _LINEAR_AT.get(name)
    if at is not None and parts[0][0] in at:
        # the first Partial factor stays one; the others are reduced (torch's choice too)
        return p
    return None


def choose_placements(call, ops, out_ndim, out_shape, self_=None):
    """Output placements for a pointwise op over tensor operands ``ops``."""
    out = []
    for i in range(call.mesh.ndim):
        if self_ is not None:
            out.append(self_.placements[i])
            continue
        target = None
        for _, t in ops:
            p = call.placements_of(t)[i]
            if isinstance(p, Shard):
                od = p.dim + out_ndim - t.ndim
                if t.shape[p.dim] != 1 or out_shape[od] == 1:
                    target = Shard(od)
                    break
        if target is None:
            target = _partial_result(call, i, ops) or Replicate()
        out.append(target)
    return tuple(out)


def operand_placements(t, out_pl, out_ndim, out_shape):
    """What operand ``t`` must be laid out as for an output laid out as ``out_pl``."""
    res = []
    off = out_ndim - t.ndim
    for p in out_pl:
        if isinstance(p, Shard):
            d = p.dim - off
            if d >= 0 and (t.shape[d] != 1 or out_shape[p.dim] == 1):
                res.append(Shard(d))
            else:
                res.append(Replicate())
        elif isinstance(p, Partial):
            res.append(p)
        else:
            res.append(Replicate())
    return tuple(res)


def _check_inplace_on_partial(call, ops):
    """An in-place op keeps its DTensor's layout, so on a Partial one it must be linear: copy_/zero_,
    add_/sub_ of a tensor (made Partial too), mul_/div_ by a replicated factor."""
    name = call.name
    ok = name in ("copy_", "zero_") or name in ("mul_", "div_") or (
        name in _LINEAR_ALL and len(ops) == 2)
    if not ok:
        raise RuntimeError(f"{call.func}: an in-place op on a DTensor with a Partial placement needs that "
                           "placement reduced first; call .redistribute(...) to Replicate")


def _keeps_partial(call, ops, i, p, inplace, key):
    """Whether operand ``key`` keeps Partial ``p`` on mesh dim ``i`` of a Partial output: every
    one for add/sub/copy_ (a Replicate one is split into addends), else only the first Partial
    one (in-place: self); the others are reduced to Replicate."""
    if call.name in _LINEAR_ALL or call.name == "copy_":
        return True
    if inplace:
        return key == 0
    first = next((k for k, t in ops if call.is_dt(t) and t.placements[i] == p), None)
    return key == first


def pointwise_rule(call):
    ops = _operands(call)
    shapes = [tuple(t.shape) for _, t in ops]
    out_shape = _broadcast_shape(shapes)
    inplace = call.name.endswith("_") and call.args and call.is_dt(call.args[0])
    if call.name.endswith("_") and call.args and isinstance(call.args[0], Tensor) and not inplace:
        # writing a DTensor's values into a plain tensor: its layout has no meaning there
        raise RuntimeError(f"{call.func}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor "
                           "to DTensor before calling distributed operators!")
    self_ = call.args[0] if inplace else None
    out_pl = choose_placements(call, ops, len(out_shape), out_shape, self_)
    if inplace and any(isinstance(p, Partial) for p in out_pl):
        _check_inplace_on_partial(call, ops)
    args, kwargs = list(call.args), dict(call.kwargs)
    for key, t in ops:
        if inplace and key == 0:
            continue
        want = list(operand_placements(t, out_pl, len(out_shape), out_shape))
        for i, p in enumerate(want):
            if isinstance(p, Partial) and not _keeps_partial(call, ops, i, p, inplace, key):
                want[i] = Replicate()
        local = call.local(t, want)
        if isinstance(key, int):
            args[key] = local
        else:
            kwargs[key] = local
    if inplace:
        args[0] = self_._local_tensor
        call.func(*args, **kwargs)
        return Plan(result=self_)
    return Plan(args, kwargs, out=out_pl)


for _name in ("copy_", "clone", "alias", "_to_copy", "contiguous", "detach", "positive", "fill", "fill_",
              "zero_", "masked_fill", "where", "lerp", "addcmul", "addcdiv", "clamp"):
    register(_name)(pointwise_rule)
