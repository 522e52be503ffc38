"""``fully_shard``: each parameter becomes a DTensor sharded on dim 0 over a data-parallel mesh;
the module gathers its parameters before forward and the gradients are reduce-scattered.

How. A forward pre-hook puts the whole parameter -- ``p.redistribute(Replicate).to_local(
grad_placements=[Partial("avg")])`` -- in the module's parameter slot, so autograd records the
all-gather; its backward turns the rank's gradient of the whole parameter (a Partial: every rank
saw different data) into the averaged gradient's shard by a reduce-scatter, accumulated in the
sharded parameter's ``.grad``. After forward (``reshard_after_forward=True``) or after backward
(False: once every gathered parameter has its gradient) the sharded parameters go back in their slots, so the optimizer and ``parameters()`` see
the DTensors. The gathered values stay alive only as long as autograd keeps them (ember does not
re-gather in backward as torch does to save memory: same numbers, more memory).
"""
from __future__ import annotations

import ember
import ember.nn as nn

from ..tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


class FSDPModule:
    """Mixed into a module's class by ``fully_shard`` (torch names the result ``FSDP<Class>``)."""

    def reshard(self):
        """Put the sharded parameters back in the module's slots."""
        st = self.__dict__["_fsdp_state"]
        for mod, name, p in st["params"]:
            mod._parameters[name] = p
        st["unsharded"] = False

    def unshard(self, async_op=False):
        """Gather every managed parameter into the module's slots (differentiable)."""
        st = self.__dict__["_fsdp_state"]
        if st["unsharded"]:
            return None
        for mod, name, p in st["params"]:
            full = p.redistribute(p.device_mesh, [Replicate()]).to_local(grad_placements=[Partial("avg")])
            mod._parameters[name] = full
        st["unsharded"] = True
        return None

    def set_reshard_after_forward(self, reshard_after_forward, recurse=True):
        mods = self.modules() if recurse else [self]
        for m in mods:
            if isinstance(m, FSDPModule):
                m.__dict__["_fsdp_state"]["reshard_after_forward"] = bool(reshard_after_forward)


_CLASSES = {}


def _fsdp_class(cls):
    if issubclass(cls, FSDPModule):
        return cls
    out = _CLASSES.get(cls)
    if out is None:
        out = _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    return out


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None, mp_policy=None,
                offload_policy=None, ignored_params=None):
    """Shard ``module``'s parameters (those not already sharded by an inner ``fully_shard``) on dim 0
    over ``mesh`` (default: a 1-D mesh of the whole world); returns the module, now an FSDPModule."""
    if mesh is None:
        import ember.distributed as dist
        from ..device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    if mesh.ndim != 1:
        raise NotImplementedError("ember.distributed.fsdp.fully_shard: HSDP (a 2-D mesh) is not supported")
    for what, v in (("shard_placement_fn", shard_placement_fn), ("mp_policy", mp_policy),
                    ("offload_policy", offload_policy)):
        if v is not None:
            raise NotImplementedError(f"ember.distributed.fsdp.fully_shard: {what} is not supported")
    if not isinstance(reshard_after_forward, bool):
        raise NotImplementedError("ember.distributed.fsdp.fully_shard: reshard_after_forward must be a bool "
                                  f"(resharding to a smaller world is not supported), got {reshard_after_forward!r}")
    ignored = {id(p) for p in (ignored_params or ())}
    params, done = [], {}
    for mod in module.modules():
        if mod is not module and isinstance(mod, FSDPModule):
            continue
        for name, p in list(mod._parameters.items()):
            if p is None or isinstance(p, DTensor) or id(p) in ignored:
                continue
            sharded = done.get(id(p))          # a tied parameter stays one parameter
            if sharded is None:
                sharded = done[id(p)] = nn.Parameter(distribute_tensor(p.detach(), mesh, [Shard(0)]),
                                                     requires_grad=p.requires_grad)
            mod._parameters[name] = sharded
            params.append((mod, name, sharded))
    # parameters of inner FSDP modules below a non-FSDP child are theirs: skip those subtrees
    params = [(m, n, p) for m, n, p in params if not _under_inner_fsdp(module, m)]
    module.__class__ = _fsdp_class(type(module))
    module.__dict__["_fsdp_state"] = {"params": params, "mesh": mesh, "unsharded": False,
                                      "reshard_after_forward": reshard_after_forward}
    module.register_forward_pre_hook(_pre_forward)
    module.register_forward_hook(_post_forward)
    return module


def _under_inner_fsdp(root, mod):
    for m in root.modules():
        if m is not root and isinstance(m, FSDPModule) and any(x is mod for x in m.modules()):
            return True
    return False


def _pre_forward(module, args):
    # always gather afresh: values gathered by an earlier forward predate the optimizer step
    module.reshard()
    module.unshard()
    st = module.__dict__["_fsdp_state"]
    if not st["reshard_after_forward"]:
        _reshard_when_grads_done(module, st)
    return None


def _post_forward(module, args, output):
    if module.__dict__["_fsdp_state"]["reshard_after_forward"]:
        module.reshard()
    return output


def _reshard_when_grads_done(module, st):
    """reshard_after_forward=False: the gathered parameters stay in their slots through backward;
    once every gathered parameter that needs a gradient has got it, the shards go back."""
    fulls = [mod._parameters[name] for mod, name, _ in st["params"] if mod._parameters[name].requires_grad]
    pending = {"n": len(fulls)}

    def done(grad):
        pending["n"] -= 1
        if pending["n"] == 0:
            module.reshard()
        return grad
    for f in fulls:
        f.register_hook(done)
