"""``GraphLowering``: walk an FX graph of prims and build the loop IR.

Realization policy (what becomes memory): reductions and extern outputs
always; graph outputs; a pointwise value read by more than one node unless it
is cheap to recompute (``ir.is_cheap``: a view, or a few loads and cheap
arithmetic). Everything else is inlined into its consumers, which is the
first half of fusion (the scheduler's loop fusion is the second).

Symbolic sizes (``dynamic=True``) come from one of two places:

* **real example inputs**: every size > 1 becomes a symbol of this graph's own
  ``SizeVarAllocator`` (duck-sized by value); the guards lowering needs are
  checked by the generated wrapper on each call (``GuardError``);
* **fake example inputs with SymInt sizes** (a graph traced by aot with
  dynamo's ShapeEnv): the graph uses *those* symbols, so its size nodes
  (``sym_size``, ``operator.mul`` ...) lower to the same sympy expressions the
  trace saw, and every guard lowering needs is added to that ShapeEnv (its
  owner, dynamo, checks it before each call) instead of to the wrapper. Each
  symbol must be readable at call time as a dimension of some input
  (``ember.inductor.dynamic`` passes sizes that are not as carrier inputs).

Either way the inputs are compiled as C-contiguous, sizes are kernel
arguments read off the input arrays' shapes, and a symbolic graph meets only
contiguous arrays (``compile_fx`` compiles another variant otherwise).
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
from .sizevars import SizeVarAllocator, product, read_back_symbols, sympify
from .virtualized import V, set_graph

log = logging.getLogger("ember.inductor")


class LoweringError(RuntimeError):
    pass


class DynamicShapeError(LoweringError):
    """``dynamic=True`` on a graph that bakes concrete sizes into prim arguments
    (a real-mode trace): compiling it symbolically would be unsound."""


class LayoutError(DynamicShapeError):
    """A layout-dependent prim (``as_strided``) whose input, in the compiled code, is not laid
    out as it was eagerly (a non-contiguous input that a graph compiled for symbolic sizes gets
    as a contiguous copy; a computed value written out contiguously). Its numpy reference would
    read that same array, so the per-node fallback would be as wrong as a lowering: never taken.
    A dynamic graph is compiled for the example's shapes and layouts instead (``compile_fx``);
    a static one runs eagerly."""


def _prim_name(target) -> Optional[str]:
    op = getattr(target, "_ember_op", None)
    if op is None or "prim" not in op.tags:
        return None
    return op.name[len("prims."):] if op.name.startswith("prims.") else op.name


# view ops a decomposition may leave whole (returns NotImplemented for some layouts), with
# their own lowering in lowering.py
_VIEWS_LEFT_WHOLE = frozenset({"diagonal", "unfold"})


def _kept_whole():
    """Names of the ops with no decomposition by design (``ember.prims.coverage.EXTERN``)."""
    from ..prims.coverage import EXTERN
    return EXTERN


class GraphLowering:
    def __init__(self, gm, example_inputs, dynamic: bool = False):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.dynamic = dynamic
        self.sizevars = SizeVarAllocator()
        # the caller's ShapeEnv when the example inputs are fakes with its symbols
        self.shape_env = _shape_env_of(self.example_inputs) if dynamic else None
        self.shape_env_guards: List[Any] = []    # the guards this lowering gave shape_env (its relations)
        self.buffers: List[Any] = []          # ComputedBuffer / ExternKernel, in order
        self.buffers_by_name: Dict[str, ir.Buffer] = {}
        self.graph_inputs: List[ir.InputBuffer] = []
        self.input_names: List[str] = []
        self.constants: Dict[str, Tensor] = {}  # input name -> constant tensor (get_attr)
        self.outputs: List[Any] = []          # IR buffers, or ("input", i) / ("const", value)
        # output buffer name -> name of the input it is the new value of (gm.meta["input_mutations"]:
        # output position -> input position, from aot); the scheduler keeps the safe ones in ``inplace``
        self.inplace_candidates: Dict[str, str] = {}
        self.inplace: Dict[str, str] = {}
        self.fallbacks: List[str] = []
        self._count = 0
        self._realized = {}      # id(value) -> (value, buffer): values written out once (_realize_once)
        self._current_node = None
        self._size_symbols: Dict[int, sympy.Symbol] = {}
        self._input_sizes: List[list] = []
        self._inputs_checked = False

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
        if self.shape_env is not None:
            # the caller's symbols; compiled contiguous (the caller passes contiguous arrays)
            size = [sympify(n) for n in arr.shape]
            for n in size:
                if n.is_Symbol and n not in self.sizevars.var_to_val:
                    self.sizevars.var_to_val[n] = int(self.shape_env.var_to_val[n])
            self._input_sizes.append(size)
            buf = ir.InputBuffer(name, ir.Layout(size, dtype=t.dtype))
            self.graph_inputs.append(buf)
            self.input_names.append(name)
            self.buffers_by_name[name] = buf
            return buf
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
        if view is None:
            got = self._view_of_realized_base(x, _extern_view_ok)
            if got is not None:
                return ("view",) + got + (x.get_dtype(),)
        return self.realize(x)

    def make_extern(self, kind, fn, inputs, args, kwargs, out_layouts, reason="", out_arg=False):
        ins = [self.extern_input(x) for x in inputs]
        k = ir.ExternKernel(self.new_name("extern"), kind, fn, ins, args, kwargs, out_layouts, reason)
        k.out_arg = out_arg
        self.register_buffer(k)
        return k.outputs[0] if len(k.outputs) == 1 else tuple(k.outputs)

    def fallback(self, node, args, kwargs, reason, layouts=None):
        """The prim's numpy reference kernel as an extern call. ``layouts``: the outputs' layouts
        in the graph's sizes (a lowering that knows them: ``sort``, ``topk``); else they come
        from the node's recorded metadata, which holds concrete sizes only."""
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
        size_args = []
        meta = node.meta.get("tensor_meta")
        multi = isinstance(meta, (list, tuple)) and not hasattr(meta, "shape")
        if layouts is None:
            metas = meta if multi else [meta]
            if any(m is None for m in metas):
                raise LoweringError(f"{op.name}: no output metadata for the fallback")
            layouts = [ir.Layout([sympify(s) for s in m.shape], dtype=m.dtype) for m in metas]
            if self.dynamic and not (_concrete_layouts(metas) and not _symbolic_in(sargs, skw)):
                # (an output with no symbolic size and arguments with none -- rng_seed, a 0-d
                # seed drawn per call -- is the same call for every size: its fallback is safe)
                raise LoweringError(f"{op.name} has no lowering and dynamic shapes need one ({reason})")
        else:
            multi = len(layouts) > 1
            if self.dynamic and _symbolic_in(sargs, skw):
                # a symbolic ``k`` of ``topk(x, s1 // 2)``: the wrapper computes its value per call
                # (it reached numpy as a sympy expression once, and raised TypeError)
                sargs, skw = _size_placeholders(sargs, skw, size_args)
        kernel = op.kernel

        def fn(*arrays_args, **kw):
            return kernel(np, *arrays_args, **kw)

        fn.__name__ = op.name.replace(".", "_")
        self.fallbacks.append(f"{op.name}: {reason}")
        log.info("inductor: %s falls back to its numpy reference: %s", op.name, reason)
        res = self.make_extern(f"fallback_{op.name}", fn, tensors, sargs, skw, layouts, reason)
        (res[0] if isinstance(res, tuple) else res).kernel.size_args = size_args
        if multi:
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
                if all(is_cond(u.target) for u in node.users) and node.users:
                    env[node] = t          # a cond's branch (cond_lowering.py)
                    continue
                if not isinstance(t, Tensor):
                    raise LoweringError(f"get_attr {node.target} is not a tensor")
                buf = self.add_input(t, f"const{len(self.constants)}")
                self.constants[buf.name] = t
                env[node] = buf
            elif node.op == "call_function":
                if not self._inputs_checked:
                    self._check_input_symbols()
                env[node] = self._lower_call(node, lookup)
            elif node.op == "output":
                self._lower_output(node.args[0], lookup)
            else:
                raise LoweringError(f"unsupported node {node.op} {node.target}")
        self._current_node = None
        if not self._inputs_checked:
            self._check_input_symbols()
        if self.shape_env is not None:
            self._guards_to_shape_env()
        return self

    # -- the caller's symbols ---------------------------------------------------
    def _check_input_symbols(self):
        """Every symbol in an input size must be read off some input dimension at call time."""
        self._inputs_checked = True
        if self.shape_env is None:
            return
        bound = set(self.sizevars.var_to_val)
        # symbols the wrapper reads back from a dimension linear in them (codegen/wrapper.py)
        for u, _, _, _ in read_back_symbols(self._input_sizes, bound, pairs=True):
            self.sizevars.var_to_val[u] = int(self.shape_env.var_to_val[u])
        for size in self._input_sizes:
            for n in size:
                missing = n.free_symbols - bound
                if missing:
                    raise LoweringError(f"dynamic shapes: size {n} of an input uses "
                                        f"{', '.join(sorted(map(str, missing)))}, which no input dimension "
                                        f"carries (the compiled code could not read it)")

    def _guards_to_shape_env(self):
        """The size guards lowering relied on, handed to the caller's ShapeEnv (as sympy's
        floor/Mod, which its guard compiler understands) instead of checked by the wrapper."""
        env = self.shape_env
        for g in self.sizevars.guards:
            rel = sympy.Eq(_to_sympy_int(g), 0)
            if rel is sympy.true:
                continue
            # stored with the graph (fx_graph_cache replays them) even when the ShapeEnv holds it
            # already: a process that hits the entry may not have it from elsewhere
            self.shape_env_guards.append(rel)
            if env._static_truth(rel) is True:
                continue
            if not bool(env.hint(rel)):
                raise LoweringError(f"dynamic shapes: size guard {rel} does not hold for the example sizes")
            env._add_guard(rel)
        self.sizevars.guards = []

    def _lower_size(self, node, lookup):
        """A size computation of the traced graph (``sym_size``, ``operator`` arithmetic on
        sizes, ``max``/``min``) as a sympy expression over the size symbols."""
        from ..fx.experimental.proxy_tensor import sym_size
        from .sizevars import floordiv_expr, mod_expr
        t = node.target
        args = [lookup(a) for a in node.args]
        if t is sym_size:
            return args[0].get_size()[int(args[1])]
        fn = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
              operator.neg: operator.neg, operator.pow: operator.pow, max: sympy.Max, min: sympy.Min}.get(t)
        if fn is None and t is not operator.floordiv and t is not operator.mod:
            # not a size computation: an op kept whole (gcd, nextafter, ...) whose arguments are
            # buffers, which are no sizes to sympify
            return None
        vals = [sympify(a) for a in args]
        if t is operator.floordiv:
            return floordiv_expr(*vals)
        if t is operator.mod:
            return mod_expr(*vals)
        return sympy.expand(fn(*vals)) if fn not in (sympy.Max, sympy.Min) else fn(*vals)

    def _lower_call(self, node, lookup):
        if node.target is operator.getitem:
            base = lookup(node.args[0])
            return base[node.args[1]]
        if is_cond(node.target):
            return lower_cond(self, node, lookup)
        name = _prim_name(node.target)
        if name is None and "custom" in getattr(getattr(node.target, "_ember_op", None), "tags", ()):
            # a user's custom operator (ember.library): opaque, an extern call of its implementation
            from .custom_ops import lower_custom_op
            return lower_custom_op(self, node, lookup)
        if name is None and self.dynamic:
            size = self._lower_size(node, lookup)
            if size is not None:
                return size
        if name is None and getattr(getattr(node.target, "_ember_op", None), "name", None) in _VIEWS_LEFT_WHOLE:
            # a view op its decomposition records whole (it must stay a view while aot
            # functionalizes in-place writes through it): lowered as a view here
            name = node.target._ember_op.name
        if name is None:
            op = getattr(node.target, "_ember_op", None)
            whole = op is not None and (op.name in _kept_whole() or "random" in op.tags)
            if not whole or op.kernel is None or "data_dependent" in op.tags:
                # (an op whose output size depends on the data -- nonzero, unique -- would have
                # its example's size baked into the kernels after it: never compiled)
                raise LoweringError(f"{node.target} is not a prim (decompose the graph first)")
            # an op kept whole on purpose (ember.prims.coverage.EXTERN: LAPACK factorisations), or
            # a random op left whole by its decomposition (``_random`` under
            # ``config.fallback_random`` or with an explicit generator): its eager kernel runs as
            # an extern call, drawing from eager's stream in program order
            args = [lookup(a) for a in node.args]
            kwargs = {k: lookup(v) for k, v in node.kwargs.items()}
            # (a pointwise one -- nextafter, gcd, lcm -- has its layout from its inputs' sizes,
            # so it compiles under dynamic shapes too)
            from .lowering import whole_op_layouts
            meta = node.meta.get("tensor_meta")
            layouts = whole_op_layouts(op.name, args, kwargs, getattr(meta, "dtype", None))
            return self.fallback(node, args, kwargs, f"{op.name} is kept whole (no decomposition)",
                                 layouts=layouts)
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
                if config.debug_lowering or isinstance(e, LayoutError):
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
        # the eager sizes by their example values (``int()`` of a SymInt would add a guard)
        want = tuple(s.hint() if hasattr(s, "hint") else int(s) for s in meta.shape)
        if tuple(hint) != want or out.get_dtype() is not meta.dtype:
            raise LoweringError(f"lowering of {node.target.__name__} gave {hint} {out.get_dtype()}, eager "
                                f"gives {list(meta.shape)} {meta.dtype}")

    def _output_view(self, v):
        """An output that is a pure view of a buffer (a permute, a reshape, a slice)
        is returned as a strided numpy view of that buffer -- no copy kernel, and
        the strides eager would give."""
        if not config.output_views:
            return None
        if isinstance(v, ir.Pointwise) and not (v.is_view and v.view_of is None):
            # a copy (clone, contiguous) or a view of one: eager's result owns its memory, so
            # the compiled one must too -- a view of the buffer the copy reads would alias it
            # (compiled ``x.clone()`` returned x's memory, and writes to it reached x)
            return None
        view = ir.as_strided_view(v)
        if view is None:
            return None
        name, size, stride, offset = view
        buf = self.buffers_by_name.get(name)
        if buf is None or not _output_view_ok(buf, stride, offset):
            return None
        return ("view", buf, list(size), list(stride), offset)

    def _realize_once(self, v):
        """``realize`` a value once (an output listed twice, or an output that is also the base
        of a viewed output or of a matmul's operand, is one buffer)."""
        known = self._realized.get(id(v))
        if known is None:
            known = self._realized[id(v)] = (v, self.realize(v))   # (v kept: ids stay unique)
        return known[1]

    def _view_of_realized_base(self, v, ok):
        """A reshape or permute of a computed value (``x @ w + b`` saved for the backward as
        ``(B*T, C)`` and used as ``(B, T, C)``; attention's ``y.transpose(1, 2)`` both saved and
        multiplied) as a strided view of that value written out once: ``(buffer, size, strides,
        offset)``, or None. ``ok(buffer, strides, offset)`` says whether the caller can take
        such a view. Before, each use that needed memory wrote its own copy, a kernel that
        recomputed the value beside the consumer that also computes it; now the scheduler fuses
        the base's kernel with that consumer (one pass, two stores). Only for views with the
        base's element count: writing a whole base for a slice of it writes more than the slice."""
        if not (isinstance(v, ir.Pointwise) and v.view_of is not None):
            return None
        base, reindex, strides = v.view_of
        if base.get_dtype() is not v.get_dtype() or \
                sympy.expand(product(base.get_size()) - product(v.get_size())) != 0:
            return None
        known = self._realized.get(id(base))
        buf = known[1] if known is not None else ir.ComputedBuffer(self.new_name(), base)
        if strides is not None:     # the view ops composed the strides (reshape, permute, squeeze)
            view = (buf.name, v.get_size(), strides, sympy.Integer(0))
        else:                       # or, maybe, the index map says them
            load = buf.make_loader()
            view = ir.as_strided_view(ir.Pointwise(v.get_size(), v.get_dtype(),
                                                   lambda idx: load(reindex(list(idx))), is_view=True))
        if view is None or not ok(buf, view[2], view[3]):
            return None             # (a view the index maps cannot express as strides)
        if known is None:
            self._realized[id(base)] = (base, self.register_buffer(buf))
        return buf, list(view[1]), list(view[2]), view[3]

    def _output_view_of_computed(self, v):
        """An output that is a view of a computed value: that value written out, and a strided
        view of it returned, as eager's view would be (:meth:`_view_of_realized_base`)."""
        got = self._view_of_realized_base(v, _output_view_ok)
        return None if got is None else ("view",) + got

    def _output_in_eager_layout(self, v, node):
        """A computed output whose eager strides are a permutation of dense ones (``a * 2``
        of a transposed ``a``: numpy keeps its input's order, as PyTorch does) is written in
        that order -- the loops run over the permuted value, so the transposed reads are the
        contiguous ones -- and returned as the strided view eager would return."""
        meta = node.meta.get("tensor_meta")
        stride = getattr(meta, "stride", None)
        size = v.get_size()
        if not isinstance(v, ir.Pointwise) or stride is None or len(stride) != len(size) or \
                not all(isinstance(n, sympy.Integer) for n in size) or \
                not all(isinstance(st, int) for st in stride):
            return None
        perm = sorted(range(len(size)), key=lambda d: (-stride[d], d))
        if perm == sorted(perm):
            return None
        base_size = [size[d] for d in perm]
        dense = [int(st) for st in ir.contiguous_strides(base_size)]
        if any(int(size[d]) != 1 and stride[d] != st for d, st in zip(perm, dense)):
            return None             # not dense (eager's output has gaps): contiguous, as before
        inv = [perm.index(d) for d in range(len(size))]
        fn = v.inner_fn
        base = ir.Pointwise(base_size, v.get_dtype(), lambda idx: fn([idx[j] for j in inv]))
        out_strides = [sympy.Integer(0)] * len(size)
        for j, d in enumerate(perm):
            out_strides[d] = sympy.Integer(dense[j])
        buf = self._realize_once(base)
        return ("view", buf, list(size), out_strides, sympy.Integer(0))

    def _lower_output(self, result, lookup):
        flat, self.out_spec = _flatten(result)
        muts = (getattr(self.gm, "meta", None) or {}).get("input_mutations") or {}
        for k, a in enumerate(flat):
            if hasattr(a, "op") and hasattr(a, "users"):
                v = lookup(a)
                if isinstance(v, ir.InputBuffer):
                    self.outputs.append(("input", v.name))
                elif isinstance(v, ir.Buffer):
                    self.outputs.append(v)
                else:
                    view = self._output_view(v)
                    if view is None:
                        view = self._output_view_of_computed(v)
                    if view is None and k not in muts and config.output_eager_layout:
                        view = self._output_in_eager_layout(v, a)
                    self.outputs.append(view if view is not None else self._realize_once(v))
            else:
                self.outputs.append(("const", a))
        if muts:
            phs = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
            for k, i in muts.items():
                o = self.outputs[k] if k < len(self.outputs) else None
                inp = lookup(phs[i]) if i < len(phs) else None
                if isinstance(o, ir.ComputedBuffer) and isinstance(inp, ir.InputBuffer) \
                        and o.name not in self.inplace_candidates:
                    self.inplace_candidates[o.name] = inp.name


def _concrete_layouts(metas):
    """Whether every output size in ``metas`` is a plain int (no SymInt)."""
    return all(type(n) is int for m in metas for n in m.shape)


def is_cond(target):
    return getattr(target, "_ember_hop", None) == "cond_op"


def lower_cond(graph, node, lookup):
    from .cond_lowering import lower_cond as lower
    return lower(graph, node, lookup)


def _symbolic_in(args, kwargs):
    """Whether a symbolic size (a SymInt, or a sympy expression other than an integer) is among
    ``args``/``kwargs`` (nested lists and tuples included)."""
    def sym(a):
        if isinstance(a, (list, tuple)):
            return any(sym(x) for x in a)
        if isinstance(a, sympy.Basic):
            return not a.is_Integer
        return type(a).__name__ in ("SymInt", "SymBool", "SymFloat")
    return any(sym(a) for a in args) or any(sym(v) for v in kwargs.values())


def _size_placeholders(args, kwargs, exprs):
    """``args``/``kwargs`` with each symbolic size replaced by ``ir.ExternSize(i)``, its sympy
    expression appended to ``exprs`` (the i-th)."""
    def sub(a):
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        if _symbolic_in([a], {}):
            exprs.append(sympify(a))
            return ir.ExternSize(len(exprs) - 1)
        return a
    return [sub(a) for a in args], {k: sub(v) for k, v in kwargs.items()}


def _extern_view_ok(buf, stride, offset):
    return all(isinstance(st, sympy.Integer) and int(st) >= 0 for st in stride) and offset == 0


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


def _shape_env_of(example_inputs):
    """The ShapeEnv of the first SymInt size among fake example inputs, else None."""
    for t in example_inputs:
        if isinstance(t, Tensor) and type(t._data).__name__ == "FakeArray":
            for n in t._data.shape:
                env = getattr(n, "env", None)
                if env is not None:
                    return env
    return None


def _to_sympy_int(e):
    """Inductor's FloorDiv/ModularIndexing as sympy's floor/Mod (what ShapeEnv guards use)."""
    from .sizevars import FloorDiv, ModularIndexing
    if not e.args:
        return e
    args = [_to_sympy_int(a) for a in e.args]
    if isinstance(e, FloorDiv):
        return sympy.floor(args[0] / args[1])
    if isinstance(e, ModularIndexing):
        return sympy.Mod(sympy.floor(args[0] / args[1]), args[2])
    return e.func(*args)


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
