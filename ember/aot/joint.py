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

**Dynamo's sizes** (``shape_env=`` and ``fake_inputs=``): a graph dynamo
captured with symbolic sizes is traced on fakes carrying *dynamo's* symbols,
in dynamo's ShapeEnv, instead of symbols of our own. Every decision the trace
takes on a size (a meta function's ``==``, an ``int()``) then lands in the
ShapeEnv whose guards dynamo compiles into the cache entry, so a call that
breaks one recompiles at the dynamo level; nothing is left unchecked. Size
values the graph computes (``sym_size``, ``operator.mul`` nodes) get their
SymInt in ``node.meta["sym_val"]`` so the graph compilers know them too (the
backward receives the saved ones as inputs).

**Activation checkpointing**: the nodes of a dynamo graph that ``ember.utils.checkpoint``
regions made carry ``meta["recompute"]`` / ``meta["checkpoint_region"]``; the graph then runs
node by node (``_RegionTagRunner``) and every joint-graph node its forward makes while a tagged
node runs gets the same tags, which the partitioner reads (``partition.py``). The backward's
nodes (made by the autograd engine afterwards) are not tagged.
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
from ..fx.interpreter import Interpreter
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
    # of another output: regenerated as views after each call so they alias as they do eagerly;
    # ("self", input position, None, None, None): the output is that input itself (a non-leaf
    # input that requires grad, returned; see ``mutated_grad_inputs``), returned as the caller's
    aliased_outputs: dict = field(default_factory=dict)
    # primal positions that do not require grad but whose in-place update does (``out.index_add_(0,
    # idx, y)`` with ``y`` requiring grad): their new values are the *last* forward outputs
    # (counted in ``num_outputs``, differentiable), which the runtime copies into the inputs with
    # grad mode on, so the inputs get the graph's autograd history as they do eagerly.
    # Also inputs that require grad and are *not leaves* (``a = x * 3``), written in place: the
    # traced function gets a copy of each (``_copy_with_history``), its gradients are those of
    # the value the input had at the call, and the copy's final value is the output copied into
    # the input afterwards, so ``a.grad_fn`` (CopyBackwards) leads through the compiled backward
    # to what produced both the old value and the update (torch's aot does the same)
    mutated_grad_inputs: List[int] = field(default_factory=list)
    # for each gradient output (in ``grad_inputs`` order): the tangents it is computed from, as
    # indices into the tangents (``diff_outputs`` order); None when not known. The runtime leaves
    # a gradient None when every tangent it reads is for an output the loss did not use, as the
    # eager engine never reaches such an input (see runtime ``_make_function_class``)
    grad_tangents: Optional[List[tuple]] = None
    # what a create_graph=True backward, which re-runs the function eagerly on the inputs it was
    # called with (runtime ``_eager_double_backward``), must account for: (why it cannot, or
    # None; the mutated input positions to give it copies of, so their in-place update -- batch
    # norm's running stats -- is not applied a second time); None when not known
    double_backward: Optional[tuple] = None


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
                inference: Optional[bool] = None, shape_env: Optional[ShapeEnv] = None,
                fake_inputs: Optional[Sequence[Tensor]] = None) -> JointGraph:
    """Trace ``fn(*example_inputs)`` and its backward (see the module docstring).

    An op whose output shape depends on data (``nonzero``, ``.item()``) cannot
    be traced on fake tensors: that raises :class:`AOTUnsupported` naming the
    op (``.op``). Dynamo never hands such a graph over: it traces on fake
    tensors itself and breaks the graph at that op."""
    from ..fx.fake_tensor import DataDependentOutputError
    if shape_env is not None:
        return _trace_shared(fn, example_inputs, decompositions, inference, shape_env, fake_inputs)
    if _has_region_tags(fn):
        fn = _RegionTagRunner.runner(fn)
    try:
        return _trace_joint(fn, example_inputs, decompositions, dynamic, inference)
    except DataDependentOutputError as e:
        err = AOTUnsupported(f"aot: cannot trace '{e.op}', whose output depends on tensor data; compile "
                             f"the code before and after it as separate graphs (a graph break)")
        err.op = e.op
        raise err from e


def _trace_shared(fn, example_inputs, decompositions, inference, env, fake_inputs) -> JointGraph:
    """Trace on fakes with the sizes of ``fake_inputs`` (dynamo's example values, same ShapeEnv).

    A failed trace leaves no guards behind (they would over-constrain the caller's entry)."""
    from ..fx.fake_tensor import DataDependentOutputError, is_fake
    from ..fx.experimental.symbolic_shapes import SymInt
    if fake_inputs is None or len(fake_inputs) != len(example_inputs):
        raise AOTUnsupported("aot: tracing with a caller's ShapeEnv needs one fake input per input")
    mode = FakeTensorMode(env)
    fakes = []
    for i, (t, f) in enumerate(zip(example_inputs, fake_inputs)):
        if not isinstance(t, Tensor) or not is_fake(f):
            raise AOTUnsupported(f"aot: input {i} has no fake example value")
        if any(isinstance(n, SymInt) for n in f.shape):
            # a fresh fake with the caller's symbolic sizes (its own storage: dynamo only makes
            # non-view, contiguous inputs symbolic, so no aliasing between inputs is lost)
            fk = make_fake(FakeArray(tuple(f.shape), f.dtype, tuple(f._data.estrides)), t.device)
            if t.requires_grad:
                fk.requires_grad_(True)
        else:
            fk = mode.from_tensor(t, leaf=True)
        fakes.append(fk)
    n_guards = len(env.guards)
    if hasattr(fn, "graph"):
        fn = _sym_scalar_runner(fn)
    try:
        joint = _trace_joint(fn, example_inputs, decompositions, True, inference, mode=mode, fakes=fakes)
    except BaseException as e:
        del env.guards[n_guards:]
        env._guard_set = set(env.guards)
        if isinstance(e, DataDependentOutputError):
            err = AOTUnsupported(f"aot: cannot trace '{e.op}', whose output depends on tensor data")
            err.op = e.op
            raise err from e
        raise
    _annotate_sym_vals(joint.gm)
    return joint


class _autocast_state:
    """``STATE.autocast`` is ``regions`` inside; what it was before, after."""

    def __init__(self, regions):
        self.regions = regions

    def __enter__(self):
        self.prev = STATE.autocast
        STATE.autocast = dict(self.regions) if self.regions else None

    def __exit__(self, *exc):
        STATE.autocast = self.prev
        return False


#: node meta keys of a dynamo graph that the joint-graph nodes it makes inherit
REGION_TAGS = ("recompute", "checkpoint_region")


def _has_region_tags(fn) -> bool:
    graph = getattr(fn, "graph", None)
    return graph is not None and any(k in n.meta for n in graph.nodes for k in REGION_TAGS)


def _active_tracer():
    """The make_fx tracer recording now (None in the probe run, which records nothing)."""
    from ..fx.experimental.proxy_tensor import DispatchTracer
    for mode in reversed(STATE.modes):
        if isinstance(mode, DispatchTracer):
            return mode
    return None


class _RegionTagRunner(Interpreter):
    """Runs a dynamo graph node by node; the operator nodes the joint trace records while a node
    with region tags runs get those tags (the tracer appends nodes at the end of its graph: the
    new ones are those after its last node before)."""

    @classmethod
    def runner(cls, gm):
        def run(*args):
            return cls(gm).run(*args)
        return run

    def run_node(self, n):
        tags = {k: n.meta[k] for k in REGION_TAGS if k in n.meta}
        tracer = _active_tracer() if tags else None
        if tracer is None:
            return super().run_node(n)
        last = next(iter(reversed(tracer.graph.nodes)), None)
        result = super().run_node(n)
        for made in reversed(tracer.graph.nodes):
            if made is last:
                break
            if made.op == "call_function":
                made.meta.update(tags)
        return result


def _sym_scalar_runner(gm):
    """Run dynamo's graph node by node so that a symbolic size passed as a *scalar operand*
    (``t * x.size(1)``, ``x.size(1) - t``), which ember's operators do not accept, still works.

    First it becomes a 0-d int64 tensor computed from the size (``ones(n).sum()``: exact, and
    it promotes like a Python int); the size stays symbolic. Where the operator refuses that
    too, the size is specialised to its value: ``int()`` records the guard in the shared
    ShapeEnv, so the entry is valid for that size only and another size recompiles at the
    dynamo level. Sizes passed as sizes (``view(s0, -1)``) are untouched. (Checkpoint region
    tags reach the joint graph as with ``_RegionTagRunner``.)"""
    from ..fx.experimental.symbolic_shapes import SymInt, _size_tensor

    def as_tensor(a):
        return _size_tensor(a, None) if isinstance(a, SymInt) else a

    def spec(a):
        return int(a) if isinstance(a, SymInt) else a

    def call(fn, args, kwargs):
        if not any(isinstance(a, SymInt) for a in list(args) + list(kwargs.values())):
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - refused the SymInt (TypeError, or it asked for data)
            pass
        try:
            return fn(*[as_tensor(a) for a in args], **{k: as_tensor(v) for k, v in kwargs.items()})
        except Exception:  # noqa: BLE001 - a tensor is not accepted there either
            pass
        return fn(*[spec(a) for a in args], **{k: spec(v) for k, v in kwargs.items()})

    class _Runner(_RegionTagRunner):
        def call_function(self, target, args, kwargs):
            return call(target, args, kwargs)

        def call_method(self, target, args, kwargs):
            self_obj, *rest = args
            return call(getattr(self_obj, target), rest, kwargs)

    def run(*args):
        return _Runner(gm).run(*args)
    return run


def _annotate_sym_vals(gm) -> None:
    """``meta["sym_val"]``: the SymInt (or int) each size node of ``gm`` computes.

    Evaluated from the placeholders' fake sizes; ``max``/``min`` stay symbolic
    (``sym_max``) rather than deciding an order (which would add a guard)."""
    from ..fx.experimental.symbolic_shapes import sym_max, sym_min
    vals = {}

    def val(a):
        if hasattr(a, "op") and hasattr(a, "users"):
            return vals.get(a, a.meta.get("val"))
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a

    for n in gm.graph.nodes:
        if n.op != "call_function" or getattr(n.target, "_ember_op", None) is not None or \
                "val" in n.meta or "tensor_meta" in n.meta:
            continue
        target = {max: sym_max, min: sym_min}.get(n.target, n.target)
        try:
            v = target(*[val(a) for a in n.args])
        except Exception:  # noqa: BLE001 - not a size computation; leave it alone
            continue
        if isinstance(v, int) or hasattr(v, "expr"):
            vals[n] = v
            n.meta["sym_val"] = v


def _trace_joint(fn, example_inputs, decompositions, dynamic, inference, mode=None, fakes=None) -> JointGraph:
    for i, t in enumerate(example_inputs):
        if not isinstance(t, Tensor):
            raise AOTUnsupported(f"aot: input {i} is a {type(t).__name__}; only tensor inputs are supported")
    if mode is None:
        mode = FakeTensorMode(ShapeEnv() if dynamic else None)
        fakes = [mode.from_tensor(t, symbolic=dynamic, source=f"primals_{i}", leaf=True)
                 for i, t in enumerate(example_inputs)]
    tracing = "symbolic" if dynamic else "fake"
    wants_grad = [t.requires_grad for t in example_inputs]
    if inference is None:
        inference = not (STATE.grad_enabled and any(wants_grad))

    # each run of the graph starts in the autocast state it was captured in: a graph that leaves
    # an ember.autocast block (its _set_autocast nodes switch STATE.autocast as they run) would
    # otherwise start the next run -- the recorded trace after the probe -- outside the region
    entry_regions = STATE.autocast

    # inputs that require grad and are not leaves (``x * 3``) may be written in place, as eagerly;
    # the function then runs on a copy of each (``_copy_with_history``), so the gradients stay
    # those of the value the input had when the graph was called (see ``mutated_grad_inputs``)
    from ..fx.fake_tensor import _has_history
    non_leaf = [w and not inference and f.dtype.is_floating_point and _has_history(t)
                for t, f, w in zip(example_inputs, fakes, wants_grad)]

    # a probe run (fake, nothing recorded) tells which outputs are differentiable
    with mode, _autocast_state(entry_regions):
        probe_in = [f.detach().requires_grad_(w) if f.dtype.is_floating_point else f.detach()
                    for f, w in zip(fakes, wants_grad)]
    # non-leaf inputs that are views of another one (``b`` and ``b[1:3]``): views of its copy
    views = _views_of_inputs(fakes, non_leaf)
    with mode, _autocast_state(entry_regions):
        with enable_grad() if not inference else _nullcontext():
            probe_in = _with_copies(probe_in, [i for i, nl in enumerate(non_leaf) if nl], views)
            versions = [p._version for p in probe_in]
            probe_out, is_tuple = _as_tuple(fn(*probe_in))
    # (a copy's storage stands for its input's: same strides, offset 0)
    aliased = _aliased_outputs(probe_out, fakes, {i: probe_in[i] for i, nl in enumerate(non_leaf) if nl})
    if not inference or STATE.grad_enabled:     # (the probe ran with grad mode on)
        aliased = _alias_autograd(aliased, probe_out, probe_in)
    # inputs that did not require grad and were written in place with values that do, and
    # non-leaf inputs that require grad written in place (a write into a view of another input
    # is a write into that input: the views share its copy's version counter)
    mut_grad = [i for i, (p, w) in enumerate(zip(probe_in, wants_grad))
                if (not w and p.requires_grad) or (non_leaf[i] and p._version != versions[i] and i not in views)] \
        if not inference else []
    copied = [i for i in mut_grad if non_leaf[i]]
    _refuse_aliased_copies(copied, fakes, views)
    n_user_out = len(probe_out)
    if mut_grad:
        probe_out = tuple(probe_out) + tuple(probe_in[i] for i in mut_grad)
    diff_outputs = [i for i, o in enumerate(probe_out) if o.requires_grad] if not inference else []
    grad_inputs = [i for i, w in enumerate(wants_grad) if w] if not inference else []
    if not diff_outputs:
        inference = True
        grad_inputs = []

    if inference:
        if mut_grad:
            probe_out = probe_out[:n_user_out]
            mut_grad = []

        def forward_only(primals):
            outs, _ = _as_tuple(fn(*primals))
            return outs
        with mode, _autocast_state(entry_regions):
            from ..autograd.grad_mode import no_grad
            with no_grad():
                gm = make_fx(forward_only, decomposition_table=decompositions, tracing_mode=tracing,
                             functionalize=True)(list(fakes))
        return JointGraph(gm, len(fakes), 0, len(probe_out), list(gm.meta["mutated_inputs"]), [], [],
                          is_tuple, mode.shape_env, True, aliased_outputs=aliased)

    tangents = [make_fake(FakeArray(tuple(probe_out[i].shape), probe_out[i].dtype), probe_out[i].device)
                for i in diff_outputs]

    def joint(primals, tangents):
        args = _with_copies(primals, copied, views)
        outs, _ = _as_tuple(fn(*args))
        outs = tuple(outs) + tuple(args[i] for i in mut_grad)
        diff = [outs[i] for i in diff_outputs]
        wrt = [primals[i] for i in grad_inputs]
        grads = _autograd.grad(diff, wrt, grad_outputs=list(tangents), allow_unused=True)
        return tuple(outs), tuple(grads)

    with mode, enable_grad(), _autocast_state(entry_regions):
        gm = make_fx(joint, decomposition_table=decompositions, tracing_mode=tracing,
                     functionalize=True)(list(fakes), tangents)
    return JointGraph(gm, len(fakes), len(tangents), len(probe_out), list(gm.meta["mutated_inputs"]),
                      grad_inputs, diff_outputs, is_tuple, mode.shape_env, False, aliased_outputs=aliased,
                      mutated_grad_inputs=mut_grad)


def _copy_with_history(t):
    """A copy of the primal ``t`` (same strides) that the traced function gets instead of it: not
    a leaf, so it can be written in place, and its gradients reach ``t`` (torch's aot does the
    same: gradients are taken with respect to the inputs as they were before any mutation)."""
    c = t.clone()
    if _symbolic(t) or tuple(c.stride()) == tuple(t.stride()) or \
            any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
        return c        # (an input whose elements share memory: values only, see _aliased_outputs)
    # a non-dense layout (``x[:, ::2]``): a copy with the very strides, so that outputs that are
    # views of the input are found as such
    from ..ops.misc_api import empty_strided
    return empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device).copy_(t)


def _symbolic(t) -> bool:
    from ..fx.experimental.symbolic_shapes import SymInt
    return any(isinstance(g, SymInt) for g in tuple(t.shape) + tuple(t.stride()))


def _views_of_inputs(fakes, non_leaf) -> dict:
    """Non-leaf inputs that share memory with another non-leaf input ``b`` which covers them all
    (contiguous, same dtype, concrete sizes): position -> (b's position, size, stride, offset
    relative to b). The function then gets views of ``b``'s copy for them (torch's aot makes a
    "synthetic base" likewise), so a write through any of them is seen by all, and its new
    value, copied into ``b``, reaches them as eagerly (they are views of it)."""
    groups = {}
    for i, f in enumerate(fakes):
        st = getattr(f._data, "storage", None)
        if st is not None:
            groups.setdefault(id(st), []).append(i)
    found = {}
    for members in groups.values():
        if len(members) < 2 or not all(non_leaf[i] for i in members) or \
                any(_symbolic(fakes[i]) for i in members):
            continue
        for b in members:
            base = fakes[b]
            if not base.is_contiguous():
                continue
            geoms = {}
            for m in members:
                if m == b:
                    continue
                v = fakes[m]
                off = int(v.storage_offset()) - int(base.storage_offset())
                if v.dtype is not base.dtype or off < 0 or \
                        not view_fits(v.shape, v.stride(), off, base.numel()):
                    break
                geoms[m] = (b, tuple(v.shape), tuple(v.stride()), off)
            else:
                found.update(geoms)
                break
    return found


def _with_copies(tensors, positions, views) -> list:
    """``tensors`` with a copy (``_copy_with_history``) at each of ``positions`` whose input is
    not a view of another (``views``) and, at each such view's position whose base is copied, the
    view of the base's copy."""
    out = list(tensors)
    bases = {views[m][0] for m in positions if m in views}
    for i in set(positions) - set(views) | bases:
        out[i] = _copy_with_history(tensors[i])
    for m, (b, size, stride, off) in views.items():
        if b in bases or b in positions:
            out[m] = out[b].as_strided(size, stride, off)
    return out


def _refuse_aliased_copies(copied, fakes, views=None) -> None:
    """A copied input (``_copy_with_history``) sharing memory with another input would not see
    the other's writes (nor they its): not supported, the graph runs eagerly. (Views of another
    input that is copied are made views of its copy: ``_views_of_inputs``.)"""
    views = views or {}
    for i in copied:
        st = getattr(fakes[i]._data, "storage", None)
        if st is None:
            continue
        for j, f in enumerate(fakes):
            if j in views or i in views:
                continue
            if j != i and getattr(f._data, "storage", None) is st:
                raise AOTUnsupported(f"aot: input {i} requires grad, is not a leaf and is written in place, "
                                     f"and it shares memory with input {j}: writing into such aliased "
                                     f"inputs is not supported by the compiled graph")


def _aliased_outputs(outs, fakes, stand_ins=None) -> dict:
    """Which outputs share an input's (fake) storage, and as what view of it.

    ``stand_ins``: input position -> the tensor the function got instead of that input (a copy
    with its strides at offset 0, see ``_copy_with_history``), whose storage stands for it.
    Sizes must be concrete: with symbolic sizes the output is returned as a
    fresh tensor (equal values, no aliasing)."""
    from ..fx.experimental.symbolic_shapes import SymInt
    found = {}
    stand_ins = stand_ins or {}
    for k, o in enumerate(outs):
        same = next((i for i, s in stand_ins.items() if o is s), None)
        if same is not None:
            # the input itself (written in place, or not): returned as the caller's tensor, as
            # eagerly and as torch does (``out is a``, its grad_fn that of the write-back)
            found[k] = ("self", same, None, None, None)
            continue
        st = getattr(o._data, "storage", None)
        if st is None:
            continue
        for i, f in enumerate(fakes):
            if i in stand_ins:
                if _symbolic(f) or _symbolic(stand_ins[i]) or tuple(stand_ins[i].stride()) != tuple(f.stride()):
                    continue        # (a copy laid out unlike its input: values only)
                f = stand_ins[i]
            if getattr(f._data, "storage", None) is st:
                geom = tuple(o.shape) + tuple(o.stride()) + (o.storage_offset(), f.storage_offset())
                if any(isinstance(g, SymInt) for g in geom) or o.dtype is not f.dtype:
                    break       # (a dtype view, Tensor.view(dtype): as_strided cannot regenerate it)
                found[k] = ("input", i, tuple(o.shape), tuple(o.stride()),
                            int(o.storage_offset()) - int(f.storage_offset()))
                break
    # outputs aliasing each other: views of an output that is its whole (contiguous) buffer,
    # regenerated from it. The view must lie inside that output: ``(v[0:3], v)`` returns a
    # contiguous prefix of v first, and v regenerated from it read past its end (garbage rows).
    # Larger outputs are tried as the base first.
    order = sorted(range(len(outs)), key=lambda r: -_concrete_numel(outs[r]))
    for r in order:
        base = outs[r]
        if r in found:
            continue
        st = getattr(base._data, "storage", None)
        if st is None or not base.is_contiguous() or base.storage_offset() != 0 or \
                any(isinstance(n, SymInt) for n in base.shape):
            continue
        for k, o in enumerate(outs):
            if k == r or k in found or getattr(o._data, "storage", None) is not st or o.dtype is not base.dtype:
                continue
            geom = tuple(o.shape) + tuple(o.stride()) + (o.storage_offset(),)
            if not any(isinstance(g, SymInt) for g in geom) and view_fits(o.shape, o.stride(), o.storage_offset(),
                                                                          base.numel()):
                found[k] = ("output", r, tuple(o.shape), tuple(o.stride()), int(o.storage_offset()))
    return found


def _alias_autograd(aliased, outs, srcs) -> dict:
    """Refine ``_aliased_outputs`` with the probe's autograd history (a probe run with grad mode
    on). The runtime regenerates an aliased output as ``as_strided`` of its source, whose
    grad_fn is the view's: right for a differentiable view, wrong for

    * an alias that does not require grad while its source does (``x.detach()``, a view made
      under ``no_grad``, ``(y, y.detach())``): regenerated under no_grad (kind ``*_nograd``),
      else it would require grad and pass gradients into the source;
    * an alias whose history goes through a custom ``autograd.Function`` (one returning its input
      as is, ``Id.apply(x)``), or that requires grad while its source does not: the view's
      backward would skip the function's own backward. Dropped: the compiled output (values,
      and the compiled backward, which traced the function's backward) is returned instead."""
    from ..autograd.function import BackwardCFunction
    from ..autograd.graph import AsStridedViewNode, gradient_edge
    refined = {}
    for k, entry in aliased.items():
        kind, i = entry[0], entry[1]
        if kind not in ("input", "output"):
            refined[k] = entry
            continue
        o = outs[k]
        src = srcs[i] if kind == "input" else outs[i]
        if not o.requires_grad:
            refined[k] = ((kind + "_nograd",) + tuple(entry[1:])) if src.requires_grad else entry
            continue
        target = gradient_edge(src)
        if target is None:
            continue        # requires grad, its source does not: not a plain view of it
        edge = gradient_edge(o)
        node = edge[0] if edge is not None else None
        keep = True
        for _ in range(10000):
            if node is None or node is target[0]:
                break
            if isinstance(node, BackwardCFunction):
                keep = False
                break
            op = getattr(type(node), "_op", None)
            if not (isinstance(node, AsStridedViewNode) or (op is not None and getattr(op, "is_view", False))):
                break       # (another history, e.g. an in-place write into the view: as before)
            nxt = node.next_edges[0] if node.next_edges else None
            node = nxt[0] if nxt is not None else None
        if keep:
            refined[k] = entry
    return refined


def _concrete_numel(t) -> int:
    from ..fx.experimental.symbolic_shapes import SymInt
    n = 1
    for d in t.shape:
        if isinstance(d, SymInt):
            return -1
        n *= int(d)
    return n


def view_fits(size, stride, offset, numel) -> bool:
    """Every element of the strided view ``(size, stride, offset)`` lies in ``[0, numel)``."""
    if any(int(n) == 0 for n in size):
        return True
    lo = hi = int(offset)
    for n, st in zip(size, stride):
        step = (int(n) - 1) * int(st)
        lo, hi = (lo + step, hi) if step < 0 else (lo, hi + step)
    return lo >= 0 and hi < int(numel)


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
