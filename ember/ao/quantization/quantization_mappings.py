"""Module mappings of eager-mode quantization, as torch's ``quantization_mappings``: float (or
fused, or QAT) module class -> the class ``convert`` / ``prepare_qat`` / ``quantize_dynamic``
swaps in, with ember's classes on both sides. Only the layers ember has a quantized version of
appear (torch's quantized MultiheadAttention is absent from ember, so is its entry: such a layer
stays float through ``convert``).

``DEFAULT_*`` are the module-level dicts (built on first access: they name classes from
``ember.ao.nn``); the ``get_*`` functions return copies, as torch's."""
from __future__ import annotations

import copy

from ... import nn

__all__ = ["DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS", "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS",
           "DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS",
           "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS", "DEFAULT_MODULE_TO_ACT_POST_PROCESS",
           "DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS",
           "no_observer_set", "get_default_static_quant_module_mappings",
           "get_default_static_quant_reference_module_mappings", "get_embedding_static_quant_module_mappings",
           "get_default_static_sparse_quant_module_mappings", "get_static_quant_module_class",
           "get_dynamic_quant_module_class", "get_default_qat_module_mappings", "get_embedding_qat_module_mappings",
           "get_default_dynamic_quant_module_mappings", "get_default_dynamic_sparse_quant_module_mappings",
           "get_default_qconfig_propagation_list", "get_default_compare_output_module_list",
           "get_default_float_to_quantized_operator_mappings", "get_quantized_operator"]

_INCLUDE_QCONFIG_PROPAGATE_LIST = {nn.Sequential}


def _static():
    from ..nn import intrinsic as nni
    from ..nn import qat as nnqat
    from ..nn.intrinsic import qat as nniqat
    from ..nn.intrinsic.quantized import fused as nniq
    from ..nn.quantized.modules import static as nnq
    from ..nn.quantized.modules import activation as nnqa
    from ..nn.quantized.modules import normalization as nnqn
    from ..nn.quantized.modules.embedding_ops import Embedding as QEmbedding, EmbeddingBag as QEmbeddingBag
    from ..nn.quantized.modules.functional_modules import FloatFunctional, QFunctional
    from .stubs import DeQuantStub, QuantStub
    return {
        nn.BatchNorm2d: nnqa.BatchNorm2d, nn.BatchNorm3d: nnqa.BatchNorm3d, nn.Dropout: nnqa.Dropout,
        nn.ELU: nnqa.ELU, nn.Hardswish: nnqa.Hardswish, nn.LeakyReLU: nnqa.LeakyReLU, nn.ReLU6: nnqa.ReLU6,
        nni.BNReLU2d: nnqa.BNReLU2d, nni.BNReLU3d: nnqa.BNReLU3d,
        nn.Embedding: QEmbedding, nn.EmbeddingBag: QEmbeddingBag,
        nn.LayerNorm: nnqn.LayerNorm, nn.GroupNorm: nnqn.GroupNorm, nn.InstanceNorm1d: nnqn.InstanceNorm1d,
        nn.InstanceNorm2d: nnqn.InstanceNorm2d, nn.InstanceNorm3d: nnqn.InstanceNorm3d,
        FloatFunctional: QFunctional,
        QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize,
        nn.Conv1d: nnq.Conv1d, nn.Conv2d: nnq.Conv2d, nn.Conv3d: nnq.Conv3d,
        nn.ConvTranspose1d: nnq.ConvTranspose1d, nn.ConvTranspose2d: nnq.ConvTranspose2d,
        nn.ConvTranspose3d: nnq.ConvTranspose3d,
        nn.Linear: nnq.Linear,
        nni.ConvReLU1d: nnq.ConvReLU1d, nni.ConvReLU2d: nnq.ConvReLU2d, nni.ConvReLU3d: nnq.ConvReLU3d,
        nni.LinearReLU: nnq.LinearReLU,
        nniqat.ConvBn2d: nnq.Conv2d, nniqat.ConvBnReLU2d: nnq.ConvReLU2d, nniqat.ConvReLU2d: nnq.ConvReLU2d,
        nniqat.ConvReLU3d: nnq.ConvReLU3d, nniqat.LinearReLU: nnq.LinearReLU,
        nnqat.Linear: nnq.Linear, nnqat.Conv2d: nnq.Conv2d, nnqat.Conv3d: nnq.Conv3d,
        nniqat.ConvBn1d: nnq.Conv1d, nniqat.ConvBn3d: nnq.Conv3d, nniqat.ConvBnReLU1d: nnq.ConvReLU1d,
        nniqat.ConvBnReLU3d: nnq.ConvReLU3d, nniqat.LinearBn1d: nnq.Linear,
        nni.LinearLeakyReLU: nniq.LinearLeakyReLU, nni.LinearTanh: nniq.LinearTanh,
        nni.ConvAdd2d: nniq.ConvAdd2d, nni.ConvAddReLU2d: nniq.ConvAddReLU2d, nn.PReLU: nnqa.PReLU,
    }


def _qat():
    from ..nn import intrinsic as nni
    from ..nn import qat as nnqat
    from ..nn.intrinsic import qat as nniqat
    return {nn.Conv2d: nnqat.Conv2d, nn.Conv3d: nnqat.Conv3d, nn.Linear: nnqat.Linear, nni.ConvBn2d: nniqat.ConvBn2d,
            nni.ConvBnReLU2d: nniqat.ConvBnReLU2d, nni.ConvReLU2d: nniqat.ConvReLU2d, nni.ConvReLU3d: nniqat.ConvReLU3d,
            nni.LinearReLU: nniqat.LinearReLU, nni.ConvBn1d: nniqat.ConvBn1d, nni.ConvBn3d: nniqat.ConvBn3d,
            nni.ConvBnReLU1d: nniqat.ConvBnReLU1d, nni.ConvBnReLU3d: nniqat.ConvBnReLU3d,
            nni.LinearBn1d: nniqat.LinearBn1d}


def _dynamic():
    from ..nn import intrinsic as nni
    from ..nn.intrinsic.quantized import dynamic as nniqd
    from ..nn.qat import dynamic as nnqatd
    from ..nn.quantized import dynamic as nnqd
    from ..nn.quantized.modules.embedding_ops import Embedding as QEmbedding, EmbeddingBag as QEmbeddingBag
    return {nn.EmbeddingBag: QEmbeddingBag, nn.GRUCell: nnqd.GRUCell, nn.Linear: nnqd.Linear, nn.LSTM: nnqd.LSTM,
            nn.GRU: nnqd.GRU,
            nn.LSTMCell: nnqd.LSTMCell, nn.RNNCell: nnqd.RNNCell, nn.Embedding: QEmbedding,
            nnqatd.Linear: nnqd.Linear, nni.LinearReLU: nniqd.LinearReLU}


def _float_to_quantized_ops():
    from ..nn.quantized import functional as qF
    F = nn.functional
    return {F.elu: qF.elu, F.hardswish: qF.hardswish, F.leaky_relu: qF.leaky_relu}


def _module_to_act_post_process():
    from .fake_quantize import (default_fixed_qparams_range_0to1_fake_quant,
                                default_fixed_qparams_range_neg1to1_fake_quant)
    return {nn.Hardsigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Sigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Softmax: default_fixed_qparams_range_0to1_fake_quant,
            nn.Tanh: default_fixed_qparams_range_neg1to1_fake_quant}


_BUILDERS = {
    "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS": _static,
    "DEFAULT_QAT_MODULE_MAPPINGS": _qat,
    "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS": _dynamic,
    "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS": _float_to_quantized_ops,
    "DEFAULT_MODULE_TO_ACT_POST_PROCESS": _module_to_act_post_process,
    # reference (float-simulated) and sparse quantized modules: ember has none
    "DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS": dict,
    "DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS": dict,
    "DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS": dict,
}


def __getattr__(name):
    builder = _BUILDERS.get(name)
    if builder is None:
        raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
    value = builder()
    globals()[name] = value           # built once: later reads (and in-place edits) see the same dict
    return value


def _mapping(name):
    return globals()[name] if name in globals() else __getattr__(name)


def no_observer_set():
    """Modules ``prepare`` must not put an observer on (they observe inside themselves)."""
    from ..nn import quantizable
    return {quantizable.LSTM, quantizable.MultiheadAttention}


def get_default_static_quant_module_mappings():
    return copy.deepcopy(_mapping("DEFAULT_STATIC_QUANT_MODULE_MAPPINGS"))


def get_default_static_quant_reference_module_mappings():
    return copy.deepcopy(_mapping("DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS"))


def get_embedding_static_quant_module_mappings():
    """The static mappings plus the QAT Embedding / EmbeddingBag -> quantized ones (for converting
    a model prepared with ``get_embedding_qat_module_mappings``)."""
    from ..nn import qat as nnqat
    from ..nn.quantized.modules.embedding_ops import Embedding as QEmbedding, EmbeddingBag as QEmbeddingBag
    mapping = copy.deepcopy(_mapping("DEFAULT_STATIC_QUANT_MODULE_MAPPINGS"))
    mapping[nnqat.EmbeddingBag] = QEmbeddingBag
    mapping[nnqat.Embedding] = QEmbedding
    return mapping


def get_default_static_sparse_quant_module_mappings():
    return copy.deepcopy(_mapping("DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS"))


def get_static_quant_module_class(float_module_class, additional_static_quant_mapping=None, is_reference=False):
    """The statically quantized class for ``float_module_class`` (AssertionError if none)."""
    base = _mapping("DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS" if is_reference
                    else "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS")
    cls = {**base, **(additional_static_quant_mapping or {})}.get(float_module_class, None)
    if cls is None:
        raise AssertionError(f"Floating point module class {str(float_module_class)} does not have a corresponding "
                             "quantized module class")
    return copy.deepcopy(cls)


def get_dynamic_quant_module_class(float_module_class, additional_dynamic_quant_mapping=None):
    """The dynamically quantized class for ``float_module_class`` (AssertionError if none)."""
    cls = {**_mapping("DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS"),
           **(additional_dynamic_quant_mapping or {})}.get(float_module_class, None)
    if cls is None:
        raise AssertionError(f"Floating point module class {str(float_module_class)} does not have a corresponding "
                             "quantized module class")
    return copy.deepcopy(cls)


def get_default_qat_module_mappings():
    return copy.deepcopy(_mapping("DEFAULT_QAT_MODULE_MAPPINGS"))


def get_embedding_qat_module_mappings():
    """The QAT mappings plus Embedding / EmbeddingBag -> their QAT (fake-quantized table) versions."""
    from ..nn import qat as nnqat
    mapping = copy.deepcopy(_mapping("DEFAULT_QAT_MODULE_MAPPINGS"))
    mapping[nn.EmbeddingBag] = nnqat.EmbeddingBag
    mapping[nn.Embedding] = nnqat.Embedding
    return mapping


def get_default_dynamic_quant_module_mappings():
    """The dynamic mapping itself (not a copy, as torch's)."""
    return _mapping("DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS")


def get_default_dynamic_sparse_quant_module_mappings():
    return _mapping("DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS")


def get_default_qconfig_propagation_list():
    """Module classes that take a qconfig in ``prepare``: every float key of the mappings, and Sequential."""
    return (set(_mapping("DEFAULT_STATIC_QUANT_MODULE_MAPPINGS")) | set(_mapping("DEFAULT_QAT_MODULE_MAPPINGS"))
            | set(_mapping("DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS")) | _INCLUDE_QCONFIG_PROPAGATE_LIST)


def get_default_compare_output_module_list():
    """Module classes whose outputs the numeric suite compares: both sides of every mapping."""
    maps = [_mapping(n) for n in ("DEFAULT_STATIC_QUANT_MODULE_MAPPINGS", "DEFAULT_QAT_MODULE_MAPPINGS",
                                  "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS")]
    out = set(_INCLUDE_QCONFIG_PROPAGATE_LIST)
    for m in maps:
        out |= set(m.keys()) | set(m.values())
    return out


def get_default_float_to_quantized_operator_mappings():
    return copy.deepcopy(_mapping("DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS"))


def get_quantized_operator(float_op):
    """The quantized function for a float one (``F.elu`` -> the quantized ``elu``)."""
    quantized_op = _mapping("DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS").get(float_op)
    if quantized_op is None:
        raise AssertionError(f"Operator {str(float_op)} does not have corresponding quantized op")
    return quantized_op


def _get_special_act_post_process(module):
    return _mapping("DEFAULT_MODULE_TO_ACT_POST_PROCESS").get(type(module))


def _has_special_act_post_process(module):
    return module.training and type(module) in _mapping("DEFAULT_MODULE_TO_ACT_POST_PROCESS")
