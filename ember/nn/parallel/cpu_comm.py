"""``replicate`` / ``scatter`` / ``gather`` / ``parallel_apply`` (``torch.nn.parallel``) over
lists of CPU devices.

torch implements these with CUDA collectives only (a CPU device list raises there); ember has
one device kind to offer, the CPU, and provides their single-process meaning for it, so the
manual data-parallel recipe (scatter the batch, replicate the module, apply in parallel, gather)
runs and is testable here: ``scatter`` splits tensors along ``dim`` into one chunk per device
(``Tensor.chunk``, recursing into tuples, lists and dicts and repeating other objects),
``replicate`` gives each device a structural copy of the module sharing the original
parameters and buffers (so gradients reach the original, as torch's broadcast replicas do),
``parallel_apply`` runs module i on input i in threads and re-raises a replica's exception
naming it, and ``gather`` concatenates the outputs along ``dim``. Non-CPU devices raise.
"""
from __future__ import annotations

import copy
import threading

__all__ = ["replicate", "scatter", "scatter_kwargs", "gather", "parallel_apply"]


def _cpu(device, what):
    """``device`` (-1, "cpu", an ember.device) checked to be the CPU."""
    from ... import types as _t
    if device == -1 or device is None:
        return _t.device("cpu")
    d = _t.device(device) if not isinstance(device, int) else None
    if d is None or d.type != "cpu":
        raise NotImplementedError(f"ember.nn.parallel.{what}: device {device!r} -- ember runs these helpers on "
                                  "CPU devices only (-1, 'cpu'); for several processes use DistributedDataParallel")
    return d


def scatter(inputs, target_gpus, dim=0):
    """``inputs`` split into ``len(target_gpus)`` pieces (see the module); a list of them."""
    from ...tensor import Tensor
    devices = [_cpu(d, "scatter") for d in target_gpus]
    n = len(devices)

    def split(obj):
        if isinstance(obj, Tensor):
            return [c.to(dev) for c, dev in zip(obj.chunk(n, dim), devices)]
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):     # namedtuple
            return [type(obj)(*parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(split, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(parts) for parts in zip(*map(split, obj.items()))]
        return [obj for _ in devices]
    return split(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """``scatter`` of positional and keyword inputs, padded to the same number of pieces."""
    scattered = scatter(inputs, target_gpus, dim) if inputs else []
    kw = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered) < len(kw):
        scattered.extend(() for _ in range(len(kw) - len(scattered)))
    elif len(kw) < len(scattered):
        kw.extend({} for _ in range(len(scattered) - len(kw)))
    return tuple(scattered), tuple(kw)


def gather(outputs, target_device, dim=0):
    """The per-device ``outputs`` joined: tensors concatenated along ``dim`` (0-d ones stacked),
    tuples / lists / dicts gathered element-wise, other objects taken from the first."""
    from ... import cat, stack
    from ...tensor import Tensor
    dev = _cpu(target_device, "gather")

    def join(objs):
        first = objs[0]
        if isinstance(first, Tensor):
            if first.dim() == 0:
                return stack(list(objs)).to(dev)
            return cat([o.to(dev) for o in objs], dim)
        if first is None:
            return None
        if isinstance(first, dict):
            if not all(len(first) == len(o) for o in objs):
                raise ValueError("All dicts must have the same number of keys")
            return type(first)((k, join([o[k] for o in objs])) for k in first)
        if isinstance(first, (tuple, list)):
            parts = [join(list(p)) for p in zip(*objs)]
            if hasattr(first, "_fields"):
                return type(first)(*parts)
            return type(first)(parts)
        return first
    return join(list(outputs))


def replicate(network, devices, detach=False):
    """One copy of ``network`` per device, every copy sharing the original parameters and
    buffers (``detach=True``: detached aliases of them, which no gradient reaches)."""
    for d in devices:
        _cpu(d, "replicate")
    replicas = []
    for _ in devices:
        memo = {}
        for mod in network.modules():
            clone = copy.copy(mod)
            clone.__dict__ = dict(mod.__dict__)
            clone._parameters = dict(mod._parameters)
            clone._buffers = dict(mod._buffers)
            if detach:
                clone._parameters = {k: (None if p is None else p.detach()) for k, p in mod._parameters.items()}
            memo[id(mod)] = clone
        for mod in network.modules():
            clone = memo[id(mod)]
            clone._modules = {k: (None if c is None else memo[id(c)]) for k, c in mod._modules.items()}
        replicas.append(memo[id(network)])
    return replicas


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """``[modules[i](*inputs[i], **kwargs_tup[i])]``, each in its own thread; a replica's
    exception is raised again (its type kept) with the replica's index in the message."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs "
                             f"{len(inputs)}")
    kwargs_tup = tuple(kwargs_tup) if kwargs_tup is not None else ({},) * len(modules)
    if len(kwargs_tup) != len(modules):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of kwargs "
                             f"{len(kwargs_tup)}")
    devices = [_cpu(d, "parallel_apply") for d in (devices if devices is not None else [-1] * len(modules))]
    from ...autograd import is_grad_enabled, set_grad_enabled
    grad_enabled = is_grad_enabled()
    results = [None] * len(modules)

    def worker(i):
        args = inputs[i] if isinstance(inputs[i], (list, tuple)) else (inputs[i],)
        try:
            with set_grad_enabled(grad_enabled):      # grad mode is per thread
                results[i] = ("ok", modules[i](*args, **kwargs_tup[i]))
        except Exception as exc:  # noqa: BLE001 - re-raised below with the replica named
            results[i] = ("err", exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(1, len(modules))]
    for t in threads:
        t.start()
    if modules:
        worker(0)
    for t in threads:
        t.join()
    outputs = []
    for i, (kind, value) in enumerate(results):
        if kind == "err":
            try:
                raised = type(value)(f"Caught {type(value).__name__} in replica {i} on device {devices[i]}.\n"
                                     f"Original error: {value}")
            except Exception:  # noqa: BLE001 - an exception type whose constructor needs more arguments
                raise value
            raise raised from value
        outputs.append(value)
    return outputs
