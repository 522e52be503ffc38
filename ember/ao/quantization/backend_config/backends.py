"""The ``BackendConfig`` of each backend ember names: native (= fbgemm + qnnpack), fbgemm, x86,
qnnpack (plus its symmetric qint8 variants), tensorrt and executorch (reference flows only:
``convert_to_reference_fx``)."""
from __future__ import annotations

import ember

from . import _common_patterns as P
from .backend_config import BackendConfig, DTypeConfig

__all__ = ["get_native_backend_config", "get_native_backend_config_dict", "get_fbgemm_backend_config",
           "get_qnnpack_backend_config", "get_x86_backend_config", "get_tensorrt_backend_config",
           "get_tensorrt_backend_config_dict", "get_executorch_backend_config"]


def get_native_backend_config():
    """The patterns ember's CPU quantized kernels (x86 / fbgemm / qnnpack) run."""
    return BackendConfig("native").set_backend_pattern_configs(P.standard_configs(
        [P.weighted_op_quint8_dtype_config], [P.default_op_quint8_dtype_config],
        [P.default_dynamic_int8_dtype_config, P.default_dynamic_float16_dtype_config]))


def get_native_backend_config_dict():
    return get_native_backend_config().to_dict()


def get_fbgemm_backend_config():
    return BackendConfig("fbgemm").set_backend_pattern_configs(P.standard_configs(
        [P.weighted_op_quint8_dtype_config], [P.default_op_quint8_dtype_config],
        [P.default_dynamic_int8_dtype_config, P.default_dynamic_float16_dtype_config]))


def get_x86_backend_config():
    return BackendConfig("x86").set_backend_pattern_configs(P.standard_configs(
        [P.weighted_op_quint8_dtype_config], [P.default_op_quint8_dtype_config],
        [P.default_dynamic_int8_dtype_config, P.default_dynamic_float16_dtype_config]))


def get_qnnpack_backend_config():
    """qnnpack: quint8 as native, and symmetric qint8 (activations in [-128, 127], weights in
    [-127, 127], scales >= 2 ** -12)."""
    weighted = [P.weighted_op_quint8_dtype_config, P.symmetric_int8(P.weighted_op_quint8_dtype_config)]
    default = [P.default_op_quint8_dtype_config, P.symmetric_int8(P.default_op_quint8_dtype_config)]
    return BackendConfig("qnnpack").set_backend_pattern_configs(P.standard_configs(
        weighted, default, [P.default_dynamic_int8_dtype_config, P.default_dynamic_float16_dtype_config],
        tensor_info=False))


def get_tensorrt_backend_config():
    """TensorRT: qint8 activations and weights; for ``convert_to_reference_fx`` (the graph is
    lowered by TensorRT, not by ember)."""
    weighted = DTypeConfig(input_dtype=ember.qint8, output_dtype=ember.qint8, weight_dtype=ember.qint8,
                           bias_dtype=ember.float32)
    non_weighted = DTypeConfig(input_dtype=ember.qint8, output_dtype=ember.qint8)
    configs = (P.conv_configs([weighted]) + P.linear_configs([weighted]) + P.binary_op_configs([non_weighted])
               + P.cat_configs([non_weighted]) + P.share_qparams_op_configs([non_weighted])
               + P.tensor_info_op_configs([non_weighted]))
    return BackendConfig("tensorrt").set_backend_pattern_configs(configs)


def get_tensorrt_backend_config_dict():
    return get_tensorrt_backend_config().to_dict()


def get_executorch_backend_config():
    """ExecuTorch: quint8 (and symmetric qint8) static ops, dynamic linear; for reference flows."""
    weighted = [P.weighted_op_quint8_dtype_config, P.symmetric_int8(P.weighted_op_quint8_dtype_config)]
    default = [P.default_op_quint8_dtype_config, P.symmetric_int8(P.default_op_quint8_dtype_config)]
    configs = (P.conv_configs(weighted) + P.linear_configs(weighted + [P.default_dynamic_int8_dtype_config])
               + P.binary_op_configs(default) + P.cat_configs(default)
               + P.executorch_share_qparams_op_configs(default))
    return BackendConfig("executorch").set_backend_pattern_configs(configs)
