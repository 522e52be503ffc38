"""``fuse_modules``: merge conv-bn(-relu) and linear(-relu) runs into single modules before
quantization (eval mode: the batch norm's statistics are folded into the conv's weight and
bias; the ReLU becomes part of a fused ``ConvReLU2d`` / ``LinearReLU``), as torch's."""
from __future__ import annotations

import copy

import numpy as np

import ember
from ember import nn

__all__ = ["fuse_modules", "fuse_conv_bn_eval", "fuse_known_modules"]


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


def _fuse(mods):
    from ..nn import intrinsic as nni
    types = tuple(type(m) for m in mods)
    BN = (nn.BatchNorm2d, nn.BatchNorm1d)
    if any(m.training for m in mods) and types not in ((nn.Conv2d, nn.ReLU), (nn.Linear, nn.ReLU)):
        raise NotImplementedError("ember.quantization: fusing modules in training mode (QAT fusion) is not "
                                  "supported; call model.eval() first")
    if types == (nn.Conv2d, nn.BatchNorm2d):
        return fuse_conv_bn_eval(*mods)
    if types == (nn.Conv2d, nn.BatchNorm2d, nn.ReLU):
        return nni.ConvReLU2d(fuse_conv_bn_eval(mods[0], mods[1]), mods[2])
    if types == (nn.Conv2d, nn.ReLU):
        return nni.ConvReLU2d(*mods)
    if types == (nn.Linear, nn.ReLU):
        return nni.LinearReLU(*mods)
    if len(types) == 2 and types[0] is nn.Linear and types[1] in BN:
        return fuse_conv_bn_eval(*mods)
    raise NotImplementedError(f"Cannot fuse modules: {types}")


def fuse_known_modules(mod_list, is_qat=False, additional_fuser_method_mapping=None):
    """The fused module followed by ``Identity``s for the others (torch's list form)."""
    fused = _fuse(mod_list)
    return [fused] + [nn.Identity() for _ in mod_list[1:]]


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
    """Fuse each list of submodule names in ``modules_to_fuse`` (or the single list)."""
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse if modules_to_fuse and isinstance(modules_to_fuse[0], (list, tuple)) \
        else [modules_to_fuse]
    for names in groups:
        mods = [_get(model, n) for n in names]
        new = fuser_func(mods, False, None) if fuser_func is not fuse_known_modules else fuse_known_modules(mods)
        for n, m in zip(names, new):
            _set(model, n, m)
    return model
