"""``make_fx``: trace any callable through ember's dispatcher into an
op-level FX graph.

How it works. ``make_fx(fn)(*example_inputs)`` pushes a dispatch mode (a
:class:`DispatchTracer`) on ``STATE.modes`` and calls ``fn`` on the real
example inputs. Every op that reaches the mode stack is run for real (its
kernel, or the next mode down) and recorded as one ``call_function`` node
whose target is the op's public binding (``ember.mul``; in-place ops as
their ``_`` variant, ``ember.add_``). Each output tensor is remembered by
identity together with its node, so later ops that read it get the node as
argument. The result is a :class:`~ember.fx.GraphModule`. Called from user
code without a ``decomposition_table``, the graph's op nodes are then
rewritten to the aten overloads torch's make_fx records
(``ember.ops.aten.mul.Tensor(x, 2)``, ``aten.sum.dim_IntList(t, [0])``; see
``ember.ops._aten_convert``); ember's own callers and prims traces keep
the bindings.

Why a mode and not proxies: the autograd key sits *above* the mode stack,
and the backward engine dispatches the derivative formulas through the same
dispatcher. So a function that calls ``loss.backward()`` or
``ember.autograd.grad`` is recorded together with its backward: the graph
of a training step is the joint forward+backward graph, made of plain ops
and runnable without autograd.

What becomes what in the graph:

* every tensor among the inputs (positional arguments, flattened through
  nested lists, tuples and dicts) is a placeholder, in that order; the
  GraphModule is called with the flat tensors, ``gm(*flat_tensors)``.
  Non-tensor arguments are baked into the graph as constants (the trace is
  specialised to them, as to the shapes);
* a tensor an op reads that was neither an input nor produced inside the
  trace (a global, a module parameter, the engine's seed gradient of a
  scalar ``backward()``) is lifted as a ``get_attr`` constant
  ``_tensor_constant0``, ``_tensor_constant1``, ... held by the GraphModule;
* a tensor that shares its backend array with a traced tensor (the engine
  unpacking a saved tensor, ``detach()``) stands for that tensor's node;
* op outputs that are tuples get one ``operator.getitem`` node per tensor;
* the output node mirrors the structure ``fn`` returned.

``decomposition_table`` maps ops (an ``OpDef``, its binding such as
``ember.sub``, or its name) to a Python function taking the op's arguments;
the function runs with the tracer still active, so the ops it calls are
recorded instead of the op itself. Returning ``NotImplemented`` records the
op whole after all, and so does a call of the op from inside its own
decomposition.

Composite ops (implemented in other ember ops) decompose on their own. Name
them in ``keep_composites`` to record them whole instead; that holds where no
gradient flows through the call: under autograd the backward refers to the
composite's inner values, so there the composite is still decomposed.

What the trace cannot see: work done outside the dispatcher. A tensor made
from raw data (``ember.tensor``) is a constant of the graph (random draws are
not: ``rand``/``randn``/``randint`` fill through the ``_random`` op, and
``randperm``/``multinomial`` are ops), and a write
into a tensor's backend array that bypasses the ops (``x._data[...] = ...``)
is missing from it. Python control flow and ``.item()`` are specialised to
the example inputs, as are all shapes.

``tracing_mode``:

* ``"real"`` runs every op for real on the example inputs;
* ``"fake"`` replaces the example tensors by fake tensors
  (``ember.fx.fake_tensor``): ops run their meta functions only, so tracing
  costs no arithmetic, and an op whose output depends on data (``nonzero``,
  ``.item()``) raises ``DataDependentOutputError``;
* ``"symbolic"`` is ``"fake"`` with every input size a ShapeEnv symbol
  (sizes 0 and 1 stay concrete). Sizes an op receives as arguments
  (``view(x, [s0 * s1])``) are computed in the graph from ``sym_size`` nodes
  of the placeholders, so the graph runs on any sizes that satisfy the
  guards, ``gm.shape_env.guards``.

The fake modes put each node's fake value in ``node.meta['val']``.

``functionalize=True`` records in-place ops as their functional versions
(see ``DispatchTracer._functional_inplace``): the graph is free of mutation,
its output becomes ``(fn's output, (new values of mutated inputs...))`` and
``gm.meta['mutated_inputs']`` lists the flat input positions to write back.
"""
from __future__ import annotations

import functools
import inspect
import operator
import sys
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from ..._state import STATE
from ...ops import registry as _reg
from ...tensor import Tensor
from ..graph import Graph
from ..node import Node
from ..passes.shape_prop import extract_tensor_metadata
from ..proxy import _normalize_op_args
from .symbolic_shapes import SymInt

__all__ = ["make_fx", "DispatchTracer", "sym_size"]

_TRACING_MODES = ("real", "fake", "symbolic")


def make_fx(fn: Callable[..., Any], decomposition_table: Optional[Dict[Any, Callable[..., Any]]] = None,
            tracing_mode: str = "real", *, keep_composites: Iterable[Any] = (),
            functionalize: bool = False) -> Callable[..., Any]:
    """Return a function that, called with example inputs, traces ``fn`` on
    them and returns a GraphModule of the ops it ran (see the module
    docstring)."""
    if tracing_mode not in _TRACING_MODES:
        raise ValueError(f"make_fx: unknown tracing_mode {tracing_mode!r}; expected one of {_TRACING_MODES}")
    decomps = _normalize_table(decomposition_table or {})
    keep = frozenset(_op_name(k) for k in keep_composites)
    # A user's graph carries torch's aten overloads as targets (``aten.sum.dim_IntList``); ember's
    # own pipelines (aot's joint graphs, the prims decompositions, draft_export) call make_fx from
    # inside the package and keep the bindings their consumers are keyed by. A trace through a
    # decomposition table is a prims graph for ember's compiler (``ember.prims.table``): the ops
    # it keeps whole stay bindings too, as the inductor's lowering expects them.
    aten_targets = not _called_from_ember(sys._getframe(1)) and not decomposition_table

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        if tracing_mode == "real":
            gm = DispatchTracer(decomps, keep, functionalize=functionalize, torch_ir=aten_targets).trace(fn, args)
        else:
            gm = _trace_fake(fn, args, decomps, keep, symbolic=tracing_mode == "symbolic",
                             functionalize=functionalize, torch_ir=aten_targets)
        if aten_targets:
            to_aten_targets(gm)
            _name_like_torch(gm, fn, args)
        return gm

    return wrapped


_EMBER_DIR = None


def _called_from_ember(frame: Any) -> bool:
    """Whether ``frame`` (make_fx's caller) is ember's own code: its module is ``ember`` or
    ``ember.*`` *and* its source file lies inside ember's package directory. The module name
    alone is not enough: a user's code may run under such a name (``runpy.run_path(...,
    run_name="ember.models")``, an ``exec`` with ``__name__`` set) and must still get the
    user's graph."""
    global _EMBER_DIR
    name = frame.f_globals.get("__name__", "") or ""
    if not (name == "ember" or name.startswith("ember.")):
        return False
    if _EMBER_DIR is None:
        import os
        import ember
        _EMBER_DIR = os.path.dirname(os.path.realpath(ember.__file__)) + os.sep
    import os
    return os.path.realpath(frame.f_code.co_filename).startswith(_EMBER_DIR)


def to_aten_targets(gm: Any) -> Any:
    """Rewrite ``gm``'s op nodes from ember bindings to the aten overloads torch records
    (``ember.sum(x, 1)`` -> ``ember.ops.aten.sum.dim_IntList(x, [1])``; ember-only ops and prims
    stay), then regenerate its code. Returns ``gm``."""
    from ...ops._aten_convert import convert_graph
    if convert_graph(gm.graph):
        gm.recompile()
    return gm


def _torch_placeholder_names(fn: Callable[..., Any], args: Tuple[Any, ...]) -> list:
    """The names torch's make_fx gives the placeholders of ``fn(*args)``, one per tensor leaf in
    ember's placeholder order: ``<argument>_<k>``, ``k`` counting the argument's leaves from 1
    (``f(x, y)`` -> ``x_1``, ``y_1``; ``f(xs)`` with two tensors -> ``xs_1``, ``xs_2``). A module
    or a ``*args`` function has no names torch reads: ``arg0_1``, ``arg1_1``, ..."""
    from ...nn import Module
    if isinstance(fn, Module):
        names = [f"arg{i}" for i in range(len(args))]
    else:
        names = _arg_names(fn, len(args))
    out = []
    for a, name in zip(args, names):
        count = [0]

        def walk(v):
            if isinstance(v, Tensor):
                count[0] += 1
                out.append(f"{name}_{count[0]}")
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif v is not None:
                count[0] += 1           # a non-tensor leaf is a placeholder of torch's too
        walk(a)
    return out


def _name_like_torch(gm: Any, fn: Callable[..., Any], args: Tuple[Any, ...]) -> Any:
    """Give ``gm``'s nodes torch's make_fx names (placeholders ``x_1``, op calls after their
    overload packet: ``max_1`` for ``aten.max.dim``), then regenerate its code."""
    from ...ops._aten_convert import rename_like_torch
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = _torch_placeholder_names(fn, args)
    if len(names) != len(phs):
        names = [n.name for n in phs]
    if rename_like_torch(gm.graph, dict(zip(phs, names))):
        gm.recompile()
    return gm


def to_binding_targets(gm: Any) -> Any:
    """The reverse of :func:`to_aten_targets`: aten-overload nodes back to ember binding calls."""
    from ...ops._aten_convert import graph_to_bindings
    if graph_to_bindings(gm.graph):
        gm.recompile()
    return gm


def _trace_fake(fn, args, decomps, keep, symbolic, functionalize=False, torch_ir=False):
    """Trace on fake twins of the example tensors (symbolic sizes when asked).

    A FakeTensorMode sits below the tracer on the mode stack, so every op the
    tracer redispatches runs its meta function. Fake inputs are passed through;
    real ones are replaced by fakes (named after their placeholders, the
    sources of their size symbols). The GraphModule gets ``shape_env`` (None
    unless symbolic) and every node ``meta['val']``, its fake value."""
    from ..fake_tensor import FakeTensorMode, is_fake
    from .symbolic_shapes import ShapeEnv

    fake_modes = [m for m in STATE.modes if isinstance(m, FakeTensorMode)]
    mode = fake_modes[-1] if fake_modes else FakeTensorMode(ShapeEnv() if symbolic else None)
    if symbolic and mode.shape_env is None:
        mode.shape_env = ShapeEnv()
    names = _arg_names(fn, len(args))

    def fakeify(a, name):
        if isinstance(a, Tensor):
            return a if is_fake(a) else mode.from_tensor(a, symbolic=symbolic, source=name)
        if isinstance(a, (list, tuple)):
            items = [fakeify(x, f"{name}_{i}") for i, x in enumerate(a)]
            return type(a)(*items) if hasattr(a, "_fields") else type(a)(items)
        if isinstance(a, dict):
            return {k: fakeify(v, f"{name}_{k}") for k, v in a.items()}
        return a

    fargs = tuple(fakeify(a, n) for a, n in zip(args, names))
    pushed = not fake_modes
    if pushed:
        mode.__enter__()
    try:
        gm = DispatchTracer(decomps, keep, shape_env=mode.shape_env,
                            functionalize=functionalize, torch_ir=torch_ir).trace(fn, fargs)
    finally:
        if pushed:
            mode.__exit__(None, None, None)
    gm.shape_env = mode.shape_env
    return gm


def sym_size(t: Tensor, dim: int) -> Any:
    """``t.shape[dim]``: how a traced graph reads a symbolic size off its inputs."""
    return t.shape[dim]


_SYM_BINOPS = None


def _sym_binops():
    global _SYM_BINOPS
    if _SYM_BINOPS is None:
        import sympy
        _SYM_BINOPS = {sympy.Add: operator.add, sympy.Mul: operator.mul}
    return _SYM_BINOPS


def _as_op(key: Any) -> Any:
    if isinstance(key, _reg.OpDef):
        return key
    op = getattr(key, "_ember_op", None)
    if op is not None:
        return op
    if isinstance(key, str):
        op = _reg.OPS.get(key)
        if op is not None:
            return op
        raise KeyError(f"make_fx: no ember op named {key!r}")
    raise TypeError(f"make_fx: expected an ember op (OpDef, binding or name), got {key!r}")


def _op_name(key: Any) -> str:
    return _as_op(key).name


def _normalize_table(table: Dict[Any, Callable[..., Any]]) -> Dict[Any, Callable[..., Any]]:
    out = {}
    for k, fn in table.items():
        if not callable(fn):
            raise TypeError(f"make_fx: the decomposition for {k!r} is not callable")
        out[_as_op(k)] = fn
    return out


def _shares_storage(a: Tensor, b: Tensor) -> bool:
    da, db = a._data, b._data
    sa, sb = getattr(da, "storage", None), getattr(db, "storage", None)
    if sa is not None or sb is not None:       # fake tensors: one FakeStorage per memory
        return sa is not None and sa is sb
    import numpy as np
    return isinstance(da, np.ndarray) and isinstance(db, np.ndarray) and np.may_share_memory(da, db)


def _mark_decomposed_view(op: Any, args: Tuple[Any, ...], out: Any) -> None:
    """A view op's decomposition (``view``/``alias`` -> ``prims.reshape``, which is not
    tagged view because it may copy) returns tensors that alias the source in memory
    but are not marked as its views; functionalization finds a mutated view's base
    through ``_base``, so without the mark an in-place op on the view was recorded on
    a detached value and never reached the base (a silently lost write). Outputs
    that do alias the source are marked here, as the kernel path would mark them."""
    from ...ops.registry import _mark_view
    src = args[op.tensor_pos[0]]
    if not isinstance(src, Tensor):
        return
    base = src._base if src._base is not None else src
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, Tensor) and o is not src and o._base is not base and _shares_storage(o, base):
            _mark_view(o, src)


def _requires_grad(op: Any, args: Tuple[Any, ...]) -> bool:
    for i in op.tensor_pos:
        a = args[i]
        if isinstance(a, Tensor) and a._requires_grad:
            return True
    for i in op.list_pos:
        for a in args[i]:
            if isinstance(a, Tensor) and a._requires_grad:
                return True
    return False


def _arg_names(fn: Callable[..., Any], n: int) -> list:
    names = []
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        else:
            break
    names = names[:n]
    names += [f"arg{i}" for i in range(len(names), n)]
    return names


def _class_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return name if name.isidentifier() else "GraphModule"


class DispatchTracer:
    """The dispatch mode behind :func:`make_fx`; one instance per trace."""

    def __init__(self, decomposition_table: Optional[Dict[Any, Callable[..., Any]]] = None,
                 keep_composites: Iterable[str] = (), shape_env: Any = None,
                 functionalize: bool = False, torch_ir: bool = False) -> None:
        self.graph = Graph()
        # a user's graph (see ``make_fx``): ember's Python factories are recorded whole, as the
        # aten ops torch records (``record_python``)
        self.torch_ir = torch_ir
        self.functionalize = functionalize
        # functionalization: id(base) -> how many times it was mutated; id(view) -> the
        # base's count when the view's node was made (a stale view is regenerated)
        self._base_gen: Dict[int, int] = {}
        self._view_gen: Dict[int, int] = {}
        # id(hidden base) -> the input that is a view of it and receives writes through it
        self._hidden_owner: Dict[int, Tensor] = {}
        self._inputs: list = []
        self.shape_env = shape_env
        # sympy symbol -> graph node computing it (a sym_size of a placeholder)
        self._sym_nodes: Dict[Any, Node] = {}
        self._sym_sources: list = []
        self.decomps = dict(decomposition_table or {})
        self.keep = frozenset(keep_composites)
        # id(tensor) -> (tensor, node); the tensor is held so its id stays valid
        self._by_id: Dict[int, Tuple[Tensor, Node]] = {}
        # id(backend array) -> (array, dtype, node): aliases made outside the
        # dispatcher (saved-tensor unpacking, detach) share the array object
        self._by_data: Dict[int, Tuple[Any, Any, Node]] = {}
        self.constants: Dict[str, Tensor] = {}
        # ops whose decomposition is running: a decomposition may call its
        # own op (with other arguments), which is then recorded whole
        self._decomposing: set = set()

    # -- the entry point ------------------------------------------------------
    def trace(self, fn: Callable[..., Any], args: Tuple[Any, ...]) -> Any:
        from ..graph_module import GraphModule

        for name, a in zip(_arg_names(fn, len(args)), args):
            self._placeholders(a, name)
        modes = STATE.modes
        modes.append(self)
        if self.torch_ir:
            from ... import _torch_function as _tf
            _tf.push_recorder(self)
        try:
            out = fn(*args)
        finally:
            if self.torch_ir:
                _tf.pop_recorder(self)
            if modes and modes[-1] is self:
                modes.pop()
            else:
                if self in modes:
                    modes.remove(self)
                raise RuntimeError("make_fx: the dispatch mode stack was left unbalanced by the traced "
                                   "function (a mode was pushed or popped without being restored)")
        result = self._map_value(out)
        if self.torch_ir:
            result = _plain_structseqs(result)
        mutated = []
        if self.functionalize:
            new_values = []
            for i, (t, node) in enumerate(self._inputs):
                cur = self._lookup(t)
                if cur is not node:
                    mutated.append(i)
                    new_values.append(cur)
            result = (result, tuple(new_values))
        self.graph.output(result)
        gm = GraphModule(dict(self.constants), self.graph, class_name=_class_name(fn))
        gm.meta["mutated_inputs"] = mutated
        return gm

    def _placeholders(self, a: Any, name: str) -> None:
        if isinstance(a, Tensor):
            node = self.graph.placeholder(name)
            node.meta["tensor_meta"] = extract_tensor_metadata(a)
            if a._fake:
                node.meta["val"] = a
            if self._lookup(a) is None:
                self._track(a, node)
            self._inputs.append((a, node))
            if self.shape_env is not None:
                self._sym_sources.append((a, node))
        elif isinstance(a, (list, tuple)):
            for i, x in enumerate(a):
                self._placeholders(x, f"{name}_{i}")
        elif isinstance(a, dict):
            for k, x in a.items():
                self._placeholders(x, f"{name}_{k}")

    # -- tensor <-> node ---------------------------------------------------------
    def _track(self, t: Tensor, node: Node) -> None:
        self._by_id[id(t)] = (t, node)
        data = t._data
        self._by_data[id(data)] = (data, t.dtype, node)

    def _lookup(self, t: Tensor) -> Optional[Node]:
        if self._base_gen and t._base is not None:
            gen = self._base_gen.get(id(t._base), 0)
            if gen != self._view_gen.get(id(t), 0):
                return self._regenerate_view(t, gen)
        e = self._by_id.get(id(t))
        if e is not None and e[0] is t:
            return e[1]
        data = t._data
        d = self._by_data.get(id(data))
        if d is not None and d[0] is data and d[1] is t.dtype:
            self._by_id[id(t)] = (t, d[2])
            return d[2]
        return None

    # -- functionalization ---------------------------------------------------------------
    def _functional_inplace(self, op: Any, args: Tuple[Any, ...]) -> Any:
        """Record in-place ``op`` as its functional op, then rebind ``self`` to the result.

        The mutation still happens below the tracer (real data is written, a fake
        tensor's version bumps), so the traced program behaves as it would eagerly;
        the graph, though, only holds functional ops. A mutated view also
        rewrites its base (an ``index_put`` of the view's elements into the
        flattened base), and views of a mutated base made earlier are
        regenerated from the new base (``as_strided``) when next read."""
        target = args[0]
        base = target._base
        owner = None
        if base is not None and self._by_id.get(id(base), (None,))[0] is not base and base.dtype is not target.dtype:
            raise NotImplementedError(
                f"functionalization: {op.name} through a dtype view (Tensor.view(dtype)) of a view input "
                f"of the graph is not supported")
        if base is not None and self._by_id.get(id(base), (None,))[0] is not base:
            # the base is no value of the trace: the target is (a view of) an input that is
            # itself a view -- a transposed or sliced argument -- whose base is outside the
            # graph. The write goes into that input instead (see ``_write_into_owner``).
            owner = self._owning_input(base, op)
            if owner is None and base._fake:
                # nothing of the trace holds the base's elements: as a graph constant it
                # would hold no data (a fake tensor) -- the write would land in garbage
                raise NotImplementedError(
                    f"functionalization: {op.name} on a view of a tensor outside the graph that no "
                    f"input of the graph holds is not supported")
        new = self.__ember_dispatch__(op.functional, args)
        if new.dtype != target.dtype:
            new = self._with_mode(lambda x: x.to(target.dtype), new)
        if tuple(new.shape) != tuple(target.shape):
            new = self._with_mode(lambda x: x.expand(tuple(target.shape)).clone(), new)
        self._redispatch(op, args)          # the real effect, unrecorded
        node = self._node_of(new)
        if owner is not None:
            if target is not owner:
                self._rebind(owner, self._node_of(self._write_into_owner(owner, target, new)))
            self._hidden_owner[id(base)] = owner
            gen = self._base_gen[id(base)] = self._base_gen.get(id(base), 0) + 1
            self._view_gen[id(owner)] = self._view_gen[id(target)] = gen
        elif base is not None:
            new_base = self._write_view_into_base(base, target, new)
            self._rebind(base, self._node_of(new_base))
            self._base_gen[id(base)] = self._base_gen.get(id(base), 0) + 1
            self._view_gen[id(target)] = self._base_gen[id(base)]
        else:
            self._base_gen[id(target)] = self._base_gen.get(id(target), 0) + 1
        self._rebind(target, node)
        return target

    def _owning_input(self, base: Tensor, op: Any) -> Optional[Tensor]:
        """The one input of the trace that is a view of ``base`` (a tensor outside the graph),
        or None. Two such inputs may share elements, and a write through one would have to
        show in the other: refused."""
        owners = {id(t): t for t, _ in self._inputs if t._base is base}
        if len(owners) > 1:
            raise NotImplementedError(
                f"functionalization: {op.name} on a view of a tensor that several inputs of the graph are "
                f"views of (e.g. f(a[0], a[1])) is not supported")
        return next(iter(owners.values()), None)

    @staticmethod
    def _element_offsets(t: Tensor) -> Any:
        """Storage offset of each of ``t``'s elements, in ``t``'s logical (row-major) order."""
        import numpy as np
        shape, strides = tuple(t.shape), tuple(t.stride())
        if any(isinstance(x, SymInt) for x in shape + strides + (t.storage_offset(),)):
            raise NotImplementedError("functionalization: an in-place op on a view of an input that is "
                                      "itself a view, with symbolic sizes, is not supported yet")
        offs = np.full(shape, int(t.storage_offset()), dtype=np.int64)
        for d, (n, st) in enumerate(zip(shape, strides)):
            offs = offs + (np.arange(n, dtype=np.int64) * st).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
        return offs.reshape(-1)

    def _owner_positions(self, owner: Tensor, view: Tensor) -> Tensor:
        """For each element of ``view`` (a view of the same storage as input ``owner``), its flat
        logical index in ``owner``: an int64 tensor for ``take``/``put``."""
        import numpy as np
        from ... import types as _t
        from ...tensor import _make
        own, offs = self._element_offsets(owner), self._element_offsets(view)
        order = np.argsort(own, kind="stable")
        srt = own[order]
        if srt.size > 1 and (srt[1:] == srt[:-1]).any():
            raise NotImplementedError("functionalization: an in-place op on a view of an input whose "
                                      "elements overlap (an expanded argument) is not supported")
        pos = np.searchsorted(srt, offs).clip(0, max(srt.size - 1, 0))
        if offs.size and (srt.size == 0 or (srt[pos] != offs).any()):
            raise NotImplementedError("functionalization: an in-place op on a view reaching outside the "
                                      "input it was made from (as_strided past the argument) is not supported")
        return _make(order[pos].astype(np.int64), owner.device, _t.int64)

    def _write_into_owner(self, owner: Tensor, view: Tensor, new: Tensor) -> Tensor:
        """``owner``'s new value: its elements that ``view`` covers replaced by ``new``."""
        from ...ops import api
        index = self._owner_positions(owner, view)
        return self._with_mode(lambda o, v: api.put(o, index, v.reshape(-1)), owner, new)

    def _rebind(self, t: Tensor, node: Node) -> None:
        self._by_id[id(t)] = (t, node)
        data = t._data
        self._by_data[id(data)] = (data, t.dtype, node)

    def _write_view_into_base(self, base: Tensor, view: Tensor, new: Tensor) -> Tensor:
        import numpy as np
        from ...ops import api
        from ... import types as _t
        shape, strides = tuple(view.shape), tuple(view.stride())
        symbolic = any(isinstance(x, SymInt) for x in shape + strides + tuple(base.shape)
                       + (view.storage_offset(), base.storage_offset()))
        if symbolic and view.dtype is not base.dtype:
            raise NotImplementedError("functionalization: an in-place op on a dtype view (Tensor.view(dtype)) "
                                      "of a tensor with symbolic sizes is not supported")
        if not base.is_contiguous():
            raise NotImplementedError("functionalization: an in-place op on a view of a non-contiguous tensor "
                                      "is not supported yet")
        view_off = int(view.storage_offset())
        if view.dtype is not base.dtype:
            # a dtype view (Tensor.view(dtype)): its geometry and new values in base elements
            shape, strides, view_off = _in_base_elements(view, base)
            new = self._with_mode(lambda v: v.contiguous().view(base.dtype), new)
        numel = 1
        for n in shape:
            numel *= n
        off = view_off - base.storage_offset() if symbolic else view_off - int(base.storage_offset())
        if off == 0 and numel == base.numel() and _contiguous(shape, strides):
            # the view is all of the base in its order (x.detach(), x.data, x.view(-1)): the new
            # values are the new base, reshaped (not an index_put of every element)
            if tuple(new.shape) == tuple(base.shape):
                return new
            return self._with_mode(lambda b, v: v.reshape(b.shape), base, new)
        if symbolic:
            return self._with_mode(lambda b, v: _put_strided(b, v, shape, strides, off), base, new)
        idx = np.full(shape, off, dtype=np.int64)
        for d, (n, st) in enumerate(zip(shape, strides)):
            r = np.arange(n, dtype=np.int64) * st
            idx = idx + r.reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
        from ...tensor import _make
        index = _make(idx.reshape(-1), base.device, _t.int64)

        def write(b, v):
            flat = b.reshape(-1)
            return api.index_put(flat, (index,), v.reshape(-1), False).reshape(b.shape)
        return self._with_mode(write, base, new)

    def _regenerate_view(self, t: Tensor, gen: int) -> Node:
        from ...ops import api
        base = t._base
        owner = self._hidden_owner.get(id(base))
        if owner is not None:
            # a view of an input's hidden base: gathered from that input's current value
            index = self._owner_positions(owner, t)
            shape = tuple(t.shape)
            v = self._with_mode(lambda o: api.take(o, index).reshape(shape), owner)
            node = self._node_of(v)
            self._rebind(t, node)
            self._view_gen[id(t)] = gen
            return node
        if t.dtype is not base.dtype:
            # a dtype view (Tensor.view(dtype)): as_strided in the base's elements, then viewed
            shape, strides, t_off = _in_base_elements(t, base)
            off = t_off - base.storage_offset()
            v = self._with_mode(lambda b: api.as_strided(b, shape, strides, off).view(t.dtype), base)
        else:
            off = t.storage_offset() - base.storage_offset()
            v = self._with_mode(lambda b: api.as_strided(b, tuple(t.shape), tuple(t.stride()), off), base)
        node = self._by_id[id(v)][1]
        self._rebind(t, node)
        self._view_gen[id(t)] = gen
        return node

    def _node_of(self, t: Tensor) -> Node:
        node = self._lookup(t)
        if node is None:
            name = f"_tensor_constant{len(self.constants)}"
            self.constants[name] = t
            node = self.graph.get_attr(name)
            node.meta["tensor_meta"] = extract_tensor_metadata(t)
            self._track(t, node)
        return node

    def _map_value(self, a: Any) -> Any:
        if isinstance(a, Tensor):
            return self._node_of(a)
        if isinstance(a, SymInt):
            return self._sym_node(a.expr)
        if isinstance(a, tuple):
            t = tuple(self._map_value(x) for x in a)
            return type(a)(*t) if hasattr(a, "_fields") else t
        if isinstance(a, list):
            return [self._map_value(x) for x in a]
        if isinstance(a, dict):
            return {k: self._map_value(v) for k, v in a.items()}
        return a

    def _sym_node(self, expr: Any) -> Any:
        """A node computing size expression ``expr`` from the placeholders' sizes.

        Symbols come from ``sym_size(placeholder, dim)`` (the first input
        dimension carrying them); sums, products, floor division and modulo
        become ``operator`` calls, so the graph recomputes every size from its
        actual inputs when run on new shapes."""
        import sympy
        if expr.is_Integer:
            return int(expr)
        hit = self._sym_nodes.get(expr)
        if hit is not None:
            return hit
        if expr.is_Symbol:
            for t, node in self._sym_sources:
                for i, sz in enumerate(t.shape):
                    if isinstance(sz, SymInt) and sz.expr == expr:
                        n = self.graph.call_function(sym_size, (node, i))
                        self._sym_nodes[expr] = n
                        return n
            raise RuntimeError(f"make_fx: size symbol {expr} does not come from any input")
        binop = _sym_binops().get(type(expr))
        if binop is not None:
            args = list(expr.args)
            # put numbers last so `s0*2` reads naturally and ints stay ints
            args.sort(key=lambda e: e.is_number)
            acc = self._sym_node(args[0])
            for e in args[1:]:
                if e.is_Rational and not e.is_Integer:
                    raise RuntimeError(f"make_fx: cannot compute non-integer size expression {expr}")
                acc = self.graph.call_function(binop, (acc, self._sym_node(e)))
        elif isinstance(expr, sympy.floor):
            num, den = sympy.together(expr.args[0]).as_numer_denom()
            acc = self.graph.call_function(operator.floordiv, (self._sym_node(sympy.expand(num)),
                                                              self._sym_node(den)))
        elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            acc = self.graph.call_function(operator.pow, (self._sym_node(expr.base), int(expr.exp)))
        elif isinstance(expr, sympy.Mod):
            acc = self.graph.call_function(operator.mod, tuple(self._sym_node(e) for e in expr.args))
        elif isinstance(expr, (sympy.Max, sympy.Min)):
            fn = max if isinstance(expr, sympy.Max) else min
            acc = self.graph.call_function(fn, tuple(self._sym_node(e) for e in expr.args))
        else:
            raise RuntimeError(f"make_fx: cannot express size {expr} in the graph")
        self._sym_nodes[expr] = acc
        return acc

    # -- Python-level calls (user graphs) ---------------------------------------------
    def record_python(self, func: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """One node for a call of ember's Python factory ``func`` (``zeros_like``, ``arange``,
        ...: see ``_factory_calls``) with torch's overload and arguments; the function itself
        runs below this tracer. NotImplemented where torch records something else."""
        from ._factory_calls import overload_for, torch_call
        name = getattr(func, "__name__", "")
        r = torch_call(name, args, kwargs)
        if r is None:
            return NotImplemented
        overload, targs, tkwargs = r
        target = overload_for(name, overload)
        modes = STATE.modes
        modes.pop()
        try:
            out = func(*args, **kwargs)
        finally:
            modes.append(self)
        if not isinstance(out, Tensor):
            return out
        node = self.graph.call_function(target, self._map_value(tuple(targs)), self._map_value(dict(tkwargs)))
        node.meta["tensor_meta"] = extract_tensor_metadata(out)
        if out._fake:
            node.meta["val"] = out
        self._track(out, node)
        return out

    def record_detach(self, t: Tensor) -> Optional[Tensor]:
        """``t.detach()`` as torch records it (``aten.detach.default``); the alias itself is made
        below this tracer. None (detach as before: the alias stands for ``t``'s node) under
        functionalization or for a tensor the trace does not know."""
        if self.functionalize:
            return None
        src = self._lookup(t)
        if src is None:
            return None
        from ._factory_calls import overload_for
        modes = STATE.modes
        modes.pop()
        try:
            out = t.detach()
        finally:
            modes.append(self)
        node = self.graph.call_function(overload_for("detach", "default"), (src,))
        node.meta["tensor_meta"] = extract_tensor_metadata(out)
        if out._fake:
            node.meta["val"] = out
        # by identity only: other tensors sharing the array (the engine's saved ``t``) stay ``t``
        self._by_id[id(out)] = (out, node)
        return out

    def _where_scalars(self, cond: Tensor, a: Any, b: Any) -> Tensor:
        """``where`` with a Python number for ``self`` or ``other`` as torch's make_fx records it
        (its ``where.ScalarOther`` ... are composite): each number a ``scalar_tensor`` of the
        result dtype (``other``'s first), a tensor of another dtype converted (``_to_copy``),
        then ``where.self``."""
        import ember
        from ...ops.creation import scalar_tensor
        from ._factory_calls import overload_for
        dtype = ember.result_type(a, b)
        target = overload_for("scalar_tensor", "default")

        def scalar(v):
            t = scalar_tensor(v, dtype=dtype, device=cond.device)      # (this mode is off here)
            node = self.graph.call_function(target, (self._map_value(v),),
                                            {"dtype": dtype, "layout": _t_strided(), "device": cond.device})
            node.meta["tensor_meta"] = extract_tensor_metadata(t)
            if t._fake:
                node.meta["val"] = t
            self._track(t, node)
            return t
        if not isinstance(b, Tensor):
            b = scalar(b)
        if not isinstance(a, Tensor):
            a = scalar(a)
        a, b = (self._with_mode(lambda t: t.to(dtype), t) if t.dtype is not dtype else t for t in (a, b))
        return self._with_mode(ember.where, cond, a, b)

    # -- the mode protocol ----------------------------------------------------------
    def keep_composite(self, op: Any) -> bool:
        return op in self.decomps or op.name in self.keep

    def __ember_dispatch__(self, op: Any, args: Tuple[Any, ...]) -> Any:
        if self.functionalize and op.functional is not None:
            return self._functional_inplace(op, args)
        if self.torch_ir and op.name == "where" and len(args) == 3 and isinstance(args[0], Tensor) and \
                not (isinstance(args[1], Tensor) and isinstance(args[2], Tensor)):
            return self._where_scalars(*args)
        fn = self.decomps.get(op)
        if fn is not None and op not in self._decomposing:
            self._decomposing.add(op)
            try:
                out = self._decompose(fn, op, args)
            finally:
                self._decomposing.discard(op)
            if out is not NotImplemented:
                if op.is_view and self.functionalize:
                    _mark_decomposed_view(op, args, out)
                return out
        if op.composite is not None and STATE.grad_enabled and _requires_grad(op, args):
            # the backward will read the composite's inner values: trace them
            return self._with_mode(op.composite, *args)
        out = self._redispatch(op, args)
        self._record(op, args, out)
        if self._base_gen and op.is_view:
            # a view made now from current values is current: not regenerated when read
            for o in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(o, Tensor) and o._base is not None:
                    self._view_gen[id(o)] = self._base_gen.get(id(o._base), 0)
        return out

    def _with_mode(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        modes = STATE.modes
        modes.append(self)
        try:
            return fn(*args, **kwargs)
        finally:
            if modes and modes[-1] is self:
                modes.pop()
            elif self in modes:
                modes.remove(self)

    def _decompose(self, fn: Callable[..., Any], op: Any, args: Tuple[Any, ...]) -> Any:
        pos, kw = [], {}
        for p, a in zip(op.params, args):
            if p.kwonly:
                kw[p.name] = a
            else:
                pos.append(a)
        if op.composite is not None:
            return self._with_mode(fn, *pos, **kw)
        # A kernel op's decomposition runs below autograd, where grad mode is normally off
        # already; the engine, though, also calls ops below autograd with grad mode on
        # (cloning a saved input), and the prims must not record a backward there.
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            return self._with_mode(fn, *pos, **kw)
        finally:
            STATE.grad_enabled = prev

    @staticmethod
    def _redispatch(op: Any, args: Tuple[Any, ...]) -> Any:
        """Run ``op`` below this mode: the next mode down, or the kernel."""
        if "inplace" in op.tags:
            if STATE.modes:
                return _reg._mode_dispatch(op, args)
            return _reg.run_inplace(op, args)
        if op.composite is not None:
            return op.composite(*args)
        return _reg.below_autograd(op, args)

    def _record(self, op: Any, args: Tuple[Any, ...], out: Any) -> None:
        margs = tuple(self._map_value(a) for a in args)
        pargs, kwargs = _normalize_op_args(op, margs, {})
        node = self.graph.call_function(op.binding, pargs, kwargs)
        if "inplace" in op.tags:
            self.graph.impure_targets.add(op.binding)
        if isinstance(out, Tensor):
            node.meta["tensor_meta"] = extract_tensor_metadata(out)
            if out._fake:
                node.meta["val"] = out
            self._track(out, node)
        elif isinstance(out, (tuple, list)):
            for i, o in enumerate(out):
                if isinstance(o, Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    item.meta["tensor_meta"] = extract_tensor_metadata(o)
                    if o._fake:
                        item.meta["val"] = o
                    self._track(o, item)


# a __torch_dispatch__ subclass's handler runs first, this mode still on: its plain ops are recorded
_reg._DEFERRING_MODES.add(DispatchTracer)


def _in_base_elements(view: Tensor, base: Tensor) -> Tuple[Tuple[int, ...], Tuple[int, ...], int]:
    """(shape, strides, storage offset) of ``view`` -- a dtype view (``Tensor.view(dtype)``) of
    ``base`` -- counted in ``base``'s elements: the functionalization writes and regenerates
    it through the base. A view that does not cover whole base elements (a slice of an int8
    view of a float32 tensor) is refused."""
    from ...ops.dtype_view import dtype_view_geometry
    try:
        shape, strides, off = dtype_view_geometry(tuple(view.shape), tuple(view.stride()),
                                                  int(view.storage_offset()), view.dtype, base.dtype)
    except RuntimeError as e:
        raise NotImplementedError(f"functionalization: an in-place op on a dtype view (Tensor.view(dtype)) "
                                  f"that is not a whole-element view of its {base.dtype} base is not "
                                  f"supported ({e})") from None
    return tuple(int(n) for n in shape), tuple(int(x) for x in strides), int(off)


def _plain_structseqs(v: Any) -> Any:
    """``ember.return_types`` results (``max(x, 1)``) as plain tuples, as torch's make_fx returns
    them (its graphs end in ``return (getitem, getitem_1)``); other structure kept."""
    if isinstance(v, tuple):
        items = tuple(_plain_structseqs(x) for x in v)
        if type(v).__module__ == "ember.return_types":
            return items
        return type(v)(*items) if hasattr(v, "_fields") else items
    if isinstance(v, list):
        return [_plain_structseqs(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain_structseqs(x) for k, x in v.items()}
    return v


def _t_strided() -> Any:
    import ember
    return ember.strided


def _put_strided(base: Tensor, new: Tensor, shape, strides, off) -> Tensor:
    """``base`` (contiguous) with ``new`` written at the elements of its ``as_strided(shape,
    strides, off)`` view, as traced ops: the flat positions are ``off + sum(arange(n_d) *
    stride_d)`` computed in the graph, so symbolic sizes, strides and offsets stay symbolic
    (the concrete path builds those positions as a constant array instead)."""
    from ...ops import api
    from ... import types as _t
    nd = len(shape)
    index = None
    for d, (n, st) in enumerate(zip(shape, strides)):
        r = (api.arange(n, dtype=_t.int64, device=base.device) * st).reshape(
            tuple(n if k == d else 1 for k in range(nd)))
        index = r if index is None else index + r
    if index is None:            # a 0-d view: one element
        index = api.zeros((), dtype=_t.int64, device=base.device)
    index = (index + off).reshape(-1)
    flat = base.reshape(-1)
    return api.index_put(flat, (index,), new.reshape(-1), False).reshape(base.shape)


def _contiguous(shape, strides) -> bool:
    expected = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True
