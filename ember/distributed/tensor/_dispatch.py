"""``DTensor.__torch_dispatch__``: sharding propagation and local execution of one op.

A rule (``_ops``) looks at the DTensor arguments' placements and returns a :class:`Plan`: the
arguments with each DTensor replaced by its local piece in the layout the op needs (moved
there by ``_redistribute``), and the placements of each output. The op then runs on the local
pieces and the outputs are wrapped with their global shapes, which come from running the op on
meta tensors of the global shapes. An op with no rule is run on fully replicated inputs (its
outputs Replicate) and logged once -- correct, if costly; torch raises instead.
"""
from __future__ import annotations

import logging

import ember
from ember.tensor import Tensor

from ._redistribute import redistribute_local
from .placement_types import Partial, Replicate, Shard

log = logging.getLogger("ember.distributed.tensor")

RULES = {}
_LOGGED = set()


def register(*names):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


class Plan:
    """What a rule decided: local ``args``/``kwargs`` to run, output placements (a tuple of
    placements per tensor output, None for an output to return as is), and optionally its own
    local ``run`` in place of the op, or ``result`` to return without running anything."""

    __slots__ = ("args", "kwargs", "out", "run", "result")

    def __init__(self, args=None, kwargs=None, out=None, run=None, result=None):
        self.args, self.kwargs, self.out, self.run, self.result = args, kwargs, out, run, result


class OpCall:
    """One op call with DTensor arguments, and the helpers rules use to read and convert them."""

    def __init__(self, func, name, args, kwargs):
        from ._api import DTensor
        self.func, self.name = func, name
        self.args, self.kwargs = list(args), dict(kwargs)
        self.DTensor = DTensor
        mesh = None
        for a in self.flat_tensors():
            if isinstance(a, DTensor):
                if mesh is None:
                    mesh = a.device_mesh
                elif a.device_mesh != mesh:
                    raise NotImplementedError(f"{func}: DTensor does not support cross-mesh operation yet! Got "
                                              f"meshes: {mesh} {a.device_mesh}")
        self.mesh = mesh
        op = getattr(func, "op", None)
        self.params = [p.name for p in op.params] if op is not None else []

    def flat_tensors(self):
        for a in list(self.args) + list(self.kwargs.values()):
            if isinstance(a, (list, tuple)):
                yield from (x for x in a if isinstance(x, Tensor))
            elif isinstance(a, Tensor):
                yield a

    def get(self, i, name, default=None):
        if i < len(self.args):
            return self.args[i]
        return self.kwargs.get(name, default)

    def set(self, i, name, value, args):
        if i < len(args):
            args[i] = value
        else:
            self.kwargs[name] = value

    def is_dt(self, a):
        return isinstance(a, self.DTensor)

    def placements_of(self, a):
        """A DTensor's placements; a plain tensor counts as Replicate (implicit replication)."""
        if self.is_dt(a):
            return a.placements
        return tuple(Replicate() for _ in range(self.mesh.ndim))

    def local(self, a, placements):
        """``a``'s local piece in ``placements`` (a plain tensor is cut from its whole value)."""
        placements = tuple(placements)
        if self.is_dt(a):
            return redistribute_local(a._local_tensor, a._spec.shape, self.mesh, a.placements, placements)
        if isinstance(a, Tensor):
            if a.ndim == 0:
                return a
            return redistribute_local(a, tuple(a.shape), self.mesh, self.placements_of(a), placements)
        return a

    def replicated(self, a):
        return self.local(a, [Replicate()] * self.mesh.ndim)

    def all_replicated(self):
        """args, kwargs with every tensor replaced by its whole value."""
        def conv(a):
            if isinstance(a, (list, tuple)):
                return type(a)(conv(x) for x in a)
            return self.replicated(a) if isinstance(a, Tensor) else a
        return [conv(a) for a in self.args], {k: conv(v) for k, v in self.kwargs.items()}


def _meta(a):
    from ._api import DTensor
    if isinstance(a, DTensor):
        return ember.empty_strided(a._spec.shape, a._spec.stride, dtype=a.dtype, device="meta")
    if isinstance(a, Tensor):
        return ember.empty_strided(tuple(a.shape), tuple(a.stride()), dtype=a.dtype, device="meta")
    if isinstance(a, (list, tuple)):
        return type(a)(_meta(x) for x in a)
    return a


def _global_meta(call):
    """The op's outputs on meta tensors of the global shapes (shapes/strides of the results)."""
    try:
        return call.func(*[_meta(a) for a in call.args], **{k: _meta(v) for k, v in call.kwargs.items()})
    except Exception as e:  # noqa: BLE001 - reported as what it is: the op's global shape is unknown
        raise NotImplementedError(f"ember.distributed.tensor: cannot infer the global output shape of "
                                  f"{call.func} on DTensors (its meta run failed: {e})") from e


def _wrap(local, meta, placements, mesh):
    from ._api import DTensor, DTensorSpec
    if placements is None or not isinstance(local, Tensor):
        return local
    return DTensor(local, DTensorSpec(mesh, placements, tuple(meta.shape), tuple(meta.stride())))


def dispatch(func, args, kwargs):
    name = func.overloadpacket.__name__
    if name.startswith("_foreach_"):
        return _foreach(func, name, args, kwargs)
    call = OpCall(func, name, args, kwargs)
    from . import _ops  # noqa: F401 - registers the rules
    rule = RULES.get(name)
    if rule is None:
        rule = _ops.default_rule(call)
    plan = rule(call)
    if plan.result is not None:
        return plan.result
    run = plan.run or func
    local_out = run(*plan.args, **plan.kwargs)
    if isinstance(local_out, (tuple, list)):
        outs = plan.out if isinstance(plan.out, list) else [plan.out] * len(local_out)
        if all(p is None for p in outs):
            return local_out
        meta = _global_meta(call) if any(_sharded(p) for p in outs) else local_out
        return type(local_out)(_wrap(l, m, p, call.mesh) for l, m, p in zip(local_out, meta, outs))
    if plan.out is None:
        return local_out
    # only a sharded output's global shape differs from the local one (data-dependent ops such as
    # nonzero have no meta shape, and come here replicated)
    return _wrap(local_out, _global_meta(call) if _sharded(plan.out) else local_out, plan.out, call.mesh)


def _sharded(placements):
    return placements is not None and any(isinstance(p, Shard) for p in placements)


def replicate_fallback(call):
    """No sharding rule: run the op on the whole (replicated) values; outputs are Replicate.
    An in-place op writes the result back into its DTensor's own layout."""
    if call.name not in _LOGGED:
        _LOGGED.add(call.name)
        log.warning("ember.distributed.tensor: %s has no sharding rule; its DTensor inputs are redistributed "
                    "to Replicate and it runs on the whole values", call.func)
    args, kwargs = call.all_replicated()
    rep = tuple(Replicate() for _ in range(call.mesh.ndim))
    self_ = call.args[0] if call.args else None
    if call.name.endswith("_") and call.is_dt(self_):
        args[0] = args[0].clone() if args[0] is self_._local_tensor else args[0]
        call.func(*args, **kwargs)
        back = redistribute_local(args[0], self_._spec.shape, call.mesh, rep, self_.placements)
        self_._local_tensor.copy_(back)
        return Plan(result=self_)
    return Plan(args, kwargs, out=rep)


def _foreach(func, name, args, kwargs):
    """``_foreach_<op>(lists...)``: the op per element (each element is dispatched on its own)."""
    base = name[len("_foreach_"):]
    inplace = base.endswith("_")
    op = getattr(ember.ops.aten, base)
    n = next(len(a) for a in args if isinstance(a, (list, tuple)))
    outs = []
    for k in range(n):
        a_k = [a[k] if isinstance(a, (list, tuple)) else a for a in args]
        kw_k = {key: (v[k] if isinstance(v, (list, tuple)) else v) for key, v in kwargs.items()}
        outs.append(op(*a_k, **kw_k))
    return None if inplace else outs


__all__ = ["dispatch", "register", "Plan", "OpCall", "replicate_fallback"]
