"""Inductor for graphs traced with a caller's symbolic sizes (aot on dynamo's ShapeEnv).

``compile_fx_maybe_symbolic(gm, example_inputs)`` is the graph compiler the
``"inductor"`` backend hands to aot. When the example inputs are real (or
fakes with concrete sizes) it is ``compile_fx``. When they carry SymInt sizes
it compiles the graph **once** for every size (``compile_fx(dynamic=True)``)
after adapting its inputs and outputs to what compiled code can take:

* **size inputs** (the backward receives the sizes the forward saved, as
  SymInts): a size that is a dimension of a tensor input is read off that
  input (``sym_size``), a compound one is computed from those; a symbol no
  tensor input carries is passed as a *carrier*, an empty ``(n, 0)`` array
  whose first dimension is the size (no data, one ``np.empty``), so the
  compiled wrapper reads every size the same way: off an input's shape;
* **size outputs** (the forward returns the sizes it saves): computed here
  from the call's input shapes, not by the compiled graph;
* **layouts**: symbolic inputs are compiled C-contiguous; an input that is
  not (an expanded gradient, a transposed saved value) is copied to a
  contiguous array first. Supported: any input whose sizes are symbols, sums,
  products, floor divisions of symbols that some input dimension or size
  input carries.

A graph outside that (a size over symbols no input carries) runs in the fx
Interpreter instead, with the reason logged on ``ember.inductor``. Guards the
lowering needs go into the caller's ShapeEnv (``graph.py``).
"""
from __future__ import annotations

import logging
import operator
from typing import Any, Dict, List

import numpy as np

from .. import types as _t
from ..fx.experimental.symbolic_shapes import SymInt, sympy  # sympy: lazy (a graph-cache hit never loads it)
from ..tensor import Tensor, _make

log = logging.getLogger("ember.inductor")


def _sym_expr(v):
    return v.expr if isinstance(v, SymInt) else sympy.Integer(int(v))


def is_symbolic_example(inputs) -> bool:
    for a in inputs:
        if isinstance(a, SymInt):
            return True
        if isinstance(a, Tensor) and any(isinstance(n, SymInt) for n in a._data.shape):
            return True
    return False


def compile_fx_maybe_symbolic(gm, example_inputs):
    """``compile_fx`` for concrete example inputs; :func:`compile_fx_symbolic` for symbolic ones."""
    from .compile_fx import compile_fx
    if not is_symbolic_example(example_inputs):
        return compile_fx(gm, example_inputs)
    from ..fx.lazy_graph_module import materialize
    return compile_fx_symbolic(materialize(gm), example_inputs)


# the aot cache may hand this compiler a LazyGraphModule (built only on an inductor cache miss)
compile_fx_maybe_symbolic.accepts_lazy_graph = True


class _Unsupported(Exception):
    pass


def _layout_read_placeholders(gm):
    """Positions of the placeholders whose memory layout the graph's values depend on: those an
    ``as_strided`` (its strides are the traced input's: a functionalized in-place write
    through ``unfold``, a user's ``as_strided``) reads through any chain of nodes."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    seen, stack = set(), []
    for n in gm.graph.nodes:
        op = getattr(n.target, "_ember_op", None) if n.op == "call_function" else None
        if op is not None and op.name == "prims.as_strided" and n.args:
            stack.append(n.args[0])
    while stack:
        n = stack.pop()
        if not hasattr(n, "all_input_nodes") or n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return [i for i, p in enumerate(phs) if p in seen]


def _check_layouts(gm, example_inputs):
    """Compiled for symbolic sizes, every input is passed C-contiguous (a copy where it is not):
    a graph whose ``as_strided`` reads a non-contiguous input would read the copy with the
    strides of the original -- other elements, or past the end. Such graphs run in the fx
    Interpreter, on the inputs as they are."""
    for i in _layout_read_placeholders(gm):
        t = example_inputs[i] if i < len(example_inputs) else None
        if isinstance(t, Tensor) and not t.is_contiguous():
            raise _Unsupported(f"as_strided reads input {i}, which is not contiguous (strides "
                               f"{tuple(t.stride())}): its layout would be lost to the contiguous copy")


def compile_fx_symbolic(gm, example_inputs):
    """Compile ``gm`` once for all sizes of its symbolic example inputs (see the module docstring)."""
    try:
        _check_layouts(gm, list(example_inputs))
        return _SymbolicGraph(gm, list(example_inputs))
    except _Unsupported as e:
        log.warning("inductor: the graph with symbolic sizes runs in the fx Interpreter: %s", e)
        from ..fx.interpreter import Interpreter

        def run(*args):
            return Interpreter(gm).run(*args)
        run.eager_reason = str(e)
        return run


def _int_fn(syms, e):
    """A function of the symbols' values computing size expression ``e`` exactly, in Python ints
    (``fx.experimental.exact_eval``: ``sympy.lambdify(..., modules="math")`` computed
    ``floor(s0/3 + 2/3)`` -- what ``(n + 2) // 3`` and a ceil_mode pooling size become -- in
    floats, one short at n = 7: a backward of the wrong size)."""
    from ..fx.experimental.exact_eval import exact_function
    return exact_function(syms, e)


def _node_for(graph, expr, sym_nodes: Dict[Any, Any]):
    """A node (or int) of ``graph`` computing size ``expr`` from the symbols' nodes."""
    if expr.is_Integer:
        return int(expr)
    hit = sym_nodes.get(expr)
    if hit is not None:
        return hit
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        op = operator.add if isinstance(expr, sympy.Add) else operator.mul
        args = sorted(expr.args, key=lambda e: e.is_number)
        if any(e.is_Rational and not e.is_Integer for e in args):
            raise _Unsupported(f"non-integer size expression {expr}")
        acc = _node_for(graph, args[0], sym_nodes)
        for e in args[1:]:
            acc = graph.call_function(op, (acc, _node_for(graph, e, sym_nodes)))
    elif isinstance(expr, sympy.floor):
        num, den = sympy.together(expr.args[0]).as_numer_denom()
        acc = graph.call_function(operator.floordiv, (_node_for(graph, sympy.expand(num), sym_nodes),
                                                      _node_for(graph, den, sym_nodes)))
    elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        acc = graph.call_function(operator.pow, (_node_for(graph, expr.base, sym_nodes), int(expr.exp)))
    elif isinstance(expr, sympy.Mod):
        acc = graph.call_function(operator.mod, tuple(_node_for(graph, e, sym_nodes) for e in expr.args))
    elif isinstance(expr, (sympy.Max, sympy.Min)):
        acc = graph.call_function(max if isinstance(expr, sympy.Max) else min,
                                  tuple(_node_for(graph, e, sym_nodes) for e in expr.args))
    else:
        raise _Unsupported(f"cannot compute size {expr} from the inputs")
    sym_nodes[expr] = acc
    return acc


def _graph_size_exprs(gm, example_inputs):
    """Every size expression ``gm`` uses: its inputs' sizes, its nodes' values' shapes and the
    sizes among their arguments."""
    out = []

    def visit(v):
        if isinstance(v, SymInt):
            out.append(v.expr)
        elif isinstance(v, Tensor):
            out.extend(n.expr for n in v.shape if isinstance(n, SymInt))
        elif isinstance(v, (tuple, list)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    visit(list(example_inputs))
    for n in gm.graph.nodes:
        visit(n.meta.get("val"))
        visit(n.meta.get("sym_val"))
        visit(n.args)
        visit(n.kwargs)
    return out


def _read_back_by_guards(sizes, known, example_inputs, gm):
    """``[(u, (input, dim), a, k)]``: symbols ``u`` outside ``known`` read back as
    ``u = a * dim + k`` from a dimension ``b + floor((u + c) / a)`` (a pooled or strided size:
    an ``avg_pool2d(x, 2)`` backward saves floor(s2/2)-high values, and no tensor s2 high). The
    floor drops the remainder ``(u + c) mod a``, so ``u`` is one of ``a`` sizes. It is read back

    * exactly, when the ShapeEnv's guards fix that remainder (every other one makes a guard
      false: every call reaching the graph has ``u`` in that one residue class), or
    * as any one of those sizes (the remainder of the example's), when the graph uses ``u`` only
      inside that floor (every size expression of it, inputs, values and arguments): then the
      compiled code computes the same whichever of them it gets.

    ``known`` is updated. Otherwise nothing is returned for ``u`` (the fx Interpreter runs it)."""
    env = next((n.env for a in example_inputs if isinstance(a, Tensor)
                for n in a.shape if isinstance(n, SymInt)), None)
    if env is None:
        return []
    exprs = None
    t = sympy.Symbol("_rb_t", integer=True, nonnegative=True)
    out = []
    for i, size in enumerate(sizes):
        for d, e in enumerate(size):
            free = e.free_symbols
            if len(free) != 1 or free <= known:
                continue
            (u,) = free
            floors = e.atoms(sympy.floor)
            if len(floors) != 1 or u not in env.var_to_val:
                continue
            (fl,) = floors
            b = sympy.expand(e - fl)
            if not b.is_Integer:
                continue
            arg = sympy.expand(fl.args[0])
            inv = arg.coeff(u, 1)
            if not inv.is_Rational or inv <= 0 or not (1 / inv).is_Integer:
                continue
            a = int(1 / inv)
            c = sympy.expand(a * arg - u)
            if not c.is_Integer or not 2 <= a <= 64:
                continue
            a, c, b = a, int(c), int(b)
            j = (int(env.var_to_val[u]) + c) % a
            # u = a * (e - b) - c + j exactly when the guards exclude every other remainder
            ok = all(any(g.xreplace({u: a * t - c + r}) == sympy.false for g in env.guards)
                     for r in range(a) if r != j)
            if not ok:
                # ... or any of them serves when nothing in the graph sees u but through the floor
                if exprs is None:
                    exprs = _graph_size_exprs(gm, example_inputs)
                hole = sympy.Dummy()
                ok = not any(x.has(u) and x.xreplace({fl: hole}).has(u) for x in exprs)
            if ok:
                known.add(u)
                out.append((u, (i, d), a, j - c - a * b))
    return out


class _SymbolicGraph:
    """The compiled graph plus the per-call adaptation of its inputs and outputs."""

    def __init__(self, gm, example_inputs: List[Any]):
        from ..fx.experimental.proxy_tensor import sym_size
        from ..fx.fake_tensor import make_fake
        from ..fx.graph import Graph
        from ..fx.graph_module import GraphModule
        from .._fake import FakeArray
        from .compile_fx import compile_fx
        from .sizevars import read_back_symbols

        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(phs) != len(example_inputs):
            raise _Unsupported("placeholders and example inputs differ in number")
        tensor_pos = [i for i, a in enumerate(example_inputs) if isinstance(a, Tensor)]
        scalar_pos = [i for i, a in enumerate(example_inputs) if not isinstance(a, Tensor)]
        for i in scalar_pos:
            if not isinstance(example_inputs[i], (int, SymInt)) or isinstance(example_inputs[i], bool):
                raise _Unsupported(f"input {i} is a {type(example_inputs[i]).__name__}")
        # where each symbol can be read at call time: (input position, dim) or a scalar position
        where: Dict[sympy.Symbol, tuple] = {}
        for i in tensor_pos:
            for d, n in enumerate(example_inputs[i].shape):
                if isinstance(n, SymInt) and n.expr.is_Symbol and n.expr not in where:
                    where[n.expr] = ("dim", i, d)
        carriers = []
        for i in scalar_pos:
            e = _sym_expr(example_inputs[i])
            if e.is_Symbol and e not in where:
                where[e] = ("scalar", i)
                carriers.append(i)
        # a symbol no dimension holds as itself, read back from one linear in it (the backward
        # of a convolution gets its output gradient, s0 - s3 + 1 wide, but no tensor s0 wide);
        # after the symbols it is read with, so ``where`` stays in an order they can be built in
        read_back = read_back_symbols([[_sym_expr(n) for n in example_inputs[i].shape] for i in tensor_pos],
                                      set(where), pairs=True)
        for u, pos, a, rest in read_back:
            where[u] = ("affine", tuple((tensor_pos[k], d) for k, d in pos), a, rest)
        # ... or from a size input linear in it (a slice's backward gets ``s1 - 4``): that input
        # is passed as a carrier too
        scalar_exprs = [i for i in scalar_pos if i not in carriers]
        for u, ((k, _),), a, rest in read_back_symbols([[_sym_expr(example_inputs[i])] for i in scalar_exprs],
                                                       set(where)):
            i = scalar_exprs[k]
            where[u] = ("affine_scalar", i, a, rest)
            carriers.append(i)
        # ... or from a floor size (an avg_pool2d(x, 2) backward saves floor(s2/2)-high values):
        # see _read_back_by_guards
        for u, pos, a, k in _read_back_by_guards(
                [[_sym_expr(n) for n in example_inputs[i].shape] for i in tensor_pos], set(where),
                example_inputs, gm):
            where[u] = ("scaled", (tensor_pos[pos[0]], pos[1]), a, k)
        # (passed to the compiled code as a carrier of its own: computed here at each call)
        scaled = [(u, w) for u, w in where.items() if w[0] == "scaled"]
        for i, a in enumerate(example_inputs):
            exprs = [_sym_expr(a)] if i in scalar_pos else [_sym_expr(n) for n in a.shape]
            for e in exprs:
                missing = e.free_symbols - set(where)
                if missing:
                    raise _Unsupported(f"size {e} of input {i} uses {', '.join(sorted(map(str, missing)))}, "
                                       f"which no input carries")
        # -- the graph inductor compiles: tensor inputs, then carriers; sizes from their shapes
        g = Graph()
        env: Dict[Any, Any] = {}
        new_ph = {}
        for i in tensor_pos:
            ph = g.placeholder(phs[i].name)
            ph.meta.update(phs[i].meta)
            new_ph[i] = env[phs[i]] = ph
        carrier_ph = {}
        for i in carriers:
            carrier_ph[i] = g.placeholder(f"{phs[i].name}_carrier")
        scaled_ph = {u: g.placeholder(f"{u}_carrier") for u, _ in scaled}
        sym_nodes: Dict[Any, Any] = {}
        for s, w in where.items():
            if w[0] == "dim":
                sym_nodes[s] = g.call_function(sym_size, (new_ph[w[1]], w[2]))
            elif w[0] == "scaled":
                sym_nodes[s] = g.call_function(sym_size, (scaled_ph[s], 0))
            elif w[0] in ("affine", "affine_scalar"):    # (ordered: its rest uses symbols built before it)
                if w[0] == "affine":
                    node, a, rest = None, w[2], w[3]
                    for ti, d in w[1]:       # (one dimension, or the sum of two)
                        sz = g.call_function(sym_size, (new_ph[ti], d))
                        node = sz if node is None else g.call_function(operator.add, (node, sz))
                else:
                    node, a, rest = g.call_function(sym_size, (carrier_ph[w[1]], 0)), w[2], w[3]
                if rest != 0:
                    node = g.call_function(operator.sub, (node, _node_for(g, rest, sym_nodes)))
                sym_nodes[s] = node if a == 1 else g.call_function(operator.floordiv, (node, a))
            else:
                sym_nodes[s] = g.call_function(sym_size, (carrier_ph[w[1]], 0))
        for i in scalar_pos:
            env[phs[i]] = _node_for(g, _sym_expr(example_inputs[i]), sym_nodes)
        out_node = None
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                out_node = n
                break
            env[n] = g.node_copy(n, lambda a: env[a])
        outs = out_node.args[0]
        if not isinstance(outs, (tuple, list)):
            raise _Unsupported("the graph's output is not a flat tuple")
        # size outputs: computed here from the inputs' shapes
        self._size_outs = {}
        tensor_outs = []
        for k, o in enumerate(outs):
            if hasattr(o, "op") and hasattr(o, "users") and "sym_val" not in o.meta:
                tensor_outs.append(env[o])
                continue
            val = o.meta["sym_val"] if hasattr(o, "op") else o
            if val is None:
                self._size_outs[k] = None
                continue
            if not isinstance(val, (int, SymInt)):
                raise _Unsupported(f"output {k} is neither a tensor nor a size")
            e = _sym_expr(val)
            if e.free_symbols - set(where):
                raise _Unsupported(f"output size {e} uses symbols no input carries")
            self._size_outs[k] = e
        g.output(tuple(tensor_outs))
        new_gm = GraphModule(gm, g, class_name=type(gm).__name__)
        env0 = next(n.env for i in tensor_pos for n in example_inputs[i].shape if isinstance(n, SymInt)) \
            if scaled else None
        examples = [example_inputs[i] for i in tensor_pos] + \
            [make_fake(FakeArray((example_inputs[i], 0), np.int8), _t.cpu) for i in carriers] + \
            [make_fake(FakeArray((SymInt(u, env0), 0), np.int8), _t.cpu) for u, _ in scaled]
        self.compiled = compile_fx(new_gm, examples, dynamic=True)
        self.gm = new_gm
        self.n_out = len(outs)
        self._warned = False
        self._tensor_pos = tensor_pos
        self._carriers = carriers
        self._scaled = [w for _, w in scaled]
        self._plain = not carriers and not scalar_pos and not self._size_outs and not scaled
        syms = sorted(where, key=str)
        self._size_fns = []
        if self._size_outs:
            # (symbol, how to read it) in ``where``'s order: a read-back symbol's rest is a
            # function of the symbols before it
            self._readers = []
            for s, w in where.items():
                if w[0] == "affine_scalar":    # (the same reading, off the scalar argument)
                    w = ("affine", ((w[1], None),), w[2], w[3])
                if w[0] == "affine":           # ("affine", positions, a, rest function, its symbols)
                    prior = [t for t in where if t in w[3].free_symbols]
                    w = ("affine", w[1], w[2], _int_fn(prior, w[3]), prior)
                self._readers.append((s, w))
            self._syms = syms
            for k, e in self._size_outs.items():
                if e is None:
                    self._size_fns.append((k, lambda *a: None))
                elif e.free_symbols:
                    self._size_fns.append((k, _int_fn(syms, e)))
                else:
                    self._size_fns.append((k, lambda *a, v=int(e): v))

    @property
    def eager_reason(self):
        return getattr(self.compiled, "eager_reason", None)

    def __call__(self, *args):
        if self._plain:
            tensors = list(args)
        else:
            tensors = [args[i] for i in self._tensor_pos]
            for i in self._carriers:
                tensors.append(_make(np.empty((int(args[i]), 0), np.int8)))
            for _, (i, d), a, k in self._scaled:
                tensors.append(_make(np.empty((args[i].shape[d] * a + k, 0), np.int8)))
        for k, t in enumerate(tensors):
            if not t._data.flags.c_contiguous:
                if not self._warned:
                    self._warned = True
                    log.info("inductor: a non-contiguous input (%s, strides %s) of a graph compiled for "
                             "symbolic sizes is copied to a contiguous array", tuple(t.shape), t.stride())
                tensors[k] = _make(np.ascontiguousarray(t._data), t.device, t.dtype)
        res = self.compiled(*tensors)
        if not self._size_outs:
            return res
        known = {}
        for s, w in self._readers:
            if w[0] == "dim":
                known[s] = args[w[1]].shape[w[2]]
            elif w[0] == "scaled":
                known[s] = args[w[1][0]].shape[w[1][1]] * w[2] + w[3]
            elif w[0] == "affine":
                n = sum(int(args[i]) if d is None else args[i].shape[d] for i, d in w[1])
                known[s] = (n - w[3](*[known[t] for t in w[4]])) // w[2]
            else:
                known[s] = int(args[w[1]])
        vals = [known[s] for s in self._syms]
        out = [None] * self.n_out
        sizes = {k: fn(*vals) for k, fn in self._size_fns}
        it = iter(res)
        for k in range(self.n_out):
            out[k] = sizes[k] if k in sizes else next(it)
        return tuple(out)
