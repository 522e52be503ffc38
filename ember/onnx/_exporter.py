"""``ember.onnx.export``: argument checking, ``dynamic_axes`` -> ``Dim``s, capture, translation.

The capture is ``ember.export.export`` (one functional graph, parameters lifted); the ONNX
side is ``_translate``. This module owns only torch.onnx's calling convention: which of its
many keywords change the result (honoured or refused) and which cannot (accepted)."""
from __future__ import annotations

import enum
import inspect
import os
from typing import Any, Dict, Optional

DEFAULT_OPSET = 18
MIN_OPSET = 18       # Reduce* ops with axes as inputs, LayerNormalization


class TrainingMode(enum.IntEnum):
    """torch.onnx.TrainingMode: EVAL exports the model in eval mode (and restores its mode),
    PRESERVE exports it as it is; TRAINING is not supported."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def _import_onnx():
    msg = ("ember.onnx.export needs the onnx package (the ModelProto schema and checker): `pip install onnx` "
           "(or `pip install ember[onnx]`)")
    try:
        import onnx
    except ImportError:
        raise ImportError(msg) from None
    if getattr(onnx, "__file__", None) is None:    # a directory named onnx on sys.path, not the package
        raise ImportError(msg)
    return onnx


def _training_mode(training) -> TrainingMode:
    if training is None:
        return TrainingMode.EVAL
    name = getattr(training, "name", None)
    if isinstance(name, str) and name in TrainingMode.__members__:
        return TrainingMode[name]
    try:
        return TrainingMode(int(training))
    except (TypeError, ValueError):
        raise ValueError(f"ember.onnx.export: training must be a TrainingMode (EVAL, PRESERVE), got "
                         f"{training!r}") from None


def _refuse(**options):
    for name, (value, ok) in options.items():
        if not ok(value):
            raise NotImplementedError(f"ember.onnx.export: {name}={value!r} is not supported")


def export(model, args=(), f=None, **options):
    """Export ``model(*args, **kwargs)`` to ONNX (see ``_export`` for the options); while it
    runs ``ember.onnx.is_in_onnx_export()`` is True. An ``ember.onnx.ExportableModule``
    called without example inputs supplies them -- and its input/output names and dynamic
    shapes, where those are not given -- itself."""
    from ._exportable import ExportableModule
    from ._legacy import _exporting
    no_inputs = args is None or (isinstance(args, (tuple, list)) and len(args) == 0)
    if isinstance(model, ExportableModule) and no_inputs and not options.get("kwargs"):
        args, kw = model.example_arguments()
        options["kwargs"] = kw
        for name, method in (("input_names", model.input_names), ("output_names", model.output_names),
                             ("dynamic_shapes", model.dynamic_shapes)):
            if options.get(name) is None:
                options[name] = method()
    with _exporting():
        return _export(model, args, f, **options)


def _export(model, args=(), f=None, *, kwargs: Optional[Dict[str, Any]] = None, verbose: Optional[bool] = None,
           input_names=None, output_names=None, opset_version: Optional[int] = None, dynamo: bool = True,
           external_data: bool = True, dynamic_shapes=None, custom_translation_table=None, report: bool = False,
           optimize: bool = True, verify: bool = False, profile: bool = False, dump_exported_program: bool = False,
           artifacts_dir="." , export_params: bool = True, keep_initializers_as_inputs: bool = False,
           dynamic_axes=None, training=TrainingMode.EVAL, operator_export_type=None,
           do_constant_folding: bool = True, custom_opsets=None, export_modules_as_functions=False,
           autograd_inlining: bool = True):
    """Export ``model(*args, **kwargs)`` to ONNX; returns an :class:`ONNXProgram` and, when ``f``
    (a path or a binary file object) is given, also writes the model there.

    Accepted and ignored because they cannot change the model: ``dynamo`` (both capture with
    ember.export), ``do_constant_folding``, ``optimize``, ``autograd_inlining``, ``artifacts_dir``.
    ``training=TrainingMode.EVAL`` (the default) exports the model in eval mode (dropout off,
    BatchNorm on running statistics) and restores its mode afterwards. ``external_data``
    applies to ``f``: the weights go to a side file only when the model would exceed 2 GB.
    Refused with ``NotImplementedError``: ``operator_export_type`` other than ONNX, custom
    opsets or translation tables, functions per module, ``report``/``verify``/``profile``/
    ``dump_exported_program``, ``training=TrainingMode.TRAINING``."""
    onnx = _import_onnx()
    from ..export import ExportedProgram
    from ..export import export as ember_export
    from ._program import ONNXProgram
    from ._translate import translate

    _refuse(operator_export_type=(operator_export_type,
                                  lambda v: v is None or getattr(v, "name", v) in ("ONNX", 0)),
            custom_opsets=(custom_opsets, lambda v: not v),
            custom_translation_table=(custom_translation_table, lambda v: not v),
            export_modules_as_functions=(export_modules_as_functions, lambda v: not v),
            report=(report, lambda v: not v), verify=(verify, lambda v: not v),
            profile=(profile, lambda v: not v), dump_exported_program=(dump_exported_program, lambda v: not v))
    mode = _training_mode(training)
    if mode == TrainingMode.TRAINING:
        raise NotImplementedError("ember.onnx.export: training=TrainingMode.TRAINING is not supported (ONNX "
                                  "graphs here are inference graphs); use EVAL or PRESERVE")
    opset = DEFAULT_OPSET if opset_version is None else opset_version
    max_opset = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or isinstance(opset, bool):
        raise TypeError(f"ember.onnx.export: opset_version must be an int, got {opset_version!r}")
    if opset < MIN_OPSET:
        raise NotImplementedError(f"ember.onnx.export: opset_version={opset} is not supported (the exporter "
                                  f"targets opset {MIN_OPSET} or newer)")
    if opset > max_opset:
        raise ValueError(f"ember.onnx.export: opset_version={opset} is newer than the installed onnx package "
                         f"supports ({max_opset})")
    if dynamic_axes is not None and dynamic_shapes is not None:
        raise ValueError("ember.onnx.export: give either dynamic_axes or dynamic_shapes, not both")
    from ..tensor import Tensor
    if isinstance(args, Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise TypeError(f"ember.onnx.export: args must be a tuple of example inputs, got {type(args).__name__}")
    kwargs = dict(kwargs or {})
    input_names = list(input_names) if input_names is not None else None
    output_names = list(output_names) if output_names is not None else None

    if isinstance(model, ExportedProgram):
        if dynamic_axes or dynamic_shapes:
            raise ValueError("ember.onnx.export: an ExportedProgram already fixes its dynamic shapes; do not pass "
                             "dynamic_axes / dynamic_shapes with it")
        # the program keeps no Dim names: its symbolic dims are named by their symbols (s0, s1, ...)
        ep, dim_names, out_axes = model, {}, {}
    else:
        from ..nn.modules.module import Module
        if not isinstance(model, Module):
            raise TypeError(f"ember.onnx.export: model must be an ember.nn.Module or an ExportedProgram, got "
                            f"{type(model).__name__}")
        bound = _bind(model, args, kwargs)
        out_axes = {}
        if dynamic_axes is not None:
            dynamic_shapes, requested, out_axes = _from_dynamic_axes(dynamic_axes, bound, input_names,
                                                                     output_names)
        else:
            requested = _requested_names(bound, dynamic_shapes)
        was_training = model.training
        if mode == TrainingMode.EVAL and was_training:
            model.train(False)
        try:
            # torch's ONNX exporter decomposes ``linear`` (to ``addmm`` -> Gemm) before translating
            from ..export._trace import lowering_linear
            with lowering_linear():
                ep = ember_export(model, args, kwargs, dynamic_shapes=dynamic_shapes)
        finally:
            if mode == TrainingMode.EVAL and was_training:
                model.train(True)
        dim_names = _symbol_names(ep, args, kwargs, requested)

    model_proto = translate(ep, opset=opset, input_names=input_names, output_names=output_names,
                            dim_names=dim_names, export_params=export_params,
                            keep_initializers_as_inputs=keep_initializers_as_inputs)
    for o in model_proto.graph.output:
        for axis, name in out_axes.get(o.name, {}).items():
            dims = o.type.tensor_type.shape.dim
            if axis < len(dims):
                dims[axis].dim_param = name
    program = ONNXProgram(model_proto, ep)
    if verbose:
        printer = getattr(onnx, "printer", None)
        print(printer.to_text(model_proto) if printer is not None else onnx.helper.printable_graph(model_proto.graph))
    if f is not None:
        if not (hasattr(f, "write") or isinstance(f, (str, os.PathLike))):
            raise TypeError(f"ember.onnx.export: f must be a path or a binary file object, got {type(f).__name__}")
        program.save(f, external_data=None)
    return program


export.__signature__ = inspect.signature(_export)
export.__doc__ += "\n\n" + _export.__doc__


def _bind(model, args, kwargs) -> Dict[str, Any]:
    """forward's argument name -> value (``**kw`` unpacked), as ember.export names inputs."""
    try:
        sig = inspect.signature(model.forward)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"ember.onnx.export: the example inputs do not match {type(model).__name__}.forward: "
                        f"{e}") from None
    out = {}
    for name, value in bound.arguments.items():
        if sig.parameters[name].kind == inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


def _from_dynamic_axes(dynamic_axes, bound, input_names, output_names):
    """torch's legacy ``dynamic_axes`` -> (ember ``dynamic_shapes``, {id(tensor): {axis: name}},
    {output name: {axis: name}}). Keys are input names (``input_names`` or forward's argument
    names) or output names; one ``Dim`` per distinct axis name, so equal names declare equal
    sizes."""
    from ..export import Dim
    from ..tensor import Tensor
    from ..utils._pytree import tree_flatten
    if not isinstance(dynamic_axes, dict):
        raise TypeError(f"ember.onnx.export: dynamic_axes must be a dict {{name: {{axis: dim_name}}}}, got "
                        f"{type(dynamic_axes).__name__}")
    leaves = [v for v in tree_flatten(list(bound.values()))[0] if isinstance(v, Tensor)]
    arg_of_leaf = {}
    for arg_name, v in bound.items():
        if isinstance(v, Tensor):
            arg_of_leaf[id(v)] = arg_name
    by_input_name = {}
    for i, t in enumerate(leaves):
        if input_names is not None and i < len(input_names):
            by_input_name[input_names[i]] = t
    for arg_name, v in bound.items():
        if isinstance(v, Tensor):
            by_input_name.setdefault(arg_name, v)
    dims: Dict[str, Any] = {}
    spec: Dict[str, Dict[int, Any]] = {}
    requested: Dict[int, Dict[int, str]] = {}
    out_axes: Dict[str, Dict[int, str]] = {}
    for key, axes in dynamic_axes.items():
        if isinstance(axes, dict):
            pairs = list(axes.items())
        elif isinstance(axes, (list, tuple)):
            pairs = [(a, f"{key}_dynamic_axes_{i + 1}") for i, a in enumerate(axes)]
        else:
            raise TypeError(f"ember.onnx.export: dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of "
                            f"axes, got {type(axes).__name__}")
        if key in by_input_name:
            t = by_input_name[key]
            if id(t) not in arg_of_leaf:
                raise NotImplementedError(f"ember.onnx.export: dynamic_axes for {key!r}, a tensor nested in a "
                                          f"container argument, is not supported; use dynamic_shapes")
            arg_name = arg_of_leaf[id(t)]
            for axis, name in pairs:
                if not isinstance(axis, int) or not -t.ndim <= axis < t.ndim:
                    raise ValueError(f"ember.onnx.export: dynamic_axes[{key!r}]: axis {axis!r} is out of range "
                                     f"for a {t.ndim}-d input")
                axis %= t.ndim
                ident = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name))
                if not ident.isidentifier():
                    ident = "d_" + ident
                if ident not in dims:
                    dims[ident] = Dim(ident)
                spec.setdefault(arg_name, {})[axis] = dims[ident]
                requested.setdefault(id(t), {})[axis] = str(name)
        elif output_names is not None and key in output_names:
            out_axes[key] = {int(a): str(n) for a, n in pairs}
        else:
            known = sorted(set(by_input_name) | set(output_names or []))
            raise ValueError(f"ember.onnx.export: dynamic_axes key {key!r} is neither an input nor an output name "
                             f"(known: {known})")
    return spec, requested, out_axes


def _requested_names(bound, dynamic_shapes) -> Dict[int, Dict[int, str]]:
    """{id(tensor): {axis: Dim name}} for the named Dims of ``dynamic_shapes``."""
    if dynamic_shapes is None:
        return {}
    from ..export.dynamic_shapes import dims_per_tensor
    out = {}
    for tid, per_dim in dims_per_tensor(bound, dynamic_shapes).items():
        names = {d: req.name for d, req in per_dim.items() if req.name is not None}
        if names:
            out[tid] = names
    return out


def _symbol_names(ep, args, kwargs, requested):
    """ShapeEnv symbol -> the name the user gave that dim (its ONNX ``dim_param``)."""
    from ..export.graph_signature import InputKind
    from ..tensor import Tensor
    from ..utils._pytree import tree_flatten
    leaves = [v for v in tree_flatten((args, kwargs))[0] if isinstance(v, Tensor)]
    names = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    phs = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder" and n.name in names]
    out = {}
    for t, ph in zip(leaves, phs):
        for axis, name in requested.get(id(t), {}).items():
            d = ph.meta["val"].shape[axis]
            expr = getattr(d, "expr", None)
            if expr is not None and getattr(expr, "is_Symbol", False):
                out.setdefault(expr, name)
    return out
