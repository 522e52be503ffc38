"""OutputGraph: the FX graph being built for one frame, its inputs, guards and the compiled result.

Inputs are placeholders, one per distinct outside tensor, each remembered with
its source; at run time the generated ``__compiled`` function reads them
again through those sources, so the graph always receives the current values
(parameters replaced between calls, for example), and the guards check
exactly those values first.

After the frame returns, the return value is *reconstructed*: tensors come
from the graph's output tuple, constants are inlined, containers are rebuilt
and outside objects are re-read through their sources."""
from __future__ import annotations

import collections
import operator
import time
import types as _types

import numpy as _np

from ..fx import Graph
from .._torch_function import DISPATCH_CLASSES as _DISPATCH_CLASSES
from .variables.subclass_inputs import output_class, result_class, rewrap_outputs
from ..tensor import Tensor
from .. import types as _t
from . import config as _config
from . import logs
from .example_value import ExampleValues
from .exc import AliasedDynamicView, BackendCompilerFailed, SkipFrame, Unsupported
from .graph_raises import may_raise as graph_may_raise
from .guards import GuardSet, _cstrides, memory_root
from ..fx.experimental.symbolic_shapes import SymBool, SymInt
from .source import placeholder_name
from .variables.constant import ConstantVariable
from .variables.ctx import _set_autocast, _set_grad_enabled
from .variables.lists import BaseListVariable, DictVariable, ListVariable, TupleVariable
from .variables.sym_scalar import call_with_scalars, has_sym_scalars
from .variables.tensor import TensorVariable
from ..runtime import code_cache as _code_cache


# ops whose output metadata does not depend on a scalar operand's value
_POINTWISE_SCALAR_OPS = {"add", "sub", "mul", "truediv", "div", "floordiv", "floor_divide", "mod",
                         "remainder", "pow", "iadd", "isub", "imul", "itruediv", "rsub", "true_divide",
                         "subtract", "multiply", "divide", "eq", "ne", "lt", "le", "gt", "ge", "maximum",
                         "minimum", "fmod"}


class OutputGraph:
    def __init__(self, code, func, nargs, dynamic_dims=None, static_views=False):
        self.code = code
        self.func = func
        self.nargs = nargs
        self.graph = Graph()
        self.guards = GuardSet(func)
        self.guards.global_state()
        self.examples = ExampleValues()
        self.guards.shape_env = self.examples.shape_env
        # dynamic_dims(source, tensor) -> dims to make symbolic (see convert_frame.Compiler)
        self.dynamic_dims = dynamic_dims
        self.static_views = static_views   # view inputs keep static sizes (see add_tensor_input)
        self.resume_codes = []             # resume functions a graph break calls (step_unsupported skips them)
        self.unspec_scalars = set()        # argument slots traced as unspecialized numbers (run_frame)
        self.unspec_sources = set()        # source exprs of outside numbers traced unspecialized (wrap)
        self._dynamic_views = {}           # id(memory root) -> (root, source expr, source) of views made symbolic
        # id(memory root) -> [(source, example value)] of the inputs sharing that root which were
        # traced as memory of their own (a symbolic view and the inputs after it sharing its
        # memory, e.g. the two index tensors of ``ember.where(mask)``): their aliasing is lost,
        # which is sound only while the graph writes into none of them (_check_lost_aliasing)
        self._lost_alias = {}
        self._written = []                 # example values whose memory an in-place op wrote
        # (op name, memory roots of what it writes) for every in-place call, and the example
        # results that own their memory (made by an op of this trace): a write into those only
        # changes the trace's own intermediates (_check_rerunnable)
        self._inplace_dests = []
        self._fresh = {}
        self._lost_versions = {}           # id(example value) -> its version when it became an input
        self._sym_nodes = {}    # sympy expr -> node computing it from the placeholders
        self._sym_inputs = []   # (example value, placeholder node) of inputs with symbolic sizes
        self._sym_strided = []  # (source, example value) of inputs with symbolic strides
        self._own_memory = []   # (source, input, example value) traced as memory of their own
        self.input_sources = []
        self.input_values = []
        self._by_id = {}
        self._names = set()
        self._first_op = None
        self.n_calls = 0
        self.n_grad_nodes = 0   # _set_grad_enabled/_set_autocast nodes: a graph of only these is not built
        self.uses_autocast = False   # the graph switches autocast regions (restored if it raises)
        self.n_instructions = 0
        self.runtime_globals = {}
        self._out_tensors = []
        self._pre = []          # statements run after the graph (graph-break reconstruction)
        self._entry_reads = []  # statements run before it: outside values read as the call starts
        self._memo = {}         # id(tracker) -> temp name, so a mutable container is rebuilt once
        self.covers_try = False       # some traced code is inside a user try block
        # Python ``random`` draws the compiled code makes before its graph (variables/random_calls.py):
        # (function, args, kwargs) in the frame's order, and the copy of the state tracing draws from
        self.random_calls = []
        self.trace_random = None
        # the top-level instruction of the first print/warn/log call replayed after the graph
        # (variables/logging_calls.py): if the graph raises, the frame re-runs eagerly so those
        # calls before the failing op still happen; a graph that cannot be re-run (in-place ops)
        # breaks there instead
        self.replay_break_index = None
        self.final_grad_mode = None   # grad mode when the trace returned / stopped at its break
        self.exc_grad_mode = None     # grad mode to restore if the graph raises (None: the caller's)
        # list iterator arguments being iterated (a 3.11 comprehension's ``.0``, a resume
        # function's loop iterator): (source, the list). Their items are read from the list as
        # the trace takes them, so the trace may not change that list (record_container_mutation)
        self.live_list_iters = []
        # autocast regions (``ctx._regions`` form) at entry (guarded), when the trace returned or
        # stopped at its break (inside an autocast block: left on for the breaking call and the
        # resumed code), and to restore if the graph raises in a resumed block (the outermost
        # open block's; unset: the entry state)
        from .._state import STATE as _S
        from .variables.ctx import _regions
        from .symbolic_convert import _NO_REGIONS
        self.entry_autocast = _regions(_S.autocast)
        self.final_autocast = self.entry_autocast
        self.exc_autocast = _NO_REGIONS
        self._scalar_inputs = {}      # (source expr, dtype) -> TensorVariable of an unspecialized float
        # root instruction indexes of the .item() calls captured as symbolic scalars
        # (config.capture_scalar_outputs, variables/sym_scalar.py): where the frame breaks instead
        # when such a value reaches an instruction that needs it and cannot break
        self.item_origins = []
        # ("setattr", obj, name, value) | ("container", vt) | ("global", ...) | ("call", fn, args, kwargs)
        # | ("cell", CellVariable, value) | ("instdict", obj, name, value)
        self.side_effects = []
        self.attr_overlay = {}  # (id(obj), name) -> tracker written by the frame
        # (id(module), leaf) -> tracker swapped in by a functional_call being inlined, and
        # id(module) -> how many such swaps it has (variables/functional_call.py)
        self.param_overrides = {}
        self.param_override_owners = {}
        self.containers = {}    # id(outside list/dict) -> its one tracker
        # id(closure cell of a function from outside) -> (cell, its one CellVariable): every
        # function inlined that closes over it sees the frame's writes to it (``nonlocal``)
        self.real_cells = {}
        self._int_size_sources = {}   # "<_int_as_size input>.size()[0]" -> the int's own source
        # meta entries every operator node made now receives: the tags of an activation-checkpoint
        # region being inlined (variables/checkpoint.py), which aot's partitioner reads
        self.node_meta = {}
        self.checkpoint_regions = 0   # regions captured so far (their ids: 1, 2, ...)
        self.subgraphs = {}     # get_attr name -> GraphModule (a cond's branches: variables/control_flow.py)

    # ------------------------------------------------------------------ inputs
    def add_tensor_input(self, t: Tensor, source):
        prev = self._by_id.get(id(t))
        if prev is not None:
            tv, first = prev
            if source.expr() != first.expr():     # (the same read again, e.g. ``p.grad`` twice)
                self.guards.add(f"{source.expr()} is {first.expr()}", f"{source.expr()} is {first.expr()}")
            return tv
        lost = self._lost_alias.get(id(memory_root(t))) if self._dynamic_views else None
        # (``lost`` not None: it shares memory with a view input traced as memory of its own
        # (symbolic sizes), so it is too; compile() traces the frame again with view inputs
        # static if the graph writes to any of them)
        dims, sym_strides = None, False
        if self.dynamic_dims is not None and self.examples.shape_env is not None \
                and t.__class__ not in _DISPATCH_CLASSES:     # wrapper subclasses stay static
            dims = self.dynamic_dims(source, t)
            if t._data.ndim and t._data.strides != _cstrides(t._data):
                # not C-contiguous: symbolic sizes need symbolic strides (a stepped slice,
                # ``idx[:, -k:]`` of a growing ``idx``), and so does a call whose strides changed
                # with its sizes the same; negative strides (a flipped numpy view) stay static
                # (``static_views``: traced again after a graph returned a view of such an input)
                by_strides = getattr(self.dynamic_dims, "strides", None)
                want = (bool(dims) or (by_strides is not None and by_strides(source, t))) and not self.static_views
                sym_strides = want and all(st >= 0 for st in t._data.strides) and t._data.size > 0
                if not sym_strides:
                    dims = None
                elif not dims:
                    dims = set()
            if (dims or sym_strides) and t._base is not None:
                # a view (x[i:j], x.detach()): its symbolic example value has storage of its own,
                # so it may not share memory with another input; one that does stays static
                # (its example value then shares its base's storage)
                root = memory_root(t)
                if lost is None and (self.static_views or any(memory_root(u) is root for u in self.input_values)):
                    dims, sym_strides = None, False
                elif lost is None:
                    self._dynamic_views[id(root)] = (root, source.expr(), source)
                    lost = self._lost_alias[id(root)] = []
        node = self._new_placeholder(source)
        example = self.examples.from_input(t, source.expr(), dims, sym_strides) if dims or sym_strides \
            else self.examples.from_input(t)
        if lost is not None:
            lost.append((source, example))
            # its version counter now: any write into it (or a view of it) during the trace
            # bumps it, whatever op wrote (``F.relu(x, True)`` passes its flag by position)
            self._lost_versions[id(example)] = example._version
        dyn = {i for i, n in enumerate(example.shape) if isinstance(n, SymInt)}
        sst = {i for i, n in enumerate(example.stride()) if isinstance(n, SymInt)} if sym_strides else ()
        if sst:
            self.guards.strided_dynamic_tensor_match(source, t, dyn, sst)
            self._sym_inputs.append((example, node))
            self._own_memory.append((source, t, example))
            self._sym_strided.append((source, example))
        elif dyn:
            self.guards.dynamic_tensor_match(source, t, dyn)
            self._sym_inputs.append((example, node))
            self._own_memory.append((source, t, example))
        else:
            self.guards.tensor_match(source, t)
        tv = TensorVariable(node, example, source, cls=type(t))
        self._by_id[id(t)] = (tv, source)
        self.input_sources.append(source)
        self.input_values.append(t)
        return tv

    def input_value(self, source):
        """The tensor read through ``source`` as a graph input (None if it is not one)."""
        for src, t in zip(self.input_sources, self.input_values):
            if src == source:
                return t
        return None

    def add_scalar_input(self, var, dtype):
        """A Python float/int that is an argument of a resume function (e.g. an ``.item()`` value)
        used in arithmetic with a floating tensor: a 0-d tensor graph input of the dtype the eager op converts
        the scalar to, so a new value reuses the graph (only its type is guarded)."""
        key = (var.source.expr(), dtype)
        hit = self._scalar_inputs.get(key)
        if hit is not None:
            return hit
        tname = type(var.raw).__name__
        if not getattr(var, "is_random", False):     # (a drawn number's type is the function's)
            self.guards.add(f"type({var.source.expr()}) is {tname}", f"{var.source.expr()} is {'an' if tname[:1] in 'aeiou' else 'a'} {tname}")
        src = _ScalarTensorSource(var.source, self.obj_ref(_scalar_tensor), self.obj_ref(dtype), var.name)
        t = _scalar_tensor(var.raw, dtype)
        node = self._new_placeholder(src)
        tv = TensorVariable(node, self.examples.from_input(t), src, cls=type(t))
        self.input_sources.append(src)
        self.input_values.append(t)
        self._scalar_inputs[key] = tv
        return tv

    def unspec_number(self, value, source, name):
        """The tracker of an int/float read through ``source`` that changed between calls (automatic
        dynamic). An int >= 2 becomes a *symbolic size* (a ShapeEnv symbol): slicing with it
        (``cache[start:start + n]``, a decoding step's position) gives symbolically sized tensors
        instead of a guard on its value, so each new position reuses the graph. Its graph input
        is a uint8 tensor of that many elements (``_int_as_size``) whose size the graph reads;
        the symbol's guards are the ShapeEnv's. Other numbers (floats, ints 0/1 or negative, no
        fake tensors): ``UnspecFloatVariable``."""
        from .variables.constant import ConstantVariable
        if type(value) is int and value >= 2 and self.examples.shape_env is not None \
                and _config.dynamic_int_arguments:
            self.guards.add(f"type({source.expr()}) is int", f"{source.expr()} is an int")
            src = _IntSizeSource(source, self.obj_ref(_int_as_size), name)
            t = _int_as_size(value)
            tv = self.add_tensor_input_dims(t, src, {0})
            n = tv.example.shape[0]
            if isinstance(n, SymInt):
                # (its symbol's ShapeEnv source; ``sym_int_expr`` reads the int itself instead)
                self._int_size_sources[f"{src.expr()}.size()[0]"] = source.expr()
                return SymIntArgVariable(n, source, value, name)
        return UnspecFloatVariable(value, source, self, name)

    def _new_placeholder(self, source):
        """A placeholder named after ``source`` (made unique), placed before the first op."""
        name = placeholder_name(source)
        base, i = name, 1
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        if self._first_op is not None:
            with self.graph.inserting_before(self._first_op):
                return self.graph.placeholder(name)
        return self.graph.placeholder(name)

    def add_tensor_input_dims(self, t, source, dims):
        """A graph input whose ``dims`` are symbolic (regardless of the automatic-dynamic state)."""
        node = self._new_placeholder(source)
        example = self.examples.from_input(t, source.expr(), dims)
        dyn = {i for i, n in enumerate(example.shape) if isinstance(n, SymInt)}
        if dyn:
            self.guards.dynamic_tensor_match(source, t, dyn)
            self._sym_inputs.append((example, node))
        else:
            self.guards.tensor_match(source, t)
        tv = TensorVariable(node, example, source, cls=type(t))
        self.input_sources.append(source)
        self.input_values.append(t)
        return tv

    def _unspec_args(self, target, args, kwargs):
        """Replace unspecialized float arguments of a pointwise arithmetic op on floating tensors
        by 0-d tensor inputs of that dtype (what the eager op converts a Python scalar to);
        anywhere else the float is used by value (a guard, specialised)."""
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        name = name.strip("_")
        if not (name in _POINTWISE_SCALAR_OPS or (name[:1] in ("r", "i") and name[1:] in _POINTWISE_SCALAR_OPS)):
            return args, kwargs
        dts = {a.example.dtype for a in list(args) + list(kwargs.values()) if isinstance(a, TensorVariable)}
        if len(dts) != 1 or not next(iter(dts)).is_floating_point:
            return args, kwargs
        dt = next(iter(dts))
        if dt in (_t.float16, _t.bfloat16):
            # eager computes ``x * s`` in float32 with s a float32 and rounds once to float16. No
            # 0-d input reproduces that: a float16 one rounds s first, and a float64 one is cast
            # to float16 by the op too (a tensor operand, not a Python number: torch does the
            # same) -- 1 ulp off in about half the elements. So the float is used by value.
            return args, kwargs

        def sub(a):
            return self.add_scalar_input(a, dt) if isinstance(a, (UnspecFloatVariable, SymIntArgVariable)) else a
        return [sub(a) for a in args], {k: sub(v) for k, v in kwargs.items()}

    def _unspec_alpha(self, kind, target, args, kwargs):
        """``x.add_(y, alpha=lr)`` with ``lr`` an unspecialized float (an optimizer's learning rate
        after a scheduler changed it): ``alpha`` must be a number, so the float cannot become a 0-d
        tensor input there (the op would read it back with ``.item()`` and break the graph).
        ``y * lr`` is traced instead -- the float a graph input of ``mul`` -- and added with no
        ``alpha``, so a new learning rate runs the same graph."""
        name = _op_name(target).strip("_")
        other = 1 if kind == "call_method" or len(args) > 1 else None
        if name not in ("add", "sub", "subtract") or other is None or len(args) != 2 \
                or not isinstance(args[1], TensorVariable) \
                or args[1].example.dtype not in (_t.float32, _t.float64):
            return args, kwargs
        from .. import mul
        scaled = self.call_function(mul, [args[1], kwargs["alpha"]], {})
        return [args[0], scaled], {k: v for k, v in kwargs.items() if k != "alpha"}

    def obj_ref(self, obj) -> str:
        """A global name for ``obj`` shared by the guard function and the runtime function."""
        name = self.guards.ref(obj)
        self.runtime_globals[name] = obj
        return name

    # ------------------------------------------------------------------ ops
    def _sym_node(self, expr):
        """A node computing size expression ``expr`` from the inputs' sizes (``sym_size`` of a
        placeholder for a symbol, ``operator`` calls for sums, products, floor division ...),
        so the graph recomputes sizes from the tensors it is called with."""
        import sympy
        from ..fx.experimental.proxy_tensor import sym_size
        if expr.is_Integer:
            return int(expr)
        hit = self._sym_nodes.get(expr)
        if hit is not None:
            return hit
        g = self.graph
        if expr.is_Symbol:
            for ex, node in self._sym_inputs:
                for i, n in enumerate(ex.shape):
                    if isinstance(n, SymInt) and n.expr == expr:
                        acc = g.call_function(sym_size, (node, i))
                        if self._first_op is None:
                            self._first_op = acc   # later placeholders go before it
                        self._sym_nodes[expr] = acc
                        return acc
            for ex, _ in self._sym_inputs:
                for st in ex.stride():
                    if isinstance(st, SymInt) and st.expr == expr:
                        # a stride symbol no size shares, used as a value (``x * x.stride(0)``):
                        # specialised (a guard on its value), as the graphs' size readers and
                        # the compiled code read sizes only
                        return int(st)
            raise Unsupported(f"size symbol {expr} does not come from any graph input")
        if isinstance(expr, (sympy.Add, sympy.Mul)):
            op = operator.add if isinstance(expr, sympy.Add) else operator.mul
            args = sorted(expr.args, key=lambda e: e.is_number)
            if any(e.is_Rational and not e.is_Integer for e in args):
                raise Unsupported(f"non-integer size expression {expr}")
            acc = self._sym_node(args[0])
            for e in args[1:]:
                acc = g.call_function(op, (acc, self._sym_node(e)))
        elif isinstance(expr, sympy.floor):
            num, den = sympy.together(expr.args[0]).as_numer_denom()
            acc = g.call_function(operator.floordiv, (self._sym_node(sympy.expand(num)), self._sym_node(den)))
        elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            acc = g.call_function(operator.pow, (self._sym_node(expr.base), int(expr.exp)))
        elif isinstance(expr, sympy.Mod):
            acc = g.call_function(operator.mod, tuple(self._sym_node(e) for e in expr.args))
        elif isinstance(expr, (sympy.Max, sympy.Min)):
            acc = g.call_function(max if isinstance(expr, sympy.Max) else min,
                                  tuple(self._sym_node(e) for e in expr.args))
        else:
            raise Unsupported(f"cannot compute size expression {expr} in the graph")
        self._sym_nodes[expr] = acc
        return acc

    def _sym_leaves(self, c):
        """A constant for a graph node's arguments: symbolic sizes in it (also inside slices and
        tuples) become nodes computing them."""
        if isinstance(c, SymInt):
            return self._sym_node(c.expr)
        if isinstance(c, SymBool):
            raise Unsupported("a symbolic size relation passed to an operator")
        if type(c) is slice:
            return slice(self._sym_leaves(c.start), self._sym_leaves(c.stop), self._sym_leaves(c.step))
        if type(c) in (tuple, list):
            return type(c)(self._sym_leaves(x) for x in c)
        return c

    def _map(self, v, ex):
        if isinstance(v, TensorVariable):
            return v.example if ex else v.node
        if isinstance(v, ConstantVariable):
            if isinstance(v.value, SymBool):
                raise Unsupported("a symbolic size relation passed to an operator")
            val = v.value
            if isinstance(val, _np.generic):
                # a NumPy scalar (np.float32(2.0), np.prod(shape)): ops take it as the Python number
                # it holds, as eager does; the graph's code then prints a literal
                val = val.item()
            if not ex:
                return self._sym_leaves(val)
            return val
        if isinstance(v, BaseListVariable):
            items = [self._map(i, ex) for i in v.items]
            cls = v.python_type()
            if cls is list:
                return items
            if hasattr(cls, "_fields"):
                return tuple(items) if not ex else cls(*items)
            if any(isinstance(i, SymInt) for i in items):
                return tuple(items)   # a Size of symbolic sizes (Size() would specialise them)
            return cls(items) if cls is not tuple else tuple(items)
        if isinstance(v, DictVariable):
            return {k: self._map(i, ex) for k, i in v.items.items()}
        if v.is_python_constant():
            from .variables.builder import is_ember_function
            c = v.as_python_constant()
            if isinstance(c, type) or is_ember_function(c):
                return c
        raise Unsupported(f"cannot pass {v} to an ember operator")

    def call_function(self, target, args, kwargs, returns_none=False):
        return self._call("call_function", target, target, args, kwargs, returns_none)

    def call_method(self, name, args, kwargs):
        def run(self_, *a, **k):
            return getattr(self_, name)(*a, **k)
        return self._call("call_method", name, run, args, kwargs, False)

    def _call(self, kind, target, runner, args, kwargs, returns_none):
        if kind == "call_method" and target in _AUTOGRAD_STATE_METHODS:
            raise Unsupported(f"Tensor.{target}() changes a tensor's autograd state (a compiled graph "
                              f"cannot: it would be lost)")
        if kind == "call_method" and target in _GEOMETRY_METHODS:
            raise Unsupported(f"Tensor.{target}() changes a tensor's shape in place (the graph's values "
                              f"keep their shapes: traced, later ops would see the old one)")
        inplace = _is_inplace(target, kwargs) or _inplace_flag(kwargs)
        if inplace:
            self._inplace_dests.append((_op_name(target), [memory_root(d) for d in _dest_examples(args, kwargs)]))
            if self._lost_alias:
                self._note_written(args, kwargs)
        if _config.capture_scalar_outputs and has_sym_scalars(args, kwargs):
            # captured .item() values as scalar arguments (variables/sym_scalar.py)
            return call_with_scalars(self, kind, target, runner, args, kwargs, returns_none)
        if isinstance(kwargs.get("alpha"), UnspecFloatVariable):
            args, kwargs = self._unspec_alpha(kind, target, args, kwargs)
        if any(isinstance(a, UnspecFloatVariable) for a in list(args) + list(kwargs.values())):
            args, kwargs = self._unspec_args(target, args, kwargs)
        ex_args = [self._map(a, True) for a in args]
        ex_kwargs = {k: self._map(v, True) for k, v in kwargs.items()}
        if any(isinstance(a, SymInt) for a in ex_args + list(ex_kwargs.values())):
            res = self._run_with_sym_scalars(target, runner, ex_args, ex_kwargs)
        else:
            res = self.examples.run(runner, ex_args, ex_kwargs)
        for r in (res if isinstance(res, (tuple, list)) else (res,)):
            if isinstance(r, Tensor) and r._base is None and not any(r is a for a in ex_args) \
                    and not any(r is v for v in ex_kwargs.values()):
                self._fresh[id(r)] = r
        node_args = tuple(self._map(a, False) for a in args)
        node_kwargs = {k: self._map(v, False) for k, v in kwargs.items()}
        tf_cls = result_class(args, kwargs) or Tensor    # a __torch_function__ subclass's results
        if isinstance(res, Tensor) and res._requires_grad and res._grad_fn is None \
                and not any(res is a for a in ex_args):
            # ember.ones(3, requires_grad=True), nn.Parameter(...): a leaf of the caller's autograd
            # graph cannot be created inside a compiled graph (its outputs' grad_fn is the graph's)
            raise Unsupported(f"{getattr(target, '__name__', target)} created a tensor that requires grad "
                              f"(a new autograd leaf) inside the graph")
        if isinstance(res, Tensor):
            node = self.graph.create_node(kind, target, node_args, node_kwargs)
            self._note_op(node)
            return TensorVariable(node, res, cls=tf_cls)
        if res is None and returns_none:
            node = self.graph.create_node(kind, target, node_args, node_kwargs)
            self._note_op(node)
            return ConstantVariable(None)
        if isinstance(res, (tuple, list)) and res and all(isinstance(r, Tensor) for r in res):
            node = self.graph.create_node(kind, target, node_args, node_kwargs)
            self._note_op(node)
            items = []
            for i, r in enumerate(res):
                n = self.graph.call_function(operator.getitem, (node, i))
                n.meta.update(self.node_meta)
                items.append(TensorVariable(n, r, cls=tf_cls))
            if type(res) is list:
                return ListVariable(items)
            return TupleVariable(items, cls=type(res) if hasattr(type(res), "_fields") else tuple)
        tname = target if isinstance(target, str) else getattr(target, "__name__", target)
        raise Unsupported(f"{tname} returned {type(res).__name__}, not a tensor (would read tensor data into "
                          f"Python or is not an operator)")

    def _run_with_sym_scalars(self, target, runner, ex_args, ex_kwargs):
        """An op called with a symbolic size as a scalar argument (``x - x.shape[1]``).

        Pointwise arithmetic does not look at the scalar's value for its output metadata, so
        the example runs with the size's example value (no guard) and the graph keeps the
        sym_size node. Any other op first gets the SymInt (ops taking sizes accept them);
        if it refuses one, the size is specialised (``int()``, which records a guard)."""
        from ..fx.experimental.symbolic_shapes import hint_int
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        name = name.strip("_")
        if name in _POINTWISE_SCALAR_OPS or (name[:1] in ("r", "i") and name[1:] in _POINTWISE_SCALAR_OPS):
            a = [hint_int(x) if isinstance(x, SymInt) else x for x in ex_args]
            k = {n: hint_int(x) if isinstance(x, SymInt) else x for n, x in ex_kwargs.items()}
            return self.examples.run(runner, a, k)
        try:
            return self.examples.run(runner, ex_args, ex_kwargs)
        except Unsupported:
            pass   # e.g. linspace's kernel needs an int: specialise below
        a = [int(x) if isinstance(x, SymInt) else x for x in ex_args]
        k = {n: int(x) if isinstance(x, SymInt) else x for n, x in ex_kwargs.items()}
        return self.examples.run(runner, a, k)

    def _note_op(self, node):
        if self.node_meta:
            node.meta.update(self.node_meta)
        if node.op in ("call_function", "call_method") and "source_fn_stack" not in node.meta:
            # torch's [(name, function or method name)]; a builtin nn module's class replaces the
            # function when the module call returns (variables/objects.py:_record_module_call)
            node.meta["source_fn_stack"] = [(node.name, node.target)]
        from .. import compiler as _compiler
        if _compiler._EXPORT_DEPTH:
            from ..export._stack_trace import current_stack_trace   # export only: the user's source lines
            node.meta["stack_trace"] = current_stack_trace()
        if self._first_op is None:
            self._first_op = node
        self.n_calls += 1
        if node.target is _set_grad_enabled or node.target is _set_autocast:
            self.n_grad_nodes += 1

    # ------------------------------------------------------------------ outputs
    def ref(self, obj) -> str:
        return self.obj_ref(obj)

    def tensor_output(self, tv: TensorVariable) -> str:
        if tv.source is not None:
            # a graph input: the object read when the call started (an attribute may be reassigned later)
            return f"__in[{self.input_sources.index(tv.source)}]"
        for i, t in enumerate(self._out_tensors):
            if t.node is tv.node:
                return f"__r[{i}]"
        self._out_tensors.append(tv)
        return f"__r[{len(self._out_tensors) - 1}]"

    def record_setattr(self, obj_var, target, name, value):
        self.attr_overlay[(id(target), name)] = value
        self.side_effects.append(("setattr", obj_var, name, value))

    def record_container_mutation(self, vt):
        if isinstance(vt, ListVariable):
            for src, lst in self.live_list_iters:
                if self.containers.get(id(lst)) is vt:
                    raise Unsupported("mutating the list a list iterator argument walks (the iterator "
                                      "would see the change while the trace has read its items)")
                if vt.source is not None:
                    # (another list now; a later call could pass an iterator over this one)
                    from .symbolic_convert import _list_iter_seq
                    e = f"{self.obj_ref(_list_iter_seq)}({src.expr()}) is not {vt.source.expr()}"
                    self.guards.add(e, f"the list iterator {src.expr()} is not over {vt.source.expr()}, "
                                       f"which the frame mutates")
        if not any(k == "container" and v is vt for k, v, *_ in self.side_effects):
            self.side_effects.append(("container", vt))

    def _replay_side_effects(self):
        """Statements that redo the frame's mutations of outside objects, in order."""
        done = set()
        for eff in self.side_effects:
            if eff[0] == "setattr":
                _, obj, name, value = eff
                self._pre.append(f"setattr({self.materialize(obj)}, {name!r}, {self.materialize(value)})")
            elif eff[0] == "global":
                _, gexpr, name, value = eff
                self._pre.append(f"{gexpr}[{name!r}] = {self.materialize(value)}")
            elif eff[0] == "delattr":     # ``del obj.name`` (variables/deletions.py)
                self._pre.append(f"delattr({self.materialize(eff[1])}, {eff[2]!r})")
            elif eff[0] == "instdict":   # a functools.cached_property's first value (objects.py)
                _, obj, name, value = eff
                self._pre.append(f"{self.materialize(obj)}.__dict__[{name!r}] = {self.materialize(value)}")
            elif eff[0] == "cell":       # ``nonlocal x; x = v`` on a cell of an outside function
                self._pre.append(f"{self._entry_cell(eff[1])}.cell_contents = {self.materialize(eff[2])}")
            elif eff[0] == "delglobal":
                self._pre.append(f"del {eff[1]}[{eff[2]!r}]")
            elif eff[0] == "call":       # print/warnings.warn/logging with constant arguments
                _, fn, args, kwargs = eff
                self._pre.append(f"{self.ref(fn)}(*{self.replay_value_expr(args)}, **{self.ref(kwargs)})")
        for eff in self.side_effects:
            if eff[0] == "container" and id(eff[1]) not in done:
                vt = eff[1]
                done.add(id(vt))
                # (the object read as the call starts: a replayed setattr above may have rebound
                # the path to it -- ``old = self.cache; old.append(t); self.cache = []``)
                src = self.materialize(vt)
                if getattr(vt, "realized", True) is False:
                    # an outside list only appended to (variables/lists.py OutsideListVariable)
                    items = "".join(f"{self.materialize(i)}, " for i in vt.appended)
                    self._pre.append(f"{src}.extend(({items}))")
                elif isinstance(vt, ListVariable):
                    items = ", ".join(self.materialize(i) for i in vt.items)
                    self._pre.append(f"{src}[:] = [{items}]")
                elif vt.python_type() is collections.deque:      # (variables/deques.py)
                    items = "".join(f"{self.materialize(i)}, " for i in vt.items)
                    self._pre.append(f"{src}.clear(); {src}.extend(({items}))")
                else:
                    items = ", ".join(f"{vt.key_expr(self, k)}: {self.materialize(v)}" for k, v in vt.items.items())
                    self._pre.append(f"{src}.clear(); {src}.update({{{items}}})")

    def replay_value_expr(self, val) -> str:
        """An expression for a replayed call's argument: a constant by reference, except that
        symbolic ints in it (alone, or in tuples, lists and ``Size``s) are computed at the call
        from the inputs' sizes (``sym_int_expr``), so ``print(x.shape)`` prints this call's shape."""
        from ..fx.experimental.symbolic_shapes import SymInt
        from .variables.constant import ConstantVariable, _has_symbolic
        if type(val) is SymInt:
            expr = self.sym_int_expr(val)
            # (logging_calls._replayable checked the symbols' sources; specialise otherwise)
            return expr if expr is not None else ConstantVariable(val).reconstruct(self)
        if isinstance(val, (tuple, list)) and any(_has_symbolic(x) for x in val):   # (Size too)
            items = "".join(f"{self.replay_value_expr(x)}, " for x in val)
            if type(val) is list:
                return f"[{items}]"
            if type(val) is tuple:
                return f"({items})"
            return f"{self.ref(type(val))}(({items}))"
        return self.ref(val)

    def sym_int_expr(self, v):
        """An expression for the symbolic int ``v`` leaving the graph as a Python int (returned,
        stored in an attribute, global or cell: ``self.pos += n`` in a decoding step), computed
        at the call from the sources of its symbols as the call starts, so it is not
        specialised (a guard on its value would recompile every step). None when a symbol has
        no source (an ``.item()`` result)."""
        env = v.env
        syms = sorted(v.expr.free_symbols, key=str)
        if not syms or env is not self.examples.shape_env:
            return None
        args = []
        for sym in syms:
            srcs = env.var_to_sources.get(sym)
            if not srcs:
                return None
            src = self._int_size_sources.get(srcs[0]) or srcs[0].replace(".size()[", "._data.shape[")
            name = self._memo.get(("entry", src))
            if name is None:
                name = self._memo[("entry", src)] = f"__s{len(self._entry_reads)}"
                self._entry_reads.append(f"{name} = {src}")
            args.append(name)
        from ..fx.experimental.exact_eval import exact_function
        fn = exact_function(syms, v.expr)     # integer arithmetic (floats got (7 + 2) // 3 wrong)
        return f"{self.ref(fn)}({', '.join(args)})"

    def _entry_cell(self, cell) -> str:
        """The cell object a replayed ``nonlocal`` write goes to, read as the call starts (an
        earlier replayed write may rebind what the path to it goes through)."""
        expr = cell.cell_obj_expr
        name = self._memo.get(("entry", expr))
        if name is None:
            name = self._memo[("entry", expr)] = f"__s{len(self._entry_reads)}"
            self._entry_reads.append(f"{name} = {expr}")
        return name

    def materialize(self, vt) -> str:
        """Expression for ``vt`` after the graph; mutable containers are built once into a temp.

        A value that came from outside (it has a source) is read again through it: the same
        object, so mutations and identity are preserved."""
        from .variables.constant import ConstantVariable as _C
        from .variables.functions import CellVariable, NestedFunctionVariable
        from .variables.lists import IteratorVariable
        if vt.source is not None and (isinstance(vt, (UnspecFloatVariable, SymIntArgVariable)) or (
                not isinstance(vt, (TensorVariable, _C)) and
                not (isinstance(vt, TupleVariable) and vt.python_type() is not tuple and vt.is_python_constant()))):
            # (an unspecialized number: the one this call got, not the traced value; read at
            # the entry too when the frame wrote outside state: ``LOG.append(N); N += 1`` with N
            # a global appended N's new value)
            expr = vt.source.expr()
            if not self.side_effects:
                return expr
            # the frame changed outside objects, and the replay of that runs before this read:
            # read the value when the call starts, where its source found it while tracing
            # (``p = POOL.pop()`` at a break: POOL[0] after the replay of the pop is gone)
            name = self._memo.get(("entry", expr))
            if name is None:
                name = self._memo[("entry", expr)] = f"__s{len(self._entry_reads)}"
                self._entry_reads.append(f"{name} = {expr}")
            return name
        from .variables.exceptions import ExceptionVariable
        from .variables.objects import NewObjectVariable
        from .variables.sets import SetVariable
        from .variables.deques import DequeVariable
        from .variables.objects import PartialVariable
        if isinstance(vt, (ListVariable, DictVariable, NewObjectVariable, SetVariable, ExceptionVariable,
                           DequeVariable, PartialVariable)) and vt.source is None:
            name = self._memo.get(id(vt))
            if name is None:
                expr = vt.reconstruct(self)
                name = self._memo[id(vt)] = f"__t{len(self._memo)}"
                self._pre.append(f"{name} = {expr}")
            return name
        if isinstance(vt, IteratorVariable):
            if getattr(vt, "lazy", False) and getattr(vt, "remaining_expr", None) is None:
                # a generator's frame (or an iterator built on one) cannot be rebuilt; running
                # it to its end here would compute its items before the code that follows
                raise Unsupported("a generator (or enumerate/zip/map/filter of one) alive across a graph break")
            # a live iterator (a for-loop's, at a break in its body): its remaining items
            name = self._memo.get(id(vt))
            if name is None:
                rest = getattr(vt, "remaining_expr", None)
                if rest is not None:
                    expr = f"iter({rest(self)})"
                else:
                    items = "".join(f"{self.materialize(i)}, " for i in vt.items[vt.pos:])
                    expr = f"iter(({items}))"
                name = self._memo[id(vt)] = f"__t{len(self._memo)}"
                self._pre.append(f"{name} = {expr}")
            return name
        if isinstance(vt, CellVariable):
            return self.cell_expr(vt)
        if isinstance(vt, NestedFunctionVariable):
            name = self._memo.get(id(vt))
            if name is None:
                name = self._memo[id(vt)] = f"__t{len(self._memo)}"
                g = "G" if vt.globals_source is None else vt.globals_source.expr()
                defaults = self.materialize(vt.defaults) if vt.defaults is not None else "None"
                closure = "None"
                if vt.closure is not None:
                    closure = "(" + "".join(f"{self.cell_expr(c)}, " for c in vt.closure.items) + ")"
                self._pre.append(f"{name} = {self.ref(_types.FunctionType)}({self.ref(vt.code)}, {g}, "
                                 f"{vt.code.co_name!r}, {defaults}, {closure})")
                if vt.kwdefaults is not None:
                    self._pre.append(f"{name}.__kwdefaults__ = {self.materialize(vt.kwdefaults)}")
            return name
        from .variables.constant import ConstantMethodVariable
        from .variables.functions import UserMethodVariable
        from .variables.lists import ContainerMethodVariable
        from .variables.tensor import TensorMethodVariable
        if isinstance(vt, (ContainerMethodVariable, UserMethodVariable, TensorMethodVariable,
                           ConstantMethodVariable)) or type(vt).__name__ == "EmberMethodVariable":
            # a bound method waiting on the stack for its arguments (``out.append(f(print(x)))``)
            return callable_expr(self, vt)
        return vt.reconstruct(self)

    def cell_expr(self, cell) -> str:
        """A cell object after the graph: the frame's own closure cells are read from the function,
        cells the frame created get a new cell (one per tracker, so every function and resume
        function capturing it shares it)."""
        from .variables.functions import CellVariable
        if not isinstance(cell, CellVariable):
            raise Unsupported(f"closure item {cell} is not a cell")
        expr = getattr(cell, "cell_expr", None)
        if expr is not None:
            return expr
        if cell.real:
            raise Unsupported("a closure cell of a function defined outside the frame, kept across a graph break")
        name = self._memo.get(id(cell))
        if name is None:
            name = self._memo[id(cell)] = f"__t{len(self._memo)}"
            self._pre.append(f"{name} = {self.ref(_types.CellType)}()")
            if cell.contents is not None:
                self._pre.append(f"{name}.cell_contents = {self.materialize(cell.contents)}")
        return name

    def _break_tail(self, brk, func):
        """Statements after the graph for a graph break: rebuild the stack and locals, run the
        breaking instruction in CPython, call the resume function(s).

        Open ``with`` blocks are on the stack as their exit callables (rebuilt as
        ``GradModeExit``); the grad mode is the one at the break (set after the graph, see
        ``compile``), and if the breaking call raises, the blocks' unwinding is what restores
        the mode. Closure cells are passed as the resume function's closure."""
        from .resume import _origin, resume_code
        from .user_line import caller_at
        from .variables.constant import NullVariable, UndefinedVariable
        from .variables.ctx import GradModeExitVariable
        layout, stack_exprs = [], []
        for i, v in enumerate(brk.stack):
            # PY312+: an inlined comprehension saved its unbound loop variable as NULL
            if isinstance(v, (NullVariable, UndefinedVariable)):
                layout.append(None)
            else:
                layout.append(f"__stack{i}")
                stack_exprs.append(self.materialize(v))
        # stack arguments of an enclosing resume function are dead once its prefix ran
        live = {k: v for k, v in brk.locals.items() if not k.startswith("__stack")}
        code = self.code
        orig = _origin.get(code, (code,))[0]
        cell_names = set(orig.co_cellvars) | set(orig.co_freevars)
        order = {n: i for i, n in enumerate(orig.co_varnames)}
        local_names = sorted((k for k in live if k not in cell_names), key=lambda n: (order.get(n, len(order)), n))
        local_exprs = [self.materialize(live[n]) for n in local_names]
        lines = []
        # the breaking call is made through a function attributed to the user's line (tracebacks
        # and warnings name it, not this generated code): see user_line.py
        at = caller_at(code, brk.inst, orig.co_name)
        if brk.kind in ("call", "store"):
            fn, args, kwargs = brk.call
            fexpr = callable_expr(self, fn)
            parts = [self.materialize(a) for a in args] + [f"{k}={self.materialize(v)}" for k, v in kwargs.items()]
            if at is not None:
                parts.insert(0, fexpr)
                fexpr = self.ref(at)
            call = f"__v = {fexpr}({', '.join(parts)})"
        elif at is not None:
            call = f"__v = {self.ref(at)}({self.ref(bool)}, {self.materialize(brk.cond)})"
        else:
            call = f"__v = bool({self.materialize(brk.cond)})"
        exits = [v for v in brk.stack if isinstance(v, GradModeExitVariable)]
        if brk.kind == "call" and brk.covered:
            # under a try/with handler: the call runs in a trampoline, where the handler is live
            from .resume import TRAMPOLINE_OK, trampoline_code
            from .._C import _load_eval_frame
            tcode = trampoline_code(code, brk.inst.offset, layout, local_names)
            _load_eval_frame().mark_skip(tcode)
            targs = ", ".join(local_exprs + stack_exprs + ["__thunk"])
            lines.append(f"__thunk = lambda: {call[len('__v = '):]}")
            lines.append(f"__tr = {self._code_fn(tcode, live, func)}({targs})")
            lines.append(f"if type(__tr) is not tuple or len(__tr) != 2 or __tr[0] is not {self.ref(TRAMPOLINE_OK)}:\n"
                         f"        return __tr")
            lines.append("__v = __tr[1]")
        elif exits:
            lines.append(f"try:\n        {call}\n    except BaseException:\n"
                         f"        __STATE.grad_enabled = {exits[0].prev!r}\n        raise")
        else:
            lines.append(call)
        resumes = []
        for target in brk.targets:
            if target is None:
                raise Unsupported("graph break at the last instruction")
            lay = layout + (["__stack_result"] if brk.kind in ("call", "bool") else [])
            rcode = resume_code(code, target, lay, local_names)
            self.resume_codes.append(rcode)
            resumes.append(self._code_fn(rcode, live, func))
        call_args = local_exprs + stack_exprs + (["__v"] if brk.kind in ("call", "bool") else [])
        argstr = ", ".join(call_args)
        if brk.kind == "jump":
            lines.append(f"if __v:\n        return {resumes[0]}({argstr})")
            lines.append(f"return {resumes[1]}({argstr})")
        else:
            lines.append(f"return {resumes[0]}({argstr})")
        return lines

    def _code_fn(self, rcode, live, func):
        """Expression for a function running ``rcode`` (a resume function or trampoline): its
        closure is the frame's cells, in ``rcode.co_freevars`` order."""
        if rcode.co_freevars:
            cells = []
            for name in rcode.co_freevars:
                cell = live.get(name)
                if cell is None:
                    raise Unsupported(f"closure cell {name!r} not found at the graph break")
                cells.append(self.cell_expr(cell))
            return (f"{self.ref(_types.FunctionType)}({self.ref(rcode)}, __func.__globals__, "
                    f"{rcode.co_name!r}, None, ({''.join(c + ', ' for c in cells)}))")
        return self.obj_ref(_types.FunctionType(rcode, func.__globals__, rcode.co_name))

    def _inplace_ops(self):
        """Names of the graph's in-place calls (``x.add_``, ``x[i] = v``, ``out=``, ``inplace=True``),
        in order."""
        for node in self.graph.nodes:
            if node.op in ("call_function", "call_method") and (_is_inplace(node.target, node.kwargs)
                                                                or node.kwargs.get("inplace") is True):
                yield _op_name(node.target)

    def _note_written(self, args, kwargs):
        """An in-place call (trackers): remember the example values it writes (its first
        argument, its ``out=``) for _check_lost_aliasing."""
        self._written.extend(_dest_examples(args, kwargs))

    def note_opaque_call(self, args, kwargs):
        """A graph node whose body the trace does not see (an ``allow_in_graph`` function): it
        may write into any tensor it is given (for _check_lost_aliasing)."""
        if not self._lost_alias:
            return

        def walk(v):
            if isinstance(v, TensorVariable):
                self._written.append(v.example)
            elif isinstance(v, BaseListVariable):
                for i in v.items:
                    walk(i)
            elif isinstance(v, DictVariable):
                for i in v.items.values():
                    walk(i)
        for a in list(args) + list(kwargs.values()):
            walk(a)

    def _lost_members(self):
        """The groups of inputs traced without their memory sharing with each other (see
        ``_lost_alias``): [(source, example)] lists of two or more."""
        return [m for m in self._lost_alias.values() if len(m) > 1]

    def _check_lost_aliasing(self):
        """Inputs sharing memory (views of one tensor) traced as memories of their own, so that
        all get symbolic sizes: right as long as the graph only reads them. If it writes into
        one, the others would not see the write: trace the frame again with views static."""
        groups = self._lost_members()
        if not groups:
            return
        written = {id(memory_root(x)) for x in self._written}
        for members in groups:
            for src, ex in members:
                if id(memory_root(ex)) in written or ex._version != self._lost_versions.get(id(ex), ex._version):
                    others = ", ".join(o.expr() for o, _ in members if o is not src)
                    raise AliasedDynamicView(f"the graph writes to {src.expr()}, which shares memory "
                                             f"with {others}, given symbolic sizes")

    def _alignment_guards(self):
        """An input traced with symbolic sizes or strides has memory of its own in the trace,
        starting at its offset's residue (``fake_tensor.offset_residue``). Where the trace took
        a dtype view of it (or of a view of it), whose validity depends on that alignment, the
        guards require the same residue at later calls (eager raises for a misaligned one)."""
        for source, t, ex in self._own_memory:
            if getattr(ex._data, "storage", None) is not None and ex._data.storage.alignment_read:
                self.guards.offset_residue_match(source, t)

    def _check_strided_outputs(self):
        """A graph output (or a value handed on at a graph break) that is a view of an input
        traced with symbolic strides: backends may compute it from a contiguous copy of the
        input (``inductor.dynamic``), and aot returns views with symbolic geometry as fresh
        tensors, so a write through it would not reach the input as it does eagerly. Trace the
        frame again with such inputs static (their views are then regenerated on the input)."""
        if not self._sym_strided:
            return
        roots = {id(memory_root(ex)): src for src, ex in self._sym_strided}
        for tv in self._out_tensors:
            src = roots.get(id(memory_root(tv.example)))
            if src is not None:
                raise AliasedDynamicView(f"the graph returns a view of {src.expr()}, which was given "
                                         f"symbolic strides")

    def _aliasing_guards(self):
        """Guards that the inputs share memory as the compiled code assumes. A symbolic view
        input was traced as memory of its own: it shares none with the other tensor arguments
        at the next call either, except the inputs it was found sharing memory with when
        traced (its lost-aliasing group, which the graph only reads: any layout of theirs is
        right). A graph that writes to an input needs the inputs' sharing as when traced."""
        from .source import LocalSource
        grouped = {id(src): members for members in self._lost_members() for src, _ in members}
        for _, _, src in self._dynamic_views.values():
            members = grouped.get(id(src))
            if members is None:
                others = [o for o, v in zip(self.input_sources, self.input_values)
                          if isinstance(o, LocalSource) and o is not src and isinstance(v, Tensor)]
                self.guards.unaliased_view(src, others)
                continue
            mine = {id(o) for o, _ in members}
            others = [o for o, v in zip(self.input_sources, self.input_values)
                      if id(o) not in mine and isinstance(v, Tensor)]
            for o, _ in members:
                self.guards.unaliased_view(o, others)
        if len(self.input_values) > 1 and next(self._inplace_ops(), None) is not None:
            # the graph was compiled for the inputs' memory sharing as it was at this call (aot
            # functionalizes writes to distinct inputs as independent, and runs a graph that writes
            # to memory several inputs share eagerly): a call whose inputs share memory otherwise
            # (f(b[0:5], b[2:7]) after f(x, y)) must compile again, not return stale reads.
            # (Members of a lost-aliasing group are left out: the guards above keep them apart
            # from the rest, and their sharing among themselves does not matter.)
            kept = [(s, v) for s, v in zip(self.input_sources, self.input_values) if id(s) not in grouped]
            self.guards.memory_sharing([s for s, _ in kept], [v for _, v in kept])

    def _check_rerunnable(self):
        """A graph over code in a try block is re-run eagerly from the frame's start if it raises
        (the handler must see the exception): only sound if the graph changed nothing outside.
        In-place ops on tensors the trace made itself (``t = x.clamp(0, 1); t.relu_()``) change
        nothing outside: a re-run makes them again. A write whose memory is an input's (or
        reached through a view of one), or an in-place node not recorded here, refuses."""
        in_graph = list(self._inplace_ops())
        if len(self._inplace_dests) >= len(in_graph):
            outside = [name for name, roots in self._inplace_dests
                       if not roots or not all(self._fresh.get(id(r)) is r for r in roots)]
        else:
            outside = in_graph
        for name in outside:
            if not self.covers_try:
                # only replayed print/log calls asked for the re-run: break at the first of them
                # instead (it then runs where the program makes it), as without replay
                e = Unsupported(f"in-place op {name} in a frame whose print/warn/log calls are replayed "
                                f"after the graph (a graph that raises could not be re-run eagerly to "
                                f"make them)")
                e.break_index = self.replay_break_index
                raise e
            raise Unsupported(f"in-place op {name} in a frame with a try block (a graph that raises "
                              f"could not be re-run eagerly for the handler)")

    def _regions_expr(self, regions):
        """Python expression for ``STATE.autocast`` holding ``regions`` (``ctx._regions`` form)."""
        return f"{self.ref(dict)}({self.ref(regions)})" if regions else "None"

    def _autocast_after(self):
        """The statement leaving the autocast regions as the trace left them, when that differs
        from the entry state (a break inside an ``ember.autocast`` block, or a resumed block
        closed here)."""
        if self.final_autocast == self.entry_autocast:
            return ""
        return f"    __STATE.autocast = {self._regions_expr(self.final_autocast)}\n"

    def compile(self, result, backend, argnames):
        """Compile the graph with ``backend``; returns (runtime function, guard function, info).

        ``result`` is the return value's tracker, or a GraphBreak from the translator."""
        from .._C import _load_eval_frame
        _eval_frame = _load_eval_frame()
        from ..fx.graph_module import GraphModule
        from .resume import is_resume
        from .symbolic_convert import _NO_REGIONS, GraphBreak
        self._check_lost_aliasing()
        self._replay_side_effects()
        if isinstance(result, GraphBreak):
            tail = self._break_tail(result, self.func)
        else:
            tail = [f"return {self.materialize(result)}"]
            if self.n_calls == self.n_grad_nodes and not self.side_effects and not is_resume(self.code):
                # (a resume function gets an entry even so: skipping it would mark its code --
                # shared by every iteration of a loop -- as never to be captured)
                raise SkipFrame("no ember operations in the frame")
        self._check_strided_outputs()
        self._alignment_guards()
        compiled, gm, backend_time = None, None, 0.0
        # (a graph no op of which can raise needs no re-run: see graph_raises.py)
        rerun = (self.covers_try or self.replay_break_index is not None) and \
            graph_may_raise(self.graph, bool(self._sym_inputs))
        if self.n_calls > self.n_grad_nodes and rerun:
            self._check_rerunnable()
        if self.n_calls > self.n_grad_nodes:
            self.graph.output(tuple(t.node for t in self._out_tensors))
            gm = GraphModule(dict(self.subgraphs), self.graph)
            # backends: the example inputs are the real tensors of this call; with
            # meta["dynamic"] the graph computes sizes from its inputs (sym_size nodes) and is
            # run on other sizes that satisfy the entry's guards
            gm.meta["dynamic"] = bool(self._sym_inputs)
            gm.meta["shape_env"] = self.examples.shape_env
            t0 = time.perf_counter()
            try:
                compiled = backend(gm, list(self.input_values))
            except NotImplementedError:
                raise
            except Exception as e:
                raise BackendCompilerFailed(f"backend {getattr(backend, '__name__', backend)!r} raised "
                                            f"{type(e).__name__}: {e}") from e
            backend_time = time.perf_counter() - t0
            compiled = rewrap_outputs(compiled, [output_class(t) for t in self._out_tensors])
        if gm is not None and logs.get("graph_code").isEnabledFor(20):
            logs.get("graph_code").info("%s:%s %s\n%s", self.code.co_filename, self.code.co_firstlineno,
                                        self.code.co_name, gm.code)
        params = ", ".join(["__func"] + [f"a{i}" for i in range(self.nargs)])
        draws = ""
        if self.random_calls:
            calls = "".join(f"{self.obj_ref(fn)}(*{self.obj_ref(tuple(a))}, **{self.obj_ref(k)}), "
                            for fn, a, k in self.random_calls)
            # (the state before the draws, for an eager re-run of the frame if the graph raises)
            draws = ("    __pyrs = __py_getstate()\n" if rerun else "") + f"    __rand = ({calls})\n"
        inputs = "".join(f"{s.expr()}, " for s in self.input_sources)
        body = "".join(f"    {line}\n" for line in self._pre + tail)
        entry = "".join(f"    {line}\n" for line in self._entry_reads)
        if compiled is not None:
            # grad mode afterwards: the one the trace ended with (the entry mode is guarded, so it
            # is the same every call); if the graph raises: the caller's, or the one the open
            # with-blocks of a resume function restore when unwinding
            exc_mode = "__g" if self.exc_grad_mode is None else repr(self.exc_grad_mode)
            after = ("" if self.final_grad_mode is None else
                     f"    __STATE.grad_enabled = {bool(self.final_grad_mode)!r}\n") + self._autocast_after()
            if rerun:
                # the graph raised inside a try block (or after print/log calls it replays): run
                # the frame again, eagerly, from its start (same RNG state and grad mode; the graph
                # mutated nothing) so its handlers see it (the calls are made)
                rng, on_exc = "    __rng = __get_rng()\n", (f"        __STATE.grad_enabled = __g\n"
                                                         f"        __set_rng(__rng)\n" +
                                                         ("        __py_setstate(__pyrs)\n" if draws else "") +
                                                         f"        return __rerun({params})\n")
            else:
                rng, on_exc = "", f"        __STATE.grad_enabled = {exc_mode}\n        raise\n"
            if self.uses_autocast:
                # (a backend that runs the graph's _set_autocast nodes: undo a region left open; a
                # resumed autocast block that raises without re-running: the regions before it)
                rng += "    __ac = __STATE.autocast\n"
                restore = "__ac" if rerun or self.exc_autocast is _NO_REGIONS else \
                    self._regions_expr(self.exc_autocast)
                on_exc = f"        __STATE.autocast = {restore}\n" + on_exc
            src = (f"def __compiled({params}):\n" + draws +
                   f"    __in = ({inputs})\n" + entry + rng +
                   f"    __prev = __set_eval_frame(None)\n"
                   f"    __g = __STATE.grad_enabled\n"
                   f"    try:\n"
                   f"        __r = __graph(*__in)\n"
                   f"    except BaseException:\n" + on_exc +
                   f"    finally:\n"
                   f"        __set_eval_frame(__prev)\n" + after + body)
        else:
            # no graph (or one that only switched grad mode): the mode it would have left
            after = ("" if self.final_grad_mode is None else
                     f"    __STATE.grad_enabled = {bool(self.final_grad_mode)!r}\n") + self._autocast_after()
            src = f"def __compiled({params}):\n" + draws + f"    __in = ({inputs})\n" + entry + after + body
        ns = dict(self.guards.globals)
        ns.update(self.runtime_globals)
        ns["__graph"] = compiled
        ns["__set_eval_frame"] = _eval_frame.set_eval_frame
        from .._state import STATE
        ns["__STATE"] = STATE
        from .. import random as _random
        ns["__get_rng"], ns["__set_rng"], ns["__rerun"] = _random.get_rng_state, _random.set_rng_state, _rerun
        import random as _pyrandom
        ns["__py_getstate"], ns["__py_setstate"] = _pyrandom.getstate, _pyrandom.setstate
        exec(_code_cache.compile_source(src, f"<ember.dynamo compiled {self.code.co_name}>"), ns)
        fn = ns["__compiled"]
        _eval_frame.mark_skip(fn.__code__)
        fn.source = src
        self._aliasing_guards()
        guard_fn = self.guards.compile(self.nargs)
        _eval_frame.mark_skip(guard_fn.__code__)
        return fn, guard_fn, {"gm": gm, "backend_time": backend_time, "ops": self.n_calls,
                              "graph_break": isinstance(result, GraphBreak)}


def callable_expr(out, fn) -> str:
    """Python expression for a callable tracker (the call at a graph break)."""
    from .variables.builder import EmberMethod
    from .variables.constant import ConstantMethodVariable
    from .variables.functions import UserMethodVariable
    from .variables.lists import ContainerMethodVariable
    from .variables.tensor import TensorMethodVariable
    if isinstance(fn, TensorMethodVariable):
        return f"{out.materialize(fn.tensor)}.{fn.name}"
    if isinstance(fn, (ContainerMethodVariable, ConstantMethodVariable)):
        return f"{out.materialize(fn.obj)}.{fn.name}"
    if isinstance(fn, UserMethodVariable):
        return f"{callable_expr(out, fn.fn_var)}.__get__({out.materialize(fn.obj)})"
    if isinstance(fn, EmberMethod):
        return f"{out.ref(fn.fn)}.__get__({out.materialize(fn.obj)})"
    from .variables.functions import NestedFunctionVariable, UserFunctionVariable
    if isinstance(fn, NestedFunctionVariable):
        return out.materialize(fn)
    if isinstance(fn, UserFunctionVariable) and fn.source is None:
        return out.ref(fn.fn)
    return fn.reconstruct(out)


def _scalar_tensor(value, dtype):
    """The 0-d tensor an unspecialized float argument enters the graph as."""
    from .. import tensor as _mk
    return _mk(value, dtype=dtype)


_scalar_tensor.__module__ = "ember.dynamo.output_graph"


class _CallSource:
    """A graph input made by calling a helper on another source's value; equal when the
    expressions are (``expr``), named ``<prefix>_<varname>``."""
    prefix = ""

    def name(self):
        return f"{self.prefix}_{self.varname}"

    def __eq__(self, other):
        return type(self) is type(other) and self.expr() == other.expr()

    def __hash__(self):
        return hash(self.expr())


class _ScalarTensorSource(_CallSource):
    """``_scalar_tensor(<float source>, dtype)``: a graph input made from a Python float."""
    prefix = "S"

    def __init__(self, base, fn_name, dtype_name, varname):
        self.base, self.fn_name, self.dtype_name, self.varname = base, fn_name, dtype_name, varname

    def expr(self):
        return f"{self.fn_name}({self.base.expr()}, {self.dtype_name})"


def _int_as_size(n):
    """A uint8 tensor of ``n`` elements (none if ``n`` is negative): an int argument traced as a
    symbolic size enters the graph as this tensor's size (``OutputGraph.unspec_number``)."""
    from ..ops import api
    return api.empty(max(int(n), 0), dtype=_t.uint8)


_int_as_size.__module__ = "ember.dynamo.output_graph"


class _IntSizeSource(_CallSource):
    """``_int_as_size(<int source>)``: the graph input that carries an int as a symbolic size."""
    prefix = "N"

    def __init__(self, base, fn_name, varname):
        self.base, self.fn_name, self.varname = base, fn_name, varname

    def expr(self):
        return f"{self.fn_name}({self.base.expr()})"


class SymIntArgVariable(ConstantVariable):
    """An int argument traced as a symbolic size (``OutputGraph.unspec_number``): a SymInt
    constant, which with a floating tensor in pointwise arithmetic (``x * n``) is a 0-d tensor
    input as an unspecialized number is (no guard on its value), and which leaves the graph as
    the argument itself (``return n``: no guard either)."""

    def __init__(self, value, source, raw, name):
        super().__init__(value, source)
        self.raw = raw
        self.name = name

    def python_type(self):
        """``int``, the argument's type (the SymInt is how it is traced; its input guard already
        checks the type): ``isinstance(n, int)`` was False once ``n`` was traced symbolically."""
        return int

    def reconstruct(self, out):
        return self.source.expr()

    def __repr__(self):
        return f"SymIntArgVariable({self.value!r})"


class UnspecFloatVariable(ConstantVariable):
    """A Python float (or int) argument of a resume function (an ``.item()`` result, typically).

    It behaves as the constant it is while tracing, but its value is guarded only when
    something reads it (``.value``: a branch, a format, a call that needs the number); in
    pointwise arithmetic with a floating tensor it enters the graph as a 0-d tensor input
    instead (``OutputGraph.add_scalar_input``), so a new value runs the same graph."""

    def __init__(self, value, source, output, name):
        self._out = output
        self._guarded = False
        self.name = name
        super().__init__(value, source)

    @property
    def raw(self):
        return self._raw

    @property
    def value(self):
        if not self._guarded:
            self._guarded = True
            self._out.guards.constant_match(self.source, self._raw)
        return self._raw

    @value.setter
    def value(self, v):
        self._raw = v

    def is_python_constant(self):
        return True   # without reading (and guarding) the value

    def python_type(self):
        """``isinstance(lr, Tensor)`` (the optimizers' scalar helpers ask) needs only the type:
        guard that, not the value, so a scheduler's new learning rate reuses the graph."""
        if not self._guarded and not getattr(self, "is_random", False):
            tname = type(self._raw).__name__
            self._out.guards.add(f"type({self.source.expr()}) is {tname}",
                                 f"{self.source.expr()} is {'an' if tname[:1] in 'aeiou' else 'a'} {tname}")
        return type(self._raw)

    def reconstruct(self, out):
        return self.source.expr()

    def __repr__(self):
        return f"UnspecFloatVariable({self._raw!r})"


# in-place changes of autograd state: the graph's functional form has no place for them
_AUTOGRAD_STATE_METHODS = {"requires_grad_", "detach_"}
# in-place changes of a tensor's geometry (ember/ops/shape_inplace.py): run eagerly at a break
_GEOMETRY_METHODS = {"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_",
                     "resize_", "resize_as_", "set_"}
_INPLACE_OPERATORS = {"setitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior",
                      "ixor", "ilshift", "irshift", "imatmul", "delitem"}


def _op_name(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _dest_examples(args, kwargs):
    """The example tensors an in-place call (trackers) writes: its first argument, its ``out=``."""
    out = []
    for d in list(args[:1]) + [kwargs.get("out")]:
        for x in (d.items if isinstance(d, BaseListVariable) else (d,)):
            if isinstance(x, TensorVariable):
                out.append(x.example)
    return out


def _is_inplace(target, kwargs) -> bool:
    """Whether a call writes into its first argument or its ``out=`` (``x.add_``, ``x[i] = v``)."""
    name = _op_name(target)
    return name in _INPLACE_OPERATORS or (name.endswith("_") and not name.endswith("__")) or "out" in kwargs


def _inplace_flag(kwargs) -> bool:
    """``F.relu(x, inplace=True)``: the call writes into its first argument too (trackers)."""
    flag = kwargs.get("inplace")
    return getattr(flag, "value", flag) is True


def _rerun(func, *slots):
    """Call ``func`` with the frame's argument slots (the hook's protocol: positional, then
    keyword-only, then the ``*args`` tuple and ``**kwargs`` dict)."""
    code = func.__code__
    n, k = code.co_argcount, code.co_kwonlyargcount
    args = list(slots[:n])
    names = code.co_varnames
    kw = {names[n + j]: slots[n + j] for j in range(k)}
    i = n + k
    if code.co_flags & 0x04:
        args.extend(slots[i])
        i += 1
    if code.co_flags & 0x08:
        kw.update(slots[i])
    return func(*args, **kw)
