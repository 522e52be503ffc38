"""QConfig: which observer (or fake quantize) to make for a layer's activations and weights,
and torch's default configurations per backend (x86 / fbgemm / qnnpack / onednn)."""
from __future__ import annotations

from collections import namedtuple

import ember
from ... import nn
from .fake_quantize import (FakeQuantize, FusedMovingAvgObsFakeQuantize, default_dynamic_fake_quant,
                            default_embedding_fake_quant, default_embedding_fake_quant_4bit, default_fake_quant,
                            fused_per_channel_wt_fake_quant_range_neg_127_to_127,
                            fused_wt_fake_quant_range_neg_127_to_127, default_fused_act_fake_quant,
                            default_fused_per_channel_wt_fake_quant, default_fused_wt_fake_quant,
                            default_per_channel_weight_fake_quant, default_weight_fake_quant)
from .observer import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver, NoopObserver,
                       PlaceholderObserver, default_debug_observer, default_dynamic_quant_observer,
                       default_float_qparams_observer, default_float_qparams_observer_4bit,
                       default_reuse_input_observer,
                       default_observer, default_per_channel_weight_observer, default_placeholder_observer,
                       default_weight_observer, per_channel_weight_observer_range_neg_127_to_127,
                       weight_observer_range_neg_127_to_127)

__all__ = ["QConfig", "QConfigDynamic", "default_qconfig", "default_per_channel_qconfig", "default_dynamic_qconfig",
           "float16_dynamic_qconfig", "float16_static_qconfig", "per_channel_dynamic_qconfig",
           "float_qparams_weight_only_qconfig", "default_qat_qconfig", "default_dynamic_qat_qconfig",
           "default_weight_only_qconfig", "default_activation_only_qconfig", "default_qat_qconfig_v2",
           "default_symmetric_qnnpack_qconfig", "default_per_channel_symmetric_qnnpack_qconfig",
           "default_embedding_qat_qconfig", "default_quint8_weight_qconfig", "get_default_qconfig",
           "get_default_qat_qconfig", "qconfig_equals", "default_debug_qconfig",
           "float_qparams_weight_only_qconfig_4bit", "default_embedding_qat_qconfig_4bit",
           "default_symmetric_qnnpack_qat_qconfig", "default_per_channel_symmetric_qnnpack_qat_qconfig",
           "default_reuse_input_qconfig", "get_default_qconfig_dict", "get_default_qat_qconfig_dict",
           "QConfigAny"]

_BACKENDS = ["fbgemm", "x86", "qnnpack", "onednn"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """Observer *constructors* (classes or ``with_args`` partials) for activations and weights."""

    __slots__ = ()

    def __new__(cls, activation, weight):
        if isinstance(activation, nn.Module) or isinstance(weight, nn.Module):
            raise ValueError("QConfig received observer instance, please pass observer class instead. "
                             "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


class QConfigDynamic(namedtuple("QConfigDynamic", ["activation", "weight"])):
    """Deprecated spelling of QConfig for dynamic quantization (torch keeps it; so does ember)."""

    __slots__ = ()

    def __new__(cls, activation=nn.Identity, weight=nn.Identity):
        if isinstance(weight, nn.Module):
            raise ValueError("QConfigDynamic received observer instance, please pass observer class instead. "
                             "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer, weight=default_per_channel_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer, weight=default_weight_observer)
float16_dynamic_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.float16, is_dynamic=True),
                                  weight=PlaceholderObserver.with_args(dtype=ember.float16))
float16_static_qconfig = QConfig(activation=PlaceholderObserver.with_args(dtype=ember.float16),
                                 weight=PlaceholderObserver.with_args(dtype=ember.float16))
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
float_qparams_weight_only_qconfig = QConfig(activation=default_placeholder_observer,
                                            weight=default_float_qparams_observer)
default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
default_dynamic_qat_qconfig = QConfig(activation=default_dynamic_fake_quant, weight=default_weight_fake_quant)
default_weight_only_qconfig = QConfig(activation=nn.Identity, weight=default_weight_fake_quant)
default_activation_only_qconfig = QConfig(activation=default_fake_quant, weight=nn.Identity)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant, weight=default_fused_wt_fake_quant)
default_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=ember.qint8, reduce_range=False, eps=2 ** -12),
    weight=weight_observer_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qconfig = QConfig(
    activation=HistogramObserver.with_args(dtype=ember.qint8, reduce_range=False, eps=2 ** -12),
    weight=per_channel_weight_observer_range_neg_127_to_127)
default_embedding_qat_qconfig = QConfig(activation=NoopObserver.with_args(dtype=ember.float32),
                                        weight=default_embedding_fake_quant)
default_quint8_weight_qconfig = QConfig(activation=HistogramObserver, weight=MinMaxObserver)
default_debug_qconfig = QConfig(weight=default_weight_observer, activation=default_debug_observer)
float_qparams_weight_only_qconfig_4bit = QConfig(activation=default_placeholder_observer,
                                                 weight=default_float_qparams_observer_4bit)
default_embedding_qat_qconfig_4bit = QConfig(activation=NoopObserver.with_args(dtype=ember.float32),
                                             weight=default_embedding_fake_quant_4bit)
default_reuse_input_qconfig = QConfig(activation=default_reuse_input_observer, weight=NoopObserver)


def _symmetric_qnnpack_act_fake_quant():
    return FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128,
                                                   quant_max=127, dtype=ember.qint8, reduce_range=False,
                                                   eps=2 ** -12)


default_symmetric_qnnpack_qat_qconfig = QConfig(activation=_symmetric_qnnpack_act_fake_quant(),
                                                weight=fused_wt_fake_quant_range_neg_127_to_127)
default_per_channel_symmetric_qnnpack_qat_qconfig = QConfig(
    activation=_symmetric_qnnpack_act_fake_quant(), weight=fused_per_channel_wt_fake_quant_range_neg_127_to_127)

QConfigAny = QConfig | None       # (typing alias, as torch's)


def _check_backend(backend):
    if backend not in _BACKENDS:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of {_BACKENDS}")


def get_default_qconfig(backend="x86", version=0):
    """torch's default post-training qconfig: histogram activations (reduce_range on x86/fbgemm,
    whose int8 kernels need the headroom), per-channel symmetric weights (per-tensor on qnnpack)."""
    _check_backend(backend)
    if version != 0:
        raise AssertionError(f"Version number: {version} in get_default_qconfig is not supported. Version number "
                             "must be 0")
    if backend in ("fbgemm", "x86"):
        return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False), weight=default_weight_observer)
    return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                   weight=default_per_channel_weight_observer)


def get_default_qat_qconfig(backend="x86", version=1):
    """torch's default quantization-aware-training qconfig (version 1: the fused fake quantizers)."""
    _check_backend(backend)
    if version not in (0, 1, None):
        raise AssertionError(f"Version number: {version} in get_default_qat_qconfig is not supported. Version "
                             "number must be 0 or 1")
    reduce = backend in ("fbgemm", "x86")
    if version == 0:
        act = FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                     **({"reduce_range": reduce} if backend != "onednn" else {}))
        wt = default_weight_fake_quant if backend == "qnnpack" else default_per_channel_weight_fake_quant
        return QConfig(activation=act, weight=wt)
    act = FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                                  **({"reduce_range": reduce} if backend != "onednn" else {}))
    wt = default_fused_wt_fake_quant if backend == "qnnpack" else default_fused_per_channel_wt_fake_quant
    return QConfig(activation=act, weight=wt)


def _partial_equals(a, b):
    pa, pb = getattr(a, "p", a), getattr(b, "p", b)
    if hasattr(pa, "func") and hasattr(pb, "func"):
        return pa.func == pb.func and pa.args == pb.args and pa.keywords == pb.keywords
    return pa == pb


def qconfig_equals(q1, q2):
    """Whether two qconfigs make the same observers (partials compared by function and arguments)."""
    if q1 is None or q2 is None:
        return q1 == q2
    return _partial_equals(q1.activation, q2.activation) and _partial_equals(q1.weight, q2.weight)


def get_default_qconfig_dict(backend="x86", version=0):
    """Deprecated: ``get_default_qconfig_mapping(backend, version).to_dict()``."""
    import warnings
    warnings.warn("`torch.ao.quantization.get_default_qconfig_dict` is deprecated and will be removed in a future "
                  "version. Please use `torch.ao.quantization.get_default_qconfig_mapping` instead.",
                  FutureWarning, stacklevel=2)
    from .qconfig_mapping import get_default_qconfig_mapping
    return get_default_qconfig_mapping(backend, version).to_dict()


def get_default_qat_qconfig_dict(backend="x86", version=1):
    """Deprecated: ``get_default_qat_qconfig_mapping(backend, version).to_dict()``."""
    import warnings
    warnings.warn("`torch.ao.quantization.get_default_qat_qconfig_dict` is deprecated and will be removed in a "
                  "future version. Please use `torch.ao.quantization.get_default_qat_qconfig_mapping` instead.",
                  FutureWarning, stacklevel=2)
    from .qconfig_mapping import get_default_qat_qconfig_mapping
    return get_default_qat_qconfig_mapping(backend, version).to_dict()
