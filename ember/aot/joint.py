"""Joint forward+backward graphs: trace a function *and its gradient* into one FX graph.

``trace_joint(fn, example_inputs)`` runs ``fn`` under make_fx on fake tensors
(symbolic sizes with ``dynamic=True``) together with a call of the real
autograd engine (``ember.autograd.grad``) on its differentiable outputs, with
functionalization and an optional decomposition table. The graph's inputs are
the *primals* (the flat inputs) then the *tangents* (one per differentiable
output); its outputs are ``(forward outputs, mutated-input new values,
gradients of the inputs that require grad)``.

When no input requires grad (or grad mode is off) only the forward is traced
(an inference graph).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

from .. import autograd as _autograd
from .._fake import FakeArray
from .._state import STATE
from ..autograd.grad_mode import enable_grad
from ..fx.experimental.proxy_tensor import make_fx
from ..fx.experimental.symbolic_shapes import ShapeEnv
from ..fx.fake_tensor import FakeTensorMode, make_fake
from ..tensor import Tensor


class AOTUnsupported(RuntimeError):
    """The function cannot be compiled ahead of time; callers fall back to eager and say why."""


@dataclass
class JointGraph:
    """A traced joint (or inference) graph and what its inputs and outputs mean."""

    gm: Any
    num_primals: int
    num_tangents: int
    num_outputs: int                  # forward outputs (flat)
    mutated_inputs: List[int]         # primal positions written back after the call
    grad_inputs: List[int]            # primal positions that receive a gradient output
    diff_outputs: List[int]           # forward output positions that get a tangent
    output_is_tuple: bool = True
    shape_env: Optional[ShapeEnv] = None
    inference: bool = False
    notes: List[str] = field(default_factory=list)
    # forward output position -> ("input", input position, size, stride, storage offset relative
    # to the input's) for outputs that are views of (or are) an input, or ("output", position of
    # an output that is a whole contiguous buffer, size, stride, offset) for outputs that are views
    # of another output: regenerated as views after each call so they alias as they do eagerly
    aliased_outputs: dict = field(default_factory=dict)


def _as_tuple(out):
    if isinstance(out, Tensor):
        return (out,), False
    if isinstance(out, (tuple, list)):
        for o in out:
            if not isinstance(o, Tensor):
                raise AOTUnsupported(f"aot: the compiled function returns a {type(o).__name__} inside its "
                                     f"output; only tensors are supported")
        return tuple(out), True
    raise AOTUnsupported(f"aot: the compiled function returns {type(out).__name__}; expected tensors")


def trace_joint(fn: Callable[..., Any], example_inputs: Sequence[Tensor], *,
                decompositions: Optional[dict] = None, dynamic: bool = False,
                inference: Optional[bool] = None) -> JointGraph:
    """Trace ``fn(*example_inputs)`` and its backward (see the module docstring).

    An op whose output shape depends on data (``nonzero``, ``.item()``) cannot
    be traced on fake tensors: that raises :class:`AOTUnsupported` naming the
    op (``.op``). Dynamo never hands such a graph over: it traces on fake
    tensors itself and breaks the graph at that op."""
    from ..fx.fake_tensor import DataDependentOutputError
    try:
        return _trace_joint(fn, example_inputs, decompositions, dynamic, inference)
    except DataDependentOutputError as e:
        err = AOTUnsupported(f"aot: cannot trace '{e.op}', whose output depends on tensor data; compile "
                             f"the code before and after it as separate graphs (a graph break)")
        err.op = e.op
        raise err from e


def _trace_joint(fn, example_inputs, decompositions, dynamic, inference) -> JointGraph:
    for i, t in enumerate(example_inputs):
        if not isinstance(t, Tensor):
            raise AOTUnsupported(f"aot: input {i} is a {type(t).__name__}; only tensor inputs are supported")
    mode = FakeTensorMode(ShapeEnv() if dynamic else None)
    tracing = "symbolic" if dynamic else "fake"
    fakes = [mode.from_tensor(t, symbolic=dynamic, source=f"primals_{i}") for i, t in enumerate(example_inputs)]
    wants_grad = [t.requires_grad for t in example_inputs]
    if inference is None:
        inference = not (STATE.grad_enabled and any(wants_grad))

    # a probe run (fake, nothing recorded) tells which outputs are differentiable
    with mode:
        probe_in = [f.detach().requires_grad_(w) if f.dtype.is_floating_point else f.detach()
                    for f, w in zip(fakes, wants_grad)]
        with enable_grad() if not inference else _nullcontext():
            probe_out, is_tuple = _as_tuple(fn(*probe_in))
    aliased = _aliased_outputs(probe_out, fakes)
    diff_outputs = [i for i, o in enumerate(probe_out) if o.requires_grad] if not inference else []
    grad_inputs = [i for i, w in enumerate(wants_grad) if w] if not inference else []
    if not diff_outputs:
        inference = True
        grad_inputs = []

    if inference:
        def forward_only(primals):
            outs, _ = _as_tuple(fn(*primals))
            return outs
        with mode:
            from ..autograd.grad_mode import no_grad
            with no_grad():
                gm = make_fx(forward_only, decomposition_table=decompositions, tracing_mode=tracing,
                             functionalize=True)(list(fakes))
        return JointGraph(gm, len(fakes), 0, len(probe_out), list(gm.meta["mutated_inputs"]), [], [],
                          is_tuple, mode.shape_env, True, aliased_outputs=aliased)

    tangents = [make_fake(FakeArray(tuple(probe_out[i].shape), probe_out[i].dtype), probe_out[i].device)
                for i in diff_outputs]

    def joint(primals, tangents):
        outs, _ = _as_tuple(fn(*primals))
        diff = [outs[i] for i in diff_outputs]
        wrt = [primals[i] for i in grad_inputs]
        grads = _autograd.grad(diff, wrt, grad_outputs=list(tangents), allow_unused=True)
        return tuple(outs), tuple(grads)

    with mode, enable_grad():
        gm = make_fx(joint, decomposition_table=decompositions, tracing_mode=tracing,
                     functionalize=True)(list(fakes), tangents)
    return JointGraph(gm, len(fakes), len(tangents), len(probe_out), list(gm.meta["mutated_inputs"]),
                      grad_inputs, diff_outputs, is_tuple, mode.shape_env, False, aliased_outputs=aliased)


def _aliased_outputs(outs, fakes) -> dict:
    """Which outputs share an input's (fake) storage, and as what view of it.

    Sizes must be concrete: with symbolic sizes the output is returned as a
    fresh tensor (equal values, no aliasing)."""
    from ..fx.experimental.symbolic_shapes import SymInt
    found = {}
    for k, o in enumerate(outs):
        st = getattr(o._data, "storage", None)
        if st is None:
            continue
        for i, f in enumerate(fakes):
            if getattr(f._data, "storage", None) is st:
                geom = tuple(o.shape) + tuple(o.stride()) + (o.storage_offset(), f.storage_offset())
                if any(isinstance(g, SymInt) for g in geom):
                    break
                found[k] = ("input", i, tuple(o.shape), tuple(o.stride()),
                            int(o.storage_offset()) - int(f.storage_offset()))
                break
    # outputs aliasing each other: views of an output that is its whole (contiguous) buffer
    for r, base in enumerate(outs):
        if r in found:
            continue
        st = getattr(base._data, "storage", None)
        if st is None or not base.is_contiguous() or base.storage_offset() != 0 or \
                any(isinstance(n, SymInt) for n in base.shape):
            continue
        for k, o in enumerate(outs):
            if k == r or k in found or getattr(o._data, "storage", None) is not st:
                continue
            geom = tuple(o.shape) + tuple(o.stride()) + (o.storage_offset(),)
            if not any(isinstance(g, SymInt) for g in geom):
                found[k] = ("output", r, tuple(o.shape), tuple(o.stride()), int(o.storage_offset()))
    return found


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
