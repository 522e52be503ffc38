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


def _check_conv_bn(conv, bn, is_qat):
    if conv.training != bn.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        if bn.num_features != conv.out_channels:
            raise AssertionError("Output channel of Conv2d must match num_features of BatchNorm2d")
        if not bn.affine:
            raise AssertionError("Only support fusing BatchNorm2d with affine set to True")
        if not bn.track_running_stats:
            raise AssertionError("Only support fusing BatchNorm2d with tracking_running_stats set to True")


def _fuse(mods, is_qat=False):
    """The fused module for ``mods``: for QAT (``is_qat``) conv-bn stays a trainable ConvBn2d; for
    post-training quantization the batch norm is folded into the conv (eval mode only)."""
    from ..nn import intrinsic as nni
    types = tuple(type(m) for m in mods)
    BN = (nn.BatchNorm2d, nn.BatchNorm1d)
    if types == (nn.Conv2d, nn.BatchNorm2d):
        _check_conv_bn(*mods, is_qat)
        return nni.ConvBn2d(*mods) if is_qat else fuse_conv_bn_eval(*mods)
    if types == (nn.Conv2d, nn.BatchNorm2d, nn.ReLU):
        _check_conv_bn(mods[0], mods[1], is_qat)
        if is_qat:
            return nni.ConvBnReLU2d(*mods)
        return nni.ConvReLU2d(fuse_conv_bn_eval(mods[0], mods[1]), mods[2])
    if types == (nn.Conv2d, nn.ReLU):
        return nni.ConvReLU2d(*mods)
    if types == (nn.Linear, nn.ReLU):
        return nni.LinearReLU(*mods)
    if len(types) == 2 and types[0] is nn.Linear and types[1] in BN:
        if is_qat:
            raise NotImplementedError("ember.quantization: QAT fusion of Linear + BatchNorm1d (LinearBn1d) is not "
                                      "supported")
        return fuse_conv_bn_eval(*mods)
    raise NotImplementedError(f"Cannot fuse modules: {types}")


def fuse_known_modules(mod_list, is_qat=False, additional_fuser_method_mapping=None):
    """The fused module followed by ``Identity``s for the others (torch's list form)."""
    fused = _fuse(mod_list, is_qat)
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
