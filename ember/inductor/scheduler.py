"""The scheduler: group the realized buffers into kernels (loop fusion) and
order them.

A *fused group* is one C++ kernel: an outer loop nest over sizes ``P``
(parallel) whose body runs the group's nodes in order, each as a *stage*:

* a pointwise node of size ``P + Q`` runs an inner (SIMD) loop nest over ``Q``
  (no inner loop when ``Q`` is empty);
* a reduction with output size ``P`` runs its reduction loop over its
  ``reduction_ranges`` and stores one value per outer iteration.

So softmax (amax, exp-sub, sum, div over rows) and layer_norm become one
kernel with one parallel loop over the rows; a chain of pointwise ops of one
size is one loop (most of it was already inlined by the lowering). A pointwise
node beside a reduction over outer dims (a bias gradient's column sum) may join
it as a *row stage* (:func:`row_stage`, C++ backend): iterated over the
reduction's outer and reduced variables, written where the reduction reads.

Legality -- never fuse across a dependency we cannot prove. A stage may read
a buffer written by an earlier stage of the same group only at exactly the
index that stage wrote in the same outer iteration: the read index must equal
the writer's index as sympy expressions over the shared outer variables
``x*`` and, when the writer has an inner loop, over inner variables ``r*``
of identical ranges. Then every value read was written earlier in the same
outer iteration, so outer iterations are independent (parallel-safe) and the
stage order is a valid schedule. Reads of buffers of other kernels are free:
those kernels ran before. A node joins a group only if every buffer it reads
was produced by that group or an earlier one.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Set

import numpy as np
import sympy

from . import config, ir
from .ir import index_vars
from .sizevars import contiguous_strides, product, simplify_index

log_fusion = logging.getLogger("ember.inductor.fusion")
log_schedule = logging.getLogger("ember.inductor.schedule")


class SchedNode:
    def __init__(self, buf: ir.ComputedBuffer):
        self.buf = buf
        self.name = buf.name
        self.data = buf.data
        self.is_reduction = isinstance(buf.data, ir.Reduction)
        self.is_scan = isinstance(buf.data, ir.Scan)
        # scatters and scans are kernels of their own (never fused)
        self.is_scatter = isinstance(buf.data, ir.Scatter) or self.is_scan
        self.size = list(buf.data.get_size())
        self.rranges = list(buf.data.reduction_ranges) if self.is_reduction else []
        self._reads: Dict[int, list] = {}
        # a row stage (:func:`row_stage`) writes its buffer at this flat index in the group's
        # outer and reduced variables instead of row-major over its sizes
        self.flat_write: Optional[sympy.Expr] = None
        # transcendental ops and divisions in one element's value, inlined producers included
        # (ir.EXPENSIVE_OPS): the codegen weighs them when it decides to run a loop on threads
        self.expensive_ops = 0
        self.read_names: Set[str] = {n for n, _ in self.reads(self.natural_p())}
        if self.is_scatter and not self.is_scan:
            d = buf.data
            js = index_vars("y", len(d.iter_size))

            def body(js):
                d.target_fn(js)
                d.value_fn(js)
            self.read_names |= {n for n, _ in ir.extract_reads(body, js).reads}

    def natural_p(self) -> int:
        return len(self.size)

    def can_split(self, p: int) -> bool:
        return p == len(self.size) if self.is_reduction else 0 <= p <= len(self.size)

    def outer(self, p):
        return self.size[:p]

    def inner(self, p):
        return self.rranges if self.is_reduction else self.size[p:]

    def vars(self, p):
        return index_vars("x", p), index_vars("r", len(self.inner(p)))

    def reads(self, p) -> list:
        if p not in self._reads:
            xs, rs = self.vars(p)
            if self.is_reduction:
                rec = ir.extract_reads(self.data.inner_fn, xs, rs)
            else:
                rec = ir.extract_reads(self.data.inner_fn, xs + rs)
            self.expensive_ops = rec.expensive     # (the same for every p)
            rng = {v: (sympy.Integer(0), n) for v, n in zip(xs + rs, list(self.outer(p)) + list(self.inner(p)))}
            sizes = {v: n for v, (_, n) in rng.items()}
            # simplified over the loop ranges as the codegen prints them: the legality
            # check compares these, and the access pattern decides loop order
            self._reads[p] = [(n, simplify_index(i, rng, sizes)) for n, i in rec.reads]
        return self._reads[p]

    def is_outer_reduction(self, p=None) -> bool:
        """A reduction over outer dims (``sum(x[N, C], 0)``, bias gradients): its reads
        are unit-stride in the last output variable and in no reduction variable. The
        codegen interchanges its loops (see ``KernelGen._generate_outer_reduction``),
        which needs a group without inner loops."""
        p = len(self.size) if p is None else p
        if not self.is_reduction or p == 0 or self.data.reduction_type in ("argmax", "argmin"):
            return False
        xl = index_vars("x", p)[-1]
        rvars = index_vars("r", len(self.rranges))
        unit_x = False
        for _, idx in self.reads(p):
            if idx.coeff(xl) == 1:
                unit_x = True
            if any(idx.coeff(r) == 1 for r in rvars):
                return False
        return unit_x

    def write_index(self, p):
        if self.flat_write is not None:
            return self.flat_write
        xs, rs = self.vars(p)
        if self.is_reduction:
            idx = xs
        else:
            idx = xs + rs
        return sympy.expand(sum((i * s for i, s, n in zip(idx, contiguous_strides(self.size), self.size)
                                 if n != 1), sympy.Integer(0)))

    def reindexed(self, new_size) -> "SchedNode":
        """This pointwise node iterated over ``new_size``: the same elements in the same
        (row-major) order, its buffer written at the same flat positions. The caller checks
        that the re-derived indices simplified back to affine ones."""
        r = SchedNode.__new__(SchedNode)
        r.__dict__.update(self.__dict__)
        r.size, r.rranges, r._reads = list(new_size), [], {}
        r.data = _ReindexedData(self.data, self.size, new_size)
        return r

    def __repr__(self):
        kind = f"reduction[{self.data.reduction_type}]" if self.is_reduction else "pointwise"
        return f"{self.name}: {kind} size={self.size}" + (f" ranges={self.rranges}" if self.is_reduction else "")


class _ReindexedData:
    """A pointwise body over other sizes of the same elements in the same order:
    ``inner_fn(ys)`` calls the original with each old index computed from the flat position."""

    def __init__(self, data, old_size, new_size):
        self._data = data
        self._old, self._new = list(old_size), list(new_size)
        self.origins = getattr(data, "origins", ())

    def get_size(self):
        return self._new

    def __getattr__(self, name):          # dtype, device, ...: the original's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._data, name)

    def _flat(self, ys):
        """The element's position in the original's row-major order."""
        return sum((y * st for y, st in zip(ys, contiguous_strides(self._new))), sympy.Integer(0))

    def inner_fn(self, ys):
        from .sizevars import FloorDiv, ModularIndexing
        flat = self._flat(ys)
        st = contiguous_strides(self._old)
        old = [FloorDiv(flat, st[0])] + [ModularIndexing(flat, st[i], self._old[i]) for i in range(1, len(self._old))]
        return self._data.inner_fn(old)


class _PermutedData(_ReindexedData):
    """A pointwise body iterated over other sizes in another order: the element at ``ys`` is the
    one at flat position ``flat`` (an affine expression in ``vars``, a bijection onto the
    elements; see :func:`row_stage`) of the original's row-major order."""

    def __init__(self, data, old_size, new_size, flat, vars_):
        super().__init__(data, old_size, new_size)
        self._position, self._vars = flat, list(vars_)

    def _flat(self, ys):
        return self._position.xreplace(dict(zip(self._vars, ys)))


def _dense_bijection(index, vars_, sizes) -> bool:
    """Whether the affine ``index`` over ``vars_`` (ranges ``sizes``, static) visits every
    position of ``0 .. prod(sizes) - 1`` once: its coefficients, in increasing order, are the
    contiguous strides of the sizes in that order."""
    index = sympy.expand(index)
    pairs = []
    rest = index
    for v, n in zip(vars_, sizes):
        c = index.coeff(v)
        rest = sympy.expand(rest - c * v)
        if int(n) != 1:
            if not c.is_Integer or int(c) <= 0:
                return False
            pairs.append((int(c), int(n)))
    if rest != 0 or rest.free_symbols:
        return False
    stride = 1
    for c, n in sorted(pairs):
        if c != stride:
            return False
        stride *= n
    return True


def row_stage(node: "SchedNode", nodes: List["SchedNode"], p: int) -> Optional["SchedNode"]:
    """``node`` (pointwise) as a stage of the row loop of the column reduction among ``nodes``
    (a group at depth ``p`` whose loops the C++ codegen interchanges, see
    :meth:`SchedNode.is_outer_reduction`): iterated over the reduction's ``outer + reduced``
    variables, element ``(x, r)`` being the one at the flat position where the reduction reads a
    buffer ``node`` also reads at its own element. A bias gradient beside the gradient it sums
    (``sum(dy * gelu'(h), 0)`` and ``dy * gelu'(h)`` for the weight's product): one pass over
    the operands instead of two. None when no such buffer exists, the sizes are not static and
    equal in number, ``node`` reads what the group writes, or an index would keep a division."""
    if node.is_reduction or node.is_scatter or p != 1 or node.read_names & {n.name for n in nodes}:
        return None
    reds = [n for n in nodes if n.is_reduction and n.can_split(p) and n.is_outer_reduction(p)]
    if not reds:
        return None
    sizes = list(reds[0].outer(p)) + list(reds[0].rranges)
    if not all(getattr(d, "is_Integer", False) for d in list(node.size) + sizes) or \
            int(product(node.size)) != int(product(sizes)):
        return None
    own = node.natural_p()
    w = sympy.expand(node.write_index(own))
    aligned = {name for name, idx in node.reads(own) if sympy.expand(idx - w) == 0}
    vars_ = index_vars("x", p) + index_vars("r", len(reds[0].rranges))
    for red in reds:
        for name, a in red.reads(p):
            if name not in aligned or not _dense_bijection(a, vars_, sizes):
                continue
            r = SchedNode.__new__(SchedNode)
            r.__dict__.update(node.__dict__)
            r.size, r.rranges, r._reads = [sympy.Integer(int(d)) for d in sizes], [], {}
            r.data = _PermutedData(node.data, node.size, r.size, sympy.expand(a), vars_)
            r.flat_write = sympy.expand(a)
            return None if has_div_mod(r, p) else r
    return None


def reviewed(node: "SchedNode", outer) -> Optional["SchedNode"]:
    """``node`` (pointwise, static sizes) iterated over ``outer + rest`` instead of its own sizes
    -- the same elements in the same (row-major) order, so its buffer is written at the same
    flat positions: softmax's division over ``[B*H, T, T]`` (shaped for the batched matmul
    after it) fused into the row loop of its reductions over ``[B, H, T]``. ``rest`` is the
    node's trailing dims when their product is what is left, else one dim. None when the sizes
    do not divide, or an index would keep a division or modulo (slower than two kernels)."""
    if node.is_reduction or node.is_scatter or not outer:
        return None
    old = node.size
    if not all(getattr(d, "is_Integer", False) for d in list(old) + list(outer)):
        return None
    total, po = int(product(old)), int(product(outer))
    if po == 0 or total % po:
        return None
    left = total // po
    rest = [left]
    for k in range(len(old) - 1, -1, -1):
        if int(product(old[k:])) == left:
            rest = list(old[k:])
            break
    new = list(outer) + [sympy.Integer(r) for r in rest if r != 1 or len(rest) == 1]
    if _same_sizes(new, old):
        return None
    r = node.reindexed(new)
    return None if has_div_mod(r, len(outer)) else r


def has_div_mod(node: SchedNode, p: int) -> bool:
    """Whether an index of ``node`` (at depth ``p``) kept a division or modulo."""
    from .sizevars import FloorDiv, ModularIndexing
    return any(idx.has(FloorDiv, ModularIndexing, sympy.floor, sympy.Mod) for _, idx in node.reads(p))


def _stage_major_blocks(g: "FusedGroup") -> None:
    """A pointwise kernel of many stages that reads and writes many buffers (an LSTM backward's
    32-step cell-state recurrence recomputed from the saved gates: 64 outputs, 96 inputs)
    iterated over ``[n / B, B]`` instead of ``[n]``: the codegen then runs each stage as its own
    SIMD loop over a block of ``B`` elements (later stages read earlier ones' values back from
    L1), so a loop walks a few arrays at a time, where one loop over every element walked them
    all at once: more streams than the hardware prefetchers follow, each line a demand miss."""
    B = config.stage_major_block
    if not B or len(g.nodes) < 8 or g.p != len(g.nodes[0].size):
        return
    if any(n.is_reduction or n.is_scatter for n in g.nodes):
        return
    size = g.nodes[0].size
    if not all(getattr(d, "is_Integer", False) for d in size) or \
            any(not _same_sizes(n.size, size) for n in g.nodes):
        return
    total = int(product(size))
    if total < 2 * B or len(g.read_names() | g.names()) < config.stage_major_min_streams:
        return
    if len(size) >= 2 and B // 4 <= int(size[-1]) <= 4 * B:
        nodes, p = g.nodes, len(size) - 1      # its rows are the blocks
    elif total % B:
        return
    else:
        nodes, p = [], 1
        for n in g.nodes:
            r = reviewed(n, [sympy.Integer(total // B)])
            if r is None or not _same_sizes(r.size, [total // B, B]):
                return
            nodes.append(r)
    log_fusion.debug("kernel of %d stages over %d buffers: blocks of %s, stage by stage", len(nodes),
                     len(g.read_names() | g.names()), nodes[0].size[p:])
    g.nodes, g.p = nodes, p


class ExternNode:
    def __init__(self, kernel: ir.ExternKernel):
        self.kernel = kernel
        self.name = kernel.name
        self.read_names = set()
        for x in kernel.inputs:
            self.read_names.add(x.name if isinstance(x, ir.Buffer) else x[1].name)
        self.write_names = [o.name for o in kernel.outputs]


class FusedGroup:
    def __init__(self, nodes: List[SchedNode], p: int):
        self.nodes = nodes
        self.p = p

    @property
    def outer_sizes(self):
        return self.nodes[0].outer(self.p)

    def names(self):
        return {n.name for n in self.nodes}

    def read_names(self):
        return set().union(*(n.read_names for n in self.nodes))

    def __repr__(self):
        return f"FusedGroup(outer={self.outer_sizes}, nodes=[{', '.join(n.name for n in self.nodes)}])"


class ExternGroup:
    def __init__(self, node: ExternNode):
        self.node = node
        self.nodes = [node]

    def names(self):
        return set(self.node.write_names)

    def read_names(self):
        return set(self.node.read_names)

    def __repr__(self):
        return f"ExternGroup({self.node.kernel.kind} -> {self.node.write_names})"


def _same_layout(a, b) -> bool:
    return a.dtype is b.dtype and _same_sizes(a.size, b.size) and _same_sizes(a.stride, b.stride) and \
        sympy.expand(a.offset - b.offset) == 0


def _same_sizes(a, b) -> bool:
    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


def valid_group(nodes: List[SchedNode], p: int) -> Optional[str]:
    """None when ``nodes`` (in this order) can share one outer loop nest of depth
    ``p``; else the reason they cannot."""
    if not all(n.can_split(p) for n in nodes):
        return "a node cannot split at this depth"
    P = nodes[0].outer(p)
    outer_red = [n for n in nodes if n.is_outer_reduction(p)]
    if outer_red:
        if any(not n.is_reduction and n.inner(p) and not (
                n.flat_write is not None and _same_sizes(n.inner(p), outer_red[0].rranges)) for n in nodes):
            return "a reduction over outer dims is not fused with inner loops (its loops are interchanged)"
        if any(n.is_reduction and not _same_sizes(n.rranges, outer_red[0].rranges) for n in nodes):
            return "a reduction over outer dims is fused only with reductions of the same ranges"
    written = {}
    for n in nodes:
        if not _same_sizes(n.outer(p), P):
            return f"outer sizes differ ({n.outer(p)} vs {P})"
        rvars = set(index_vars("r", len(n.inner(p))))
        for name, idx in n.reads(p):
            w = written.get(name)
            if w is None:
                continue
            widx, wq, wr = w
            if sympy.expand(idx - widx) != 0:
                return f"{n.name} reads {name} at {idx}, written at {widx}"
            if wr and not _same_sizes(wq, n.inner(p)):
                return f"{n.name} reads {name} over inner ranges {n.inner(p)}, written over {wq}"
        # a reduction writes one element per outer iteration (no inner variables)
        wq = [] if n.is_reduction else n.inner(p)
        written[n.name] = (n.write_index(p), wq, bool(wq))
        del rvars
    return None


def _same_access(nodes: List[SchedNode], node: SchedNode, shared: Set[str], p: int, walked=False) -> bool:
    """Whether ``node`` walks one of the ``shared`` buffers the way some node of the group does:
    indices (in the loop variables at depth ``p``) differing by a constant at most -- the same
    row, another column block (an LSTM's gate chunks) -- not a transposed or otherwise
    unrelated walk. ``walked``: only reads whose index moves with the loops count (two random
    draws sharing a 0-d seed have nothing to share)."""
    mine = [(n, sympy.expand(i)) for n, i in node.reads(p) if n in shared and (not walked or _loop_vars(i))]
    for g in nodes:
        for n, i in g.reads(p):
            if n not in shared:
                continue
            for m, j in mine:
                if m == n and not (sympy.expand(i - j).free_symbols & _loop_vars(i, j)):
                    return True
    return False


def _loop_vars(*idx) -> Set[sympy.Symbol]:
    """The loop variables (``x*``/``r*``) the indices use (size symbols are not loop variables)."""
    return {s for i in idx for s in sympy.sympify(i).free_symbols if s.name[0] in "xr" and s.name[1:].isdigit()}


class Scheduler:
    def __init__(self, graph, stage_major: bool = False, row_stages: bool = False):
        """``stage_major``: the C++ backend's blocks for kernels over many buffers
        (:func:`_stage_major_blocks`: a CPU prefetcher matter; the Triton backend keeps its groups).
        ``row_stages``: pointwise siblings of a column reduction join its row loop
        (:func:`row_stage`; the C++ codegen's interchanged loops run them)."""
        self.graph = graph
        self.groups: List = []
        self._stage_major = stage_major
        self._row_stages = row_stages and config.outer_row_stages
        self._schedule()
        graph.inplace = self.inplace_outputs()

    def _schedule(self):
        producer: Dict[str, int] = {}   # buffer name -> group index
        for buf in self.graph.buffers:
            if isinstance(buf, ir.ExternKernel):
                g = ExternGroup(ExternNode(buf))
                self.groups.append(g)
                for nm in g.node.write_names:
                    producer[nm] = len(self.groups) - 1
                continue
            node = SchedNode(buf)
            gi = self._pick_group(node, producer) if config.fusion and not node.is_scatter else None
            if gi is None:
                self.groups.append(FusedGroup([node], node.natural_p()))
                gi = len(self.groups) - 1
            producer[node.name] = gi
        for g in self.groups if self._stage_major else ():
            if isinstance(g, FusedGroup):
                _stage_major_blocks(g)
        if log_schedule.isEnabledFor(logging.DEBUG):
            for i, g in enumerate(self.groups):
                log_schedule.debug("kernel %d: %r", i, g)
                for n in getattr(g, "nodes", []):
                    log_schedule.debug("    %r", n)

    def inplace_outputs(self) -> Dict[str, str]:
        """Output buffers that can be computed straight into the input they are the new value of
        (``graph.inplace_candidates``: an optimizer's parameters and state, BatchNorm's running
        stats): saves a buffer and the caller's copy back per mutated input.

        Safe when no read of the input's old value can come after the write: every kernel that
        reads the input runs before the buffer's kernel, or is that kernel, where every read of
        the input is at the element the buffer writes (same index) by a stage at or before the
        writing one. The input must not also be an output (its old value) or alias another
        input's memory, and the layouts must match."""
        g = self.graph
        cands = getattr(g, "inplace_candidates", None) or {}
        if not cands:
            return {}
        returned = {o[1] for o in g.outputs if isinstance(o, tuple) and o[0] == "input"}
        returned |= {o[1].name for o in g.outputs if isinstance(o, tuple) and o[0] == "view"}
        where = {}
        for gi, grp in enumerate(self.groups):
            if isinstance(grp, FusedGroup):
                for k, n in enumerate(grp.nodes):
                    where[n.name] = (gi, k)
        arrays = {b.name: t._data for b, t in zip(g.graph_inputs, g.example_inputs)}
        safe: Dict[str, str] = {}
        for bname, iname in cands.items():
            if iname in returned or bname in returned or iname in safe.values() or bname not in where:
                continue
            gi, k = where[bname]
            grp = self.groups[gi]
            node = grp.nodes[k]
            buf, inp = g.buffers_by_name[bname], g.buffers_by_name[iname]
            # (a row stage is emitted in its group's first loop over the reduced rows, before
            # stages that come ahead of it in the group: one of them may read the old value)
            if node.is_reduction or node.is_scatter or node.flat_write is not None or \
                    not _same_layout(buf.layout, inp.layout):
                continue
            arr = arrays.get(iname)
            # (inputs of another device -- a CPU step count next to cuda parameters -- share nothing)
            if not isinstance(arr, np.ndarray) or any(n != iname and isinstance(a, np.ndarray)
                                                      and np.may_share_memory(arr, a) for n, a in arrays.items()):
                continue
            widx = node.write_index(grp.p)
            ok = True
            for gj, other in enumerate(self.groups):
                if gj < gi or iname not in other.read_names():
                    continue
                if gj > gi:
                    ok = False
                    break
                for kk, n in enumerate(grp.nodes):
                    for name, idx in n.reads(grp.p):
                        if name == iname and (kk > k or sympy.expand(idx - widx) != 0):
                            ok = False
            if ok:
                safe[bname] = iname
        if safe:
            log_schedule.debug("outputs written in place into their inputs: %s", safe)
        return safe

    def local_buffers(self, gi: int) -> Set[str]:
        """Buffers of group ``gi`` that nothing outside it reads (not an output, not
        read by another kernel or extern) and whose per-iteration extent is a small
        static size: the codegen keeps them in a local array."""
        g = self.groups[gi]
        if not isinstance(g, FusedGroup) or not config.local_buffers:
            return set()
        outside = set(self._graph_output_names())
        for gj, other in enumerate(self.groups):
            if gj != gi:
                outside |= other.read_names()
        out = set()
        for n in g.nodes:
            if n.name in outside or n.is_scatter or n.flat_write is not None:
                continue
            numel = sympy.expand(sympy.Mul(*n.inner(g.p))) if n.inner(g.p) else sympy.Integer(1)
            if n.is_reduction:
                numel = sympy.Integer(1)
            if numel.is_Integer and int(numel) <= config.local_buffer_max:
                out.add(n.name)
        return out

    def _graph_output_names(self):
        names = [o.name for o in self.graph.outputs if isinstance(o, ir.Buffer)]
        names += [o[1].name for o in self.graph.outputs if isinstance(o, tuple) and o[0] == "view"]
        return names

    def _pick_group(self, node: SchedNode, producer) -> Optional[int]:
        deps = [producer[n] for n in node.read_names if n in producer]
        lo = max(deps) if deps else 0
        best = None
        for gi in range(len(self.groups) - 1, lo - 1, -1):
            g = self.groups[gi]
            if not isinstance(g, FusedGroup) or any(n.is_scatter for n in g.nodes):
                continue
            shared = node.read_names & (g.names() | g.read_names())
            if not shared:
                continue
            if not node.size and g.p > 0 and any(n.size for n in g.nodes):
                # a 0-d node (an optimizer's step counter beside its parameter's update) would
                # narrow the group to depth 0: one loop nest per node, every intermediate
                # stored and re-read. It is cheaper as a tiny kernel of its own.
                continue
            score = len(node.read_names & g.names()) * 2 + len(shared)
            # candidate depths: keep the group's, or narrow it to the node's outer size
            cands = sorted({g.p, len(node.size)} if node.is_reduction else {g.p, min(g.p, len(node.size))},
                           reverse=True)
            for p in cands:
                if p > g.p:
                    continue
                cand = node
                reason = valid_group(g.nodes + [node], p)
                if reason is not None and config.reshape_to_fuse:
                    # (a consumer, or a sibling that walks a shared input the same way: the
                    # value written out for a view of it beside the consumer that also computes
                    # it, ``x @ w + b`` as [B*T, C] and its GELU as [B, T, C])
                    rv = reviewed(node, g.outer_sizes[:p])
                    if rv is not None and valid_group(g.nodes + [rv], p) is None and (
                            node.read_names & g.names() or _same_access(g.nodes, rv, shared, p, walked=True)):
                        cand, reason = rv, None
                if reason is not None and self._row_stages:
                    rs = row_stage(node, g.nodes, p)
                    if rs is not None and valid_group(g.nodes + [rs], p) is None:
                        cand, reason = rs, None
                if reason is None and not (node.read_names & g.names()) and \
                        not _same_access(g.nodes, cand, shared, p):
                    # siblings sharing an input only at other indices (a BatchNorm backward's
                    # per-image and per-channel loops, alike only in their sizes) gain no
                    # locality, and their loop nest would serve neither access pattern
                    reason = "siblings read their shared inputs at different indices"
                if reason is None:
                    if best is None or score > best[0]:
                        best = (score, gi, p, cand)
                    break
                log_fusion.debug("no fusion of %s into kernel %d (depth %d): %s", node.name, gi, p, reason)
        if best is None:
            return None
        _, gi, p, node = best
        g = self.groups[gi]
        if node.size != node.buf.data.get_size():
            log_fusion.debug("%s iterated over %s instead of %s to fuse", node.name, node.size,
                             list(node.buf.data.get_size()))
        g.nodes.append(node)
        if p != g.p:
            log_fusion.debug("kernel %d: outer loop narrowed from depth %d to %d", gi, g.p, p)
        g.p = p
        log_fusion.debug("fused %s into kernel %d (%s)", node.name, gi, ", ".join(n.name for n in g.nodes))
        return gi
