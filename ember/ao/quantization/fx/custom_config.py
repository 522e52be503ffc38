"""Custom configs of the FX graph mode flow, with torch's builder methods and dict forms:
``PrepareCustomConfig`` (modules the tracer must not enter, attributes to keep, and the
standalone / custom-module and quantized-input/output options), ``ConvertCustomConfig`` and
``FuseCustomConfig``. The options ember's flow cannot honour are accepted here and refused
by ``prepare_fx`` / ``convert_fx`` with a NotImplementedError naming them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..quant_type import QuantType

__all__ = ["ConvertCustomConfig", "FuseCustomConfig", "PrepareCustomConfig", "StandaloneModuleConfigEntry"]

_STANDALONE_NAME = "standalone_module_name"
_STANDALONE_CLASS = "standalone_module_class"
_FLOAT_TO_OBSERVED = "float_to_observed_custom_module_class"
_OBSERVED_TO_QUANTIZED = "observed_to_quantized_custom_module_class"
_NON_TRACEABLE_NAME = "non_traceable_module_name"
_NON_TRACEABLE_CLASS = "non_traceable_module_class"
_INPUT_QUANTIZED = "input_quantized_idxs"
_OUTPUT_QUANTIZED = "output_quantized_idxs"
_PRESERVED = "preserved_attributes"

_QUANT_TYPE_NAMES = {QuantType.STATIC: "static", QuantType.DYNAMIC: "dynamic", QuantType.WEIGHT_ONLY: "weight_only"}


def _quant_type_from_str(name):
    for qt, s in _QUANT_TYPE_NAMES.items():
        if s == name:
            return qt
    raise ValueError(f"Unknown QuantType string '{name}'")


@dataclass
class StandaloneModuleConfigEntry:
    qconfig_mapping: Any
    example_inputs: tuple
    prepare_custom_config: Any
    backend_config: Any


class PrepareCustomConfig:
    """Options for ``prepare_fx`` / ``prepare_qat_fx``; every setter returns the config."""

    def __init__(self):
        self.standalone_module_names = {}
        self.standalone_module_classes = {}
        self.float_to_observed_mapping = {}
        self.non_traceable_module_names = []
        self.non_traceable_module_classes = []
        self.input_quantized_indexes = []
        self.output_quantized_indexes = []
        self.preserved_attributes = []

    def __repr__(self):
        shown = {k: v for k, v in self.__dict__.items() if len(v) > 0}
        return f"PrepareCustomConfig({shown})"

    def set_standalone_module_name(self, module_name, qconfig_mapping, example_inputs, prepare_custom_config,
                                   backend_config):
        self.standalone_module_names[module_name] = StandaloneModuleConfigEntry(
            qconfig_mapping, example_inputs, prepare_custom_config, backend_config)
        return self

    def set_standalone_module_class(self, module_class, qconfig_mapping, example_inputs, prepare_custom_config,
                                    backend_config):
        self.standalone_module_classes[module_class] = StandaloneModuleConfigEntry(
            qconfig_mapping, example_inputs, prepare_custom_config, backend_config)
        return self

    def set_float_to_observed_mapping(self, float_class, observed_class, quant_type=QuantType.STATIC):
        if quant_type != QuantType.STATIC:
            raise ValueError("set_float_to_observed_mapping is currently only supported for static quantization")
        self.float_to_observed_mapping.setdefault(quant_type, {})[float_class] = observed_class
        return self

    def set_non_traceable_module_names(self, module_names):
        """Submodules (by qualified name) the tracer calls instead of tracing into."""
        self.non_traceable_module_names = list(module_names)
        return self

    def set_non_traceable_module_classes(self, module_classes):
        self.non_traceable_module_classes = list(module_classes)
        return self

    def set_input_quantized_indexes(self, indexes):
        self.input_quantized_indexes = list(indexes)
        return self

    def set_output_quantized_indexes(self, indexes):
        self.output_quantized_indexes = list(indexes)
        return self

    def set_preserved_attributes(self, attributes):
        """Attributes of the float model the prepared (and converted) model keeps."""
        self.preserved_attributes = list(attributes)
        return self

    @classmethod
    def from_dict(cls, prepare_custom_config_dict):
        """From the legacy ``prepare_custom_config_dict`` (every key optional)."""
        conf = cls()
        for name, qconfig_dict, example_inputs, child, backend in prepare_custom_config_dict.get(_STANDALONE_NAME, []):
            conf.set_standalone_module_name(name, _qconfig_mapping(qconfig_dict), example_inputs,
                                            _child(child), _backend(backend))
        for klass, qconfig_dict, example_inputs, child, backend in prepare_custom_config_dict.get(_STANDALONE_CLASS,
                                                                                                  []):
            conf.set_standalone_module_class(klass, _qconfig_mapping(qconfig_dict), example_inputs,
                                             _child(child), _backend(backend))
        for qt_name, mapping in prepare_custom_config_dict.get(_FLOAT_TO_OBSERVED, {}).items():
            qt = _quant_type_from_str(qt_name)
            for float_class, observed_class in mapping.items():
                conf.set_float_to_observed_mapping(float_class, observed_class, qt)
        conf.set_non_traceable_module_names(prepare_custom_config_dict.get(_NON_TRACEABLE_NAME, []))
        conf.set_non_traceable_module_classes(prepare_custom_config_dict.get(_NON_TRACEABLE_CLASS, []))
        conf.set_input_quantized_indexes(prepare_custom_config_dict.get(_INPUT_QUANTIZED, []))
        conf.set_output_quantized_indexes(prepare_custom_config_dict.get(_OUTPUT_QUANTIZED, []))
        conf.set_preserved_attributes(prepare_custom_config_dict.get(_PRESERVED, []))
        return conf

    def to_dict(self):
        def entry(key, e):
            return (key, e.qconfig_mapping, e.example_inputs,
                    e.prepare_custom_config.to_dict() if e.prepare_custom_config is not None else None,
                    e.backend_config)
        out = {}
        if self.standalone_module_names:
            out[_STANDALONE_NAME] = [entry(k, e) for k, e in self.standalone_module_names.items()]
        if self.standalone_module_classes:
            out[_STANDALONE_CLASS] = [entry(k, e) for k, e in self.standalone_module_classes.items()]
        if self.float_to_observed_mapping:
            out[_FLOAT_TO_OBSERVED] = {_QUANT_TYPE_NAMES[qt]: m for qt, m in self.float_to_observed_mapping.items()}
        for key, value in ((_NON_TRACEABLE_NAME, self.non_traceable_module_names),
                           (_NON_TRACEABLE_CLASS, self.non_traceable_module_classes),
                           (_INPUT_QUANTIZED, self.input_quantized_indexes),
                           (_OUTPUT_QUANTIZED, self.output_quantized_indexes), (_PRESERVED, self.preserved_attributes)):
            if value:
                out[key] = value
        return out


def _qconfig_mapping(qconfig_dict):
    from ..qconfig_mapping import QConfigMapping
    if qconfig_dict is None or isinstance(qconfig_dict, QConfigMapping):
        return qconfig_dict
    return QConfigMapping.from_dict(qconfig_dict)


def _child(d):
    return PrepareCustomConfig.from_dict(d) if isinstance(d, dict) else d


def _backend(d):
    from ..backend_config import BackendConfig
    return BackendConfig.from_dict(d) if isinstance(d, dict) else d


class ConvertCustomConfig:
    """Options for ``convert_fx``: observed custom module -> quantized class, attributes to keep."""

    def __init__(self):
        self.observed_to_quantized_mapping = {}
        self.preserved_attributes = []

    def __repr__(self):
        shown = {k: v for k, v in self.__dict__.items() if len(v) > 0}
        return f"ConvertCustomConfig({shown})"

    def set_observed_to_quantized_mapping(self, observed_class, quantized_class, quant_type=QuantType.STATIC):
        self.observed_to_quantized_mapping.setdefault(quant_type, {})[observed_class] = quantized_class
        return self

    def set_preserved_attributes(self, attributes):
        self.preserved_attributes = list(attributes)
        return self

    @classmethod
    def from_dict(cls, convert_custom_config_dict):
        conf = cls()
        for qt_name, mapping in convert_custom_config_dict.get(_OBSERVED_TO_QUANTIZED, {}).items():
            qt = _quant_type_from_str(qt_name)
            for observed_class, quantized_class in mapping.items():
                conf.set_observed_to_quantized_mapping(observed_class, quantized_class, qt)
        conf.set_preserved_attributes(convert_custom_config_dict.get(_PRESERVED, []))
        return conf

    def to_dict(self):
        out = {}
        if self.observed_to_quantized_mapping:
            out[_OBSERVED_TO_QUANTIZED] = {_QUANT_TYPE_NAMES[qt]: m
                                           for qt, m in self.observed_to_quantized_mapping.items()}
        if self.preserved_attributes:
            out[_PRESERVED] = self.preserved_attributes
        return out


class FuseCustomConfig:
    """Options for ``fuse_fx``: attributes to keep."""

    def __init__(self):
        self.preserved_attributes = []

    def __repr__(self):
        shown = {k: v for k, v in self.__dict__.items() if len(v) > 0}
        return f"FuseCustomConfig({shown})"

    def set_preserved_attributes(self, attributes):
        self.preserved_attributes = list(attributes)
        return self

    @classmethod
    def from_dict(cls, fuse_custom_config_dict):
        return cls().set_preserved_attributes(fuse_custom_config_dict.get(_PRESERVED, []))

    def to_dict(self):
        return {_PRESERVED: self.preserved_attributes} if self.preserved_attributes else {}
