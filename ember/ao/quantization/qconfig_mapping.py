"""``QConfigMapping``: which qconfig each part of a model gets, keyed five ways (global, by module
type / function / method name, by module-name regex, by module name, by (module name, type,
call index)), later keys winning; and torch's default mappings per backend (the default
qconfig everywhere, with the fixed output ranges of sigmoid / tanh / hardsigmoid / softmax, and
torch's special cases for transposed convolutions, layer norm and PReLU)."""
from __future__ import annotations

from collections import OrderedDict

import ember
from ... import nn
from .fake_quantize import FixedQParamsFakeQuantize, default_weight_fake_quant
from .observer import (default_fixed_qparams_range_0to1_observer, default_fixed_qparams_range_neg1to1_observer,
                       default_placeholder_observer, default_weight_observer)
from .qconfig import (QConfig, default_quint8_weight_qconfig, default_reuse_input_qconfig,
                      default_symmetric_qnnpack_qat_qconfig, default_symmetric_qnnpack_qconfig,
                      get_default_qat_qconfig, get_default_qconfig)

__all__ = ["get_default_qconfig_mapping", "get_default_qat_qconfig_mapping", "QConfigMapping"]

_GLOBAL_DICT_KEY = ""
_OBJECT_TYPE_DICT_KEY = "object_type"
_MODULE_NAME_REGEX_DICT_KEY = "module_name_regex"
_MODULE_NAME_DICT_KEY = "module_name"
_MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY = "module_name_object_type_order"

_QCONFIG_STYLE_ORDER = ["global_qconfig", "object_type_qconfigs", "module_name_regex_qconfigs",
                        "module_name_qconfigs", "module_name_object_type_order_qconfigs"]


def _fixed_qparams_ops():
    """Ops whose output range is known in advance -> the observer reporting it ([0, 1]: the
    sigmoids and softmax; [-1, 1]: tanh). Built on call: ember's functional namespace loads lazily."""
    F = nn.functional
    zero_one, neg_one_one = default_fixed_qparams_range_0to1_observer, default_fixed_qparams_range_neg1to1_observer
    return {nn.Hardsigmoid: zero_one, F.hardsigmoid: zero_one, "hardsigmoid": zero_one, "hardsigmoid_": zero_one,
            nn.Sigmoid: zero_one, ember.sigmoid: zero_one, "sigmoid": zero_one, "sigmoid_": zero_one,
            nn.Softmax: zero_one, nn.Tanh: neg_one_one, ember.tanh: neg_one_one, "tanh": neg_one_one,
            "tanh_": neg_one_one}


class QConfigMapping:
    """Model part -> qconfig. ``set_global`` < ``set_object_type`` < ``set_module_name_regex`` <
    ``set_module_name`` < ``set_module_name_object_type_order`` in match priority; every setter
    returns the mapping so calls chain."""

    def __init__(self):
        self.global_qconfig = None
        self.object_type_qconfigs = OrderedDict()
        self.module_name_regex_qconfigs = OrderedDict()
        self.module_name_qconfigs = OrderedDict()
        self.module_name_object_type_order_qconfigs = OrderedDict()

    def set_global(self, global_qconfig):
        self.global_qconfig = global_qconfig
        return self

    def set_object_type(self, object_type, qconfig):
        """For a module class, a function, or a method name (a str); a later call overrides."""
        self.object_type_qconfigs[object_type] = qconfig
        return self

    def set_module_name_regex(self, module_name_regex, qconfig):
        """Regexes match in registration order (register the more specific first); re-setting
        one keeps its original place."""
        self.module_name_regex_qconfigs[module_name_regex] = qconfig
        return self

    def set_module_name(self, module_name, qconfig):
        self.module_name_qconfigs[module_name] = qconfig
        return self

    def set_module_name_object_type_order(self, module_name, object_type, index, qconfig):
        self.module_name_object_type_order_qconfigs[(module_name, object_type, index)] = qconfig
        return self

    def __repr__(self):
        out = type(self).__name__ + " ("
        for style in _QCONFIG_STYLE_ORDER:
            out += f"\n {style}"
            qconfigs = getattr(self, style)
            if isinstance(qconfigs, OrderedDict) and len(qconfigs) > 0:
                for key, qconfig in qconfigs.items():
                    out += f"\n  {key}: {qconfig}"
            else:
                out += f"\n  {qconfigs}"
        return out + "\n)"

    def to_dict(self):
        """The legacy ``qconfig_dict`` form: lists of tuples under "", "object_type", ..."""
        return {
            _GLOBAL_DICT_KEY: self.global_qconfig,
            _OBJECT_TYPE_DICT_KEY: list(self.object_type_qconfigs.items()),
            _MODULE_NAME_REGEX_DICT_KEY: list(self.module_name_regex_qconfigs.items()),
            _MODULE_NAME_DICT_KEY: list(self.module_name_qconfigs.items()),
            _MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY: [(*k, v) for k, v in
                                                      self.module_name_object_type_order_qconfigs.items()],
        }

    @classmethod
    def from_dict(cls, qconfig_dict):
        """The inverse of ``to_dict`` (every key optional)."""
        conf = cls()
        if _GLOBAL_DICT_KEY in qconfig_dict:
            conf.set_global(qconfig_dict[_GLOBAL_DICT_KEY])
        for object_type, qconfig in qconfig_dict.get(_OBJECT_TYPE_DICT_KEY, []):
            conf.set_object_type(object_type, qconfig)
        for regex, qconfig in qconfig_dict.get(_MODULE_NAME_REGEX_DICT_KEY, []):
            conf.set_module_name_regex(regex, qconfig)
        for name, qconfig in qconfig_dict.get(_MODULE_NAME_DICT_KEY, []):
            conf.set_module_name(name, qconfig)
        for name, object_type, index, qconfig in qconfig_dict.get(_MODULE_NAME_OBJECT_TYPE_ORDER_DICT_KEY, []):
            conf.set_module_name_object_type_order(name, object_type, index, qconfig)
        return conf


def _get_default_qconfig_mapping(is_qat, backend, version):
    qconfig = get_default_qat_qconfig(backend, version) if is_qat else get_default_qconfig(backend, version)
    default_weight = default_weight_fake_quant if is_qat else default_weight_observer
    # x86 / fbgemm have no per-channel transposed-convolution kernels: per-tensor weights there
    qconfig_transpose = (QConfig(activation=qconfig.activation, weight=default_weight)
                         if backend in ("fbgemm", "x86") else qconfig)
    qconfig_layernorm = QConfig(activation=qconfig.activation, weight=default_placeholder_observer)
    F = nn.functional
    mapping = (QConfigMapping().set_global(qconfig)
               .set_object_type("reshape", default_reuse_input_qconfig)
               .set_object_type(nn.ConvTranspose1d, qconfig_transpose)
               .set_object_type(nn.ConvTranspose2d, qconfig_transpose)
               .set_object_type(nn.ConvTranspose3d, qconfig_transpose)
               .set_object_type(F.conv_transpose1d, qconfig_transpose)
               .set_object_type(F.conv_transpose2d, qconfig_transpose)
               .set_object_type(F.conv_transpose3d, qconfig_transpose)
               .set_object_type(F.layer_norm, qconfig_layernorm)
               .set_object_type(nn.LayerNorm, qconfig_layernorm)
               .set_object_type(nn.PReLU, default_quint8_weight_qconfig))
    by_observer = {}          # one qconfig object per fixed-qparams observer, shared by its ops
    for op, observer in _fixed_qparams_ops().items():
        if observer not in by_observer:
            activation = FixedQParamsFakeQuantize.with_args(observer=observer) if is_qat else observer
            by_observer[observer] = QConfig(activation=activation, weight=default_weight)
        mapping.set_object_type(op, by_observer[observer])
    return mapping


def get_default_qconfig_mapping(backend="x86", version=0):
    """The default ``QConfigMapping`` for post-training quantization on ``backend``
    ("x86", "fbgemm", "qnnpack" or "onednn")."""
    return _get_default_qconfig_mapping(False, backend, version)


def get_default_qat_qconfig_mapping(backend="x86", version=1):
    """The default ``QConfigMapping`` for quantization-aware training on ``backend``."""
    return _get_default_qconfig_mapping(True, backend, version)


def _get_default_qconfig_mapping_with_default_qconfig(is_qat, backend, default_qconfig):
    mapping = get_default_qat_qconfig_mapping(backend) if is_qat else get_default_qconfig_mapping(backend)
    mapping.set_global(default_qconfig)
    fixed = _fixed_qparams_ops()
    for pattern in mapping.object_type_qconfigs:
        if pattern not in fixed:
            mapping.set_object_type(pattern, default_qconfig)
    return mapping


def _get_symmetric_qnnpack_qconfig_mapping():
    return _get_default_qconfig_mapping_with_default_qconfig(False, "qnnpack", default_symmetric_qnnpack_qconfig)


def _get_symmetric_qnnpack_qat_qconfig_mapping():
    return _get_default_qconfig_mapping_with_default_qconfig(True, "qnnpack", default_symmetric_qnnpack_qat_qconfig)
