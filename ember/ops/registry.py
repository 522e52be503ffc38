"""The operator registry, which is the dispatcher.

Every operator is one ``OpDef`` record, made by ``defop(schema, ...)``:

* ``schema``      ``"mul(Tensor self, Tensor|Scalar other) -> Tensor"``: argument
                  names, defaults, which arguments are tensors;
* ``kernel``      ``kernel(xp, *args)`` over backend arrays (``xp`` is numpy or
                  cupy, so one body usually serves both devices);
* ``meta``        output metadata from input metadata (fake tensors use it);
* ``backward``    the derivative formula ``backward(ctx, grad)`` written in ember
                  ops (so it is differentiable again); ``ctx.args`` are the
                  call's arguments with saved tensors unpacked, ``ctx.result``
                  the saved output, ``ctx.needs_input_grad`` one flag per
                  tensor argument. It returns one gradient per tensor argument
                  (a list for a ``Tensor[]`` argument, None where there is none);
* ``decomp``      the decomposition into prims (filled in by ember.prims);
* ``tags``        pointwise, reduction, view, inplace, random, nondeterministic,
                  data_dependent, nondifferentiable, composite.

A *composite* op has no kernel: its implementation is Python over other ember
ops, whose records give it autograd and meta for free.

A call goes: override protocol (``__ember_function__``, used by fx proxies)
→ Autograd (record a Node when grad mode is on and an input requires grad)
→ the mode stack (fake tensors, tracing, ...) → the backend kernel.

The public bindings (``ember.mul``, ``Tensor.mul``, ``Tensor.mul_``) are
generated from the schema as plain Python functions with the exact
signature, so binding arguments costs no ``inspect`` machinery per call.
A functional op that is not a view also takes torch's keyword-only ``out=``:
the binding's first statement sends a call with ``out`` to ``ember/ops/_out.py``
(compute as usual, then check and write into ``out``), so a call without it
pays one ``is not None`` test.
Their code objects are cached on disk (``_binding_cache``): compiling them
was a third of ``import ember``.
"""
from __future__ import annotations

import ast
import numbers
import re

import numpy as np

from .. import types as _t
from . import _binding_cache
from .. import _torch_function as _tf
from .._state import STATE
from ..tensor import Tensor, _make
from ..types import _BY_NP

_new = object.__new__

OPS: dict[str, "OpDef"] = {}

_REQUIRED = object()
_SCALARS = (int, float, bool, complex, np.integer, np.floating, np.bool_, np.complexfloating)

# Argument kinds.
K_TENSOR, K_TENSOR_OR_SCALAR, K_TENSOR_LIST, K_OTHER = range(4)


class Param:
    __slots__ = ("name", "type", "kind", "optional", "default", "kwonly")

    def __init__(self, name, typ, default, kwonly):
        self.name = name
        self.type = typ
        self.optional = typ.endswith("?")
        base = typ.rstrip("?")
        if base == "Tensor":
            self.kind = K_TENSOR
        elif base == "Tensor|Scalar":
            self.kind = K_TENSOR_OR_SCALAR
        elif base == "Tensor[]":
            self.kind = K_TENSOR_LIST
        else:
            self.kind = K_OTHER
        self.default = default
        self.kwonly = kwonly


_NAME_RE = re.compile(r"^\s*(\w+)\(")


def parse_schema(schema):
    """``name(params) -> returns``; the params end at the parenthesis matching the first one."""
    m = _NAME_RE.match(schema)
    if not m:
        raise ValueError(f"bad op schema {schema!r}")
    name = m.group(1)
    depth, end = 0, None
    for i in range(m.end() - 1, len(schema)):
        ch = schema[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end is None:
        raise ValueError(f"bad op schema {schema!r}: unbalanced parentheses")
    params_src = schema[m.end():end]
    rest = schema[end + 1:].strip()
    if rest and not rest.startswith("->"):
        raise ValueError(f"bad op schema {schema!r}: expected '->' after the parameters")
    returns = rest[2:].strip() if rest else "Tensor"
    params = []
    kwonly = False
    for part in _split_params(params_src):
        part = part.strip()
        if not part:
            continue
        if part == "*":
            kwonly = True
            continue
        if "=" in part:
            decl, default_src = part.split("=", 1)
            default = _parse_default(default_src.strip())
        else:
            decl, default = part, _REQUIRED
        typ, pname = decl.strip().rsplit(None, 1)
        params.append(Param(pname, typ.strip(), default, kwonly))
    return name, params, returns


def _split_params(src):
    out, depth, cur = [], 0, []
    for ch in src:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def _parse_default(src):
    if src == "None":
        return None
    if src in ("True", "False"):
        return src == "True"
    return ast.literal_eval(src)


class OpDef:
    """One operator. See the module docstring."""

    # How autograd treats a complex gradient (``autograd.graph.OpNode.apply``): "holomorphic"
    # runs the real formula as conj(formula(conj(grad))), torch's convention for holomorphic
    # functions; "raw" ops (conjugation, view_as_complex) write their formula for complex
    # gradients themselves.
    complex_grad = "holomorphic"
    # Ops torch does not define for complex inputs (``complex_ops._REJECT``): the error
    # factory, and the kernel without the check. ``kernel`` itself is wrapped with the check
    # (every path reaches it); the generated fast path tests the arguments' dtypes inline and
    # calls ``unchecked_kernel``, so real inputs skip the wrapper's frame (~0.3 us a call).
    complex_refusal = None
    # An in-place variant's write without the functional result (``run_inplace``):
    # ``direct(self, args) -> bool``, True when it wrote ``self``'s memory itself. fill_ and
    # zero_ set it: one pass over memory where "a filled tensor, copied in" takes two.
    direct = None
    unchecked_kernel = None
    # Ops torch does not run on a uint16/32/64 or float8 ``self`` (``limited_dtypes``): set like
    # ``complex_refusal``; the fast path tests ``self.dtype._limited`` inline.
    limited_refusal = None
    # torch's backward of this op is one fused kernel (sigmoid_backward, gelu_backward,
    # _softmax_backward_data, native_layer_norm_backward, ...) computing float16/bfloat16 in
    # float32 and rounding once: ``OpNode.apply`` then runs the formula on float32 copies of the
    # half gradient, arguments and result and rounds each input's gradient once at the end
    # (``autograd.graph._opmath_backward``). The dtypes it applies to (set in ``ops/__init__``);
    # composite torch formulas (pow, rsqrt, sin: a chain of half ops, each rounding) keep none.
    opmath_backward = ()

    def __init__(self, schema, kernel=None, *, tags=(), method=True, function=True,
                 inplace=False, grad_fn_name=None, save=None, save_result=False,
                 composite=None, public_name=None, view=False, scalar_overload=()):
        name, params, returns = parse_schema(schema)
        self.name = name
        self.schema = schema
        self.params = params
        self.returns = returns
        self.kernel = kernel
        self.composite = composite
        self.meta = None
        self.backward = None
        self.decomp = None
        self.tags = frozenset(tags) | ({"view"} if view else frozenset()) | (
            {"composite"} if composite is not None else frozenset())
        self.is_view = "view" in self.tags
        self.tensor_pos = tuple(i for i, p in enumerate(params) if p.kind in (K_TENSOR, K_TENSOR_OR_SCALAR))
        self.list_pos = tuple(i for i, p in enumerate(params) if p.kind == K_TENSOR_LIST)
        # tensor-ish params in schema order: what backward returns one entry for
        self.grad_params = tuple(i for i, p in enumerate(params) if p.kind != K_OTHER)
        self.device_pos = next((i for i, p in enumerate(params) if p.name == "device"), None)
        self.save = save            # names of tensor params to save (None = all)
        # Tensor|Scalar params for which PyTorch has a Scalar overload: a Python
        # number there makes no edge in next_functions (pow(x, 2) has one edge).
        self.scalar_overload = tuple(i for i, p in enumerate(params) if p.name in scalar_overload)
        self.save_result = save_result
        self.grad_fn_name = grad_fn_name or (_camel(name) + "Backward0")
        self.inplace_variant = None
        self.functional = None      # for an in-place variant: the functional op
        self.method = method
        self.function = function
        self.public_name = public_name or name
        self.binding = _make_binding(self, dispatch_composite if composite is not None else dispatch)
        self._node_classes = {}
        self._rec_plan = None       # autograd.graph.record's per-op plan, made on first use
        if inplace:
            self._make_inplace()

    # -- registration helpers (decorators) --------------------------------
    # param name -> the param whose gradient alone reads it: saved only when that one requires
    # grad (``mul``: ``self`` is read by ``other``'s gradient only). A tensor that is not saved
    # may be written in place before the backward without an error (PyTorch's MulBackward0
    # saves ``self`` only if ``other`` requires grad: ``y[:, 1:] * 2`` then ``y.add_(1)``)
    save_if_grad: dict = {}

    def derivative(self, fn=None, *, save=None, save_result=None, save_if_grad=None):
        def deco(f):
            self.backward = f
            self.__dict__.pop("_rec", None)   # rebuilt for the new formula / saves
            if save_if_grad is not None:
                self.save_if_grad = dict(save_if_grad)
            if save is not None:
                self.save = tuple(save)
            if save_result is not None:
                self.save_result = save_result
            return f
        return deco(fn) if fn is not None else deco

    def _rec(self, args, out):
        """Record the autograd node of a call (``autograd.graph.record`` without the
        derivative check): the first call builds straight-line code for this op and
        caches it on the instance, shadowing this method."""
        from ..autograd.graph import build_record, record
        fn = build_record(self)
        if fn is None:
            return record(self, args, out)
        self.__dict__["_rec"] = fn
        return fn(args, out)

    def meta_fn(self, fn):
        self.meta = fn
        return fn

    def decomposition(self, fn):
        self.decomp = fn
        return fn

    def _make_inplace(self):
        ip = OpDef.__new__(OpDef)
        ip.__dict__.update(self.__dict__)
        ip.name = self.name + "_"
        ip.public_name = self.public_name + "_"
        ip.tags = self.tags | {"inplace"}
        ip.functional = self
        ip.inplace_variant = None
        ip.method = self.method
        ip.function = False
        ip._node_classes = {}
        ip._rec_plan = None
        ip.__dict__.pop("_rec", None)
        ip.binding = _make_binding(ip, dispatch_inplace)
        self.inplace_variant = ip

    def node_class(self, name=None):
        name = name or self.grad_fn_name
        if callable(name):
            raise TypeError
        cls = self._node_classes.get(name)
        if cls is None:
            from ..autograd.graph import OpNode
            cls = type(name, (OpNode,), {"__slots__": (), "_op": self})
            self._node_classes[name] = cls
        return cls

    # -- the backend kernel ------------------------------------------------
    def run(self, args):
        """Run the kernel on backend arrays and wrap the result(s)."""
        if _DISPATCH_CLASSES:                # a __torch_dispatch__ subclass may be among the arguments
            r = _subclass_dispatch(self, args)
            if r is not _RESUME:
                return r
        xargs = list(args)
        dev = None
        for i in self.tensor_pos:
            a = xargs[i]
            if isinstance(a, Tensor):
                xargs[i] = a._data
                d = a.device
                if dev is None or dev is d:
                    dev = d
                else:
                    dev = _other_device(self, args, i, a, dev, d)
        if self.list_pos:
            for i in self.list_pos:
                lst = xargs[i]
                arrs = []
                for a in lst:
                    d = a.device
                    if dev is None:
                        dev = d
                    elif d is not dev:
                        if "meta" in (d.type, dev.type):
                            raise RuntimeError(f"Tensor on device {d} is not on the expected device {dev}!")
                        _device_mismatch(self, dev, d)
                    arrs.append(a._data)
                xargs[i] = arrs
        if self.device_pos is not None and xargs[self.device_pos] is not None:
            to = _t.as_device(xargs[self.device_pos])
            if dev is not None and dev.type == "meta" and to.type != "meta":
                _copy_out_of_meta()
            dev = xargs[self.device_pos] = to
        if dev is None:
            dev = STATE.default_device       # a factory: the default device (cpu unless set)
        xp = _XP.get(dev)
        if xp is None:
            if dev.type == "meta":
                return _run_on_meta(self, args, dev)
            xp = xp_of(dev)
        out = self.kernel(xp, *xargs)
        if type(out) is not np.ndarray:
            return _finish(self, out, dev, xp, args)
        t = _new(Tensor)
        t._data = out
        t.dtype = _BY_NP.get(out.dtype) or _t.from_numpy_dtype(out.dtype)
        t.device = dev
        t._vc = None
        if self.is_view:
            _mark_view(t, args[self.tensor_pos[0]])
        return t

    def __repr__(self):
        return f"<ember op {self.name}: {self.schema}>"

    def __call__(self, *args, **kwargs):
        return self.binding(*args, **kwargs)


def _finish(op, out, dev, xp, args):
    """Wrap a kernel result that is not a single ndarray (a tuple, a cupy array, a scalar)."""
    if type(out) is tuple:
        res = tuple(_wrap(o, dev, xp) for o in out)
        if op.is_view:
            for o in res:
                _mark_view(o, args[op.tensor_pos[0]])
        return res
    out = _wrap(out, dev, xp)
    if op.is_view:
        _mark_view(out, args[op.tensor_pos[0]])
    return out


def _wrap(o, dev, xp):
    if type(o) is np.ndarray:       # (the common case: each result of a multi-output kernel)
        t = _new(Tensor)
        t._data = o
        t.dtype = _BY_NP.get(o.dtype) or _t.from_numpy_dtype(o.dtype)
        t.device = dev
        t._vc = None
        return t
    if isinstance(o, Tensor):
        return o
    if not isinstance(o, np.ndarray):
        if o is None:
            return None
        o = xp.asarray(o)
    return _make(o, dev)


def _mark_view(out, src):
    base = src._base if src._base is not None else src
    vc = base._vc
    if vc is None:
        vc = base._vc = [0]
    out._base = base
    out._vc = vc


def _camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_"))


def _other_device(op, args, i, a, dev, d):
    """The device of a call whose tensor ``a`` (argument ``i``) is on ``d`` where the ones before
    it are on ``dev``: ``copy_`` (tagged cross_device) moves its source onto self's device; with
    a meta tensor, 0-dim cpu tensors go along (as torch's cpu scalars do); anything else is
    torch's error."""
    if d.type != "meta" and dev.type != "meta":
        if (a._data.ndim != 0 or d.type == "cpu" and dev.type != "cpu") and "cross_device" not in op.tags:
            _device_mismatch(op, dev, d)
        return dev
    if "cross_device" in op.tags:
        if d.type == "meta" and dev.type != "meta":
            _copy_out_of_meta()
        return dev
    if d.type == "cpu" and a._data.ndim == 0:
        return dev
    if dev.type == "cpu" and _all_cpu_scalars(op, args, i):
        return d
    raise RuntimeError(f"Tensor on device {d} is not on the expected device {dev}!")   # torch's words


def _all_cpu_scalars(op, args, upto):
    for j in op.tensor_pos:
        if j >= upto:
            break
        b = args[j]
        if isinstance(b, Tensor) and (b.device.type != "cpu" or b._data.ndim != 0):
            return False
    return True


def _copy_out_of_meta():
    raise NotImplementedError("Cannot copy out of meta tensor; no data!")


def _run_on_meta(op, args, dev):
    """A call on the ``meta`` device: the op's meta function gives the outputs' shapes,
    strides and dtypes, wrapped as tensors without data (ember's fake arrays) on ``dev``."""
    from ..fx.fake_tensor import run_meta_on_device
    return run_meta_on_device(op, args, dev)


def _device_mismatch(op, a, b):
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                       f"devices, {a} and {b}! (when checking arguments for {op.name})")


# ---------------------------------------------------------------------- xp
_XP = {}


def xp_of(dev):
    xp = _XP.get(dev)
    if xp is None:
        if dev.type == "cpu":
            xp = np
        elif dev.type == "cuda":
            from ..runtime.cuda import cupy_module
            xp = cupy_module(dev)
        else:
            raise RuntimeError(f"ember cannot run kernels on device '{dev}'")
        _XP[dev] = xp
    return xp


# ---------------------------------------------------------------------- bindings
# Every binding is generated from the schema. Besides the exact signature it
# gets a fast path for the common call: every tensor argument's class in
# ``_tf.FAST_CLASSES`` -- Tensor or a subclass outside the __torch_function__
# protocol -- (an optional one may be None, a Tensor|Scalar one may be a Python
# number). That path makes the same decisions as ``dispatch`` (no override is
# possible then: the set is emptied while a TorchFunctionMode is active), in the
# same order (Autograd, then the mode stack, then the kernel), without the generic
# argument loops; anything else takes the generic ``dispatch``.
_FS = frozenset((int, float, bool))
_ALL_NS = []


def _lazy_record(op, args, out):
    if not _GRAPH_FNS:
        _graph_fns()
    record = _GRAPH_FNS[0]
    for ns in _ALL_NS:
        ns["_record"] = record
    return record(op, args, out)


def _fast_checks(op):
    """(cond, req) source expressions over the parameter names, or None when no fast path."""
    if op.list_pos or any(p.name.startswith("_") or p.name in ("type", "isinstance") for p in op.params):
        return None
    conds, reqs = [], []
    for i in op.tensor_pos:
        p = op.params[i]
        n = p.name
        if p.kind == K_TENSOR:
            if p.optional:
                conds.append(f"({n} is None or {n}.__class__ in _PL)")
                reqs.append(f"({n} is not None and {n}._requires_grad)")
            else:
                conds.append(f"{n}.__class__ in _PL")
                reqs.append(f"{n}._requires_grad")
        else:  # Tensor|Scalar
            if p.optional:
                return None
            conds.append(f"{n}.__class__ in _PLS")
            reqs.append(f"(type({n}) not in _FS and {n}._requires_grad)")
    return " and ".join(conds) or "True", " or ".join(reqs) or "False"


def _fast_run_lines(op, names, args_expr):
    """Source lines of ``op.run`` specialised to the fast path's arguments (see
    ``_fast_checks``), over local variables ``names`` (one per param), returning
    the result; None when the op has no such specialisation."""
    if op.kernel is None or op.list_pos or op.device_pos is not None or not op.tensor_pos:
        return None
    first = op.params[op.tensor_pos[0]]
    if first.kind != K_TENSOR or first.optional:
        return None
    f = op.tensor_pos[0]
    lines = [f"_dev = {names[f]}.device"]
    xs = list(names)
    for k, i in enumerate(op.tensor_pos):
        p = op.params[i]
        a = names[i]
        xs[i] = f"_x{i}"
        if k == 0:
            lines.append(f"_x{i} = {a}._data")
        elif p.kind == K_TENSOR and not p.optional:
            lines += [f"if {a}.device is not _dev:", f"    return _op.run({args_expr})", f"_x{i} = {a}._data"]
        elif p.kind == K_TENSOR:
            lines += [f"if {a} is None:", f"    _x{i} = None", "else:",
                      f"    if {a}.device is not _dev:", f"        return _op.run({args_expr})",
                      f"    _x{i} = {a}._data"]
        else:
            lines += [f"if type({a}) in _FS:", f"    _x{i} = {a}", "else:",
                      f"    if {a}.device is not _dev:", f"        return _op.run({args_expr})",
                      f"    _x{i} = {a}._data"]
    kernel = "_op.kernel"
    if op.limited_refusal is not None and op.unchecked_kernel is not None:
        # a uint16/32/64 or float8 self takes the full path, whose (wrapped) kernel decides
        lines += [f"if {names[f]}.dtype._limited is not None:", f"    return _op.run({args_expr})"]
        kernel = "_op.unchecked_kernel"
    if op.complex_refusal is not None and op.unchecked_kernel is not None:
        # complex arguments take the full path, whose (wrapped) kernel raises torch's error
        for i in op.tensor_pos:
            p, a = op.params[i], names[i]
            if p.kind == K_TENSOR and not p.optional:
                test = f"{a}.dtype.is_complex"
            elif p.kind == K_TENSOR:
                test = f"({a} is not None and {a}.dtype.is_complex)"
            else:
                test = f"(type({a}) not in _FS and {a}.dtype.is_complex)"
            lines += [f"if {test}:", f"    return _op.run({args_expr})"]
        kernel = "_op.unchecked_kernel"
    lines += ["_xp = _XP.get(_dev)",
              "if _xp is None:",           # a device first seen, or meta (never cached)
              f"    return _op.run({args_expr})",
              f"_o = {kernel}(_xp, {', '.join(xs)})",
              "if type(_o) is not _ndarray:",
              f"    return _finish(_op, _o, _dev, _xp, {args_expr})",
              "_t = _new(_T)",
              "_t._data = _o",
              "_t.dtype = _BY_NP.get(_o.dtype) or _from_np(_o.dtype)",
              "_t.device = _dev",
              "_t._vc = None"]
    if op.is_view:
        lines.append(f"_mark_view(_t, {names[f]})")
    lines.append("return _t")
    return lines


_RUN_NS = {"_T": Tensor, "_FS": _FS, "_XP": _XP, "_ndarray": np.ndarray, "_new": _new, "_BY_NP": _BY_NP,
           "_from_np": _t.from_numpy_dtype}


def _make_fast_run(op):
    """``op.run`` specialised to the fast path's arguments (see ``_fast_checks``)."""
    names = [f"a{i}" for i in range(len(op.params))]
    body = _fast_run_lines(op, names, "args")
    if body is None:
        return op.run
    lines = [f"def run_{op.name}(args):",
             f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args"] + ["    " + ln for ln in body]
    ns = dict(_RUN_NS, _op=op, _xp_of=xp_of, _finish=_finish, _mark_view=_mark_view)
    exec(_binding_cache.code("\n".join(lines) + "\n", f"<ember op {op.name} run>"), ns)
    return ns[f"run_{op.name}"]


def _make_binding(op, dispatcher):
    pieces, names, ns = [], [], {"_dispatch": dispatcher, "_op": op}
    star = False
    for i, p in enumerate(op.params):
        if p.kwonly and not star:
            pieces.append("*")
            star = True
        if p.default is _REQUIRED:
            pieces.append(p.name)
        else:
            ns[f"_d{i}"] = p.default
            pieces.append(f"{p.name}=_d{i}")
        names.append(p.name)
    fname = op.public_name
    body = ", ".join(names) + ("," if len(names) == 1 else "")
    # torch's out= (ember/ops/_out.py): every public functional op that is not a view takes
    # it; the binding's only cost without it is one ``is not None`` test
    with_out = op.function and "inplace" not in op.tags and not op.is_view and "out" not in names
    if with_out:
        pieces.append("out=None" if star else "*, out=None")
        ns["_with_out"] = _op_with_out
    src = f"def {fname}({', '.join(pieces)}):\n"
    if with_out:
        src += f"    if out is not None:\n        return _with_out(_op, _dispatch, ({body}), out)\n"
    fast = _fast_checks(op) if fname not in names else None
    if fast is not None:
        cond, req = fast
        if op.name in _autocast_ops():
            cond = f"_S.autocast is None and {cond}"     # an autocast region takes the full path
        ns.update(_T=Tensor, _FS=_FS, _PL=_tf.FAST_CLASSES, _PLS=_tf.FAST_OR_SCALAR, _S=STATE,
                  _mode_dispatch=_mode_dispatch, _autograd=_autograd,
                  _record=_lazy_record)
        if dispatcher is dispatch:
            src += f"    if {cond}:\n"
            ns["_run"] = _make_fast_run(op)
            ns.update(_RUN_NS, _xp_of=xp_of, _finish=_finish, _mark_view=_mark_view)
            if req != "False":
                src += (f"        if ({req}) and _S.grad_enabled:\n"
                        f"            _a = ({body})\n"
                        "            if _S.modes:\n"
                        "                return _autograd(_op, _a)\n"
                        "            _S.grad_enabled = False\n"
                        "            try:\n"
                        "                _out = _run(_a)\n"
                        "            finally:\n"
                        "                _S.grad_enabled = True\n"
                        "            if _op.backward is None:\n"
                        "                return _record(_op, _a, _out)\n"
                        "            return _op._rec(_a, _out)\n")
            src += ("        if _S.modes:\n"
                    f"            return _mode_dispatch(_op, ({body}))\n")
            inline = _fast_run_lines(op, names, f"({body})")
            if inline is None:
                src += f"        return _run(({body}))\n"
            else:
                src += "".join("        " + ln + "\n" for ln in inline)
        elif dispatcher is dispatch_composite:
            src += f"    if {cond}:\n        _a = ({body})\n"
            src += ("        if _S.modes:\n"
                    "            return _dispatch(_op, _a)\n"
                    f"        return _op.composite({body})\n")
        elif dispatcher is dispatch_inplace:
            src += f"    if {cond}:\n        _a = ({body})\n"
            ns.update(_inplace_autograd=_inplace_autograd, _run_inplace=run_inplace)
            if req != "False":
                src += (f"        if ({req}) and _S.grad_enabled:\n"
                        "            return _inplace_autograd(_op, _a)\n")
            src += ("        if _S.modes:\n"
                    "            return _mode_dispatch(_op, _a)\n"
                    "        return _run_inplace(_op, _a)\n")
        else:
            src += f"    if {cond}:\n        return _dispatch(_op, ({body}))\n"
        _ALL_NS.append(ns)
    src += f"    return _dispatch(_op, ({body}))\n"
    exec(_binding_cache.code(src, f"<ember op {op.name}>"), ns)
    fn = ns[fname]
    fn.__module__ = "ember"
    fn.__qualname__ = fname
    fn.__doc__ = f"{op.schema}"
    fn._ember_op = op
    return fn


def refresh_binding(op) -> None:
    """Regenerate ``op.binding`` after a change to what its fast path is generated from
    (``complex_refusal`` / ``unchecked_kernel``, attached after the op is defined). The new
    code replaces the old function's ``__code__`` (and its globals gain the new names), so every
    alias already handed out -- ``ember.relu``, ``Tensor.relu``, ``F.relu`` -- runs it."""
    old = op.binding
    new = _make_binding(op, dispatch_composite if op.composite is not None else dispatch)
    if old.__code__.co_freevars or new.__code__.co_freevars:
        raise RuntimeError(f"refresh_binding({op.name}): bindings with closures cannot be swapped in place")
    old.__globals__.update({k: v for k, v in new.__globals__.items() if k != old.__name__})
    old.__code__ = new.__code__


def _op_with_out(op, dispatcher, args, out):
    from ._out import op_with_out
    return op_with_out(op, dispatcher, args, out)


# ---------------------------------------------------------------------- dispatch
def _check_args(op, args):
    """Validate tensor arguments; returns (requires_grad, override) ."""
    req = False
    params = op.params
    direct = _tf.DIRECT_CLASSES
    for i in op.tensor_pos:
        a = args[i]
        if isinstance(a, Tensor):
            if a._requires_grad:
                req = True
            if a.__class__ not in direct and (a.__class__ in _tf.ROUTED_CLASSES or not STATE.tf_subclass_off):
                return req, True            # a subclass with __torch_function__, or a routed one
            continue
        p = params[i]
        if a is None:
            if p.optional:
                continue
        elif p.kind == K_TENSOR_OR_SCALAR and isinstance(a, _SCALARS):
            continue
        if _tf.takes_over(a):
            return req, True
        _bad_arg(op, i, a)
    for i in op.list_pos:
        lst = args[i]
        if not isinstance(lst, (list, tuple)):
            if _tf.takes_over(lst):
                return req, True
            _bad_arg(op, i, lst)
        for a in lst:
            if isinstance(a, Tensor):
                if a._requires_grad:
                    req = True
                if a.__class__ not in direct and (a.__class__ in _tf.ROUTED_CLASSES or not STATE.tf_subclass_off):
                    return req, True
            elif _tf.takes_over(a):
                return req, True
            else:
                raise TypeError(f"{op.public_name}(): argument '{params[i].name}' (position {i + 1}) "
                                f"must be tuple of Tensors, not {_tf.type_name(a)}{_tf.torch_tensor_hint(a)}")
    if STATE.tf_modes and not STATE.tf_off:
        return req, True                    # a TorchFunctionMode sees the call
    return req, False


def _bad_arg(op, i, a):
    p = op.params[i]
    want = "Tensor" if p.kind == K_TENSOR else "Tensor or Number" if p.kind == K_TENSOR_OR_SCALAR \
        else "tuple of Tensors"
    raise TypeError(f"{op.public_name}(): argument '{p.name}' (position {i + 1}) must be {want}, "
                    f"not {_tf.type_name(a)}{_tf.torch_tensor_hint(a)}")


_RESUME = object()          # _override's "nothing took the call": the dispatcher goes on


def _resumed_req(op, args):
    """requires_grad over the tensor arguments (``_check_args`` stopped at the routed one)."""
    for i in op.tensor_pos:
        a = args[i]
        if isinstance(a, Tensor) and a._requires_grad:
            return True
    for i in op.list_pos:
        for a in args[i] if isinstance(args[i], (list, tuple)) else ():
            if isinstance(a, Tensor) and a._requires_grad:
                return True
    return False


def _override(op, args):
    """An argument overrides the call: ember's own ``__ember_function__`` (fx proxies: they get
    every parameter positionally), else PyTorch's ``__torch_function__`` protocol (modes and
    subclasses; ember/_torch_function.py)."""
    overloaded = []
    for i in op.tensor_pos + op.list_pos:
        a = args[i]
        items = a if isinstance(a, (list, tuple)) else (a,)
        for x in items:
            t = type(x)
            if hasattr(t, "__ember_function__") and t not in overloaded:
                overloaded.append(t)
    if not overloaded:
        if _tf.ROUTED_CLASSES:
            r = _tf.route(op, args)
            if r is not NotImplemented:
                return r
        types = _tf.collect_overloaded([args[i] for i in op.tensor_pos + op.list_pos])
        if not types and not (STATE.tf_modes and not STATE.tf_off):
            return _RESUME                  # a routed class declined: dispatch as usual
        pos, kw = _tf.args_as_called(op.params, args, _REQUIRED)
        return _tf.handle(op.binding, types, pos, kw)
    for t in overloaded:
        r = t.__ember_function__(op.binding, tuple(overloaded), args, {})
        if r is not NotImplemented:
            return r
    raise TypeError(f"no implementation of {op.public_name} found for types {overloaded}")


_DISPATCH_CLASSES = _tf.DISPATCH_CLASSES


def python_dispatch(name, fn, args, kwargs):
    """``fn`` -- ember Python that torch dispatches as the op ``name`` (``zeros_like``, ``uniform_``) --
    called with a ``__torch_dispatch__`` wrapper among ``args``: its handlers get the call with
    ``ember.ops.aten.<name>.default`` (a PythonOverload running ``fn``), as in ``_subclass_dispatch``."""
    from ._aten_namespace import python_overload
    types = []
    for a in list(args) + list(kwargs.values()):
        c = a.__class__
        if c in _DISPATCH_CLASSES and c not in types:
            at = next((k for k, seen in enumerate(types) if issubclass(c, seen)), len(types))
            types.insert(at, c)
    return _call_handlers(python_overload(name, fn), types, args, kwargs)


def _call_handlers(func, types, pos, kw):
    st = STATE
    prev = st.grad_enabled
    st.grad_enabled = False
    try:
        for cls in types:
            r = cls.__torch_dispatch__(func, tuple(types), tuple(pos), kw)
            if r is not NotImplemented:
                return r
    finally:
        st.grad_enabled = prev
    raise TypeError(f"Multiple dispatch failed for '{func}'; all __torch_dispatch__ handlers returned "
                    "NotImplemented:\n\n" + "".join(f"  - tensor subclass {t}\n" for t in types))


# Mode classes that let a ``__torch_dispatch__`` subclass handle an op before themselves, the
# handler running with the mode still active (torch's fake and proxy modes return NotImplemented
# for unknown subclasses): the handler's ops on the inner tensors then reach the mode, so tracing
# a wrapper subclass records plain ops (ember.compile of traceable wrapper subclasses; the fake
# and make_fx modes add themselves, ember/fx).
_DEFERRING_MODES = set()


def _has_subclass_arg(op, args):
    """Whether a tensor argument of ``op`` is a ``__torch_dispatch__`` subclass instance (the
    cheap test before ``_subclass_dispatch``: tracing modes ask it for every op)."""
    for i in op.tensor_pos:
        if args[i].__class__ in _DISPATCH_CLASSES:
            return True
    for i in op.list_pos:
        a = args[i]
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if x.__class__ in _DISPATCH_CLASSES:
                return True
    return False


def _subclass_dispatch(op, args):
    """The kernel step of a call with an instance of a ``__torch_dispatch__`` subclass among its
    tensor arguments (torch's Python dispatch key, below autograd): each such class's handler, a
    subclass before its bases, gets ``func`` -- the ``ember.ops.aten`` overload -- and the
    arguments as torch passes them, with grad mode off (autograd has recorded the call already);
    the first result that is not NotImplemented is the op's. _RESUME when no argument is one."""
    types = []
    for i in op.tensor_pos + op.list_pos:
        a = args[i]
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            c = x.__class__
            if c in _DISPATCH_CLASSES and c not in types:
                at = next((k for k, seen in enumerate(types) if issubclass(c, seen)), len(types))
                types.insert(at, c)
    if not types:
        return _RESUME
    from ._aten_namespace import packet
    pos, kw = _tf.args_as_called(op.params, args, _REQUIRED)
    return _call_handlers(packet(op).default, types, pos, kw)


def _autocast_ops():
    from ..amp.autocast_mode import ALL_OPS
    return ALL_OPS


def _autocast(op, args):
    """``args`` as an active ``ember.autocast`` region casts them for ``op`` (ember/amp)."""
    if op.name not in _autocast_ops():
        return args
    from ..amp.autocast_mode import cast_args
    return cast_args(op, args)


def dispatch(op, args):
    """The full dispatch path of a kernel op."""
    if STATE.autocast is not None:
        args = _autocast(op, args)
    req, ovr = _check_args(op, args)
    if ovr:
        r = _override(op, args)
        if r is not _RESUME:
            return r
        req = _resumed_req(op, args)
    if req and STATE.grad_enabled:
        return _autograd(op, args)
    if STATE.modes:
        return _mode_dispatch(op, args)
    return op.run(args)


def dispatch_composite(op, args):
    if STATE.autocast is not None:
        args = _autocast(op, args)
    req, ovr = _check_args(op, args)
    if ovr:
        r = _override(op, args)
        if r is not _RESUME:
            return r
        req = _resumed_req(op, args)
    if STATE.modes:
        for m in reversed(STATE.modes):
            keep = getattr(m, "keep_composite", None)
            if keep is not None and keep(op):
                return _mode_dispatch(op, args)
    return op.composite(*args)


def below_autograd(op, args):
    """What runs under the Autograd key: the mode stack, then the kernel -- for an in-place
    variant its kernel path (the functional kernel written into ``self``): a mode passing an
    in-place op down (the profiler's) must not turn it into an out-of-place one."""
    if STATE.modes:
        return _mode_dispatch(op, args)
    if "inplace" in op.tags:
        return run_inplace(op, args)
    return op.run(args)


def _mode_dispatch(op, args):
    modes = STATE.modes
    if _DISPATCH_CLASSES and modes[-1].__class__ in _DEFERRING_MODES and _has_subclass_arg(op, args):
        return _subclass_dispatch(op, args)
    mode = modes.pop()
    try:
        return mode.__ember_dispatch__(op, args)
    finally:
        modes.append(mode)


def _autograd_mode_dispatch(op, args):
    """The mode stack under the Autograd key, which switched grad mode off to run the op.
    A mode that must know grad mode is on for the caller (forward AD records its tangents
    for reverse mode) defines ``__ember_dispatch_autograd__``."""
    modes = STATE.modes
    if _DISPATCH_CLASSES and modes[-1].__class__ in _DEFERRING_MODES and _has_subclass_arg(op, args):
        return _subclass_dispatch(op, args)
    mode = modes.pop()
    try:
        fn = getattr(mode, "__ember_dispatch_autograd__", None)
        if fn is not None:
            return fn(op, args)
        return mode.__ember_dispatch__(op, args)
    finally:
        modes.append(mode)


def _autograd(op, args):
    st = STATE
    st.grad_enabled = False
    try:
        out = _autograd_mode_dispatch(op, args) if st.modes else op.run(args)
    finally:
        st.grad_enabled = True
    if not _GRAPH_FNS:
        _graph_fns()
    return _GRAPH_FNS[0](op, args, out)


_GRAPH_FNS = []


def _graph_fns():
    from ..autograd.graph import inplace_with_autograd, record
    _GRAPH_FNS[:] = [record, inplace_with_autograd]


def _inplace_autograd(op, args):
    if not _GRAPH_FNS:
        _graph_fns()
    return _GRAPH_FNS[1](op, args)


def dispatch_inplace(op, args):
    """In-place variant: run the functional op, write into ``self``, bump its version."""
    req, ovr = _check_args(op, args)
    if ovr:
        r = _override(op, args)
        if r is not _RESUME:
            return r
        req = _resumed_req(op, args)
    if req and STATE.grad_enabled:
        return _inplace_autograd(op, args)
    if STATE.modes:
        return _mode_dispatch(op, args)
    return run_inplace(op, args)


def run_inplace(op, args):
    """Kernel path of an in-place op (no autograd): functional kernel + copy into self."""
    if _DISPATCH_CLASSES:
        r = _subclass_dispatch(op, args)
        if r is not _RESUME:
            return r
    self = args[0]
    direct = op.direct
    if direct is not None and direct(self, args):
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        vc[0] += 1
        return self
    res = op.functional.run(args)
    write_into(self, res, op.name)
    return self


def write_into(self, res, opname):
    if not _t.can_cast(res.dtype, self.dtype):
        raise RuntimeError(f"result type {res.dtype.legacy_name} can't be cast to the desired output "
                           f"type {self.dtype.legacy_name}")
    if tuple(res._data.shape) != tuple(self._data.shape):
        try:
            shape = np.broadcast_shapes(res._data.shape, self._data.shape)
        except ValueError:
            shape = None
        if shape != tuple(self._data.shape):
            raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast "
                               f"shape {list(shape) if shape else list(res._data.shape)}")
    data = self._data
    if data.ndim == 0 and isinstance(data, np.ndarray):
        data[()] = res._data.astype(data.dtype, copy=False)
    elif self.device.type != "meta":      # a meta tensor has no data to write
        xp = xp_of(self.device)
        xp.copyto(data, res._data, casting="unsafe")
    vc = self._vc
    if vc is None:
        vc = self._vc = [0]
    vc[0] += 1


# ---------------------------------------------------------------------- registration
def defop(schema, **kw):
    """Decorator: ``@defop("exp(Tensor self) -> Tensor", tags=("pointwise",))`` over a kernel."""
    def deco(kernel):
        op = OpDef(schema, kernel, **kw)
        register(op)
        return op
    return deco


def defcomposite(schema, **kw):
    """Decorator for an op implemented in other ember ops."""
    def deco(fn):
        op = OpDef(schema, composite=fn, **kw)
        register(op)
        return op
    return deco


def register(op):
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    if op.inplace_variant is not None:
        OPS[op.inplace_variant.name] = op.inplace_variant
    from . import api
    if op.function:
        setattr(api, op.public_name, op.binding)
    if op.method:
        setattr(Tensor, op.public_name, op.binding)
        if op.inplace_variant is not None:
            setattr(Tensor, op.inplace_variant.public_name, op.inplace_variant.binding)
    if op.inplace_variant is not None:
        setattr(api, op.inplace_variant.public_name, op.inplace_variant.binding)
    return op
