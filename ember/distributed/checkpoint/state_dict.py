"""``get_state_dict`` / ``set_state_dict`` and their model/optimizer halves: state_dicts keyed by
the parameters' fully qualified names (FQNs) of the *unwrapped* model, whatever wraps it.

Why: a checkpoint written from a ``DistributedDataParallel`` model (keys ``module.x``) must load
into a plain one (keys ``x``), and an optimizer's state_dict keys its state by position
(``0, 1, ...``), which breaks when parameters are added or reordered. These helpers key the
model's entries by FQN with wrapper prefixes removed (``module.`` of DDP / DataParallel,
``_orig_mod.`` of a compiled module), and the optimizer's ``state`` and ``param_groups[i]
["params"]`` by the same FQNs (torch's format). An optimizer that has not stepped yet gets its
state created first by a step with lr 0 and zero gradients (as torch does), so the saved and
the loading state_dicts have the same keys.

Plain and DDP models only: ember has no FSDP, so ``full_state_dict`` and ``cpu_offload``
change nothing (every tensor is already whole and on the CPU). ``broadcast_from_rank0`` (with
``full_state_dict``) sends rank 0's state_dicts to every rank; the others pass ``{}``."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["StateDictOptions", "get_state_dict", "get_model_state_dict", "get_optimizer_state_dict",
           "set_state_dict", "set_model_state_dict", "set_optimizer_state_dict"]


@dataclass
class StateDictOptions:
    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _options(options):
    options = StateDictOptions() if options is None else options
    if not isinstance(options, StateDictOptions):
        raise TypeError(f"options must be a StateDictOptions, got {type(options).__name__}")
    if options.broadcast_from_rank0 and not options.full_state_dict:
        raise ValueError("full_state_dict must be True when broadcast_from_rank0 is True.")
    return options


def _from_rank0(sd, what):
    """``broadcast_from_rank0``: rank 0's state_dict on every rank (other ranks pass ``{}``).
    It travels as ``ember.save`` bytes (JSON + raw arrays), so no rank unpickles another's
    objects; an error on rank 0 is sent instead, and raised on every rank."""
    import io

    from ember.serialization import load as ember_load
    from ember.serialization import save as ember_save

    from .. import distributed_c10d as c10d
    if not c10d.is_initialized():
        raise RuntimeError(f"{what}: broadcast_from_rank0=True needs an initialized process group")
    box = [None]
    if c10d.get_rank() == 0:
        buf = io.BytesIO()
        try:
            ember_save(sd, buf, _use_new_zipfile_serialization=False)   # JSON: never a pickle
            box[0] = ("ok", buf.getvalue())
        except Exception as e:  # noqa: BLE001 - sent to the other ranks, re-raised here
            box[0] = ("err", f"{type(e).__name__}: {e}")
    c10d.broadcast_object_list(box, src=0)
    status, payload = box[0]
    if status != "ok":
        raise RuntimeError(f"{what}: rank 0 could not send its state_dict ({payload})")
    return sd if c10d.get_rank() == 0 else ember_load(io.BytesIO(payload))


def _wrapper_child(module):
    """The attribute under which ``module`` holds the model it wraps, if it is a wrapper."""
    from ember.nn.parallel import DataParallel, DistributedDataParallel
    if isinstance(module, (DistributedDataParallel, DataParallel)):
        return "module"
    if type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod"):
        return "_orig_mod"
    return None


def _unwrap(model):
    while (child := _wrapper_child(model)) is not None:
        model = getattr(model, child)
    return model


def _check_model(model):
    from ember.nn import Module
    if not isinstance(model, Module):
        raise TypeError(f"model must be an ember.nn.Module, got {type(model).__name__}")


def _optims(optimizers):
    from ember.optim import Optimizer
    if isinstance(optimizers, Optimizer):
        return [optimizers]
    try:
        optims = list(optimizers)
    except TypeError:
        raise TypeError(f"optimizers must be an Optimizer or an iterable of them, got {type(optimizers).__name__}") \
            from None
    for o in optims:
        if not isinstance(o, Optimizer):
            raise TypeError(f"optimizers must hold ember.optim.Optimizer objects, got {type(o).__name__}")
    return optims


def _submodule_filter(model, submodules, options):
    """(prefixes to keep, whether to strip them) for the deprecated ``submodules`` argument."""
    if submodules is None:
        return None
    inner = _unwrap(model)
    names = {id(m): n for n, m in inner.named_modules()}
    prefixes = []
    for s in submodules:
        if id(s) not in names:
            raise ValueError(f"submodules: {type(s).__name__} is not a submodule of the model")
        prefixes.append(names[id(s)] + "." if names[id(s)] else "")
    return prefixes


def get_model_state_dict(model, *, submodules=None, options=None):
    """The unwrapped model's state_dict (an OrderedDict keyed by FQN; tensors detached)."""
    _check_model(model)
    options = _options(options)
    inner = _unwrap(model)
    sd = inner.state_dict()
    out = OrderedDict()
    frozen = {n for n, p in inner.named_parameters() if not p.requires_grad} if options.ignore_frozen_params else ()
    prefixes = _submodule_filter(model, submodules, options)
    for k, v in sd.items():
        if k in frozen:
            continue
        if prefixes is not None:
            hit = next((p for p in prefixes if k.startswith(p)), None)
            if hit is None:
                continue
            if not options.keep_submodule_prefixes:
                k = k[len(hit):]
        out[k] = v
    return out


def _param_fqns(model):
    """{id(parameter): FQN} over the unwrapped model (a tied parameter gets its first name)."""
    fqns = {}
    for n, p in _unwrap(model).named_parameters(remove_duplicate=False):
        fqns.setdefault(id(p), n)
    return fqns


def _init_optim_state(optim):
    """Create an optimizer's state as its first step would, without moving the parameters:
    zero gradients and lr 0 for one step (torch's approach)."""
    if optim.state:
        return
    for group in optim.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                raise RuntimeError("state_dict can only be used if the optimizer states are initialized (usually "
                                   "after one step() with gradients) or gradients are None. For the later case, "
                                   "state_dict will fake the gradients as zero to initialize the optimizer states. "
                                   "However, the gradients are not None.")
    import ember
    for group in optim.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = ember.zeros_like(p)
    lrs = [g["lr"] for g in optim.param_groups]
    for g in optim.param_groups:
        g["lr"] = 0.0 if not isinstance(g["lr"], ember.Tensor) else ember.zeros_like(g["lr"])
    try:
        optim.step()
    finally:
        for g, lr in zip(optim.param_groups, lrs):
            g["lr"] = lr
        optim.zero_grad(set_to_none=True)


def _optim_params(optim):
    return [p for g in optim.param_groups for p in g["params"]]


def _fqn_of(fqns, p):
    if id(p) not in fqns:
        raise ValueError("the optimizer holds a parameter that is not a parameter of the model")
    return fqns[id(p)]


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None):
    """The optimizers' state_dict(s), merged, with parameters named by FQN."""
    _check_model(model)
    options = _options(options)
    if submodules is not None:
        raise NotImplementedError("ember.distributed.checkpoint.state_dict: submodules is not supported for "
                                  "optimizer state_dicts")
    fqns = _param_fqns(model)
    state, groups = {}, []
    for optim in _optims(optimizers):
        _init_optim_state(optim)
        osd = optim.state_dict()
        names = [_fqn_of(fqns, p) for p in _optim_params(optim)]
        for idx, st in osd["state"].items():
            state[names[idx]] = st
        for g in osd["param_groups"]:
            g = dict(g)
            g["params"] = [names[i] for i in g["params"]]
            groups.append(g)
    out = {"state": state, "param_groups": groups}
    return _flatten_optim(out) if options.flatten_optimizer_state_dict else out


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(model state_dict, optimizer state_dict), both keyed by FQN."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def _flatten_optim(osd):
    """torch's flat form: ``state.<fqn>.<name>`` and ``param_groups.<fqn>.<hyperparameter>``."""
    flat = {}
    for fqn, st in osd["state"].items():
        for k, v in st.items():
            flat[f"state.{fqn}.{k}"] = v
    for g in osd["param_groups"]:
        for fqn in g["params"]:
            for k, v in g.items():
                if k != "params":
                    flat[f"param_groups.{fqn}.{k}"] = v
    return flat


def _unflatten_optim(flat, optims, fqns):
    state, groups = {}, []
    for optim in optims:
        for g in optim.param_groups:
            names = [_fqn_of(fqns, p) for p in g["params"]]
            for fqn in names:
                prefix = f"state.{fqn}."
                st = {k[len(prefix):]: v for k, v in flat.items() if k.startswith(prefix)}
                if st:
                    state[fqn] = st
            if not names:
                continue
            prefix = f"param_groups.{names[0]}."
            group = {k[len(prefix):]: v for k, v in flat.items() if k.startswith(prefix)}
            if not group:
                raise KeyError(f"the flattened optimizer state_dict has no param_groups entries for {names[0]!r}")
            group["params"] = names
            groups.append(group)
    return {"state": state, "param_groups": groups}


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Load an FQN-keyed state_dict into the (possibly wrapped) model; returns
    ``_IncompatibleKeys`` with FQNs."""
    _check_model(model)
    options = _options(options)
    if not isinstance(model_state_dict, dict):
        raise TypeError(f"model_state_dict must be a dict, got {type(model_state_dict).__name__}")
    if options.broadcast_from_rank0:
        model_state_dict = _from_rank0(model_state_dict, "set_model_state_dict")
    return _unwrap(model).load_state_dict(model_state_dict, strict=options.strict)


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None):
    """Load an FQN-keyed optimizer state_dict (from ``get_optimizer_state_dict``) into the
    optimizers; each optimizer takes the entries of its own parameters."""
    _check_model(model)
    options = _options(options)
    optims = _optims(optimizers)
    fqns = _param_fqns(model)
    if not isinstance(optim_state_dict, dict):
        raise TypeError(f"optim_state_dict must be a dict, got {type(optim_state_dict).__name__}")
    if options.broadcast_from_rank0:
        optim_state_dict = _from_rank0(optim_state_dict, "set_optimizer_state_dict")
    if "state" not in optim_state_dict or "param_groups" not in optim_state_dict:
        optim_state_dict = _unflatten_optim(optim_state_dict, optims, fqns)
    for optim in optims:
        _init_optim_state(optim)
        names = [_fqn_of(fqns, p) for p in _optim_params(optim)]
        index = {n: i for i, n in enumerate(names)}
        state = {index[n]: st for n, st in optim_state_dict["state"].items() if n in index}
        groups = []
        for g in optim.param_groups:
            first = _fqn_of(fqns, g["params"][0]) if g["params"] else None
            saved = next((sg for sg in optim_state_dict["param_groups"] if first in sg["params"]), None)
            if saved is None:
                raise ValueError(f"optim_state_dict has no param_group holding parameter {first!r}")
            mine = [_fqn_of(fqns, p) for p in g["params"]]
            if list(saved["params"]) != mine and set(saved["params"]) != set(mine):
                raise ValueError(f"optim_state_dict's param_group {list(saved['params'])} does not match the "
                                 f"optimizer's {mine}")
            ng = {k: v for k, v in saved.items() if k != "params"}
            ng["params"] = [index[n] for n in mine]
            groups.append(ng)
        optim.load_state_dict({"state": state, "param_groups": groups})


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    """Load both halves; returns the model's ``_IncompatibleKeys``."""
    keys = set_model_state_dict(model, model_state_dict, options=options)
    if optim_state_dict or (options is not None and options.broadcast_from_rank0):
        set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return keys
