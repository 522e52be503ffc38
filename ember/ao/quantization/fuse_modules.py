"""``fuse_modules``: merge conv-bn(-relu) and linear(-relu) runs into single modules before
quantization (eval mode: the batch norm's statistics are folded into the conv's weight and
bias; the ReLU becomes part of a fused ``ConvReLU2d`` / ``LinearReLU``), as torch's;
``fuse_modules_qat``: the training-mode fusion (``ConvBn2d`` / ``ConvBnReLU2d`` keep the batch norm)."""
from __future__ import annotations

import copy

import numpy as np

import ember
from ember import nn

__all__ = ["fuse_modules", "fuse_modules_qat", "fuse_conv_bn_eval", "fuse_known_modules"]



def fuse_conv_bn_eval(conv, bn):
    """A copy of ``conv`` computing ``bn(conv(x))`` (eval statistics):
    ``w * gamma / sqrt(var + eps)`` per output channel, ``(b - mean) * gamma / sqrt(var + eps) + beta``."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    f32 = np.float32
    w = np.asarray(conv.weight.detach()._data, f32)
    b = np.zeros(w.shape[0], f32) if conv.bias is None else np.asarray(conv.bias.detach()._data, f32)
    mean = np.asarray(bn.running_mean.detach()._data, f32)
    var = np.asarray(bn.running_var.detach()._data, f32)
    gamma = np.ones_like(mean) if bn.weight is None else np.asarray(bn.weight.detach()._data, f32)
    beta = np.zeros_like(mean) if bn.bias is None else np.asarray(bn.bias.detach()._data, f32)
    rsqrt = (f32(1) / np.sqrt((var + f32(bn.eps)).astype(f32))).astype(f32)
    shape = (-1,) + (1,) * (w.ndim - 1)
    fused.weight = nn.Parameter(ember.tensor((w * (gamma * rsqrt).reshape(shape)).astype(f32)),
                                conv.weight.requires_grad)
    fused.bias = nn.Parameter(ember.tensor((((b - mean) * rsqrt * gamma) + beta).astype(f32)),
                              conv.weight.requires_grad)
    return fused


def fuse_known_modules(mod_list, is_qat=False, additional_fuser_method_mapping=None):
    """The fused module followed by ``Identity``s for the others (torch's list form). The fuser
    method comes from ``fuser_method_mappings.get_fuser_method`` (AssertionError for a run of
    types it does not know); the first module's forward pre-hooks and the last one's forward
    hooks move to the fused module."""
    from .fuser_method_mappings import get_fuser_method
    types = tuple(type(m) for m in mod_list)
    fuser_method = get_fuser_method(types, additional_fuser_method_mapping)
    if fuser_method is None:
        raise NotImplementedError(f"Cannot fuse modules: {types}")
    fused = fuser_method(is_qat, *mod_list)
    for hook in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(hook)
    mod_list[0]._forward_pre_hooks.clear()
    for hook in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook)
    mod_list[-1]._forward_hooks.clear()
    rest = []
    for _ in mod_list[1:]:
        identity = nn.Identity()
        identity.training = mod_list[0].training
        rest.append(identity)
    return [fused] + rest


def _get(model, name):
    for part in name.split("."):
        model = getattr(model, part)
    return model


def _set(model, name, new):
    *parents, last = name.split(".")
    for part in parents:
        model = getattr(model, part)
    setattr(model, last, new)


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules, fuse_custom_config_dict=None):
    """Fuse each list of submodule names in ``modules_to_fuse`` (or the single list), for
    post-training quantization (batch norms folded: eval mode)."""
    return _fuse_modules(model, modules_to_fuse, False, inplace, fuser_func)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """``fuse_modules`` for quantization-aware training: conv-bn(-relu) become ConvBn2d /
    ConvBnReLU2d, whose batch norm keeps training (``prepare_qat`` makes them QAT modules)."""
    return _fuse_modules(model, modules_to_fuse, True, inplace, fuser_func)


def _fuse_modules(model, modules_to_fuse, is_qat, inplace, fuser_func):
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse if modules_to_fuse and isinstance(modules_to_fuse[0], (list, tuple)) \
        else [modules_to_fuse]
    for names in groups:
        mods = [_get(model, n) for n in names]
        new = fuser_func(mods, is_qat, None)
        for n, m in zip(names, new):
            _set(model, n, m)
    return model
