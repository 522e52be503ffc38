"""``distribute_module``: lay a module's parameters out over a mesh and hook its inputs/outputs.

Why hooks. The partition function decides each submodule's parameter layouts once; the
input/output functions run on every call (as forward pre-hooks / hooks), which is where
tensor-parallel styles convert plain activations to DTensors and back."""
from __future__ import annotations

import inspect

from ._api import DTensor, distribute_tensor
from ._utils import check_mesh
from .placement_types import Replicate


def _replicate_rest(module, mesh):
    """Every parameter/buffer of ``module`` itself that is not yet a DTensor, as Replicate."""
    import ember.nn as nn
    full = [Replicate()] * mesh.ndim
    for key, p in list(module._parameters.items()):
        if p is not None and not isinstance(p, DTensor):
            module.register_parameter(key, nn.Parameter(distribute_tensor(p.data, mesh, full),
                                                        requires_grad=p.requires_grad))
    for key, b in list(module._buffers.items()):
        if b is not None and not isinstance(b, DTensor):
            module._buffers[key] = distribute_tensor(b, mesh, full)


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None, output_fn=None):
    """torch.distributed.tensor.distribute_module: ``partition_fn(name, submodule, mesh)`` on every
    submodule (parameters it leaves plain become Replicate DTensors); ``input_fn(module, inputs,
    mesh)`` as a forward pre-hook and ``output_fn(module, outputs, mesh)`` as a forward hook."""
    if device_mesh is None:
        raise ValueError("distribute_module: device_mesh is required (ember has no mesh context manager)")
    mesh = check_mesh(device_mesh, "distribute_module")
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, "
                           "but it has already been called on this module!")
    for name, sub in module.named_modules():
        if partition_fn is not None:
            partition_fn(name, sub, mesh)
        _replicate_rest(sub, mesh)
    if input_fn is not None:
        n = len(inspect.signature(input_fn).parameters)
        if n == 2:
            module.register_forward_pre_hook(lambda _, inputs: input_fn(inputs, mesh))
        elif n == 3:
            module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
        else:
            raise ValueError(f"input_fn should take in 3 arguments, but got {n} arguments!")
    if output_fn is not None:
        n = len(inspect.signature(output_fn).parameters)
        if n == 2:
            module.register_forward_hook(lambda mod, inputs, outputs: output_fn(outputs, mesh))
        elif n == 3:
            module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, mesh))
        else:
            raise ValueError(f"output_fn should take in 3 arguments, but got {n} arguments!")
    module._distribute_module_applied = True
    return module
