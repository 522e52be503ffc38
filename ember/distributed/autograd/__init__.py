"""``ember.distributed.autograd``: distributed autograd over ``ember.distributed.rpc``
(torch.distributed.autograd).

``with dist_autograd.context() as context_id:`` opens a context (ids are unique across
workers: the worker id in the top 16 bits). Inside it, ``rpc_sync`` / ``rpc_async`` calls are
recorded for autograd: the caller's tensors travel to the callee, which runs the function with
gradients recorded (in the same context, created there on first use) and keeps that graph; the
caller's result is the output of a ``_RpcCall`` node. ``dist_autograd.backward(context_id,
roots)`` runs the backward from ``roots``: local parts locally, and at each ``_RpcCall`` node the
gradient is sent to the callee, which runs its part (further RPCs recursively) and sends back
the gradients of the caller's tensors. Gradients are accumulated **in the context of the worker
that owns each leaf** -- never in ``.grad`` -- and ``get_gradients(context_id)`` returns that
worker's ``{tensor: gradient}``.

Limits (clear errors): ``remote()`` / RRefs do not take part (their values are computed without
recording); an RPC whose result holds several tensors needing gradients (a tuple) is refused;
the backward runs synchronously through the callees (no concurrent per-worker engines)."""
from __future__ import annotations

import itertools
import threading
from typing import Dict

__all__ = ["context", "backward", "get_gradients", "is_available", "DistAutogradContext"]

_STATE = {"worker_id": None}
_LOCK = threading.Lock()
_CONTEXTS: Dict[int, "DistAutogradContext"] = {}
_COUNTER = itertools.count()
_CURRENT = threading.local()
_NOT_INIT = "Need to initialize distributed autograd using torch.distributed.autograd.init()"


def is_available():
    return True


def _init(worker_id):
    """Called by ``rpc.init_rpc``: this worker's id (context ids are made from it)."""
    with _LOCK:
        _STATE["worker_id"] = int(worker_id)
        _CONTEXTS.clear()


def _shutdown():
    with _LOCK:
        _STATE["worker_id"] = None
        _CONTEXTS.clear()


class DistAutogradContext:
    """One context on this worker: the gradients accumulated for its leaves, the graphs callees
    keep for callers, and the workers it talked to."""

    def __init__(self, context_id):
        self._id = context_id
        self._grads = {}             # id(tensor) -> (tensor, gradient)
        self._calls = {}             # call id -> (arg leaves, result) kept for the caller's backward
        self._call_ids = itertools.count()
        self._workers = set()
        self._anchor = None          # a leaf every recorded RPC hangs from (its result needs a grad path)
        self._lock = threading.Lock()

    def _context_id(self):
        return self._id

    def _known_worker_ids(self):
        return set(self._workers)

    def _send_functions(self):
        return {}

    def _recv_functions(self):
        return {}

    def _accumulate(self, t, g):
        if g is None:
            return
        with self._lock:
            hit = self._grads.get(id(t))
            self._grads[id(t)] = (t, g.detach().clone() if hit is None else hit[1] + g.detach())

    def _anchor_leaf(self):
        from ... import zeros
        if self._anchor is None:
            self._anchor = zeros((), requires_grad=True)
        return self._anchor


def _worker_id():
    if _STATE["worker_id"] is None:
        raise RuntimeError(_NOT_INIT)
    return _STATE["worker_id"]


def _new_context():
    wid = _worker_id()
    if getattr(_CURRENT, "ctx", None) is not None:
        raise RuntimeError("Already have an autograd context id for this thread.")
    cid = (wid << 48) + next(_COUNTER)
    ctx = DistAutogradContext(cid)
    with _LOCK:
        _CONTEXTS[cid] = ctx
    _CURRENT.ctx = ctx
    return ctx


def _get_or_make(cid):
    with _LOCK:
        ctx = _CONTEXTS.get(cid)
        if ctx is None:
            ctx = _CONTEXTS[cid] = DistAutogradContext(cid)
        return ctx


def _retrieve_context(context_id):
    _worker_id()
    with _LOCK:
        ctx = _CONTEXTS.get(context_id)
    if ctx is None:
        raise RuntimeError(f"Could not find autograd context with id: {context_id}")
    return ctx


def _is_valid_context(context_id):
    with _LOCK:
        return context_id in _CONTEXTS


def _current_context():
    ctx = getattr(_CURRENT, "ctx", None)
    if ctx is None:
        raise RuntimeError("Current thread doesn't have a valid autograd context. Please wrap your code using: "
                           "`with torch.distributed.autograd.context() as context_id` to generate a valid "
                           "context")
    return ctx


def _release_context(context_id):
    with _LOCK:
        if context_id not in _CONTEXTS:
            raise RuntimeError(f"Could not find autograd context with id: {context_id}")
        del _CONTEXTS[context_id]
    if getattr(_CURRENT, "ctx", None) is not None and _CURRENT.ctx._id == context_id:
        _CURRENT.ctx = None


def _get_max_id():
    return (_worker_id() << 48) + (1 << 48) - 1


def _get_debug_info():
    with _LOCK:
        return {"num_current_backward_passes": "0", "num_autograd_contexts": str(len(_CONTEXTS))}


class context:  # noqa: N801 - torch's name
    """``with context() as context_id:``: a distributed autograd context for the block."""

    def __enter__(self):
        self.autograd_context = _new_context()
        return self.autograd_context._context_id()

    def __exit__(self, type, value, traceback):  # noqa: A002 - torch's signature
        _release_context(self.autograd_context._context_id())


# ---------------------------------------------------------------------------- backward
def _leaves(roots):
    from ...nn.parallel.distributed import _reachable_leaves
    from ...autograd.graph import AccumulateGrad, gradient_edge
    ids = _reachable_leaves(list(roots))
    out, seen, stack = [], set(), []
    for t in roots:
        e = gradient_edge(t) if t.requires_grad else None
        if e is not None:
            stack.append(e[0])
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if id(node.variable) in ids:
                out.append(node.variable)
            continue
        for e in node.next_edges:
            if e is not None:
                stack.append(e[0])
    return out


def _run_backward(ctx, roots, grads, retain_graph, keep=()):
    """Gradients of ``roots`` (seeded with ``grads``) for every leaf they reach: those in
    ``keep`` returned (in order), every other one accumulated in ``ctx``."""
    from ... import autograd
    leaves = _leaves(roots)
    keep_ids = {id(k) for k in keep}
    for k in keep:
        if id(k) not in {id(x) for x in leaves} and k.requires_grad:
            leaves.append(k)
    if not leaves:
        return [None] * len(keep)
    prev = getattr(_CURRENT, "ctx", None)
    _CURRENT.ctx = ctx
    try:
        got = autograd.grad(list(roots), leaves, grad_outputs=grads, retain_graph=retain_graph, allow_unused=True)
    finally:
        _CURRENT.ctx = prev
    by_id = {}
    for leaf, g in zip(leaves, got):
        if id(leaf) in keep_ids:
            by_id[id(leaf)] = g
        elif leaf is not ctx._anchor:
            ctx._accumulate(leaf, g)
    return [by_id.get(id(k)) for k in keep]


def backward(context_id, roots, retain_graph=False):
    """Run the backward of ``roots`` (scalar tensors) through every worker the context's RPCs
    reached; gradients accumulate in the owning workers' contexts (``get_gradients``)."""
    from ...tensor import Tensor
    ctx = _retrieve_context(context_id)
    roots = list(roots)
    for r in roots:
        if not isinstance(r, Tensor):
            raise TypeError(f"backward(): roots must be tensors, got {type(r).__name__}")
        if r.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not r.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    from ... import ones_like
    _run_backward(ctx, roots, [ones_like(r) for r in roots], retain_graph)


def get_gradients(context_id):
    """{tensor: gradient} accumulated on this worker in context ``context_id``."""
    ctx = _retrieve_context(context_id)
    with ctx._lock:
        return {t: g for t, g in ctx._grads.values()}


# ---------------------------------------------------------------------------- RPC recording
def _recording():
    return getattr(_CURRENT, "ctx", None) is not None


def _remote_forward(cid, caller, func, args, kwargs, needs):
    """On the callee: the function run with gradients recorded in context ``cid``; the graph is
    kept for the caller's backward. Returns (detached result, call id, result needs grad)."""
    from ...tensor import Tensor
    from ..rpc.agent import _run_user
    ctx = _get_or_make(cid)
    ctx._workers.add(caller)
    args = list(args)
    leaves = []
    for k, need in needs:
        t = args[k].detach().requires_grad_(True) if need else args[k]
        args[k] = t
        leaves.append(t)
    prev = getattr(_CURRENT, "ctx", None)
    _CURRENT.ctx = ctx
    try:
        res = _run_user(func, tuple(args), kwargs)
    finally:
        _CURRENT.ctx = prev
    if isinstance(res, (tuple, list)) and any(isinstance(r, Tensor) and r.requires_grad for r in res):
        raise NotImplementedError("ember.distributed.autograd: an RPC returning several tensors that need "
                                  "gradients is not supported (return one tensor)")
    if not (isinstance(res, Tensor) and res.requires_grad):
        return res, None, False
    call = next(ctx._call_ids)
    ctx._calls[call] = (leaves, res)
    return res.detach(), call, True


def _remote_backward(cid, call, grad, retain_graph):
    """On the callee: the backward of a kept call's graph; the gradients of the caller's tensors."""
    ctx = _retrieve_context(cid)
    leaves, res = ctx._calls[call] if retain_graph else ctx._calls.pop(call)
    return _run_backward(ctx, [res], [grad], retain_graph, keep=leaves)


def _make_rpc_call():
    from ...autograd import Function

    class _RpcCall(Function):
        """The caller's node of a recorded RPC whose result needs a gradient: its value is the
        callee's result; backward sends the gradient to the callee and returns the callee's
        gradients for the tensors sent."""

        @staticmethod
        def forward(ctx, call, anchor, res, *tensors):
            ctx.call = call
            return res.view_as(res)

        @staticmethod
        def backward(ctx, grad):
            from ..rpc import api
            to, cid, call, timeout = ctx.call
            grads = api._plain_rpc_sync(to, _remote_backward, (cid, call, grad.contiguous(), False), None, timeout)
            return (None, None, None) + tuple(grads)
    return _RpcCall


_RPC_CALL = []


def _recorded_rpc(to, func, args, kwargs, timeout):
    """``rpc_sync`` inside a context (see the module doc): the callee records the call; a result
    that needs a gradient comes back as a ``_RpcCall`` node's output."""
    from ...tensor import Tensor
    from ..rpc import api
    if not _RPC_CALL:
        _RPC_CALL.append(_make_rpc_call())
    args = tuple(args or ())
    kwargs = dict(kwargs or {})
    if any(isinstance(v, Tensor) and v.requires_grad for v in kwargs.values()):
        raise NotImplementedError("ember.distributed.autograd: tensors needing gradients passed to an RPC as "
                                  "keyword arguments are not recorded; pass them positionally")
    cur = _current_context()
    pos = [k for k, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[k] for k in pos]
    sent = list(args)
    for k in pos:
        sent[k] = args[k].detach()
    needs = [(k, args[k].requires_grad) for k in pos]
    res, call, diff = api._plain_rpc_sync(to, _remote_forward, (cur._id, _worker_id(), func, tuple(sent), kwargs,
                                                                needs), None, timeout)
    cur._workers.add(api.get_worker_info(to).id if not hasattr(to, "id") else to.id)
    if not diff:
        return res
    return _RPC_CALL[0].apply((to, cur._id, call, timeout), cur._anchor_leaf(), res, *tensors)
