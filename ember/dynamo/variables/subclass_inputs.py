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

from ..._torch_function import PLAIN_CLASSES
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
