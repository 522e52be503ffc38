"""Helpers of the sparsifiers: the ``FakeSparsity`` parametrization and fully-qualified-name
lookups (``"layer1.0.weight"`` -> module and tensor name)."""
from __future__ import annotations

from itertools import chain

from ember import nn
from ember.nn.utils.parametrize import is_parametrized, type_before_parametrizations

__all__ = ["module_contains_param", "swap_module", "module_to_fqn", "fqn_to_module", "get_arg_info_from_tensor_fqn",
           "FakeSparsity"]


def module_contains_param(module, parametrization):
    """Whether any parametrization list of ``module`` holds an instance of ``parametrization``."""
    if not is_parametrized(module):
        return False
    return any(isinstance(p, parametrization) for plist in module.parametrizations.values() for p in plist)


def swap_module(mod, mapping):
    """``mapping[type(mod)].from_dense(mod)`` (hooks carried over), or ``mod`` when unmapped."""
    base = type_before_parametrizations(mod)
    if base not in mapping:
        return mod
    new_mod = mapping[base].from_dense(mod)
    for hook in mod._forward_pre_hooks.values():
        new_mod.register_forward_pre_hook(hook)
    for hook in mod._forward_hooks.values():
        new_mod.register_forward_hook(hook)
    devices = {t.device for t in chain(mod.parameters(), mod.buffers())}
    if len(devices) > 1:
        raise AssertionError(f"swap_module only works with cpu or single-device CUDA modules, but got devices "
                             f"{devices}")
    return new_mod


def module_to_fqn(model, module, prefix=""):
    """The dotted name of ``module`` inside ``model`` ("" for the model itself), None if absent."""
    if module is model:
        return ""
    for name, child in model.named_children():
        fqn = module_to_fqn(child, module, ".")
        if isinstance(fqn, str):
            return prefix + name + fqn
    return None


def fqn_to_module(model, path):
    """The module or tensor at dotted ``path`` under ``model`` (None where a name is missing)."""
    if path != "":
        for name in path.split("."):
            model = getattr(model, name, None)
    return model


def get_arg_info_from_tensor_fqn(model, tensor_fqn):
    """``{"module_fqn", "module", "tensor_name", "tensor_fqn"}`` of a tensor's dotted name."""
    tensor_name = tensor_fqn.rsplit(".", maxsplit=1)[-1]
    module_fqn = tensor_fqn[: -len(tensor_name) - ("." in tensor_fqn)]
    return {"module_fqn": module_fqn, "module": fqn_to_module(model, module_fqn), "tensor_name": tensor_name,
            "tensor_fqn": tensor_fqn}


class FakeSparsity(nn.Module):
    """Parametrization ``x -> mask * x``. The sparsifier keeps a reference to ``mask`` and
    rewrites its contents (``mask.data = ...``) on each step, so the buffer object must stay the
    same one. Its ``state_dict()`` is empty: the sparsifier's state dict carries the masks."""

    def __init__(self, mask):
        super().__init__()
        self.register_buffer("mask", mask)

    def forward(self, x):
        if self.mask.shape != x.shape:
            raise AssertionError(f"mask shape ({self.mask.shape}) must match x shape ({x.shape})")
        return self.mask * x

    def state_dict(self, *args, **kwargs):
        return {}
