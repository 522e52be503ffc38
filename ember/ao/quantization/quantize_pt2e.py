"""The export-based ("PT2E") quantization flow (``torch.ao.quantization.quantize_pt2e``)::

    m = ember.export.export(model, example_inputs).module()
    m = prepare_pt2e(m, X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
    m(*calibration_inputs)
    m = convert_pt2e(m)            # quantize/dequantize ops around the quantized operators
    ember.compile(m)

``prepare_pt2e`` unlifts the exported program into an ``ember.fx.GraphModule``, raises its
lowered patterns back to the functional ops quantizers match (``F.conv2d``, ``F.linear``, ...),
folds eval-mode batch norms into convolutions, lets the quantizer annotate the graph and
inserts observers (``prepare_qat_pt2e``: fake quantizers). ``convert_pt2e`` replaces them with
``ember.ops.quantized_decomposed`` quantize / dequantize operators and folds the quantized
weights into integer constants.
"""
from __future__ import annotations

from .pt2e import _graph
from .pt2e.convert import convert as _convert
from .pt2e.prepare import prepare as _prepare
from .quantizer.quantizer import Quantizer

__all__ = ["prepare_pt2e", "prepare_qat_pt2e", "convert_pt2e"]


def _disallow_eval_train(model):
    def _train(self, mode=True):
        raise NotImplementedError("Calling train() is not supported yet.")

    def _eval(self, mode=True):
        raise NotImplementedError("Calling eval() is not supported yet.")

    import types
    model.train = types.MethodType(_train, model)
    model.eval = types.MethodType(_eval, model)
    return model


def _check_quantizer(quantizer, what):
    if not isinstance(quantizer, Quantizer):
        raise TypeError(f"{what}: quantizer must be an ember.ao.quantization.quantizer.Quantizer, "
                        f"got {type(quantizer).__name__}")


def _prepare_common(model, quantizer, is_qat, what):
    _check_quantizer(quantizer, what)
    meta = dict(getattr(model, "meta", {}) or {})
    gm = _graph.to_graph_module(model, what)
    gm = _graph.raise_patterns(gm)
    if is_qat:
        import ember
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is ember.native_batch_norm and n.args[5] is True:
                raise NotImplementedError(f"{what}: conv-bn QAT fusion (a BatchNorm in training mode) is not "
                                          f"supported")
    else:
        gm = _graph.fold_conv_bn(gm)
    gm = quantizer.transform_for_annotation(gm)
    quantizer.annotate(gm)
    quantizer.validate(gm)
    gm = _prepare(gm, is_qat=is_qat, obs_or_fq_callback=quantizer.prepare_obs_or_fq_callback)
    gm.meta.update(meta)
    return _disallow_eval_train(gm)


def prepare_pt2e(model, quantizer: Quantizer):
    """Annotate ``model`` (``ember.export.export(...).module()``) with ``quantizer`` and insert
    observers where it asked; run calibration data through the result, then ``convert_pt2e``."""
    return _prepare_common(model, quantizer, False, "prepare_pt2e")


def prepare_qat_pt2e(model, quantizer: Quantizer):
    """``prepare_pt2e`` for quantization-aware training: fake quantizers instead of observers
    (the quantizer's QAT config chooses them), batch norms are not folded."""
    return _prepare_common(model, quantizer, True, "prepare_qat_pt2e")


def convert_pt2e(model, use_reference_representation: bool = False, fold_quantize: bool = True):
    """Replace the observers of a prepared (and calibrated) model by quantize / dequantize
    operators; with ``fold_quantize`` the quantized weights become integer constants."""
    if not isinstance(use_reference_representation, bool):
        raise ValueError("Unexpected argument type for `use_reference_representation`, please make sure you intend "
                         f"to pass argument {use_reference_representation} to convert_pt2e")
    if use_reference_representation:
        raise NotImplementedError("convert_pt2e: use_reference_representation=True (the integer reference "
                                  "representation rewrite) is not supported")
    from ember.fx import GraphModule
    if not isinstance(model, GraphModule):
        raise TypeError(f"convert_pt2e: expected the module prepare_pt2e returned, got {type(model).__name__}")
    meta = dict(model.meta)
    model = _convert(model, fold_quantize=fold_quantize)
    model.meta.update(meta)
    return _disallow_eval_train(model)
