"""Eager-mode quantization flows, as torch.ao.quantization's: ``quantize_dynamic`` (swap float
layers for dynamically quantized ones); static quantization (``prepare`` attaches observers,
calibration runs data through, ``convert`` swaps in quantized modules); and the qconfig
propagation and module swapping both are built from."""
from __future__ import annotations

import copy
import itertools

import ember
from ... import nn
from .qconfig import QConfig, default_dynamic_qconfig, float16_dynamic_qconfig, float_qparams_weight_only_qconfig
from .quantization_mappings import (get_default_dynamic_quant_module_mappings, get_default_qat_module_mappings,
                                    get_default_static_quant_module_mappings, no_observer_set)

__all__ = ["quantize_dynamic", "propagate_qconfig_", "convert", "swap_module", "prepare", "quantize",
           "prepare_qat", "quantize_qat", "add_quant_dequant", "get_default_custom_config_dict", "default_eval_fn"]

_RNN_NAMES = ("LSTM", "GRU", "LSTMCell", "RNNCell", "GRUCell")


_DEFAULT_CUSTOM_CONFIG_DICT = {}


def get_default_custom_config_dict():
    """The custom-module swaps ``prepare`` / ``convert`` make when given no custom config: float
    ``nn.LSTM`` -> observed ``quantizable.LSTM`` -> ``quantized.LSTM``, and nn.MultiheadAttention ->
    ``quantizable.MultiheadAttention`` -> ``quantized.MultiheadAttention``, as torch's."""
    if not _DEFAULT_CUSTOM_CONFIG_DICT:
        from ..nn import quantizable as nnqa
        from ..nn.quantized.modules.mha import MultiheadAttention as QuantizedMHA
        from ..nn.quantized.modules.rnn import LSTM as QuantizedLSTM
        _DEFAULT_CUSTOM_CONFIG_DICT.update({
            "float_to_observed_custom_module_class": {nn.LSTM: nnqa.LSTM,
                                                      nn.MultiheadAttention: nnqa.MultiheadAttention},
            "observed_to_quantized_custom_module_class": {nnqa.LSTM: QuantizedLSTM,
                                                          nnqa.MultiheadAttention: QuantizedMHA}})
    return _DEFAULT_CUSTOM_CONFIG_DICT


def default_eval_fn(model, calib_data):
    """Calibration loop: run ``model`` on each ``(data, target)`` of ``calib_data``."""
    for data, _target in calib_data:
        model(data)


def _default_spec(dtype):
    rnns = [getattr(nn, n) for n in _RNN_NAMES if hasattr(nn, n)]
    if dtype is ember.qint8:
        return {c: default_dynamic_qconfig for c in [nn.Linear] + rnns}
    if dtype is ember.float16:
        return {c: float16_dynamic_qconfig for c in [nn.Linear] + rnns}
    if dtype is ember.quint8:
        return {nn.EmbeddingBag: float_qparams_weight_only_qconfig, nn.Embedding: float_qparams_weight_only_qconfig}
    raise ValueError(f"Don't know how to quantize with default settings for {dtype}. Provide full qconfig please")


def _assert_valid_qconfig(qconfig, mod):
    if qconfig is None:
        return
    if not isinstance(qconfig, QConfig) and not (isinstance(qconfig, tuple) and len(qconfig) == 2):
        raise TypeError(f"qconfig for {type(mod).__name__} must be a QConfig, got {type(qconfig).__name__}")


def _propagate(module, spec, parent_qconfig, prefix):
    qc = spec.get(type(module), parent_qconfig)
    qc = spec.get(prefix, qc)
    qc = getattr(module, "qconfig", qc)
    _assert_valid_qconfig(qc, module)
    module.qconfig = qc
    for name, child in module.named_children():
        _propagate(child, spec, qc, f"{prefix}.{name}" if prefix else name)


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Give every submodule a ``qconfig``: its type's or its name's entry in ``qconfig_dict``,
    else its parent's (an existing ``module.qconfig`` wins)."""
    _propagate(module, qconfig_dict or {}, None, "")


def swap_module(mod, mapping, custom_module_class_mapping=None, use_precomputed_fake_quant=False):
    """The quantized replacement of ``mod`` if its type is mapped and it has a qconfig; else ``mod``
    (a custom module -- ``custom_module_class_mapping`` -- converts by ``from_observed``)."""
    new_mod = mod
    if getattr(mod, "qconfig", None) is not None:
        custom = (custom_module_class_mapping or {}).get(type(mod))
        qcls = custom or mapping.get(type(mod))
        if qcls is not None:
            new_mod = qcls.from_observed(mod) if custom is not None else qcls.from_float(mod)
            for hook in mod._forward_pre_hooks.values():
                new_mod.register_forward_pre_hook(hook)
            for hook in mod._forward_hooks.values():
                if hook is not _observer_forward_hook:      # the observer goes with the float module
                    new_mod.register_forward_hook(hook)
    return new_mod


def _is_fused(mod, nni):
    """A fused module or the QAT module of one (torch's QAT ConvBn2d ... are _FusedModules; ember's
    say so by their ``_FLOAT_MODULE``): converted whole, its children (a QAT conv's batch norm) untouched."""
    float_cls = getattr(type(mod), "_FLOAT_MODULE", None)
    return isinstance(mod, nni._FusedModule) or (isinstance(float_cls, type)
                                                 and issubclass(float_cls, nni._FusedModule))


def _convert(module, mapping, inplace, custom_mapping):
    if not inplace:
        module = copy.deepcopy(module)
    reassign = {}
    from ..nn import intrinsic as nni
    for name, child in module.named_children():
        if not _is_fused(child, nni) and type(child) not in custom_mapping:
            _convert(child, mapping, True, custom_mapping)
        reassign[name] = swap_module(child, mapping, custom_mapping)
    for name, new in reassign.items():
        module._modules[name] = new
    return module


def convert(module, mapping=None, inplace=False, remove_qconfig=True, is_reference=False,
            convert_custom_config_dict=None, use_precomputed_fake_quant=False):
    """Swap the mapped submodules that carry a qconfig for their quantized versions."""
    if is_reference:
        raise NotImplementedError("ember.quantization: convert(is_reference=True) is not supported")
    if mapping is None:
        mapping = get_default_static_quant_module_mappings()
    if convert_custom_config_dict is None:
        convert_custom_config_dict = get_default_custom_config_dict()
    custom = convert_custom_config_dict.get("observed_to_quantized_custom_module_class", {})
    module = _convert(module, mapping, inplace, custom)
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def quantize_dynamic(model, qconfig_spec=None, dtype=None, mapping=None, inplace=False):
    """Replace ``nn.Linear`` / ``nn.LSTM`` / ``nn.GRU`` / the RNN cells (those named by ``qconfig_spec``:
    a set of types, or a dict of types / submodule names to qconfigs) with dynamically quantized ones."""
    dtype = ember.qint8 if dtype is None else dtype
    if qconfig_spec is None:
        qconfig_spec = _default_spec(dtype)
    elif isinstance(qconfig_spec, set):
        if dtype is ember.qint8:
            default = default_dynamic_qconfig
        elif dtype is ember.float16:
            default = float16_dynamic_qconfig
        elif dtype is ember.quint8:
            default = float_qparams_weight_only_qconfig
        else:
            raise RuntimeError("Unknown dtype specified for quantize_dynamic: ", str(dtype))
        qconfig_spec = dict(zip(qconfig_spec, itertools.repeat(default)))
    elif not isinstance(qconfig_spec, dict):
        raise TypeError(f"quantize_dynamic(): qconfig_spec must be a set or a dict, got {type(qconfig_spec).__name__}")
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model


def _observed_leaf_types():
    from .stubs import QuantStub
    return {nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d,
            nn.BatchNorm2d, nn.BatchNorm3d, nn.ELU, nn.Hardswish, nn.LeakyReLU, nn.ReLU6, nn.LayerNorm, nn.GroupNorm,
            nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.PReLU, QuantStub}


def _observer_forward_hook(self, input, output):
    return self.activation_post_process(output)


def _insert_observer(m):
    from .stubs import DeQuantStub
    if getattr(m, "qconfig", None) is not None and not isinstance(m, DeQuantStub):
        m.add_module("activation_post_process", m.qconfig.activation())
        m.register_forward_hook(_observer_forward_hook)


def _add_observer_(module, non_leaf=frozenset(), custom=None, leaf_types=None):
    """Observers on the outputs of the quantizable leaves, the fused modules and the (non-leaf)
    module types in ``non_leaf`` -- the QAT modules, whose fake quantizers are children; a
    FloatFunctional's ``activation_post_process`` becomes an observer (its ops call it); a
    module type in ``custom`` (float -> observed custom class) is swapped for its observed version."""
    from ..nn import intrinsic as nni
    from ..nn.quantized.modules.functional_modules import FloatFunctional, QFunctional
    custom = custom or {}
    for name, child in list(module.named_children()):
        if type(child) in (FloatFunctional, QFunctional):
            if getattr(child, "qconfig", None) is not None:
                child.activation_post_process = child.qconfig.activation()
        elif isinstance(child, nni._FusedModule) or type(child) in non_leaf:
            _insert_observer(child)
        elif getattr(child, "qconfig", None) is not None and type(child) in custom:
            observed = custom[type(child)].from_float(child)
            module._modules[name] = observed
            if custom[type(child)] not in no_observer_set():
                _insert_observer(observed)
        else:
            _add_observer_(child, non_leaf, custom, leaf_types)
    if leaf_types is None:
        leaf_types = _observed_leaf_types()
    if not list(module.children()) and not isinstance(module, nn.Sequential) and type(module) in leaf_types:
        _insert_observer(module)


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """Attach observers (from each module's ``qconfig``) to the outputs of the quantizable modules,
    for calibration before ``convert``."""
    # (as torch's eager prepare, only this key is read: the others serve convert / FX)
    if prepare_custom_config_dict is None:
        prepare_custom_config_dict = get_default_custom_config_dict()
    custom = prepare_custom_config_dict.get("float_to_observed_custom_module_class", {})
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model, None)
    if not any(getattr(m, "qconfig", None) for m in model.modules()):
        import warnings
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct configuration "
                      "through `qconfig_dict` or by assigning the `.qconfig` attribute directly on submodules",
                      stacklevel=2)
    # allow_list: the leaf module types to observe (the numeric suite's logger placement)
    _add_observer_(model, frozenset(observer_non_leaf_module_list or ()), custom,
                   None if allow_list is None else set(allow_list))
    return model


def _remove_qconfig(module):
    for child in module.children():
        _remove_qconfig(child)
    if hasattr(module, "qconfig"):
        del module.qconfig
    from .fake_quantize import FakeQuantizeBase
    from .observer import ObserverBase
    app = module._modules.get("activation_post_process")
    if isinstance(app, (ObserverBase, FakeQuantizeBase)):      # (a QFunctional's Identity stays)
        del module._modules["activation_post_process"]
        for k, hook in list(module._forward_hooks.items()):
            if hook is _observer_forward_hook:
                del module._forward_hooks[k]


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    """prepare, calibrate with ``run_fn(model, *run_args)``, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, *run_args) if isinstance(run_args, (list, tuple)) else run_fn(model, run_args)
    convert(model, mapping, inplace=True)
    return model


def prepare_qat(model, mapping=None, inplace=False):
    """Quantization-aware training: swap the float (and fused) layers for their QAT versions
    (fake-quantized weights) and attach fake quantizers to the activations; train, then
    ``convert(model.eval())``."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if mapping is None:
        mapping = get_default_qat_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model, None)
    convert(model, mapping=mapping, inplace=True, remove_qconfig=False)
    prepare(model, observer_non_leaf_module_list=set(mapping.values()), inplace=True)
    return model


def quantize_qat(model, run_fn, run_args, inplace=False):
    """prepare_qat, train with ``run_fn(model, *run_args)``, convert (in eval mode)."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args) if isinstance(run_args, (list, tuple)) else run_fn(model, run_args)
    convert(model, inplace=True)
    return model


def add_quant_dequant(module):
    """Wrap every leaf module that has a qconfig in a ``QuantWrapper`` (quantize its input,
    dequantize its output), so a float model can be quantized layer by layer."""
    from .stubs import QuantWrapper
    if not list(module.children()) and getattr(module, "qconfig", None):
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = add_quant_dequant(child)
    return module
