"""Wrapping outside values into trackers, installing the guards each one needs."""
from __future__ import annotations

import collections
import enum
import functools
import inspect as _inspect
import logging
import operator
import os
import types

from ... import types as _t
from ...tensor import Tensor
from ..exc import Unsupported
from ..source import AttrSource, GetItemSource
from .constant import ConstantVariable

# ember/func.py: the functions its transforms return are recognised (variables/func_transforms.py)
_FUNC_FILE = [__file__.rsplit("dynamo", 1)[0] + "func.py"]
_LITERALS = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented))


def _is_ember_module_name(name):
    return name == "ember" or (name.startswith("ember.") and not name.startswith("ember.dynamo"))


def is_inlined_ember_module(name):
    """ember's own Python code that is traced through like user code rather than treated as an
    operator (one graph node per call): the optimizers (their ``step`` is plain Python over tensor
    methods, as torch.optim is inlined by torch's dynamo) and gradient clipping (a loop over
    ``model.parameters()`` in a compiled training step), and the distributions (their methods
    read the parameters they hold: traced, those become graph inputs), ``ember.jit``'s
    pass-throughs (``is_scripting()`` folds to False), flex attention (the user's score and
    mask functions are traced into the graph with the softmax around them) and the pytree
    helpers (plain Python over containers); ``F.multi_head_attention_forward`` (nn.MultiheadAttention's
    body: projections, masks and sdpa, returning a tuple); the RNN recurrence (``run_layers``, shared
    by nn.RNN/LSTM/GRU and ``ember.lstm``/``gru``/...: plain Python over the layer weights); the functions of
    ``F`` that call a user's function (``triplet_margin_with_distance_loss``); ``ember._assert``
    (a Python ``assert``: decided at trace time on sizes)."""
    return name == "ember.optim" or name.startswith("ember.optim.") or name == "ember.nn.utils.clip_grad" \
        or name == "ember.distributions" or name.startswith("ember.distributions.") or name == "ember.jit" \
        or name == "ember.nn.attention.flex_attention" or name == "ember.utils._pytree" \
        or name == "ember.nn._mha_functional" or name == "ember.nn.modules.rnn" or name == "ember._rnn_functions" \
        or name == "ember.nn._functional_traced" or name == "ember._assertions" \
        or name == "ember.export._call_signature" \
        or name in _INLINED_DISTRIBUTED_MODULES \
        or name in _INLINED_HOP_MODULES   # export signature hooks; scan/map/... bodies (ember/_higher_order_ops)


# the hooks tensor-parallel styles install (DTensor.from_local / redistribute / to_local around a
# module's call): traced, so the module's compute and its DTensor conversions are one graph
_INLINED_DISTRIBUTED_MODULES = ("ember.distributed.tensor._module", "ember.distributed.tensor.parallel.style")

_INLINED_HOP_MODULES = ("ember._higher_order_ops._scan", "ember._higher_order_ops._wrappers",
                        "ember._higher_order_ops._flex")


def _is_numpy_scalar(value):
    import numpy as np
    return isinstance(value, np.generic) and not isinstance(value, np.object_)


def _is_typing_object(value) -> bool:
    """A type-hint object that is not a class: a special form or generic alias of ``typing``
    (``List``, ``Optional[int]``, a ``TypeVar``) or a builtin generic (``list[int]``, ``int | None``).
    Immutable, so a trace may treat it (and its subscripts) as a constant."""
    if isinstance(value, (types.GenericAlias, types.UnionType)):
        return True
    return not isinstance(value, (type, types.FunctionType)) and getattr(type(value), "__module__", None) == "typing"


def _marker(value, name, default):
    """``getattr(value, name, default)`` for ember's ``_ember_*`` marker attributes, read from any
    object wrap() is given: a user object whose ``__getattr__`` raises something other than
    AttributeError for an unknown name (``class AttrDict(dict): __getattr__ = dict.__getitem__``
    raises KeyError) has no marker -- it made the trace fail with an internal error. Nor is a
    marker what a ``__getattr__`` answers for any name (``def __getattr__(self, n): return
    len(n)`` made such an object ``ember.compiler.is_compiling``): for a class with a
    ``__getattr__`` only real attributes count (``inspect.getattr_static``)."""
    try:
        if getattr(type(value), "__getattr__", None) is not None:
            return _inspect.getattr_static(value, name, default)
        return getattr(value, name, default)
    except Exception:
        return default


def is_ember_function(value):
    if isinstance(value, types.MethodType) and not isinstance(value.__self__, types.ModuleType):
        return False     # a bound method: its object decides (wrap's MethodType branch)
    mod = getattr(value, "__module__", None) or ""
    return callable(value) and not isinstance(value, type) and _is_ember_module_name(mod) \
        and not is_inlined_ember_module(mod)


from ..._torch_function import DISPATCH_CLASSES as _DISPATCH_CLASSES, PLAIN_CLASSES as _PLAIN_TENSOR_CLASSES  # noqa: E402,E501


def wrap(tx, value, source, guard=True):
    """The tracker for ``value`` found at ``source`` (None: a value with no outside home)."""
    g = tx.output.guards if (guard and source is not None) else None
    if isinstance(value, Tensor):
        if value._sparse_layout:
            raise Unsupported(getattr(value, "_compile_unsupported", None) or  # MaskedTensor's own words
                              f"sparse tensors are not supported by ember.compile (a tensor with layout "
                              f"{value.layout}); the code using it runs eagerly")
        if value.is_nested:     # ember.nested: no single shape or strides to trace
            raise Unsupported(f"nested tensors are not supported by ember.compile (a tensor with layout "
                              f"{value.layout}); the code using it runs eagerly")
        if value.device.type == "meta":   # no data for kernels: shape propagation is eager's job
            raise Unsupported("a tensor on the meta device is not compiled by ember.compile; the code "
                              "using it runs eagerly")
        if value.__class__ in _DISPATCH_CLASSES:     # traceable wrapper subclasses (subclass_inputs.py)
            from .subclass_inputs import wrap_subclass_input
            return wrap_subclass_input(tx, value, source)
        if value.__class__ not in _PLAIN_TENSOR_CLASSES:     # ember/_torch_function.py (subclass_inputs.py)
            from .subclass_inputs import wrap_torch_function_input
            return wrap_torch_function_input(tx, value, source)
        if source is None:
            raise Unsupported("a tensor with no source (e.g. a default argument of a nested function)")
        return tx.output.add_tensor_input(value, source)
    if type(value) in (int, float) and source is not None and source.expr() in tx.output.unspec_sources:
        # a number read from outside that changed between calls (an optimizer's learning rate
        # under a scheduler): not specialised (see CodeCache.unspec_sources)
        return tx.output.unspec_number(value, source, "n")
    if type(value) in _LITERALS or isinstance(value, (_t.dtype, _t.device, range, slice, enum.Enum)) \
            or _is_numpy_scalar(value):
        if g:
            g.constant_match(source, value)
        return ConstantVariable(value, source)
    if getattr(type(value), "_ember_dynamo_constant", False):
        # an immutable value object that compares with ``==`` (a DTensor's DeviceMesh, placements):
        # a constant of the trace, passed to ops as it is, guarded equal
        if g:
            g.constant_match(source, value)
        return ConstantVariable(value, source)
    if type(value) is _t.Size:
        if g:
            g.constant_match(source, value)
        from .tensor import size_variable
        v = size_variable(value)
        v.source = source
        return v
    if type(value) in (list, dict, collections.OrderedDict, collections.defaultdict, collections.deque) \
            and source is not None:
        # one tracker per outside container, so mutations through any alias are seen by all
        hit = tx.output.containers.get(id(value))
        if hit is not None:
            tx.output.guards.add(f"{source.expr()} is {hit.source.expr()}", "same container")
            return hit
    if type(value) is list and source is not None:
        # items read when first needed: a list only appended to is not guarded on its contents
        from .lists import OutsideListVariable
        if g:
            g.type_match(source, value)
        res = OutsideListVariable(tx, value, source, g is not None)
        tx.output.containers[id(value)] = res
        return res
    if type(value) in (tuple, list) or (isinstance(value, tuple) and hasattr(type(value), "_fields")):
        if g:
            g.type_match(source, value)
            g.len_match(source, len(value))
        items = [wrap(tx, v, GetItemSource(source, i) if source else None, guard) for i, v in enumerate(value)]
        if type(value) is list:
            res = ListVariable(items, source)
            if source is not None:
                tx.output.containers[id(value)] = res
            return res
        return TupleVariable(items, source, cls=type(value))
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict):
        from .lists import wrap_dict
        res = wrap_dict(tx, value, source, guard)
        if source is not None:
            tx.output.containers[id(value)] = res
        return res
    if value is os.environ:
        from .environ import EnvironVariable
        return EnvironVariable()
    if type(value) in (set, frozenset):
        from .sets import wrap_set
        return wrap_set(tx, value, source, guard)
    if isinstance(value, Module):
        if source is None:
            raise Unsupported("a module with no source")
        if g:
            g.id_match(source, value)
            g.module_sources[source.expr()] = type(value)
        return NNModuleVariable(value, source)
    if isinstance(value, types.ModuleType):
        trusted = _is_ember_module_name(value.__name__)
        if g:
            g.id_match(source, value)
        return PythonModuleVariable(value, source, trusted=trusted)
    poly = _polyfill(value) if callable(value) else None
    if poly is not None:
        # ember.compiler.substitute_in_graph: the registered Python stand-in is traced instead
        from ..source import GuardGlobalSource
        if g:
            g.id_match(source, value)
        return UserFunctionVariable(poly, GuardGlobalSource(tx.output.guards.ref(poly), poly.__name__))
    if is_foldable(value):
        if g:
            g.id_match(source, value)
        return NumpyFoldVariable(value, source)
    if _marker(value, "_ember_forbidden_in_graph", False) is True:
        # ember.compiler.set_stance: never traced; the frame runs eagerly, where the call
        # raises "attempted to set_stance in an ember.compile region"
        e = Unsupported(f"{getattr(value, '__qualname__', value)} cannot be called inside an ember.compile region")
        e.no_break = True
        raise e
    if callable(value) and getattr(value, "__module__", None) == "traceback":
        # traceback.format_exc()/format_tb()/print_exc()/TracebackException: they walk real
        # traceback objects, which do not exist while tracing (variables/exceptions.py)
        from .exceptions import TracebackModuleVariable
        if g:
            g.id_match(source, value)
        return TracebackModuleVariable(value, source)
    if is_forbidden(value):
        from .allowed import ForbiddenFunctionVariable
        if g:
            g.id_match(source, value)
        return ForbiddenFunctionVariable(value, source)
    if _marker(value, "_ember_config_patch_factory", False) is True:
        # ember._dynamo.error_on_graph_break(...) / patch_dynamo_config(...) called in compiled
        # code (a ``with`` block): the frame runs eagerly, the block's setting applies for real
        from .allowed import ConfigPatchFactoryVariable
        if g:
            g.id_match(source, value)
        return ConfigPatchFactoryVariable(value, source)
    if _marker(value, "_ember_config_patch", None) is not None and isinstance(value, types.FunctionType):
        # a function decorated with ember._dynamo.patch_dynamo_config / error_on_graph_break /
        # dont_skip_tracing: traced as the function itself when the patch changes nothing now;
        # otherwise the graph splits at the call, which runs the wrapper (the patch applies)
        # and the function's own frame is compiled under it (allowed.ConfigPatchedFunctionVariable)
        from .. import config as _dcfg
        if all(getattr(_dcfg, k) == v for k, v in value._ember_config_patch.items()):
            return wrap(tx, value.__wrapped__, AttrSource(source, "__wrapped__") if source else None, guard)
        from .allowed import ConfigPatchedFunctionVariable
        if g:
            g.id_match(source, value)
        return ConfigPatchedFunctionVariable(value, source)
    if is_allowed(value) or is_disallowed(value):
        # ember.compiler.allow_in_graph / disallow_in_graph (variables/allowed.py)
        from .allowed import AllowedFunctionVariable, DisallowedFunctionVariable
        if g:
            g.id_match(source, value)
        return (AllowedFunctionVariable if is_allowed(value) else DisallowedFunctionVariable)(value, source)
    if isinstance(value, type):
        if g:
            g.id_match(source, value)
        if value in BuiltinVariable.CLASS_CALLS:
            return BuiltinVariable(value)
        return ClassVariable(value, source)
    if _marker(value, "_ember_is_compiling", False):
        from .objects import IsCompilingVariable
        if g:
            g.id_match(source, value)
        return IsCompilingVariable(value)
    if _marker(value, "_ember_assume_constant", False) is True and callable(value):
        from .functions import ConstantResultFunctionVariable
        if g:
            g.id_match(source, value)
        return ConstantResultFunctionVariable(value, source)
    if _marker(value, "_ember_dynamo_disable", False):
        if source is None:
            raise Unsupported("a function wrapped in ember.compiler.disable with no source")
        if g:
            g.id_match(source, value)
        return DisabledFunctionVariable(value, source)
    if isinstance(value, types.FunctionType) and getattr(value, "_ember_grad_mode_target", None) is not None \
            and isinstance(getattr(value, "__wrapped__", None), types.FunctionType):
        # a function decorated with @ember.no_grad() / @ember.enable_grad()
        from .ctx import GradModeDecoratedVariable
        if g:
            g.id_match(source, value)
        inner = wrap(tx, value.__wrapped__, AttrSource(source, "__wrapped__") if source else None, guard)
        return GradModeDecoratedVariable(inner, value._ember_grad_mode_target, source)
    if isinstance(value, types.FunctionType) and isinstance(getattr(value, "_ember_dynamo_inline", None),
                                                             types.FunctionType):
        # a decorator wrapper that only adds bookkeeping (``@record_function(name)``): the function
        return wrap(tx, value._ember_dynamo_inline, AttrSource(source, "_ember_dynamo_inline") if source
                    else None, guard)
    if isinstance(value, types.FunctionType) and hasattr(value, "_ember_orig"):
        return wrap(tx, value._ember_orig, AttrSource(source, "_ember_orig") if source else None, guard)
    if isinstance(value, functools._lru_cache_wrapper) and isinstance(getattr(value, "__wrapped__", None),
                                                                       types.FunctionType):
        # as torch.compile does: the cache is bypassed and the function traced (a cached function
        # is meant to be pure, and its result would be a constant of the trace anyway)
        from .. import logs
        logs.get("fallback").info("%s is wrapped in functools.lru_cache/cache: traced through, the "
                                  "cache bypassed", getattr(value, "__qualname__", value))
        if g:
            g.id_match(source, value)
        return wrap(tx, value.__wrapped__, AttrSource(source, "__wrapped__") if source else None, guard)
    if type(value) is functools.partial and source is not None:
        from .objects import PartialVariable
        if g:
            g.type_match(source, value)
        func = wrap(tx, value.func, AttrSource(source, "func"), guard)
        pargs = [wrap(tx, a, GetItemSource(AttrSource(source, "args"), i), guard) for i, a in enumerate(value.args)]
        if g:
            g.len_match(AttrSource(source, "args"), len(value.args))
            g.dict_keys_match(AttrSource(source, "keywords"), list(value.keywords))
        kw = {k: wrap(tx, v, GetItemSource(AttrSource(source, "keywords"), k), guard)
              for k, v in value.keywords.items()}
        return PartialVariable(func, pargs, kw, source)
    if type(value) is collections.deque and source is not None:
        from .deques import wrap_outside_deque
        return wrap_outside_deque(tx, value, source, wrap)
    if type(value) in (operator.itemgetter, operator.attrgetter) and source is not None:
        from .builtin import GetterVariable
        if g:
            g.id_match(source, value)       # (immutable: its keys are fixed with its identity)
        return GetterVariable(type(value), value.__reduce__()[1], source)
    if BuiltinVariable.supports(value):
        if g:
            g.id_match(source, value)
        return BuiltinVariable(value)
    if isinstance(value, types.FunctionType) and value.__name__.startswith("_") and \
            (value.__module__ or "").startswith("ember.nn.modules"):
        # a private Python helper of ember's modules (mask/shape preparation): inline it like user code
        return UserFunctionVariable(value, source)
    if getattr(type(value), "_ember_custom_op", False):
        # a user's custom operator (ember.library): one opaque graph node, never traced into
        from .custom_op import CustomOpVariable
        if g:
            g.id_match(source, value)
        return CustomOpVariable(value, source)
    if isinstance(value, types.FunctionType) and value.__module__ == "ember.func":
        from .func_transforms import FuncTransformVariable, transform_name
        if transform_name(value) is not None:
            # ember.func.grad / vmap / ...: the transformed call is traced whole (func_transforms.py)
            if g:
                g.id_match(source, value)
            return FuncTransformVariable(value, source)
    if isinstance(value, types.FunctionType) and value.__code__.co_filename == _FUNC_FILE[0]:
        # the function ember.func.grad(f) / vmap(f) / ... returned (made outside the frame)
        from .func_transforms import transformed_function
        res = transformed_function(tx, value, source, g)
        if res is not None:
            return res
    if _marker(value, "_ember_hop", None) is not None:
        # ember.cond / ember.while_loop: inlined branch or a graph break (variables/control_flow.py)
        from .control_flow import HigherOrderOpVariable
        if g:
            g.id_match(source, value)
        return HigherOrderOpVariable(value, source)
    if is_ember_function(value):
        inner = getattr(value, "__wrapped__", None)
        if inner is not None and not is_ember_function(inner):
            raise Unsupported(f"{getattr(inner, '__qualname__', inner)} is wrapped by an ember decorator "
                              f"(e.g. @no_grad()); calling it is not traced")
        if g:
            g.id_match(source, value)
        return EmberFunctionVariable(value, source)
    if value is _inspect.signature:
        # folded at trace time (variables/inspect_calls.py)
        from .inspect_calls import InspectSignatureFunctionVariable
        if g:
            g.id_match(source, value)
        return InspectSignatureFunctionVariable(value, source)
    if isinstance(value, types.FunctionType):
        if g:
            g.id_match(source, value)
        return UserFunctionVariable(value, source)
    if isinstance(value, types.MethodType):
        fn, obj = value.__func__, value.__self__
        obj_var = wrap(tx, obj, AttrSource(source, "__self__") if source else None, guard)
        if is_ember_function(fn):
            return EmberMethod(fn, obj_var)
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(f"bound method of {type(fn).__name__}")
        return UserMethodVariable(UserFunctionVariable(fn, AttrSource(source, "__func__") if source else None),
                                  obj_var)
    if callable(value) and isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType,
                                              types.MethodWrapperType, types.WrapperDescriptorType)):
        raise Unsupported(f"call into unsupported builtin/C function {getattr(value, '__qualname__', value)}")
    if isinstance(value, dict) and source is not None:
        # a dict-subclass object (HF ModelOutput) from outside: read-only tracker (dict_objects.py)
        from .dict_objects import wrap_outside_dict_object
        v = wrap_outside_dict_object(tx, value, source, guard)
        if v is not None:
            return v
    if _is_typing_object(value):
        # ``List``, ``Optional``, ``Dict[str, Tensor]``, ``list[int]``: a constant (guarded by
        # identity), so subscripting it folds (timm's ``torch.jit.annotate(List[Tensor], [])``
        # broke the graph at ``List[...]`` on an opaque object)
        if g:
            g.id_match(source, value)
        return ConstantVariable(value, source)
    tmod = getattr(type(value), "__module__", "") or ""
    if _is_ember_module_name(tmod) and not is_inlined_ember_module(tmod):
        from .objects import EmberObjectVariable
        if g:
            g.type_match(source, value)
        return EmberObjectVariable(value, source, trusted=True)
    if isinstance(value, logging.Logger) and source is not None:
        from .logging_calls import LoggerVariable
        if g:
            g.id_match(source, value)
        return LoggerVariable(value, source)
    if source is None:
        raise Unsupported(f"object of type {type(value).__name__} with no source")
    if g:
        g.type_match(source, value)
    return UserObjectVariable(value, source)


class EmberMethod:
    pass


def _make_ember_method():
    from .base import VariableTracker

    class EmberMethodVariable(VariableTracker):
        def __init__(self, fn, obj):
            self.fn, self.obj = fn, obj

        def call_function(self, tx, args, kwargs):
            from .objects import EmberFunctionVariable, EmberObjectVariable
            if isinstance(self.obj, EmberObjectVariable):
                # a method of an ember object held by the frame: as one graph node it would call
                # the object the trace saw, at every later call (its tensors baked in, no gradient
                # to them, stale values once the frame makes a new object)
                raise Unsupported(f"method {getattr(self.fn, '__qualname__', self.fn)} of an ember "
                                  f"{self.obj.python_type().__name__} object")
            return EmberFunctionVariable(self.fn).call_function(tx, [self.obj] + list(args), kwargs)
    return EmberMethodVariable


EmberMethod = _make_ember_method()  # noqa: F811


class _DisabledBase:
    pass


def _make_disabled():
    from .base import VariableTracker

    class DisabledFunctionVariable(VariableTracker):
        """A function wrapped in ``ember.compiler.disable``: calling it breaks the graph."""

        def __init__(self, fn, source):
            self.fn, self.source = fn, source

        def call_function(self, tx, args, kwargs):
            raise Unsupported(f"call to {getattr(self.fn, '__qualname__', self.fn)}, which is wrapped in "
                              f"ember.compiler.disable")
    return DisabledFunctionVariable


DisabledFunctionVariable = _make_disabled()


def wrap_constant_result(res):
    """A Python result computed while tracing (folded) as a tracker; only plain constants."""
    from .lists import TupleVariable
    from .tensor import size_variable
    from ...fx.experimental.symbolic_shapes import SymBool, SymInt
    if type(res) in _LITERALS or isinstance(res, (_t.dtype, _t.device, range, slice, SymInt, SymBool)) \
            or _is_numpy_scalar(res):
        return ConstantVariable(res)
    if type(res) is _t.Size:
        return size_variable(res)
    if type(res) is tuple:
        return TupleVariable([wrap_constant_result(r) for r in res])
    if type(res) is list:
        from .lists import ListVariable
        return ListVariable([wrap_constant_result(r) for r in res])
    if type(res) is set:
        from .sets import SetVariable
        return SetVariable(res)
    if type(res) is frozenset:
        return ConstantVariable(res)
    raise Unsupported(f"folded result of type {type(res).__name__}")


# The trackers and tables ``wrap`` uses on every call, bound once here: an import statement
# inside ``wrap`` cost ~6 us each (a relative import resolves its package through a Python
# property), ~60 us a call and ~50 ms of an optimizer step's trace. At the bottom because
# these modules are imported by this package's __init__ after this one (they may need it).
from ...nn.modules.module import Module  # noqa: E402
from ..polyfill import lookup as _polyfill  # noqa: E402
from .allowed import is_allowed, is_disallowed, is_forbidden  # noqa: E402
from .builtin import BuiltinVariable  # noqa: E402
from .functions import UserFunctionVariable, UserMethodVariable  # noqa: E402
from .lists import DictVariable, ListVariable, TupleVariable  # noqa: E402,F401
from .numpy_fold import NumpyFoldVariable, is_foldable  # noqa: E402
from .objects import (ClassVariable, EmberFunctionVariable, NNModuleVariable, PythonModuleVariable,  # noqa: E402
                      UserObjectVariable)
