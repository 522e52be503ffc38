"""The pattern configs every ember backend shares, built per backend from that backend's
dtype configs: weighted ops (linear / conv, with their ReLU and batch-norm fusions), binary
ops, cat, the ops with their own output qparams, the fixed-range ops (sigmoid, tanh ...),
the ops whose output keeps their input's qparams (relu, view, max_pool ...), and shape
queries. Each op is listed under every spelling ember's tracer can record for it (the
``ember.nn.functional`` function and the ``ember`` one it forwards to)."""
from __future__ import annotations

import operator

import ember
from ember import nn
from ember.nn import functional as F

from .backend_config import BackendPatternConfig, DTypeConfig, DTypeWithConstraints, ObservationType

_SHARE = ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
_OWN = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
_NONE = ObservationType.INPUT_OUTPUT_NOT_OBSERVED


def _spellings(*fns):
    """The distinct function objects among ``fns`` (None and repeats dropped)."""
    out = []
    for f in fns:
        if f is not None and all(f is not g for g in out):
            out.append(f)
    return out


def _attr(owner, name):
    return getattr(owner, name, None)


def _op_binding(name):
    """The function ember's tracer records for an ``ember.ops`` op called through an entry
    wrapper (``ember.cat`` -> the ``cat`` op's binding)."""
    from ember.ops import shape as S
    return getattr(getattr(S, name, None), "binding", None)


def cat_functions():
    return _spellings(ember.cat, _attr(ember, "concat"), _attr(ember, "concatenate"), _op_binding("cat"))


def relu_functions():
    return _spellings(F.relu, ember.relu)


def linear_functions():
    return _spellings(F.linear, _attr(ember, "linear"))


def conv_functions(nd):
    return _spellings(_attr(F, f"conv{nd}d"), _attr(ember, f"conv{nd}d"))


def _nni():
    from ...nn import intrinsic as nni
    return nni


def _qat():
    from ...nn import qat as nnqat
    from ...nn.intrinsic import qat as nniqat
    return nnqat, nniqat


def _ref():
    from ...nn.quantized import reference as ref
    return ref


def _fusers():
    from .. import fuser_method_mappings as fm
    return fm


def _sequential(fused_cls):
    """A fuser method that puts the modules, as given, in ``fused_cls`` (ConvReLU2d, LinearReLU ...);
    a functional relu in the pattern arrives as an ``nn.ReLU`` module."""
    def fuser_method(is_qat, *mods):
        return fused_cls(*mods)
    fuser_method.__name__ = fuser_method.__qualname__ = f"fuse_to_{fused_cls.__name__}"
    return fuser_method


def linear_configs(dtype_configs):
    nni = _nni()
    nnqat, nniqat = _qat()
    ref, fm = _ref(), _fusers()
    configs = [
        BackendPatternConfig(nn.Linear).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear).set_qat_module(nnqat.Linear),
        BackendPatternConfig(nnqat.Linear).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear),
        BackendPatternConfig(nni.LinearReLU).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear).set_qat_module(nniqat.LinearReLU),
        BackendPatternConfig(nniqat.LinearReLU).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear),
        BackendPatternConfig((nn.Linear, nn.BatchNorm1d)).set_dtype_configs(dtype_configs)
        .set_fuser_method(fm.fuse_linear_bn).set_fused_module(nni.LinearBn1d),
        BackendPatternConfig(nni.LinearBn1d).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear).set_qat_module(nniqat.LinearBn1d),
        BackendPatternConfig(nniqat.LinearBn1d).set_dtype_configs(dtype_configs).set_root_module(nn.Linear)
        .set_reference_quantized_module(ref.Linear),
    ]
    for relu in [nn.ReLU] + relu_functions():
        configs.append(BackendPatternConfig((nn.Linear, relu)).set_dtype_configs(dtype_configs)
                       .set_fuser_method(_sequential(nni.LinearReLU)).set_fused_module(nni.LinearReLU))
    for linear in linear_functions():
        configs.append(BackendPatternConfig(linear).set_dtype_configs(dtype_configs)
                       ._set_input_type_to_index({"weight": 1, "bias": 2}))
        for relu in [nn.ReLU] + relu_functions():
            configs.append(BackendPatternConfig((linear, relu)).set_dtype_configs(dtype_configs)
                           ._set_input_type_to_index({"weight": 1, "bias": 2}))
    return configs


def conv_configs(dtype_configs):
    nni = _nni()
    nnqat, nniqat = _qat()
    ref, fm = _ref(), _fusers()
    configs = []
    for nd in (1, 2, 3):
        conv, bn = getattr(nn, f"Conv{nd}d"), getattr(nn, f"BatchNorm{nd}d")
        conv_relu, conv_bn, conv_bn_relu = (getattr(nni, f"ConvReLU{nd}d"), getattr(nni, f"ConvBn{nd}d"),
                                            getattr(nni, f"ConvBnReLU{nd}d"))
        qat_conv = getattr(nnqat, f"Conv{nd}d", None)
        qat_conv_relu, qat_conv_bn, qat_conv_bn_relu = (getattr(nniqat, f"ConvReLU{nd}d", None),
                                                        getattr(nniqat, f"ConvBn{nd}d", None),
                                                        getattr(nniqat, f"ConvBnReLU{nd}d", None))
        ref_conv = getattr(ref, f"Conv{nd}d")

        def weighted(pattern, qat=None):
            c = (BackendPatternConfig(pattern).set_dtype_configs(dtype_configs).set_root_module(conv)
                 .set_reference_quantized_module(ref_conv))
            return c.set_qat_module(qat) if qat is not None else c

        configs += [weighted(conv, qat_conv), weighted(conv_relu, qat_conv_relu),
                    weighted(conv_bn, qat_conv_bn), weighted(conv_bn_relu, qat_conv_bn_relu)]
        configs += [weighted(q) for q in (qat_conv, qat_conv_relu, qat_conv_bn, qat_conv_bn_relu) if q is not None]
        for relu in [nn.ReLU] + relu_functions():
            configs.append(BackendPatternConfig((conv, relu)).set_dtype_configs(dtype_configs)
                           .set_fuser_method(_sequential(conv_relu)).set_fused_module(conv_relu))
            configs.append(BackendPatternConfig((conv, bn, relu)).set_dtype_configs(dtype_configs)
                           .set_fuser_method(fm.fuse_conv_bn_relu).set_fused_module(conv_bn_relu))
        configs.append(BackendPatternConfig((conv, bn)).set_dtype_configs(dtype_configs)
                       .set_fuser_method(fm.fuse_conv_bn).set_fused_module(conv_bn))
        for fn in conv_functions(nd):
            configs.append(BackendPatternConfig(fn).set_dtype_configs(dtype_configs)
                           ._set_input_type_to_index({"weight": 1, "bias": 2}))
            for relu in [nn.ReLU] + relu_functions():
                configs.append(BackendPatternConfig((fn, relu)).set_dtype_configs(dtype_configs)
                               ._set_input_type_to_index({"weight": 1, "bias": 2}))
    return configs


def binary_op_configs(dtype_configs):
    """add / mul of two tensors (and with a following relu): own output qparams."""
    by_count = {0: _OWN, 1: _SHARE, 2: _OWN}
    configs = []
    for op in _spellings(operator.add, ember.add, operator.mul, ember.mul):
        for pattern in [op] + [(op, relu) for relu in [nn.ReLU] + relu_functions()]:
            configs.append(BackendPatternConfig(pattern).set_dtype_configs(dtype_configs)
                           ._set_num_tensor_args_to_observation_type(by_count))
    return configs


def cat_configs(dtype_configs):
    return [BackendPatternConfig(fn).set_observation_type(_SHARE).set_dtype_configs(dtype_configs)
            for fn in cat_functions()]


def default_op_configs(dtype_configs):
    """Ops ember has a quantized module for whose output needs its own qparams."""
    mods = [nn.ELU, nn.Hardswish, nn.LeakyReLU, nn.Dropout, nn.InstanceNorm1d, nn.InstanceNorm2d,
            nn.InstanceNorm3d]
    return [BackendPatternConfig(m).set_observation_type(_OWN).set_dtype_configs(dtype_configs) for m in mods]


def layer_norm_configs(dtype_configs):
    return [BackendPatternConfig(m).set_observation_type(_OWN).set_dtype_configs(dtype_configs)
            ._set_input_type_to_index({"weight": 2, "bias": 3}) for m in (nn.LayerNorm,)]


def fixed_qparams_op_configs(dtype_configs):
    """Ops whose output range is fixed ([0, 1] or [-1, 1]): the qconfig's fixed-qparams observer
    observes the output. (nn.Softmax is not here: ember has no quantized softmax.)"""
    ops = [nn.Hardsigmoid, F.hardsigmoid, "hardsigmoid", "hardsigmoid_", nn.Sigmoid, ember.sigmoid, "sigmoid",
           "sigmoid_", nn.Tanh, ember.tanh, "tanh", "tanh_"]
    ops += _spellings(_attr(F, "sigmoid"), _attr(F, "tanh"))
    return [BackendPatternConfig(op).set_observation_type(_OWN).set_dtype_configs(dtype_configs) for op in ops]


def share_qparams_op_configs(dtype_configs):
    """Ops that work on quantized tensors directly and keep their input's qparams."""
    mods = [nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.AvgPool1d, nn.AvgPool2d,
            nn.AvgPool3d, nn.Hardtanh, nn.Identity, nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.ReLU, nn.ReLU6]
    mods += [m for m in (getattr(nn, "PixelShuffle", None), getattr(nn, "PixelUnshuffle", None)) if m is not None]
    fns = _spellings(_attr(ember, "adaptive_avg_pool1d"), F.adaptive_avg_pool2d, F.adaptive_avg_pool3d, F.hardtanh,
                     _attr(F, "hardtanh_"), F.interpolate, F.max_pool1d, F.max_pool2d, F.max_pool3d,
                     _attr(F, "pixel_shuffle"), _attr(F, "pixel_unshuffle"), F.relu, ember.relu, F.relu6,
                     _attr(ember, "avg_pool1d"), F.avg_pool2d, F.avg_pool3d, ember.clamp, ember.flatten, ember.mean,
                     _attr(ember, "narrow"), _attr(ember, "repeat_interleave"), ember.transpose, ember.squeeze,
                     _attr(ember, "stack"), _op_binding("stack"), ember.unsqueeze, operator.floordiv)
    methods = ["contiguous", "clamp", "detach", "detach_", "mean", "permute", "repeat", "repeat_interleave",
               "reshape", "resize_", "relu", "relu_", "squeeze", "squeeze_", "transpose", "unsqueeze", "unsqueeze_",
               "view"]
    return [BackendPatternConfig(op).set_observation_type(_SHARE).set_dtype_configs(dtype_configs)
            for op in mods + fns + methods]


def bn_configs(dtype_configs):
    nni = _nni()
    configs = []
    for bn, fused in ((nn.BatchNorm2d, nni.BNReLU2d), (nn.BatchNorm3d, nni.BNReLU3d)):
        for relu in [nn.ReLU] + relu_functions():
            configs.append(BackendPatternConfig((bn, relu)).set_dtype_configs(dtype_configs)
                           .set_fuser_method(_sequential(fused)).set_fused_module(fused))
        configs.append(BackendPatternConfig(bn).set_observation_type(_OWN).set_dtype_configs(dtype_configs))
        configs.append(BackendPatternConfig(fused).set_observation_type(_OWN).set_dtype_configs(dtype_configs))
    return configs


def tensor_info_op_configs(dtype_configs):
    """``x.shape`` / ``x.size()``: no tensor comes out, nothing is observed."""
    return [BackendPatternConfig(op).set_observation_type(_NONE).set_dtype_configs(dtype_configs)
            for op in ("shape", "size")]


# the dtype configs torch's native / fbgemm / x86 backends use
weighted_op_quint8_dtype_config = DTypeConfig(input_dtype=ember.quint8, output_dtype=ember.quint8,
                                              weight_dtype=ember.qint8, bias_dtype=ember.float32)
default_op_quint8_dtype_config = DTypeConfig(input_dtype=ember.quint8, output_dtype=ember.quint8)
default_dynamic_int8_dtype_config = DTypeConfig(input_dtype=ember.quint8, output_dtype=ember.float32,
                                                weight_dtype=ember.qint8, bias_dtype=ember.float32, is_dynamic=True)
default_dynamic_float16_dtype_config = DTypeConfig(input_dtype=ember.float16, output_dtype=ember.float32,
                                                   weight_dtype=ember.float16, bias_dtype=ember.float32,
                                                   is_dynamic=True)
input_output_only_quint8_dtype_config = DTypeConfig(input_dtype=ember.quint8, output_dtype=ember.quint8,
                                                    weight_dtype=ember.float32, bias_dtype=ember.float32)


def executorch_share_qparams_op_configs(dtype_configs):
    """ExecuTorch's narrower list of ops that keep their input's qparams."""
    mods = [nn.AdaptiveAvgPool2d, nn.Hardtanh, nn.MaxPool2d, nn.ReLU6]
    fns = _spellings(F.adaptive_avg_pool2d, F.hardtanh, _attr(F, "hardtanh_"), F.max_pool2d, F.relu, ember.relu,
                     F.relu6, ember.clamp, ember.flatten, ember.mean, ember.permute, ember.squeeze)
    methods = ["clamp", "leaky_relu", "mean", "permute", "relu", "relu_", "reshape", "squeeze", "squeeze_"]
    return [BackendPatternConfig(op).set_observation_type(_SHARE).set_dtype_configs(dtype_configs)
            for op in mods + fns + methods]


def standard_configs(weighted, default, dynamic=(), layer_norm=None, tensor_info=True):
    """All the shared patterns for a backend whose weighted ops take ``weighted`` (+ ``dynamic``
    for linear) and whose other ops take ``default``."""
    out = []
    out += conv_configs(list(weighted))
    out += linear_configs(list(weighted) + list(dynamic))
    out += binary_op_configs(list(default))
    out += cat_configs(list(default))
    out += default_op_configs(list(default))
    out += fixed_qparams_op_configs(list(default))
    out += share_qparams_op_configs(list(default))
    if tensor_info:
        out += tensor_info_op_configs(list(default))
    out += bn_configs(list(default))
    out += layer_norm_configs([layer_norm or input_output_only_quint8_dtype_config])
    return out


def symmetric_int8(dtype_config, act_min=-128, act_max=127):
    """``dtype_config`` with qnnpack's symmetric qint8 constraints (weights in [-127, 127],
    scales at least 2 ** -12)."""
    act = DTypeWithConstraints(dtype=ember.qint8, quant_min_lower_bound=act_min, quant_max_upper_bound=act_max,
                               scale_min_lower_bound=2 ** -12)
    wt = DTypeWithConstraints(dtype=ember.qint8, quant_min_lower_bound=-127, quant_max_upper_bound=127,
                              scale_min_lower_bound=2 ** -12)
    return DTypeConfig(input_dtype=act, output_dtype=act,
                       weight_dtype=wt if dtype_config.weight_dtype is not None else None,
                       bias_dtype=dtype_config.bias_dtype, is_dynamic=dtype_config.is_dynamic)
