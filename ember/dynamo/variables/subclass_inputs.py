"""Traceable wrapper subclasses (``__torch_dispatch__`` + ``__tensor_flatten__``) as frame inputs.

Why this shape. A wrapper subclass instance has no data of its own: its handler computes every
op from the tensors it holds. Dynamo keeps the *outer* tensor as one graph input (the graph's
ops are the user's ops on the subclass, as torch's dynamo records them) and gives it an example
value rebuilt with ``__tensor_unflatten__`` from fake twins of its inner tensors: ops on it run
the subclass's handler under the fake mode (ember/ops/registry.py ``_DEFERRING_MODES``), so the
example results are subclass instances too, with the metadata the handler gives them. A handler
that reads data (``.item()``) fails on fakes and the frame runs eagerly (a logged reason).

Guards: the outer tensor's type and metadata, what ``__tensor_flatten__`` says (attribute names
and context, compared with ``==``) and every inner tensor's metadata, recursively for inner
tensors that are wrapper subclasses themselves. The aot backends flatten the subclass into its
inner tensors at the graph boundary (ember/aot/subclass.py)."""
from __future__ import annotations

from ..._torch_function import DISPATCH_CLASSES, PLAIN_CLASSES
from ...tensor import Tensor
from ...utils._python_dispatch import is_traceable_wrapper_subclass
from ..exc import Unsupported
from ..source import AttrSource

_GUARDABLE_CTX = (int, float, bool, str, bytes, type(None))


def _check_ctx(ctx, cls):
    """A flatten context the guards can compare with ``==`` (plain values, tuples/lists/dicts of
    them, dtypes, devices, sizes); anything else (a tensor, an arbitrary object) is refused."""
    from ... import types as _t
    if type(ctx) in _GUARDABLE_CTX or isinstance(ctx, (_t.dtype, _t.device, _t.Size)):
        return
    if getattr(type(ctx), "_ember_guard_ctx", False):
        # a class that vouches its ``==`` compares all that makes the value (DTensor's layout spec)
        return
    if type(ctx) in (tuple, list):
        for c in ctx:
            _check_ctx(c, cls)
        return
    if type(ctx) is dict:
        for k, v in ctx.items():
            _check_ctx(k, cls)
            _check_ctx(v, cls)
        return
    raise Unsupported(f"the __tensor_flatten__ context of a {cls.__qualname__} holds a {type(ctx).__name__}, "
                      f"which ember.compile cannot guard on; the code using it runs eagerly")


def flatten_checked(value):
    """(attribute names, context, inner tensors) of a traceable wrapper subclass instance; an
    Unsupported naming the class when it is not one or says something dynamo cannot guard."""
    cls = type(value)
    if not is_traceable_wrapper_subclass(value):
        raise Unsupported(f"a Tensor subclass with __torch_dispatch__ ({cls.__qualname__}) is not traced by "
                          f"ember.compile unless it defines __tensor_flatten__ and __tensor_unflatten__; the "
                          f"code using it runs eagerly")
    flat = value.__tensor_flatten__()
    if not (isinstance(flat, tuple) and len(flat) == 2 and isinstance(flat[0], (list, tuple))):
        raise Unsupported(f"{cls.__qualname__}.__tensor_flatten__ returned {type(flat).__name__}; expected "
                          f"(list of attribute names, context)")
    attrs, ctx = flat
    _check_ctx(ctx, cls)
    inner = []
    for name in attrs:
        t = getattr(value, name, None)
        if not isinstance(t, Tensor):
            raise Unsupported(f"{cls.__qualname__}.__tensor_flatten__ names {name!r}, which is a "
                              f"{type(t).__name__}, not a tensor")
        if not (type(t) in PLAIN_CLASSES or is_traceable_wrapper_subclass(t)):
            raise Unsupported(f"the inner tensor {name!r} of a {cls.__qualname__} is a {type(t).__qualname__}; "
                              f"only plain tensors and traceable wrapper subclasses are traced")
        inner.append(t)
    return list(attrs), ctx, inner


def _extra_state(value, attrs):
    """Instance attributes of ``value`` outside what ``__tensor_flatten__`` names (ember's own
    tensor fields aside): state the handler may read, which the trace bakes in."""
    return {k: v for k, v in vars(value).items() if k not in attrs and not hasattr(Tensor, k)}


def _check_extra_state(value, ex, attrs):
    """Non-tensor state outside the flatten context is traced as the example value holds it and
    guarded as the input holds it: both must agree (``__tensor_unflatten__`` restores it) and be
    comparable, or the frame runs eagerly -- never a graph computed with stale state."""
    cls = type(value)
    for k, v in _extra_state(value, attrs).items():
        if isinstance(v, Tensor):
            raise Unsupported(f"a {cls.__qualname__} holds the tensor {k!r}, which __tensor_flatten__ does not "
                              f"name; ember.compile cannot trace it (the code using it runs eagerly)")
        try:
            _check_ctx(v, cls)
        except Unsupported:
            raise Unsupported(f"a {cls.__qualname__} holds {k!r} (a {type(v).__name__}) outside its "
                              f"__tensor_flatten__ context; ember.compile cannot guard on it (the code using it "
                              f"runs eagerly)") from None
        if not k.isidentifier() or getattr(ex, k, _MISSING) != v:
            raise Unsupported(f"{cls.__qualname__}.__tensor_unflatten__ does not restore {k!r} (state outside "
                              f"the __tensor_flatten__ context); ember.compile cannot trace with it (the code "
                              f"using it runs eagerly)")


_MISSING = object()


def example_of(value, inner_example):
    """The example value of subclass input ``value``: rebuilt by ``__tensor_unflatten__`` from
    ``inner_example(t)`` of each inner tensor (fake twins in fake mode)."""
    attrs, ctx, inner = flatten_checked(value)
    made = {}
    for name, t in zip(attrs, inner):
        made[name] = example_of(t, inner_example) if is_traceable_wrapper_subclass(t) else inner_example(t)
    ex = type(value).__tensor_unflatten__(made, ctx, value.size(), value.stride())
    if type(ex) is not type(value):
        raise Unsupported(f"{type(value).__qualname__}.__tensor_unflatten__ returned a {type(ex).__qualname__}")
    _check_extra_state(value, ex, attrs)
    if value.requires_grad and not ex.requires_grad:
        ex.requires_grad_(True)
    return ex


def guard_subclass(guards, source, value):
    """The guards on what makes a subclass input: flatten's answer and each inner tensor."""
    attrs, ctx, inner = flatten_checked(value)
    e = source.expr()
    said = value.__tensor_flatten__()      # compared as the method answers (a list or a tuple of names)
    said = (type(said[0])(said[0]), said[1])
    guards.add(f"{e}.__tensor_flatten__() == {guards.ref(said)}",
               f"{e}.__tensor_flatten__() == ({attrs!r}, {ctx!r})", kind="EQUALS_MATCH", name=e)
    for k, v in _extra_state(value, attrs).items():      # (checked comparable by example_of)
        guards.add(f"{e}.{k} == {guards.ref(v)}", f"{e}.{k} == {v!r}", kind="EQUALS_MATCH", name=f"{e}.{k}")
    for name, t in zip(attrs, inner):
        src = AttrSource(source, name)
        if is_traceable_wrapper_subclass(t):
            guards.tensor_match(src, t)
            guard_subclass(guards, src, t)
        else:
            guards.tensor_match(src, t)


def wrap_subclass_input(tx, value, source):
    """The tracker of a traceable wrapper subclass input (see the module docstring)."""
    if source is None:
        raise Unsupported(f"a {type(value).__qualname__} (a tensor subclass) with no source")
    flatten_checked(value)
    tv = tx.output.add_tensor_input(value, source)
    guard_subclass(tx.output.guards, source, value)
    return tv


# ---------------------------------------------------------------- __torch_function__ subclasses
# A subclass with the default ``Tensor.__torch_function__`` computes what a plain tensor does and
# hands back its results as the subclass (``as_subclass``). Traced: its example value is a plain
# fake, the tracker remembers the class (``TensorVariable.cls``), each op's tensor results take the
# class the default handler would give them (:func:`result_class`) and the graph's outputs are
# turned into those classes after each call (:func:`rewrap_outputs`). A ``__torch_function__`` of
# the subclass's own (one that logs, changes arguments or results) is not inlined: the frame runs
# eagerly, the reason logged.

def uses_default_torch_function(cls) -> bool:
    from ..._torch_function import default_torch_function
    return getattr(getattr(cls, "__torch_function__", None), "__func__", None) is default_torch_function


def _refuse_own_handler(cls):
    raise Unsupported(f"a Tensor subclass with a __torch_function__ of its own ({cls.__qualname__}) is not "
                      f"traced by ember.compile (only the default Tensor.__torch_function__, which keeps the "
                      f"subclass through ops); the code using it runs eagerly")


def wrap_torch_function_input(tx, value, source):
    """The tracker of an input whose class takes part in the ``__torch_function__`` protocol."""
    cls = type(value)
    if not uses_default_torch_function(cls):
        _refuse_own_handler(cls)
    if source is None:
        raise Unsupported(f"a {cls.__qualname__} (a tensor subclass) with no source")
    return tx.output.add_tensor_input(value, source)


_TRACKER_TYPES = None     # (TensorVariable, BaseListVariable), imported on first use (cycle)


def _tracked_classes(vs, out):
    global _TRACKER_TYPES
    if _TRACKER_TYPES is None:      # (not an import per call: this runs for every traced op)
        from .lists import BaseListVariable
        from .tensor import TensorVariable
        _TRACKER_TYPES = (TensorVariable, BaseListVariable)
    TensorVariable, BaseListVariable = _TRACKER_TYPES
    for v in vs:
        if isinstance(v, TensorVariable):
            c = v.cls
            if c not in PLAIN_CLASSES and c not in DISPATCH_CLASSES and c not in out:
                at = next((k for k, seen in enumerate(out) if issubclass(c, seen)), len(out))
                out.insert(at, c)
        elif isinstance(v, BaseListVariable):
            _tracked_classes(v.items, out)
    return out


def result_class(args, kwargs):
    """The class the default ``__torch_function__`` gives the tensor results of a call with these
    trackers (None: no protocol subclass among them), as the eager protocol decides it: the
    overloaded types, subclasses before their bases, and the first whose handler accepts them all."""
    types = _tracked_classes(list(args) + list(kwargs.values()), [])
    if not types:
        return None
    for t in types:
        if not uses_default_torch_function(t):
            _refuse_own_handler(t)
        if all(issubclass(t, u) for u in types):
            return t
    raise Unsupported("no __torch_function__ handler accepts the tensor subclasses "
                      f"{', '.join(t.__qualname__ for t in types)} together (eager raises)")


def rewrap_outputs(compiled, classes):
    """``compiled`` (a graph's runtime function) with output ``i`` turned into ``classes[i]`` where
    that is a protocol subclass (the graph's kernels make plain tensors)."""
    todo = [(i, c) for i, c in enumerate(classes) if c is not None]
    if not todo:
        return compiled

    def run(*inputs):
        outs = list(compiled(*inputs))
        for i, c in todo:
            o = outs[i]
            if isinstance(o, Tensor) and not isinstance(o, c):
                outs[i] = o.as_subclass(c)
        return tuple(outs)
    run.__wrapped__ = compiled
    return run


def output_class(tv):
    """The protocol subclass an output tracker stands for, or None."""
    c = tv.cls
    return c if (c not in PLAIN_CLASSES and c not in DISPATCH_CLASSES and isinstance(c, type)
                 and issubclass(c, Tensor)) else None
