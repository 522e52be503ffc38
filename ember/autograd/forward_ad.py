"""Forward-mode AD with dual tensors (mirrors ``torch.autograd.forward_ad``).

::

    import ember.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        value, jvp = fwAD.unpack_dual(y)

How it is wired into the dispatcher
-----------------------------------
A tangent is an attribute of the tensor (``t.__dict__["_fw_tangent"]``). While a
dual level is active, one object, ``_MODE``, sits on the dispatcher's mode stack
(``STATE.modes``). Every generated binding already branches on ``STATE.modes``
before it runs a kernel, so the forward-AD check costs the no-dual path *nothing*:
outside a level the stack is exactly what it was, the generated fast path runs
the same bytecode as before. Inside a level every kernel op (and every in-place
op) reaches ``_MODE.__ember_dispatch__``, which runs the op below itself (the rest
of the mode stack, then the kernel) and, when an input carries a tangent,
attaches the output's tangent. Composite ops are not seen: they run as their
parts, whose tangents chain. When an input requires grad, the Autograd key comes
first (``registry._autograd``) and calls ``__ember_dispatch_autograd__``: the same
thing, told that grad mode is on for the user (the Autograd key switched it off
to run the kernel), so tangents are recorded for reverse mode on top.

The JVP of one op
-----------------
* explicit rules (``_RULES``) for the hottest ops: add/sub/mul/div/neg, mm/bmm/
  addmm, exp/tanh/sigmoid/relu/log/sin/cos/sqrt, ...;
* ops linear in their (only dual) first argument -- every view op except the
  storage-geometry ones, sum/mean/clone/casts -- apply the same op to the
  tangent, so the tangent of a view is the same view of the tangent (an in-place
  change of a view's tangent reaches the base's tangent, as in PyTorch);
* every other op with a derivative formula: the double-vjp trick on that op
  alone. Its backward formula ``u -> J^T u`` is written in ember ops, so with
  ``u`` a leaf requiring grad, ``grad(J^T u, u, grad_outputs=t) = J t``.
* an op without a derivative formula raises PyTorch's NotImplementedError
  naming it; ops tagged nondifferentiable and integer/bool outputs get no tangent.

Deviations from PyTorch (documented, never silent): complex dual tensors raise
NotImplementedError; the level is per thread (PyTorch's is process-wide; ember's
mode stack is per thread, so a level is too: another thread cannot make duals);
a view made *before* its base got a tangent through an in-place op on another
view does not see that tangent (PyTorch derives it lazily from the base);
``ember.compile`` runs frames eagerly while a dual level is active (logged in
the ``graph_breaks`` log); an in-place op whose input aliases its ``self``
(``v.mul_(v)``) gets the mathematically right tangent (PyTorch reads the
already-updated primal there); a ``detach()``ed view written in place with a
dual updates its base's tangent (ember cannot tell ``detach()`` aliases from
views). Custom ``autograd.Function``s use their ``jvp`` staticmethod, as in
PyTorch (zeros for tensor inputs without a tangent).
"""
from __future__ import annotations

import functools
import math
import threading
import weakref
from typing import NamedTuple, Optional

from .._state import STATE
from ..tensor import Tensor

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "dual_level"]

class _LevelState(threading.local):
    """The active level (PyTorch supports one at a time: 0 while inside, -1 outside) and
    weak references to every tensor given a tangent in it (exiting drops them). Per thread,
    like the mode stack that carries ``_MODE``: a level entered in one thread must not let
    another thread make duals whose ops would not see the mode."""

    def __init__(self):
        self.level = -1
        self.duals = []
        self.compact_at = 1024


_L = _LevelState()
_N_ACTIVE = [0]     # threads inside a level: the compile hook's test costs one list read
_KEY = "_fw_tangent"


def _is_active() -> bool:
    """Whether this thread is inside a dual level (ember.compile runs frames eagerly then)."""
    return _N_ACTIVE[0] > 0 and _L.level >= 0


# ---------------------------------------------------------------------- levels
def enter_dual_level():
    """Enter a new forward-AD level and make it the default of ``make_dual``/``unpack_dual``.
    Only one level can be active at a time, as in PyTorch."""
    if _L.level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _L.level = 0
    _N_ACTIVE[0] += 1
    STATE.modes.append(_MODE)
    return _L.level


def exit_dual_level(*, level=None):
    """Exit the active forward-AD level: every tangent made in it is dropped."""
    if level is None:
        level = _L.level
    if level != _L.level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    modes = STATE.modes
    for i in range(len(modes) - 1, -1, -1):
        if modes[i] is _MODE:
            del modes[i]
            break
    for ref in _L.duals:
        t = ref()
        if t is not None:
            t.__dict__.pop(_KEY, None)
    _L.duals = []
    _L.compact_at = 1024
    _L.level = level - 1
    _N_ACTIVE[0] -= 1


class dual_level:
    """Context manager (and decorator) for a forward-AD level: every forward-AD computation
    happens inside one; leaving it drops the tangents. Nesting raises, as in PyTorch (use
    ``ember.func.jvp`` for higher-order forward derivatives)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, exc_type, exc_value, tb):
        exit_dual_level()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper


# ---------------------------------------------------------------------- dual tensors
class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view of the dual tensor without its
    tangent) and the tangent (None when the tensor has none at this level)."""
    primal: Tensor
    tangent: Optional[Tensor]


def _tangent(t):
    """``t``'s tangent at the active level, or None."""
    return t.__dict__.get(_KEY) if isinstance(t, Tensor) else None


def _set_tangent(t, tan):
    d = t.__dict__
    if _KEY not in d:
        st = _L
        st.duals.append(weakref.ref(t))
        if len(st.duals) >= st.compact_at:
            st.duals = [r for r in st.duals if r() is not None]
            st.compact_at = max(1024, 2 * len(st.duals))
    d[_KEY] = tan


def _primal_view(t):
    """A view of ``t`` that shares its data and autograd history but carries no tangent."""
    from ..ops.registry import OPS
    p = OPS["alias"].binding(t)
    p.__dict__.pop(_KEY, None)
    return p


def _layout_copy(src, like):
    """``src``'s values in a new tensor with ``like``'s strides (differentiable w.r.t. ``src``)."""
    from ..ops import api
    shape, stride = tuple(like.shape), tuple(like.stride())
    if any(s < 0 for s in stride):
        return src.clone()
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
    storage = api.zeros(extent, dtype=src.dtype, device=src.device)
    out = api.as_strided(storage, shape, stride, 0)
    out.copy_(src)
    return out


def make_dual(tensor, tangent, *, level=None):
    """A new tensor aliasing ``tensor`` with ``tangent`` attached as its forward gradient.

    The tangent is kept as is when its strides are ``tensor``'s (so views of the dual see
    views of it), else copied into ``tensor``'s layout, as in PyTorch. Differentiable (the
    result is a view of ``tensor`` for reverse mode)."""
    if level is None:
        level = _L.level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not isinstance(tensor, Tensor):
        raise TypeError(f"make_dual(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    if not isinstance(tangent, Tensor):
        raise TypeError(f"make_dual(): argument 'tangent' must be Tensor, not {type(tangent).__name__}")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if level != _L.level:
        raise RuntimeError("Invalid level given to _make_dual")
    if tensor.is_complex() or tangent.is_complex():
        raise NotImplementedError("ember.autograd.forward_ad: complex dual tensors are not supported; "
                                  "use ember.func.jvp for complex functions")
    if _tangent(tensor) is not None:
        raise RuntimeError(f"Making a dual Tensor based on a Tensor that already has a forward gradient at the "
                           f"same level {level} is not supported.")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the "
                           f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
                           f"while the given forward gradient is of size {list(tangent.shape)}.")
    if tangent.device != tensor.device:
        raise RuntimeError(f"Trying to set a forward gradient on device {tangent.device} for a Tensor on "
                           f"device {tensor.device}: both must be on the same device.")
    out = _primal_view(tensor)
    if tuple(tangent.stride()) != tuple(tensor.stride()) and tensor.numel() > 1:
        tangent = _layout_copy(tangent, tensor)
    _set_tangent(out, tangent)
    return out


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor``: the primal a view of it without the tangent, the
    tangent as is (None when ``tensor`` has none, or outside a level)."""
    if level is None:
        level = _L.level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    if level != _L.level:
        raise RuntimeError("Invalid level given to _fw_primal")
    tan = _tangent(tensor)
    if tan is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_primal_view(tensor), tan)


# ---------------------------------------------------------------------- the dispatch mode
class _ForwardADMode:
    """On ``STATE.modes`` while a level is active; see the module docstring."""

    def __ember_dispatch__(self, op, args):
        return _dispatch(op, args, STATE.grad_enabled)

    def __ember_dispatch_autograd__(self, op, args):
        # reached from the Autograd key, which switched grad mode off to run the kernel
        return _dispatch(op, args, True)

    def __repr__(self):
        return "<ember forward-AD mode>"


_MODE = _ForwardADMode()


def _below(op, args):
    """What runs under this mode: the rest of the mode stack, then the kernel."""
    from ..ops import registry
    if STATE.modes:
        return registry._mode_dispatch(op, args)
    if op.functional is not None:
        return registry.run_inplace(op, args)
    return op.run(args)


def _requires_grad(args):
    for a in args:
        if isinstance(a, Tensor):
            if a._requires_grad:
                return True
        elif type(a) in (list, tuple):
            if any(isinstance(x, Tensor) and x._requires_grad for x in a):
                return True
    return False


def _forward(op, args, grad_on):
    """The op's output. When reverse mode will differentiate the tangent (grad mode on and an
    input requires grad), the output must already carry its autograd node -- the tangent rules
    read it (``exp``: ``t * out``) -- so the op runs through the Autograd key here (the
    Autograd key above records the node again for the caller: same history)."""
    if grad_on and _requires_grad(args):
        from ..ops.registry import dispatch
        prev = STATE.grad_enabled
        STATE.grad_enabled = True
        try:
            return dispatch(op, args)
        finally:
            STATE.grad_enabled = prev
    return _below(op, args)


def _input_tangents(op, args):
    """(flat tangents, any): one entry per tensor-ish input in ``op.grad_params`` order,
    list arguments flattened (None where there is no tangent)."""
    flat = []
    found = False
    for i in op.grad_params:
        a = args[i]
        if type(a) in (list, tuple):
            for x in a:
                t = x.__dict__.get(_KEY) if isinstance(x, Tensor) else None
                flat.append(t)
                found = found or t is not None
        else:
            t = a.__dict__.get(_KEY) if isinstance(a, Tensor) else None
            flat.append(t)
            found = found or t is not None
    return flat, found


def _dispatch(op, args, grad_on):
    tans, found = _input_tangents(op, args)
    if not found:
        return _below(op, args)
    if op.functional is not None:
        return _inplace(op, args, tans, grad_on)
    out = _forward(op, args, grad_on)
    out_t = _jvp(op, args, out, tans, grad_on)
    if not op.is_view and out_t is not None:
        out_t = _unshare(out_t, tans, grad_on)
    _attach(out, out_t)
    return out


def _unshare(out_t, tans, grad_on):
    """A rule may hand back an input's tangent itself (``x + 1``: the tangent is x's): the
    output gets a copy, so an in-place op on one never changes the other's tangent (only
    views share tangents, as in PyTorch)."""
    def own(t):
        if t is not None and any(t is x for x in tans):
            prev = STATE.grad_enabled
            STATE.grad_enabled = grad_on
            try:
                return t.clone()
            finally:
                STATE.grad_enabled = prev
        return t
    if type(out_t) in (tuple, list):
        return type(out_t)(own(t) for t in out_t)
    return own(out_t)


def _differentiable(o):
    return isinstance(o, Tensor) and o.dtype._differentiable and not o.dtype.is_complex


def _attach(out, out_t):
    if type(out) is tuple or type(out) is list:
        if out_t is None:
            return
        for o, t in zip(out, out_t):
            if t is not None and _differentiable(o):
                _set_tangent(o, t)
    elif out_t is not None and _differentiable(out):
        _set_tangent(out, out_t)


def _jvp(op, args, out, tans, grad_on):
    """The output tangent(s) of ``op(*args) -> out`` for input tangents ``tans``."""
    outs = out if type(out) in (tuple, list) else (out,)
    if "nondifferentiable" in op.tags:
        return None
    if any(isinstance(o, Tensor) and o.dtype.is_complex for o in outs):
        raise NotImplementedError(f"ember.autograd.forward_ad: {op.name} returns a complex tensor: complex dual "
                                  f"tensors are not supported (use ember.func.jvp)")
    if not any(_differentiable(o) for o in outs):
        return None
    for a in args:
        if isinstance(a, Tensor) and a.dtype.is_complex:
            raise NotImplementedError(f"ember.autograd.forward_ad: {op.name} with a complex input: complex dual "
                                      f"tensors are not supported")
    prev = STATE.grad_enabled
    STATE.grad_enabled = grad_on
    try:
        rule = _RULES.get(op.name)
        if rule is not None:
            res = rule(args, tans, out)
            if res is not NotImplemented:
                return res
        if (op.is_view or op.name in _LINEAR) and op.name not in _NOT_LINEAR and not op.list_pos \
                and all(t is None for t in tans[1:]) and tans[0] is not None:
            from ..ops.registry import dispatch
            return dispatch(op, (tans[0],) + tuple(args[1:]))
        return _double_vjp(op, args, out, tans, grad_on)
    finally:
        STATE.grad_enabled = prev


# ---------------------------------------------------------------------- custom Functions
def _wants_custom_jvp(args):
    """Whether ``Function.apply(*args)`` must go through forward AD: the mode is active (not
    suspended by an enclosing custom Function) and an argument carries a tangent."""
    return _MODE in STATE.modes and any(isinstance(a, Tensor) and _KEY in a.__dict__ for a in args)


def _custom_function_apply(cls, args):
    """A custom ``autograd.Function`` with dual inputs, as in PyTorch: ``forward`` runs with
    forward AD off, then ``cls.jvp(ctx, *input_tangents)`` (zeros for tensor inputs without
    one, None for other arguments) gives the outputs' tangents."""
    from ..ops import api
    from .function import Function
    if getattr(cls.jvp, "__func__", cls.jvp) is getattr(Function.jvp, "__func__", Function.jvp):
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")
    tans = []
    for a in args:
        if isinstance(a, Tensor):
            t = _tangent(a)
            tans.append(t if t is not None else api.zeros_like(a))
        else:
            tans.append(None)
    modes = STATE.modes
    i = len(modes) - 1 - modes[::-1].index(_MODE)
    del modes[i]
    try:
        out, ctx = cls._apply_ctx(args)
        out_t = cls.jvp(ctx, *tans)
    finally:
        modes.insert(i, _MODE)
    outs = out if isinstance(out, tuple) else (out,)
    out_ts = out_t if isinstance(out_t, tuple) else (out_t,)
    if len(out_ts) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(out_ts)} tangents for {len(outs)} outputs")
    for o, t in zip(outs, out_ts):
        if t is None or not _differentiable(o):
            continue
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(f"{cls.__name__}.jvp returned a tangent of shape {list(t.shape)} for an output of "
                               f"shape {list(o.shape)}")
        o.__dict__.pop(_KEY, None)
        _set_tangent(o, t)
    return out


# ---------------------------------------------------------------------- in-place ops
def _inplace(op, args, tans, grad_on):
    """``self.op_(*rest)`` with dual inputs: the tangent of the functional result (computed
    on the values before the write) becomes ``self``'s tangent, written into its existing
    tangent in place (so a view's write reaches its base's tangent, and the base's reaches
    its views'), or attached anew (for a view: a zero tangent is made for its base and the
    view's tangent is the same region of it)."""
    from ..ops import registry
    self = args[0]
    if self.dtype.is_complex:
        raise NotImplementedError(f"ember.autograd.forward_ad: {op.name} on a complex tensor: complex dual tensors "
                                  f"are not supported")
    fop = op.functional
    res = _forward(fop, args, grad_on)
    new_t = _jvp(fop, args, res, tans, grad_on)
    if STATE.modes:
        registry._mode_dispatch(op, args)
    else:
        registry.write_into(self, res, op.name)
    if new_t is None or not _differentiable(self):
        return self
    prev = STATE.grad_enabled
    STATE.grad_enabled = grad_on
    try:
        cur = _tangent(self)
        if cur is None:
            base = self._base
            if base is not None and _differentiable(base):
                cur = _view_tangent_from_base(self, base, new_t)
                if cur is None:
                    raise NotImplementedError(
                        f"ember.autograd.forward_ad: {op.name} writes a dual tensor into a view whose base's "
                        f"tangent ember cannot lay out like the base (negative strides, or a base tangent of "
                        f"another layout); write into a clone of the view instead")
            if cur is None:
                _set_tangent(self, _fit(new_t, self).clone() if _shares(new_t, args) else _fit(new_t, self))
                return self
            _set_tangent(self, cur)
        if new_t.dtype != cur.dtype:
            new_t = new_t.to(cur.dtype)
        cur.copy_(new_t)
    finally:
        STATE.grad_enabled = prev
    return self


def _shares(t, args):
    """Whether tangent ``t`` is (a view of) some input's tangent: attaching it to ``self``
    as is would alias two tensors' tangents."""
    for a in args:
        if isinstance(a, Tensor):
            at = _tangent(a)
            if at is not None and (t is at or (t._base is not None and t._base is (at._base or at))):
                return True
    return False


def _view_tangent_from_base(view, base, like):
    """The tangent of ``view`` as the same region of ``base``'s tangent (made, zero, in
    ``base``'s layout when ``base`` has none yet)."""
    from ..ops import api
    shape, stride = tuple(base.shape), tuple(base.stride())
    vstride, voff = tuple(view.stride()), view.storage_offset()
    if any(s < 0 for s in stride + vstride) or voff < 0:
        return None
    bt = _tangent(base)
    if bt is None:
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
        extent = max(extent, voff + 1 + sum((n - 1) * s for n, s in zip(view.shape, vstride))
                     if all(view.shape) else 0)
        storage = api.zeros(extent, dtype=like.dtype, device=base.device)
        bt = api.as_strided(storage, shape, stride, 0)
        _set_tangent(base, bt)
        return api.as_strided(storage, tuple(view.shape), vstride, voff)
    if tuple(bt.stride()) != stride or bt.storage_offset() != 0:
        return None
    root = bt._base if bt._base is not None else bt
    return api.as_strided(root, tuple(view.shape), vstride, voff + bt.storage_offset())


def _fit(t, like):
    """``t`` broadcast (materialised) to ``like``'s shape."""
    if t is None or tuple(t.shape) == tuple(like.shape):
        return t
    from ..ops import api
    return api.broadcast_to(t, tuple(like.shape)).contiguous()


# ---------------------------------------------------------------------- the generic rule
class _Ctx:
    """The backward context of one op call, built from the live arguments (what
    ``OpNode`` offers a derivative formula: ``args``, ``result``, ``needs_input_grad``)."""

    def __init__(self, op, args, result, needs):
        self._op = op
        self.args = args
        self.result = result
        self.needs_input_grad = needs

    def result_at(self, i):
        """Output ``i`` of the result (``OpNode.result_at``)."""
        r = self.result
        return r[i] if type(r) in (tuple, list) else (r if i == 0 else None)


def _double_vjp(op, args, out, tans, grad_on):
    """``J t`` from the op's backward formula ``u -> J^T u``: with ``u`` a leaf that
    requires grad, ``grad(J^T u, u, grad_outputs=t)``. When no graph is needed for reverse
    mode on top, the formula runs on detached aliases so the graph walked is this op's only."""
    from ..ops import api
    from .engine import grad as _grad
    if op.backward is None:
        raise NotImplementedError(f"Trying to use forward AD with {op.name} that does not support it because it "
                                  f"has not been implemented yet.")
    outs = out if type(out) in (tuple, list) else (out,)
    need_graph = grad_on and (any(t is not None and t._requires_grad for t in tans) or
                              any(_differentiable(o) and o._requires_grad for o in outs))

    def plain(a):
        if isinstance(a, Tensor):
            return a.detach() if a._requires_grad else a
        if type(a) in (list, tuple):
            return type(a)(plain(x) for x in a)
        return a

    STATE.grad_enabled = True
    cargs = tuple(args) if need_graph else tuple(plain(a) for a in args)
    cres = out if need_graph else (tuple(plain(o) for o in out) if type(out) in (tuple, list) else plain(out))
    us = []
    for o in outs:
        if _differentiable(o):
            u = api.zeros_like(o)
            u.requires_grad_()
            us.append(u)
        else:
            us.append(None)
    g = us[0] if type(out) not in (tuple, list) else tuple(us)
    ctx = _Ctx(op, cargs, cres, tuple(t is not None for t in tans))
    res = op.backward(ctx, g)
    if type(res) is not tuple:
        res = (res,)
    flat = []
    for gp, r in zip(op.grad_params, res):
        if op.params[gp].kind == 2:    # Tensor[]
            n = len(args[gp])
            flat.extend(r if r is not None else [None] * n)
        else:
            flat.append(r)
    roots, seeds = [], []
    for r, t in zip(flat, tans):
        if t is None or not isinstance(r, Tensor) or not r._requires_grad:
            continue
        if t.dtype != r.dtype:
            t = t.to(r.dtype)
        if tuple(t.shape) != tuple(r.shape):
            t = api.broadcast_to(t, tuple(r.shape))
        roots.append(r)
        seeds.append(t)
    live = [u for u in us if u is not None]
    if roots:
        got = _grad(roots, live, grad_outputs=seeds, allow_unused=True, create_graph=need_graph)
    else:
        got = [None] * len(live)
    STATE.grad_enabled = grad_on
    it = iter(got)
    res_t = []
    for o, u in zip(outs, us):
        if u is None:
            res_t.append(None)
            continue
        tg = next(it)
        res_t.append(api.zeros_like(o) if tg is None else tg)
    return res_t[0] if type(out) not in (tuple, list) else tuple(res_t)


# ---------------------------------------------------------------------- explicit rules
_LINEAR = frozenset({"sum", "mean", "clone", "_to_copy", "neg", "contiguous", "flip", "roll", "repeat",
                     "tril", "triu", "index_select", "gather", "_basic_index", "index", "cumsum",
                     "diag_embed", "trace", "movedim", "narrow", "constant_pad_nd", "alias"})
# views whose meaning depends on the storage geometry or the dtype, not only on the values
_NOT_LINEAR = frozenset({"as_strided", "view_as_real", "view_as_complex"})


def _api():
    from ..ops import api
    return api


def _r_add(args, tans, out):
    a, b, alpha = args
    ta, tb = tans
    if tb is not None and alpha != 1:
        tb = tb * alpha
    return _fit(_sum(ta, tb), out)


def _r_sub(args, tans, out):
    a, b, alpha = args
    ta, tb = tans
    if tb is not None:
        tb = -tb if alpha == 1 else tb * (-alpha)
    return _fit(_sum(ta, tb), out)


def _sum(x, y):
    if x is None:
        return y
    if y is None:
        return x
    return x + y


def _r_mul(args, tans, out):
    a, b = args
    ta, tb = tans
    return _fit(_sum(ta * b if ta is not None else None, a * tb if tb is not None else None), out)


def _r_div(args, tans, out):
    a, b = args[0], args[1]
    if len(args) > 2 and args[2] is not None:
        return NotImplemented          # rounding modes: the generic rule (zero almost everywhere)
    ta, tb = tans
    if not out.dtype.is_floating_point:
        return NotImplemented
    num = _sum(ta, -(out * tb) if tb is not None else None)
    return _fit(num / b, out)


def _unary(fn):
    def rule(args, tans, out):
        t = tans[0]
        if t is None:
            return None
        return fn(args[0], t, out)
    return rule


def _r_mm(args, tans, out):
    a, b = args[0], args[1]
    ta, tb = tans[0], tans[1]
    api = _api()
    mm = api.bmm if a.ndim == 3 else api.mm
    return _sum(mm(ta, b) if ta is not None else None, mm(a, tb) if tb is not None else None)


def _r_addmm(args, tans, out):
    inp, a, b, beta, alpha = args
    ti, ta, tb = tans
    api = _api()
    t = _sum(api.mm(ta, b) if ta is not None else None, api.mm(a, tb) if tb is not None else None)
    if t is not None and alpha != 1:
        t = t * alpha
    if ti is not None:
        ti = ti if beta == 1 else ti * beta
    return _fit(_sum(ti, t), out)


def _r_relu(x, t, out):
    return t * (out > 0).to(t.dtype)


def _r_softmax(args, tans, out):
    t, dim = tans[0], args[1]
    if t is None:
        return None
    return out * (t - (t * out).sum(dim, keepdim=True))


def _r_log_softmax(args, tans, out):
    t, dim = tans[0], args[1]
    if t is None:
        return None
    return t - (t * out.exp()).sum(dim, keepdim=True)


def _r_gelu(args, tans, out):
    x, approximate = args
    t = tans[0]
    if t is None or approximate != "none":
        return NotImplemented
    cdf = 0.5 * (1 + (x * (1 / math.sqrt(2))).erf())
    pdf = (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
    return t * (cdf + x * pdf)


def _r_convolution(args, tans, out):
    """Bilinear in (input, weight), plus the bias tangent per output channel."""
    from ..ops.registry import OPS, dispatch
    x, w, b = args[:3]
    rest = tuple(args[3:])
    tx, tw, tb = tans
    conv = OPS["convolution"]
    res = None
    if tx is not None:
        res = dispatch(conv, (tx, w, None) + rest)
    if tw is not None:
        res = _sum(res, dispatch(conv, (x, tw, None) + rest))
    if tb is not None:
        res = _sum(res, tb.reshape((1, -1) + (1,) * (out.ndim - 2)))
    return _fit(res, out)


def _r_cat(args, tans, out):
    """Linear in every input: the same op over the tangents (zeros where an input has none)."""
    from ..ops import api
    from ..ops.registry import OPS, dispatch
    xs = args[0]
    ts = [t if t is not None else api.zeros_like(x) for x, t in zip(xs, tans)]
    if any(not _differentiable(x) for x in xs):
        return NotImplemented
    name = "cat" if out.ndim == xs[0].ndim else "stack"
    return dispatch(OPS[name], (ts,) + tuple(args[1:]))


def _r_native_layer_norm(args, tans, out):
    x, shape, w, b, eps = args
    tx, tw, tb = tans
    y, mean, rstd = out
    k = len(shape)
    dims = tuple(range(x.ndim - k, x.ndim))
    kshape = tuple(x.shape[:x.ndim - k]) + (1,) * k
    if x._requires_grad and STATE.grad_enabled:
        # reverse mode on top: the op's mean/rstd outputs have no gradient formula (as in
        # PyTorch), so they are recomputed here in differentiable ops
        m = x.mean(dims, keepdim=True)
        r = ((x - m) * (x - m)).mean(dims, keepdim=True).add(eps).rsqrt()
    else:
        m, r = mean.reshape(kshape), rstd.reshape(kshape)
    xhat = (x - m) * r
    t_y = t_mean = t_rstd = None
    if tx is not None:
        t_mean = tx.mean(dims, keepdim=True)
        proj = (xhat * tx).mean(dims, keepdim=True)
        dxhat = r * (tx - t_mean - xhat * proj)
        t_y = dxhat * w if w is not None else dxhat
        t_rstd = (-(r * r) * proj).reshape(tuple(rstd.shape))
        t_mean = t_mean.reshape(tuple(mean.shape))
    if tw is not None:
        t_y = _sum(t_y, xhat * tw)
    if tb is not None:
        t_y = _sum(t_y, tb)
    if t_y is not None:
        t_y = _fit(t_y, y)
    return (t_y, t_mean, t_rstd)


_RULES = {
    "_softmax": _r_softmax,
    "_log_softmax": _r_log_softmax,
    "gelu": _r_gelu,
    "convolution": _r_convolution,
    "cat": _r_cat,
    "stack": _r_cat,
    "native_layer_norm": _r_native_layer_norm,
    "add": _r_add,
    "sub": _r_sub,
    "mul": _r_mul,
    "div": _r_div,
    "mm": _r_mm,
    "bmm": _r_mm,
    "addmm": _r_addmm,
    "exp": _unary(lambda x, t, out: t * out),
    "tanh": _unary(lambda x, t, out: t * (1 - out * out)),
    "sigmoid": _unary(lambda x, t, out: t * (out * (1 - out))),
    "relu": _unary(_r_relu),
    "log": _unary(lambda x, t, out: t / x),
    "sin": _unary(lambda x, t, out: t * x.cos()),
    "cos": _unary(lambda x, t, out: -(t * x.sin())),
    "sqrt": _unary(lambda x, t, out: t / (2 * out)),
    "rsqrt": _unary(lambda x, t, out: t * (-0.5 * out / x)),
    "reciprocal": _unary(lambda x, t, out: -(t * out * out)),
    "square": _unary(lambda x, t, out: 2 * x * t),
}
