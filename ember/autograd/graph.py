"""The backward graph: Nodes, edges, saved tensors, and how ops record them.

A Node is one backward function. ``next_edges[i]`` is the edge ``(node,
input_nr)`` that the gradient for the op's i-th tensor input flows into, or
None when that input needs no gradient. Leaves that require grad get an
``AccumulateGrad`` node (one per leaf, kept alive by the graph, referenced
weakly from the tensor).

Saved tensors remember the version counter value at save time; unpacking
after an in-place change raises PyTorch's error, and unpacking after the
graph was freed raises the "backward through the graph a second time" error.
"""
from __future__ import annotations

import itertools
import traceback
import weakref

from .._state import STATE
from .. import _torch_function as _tf
from ..tensor import Tensor, _alias, _make
from ..runtime import code_cache as _code_cache

_seq = itertools.count()
_new = object.__new__
_DISPATCH_CLASSES = _tf.DISPATCH_CLASSES
# a tensor's autograd history: left out of a saved wrapper's copy (it would make a cycle)
_HISTORY = frozenset(("_grad_fn", "_requires_grad", "_output_nr", "_grad", "_acc", "_hooks", "_post_acc_hooks",
                      "_retains_grad"))

_FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors "
              "after they have already been freed). Saved intermediate values of the graph are freed "
              "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
              "backward through the graph a second time or if you need to access saved tensors after "
              "calling backward.")


class Node:
    """Base of every backward function."""

    __slots__ = ("next_edges", "_seq", "_n_out", "_in_meta", "__weakref__", "__dict__")

    # Rarely set; class-level defaults keep node creation cheap.
    _pre_hooks = None
    _hooks = None
    _tensor_pre_hooks = None
    _retain_grad_hooks = None
    _trace = None
    metadata = None

    def __init__(self):
        self.next_edges = ()
        self._seq = next(_seq)
        self._n_out = 1
        self._in_meta = None
        if STATE.anomaly:
            self._trace = traceback.format_stack()[:-3]

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.next_edges)

    def apply(self, grads):
        """grads: list, one per output (None where no gradient flowed). Returns one per edge."""
        raise NotImplementedError(f"{self.name()}.apply")

    def __call__(self, *grads):
        return self.apply(list(grads))

    def release(self):
        pass

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) -> None or new grad_inputs, after the node runs."""
        if self._hooks is None:
            self._hooks = {}
        return _Handle(self._hooks, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) -> None or new grad_outputs, before the node runs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return _Handle(self._pre_hooks, fn)

    def _register_hook_dict(self, tensor):  # torch API compatibility
        pass

    @property
    def _sequence_nr(self):
        return self._seq

    def _anomaly_trace(self):
        return "".join(self._trace) if self._trace else None


class _Handle:
    """RemovableHandle over a dict of id -> fn (insertion ordered)."""

    _ids = itertools.count()

    def __init__(self, store, fn):
        self.id = next(self._ids)
        self._store = store
        store[self.id] = fn

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# ---------------------------------------------------------------------- saved tensors
class _SavedHooks:
    stack: list = []
    disabled = None      # disable_saved_tensors_hooks's message while it is active


class SavedTensor:
    """A tensor saved for backward, with its version at save time.

    Four slots, so ``record`` can make one without a Python-level ``__init__``
    (``_fast_saved``): ``_t`` the saved input tensor (None for an output or a
    packed tensor), ``_vc``/``_version`` the version counter and its value at
    save time (``_vc`` is None once released), ``_x`` None or a ``_SavedExtra``
    holding what an output or a ``saved_tensors_hooks`` pack needs.
    """

    __slots__ = ("_t", "_vc", "_version", "_x")

    def __init__(self, t, is_output=False):
        vc = t._vc
        if vc is None:
            vc = t._vc = [0]
        self._vc = vc
        self._version = vc[0]
        hooks = _SavedHooks.stack
        if hooks:
            pack, unpack = hooks[-1]
            self._t = None
            x = self._x = _SavedExtra(is_output)
            x.packed = pack(t)
            x.unpack = unpack
        elif is_output:
            # Keep only the data: holding the output itself would make a cycle
            # out -> grad_fn -> saved out.
            self._t = None
            x = self._x = _SavedExtra(True)
            x.data = t._data
            x.dtype = t.dtype
            x.device = t.device
            x.requires_grad = t._requires_grad
            if t.__class__ in _DISPATCH_CLASSES:
                # a __torch_dispatch__ wrapper: its values live in its attributes, not in _data
                x.proto = {k: v for k, v in t.__dict__.items() if k not in _HISTORY}, t.__class__
        else:
            self._t = t
            self._x = None

    def unpack(self, owner=None, output_nr=0):
        vc = self._vc
        if vc is None:
            raise RuntimeError(_FREED_MSG)
        x = self._x
        if x is not None and x.unpack is not None:
            return x.unpack(x.packed)
        if vc[0] != self._version:
            t = self._t
            desc = (f"[ember.{(t.dtype if t is not None else x.dtype).legacy_name}Tensor "
                    f"[{', '.join(str(s) for s in (t._data.shape if t is not None else x.data.shape))}]]")
            who = ""
            if x is not None and x.is_output and owner is not None:
                who = f", which is output {output_nr} of {owner.name()},"
            elif t is not None and t._grad_fn is not None:
                who = f", which is output {t._output_nr} of {t._grad_fn.name()},"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: {desc}{who} is at version {vc[0]}; expected version {self._version} "
                f"instead. Hint: enable anomaly detection to find the operation that failed to compute "
                f"its gradient, with ember.autograd.set_detect_anomaly(True).")
        t = self._t
        if t is not None:
            return t
        if x.proto is not None:
            attrs, cls = x.proto
            out = _new(cls)
            out._data, out.dtype, out.device = x.data, x.dtype, x.device
            out.__dict__.update(attrs)
        else:
            out = _make(x.data, x.device, x.dtype)
        out._vc = vc
        if owner is not None and x.requires_grad:
            out._requires_grad = True
            out._grad_fn = owner
            out._output_nr = output_nr
        return out

    def release(self):
        self._vc = None
        self._t = None
        self._x = None

    def register_hooks(self, pack_hook, unpack_hook):
        """Pack this saved tensor now with ``pack_hook``; backward then reads ``unpack_hook(packed)``
        (torch's ``grad_fn._raw_saved_<name>.register_hooks``)."""
        if not (callable(pack_hook) and callable(unpack_hook)):
            raise TypeError("register_hooks(): pack_hook and unpack_hook must be callables")
        if self._vc is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of "
                "the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
                "you need to backward through the graph a second time or if you need to access saved variables "
                "after calling backward.")
        x = self._x
        if x is not None and x.unpack is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: "
                               "only one pair of hooks is allowed at a time.")
        value = self.unpack()
        extra = _SavedExtra(x.is_output if x is not None else False)
        extra.packed = pack_hook(value)
        extra.unpack = unpack_hook
        self._t = None
        self._x = extra


class _SavedExtra:
    """What a saved output (its data, not the tensor) or a packed saved tensor keeps."""

    __slots__ = ("is_output", "packed", "unpack", "data", "dtype", "device", "requires_grad", "proto")

    def __init__(self, is_output):
        self.is_output = is_output
        self.packed = None
        self.unpack = None
        self.proto = None


def _fast_saved(t):
    """``SavedTensor(t)`` for an input when no saved_tensors_hooks are active."""
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    s = _new(SavedTensor)
    s._t = t
    s._vc = vc
    s._version = vc[0]
    s._x = None
    return s


class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor) -> obj`` at save, ``unpack_hook(obj) -> tensor`` at use."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _SavedHooks.disabled is not None:
            raise RuntimeError(_SavedHooks.disabled)
        _SavedHooks.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _SavedHooks.stack.pop()


class save_on_cpu(saved_tensors_hooks):
    def __init__(self, pin_memory=False):
        super().__init__(lambda t: (t.device, t.cpu()), lambda p: p[1].to(p[0]))


class _Meta:
    """What backward may need of an unsaved tensor input: its metadata."""

    __slots__ = ("_shape", "dtype", "device")

    def __init__(self, shape, dtype, device):
        self._shape = shape
        self.dtype = dtype
        self.device = device

    @property
    def shape(self):
        from ..types import Size
        return Size(self._shape)

    @property
    def ndim(self):
        return len(self._shape)

    def size(self, dim=None):
        return self.shape if dim is None else self._shape[dim]

    def dim(self):
        return len(self._shape)

    def numel(self):
        n = 1
        for s in self._shape:
            n *= s
        return n


def _fast_meta(m):
    meta = _new(_Meta)
    meta._shape, meta.dtype, meta.device = m
    return meta


# ---------------------------------------------------------------------- op nodes
from ..types import float16 as _F16, bfloat16 as _BF16  # noqa: E402


class _Float32Ctx:
    """A node seen by its derivative formula with every float16/bfloat16 tensor among its
    arguments and result as a float32 copy (``OpDef.opmath_backward``)."""

    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    @staticmethod
    def _up(v):
        t = type(v)
        if t is Tensor:
            return v.float() if v.dtype is _F16 or v.dtype is _BF16 else v
        if t is tuple or t is list:
            return t(_Float32Ctx._up(x) for x in v)
        return v

    @property
    def args(self):
        return self._up(self._node.args)

    @property
    def result(self):
        return self._up(self._node.result)

    def result_at(self, i):
        return self._up(self._node.result_at(i))

    def __getattr__(self, name):
        return getattr(self._node, name)


def _opmath_backward(node, op, g):
    """``op.backward`` in float32 for a half gradient, each input's gradient rounded once to
    its input's dtype (torch's fused backward kernels compute in float: their opmath type)."""
    half = g.dtype
    res = op.backward(_Float32Ctx(node), g.float())
    one = type(res) is not tuple
    res = (res,) if one else res
    args = node._args
    out = []
    for k, r in enumerate(res):
        if type(r) is Tensor and r.dtype.is_floating_point and r.dtype is not half:
            i = op.grad_params[k] if k < len(op.grad_params) else None
            a = args[i] if i is not None and i < len(args) else None
            dt = a.dtype if a is not None and hasattr(a, "dtype") and a.dtype.is_floating_point else half
            r = r.to(dt)
        out.append(r)
    return out[0] if one else tuple(out)


class OpNode(Node):
    """The backward of one registry op; the class name is the op's grad_fn name."""

    __slots__ = ("_args",)
    _op = None          # set on each per-op subclass
    _result = None
    _released = False

    @property
    def needs_input_grad(self):
        return tuple([e is not None for e in self.next_edges])

    @property
    def args(self):
        if self._released:
            raise RuntimeError(_FREED_MSG)
        out = []
        for a in self._args:
            t = type(a)
            if t is SavedTensor:
                a = a.unpack()
            elif t is list:
                a = [x.unpack() if type(x) is SavedTensor else x for x in a]
            out.append(a)
        return tuple(out)

    @property
    def result(self):
        r = self._result
        if r is None:
            raise RuntimeError(f"{self.name()} did not save its result")
        if type(r) is tuple:
            return tuple(s.unpack(self, i) if s is not None else None for i, s in enumerate(r))
        return r.unpack(self, 0)

    def result_at(self, i):
        """Output ``i`` of a node that saved its (tuple) result, unpacked alone: an output
        the derivative does not read may since have been modified in place (batch norm's
        normalised output under ``ReLU(inplace=True)``) without failing the version check."""
        r = self._result
        if r is None:
            raise RuntimeError(f"{self.name()} did not save its result")
        s = r[i] if type(r) is tuple else (r if i == 0 else None)
        return s.unpack(self, i) if s is not None else None

    @property
    def next_functions(self):
        hidden = self._op.scalar_overload
        edges = self.next_edges
        if hidden:
            keep = []
            for k, i in enumerate(self._op.grad_params):
                if i in hidden and not isinstance(self._args[i], (SavedTensor, _Meta, list)):
                    continue
                keep.append(edges[k])
            edges = keep
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in edges)

    # torch exposes saved values as _saved_<name> (and the SavedTensor objects as _raw_saved_<name>)
    def __getattr__(self, name):
        if name.startswith("_raw_saved_"):
            pname = name[len("_raw_saved_"):]
            if pname == "result" and self._result is not None and type(self._result) is not tuple:
                return self._result
            for p, a in zip(self._op.params, self._args):
                if p.name == pname and type(a) is SavedTensor:
                    return a
            raise AttributeError(name)
        if name.startswith("_saved_"):
            pname = name[len("_saved_"):]
            for p, a in zip(self._op.params, self.args):
                if p.name == pname:
                    # (a tensor the backward does not read is not saved: None, as torch's
                    # ``MulBackward0._saved_self`` when ``other`` does not require grad)
                    return None if type(a) is _Meta else a
            if pname == "result":
                return self.result
        raise AttributeError(name)

    def apply(self, grads):
        op = self._op
        g = grads[0] if self._n_out == 1 else tuple(grads)
        if (g is not None and g.dtype.is_complex) if type(g) is not tuple else any(
                x is not None and x.dtype.is_complex for x in g):
            if op.complex_grad == "holomorphic":
                return self._apply_holomorphic(g)
        if op.opmath_backward and type(g) is Tensor and g.dtype in op.opmath_backward:
            res = _opmath_backward(self, op, g)
        else:
            res = op.backward(self, g)
        if type(res) is not tuple:
            res = (res,)
        if not op.list_pos:
            return list(res[:len(op.grad_params)])
        flat = []
        for gp, r in zip(op.grad_params, res):
            if op.params[gp].kind == 2:  # Tensor[]
                n = len(self._args[gp])
                flat.extend(r if r is not None else [None] * n)
            else:
                flat.append(r)
        return flat

    def _apply_holomorphic(self, g):
        """The formula of a holomorphic op over a complex gradient, in torch's convention: the
        real formula computes ``g * f'(z)``; torch's gradient is ``g * conj(f'(z))``, which is
        ``conj(formula(conj(g)))``. (A real input's gradient is then the real part: the
        engine takes it where the input's dtype is real.)"""
        from ..ops import api

        def cj(x):
            return api.conj_physical(x) if x is not None and x.dtype.is_complex else x
        g = tuple(cj(x) for x in g) if type(g) is tuple else cj(g)
        res = self._op.backward(self, g)
        if type(res) is not tuple:
            res = (res,)
        res = tuple([cj(r) for r in x] if type(x) is list else cj(x) for x in res)
        op = self._op
        if not op.list_pos:
            return list(res[:len(op.grad_params)])
        flat = []
        for gp, r in zip(op.grad_params, res):
            if op.params[gp].kind == 2:  # Tensor[]
                n = len(self._args[gp])
                flat.extend(r if r is not None else [None] * n)
            else:
                flat.append(r)
        return flat

    def release(self):
        self._released = True
        for a in self._args:
            if type(a) is SavedTensor:
                a._vc = a._t = a._x = None    # SavedTensor.release, inlined
            elif type(a) is list:
                for x in a:
                    if type(x) is SavedTensor:
                        x.release()
        r = self._result
        if r is not None:
            if type(r) is tuple:
                for s in r:
                    if s is not None:
                        s.release()
            else:
                r.release()


def _unpack_arg(a, node):
    t = type(a)
    if t is SavedTensor:
        return a.unpack()
    if t is list:
        return [x.unpack() if type(x) is SavedTensor else x for x in a]
    return a


class AccumulateGrad(Node):
    """Sink of a leaf: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__()
        self.variable = variable
        self._in_meta = ((variable._data.shape, variable.dtype, variable.device),)

    def apply(self, grads):
        raise RuntimeError("AccumulateGrad is run by the engine")


def gradient_edge(t):
    """The (node, input_nr) a gradient for ``t`` flows into, or None."""
    if t._diff_view:
        refresh_view_grad_fn(t)
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad:
        return (accumulate_node(t), 0)
    return None


def accumulate_node(t):
    ref = t._acc
    node = ref() if ref is not None else None
    if node is None:
        node = _new_acc(t)
    return node


def _new_acc(t):
    """A leaf's AccumulateGrad node (``AccumulateGrad(t)`` without the __init__ chain)."""
    node = _new(AccumulateGrad)
    node.next_edges = ()
    node._seq = next(_seq)
    node._n_out = 1
    node.variable = t
    node._in_meta = ((t._data.shape, t.dtype, t.device),)
    if STATE.anomaly:
        node._trace = traceback.format_stack()[:-3]
    t._acc = weakref.ref(node)
    return node


def _plan(op):
    """Per-op recording plan: ``(op.save, ((index, kind, keep), ...))`` over the tensor-ish params."""
    save = op.save
    items = []
    for i in op.grad_params:
        p = op.params[i]
        items.append((i, p.kind, save is None or p.name in save))
    plan = op._rec_plan = (save, tuple(items))
    return plan


def record(op, args, out):
    """Attach a backward node for ``op(*args) -> out``; called with grad mode on."""
    if op.backward is None:
        outs = out if type(out) is tuple else (out,)
        if any(o is not None and o.dtype._differentiable for o in outs) \
                and "nondifferentiable" not in op.tags:
            raise RuntimeError(f"the derivative for '{op.name}' is not implemented.")
        return out
    return op._rec(args, out)


def build_record(op):
    """``record`` specialised to one op (its params, what it saves, its node class):
    straight-line code, no loop over a plan. Ops with a Tensor[] argument, and
    ops without a derivative, use the generic ``record``."""
    if op.backward is None:
        return None
    if op.list_pos:
        return lambda args, out: _record_generic(op, args, out)
    save = op.save
    n = len(op.params)
    names = [f"a{i}" for i in range(n)]
    L = [f"def rec_{op.name}(args, out):",
         f"    {', '.join(names)}{',' if n == 1 else ''} = args",
         "    hooked = _SH.stack"]
    sv = list(names)
    es, ms = [], []
    for i in op.grad_params:
        p = op.params[i]
        a = f"a{i}"
        keep = save is None or p.name in save
        sv[i], es_i, ms_i = f"s{i}", f"e{i}", f"m{i}"
        es.append(es_i)
        ms.append(ms_i)
        body = [f"if {a}._diff_view:",
                f"    _refresh({a})",
                f"fn = {a}._grad_fn",
                "if fn is not None:",
                f"    e{i} = (fn, {a}._output_nr)",
                f"elif {a}._requires_grad:",
                f"    ref = {a}._acc",
                "    acc = ref() if ref is not None else None",
                f"    e{i} = (acc if acc is not None else _new_acc({a}), 0)",
                "else:",
                f"    e{i} = None",
                f"m{i} = ({a}._data.shape, {a}.dtype, {a}.device)"]
        save_body = ["if hooked:",
                     f"    s{i} = _Saved({a})",
                     "else:",
                     f"    vc = {a}._vc",
                     "    if vc is None:",
                     f"        vc = {a}._vc = [0]",
                     f"    s{i} = _new(_Saved)",
                     f"    s{i}._t = {a}",
                     f"    s{i}._vc = vc",
                     f"    s{i}._version = vc[0]",
                     f"    s{i}._x = None"]
        meta_body = [f"s{i} = _new(_Meta)",
                     f"s{i}._shape, s{i}.dtype, s{i}.device = m{i}"]
        other = op.save_if_grad.get(p.name) if keep else None
        if other is not None:
            # saved only when the param whose gradient reads it requires grad (op.save_if_grad)
            j = next(k for k, q in enumerate(op.params) if q.name == other)
            body += [f"if isinstance(a{j}, _T) and a{j}._requires_grad:"] + ["    " + b for b in save_body]
            body += ["else:"] + ["    " + b for b in meta_body]
        else:
            body += save_body if keep else meta_body
        if p.kind == 0 and not p.optional:   # a Tensor by the time an op records
            L += ["    " + b for b in body]
        else:
            L += [f"    if isinstance({a}, _T):"] + ["        " + b for b in body]
            L += ["    else:", f"        e{i} = m{i} = None", f"        s{i} = {a}"]
    name = op.grad_fn_name
    if type(name) is str:
        cls = op._node_classes.get(name) or op.node_class(name)
        L.append("    node = _new(_cls)")
    else:
        cls = None
        L += ["    name = _op.grad_fn_name(args)",
              "    node = _new(_op._node_classes.get(name) or _op.node_class(name))"]
    L += [f"    node.next_edges = ({', '.join(es)}{',' if len(es) == 1 else ''})",
          "    node._seq = _next(_seq)",
          f"    node._in_meta = [{', '.join(ms)}]",
          f"    node._args = [{', '.join(sv)}]",
          "    if _S.anomaly:",
          "        node._trace = _format_stack()[:-1]",
          "    if type(out) is tuple:",
          "        return _tuple_history(_op, node, out)",
          "    node._n_out = 1",
          "    if out.dtype._differentiable:",
          "        d = out.__dict__",
          "        d['_requires_grad'] = True",
          "        d['_grad_fn'] = node"]
    if op.is_view:
        L += ["        vc = out._vc",
              "        if vc is not None:",
              "            # (a view op traced through its decomposition may return a fresh tensor)",
              "            d['_diff_view'] = True",
              "            d['_view_version'] = vc[0]"]
    if op.save_result:
        L.append("    node._result = _Saved(out, True)")
    L.append("    return out")
    ns = {"_op": op, "_cls": cls, "_SH": _SavedHooks, "_refresh": refresh_view_grad_fn, "_new_acc": _new_acc,
          "_Saved": SavedTensor, "_new": _new, "_Meta": _Meta, "_T": Tensor, "_next": next, "_seq": _seq,
          "_S": STATE, "_format_stack": traceback.format_stack, "_tuple_history": _tuple_history}
    exec(_code_cache.compile_source("\n".join(L) + "\n", f"<ember record {op.name}>"), ns)
    return ns[f"rec_{op.name}"]


def _tuple_history(op, node, out):
    node._n_out = len(out)
    for k, o in enumerate(out):
        if o is not None and o.dtype._differentiable:
            _set_history(o, node, k, op.is_view)
    if op.save_result:
        node._result = tuple(SavedTensor(o, True) if o is not None else None for o in out)
    return out


def _record_generic(op, args, out):
    plan = op._rec_plan
    if plan is None or plan[0] is not op.save:
        plan = _plan(op)
    hooked = _SavedHooks.stack
    edges = []
    metas = []
    saved = list(args)
    for i, kind, keep in plan[1]:
        a = args[i]
        if kind == 2:
            lst = []
            for x in a:
                edges.append(gradient_edge(x))
                m = (x._data.shape, x.dtype, x.device)
                metas.append(m)
                lst.append(SavedTensor(x) if keep else _fast_meta(m))
            saved[i] = lst
        elif isinstance(a, Tensor):
            if a._diff_view:
                edges.append(gradient_edge(a))
            else:
                fn = a._grad_fn
                if fn is not None:
                    edges.append((fn, a._output_nr))
                elif a._requires_grad:
                    ref = a._acc
                    acc = ref() if ref is not None else None
                    edges.append((acc if acc is not None else _new_acc(a), 0))
                else:
                    edges.append(None)
            m = (a._data.shape, a.dtype, a.device)
            metas.append(m)
            if not keep:
                saved[i] = _fast_meta(m)
            elif hooked:
                saved[i] = SavedTensor(a)
            else:
                saved[i] = _fast_saved(a)
        else:
            edges.append(None)
            metas.append(None)
    name = op.grad_fn_name
    if type(name) is not str:
        name = name(args)
    cls = op._node_classes.get(name) or op.node_class(name)
    node = _new(cls)
    node.next_edges = tuple(edges)
    node._seq = next(_seq)
    node._in_meta = metas
    node._args = saved
    if STATE.anomaly:
        node._trace = traceback.format_stack()[:-2]
    if type(out) is tuple:
        node._n_out = len(out)
        for k, o in enumerate(out):
            if o is not None and o.dtype._differentiable:
                _set_history(o, node, k, op.is_view)
        if op.save_result:
            node._result = tuple(SavedTensor(o, True) if o is not None else None for o in out)
    else:
        node._n_out = 1
        if out.dtype._differentiable:
            d = out.__dict__
            d["_requires_grad"] = True
            d["_grad_fn"] = node
            if op.is_view and out._vc is not None:
                # (a view op traced through its decomposition may return a fresh tensor)
                d["_diff_view"] = True
                d["_view_version"] = out._vc[0]
        if op.save_result:
            node._result = SavedTensor(out, True)
    return out


def _set_history(o, node, k, is_view):
    d = o.__dict__
    d["_requires_grad"] = True
    d["_grad_fn"] = node
    if k:
        d["_output_nr"] = k
    if is_view and o._vc is not None:
        d["_diff_view"] = True
        d["_view_version"] = o._vc[0]


# ---------------------------------------------------------------------- in-place + views
def inplace_with_autograd(op, args):
    """``self.op_(*rest)`` when autograd must record it.

    The functional op runs on an alias of ``self`` that holds a copy of its
    current data and its current autograd edge, so the backward node sees the
    pre-mutation value; then the result is written into ``self`` and ``self``'s
    history is rebased onto the new node. When ``self`` is a view of a tensor
    that needs grad, the base's history is rebased through a CopySlices node.
    """
    from ..ops.registry import write_into, dispatch
    self = args[0]
    if self._requires_grad and self._grad_fn is None and not self._diff_view:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._base if self._diff_view else None
    # PyTorch's test: a view needing grad whose base is a leaf. The base needs grad as well,
    # except after base.detach_(), which leaves the views taken before it with their history
    if base is not None and self._requires_grad and base._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if STATE.modes:
        # dispatched, so tracing modes (make_fx) see the pre-mutation copy
        from .engine import _clone_below_autograd
        orig = _clone_below_autograd(self)
    else:
        orig = _make(self._data.copy(), self.device, self.dtype)
    edge = gradient_edge(self)
    if edge is not None:
        orig._requires_grad = True
        if isinstance(edge[0], AccumulateGrad):
            # self is a leaf that does not require grad (handled above otherwise)
            orig._acc = weakref.ref(edge[0])
        else:
            orig._grad_fn, orig._output_nr = edge
    res = dispatch(op.functional, (orig,) + tuple(args[1:]))
    if STATE.modes:
        # tracing modes record the write as the in-place op itself
        from ..ops.registry import _mode_dispatch
        _mode_dispatch(op, args)
    else:
        write_into(self, res, op.name)
    if not res._requires_grad:
        return self
    if base is None:
        self._grad_fn = res._grad_fn
        self._output_nr = res._output_nr
        self._requires_grad = True
        return self
    # self is a differentiable view: rebase the base through CopySlices.
    old_edge = gradient_edge(base)
    cs = CopySlices(base, self)
    cs.next_edges = (old_edge, (res._grad_fn, res._output_nr))
    cs._in_meta = ((base._data.shape, base.dtype, base.device), (self._data.shape, self.dtype, self.device))
    base._grad_fn = cs
    base._output_nr = 0
    base._requires_grad = True
    self._requires_grad = True
    self._view_version = -1  # force refresh: self now reads the new base
    refresh_view_grad_fn(self)
    return self


def _geometry(t):
    return (tuple(t._data.shape), t.stride(), t.storage_offset())


def _real_geometry(geom):
    """The geometry of ``view_as_real`` of a complex tensor of geometry ``geom``, in its floats."""
    shape, stride, off = geom
    return (tuple(shape) + (2,), tuple(2 * s for s in stride) + (1,), 2 * off)


def _views_parts(base, view):
    """``view`` is a real view (``.real``/``.imag``/``view_as_real``) of a complex ``base``: its
    geometry counts floats, so the base's gradient is handled as ``view_as_real`` of it."""
    return base.dtype.is_complex and not view.dtype.is_complex


class CopySlices(Node):
    """Backward of writing into a view of ``base``: the view's region of the
    incoming gradient goes to the written value, the rest to the old base."""

    __slots__ = ("base_geom", "view_geom", "parts")

    def __init__(self, base, view):
        super().__init__()
        self.parts = _views_parts(base, view)
        self.base_geom = _real_geometry(_geometry(base)) if self.parts else _geometry(base)
        self.view_geom = _geometry(view)

    def apply(self, grads):
        from ..ops import api
        g = grads[0]
        if g is None:
            return [None, None]
        if self.parts:
            g = api.view_as_real(g.contiguous())
        g_value = api._as_strided_from_geometry(g, self.base_geom, self.view_geom)
        g_base = api._as_strided_zero_region(g, self.base_geom, self.view_geom)
        if self.parts:
            g_base = api.view_as_complex(g_base.contiguous())
        return [g_base, g_value]


class AsStridedViewNode(Node):
    """Backward of a view whose base was modified in place since it was made:
    the gradient is scattered into the base's geometry (AsStridedBackward0)."""

    __slots__ = ("base_geom", "view_geom", "parts")

    def __init__(self, base, view):
        super().__init__()
        self.parts = _views_parts(base, view)
        self.base_geom = _real_geometry(_geometry(base)) if self.parts else _geometry(base)
        self.view_geom = _geometry(view)

    def apply(self, grads):
        from ..ops import api
        g = grads[0]
        if g is None:
            return [None]
        r = api._as_strided_scatter_grad(g, self.base_geom, self.view_geom)
        return [api.view_as_complex(r.contiguous()) if self.parts else r]


def refresh_view_grad_fn(t):
    """Regenerate a differentiable view's grad_fn if its base changed in place."""
    vc = t._vc
    if vc is None or t._view_version == vc[0]:
        return
    base = t._base
    # a base without history (its views made without grad, or a base detach_()ed since, then
    # changed in place): PyTorch keeps a view with no grad_fn as it is, but replaces an old
    # grad_fn by one through the base, which then has no edge; the old one would send a
    # gradient for values the view no longer holds
    if base is None or (not base._requires_grad and t._grad_fn is None):
        return
    node = type("AsStridedBackward0", (AsStridedViewNode,), {"__slots__": ()})(base, t)
    node.next_edges = (gradient_edge(base),)
    node._in_meta = ((base._data.shape, base.dtype, base.device),)
    t._grad_fn = node
    t._output_nr = 0
    t._view_version = vc[0]


# ---------------------------------------------------------------------- tensor hooks
def register_tensor_hook(t, hook):
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    fn = t.grad_fn
    if fn is None:
        if t._hooks is None:
            t._hooks = {}
        return _Handle(t._hooks, hook)
    if fn._tensor_pre_hooks is None:
        fn._tensor_pre_hooks = {}
    store = fn._tensor_pre_hooks.setdefault(t._output_nr, {})
    return _Handle(store, hook)


def register_post_accumulate_hook(t, hook):
    if t.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if t._post_acc_hooks is None:
        t._post_acc_hooks = {}
    return _Handle(t._post_acc_hooks, hook)


def install_retain_grad(t):
    fn = t.grad_fn
    ref = weakref.ref(t)
    if fn._retain_grad_hooks is None:
        fn._retain_grad_hooks = {}

    def retain(grad):
        tt = ref()
        if tt is None:
            return
        if tt._grad is None:
            if STATE.modes:
                from .engine import _clone_below_autograd
                tt._grad = _clone_below_autograd(grad)
            else:
                tt._grad = _make(grad._data.copy(), grad.device, grad.dtype)
        else:
            tt._grad = tt._grad + grad
    fn._retain_grad_hooks[t._output_nr] = retain
    t._retains_grad = True


# ---------------------------------------------------------------------- several tensors, one hook
class _MultiHandle:
    """The handle of :func:`register_multi_grad_hook`: removes the per-tensor hooks."""

    def __init__(self, handles):
        self._handles = handles

    def remove(self):
        for h in self._handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """torch.autograd.graph.register_multi_grad_hook: ``fn`` runs once per backward pass over
    ``tensors``' gradients -- ``mode="all"``: after every one of them that this pass reaches got
    its gradient, called with a tuple (None for the tensors the pass does not reach);
    ``mode="any"``: at the first gradient computed, called with it. Tensors that do not require
    grad take no part. Built from per-tensor hooks and the engine's record of the running pass
    (its id, and the nodes it runs, engine.CURRENT_PASS)."""
    from . import engine
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    live = [(i, t) for i, t in enumerate(tensors) if isinstance(t, Tensor) and t.requires_grad]
    state = {"pass": None, "grads": None, "left": 0}

    def start(pass_id):
        state["pass"] = pass_id
        state["grads"] = [None] * len(tensors)
        runs = engine.CURRENT_PASS[1]
        reached = 0
        for _, t in live:
            edge = gradient_edge(t)
            if edge is not None and (runs is None or edge[0] in runs):
                reached += 1
        state["left"] = reached

    def make(i):
        def hook(grad):
            pass_id = engine.CURRENT_PASS[0]
            if mode == "any":
                if state["pass"] != pass_id:
                    state["pass"] = pass_id
                    fn(grad)
                return None
            if state["pass"] != pass_id:
                start(pass_id)
            state["grads"][i] = grad
            state["left"] -= 1
            if state["left"] == 0:
                grads, state["grads"] = tuple(state["grads"]), None
                fn(grads)
            return None
        return hook

    return _MultiHandle([t.register_hook(make(i)) for i, t in live])


# ---- torch.autograd.graph's remaining public names --------------------------------------------
from ..nn.modules.module import RemovableHandle  # noqa: E402,F401 - the handle hooks return

# CUDA-stream switches of PyTorch's engine: ember's backward runs on the CPU, on one stream, so
# neither situation they govern (a gradient accumulated on another stream than its leaf's; a
# graph capture's stale stream) can arise; the values are kept and validated as PyTorch's.
_stream_flags = {"warn_on_accumulate_grad_stream_mismatch": True, "override_stale_capture_stream": False}


def _set_stream_flag(name, enabled):
    if not isinstance(enabled, bool):
        raise RuntimeError(f"enabled must be a bool, but got {type(enabled).__name__}")
    _stream_flags[name] = enabled


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """Whether to warn when a leaf's gradient is accumulated on another stream than the
    leaf's (no effect on ember: one CPU stream)."""
    _set_stream_flag("warn_on_accumulate_grad_stream_mismatch", enabled)


def set_override_stale_capture_stream(enabled: bool) -> None:
    """Whether backward may replace a stale graph-capture stream (no effect on ember: no
    graph capture)."""
    _set_stream_flag("override_stale_capture_stream", enabled)


def region_activation_memory_budget(budget: float):
    """Per-region activation memory budget for a compiled forward (PyTorch's prototype).
    Validated as PyTorch's; eager use raises PyTorch's error. ember's partitioner takes one
    budget per program: set ``ember.aot.config.activation_memory_budget`` instead."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"torch.autograd.graph.region_activation_memory_budget: expects a float, got "
                        f"{type(budget).__name__}")
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"torch.autograd.graph.region_activation_memory_budget: must be in [0, 1], got {budget}")
    from ..compiler import is_compiling
    if not is_compiling():
        raise RuntimeError("torch.autograd.graph.region_activation_memory_budget can only be used inside a "
                           "torch.compile region; it has no effect in eager mode.")
    raise NotImplementedError("ember.autograd.graph.region_activation_memory_budget: per-region budgets are not "
                              "supported; set ember.aot.config.activation_memory_budget for the whole program")
