"""AOT compilation of graphs whose inputs are traceable wrapper subclasses.

Why this shape. A wrapper subclass (``__torch_dispatch__`` + ``__tensor_flatten__``, torch's
``TwoTensor``) holds plain tensors and computes every op in Python. The compiled graphs only
know plain tensors, so at the boundary each subclass input is *flattened* into its inner
tensors, and each subclass output is rebuilt by ``__tensor_unflatten__`` from inner tensors.

Gradients must be eager's: autograd differentiates the *outer* tensor (derivative formulas run
on subclass values, whose ops go through the handler), not the inner representation. Two
autograd Functions make that so, both when tracing and at run time:

* :class:`_FromInner` (inner tensors -> subclass): its backward flattens the subclass gradient;
* :class:`_InnerOf` (subclass -> inner tensors): its backward rebuilds the subclass gradient.

The function aot traces, ``flat_fn(*inner)``, rebuilds the inputs with ``_FromInner``, runs the
dynamo graph on them (the handler runs on tracing tensors -- ember/ops/registry.py
``_DEFERRING_MODES`` -- so the joint graph holds plain ops only) and flattens the outputs with
``_InnerOf``: the joint graph's backward is the subclass backward, flattened. At run time the
compiled function is called between the same two Functions, so the caller's autograd graph
connects the subclass inputs to the subclass outputs.

What is assumed, as torch does: the handler computes the same structure (types, flatten
contexts, inner shapes) for the same input structure, which dynamo guards. A gradient that
reaches a subclass output at run time with another structure than the one traced raises.
"""
from __future__ import annotations

import logging
from typing import List, Optional

from .._torch_function import DISPATCH_CLASSES
from ..autograd.function import Function
from ..tensor import Tensor
from ..utils._python_dispatch import is_traceable_wrapper_subclass
from .joint import AOTUnsupported

log = logging.getLogger("ember.aot")


class SubclassMeta:
    """What one wrapper subclass value is made of: its class, ``__tensor_flatten__``'s attribute
    names and context, its outer size and strides, and the same for each inner value (a
    SubclassMeta, or the (shape, dtype, device) of a plain tensor)."""

    __slots__ = ("cls", "attrs", "ctx", "size", "stride", "inner", "n_flat", "grad_meta")

    def __init__(self, cls, attrs, ctx, size, stride, inner):
        self.cls, self.attrs, self.ctx, self.size, self.stride, self.inner = cls, attrs, ctx, size, stride, inner
        self.n_flat = sum(m.n_flat if isinstance(m, SubclassMeta) else 1 for m in inner)
        self.grad_meta = None       # an input's: its gradient's structure, seen while tracing

    def same_structure(self, other) -> bool:
        return isinstance(other, SubclassMeta) and self.cls is other.cls and list(self.attrs) == list(other.attrs) \
            and self.ctx == other.ctx and len(self.inner) == len(other.inner) and all(
                (a.same_structure(b) if isinstance(a, SubclassMeta) else
                 (not isinstance(b, SubclassMeta) and tuple(a[0]) == tuple(b[0]) and a[1] == b[1]))
                for a, b in zip(self.inner, other.inner))

    def describe(self) -> str:
        inner = ", ".join(f"{n}={m.describe() if isinstance(m, SubclassMeta) else _plain(m)}"
                          for n, m in zip(self.attrs, self.inner))
        return f"{self.cls.__qualname__}({inner}; ctx={self.ctx!r})"


def _plain(m) -> str:
    return f"Tensor(shape={tuple(m[0])}, dtype={m[1]})"


def meta_of(t) -> Optional[SubclassMeta]:
    """The structure of ``t`` if it is a traceable wrapper subclass instance, else None."""
    if not is_traceable_wrapper_subclass(t):
        return None
    attrs, ctx = t.__tensor_flatten__()
    inner = []
    for name in attrs:
        x = getattr(t, name)
        m = meta_of(x)
        inner.append(m if m is not None else (tuple(x.shape), x.dtype, x.device))
    return SubclassMeta(type(t), list(attrs), ctx, tuple(t.size()), tuple(t.stride()), inner)


def flatten(t, meta: SubclassMeta) -> List[Tensor]:
    """The plain tensors inside ``t`` (depth first, in ``__tensor_flatten__``'s order)."""
    out = []
    for name, m in zip(meta.attrs, meta.inner):
        x = getattr(t, name)
        if isinstance(m, SubclassMeta):
            out.extend(flatten(x, m))
        else:
            out.append(x)
    return out


def unflatten(flat, meta: SubclassMeta):
    """The subclass value ``meta`` describes, made from the plain tensors of iterator ``flat``."""
    inner = {}
    for name, m in zip(meta.attrs, meta.inner):
        inner[name] = unflatten(flat, m) if isinstance(m, SubclassMeta) else next(flat)
    return meta.cls.__tensor_unflatten__(inner, meta.ctx, meta.size, meta.stride)


def _plain_metas(meta: SubclassMeta) -> list:
    out = []
    for m in meta.inner:
        out.extend(_plain_metas(m) if isinstance(m, SubclassMeta) else [m])
    return out


def _tracing(value=None) -> bool:
    """Whether aot is tracing: ``value``'s (or any) plain tensors are fake."""
    from ..fx.fake_tensor import is_fake
    if value is None:
        from .._state import STATE
        return bool(STATE.modes)
    m = meta_of(value)
    flat = flatten(value, m) if m is not None else [value]
    return any(is_fake(f) for f in flat)


class _PlainGradCheck(Function):
    """Identity on a plain input that requires grad, while tracing: a gradient that is a wrapper
    subclass (``x @ w`` with x one makes w's) has no place among the flat graph's plain
    gradients; eager gives it, so the graph runs eagerly (AOTUnsupported, logged)."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad):
        if grad is not None and type(grad) in DISPATCH_CLASSES:
            raise AOTUnsupported(f"aot: the gradient of a plain tensor input is a {type(grad).__qualname__} "
                                 f"(a tensor subclass), which the flattened graph cannot return")
        return grad


def _mismatch(what: str, value) -> Exception:
    return (AOTUnsupported if _tracing(value) else RuntimeError)(f"ember.compile (tensor subclass): {what}")


class _FromInner(Function):
    """Inner tensors -> the subclass value; backward: the subclass gradient, flattened.

    ``output``: the value is a compiled graph's output, whose gradient the compiled backward
    takes as the inner tensors of a tangent shaped like the output (as traced): another
    structure raises. Otherwise (a graph input rebuilt while tracing) the gradient's structure
    is recorded, for rebuilding the input's gradient at run time (``_InnerOf``)."""

    @staticmethod
    def forward(ctx, meta, output, *flat):
        ctx.meta, ctx.output = meta, output
        ctx.set_materialize_grads(False)
        return unflatten(iter([f.detach() for f in flat]), meta)

    @staticmethod
    def backward(ctx, grad):
        meta = ctx.meta
        if grad is None:
            return (None, None) + (None,) * meta.n_flat
        gm = meta_of(grad)
        if gm is None:
            raise _mismatch(f"the gradient for a {meta.cls.__qualname__} at a compiled graph's boundary is a "
                            f"{type(grad).__qualname__}, not a {meta.cls.__qualname__}: it cannot be flattened "
                            f"into the gradients of the inner tensors the compiled graph works on", grad)
        if ctx.output and not gm.same_structure(meta) and hasattr(grad, "__coerce_same_metadata_as_tangent__"):
            # the subclass may relay the gradient out as the traced tangent (DTensor: redistribute)
            coerced = grad.__coerce_same_metadata_as_tangent__(meta.ctx, meta.cls)
            if coerced is not None:
                grad = coerced
                gm = meta_of(grad)
        if gm.n_flat != meta.n_flat or any(tuple(a[0]) != tuple(b[0]) for a, b in
                                           zip(_plain_metas(gm), _plain_metas(meta))):
            raise _mismatch(f"the gradient for a {meta.describe()} at a compiled graph's boundary is a "
                            f"{gm.describe()}, whose inner tensors do not match", grad)
        if ctx.output:
            if not gm.same_structure(meta):
                raise _mismatch(f"the gradient for a {meta.describe()} output of a compiled graph is a "
                                f"{gm.describe()}; the compiled backward was traced for a gradient shaped like "
                                f"the output", grad)
        elif meta.grad_meta is None or _tracing(grad):
            meta.grad_meta = gm
        return (None, None) + tuple(flatten(grad, gm))


class _InnerOf(Function):
    """The subclass value -> its inner tensors (new aliases); backward: the subclass gradient
    rebuilt from the inner tensors' gradients."""

    @staticmethod
    def forward(ctx, meta, outer):
        ctx.meta = meta
        ctx.set_materialize_grads(False)
        flat = [f.detach() for f in flatten(outer, meta)]
        nondiff = [f for f in flat if not f.dtype._differentiable]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        return tuple(flat)

    @staticmethod
    def backward(ctx, *grads):
        from .. import zeros
        meta = ctx.meta
        if all(g is None for g in grads):
            return None, None
        target = meta.grad_meta or meta
        grads = [g if g is not None else zeros(shape, dtype=dtype, device=dev)
                 for g, (shape, dtype, dev) in zip(grads, _plain_metas(target))]
        return None, unflatten(iter(grads), target)


def has_subclass_inputs(example_inputs) -> bool:
    return bool(DISPATCH_CLASSES) and any(type(t) in DISPATCH_CLASSES for t in example_inputs)


class _Boundary:
    """The structure of one compiled graph's inputs and (once traced) outputs."""

    def __init__(self, example_inputs):
        self.in_metas = []
        for i, t in enumerate(example_inputs):
            if isinstance(t, Tensor) and type(t) in DISPATCH_CLASSES:
                m = meta_of(t)
                if m is None:
                    raise AOTUnsupported(f"aot: input {i} is a {type(t).__qualname__}, a __torch_dispatch__ "
                                         f"subclass without __tensor_flatten__/__tensor_unflatten__")
                self.in_metas.append(m)
            else:
                self.in_metas.append(None)
        self.out_metas = None         # per output: SubclassMeta or None (plain)
        self.out_is_tuple = True

    def flat_inputs(self, inputs, differentiable: bool):
        flat = []
        for t, m in zip(inputs, self.in_metas):
            if m is None:
                flat.append(t)
                continue
            got = meta_of(t)
            if got is None or not got.same_structure(m):
                raise RuntimeError(f"ember.compile (tensor subclass): the graph was compiled for a {m.describe()} "
                                   f"input, got {got.describe() if got is not None else type(t).__qualname__}")
            if differentiable:
                flat.extend(_InnerOf.apply(m, t))
            else:
                flat.extend(f.detach().requires_grad_(t.requires_grad and f.dtype._differentiable)
                            for f in flatten(t, m))
        return flat

    def outer_outputs(self, flat_outs):
        it = iter(flat_outs)
        outs = []
        for m in self.out_metas:
            if m is None:
                outs.append(next(it))
            else:
                outs.append(_FromInner.apply(m, True, *[next(it) for _ in range(m.n_flat)]))
        return tuple(outs) if self.out_is_tuple else outs[0]


def compile_subclass_graph(gm, example_inputs, compile_static):
    """The callable that runs dynamo graph ``gm`` (some inputs wrapper subclasses) through aot:
    ``compile_static(flat_fn, flat_example_inputs)`` compiles the flattened function (see the
    module docstring). A graph whose subclass structure cannot be flattened runs eagerly,
    logged."""
    try:
        boundary = _Boundary(example_inputs)
    except AOTUnsupported as e:
        log.warning("%s; the graph runs eagerly", e)
        return gm

    def flat_fn(*flat):
        it = iter(flat)
        ins = []
        for m in boundary.in_metas:
            if m is None:
                t = next(it)
                if isinstance(t, Tensor) and t.requires_grad and _tracing(t):
                    t = _PlainGradCheck.apply(t)
                ins.append(t)
            else:
                ins.append(_FromInner.apply(m, False, *[next(it) for _ in range(m.n_flat)]))
        res = gm(*ins)
        is_tuple = isinstance(res, (tuple, list))
        outs = list(res) if is_tuple else [res]
        metas, flat_out = [], []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise AOTUnsupported(f"aot: output {i} of a graph with tensor-subclass inputs is a "
                                     f"{type(o).__name__}; only tensors are supported")
            m = meta_of(o)
            if m is None and type(o) in DISPATCH_CLASSES:
                raise AOTUnsupported(f"aot: output {i} is a {type(o).__qualname__}, a __torch_dispatch__ "
                                     f"subclass without __tensor_flatten__/__tensor_unflatten__")
            metas.append(m)
            flat_out.extend(_InnerOf.apply(m, o) if m is not None else [o])
        boundary.out_metas, boundary.out_is_tuple = metas, is_tuple
        return tuple(flat_out)

    flat_examples = boundary.flat_inputs(example_inputs, differentiable=False)
    compiled = compile_static(flat_fn, flat_examples)

    def run(*inputs):
        flat_outs = compiled(*boundary.flat_inputs(inputs, differentiable=True))
        flat_outs = flat_outs if isinstance(flat_outs, tuple) else (flat_outs,)
        return boundary.outer_outputs(flat_outs)
    run.subclass_boundary = boundary
    run.flat_compiled = compiled
    return run

