"""``ember.ao.quantization.quantize_fx``: FX graph mode quantization, as torch's. The model is
traced (``QuantizationTracer``), its fusable module chains fused (``fuse_fx``), observers put
where the backend's patterns say (``prepare_fx`` / ``prepare_qat_fx``: an
``ObservedGraphModule``), and after calibration or training the observed graph becomes a
quantized one (``convert_fx``) or a reference one (``convert_to_reference_fx``: quantize ->
dequantize -> float op). Values match torch's flow on the same weights and data."""
from __future__ import annotations

import copy
import warnings

from .backend_config import BackendConfig, get_native_backend_config
from .fx import _state
from .fx.convert import convert as _convert
from .fx.custom_config import ConvertCustomConfig, FuseCustomConfig, PrepareCustomConfig
from .fx.fuse import fuse_graph
from .fx.graph_module import ObservedGraphModule
from .fx.prepare import insert_observers, is_observer, match_patterns, share_observers, tensor_valued
from .fx.qconfig_utils import generate_node_name_to_qconfig, update_qconfig_for_fusion
from .fx.tracer import QuantizationTracer
from .qconfig_mapping import QConfigMapping

__all__ = ["fuse_fx", "prepare_fx", "prepare_qat_fx", "convert_fx", "convert_to_reference_fx",
           "QuantizationTracer", "ObservedGraphModule"]


def _unsupported(what):
    return NotImplementedError(f"ember.ao.quantization.quantize_fx: {what} is not supported")


def _as_prepare_config(config):
    if config is None:
        return PrepareCustomConfig()
    if isinstance(config, dict):
        warnings.warn("Passing a prepare_custom_config_dict to prepare is deprecated and will not be supported in a "
                      "future version. Please pass in a PrepareCustomConfig instead.", FutureWarning, stacklevel=3)
        return PrepareCustomConfig.from_dict(config)
    if not isinstance(config, PrepareCustomConfig):
        raise TypeError(f"prepare_custom_config must be a PrepareCustomConfig, a dict or None, got "
                        f"{type(config).__name__}")
    return config


def _as_backend_config(config):
    if config is None:
        return get_native_backend_config()
    if isinstance(config, dict):
        warnings.warn("Passing a backend_config_dict to prepare is deprecated and will not be supported in a future "
                      "version. Please pass in a BackendConfig instead.", FutureWarning, stacklevel=3)
        return BackendConfig.from_dict(config)
    if not isinstance(config, BackendConfig):
        raise TypeError(f"backend_config must be a BackendConfig, a dict or None, got {type(config).__name__}")
    return config


def _as_qconfig_mapping(mapping):
    if isinstance(mapping, dict):
        warnings.warn("Passing a QConfig dictionary to prepare is deprecated and will not be supported in a future "
                      "version. Please pass in a QConfigMapping instead.", FutureWarning, stacklevel=3)
        return QConfigMapping.from_dict(mapping)
    if not isinstance(mapping, QConfigMapping):
        raise TypeError(f"qconfig_mapping must be a QConfigMapping or a dict, got {type(mapping).__name__}")
    return copy.deepcopy(mapping)


def _refuse_unsupported_prepare_options(config):
    if config.standalone_module_names or config.standalone_module_classes:
        raise _unsupported("standalone modules (PrepareCustomConfig.set_standalone_module_name / _class)")
    if config.float_to_observed_mapping:
        raise _unsupported("custom modules (PrepareCustomConfig.set_float_to_observed_mapping)")
    if config.input_quantized_indexes or config.output_quantized_indexes:
        raise _unsupported("quantized model inputs / outputs (PrepareCustomConfig.set_input_quantized_indexes / "
                           "set_output_quantized_indexes)")


def _trace(model, skipped_names, skipped_classes, preserved):
    """(GraphModule, node name -> scope) of ``model``: ember.fx's errors for what it cannot trace."""
    from ember.fx import GraphModule
    tracer = QuantizationTracer(skipped_names, skipped_classes)
    graph = tracer.trace(model)
    gm = GraphModule(tracer.root, graph, type(model).__name__)
    for attr in preserved:
        if hasattr(model, attr):
            setattr(gm, attr, getattr(model, attr))
    return gm, tracer.node_name_to_scope


def _check_model(model, fn):
    from ember import nn
    if not isinstance(model, nn.Module):
        raise TypeError(f"{fn}(): model must be an ember.nn.Module, got {type(model).__name__}")


def fuse_fx(model, fuse_custom_config=None, backend_config=None):
    """Trace ``model`` (eval mode) and fuse conv-bn(-relu), linear(-relu), bn-relu ... chains into
    the backend's fused modules; a GraphModule."""
    _check_model(model, "fuse_fx")
    if isinstance(fuse_custom_config, dict):
        fuse_custom_config = FuseCustomConfig.from_dict(fuse_custom_config)
    fuse_custom_config = fuse_custom_config or FuseCustomConfig()
    gm, _ = _trace(model, [], [], fuse_custom_config.preserved_attributes)
    return fuse_graph(gm, _as_backend_config(backend_config), False, fuse_custom_config.preserved_attributes)


def _prepare(model, qconfig_mapping, is_qat, example_inputs, prepare_custom_config, backend_config):
    _check_model(model, "prepare_qat_fx" if is_qat else "prepare_fx")
    prepare_custom_config = _as_prepare_config(prepare_custom_config)
    _refuse_unsupported_prepare_options(prepare_custom_config)
    backend_config = _as_backend_config(backend_config)
    qconfig_mapping = _as_qconfig_mapping(qconfig_mapping)
    if isinstance(example_inputs, list):
        example_inputs = tuple(example_inputs)
    if example_inputs is not None and not isinstance(example_inputs, tuple):
        raise TypeError(f"example_inputs must be a tuple of the model's positional inputs, got "
                        f"{type(example_inputs).__name__}")
    preserved = prepare_custom_config.preserved_attributes
    gm, scopes = _trace(model, prepare_custom_config.non_traceable_module_names,
                        prepare_custom_config.non_traceable_module_classes, preserved)
    gm = fuse_graph(gm, backend_config, is_qat, preserved)
    # fused modules are new nodes' targets: their scope is their own path
    for node in gm.graph.nodes:
        if node.op == "call_module":
            scopes[node.name] = (node.target, type(gm.get_submodule(node.target)))
    update_qconfig_for_fusion(gm, qconfig_mapping)
    modules = dict(gm.named_modules())
    node_qconfig = generate_node_name_to_qconfig(modules, gm.graph, qconfig_mapping, scopes, is_observer)
    tensors = tensor_valued(gm.graph, example_inputs)
    matches = match_patterns(gm, modules, backend_config, node_qconfig, tensors, prepare_custom_config)
    if is_qat:
        _swap_qat_modules(gm, matches, backend_config)
        modules = dict(gm.named_modules())
    insert_observers(gm, modules, matches, tensors)
    shared = share_observers(gm, modules, matches)
    gm.graph.lint()
    observed = ObservedGraphModule(gm, gm.graph, preserved)
    observed.meta[_state.STATE_KEY] = _state.ObservedState(
        node_name_to_qconfig=node_qconfig, node_name_to_scope=scopes,
        matches={root.name: _state.Match([n.name for n in m.nodes], m.kind, m.qconfig, m.dynamic, m.weight_index,
                                         m.bias_index, m.relu) for root, m in matches.items()},
        qconfig_mapping=qconfig_mapping, backend_config=backend_config, prepare_custom_config=prepare_custom_config,
        is_qat=is_qat, observed_node_names={n.name for n in matches}, shared_observer_names=shared)
    return observed


def _swap_qat_modules(gm, matches, backend_config):
    """Each matched weighted module (float or fused) becomes its QAT version (fake-quantized weight)."""
    qat_of = {}
    for conf in backend_config.configs:
        if conf.qat_module is not None and not isinstance(conf.pattern, tuple) and conf.pattern is not None:
            qat_of[conf.pattern] = conf.qat_module
    for root, m in matches.items():
        if m.kind != "weighted_module":
            continue
        mod = gm.get_submodule(root.target)
        qat_cls = qat_of.get(type(mod))
        if qat_cls is None:
            continue
        mod.qconfig = m.qconfig
        new = qat_cls.from_float(mod)
        *parents, last = root.target.split(".")
        owner = gm
        for p in parents:
            owner = getattr(owner, p)
        setattr(owner, last, new)


def prepare_fx(model, qconfig_mapping, example_inputs, prepare_custom_config=None, _equalization_config=None,
               backend_config=None):
    """Trace and fuse ``model`` (eval mode) and insert observers per ``qconfig_mapping``;
    calibrate the returned model, then ``convert_fx`` it."""
    if _equalization_config is not None:
        raise _unsupported("equalization (_equalization_config)")
    return _prepare(model, qconfig_mapping, False, example_inputs, prepare_custom_config, backend_config)


def prepare_qat_fx(model, qconfig_mapping, example_inputs, prepare_custom_config=None, backend_config=None):
    """``prepare_fx`` for quantization-aware training (``model`` in training mode): QAT modules
    (fake-quantized weights) and fake quantizers on the activations."""
    if not model.training:
        raise AssertionError("prepare_qat_fx only works for models in train mode")
    return _prepare(model, qconfig_mapping, True, example_inputs, prepare_custom_config, backend_config)


def _as_convert_config(config):
    if config is None:
        return ConvertCustomConfig()
    if isinstance(config, dict):
        warnings.warn("Passing a convert_custom_config_dict to convert is deprecated and will not be supported in a "
                      "future version. Please pass in a ConvertCustomConfig instead.", FutureWarning, stacklevel=3)
        return ConvertCustomConfig.from_dict(config)
    return config


def convert_fx(graph_module, convert_custom_config=None, _remove_qconfig=True, qconfig_mapping=None,
               backend_config=None, keep_original_weights=False):
    """The quantized model of a calibrated (or trained) ``prepare_fx`` / ``prepare_qat_fx`` result."""
    if keep_original_weights:
        raise _unsupported("convert_fx(keep_original_weights=True)")
    return _convert(graph_module, False, _as_convert_config(convert_custom_config), qconfig_mapping,
                    backend_config, _remove_qconfig)


def convert_to_reference_fx(graph_module, convert_custom_config=None, _remove_qconfig=True, qconfig_mapping=None,
                            backend_config=None):
    """The reference quantized model: quantize -> dequantize -> float op (reference modules for
    weighted layers), for backends that lower the patterns themselves."""
    return _convert(graph_module, True, _as_convert_config(convert_custom_config), qconfig_mapping, backend_config,
                    _remove_qconfig)
