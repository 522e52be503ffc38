"""``GraphLowering``: walk an FX graph of prims and build the loop IR.

Realization policy (what becomes memory): reductions and extern outputs
always; graph outputs; a pointwise value read by more than one node unless it
is cheap to recompute (``ir.is_cheap``: a view, or a few loads and cheap
arithmetic). Everything else is inlined into its consumers, which is the
first half of fusion (the scheduler's loop fusion is the second).
"""
from __future__ import annotations

import logging
import operator
from typing import Any, Dict, List, Optional

import numpy as np
import sympy

from .. import types as _t
from ..tensor import Tensor
from . import config, ir
from .lowering import LOWERINGS
from .sizevars import SizeVarAllocator, sympify
from .virtualized import V, set_graph

log = logging.getLogger("ember.inductor")


class LoweringError(RuntimeError):
    pass


class DynamicShapeError(LoweringError):
    """``dynamic=True`` on a graph that bakes concrete sizes into prim arguments
    (a real-mode trace): compiling it symbolically would be unsound."""


def _prim_name(target) -> Optional[str]:
    op = getattr(target, "_ember_op", None)
    if op is None or "prim" not in op.tags:
        return None
    return op.name[len("prims."):] if op.name.startswith("prims.") else op.name


class GraphLowering:
    def __init__(self, gm, example_inputs, dynamic: bool = False):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.dynamic = dynamic
        self.sizevars = SizeVarAllocator()
        self.buffers: List[Any] = []          # ComputedBuffer / ExternKernel, in order
        self.buffers_by_name: Dict[str, ir.Buffer] = {}
        self.graph_inputs: List[ir.InputBuffer] = []
        self.input_names: List[str] = []
        self.constants: Dict[str, Tensor] = {}  # input name -> constant tensor (get_attr)
        self.outputs: List[Any] = []          # IR buffers, or ("input", i) / ("const", value)
        self.fallbacks: List[str] = []
        self._count = 0
        self._current_node = None
        self._size_symbols: Dict[int, sympy.Symbol] = {}

    # -- naming -------------------------------------------------------------
    def new_name(self, prefix="buf"):
        n = f"{prefix}{self._count}"
        self._count += 1
        return n

    def register_buffer(self, buf):
        self.buffers.append(buf)
        if isinstance(buf, ir.ExternKernel):
            for o in buf.outputs:
                self.buffers_by_name[o.name] = o
        else:
            self.buffers_by_name[buf.name] = buf
        return buf

    def realize(self, node: ir.IRNode) -> ir.Buffer:
        if isinstance(node, ir.Buffer):
            return node
        if isinstance(node, ir.Loops):
            return self.register_buffer(ir.ComputedBuffer(self.new_name(), node))
        raise LoweringError(f"cannot realize {node!r}")

    # -- inputs -------------------------------------------------------------
    def _size_expr(self, n: int):
        if not self.dynamic or n in (0, 1):
            return sympy.Integer(n)
        s = self._size_symbols.get(n)
        if s is None:  # duck sizing: equal example sizes share one symbol
            s = self._size_symbols[n] = self.sizevars.new_symbol(n)
        return s

    def add_input(self, t: Tensor, name: str) -> ir.InputBuffer:
        arr = t._data
        size = [self._size_expr(n) for n in arr.shape]
        if self.dynamic:
            if not (arr.flags.c_contiguous or arr.size <= 1):
                raise LoweringError("dynamic shapes need contiguous inputs")
            lay = ir.Layout(size, dtype=t.dtype)
        else:
            isz = arr.itemsize
            lay = ir.Layout(size, [s // isz for s in arr.strides], 0, t.dtype)
        buf = ir.InputBuffer(name, lay)
        self.graph_inputs.append(buf)
        self.input_names.append(name)
        self.buffers_by_name[name] = buf
        return buf

    def current_arg_meta(self, i):
        n = self._current_node
        if n is None or i >= len(n.args):
            return None
        a = n.args[i]
        return getattr(a, "meta", {}).get("tensor_meta") if hasattr(a, "meta") else None

    # -- externs ------------------------------------------------------------
    def extern_input(self, x: ir.IRNode):
        """A realized buffer, or a (buffer, size, stride, offset) strided view of one."""
        view = ir.as_strided_view(x)
        if view is not None and not isinstance(x, ir.Buffer):
            name, size, stride, offset = view
            buf = self.buffers_by_name[name]
            ok = all(isinstance(s, sympy.Integer) or s.is_nonnegative for s in stride) and \
                (offset.is_nonnegative or offset == 0) and \
                (not isinstance(buf, ir.InputBuffer) or buf.layout.is_contiguous())
            if ok:
                return ("view", buf, size, stride, offset, x.get_dtype())
        return self.realize(x)

    def make_extern(self, kind, fn, inputs, args, kwargs, out_layouts, reason="", out_arg=False):
        ins = [self.extern_input(x) for x in inputs]
        k = ir.ExternKernel(self.new_name("extern"), kind, fn, ins, args, kwargs, out_layouts, reason)
        k.out_arg = out_arg
        self.register_buffer(k)
        return k.outputs[0] if len(k.outputs) == 1 else tuple(k.outputs)

    def fallback(self, node, args, kwargs, reason):
        op = node.target._ember_op
        tensors = []

        def sub(a):
            if isinstance(a, ir.IRNode):
                tensors.append(a)
                return ir.ExternArg(len(tensors) - 1)
            if isinstance(a, (list, tuple)):
                return type(a)(sub(x) for x in a)
            return a

        sargs = [sub(a) for a in args]
        skw = {k: sub(v) for k, v in kwargs.items()}
        meta = node.meta.get("tensor_meta")
        metas = meta if isinstance(meta, (list, tuple)) and not hasattr(meta, "shape") else [meta]
        if any(m is None for m in metas):
            raise LoweringError(f"{op.name}: no output metadata for the fallback")
        layouts = [ir.Layout([sympify(s) for s in m.shape], dtype=m.dtype) for m in metas]
        if self.dynamic:
            raise LoweringError(f"{op.name} has no lowering and dynamic shapes need one ({reason})")
        kernel = op.kernel

        def fn(*arrays_args, **kw):
            return kernel(np, *arrays_args, **kw)

        fn.__name__ = op.name.replace(".", "_")
        self.fallbacks.append(f"{op.name}: {reason}")
        log.info("inductor: %s falls back to its numpy reference: %s", op.name, reason)
        res = self.make_extern(f"fallback_{op.name}", fn, tensors, sargs, skw, layouts, reason)
        if isinstance(meta, (list, tuple)) and not hasattr(meta, "shape"):
            return res if isinstance(res, tuple) else (res,)
        return res

    # -- the walk -----------------------------------------------------------
    def run(self):
        with set_graph(self):
            return self._run()

    def _run(self):
        env: Dict[Any, Any] = {}
        inputs = iter(self.example_inputs)
        graph = self.gm.graph

        def lookup(a):
            if hasattr(a, "op") and hasattr(a, "users"):
                return env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(lookup(x) for x in a)
            return a

        for node in graph.nodes:
            self._current_node = node
            if node.op == "placeholder":
                t = next(inputs)
                if not isinstance(t, Tensor):
                    raise LoweringError(f"input {node.name} is not a tensor")
                env[node] = self.add_input(t, f"arg{len(self.graph_inputs)}")
            elif node.op == "get_attr":
                t = _getattr(self.gm, node.target)
                if not isinstance(t, Tensor):
                    raise LoweringError(f"get_attr {node.target} is not a tensor")
                buf = self.add_input(t, f"const{len(self.constants)}")
                self.constants[buf.name] = t
                env[node] = buf
            elif node.op == "call_function":
                env[node] = self._lower_call(node, lookup)
            elif node.op == "output":
                self._lower_output(node.args[0], lookup)
            else:
                raise LoweringError(f"unsupported node {node.op} {node.target}")
        self._current_node = None
        return self

    def _lower_call(self, node, lookup):
        if node.target is operator.getitem:
            base = lookup(node.args[0])
            return base[node.args[1]]
        name = _prim_name(node.target)
        if name is None:
            raise LoweringError(f"{node.target} is not a prim (decompose the graph first)")
        args = [lookup(a) for a in node.args]
        kwargs = {k: lookup(v) for k, v in node.kwargs.items()}
        low = LOWERINGS.get(name)
        if low is None:
            out = self.fallback(node, args, kwargs, "no lowering")
        else:
            n_bufs = len(self.buffers)
            try:
                out = low(*args, **kwargs)
                self._check_meta(node, out)
            except Exception as e:  # noqa: BLE001 - any lowering failure falls back
                if config.debug_lowering:
                    raise
                del self.buffers[n_bufs:]
                out = self.fallback(node, args, kwargs, f"lowering failed: {type(e).__name__}: {e}")
        if isinstance(out, ir.Loops):
            if isinstance(out, (ir.Reduction, ir.Scatter, ir.Scan)):
                out = self.realize(out)
            elif len(node.users) > 1 and not ir.is_cheap(out, config.inline_max_ops):
                out = self.realize(out)
            elif config.realize_all:
                out = self.realize(out)
        return out

    def _check_meta(self, node, out):
        meta = node.meta.get("tensor_meta")
        if meta is None or not hasattr(meta, "shape") or not isinstance(out, ir.IRNode):
            return
        size = out.get_size()
        hint = [self.sizevars.size_hint(s) for s in size]
        if tuple(hint) != tuple(int(s) for s in meta.shape) or out.get_dtype() is not meta.dtype:
            raise LoweringError(f"lowering of {node.target.__name__} gave {hint} {out.get_dtype()}, eager "
                                f"gives {list(meta.shape)} {meta.dtype}")

    def _output_view(self, v):
        """An output that is a pure view of a buffer (a permute, a reshape, a slice)
        is returned as a strided numpy view of that buffer -- no copy kernel, and
        the strides eager would give."""
        if not config.output_views:
            return None
        view = ir.as_strided_view(v)
        if view is None:
            return None
        name, size, stride, offset = view
        buf = self.buffers_by_name.get(name)
        if buf is None or not _output_view_ok(buf, stride, offset):
            return None
        return ("view", buf, list(size), list(stride), offset)

    def _lower_output(self, result, lookup):
        flat, self.out_spec = _flatten(result)
        for a in flat:
            if hasattr(a, "op") and hasattr(a, "users"):
                v = lookup(a)
                if isinstance(v, ir.InputBuffer):
                    self.outputs.append(("input", v.name))
                elif isinstance(v, ir.Buffer):
                    self.outputs.append(v)
                else:
                    view = self._output_view(v)
                    self.outputs.append(view if view is not None else self.realize(v))
            else:
                self.outputs.append(("const", a))


def _output_view_ok(buf, stride, offset):
    return all(s.is_Integer and int(s) >= 0 for s in stride) and offset.is_Integer and int(offset) >= 0 and \
        (not isinstance(buf, ir.InputBuffer) or buf.layout.is_contiguous())


def check_no_baked_sizes(gm):
    """Raise DynamicShapeError when a prim of ``gm`` takes a concrete size (> 1) for a
    ``SymInt`` parameter: such a graph is only valid for its traced shapes.
    (``compile_fx`` checks this; ``GraphLowering`` itself trusts its caller.)"""
    for node in gm.graph.nodes:
        if node.op != "call_function" or _prim_name(node.target) is None:
            continue
        op = node.target._ember_op
        vals = dict(zip([p.name for p in op.params], node.args))
        vals.update(node.kwargs)
        for p in op.params:
            if "SymInt" in p.type and p.name in vals:
                v = vals[p.name]
                items = v if isinstance(v, (list, tuple)) else [v]
                if any(isinstance(i, int) and not isinstance(i, bool) and i > 1 for i in items):
                    raise DynamicShapeError(f"{op.name} has the concrete size argument {p.name}={v!r}; "
                                            f"trace the graph symbolically for dynamic shapes")


def _getattr(mod, target):
    obj = mod
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _flatten(x):
    """(flat leaves, spec) where spec rebuilds the structure from an iterator."""
    if isinstance(x, (list, tuple)):
        parts = [_flatten(v) for v in x]
        flat = [f for p in parts for f in p[0]]
        specs = [p[1] for p in parts]
        kind = type(x)
        return flat, ("seq", kind, specs)
    if isinstance(x, dict):
        keys = list(x)
        parts = [_flatten(x[k]) for k in keys]
        return [f for p in parts for f in p[0]], ("dict", keys, [p[1] for p in parts])
    return [x], ("leaf",)


def unflatten(spec, it):
    if spec[0] == "leaf":
        return next(it)
    if spec[0] == "seq":
        vals = [unflatten(s, it) for s in spec[2]]
        kind = spec[1]
        if kind is tuple or kind is list:
            return kind(vals)
        return kind(*vals) if hasattr(kind, "_fields") else kind(vals)
    return {k: unflatten(s, it) for k, s in zip(spec[1], spec[2])}
