"""The backward engine: iterative, dependency-counted, no recursion.

1. Discover the graph from the root edges and count, for every node, how
   many edges point into it (only edges from nodes that will run).
2. A node becomes ready when all its producers have run; ready nodes run in
   decreasing creation order (like PyTorch), which keeps memory low and the
   order deterministic.
3. Gradients for a node's outputs are summed in its input buffer; a node's
   results are routed along ``next_edges``.
4. ``AccumulateGrad`` adds into ``.grad``; ``autograd.grad`` instead captures
   the gradient arriving at each input's edge and runs only the nodes on a
   path to an input.
"""
from __future__ import annotations

import heapq
import itertools
import sys
import threading
import warnings

import numpy as _np

from .._fake import FakeArray
from .._torch_function import DISPATCH_CLASSES as _DISPATCH_CLASSES
from .._state import STATE
from ..tensor import Tensor, _make
from ._graph_api import GradientEdge as _GradientEdge
from ._switches import FLAGS as _FLAGS
from .graph import AccumulateGrad, gradient_edge


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if a._sparse_layout or b._sparse_layout:    # a sparse gradient (ember/sparse)
        from ..sparse._ops import add_any
        return add_any(a, b)
    return _api().add(a, b)


_API = []


def _api():
    """ember.ops.api, imported once (the engine is imported before the ops)."""
    if not _API:
        from ..ops import api
        _API.append(api)
    return _API[0]


# The backward pass running now: (its id, the set of nodes it runs), for hooks that must know
# which tensors this pass reaches (autograd.graph.register_multi_grad_hook).
# whether it runs only part of the graph (autograd.grad, backward(inputs=...)): a reentrant
# checkpoint cannot back-propagate its recomputation then (autograd._is_checkpoint_valid).
# Per thread: two threads' backward passes must not see (or restore) each other's.
class _PerThreadPass(threading.local):
    """``CURRENT_PASS[i]`` / ``CURRENT_PASS[:] = [...]``: this thread's
    [id, nodes it runs, callbacks queued for its end, partial]."""

    def __init__(self):
        self.value = [None, None, None, False]

    def __getitem__(self, i):
        return self.value[i]

    def __setitem__(self, i, v):
        self.value[i] = v


CURRENT_PASS = _PerThreadPass()
_PASS_IDS = itertools.count(1)


def queue_callback(callback):
    """torch's ``Variable._execution_engine.queue_callback``: ``callback()`` runs when the
    backward pass running now ends."""
    if CURRENT_PASS[0] is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    CURRENT_PASS[2].append(callback)


def execute(roots, *, retain_graph, create_graph, capture=None, accumulate=True,
            accumulate_only=None):
    """Run backward.

    roots:        list of ((node, nr), grad) pairs.
    capture:      list of edges whose incoming gradient is returned (autograd.grad).
    accumulate:   whether AccumulateGrad nodes add into ``.grad``.
    accumulate_only: when given (backward(inputs=...)), the set of nodes allowed to run
                  as accumulation targets.
    """
    root_nodes = []
    for (node, _), _g in roots:
        root_nodes.append(node)

    # -- 1. discovery (and, when every node runs, dependency counts in the same pass)
    selective = capture is not None or accumulate_only is not None
    deps = {}
    seen = set(root_nodes)
    stack = list(seen)
    if selective:
        parents = {}
        while stack:
            n = stack.pop()
            for e in n.next_edges:
                if e is None:
                    continue
                c = e[0]
                parents.setdefault(c, []).append(n)
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        # -- which nodes run
        targets = set()
        for e in capture or ():
            if e is not None:
                targets.add(e[0])
        for n in accumulate_only or ():
            targets.add(n)
        runs = set()
        frontier = list(targets)
        while frontier:
            n = frontier.pop()
            for p in parents.get(n, ()):
                if p not in runs:
                    runs.add(p)
                    frontier.append(p)
        if accumulate_only is not None:
            runs |= set(accumulate_only)
        for n in runs:
            for e in n.next_edges:
                if e is not None:
                    deps[e[0]] = deps.get(e[0], 0) + 1
    else:
        while stack:
            for e in stack.pop().next_edges:
                if e is None:
                    continue
                c = e[0]
                d = deps.get(c)
                if d is None:
                    deps[c] = 1
                    if c not in seen:
                        seen.add(c)
                        stack.append(c)
                else:
                    deps[c] = d + 1
        runs = seen

    capture_at = {}
    if capture is not None:
        for i, e in enumerate(capture):
            if e is not None:
                capture_at.setdefault(e[0], []).append((e[1], i))
    captured = [None] * (len(capture) if capture is not None else 0)

    buffers = {}
    for (node, nr), g in roots:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node._n_out
        buf[nr] = _add(buf[nr], g)

    prev_pass = CURRENT_PASS.value
    CURRENT_PASS.value = [next(_PASS_IDS), runs, [], selective]
    heap = []
    pushed = set()
    for n in root_nodes:
        if n not in deps and n not in pushed:
            pushed.add(n)
            heapq.heappush(heap, (-n._seq, id(n), n))

    accumulating = accumulate and accumulate_only is None
    direct_acc = accumulating and not capture_at
    heappush, heappop = heapq.heappush, heapq.heappop
    st = STATE
    prev_grad_mode = st.grad_enabled
    st.grad_enabled = create_graph
    try:
        while heap:
            node = heappop(heap)[2]
            buf = buffers.pop(node, None)
            if buf is None:
                buf = [None] * node._n_out
            if node._tensor_pre_hooks or node._retain_grad_hooks or node._pre_hooks:
                buf = _run_pre_hooks(node, buf)
            if capture_at:
                hits = capture_at.get(node)
                if hits:
                    for nr, i in hits:
                        captured[i] = buf[nr]
            if type(node) is AccumulateGrad or isinstance(node, AccumulateGrad):
                if accumulating or accumulate and node in accumulate_only:
                    g = buf[0]
                    if g is not None:
                        buf[0] = None
                        _accumulate(node.variable, g, create_graph, 1)   # held: the local g
                continue
            if selective and node not in runs:
                continue
            for g in buf:
                if g is not None:
                    grads = _call_node(node, buf)
                    break
            else:
                if hasattr(node, "_forward_cls"):
                    # Custom Functions still run, with zero-filled grads, as in PyTorch.
                    grads = _call_node(node, buf)
                else:
                    # no gradient reached this op: its inputs get none either.
                    grads = [None] * len(node.next_edges)
            if node._hooks:
                for h in list(node._hooks.values()):
                    r = h(tuple(grads), tuple(buf))
                    if r is not None:
                        grads = list(r)
            if not retain_graph:
                node.release()
            for i, e in enumerate(node.next_edges):
                if e is None:
                    continue
                g = grads[i]    # not zip: its cached result tuple would hold a reference to g
                child, nr = e
                if selective and child not in runs and child not in capture_at \
                        and not isinstance(child, AccumulateGrad):
                    continue
                if g is not None:
                    cb = buffers.get(child)
                    if cb is None:
                        cb = buffers[child] = [None] * child._n_out
                        cb[nr] = g
                    else:
                        cb[nr] = _add(cb[nr], g)
                d = deps.get(child, 1) - 1
                deps[child] = d
                if d == 0 and child not in pushed:
                    pushed.add(child)
                    if type(child) is AccumulateGrad and direct_acc and not (
                            child._tensor_pre_hooks or child._retain_grad_hooks or child._pre_hooks):
                        # A ready leaf accumulates at once, as in PyTorch (whose
                        # AccumulateGrad has the highest priority in the ready queue).
                        cb = buffers.pop(child, None)
                        if cb is not None and cb[0] is not None:
                            acc = cb[0]
                            cb[0] = None
                            # held: the local acc, plus the loop's g and its slot in grads
                            _accumulate(child.variable, acc, create_graph, 3 if acc is g else 1)
                            acc = None
                    else:
                        heappush(heap, (-child._seq, id(child), child))
            grads = g = None    # no stale references: they would block stealing a gradient
    finally:
        st.grad_enabled = prev_grad_mode
        callbacks = CURRENT_PASS.value[2]
        CURRENT_PASS.value = prev_pass
    for cb in callbacks:
        cb()
    return captured


def _run_pre_hooks(node, buf):
    th = node._tensor_pre_hooks
    if th:
        for nr, hooks in th.items():
            g = buf[nr]
            if g is None:
                continue
            for h in list(hooks.values()):
                r = h(g)
                if r is not None:
                    g = r
            buf[nr] = g
    rh = node._retain_grad_hooks
    if rh:
        for nr, h in rh.items():
            if buf[nr] is not None:
                h(buf[nr])
    if node._pre_hooks:
        for h in list(node._pre_hooks.values()):
            r = h(tuple(buf))
            if r is not None:
                buf = list(r)
    return buf


def _call_node(node, buf):
    anomaly = STATE.anomaly
    if anomaly:
        try:
            grads = node.apply(buf)
        except Exception:
            _warn_anomaly(node)
            raise
    else:
        grads = node.apply(buf)
    if type(grads) is not list:
        grads = list(grads)
    edges = node.next_edges
    if len(grads) != len(edges):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(edges)}, got {len(grads)})")
    metas = node._in_meta
    i = -1
    for g in grads:
        i += 1
        if g is None:
            continue
        if type(g) is not Tensor and not isinstance(g, Tensor):
            raise TypeError(f"function {node.name()} returned a gradient of type {type(g).__name__} "
                            f"at index {i}; expected a Tensor or None")
        if edges[i] is None:
            grads[i] = None
            continue
        if metas is not None:
            m = metas[i]
            if m is not None:
                shape, dtype, device = m
                if g._data.shape != shape and tuple(g._data.shape) != tuple(shape):
                    raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index {i} - "
                                       f"got {list(g.shape)} but expected shape compatible with {list(shape)}")
                if g.dtype is not dtype:
                    if g.dtype.is_complex and not dtype.is_complex:
                        g = _api().real(g)    # a real input of a complex result: the real part, as torch
                    grads[i] = g.to(dtype)
        if anomaly and STATE.anomaly_check_nan and g.dtype.is_floating_point:
            if bool(_isnan_any(g)):
                _warn_anomaly(node)
                raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
    return grads


def _isnan_any(g):
    xp_arr = g._data
    return (xp_arr != xp_arr).any()


def _warn_anomaly(node):
    tr = node._anomaly_trace()
    if tr:
        warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the "
                      f"error:\n{tr}", RuntimeWarning, stacklevel=3)


_getrefcount = sys.getrefcount


def _accumulate(t, g, create_graph, held=-1):
    """Accumulate ``g`` into ``t.grad``. ``held``: how many references to ``g`` the caller
    holds (-1: unknown). When ``t.grad`` is None and ``g`` is provably referenced by nobody
    else, its memory becomes ``t.grad`` without a copy (PyTorch's AccumulateGrad steals an
    unshared gradient the same way): a fresh 4 MB gradient copied into fresh memory costs
    more page faults than the whole backward matmul that produced it."""
    hooks = t._hooks
    if hooks:
        for h in list(hooks.values()):
            r = h(g)
            if r is not None:
                g = r
    old = t._grad
    if g._sparse_layout or t._sparse_layout or (old is not None and old._sparse_layout):
        from ..sparse._ops import accumulated    # a sparse gradient (ember/sparse)
        t._grad = accumulated(old, g, create_graph)
    elif old is None:
        if create_graph and g._requires_grad:
            t._grad = g
        elif STATE.modes or g.__class__ in _DISPATCH_CLASSES:
            # a dispatched copy, so tracing modes (make_fx) see where .grad comes from, and a
            # __torch_dispatch__ subclass's gradient stays one (its handler copies it)
            t._grad = _clone_below_autograd(g)
        elif held >= 0 and not hooks and _unshared(g, held + 1) and _layout_ok(t._data, g._data):
            t._grad = _make(g._data, g.device, g.dtype)
        else:
            t._grad = _make(_copy_in_layout_of(t._data, g._data), g.device, g.dtype)
    elif create_graph or old._requires_grad or g._requires_grad:
        from ..ops import api
        t._grad = api.add(old, g)
    elif STATE.modes:
        from ..ops.registry import OPS, _mode_dispatch
        _mode_dispatch(OPS["add_"], (old, g, 1))
    elif old.__class__ in _DISPATCH_CLASSES or g.__class__ in _DISPATCH_CLASSES:
        old.add_(g)     # a __torch_dispatch__ subclass holds its values in attributes: its handler adds
    else:
        d = old._data
        d += g._data
        old._bump_version()
    post = t._post_acc_hooks
    if post:
        for h in list(post.values()):
            h(t)


def _unshared(g, held):
    """True when ``g`` is referenced only ``held`` times besides this call's argument, and its
    array only by ``g``: nobody else can see a write to the memory, so it can be adopted."""
    if _getrefcount(g) != held + 2 or g._base is not None or g._requires_grad:
        return False
    a = g._data
    # references to the array: g._data, the local ``a``, getrefcount's argument
    return getattr(a, "base", 0) is None and _getrefcount(a) == 3


def _layout_ok(p, a):
    """The gradient's layout matches the parameter's (PyTorch's layout contract for a stolen
    gradient; waived under ``enforce_grad_layout_policy(False)``), and the memory is writable."""
    return ((a.strides == p.strides or not _FLAGS.grad_layout)
            and getattr(a.flags, "writeable", True))   # (cupy's flags have none: always)


def _copy_in_layout_of(p, a):
    """A copy of the gradient ``a`` laid out like the parameter ``p`` (PyTorch's layout
    contract for ``.grad``; optimizers then walk both in the same order)."""
    if p.ndim < 2 or type(p) is FakeArray or p.flags.c_contiguous:    # (a meta/fake tensor: no data)
        return a.copy()
    out = _np.empty_like(p) if type(p) is _np.ndarray else a.copy(order="K")
    out[...] = a
    return out


def _clone_below_autograd(t):
    """``clone(t)`` through the mode stack, recording no autograd history."""
    from ..ops.registry import OPS, below_autograd
    return below_autograd(OPS["clone"], (t, None))


# ---------------------------------------------------------------------- public entry points
def _make_roots(tensors, grad_tensors, create_graph, fn_name):
    roots = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn_name}: expected Tensors, got {type(t).__name__}")
        edge = gradient_edge(t)
        if edge is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            data = t._data
            if data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got "
                                   f"{t.dtype}")
            if t.__class__ in _DISPATCH_CLASSES:
                # a __torch_dispatch__ subclass: its handler makes the seed (ember.ops.aten.fill)
                from ..ops.registry import OPS, below_autograd
                roots.append((edge, below_autograd(OPS["fill"], (t, 1))))
                continue
            if t.device.type == "cpu":
                ones = _np.empty(data.shape, dtype=data.dtype)   # np.ones, without its Python layer
                ones.fill(1)
                roots.append((edge, _make(ones, t.device, t.dtype)))
                continue
            g = _api().ones_like(t)
        elif not isinstance(g, Tensor):
            from ..ops import api
            g = api.tensor(g, dtype=t.dtype, device=t.device)
        if tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                               f"output[{i}] has a shape of {t.shape}.")
        roots.append((edge, g))
    return roots


def _is_edge(x):
    return isinstance(x, _GradientEdge)


def _as_tuple(x):
    if isinstance(x, Tensor):
        return (x,)
    if x is None:
        return None
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulate d(tensors)/d(leaves) into the leaves' ``.grad``."""
    if grad_tensors is None and grad_variables is None and inputs is None and type(tensors) is Tensor:
        # t.backward(): one root, implicit gradient
        if retain_graph is None:
            retain_graph = create_graph
        execute(_make_roots((tensors,), (None,), create_graph, "backward"), retain_graph=retain_graph,
                create_graph=create_graph)
        return
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = grad_variables
    grad_tensors = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    if isinstance(grad_tensors, tuple) and len(grad_tensors) != len(tensors):
        raise RuntimeError(f"got {len(grad_tensors)} gradients for {len(tensors)} tensors")
    if retain_graph is None:
        retain_graph = create_graph
    roots = _make_roots(tensors, grad_tensors, create_graph, "backward")
    only = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        only = set()
        nonleaf = []
        for t in inputs:
            e = gradient_edge(t)
            if e is None:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            if isinstance(e[0], AccumulateGrad):
                only.add(e[0])
            else:
                nonleaf.append((t, e))
        if nonleaf:
            got = execute(roots, retain_graph=True, create_graph=create_graph,
                          capture=[e for _, e in nonleaf], accumulate=True, accumulate_only=only)
            for (t, _), g in zip(nonleaf, got):
                if g is not None:
                    t._grad = g if t._grad is None else t._grad + g
            if not retain_graph:
                pass
            return
    execute(roots, retain_graph=retain_graph, create_graph=create_graph, accumulate_only=only)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return d(outputs)/d(inputs) without touching ``.grad``."""
    outputs = _as_tuple(outputs)
    single = isinstance(inputs, Tensor) or _is_edge(inputs)
    inputs = (inputs,) if single else _as_tuple(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    grad_outputs = _as_tuple(grad_outputs) if grad_outputs is not None else (None,) * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} for "
                           f"{len(outputs)} outputs")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    roots = _make_roots(outputs, grad_outputs, create_graph, "grad")
    edges = []
    for t in inputs:
        if _is_edge(t):                   # autograd.graph.get_gradient_edge: the gradient flowing into it
            edges.append((t.node, t.output_nr))
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be Tensors or GradientEdges, got {type(t).__name__}")
        e = gradient_edge(t)
        if e is None:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        edges.append(e)
    got = execute(roots, retain_graph=retain_graph, create_graph=create_graph, capture=edges,
                  accumulate=False)
    out = []
    for i, (t, g) in enumerate(zip(inputs, got)):
        if g is None:
            if materialize_grads and _is_edge(t):
                raise NotImplementedError("ember.autograd.grad(materialize_grads=True) with a GradientEdge input "
                                          "is not supported (the edge carries no shape to fill with zeros)")
            if materialize_grads:
                from ..ops import api
                g = api.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in "
                                   "the graph. Set allow_unused=True if this is the desired behavior.")
        elif not create_graph and g._requires_grad:
            g = g.detach()
        out.append(g)
    return tuple(out)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dim of every grad_output indexes a batch of
    vector-Jacobian products; each result gets that dim in front.

    PyTorch vmaps the backward; here the backward runs once per batch entry (the graph retained
    until the last) and the results are stacked -- the same values (each entry is exactly the
    unbatched ``grad`` of that slice), at the cost of one engine pass per entry."""
    from ..ops import api
    if any(g is None or not isinstance(g, Tensor) for g in grad_outputs):
        raise RuntimeError("grad(is_grads_batched=True) needs a tensor grad_output for every output "
                           "(its first dim is the batch dim)")
    sizes = {g.shape[0] if g.ndim else None for g in grad_outputs}
    if None in sizes or len(sizes) != 1:
        raise RuntimeError(f"grad(is_grads_batched=True): every grad_output needs the same batch size in "
                           f"dim 0, got shapes {[tuple(g.shape) for g in grad_outputs]}")
    (n,) = sizes
    if n == 0:
        raise RuntimeError("grad(is_grads_batched=True): the batch dim of grad_outputs is empty")
    per = []
    for b in range(n):
        per.append(grad(outputs, inputs, tuple(g[b] for g in grad_outputs),
                        retain_graph=True if b < n - 1 else retain_graph, create_graph=create_graph,
                        allow_unused=allow_unused, materialize_grads=materialize_grads))
    # (whether an input is reached is the graph's, not the values': None for every entry or none)
    return tuple(None if p[0] is None else api.stack(list(p)) for p in zip(*per))
