"""The Python wrapper of a compiled graph: allocate buffers (numpy), call the
C++ kernels through ctypes and the externs, return the outputs.

It is generated as Python source (logged with ``output_code``) so the per-call
work is straight-line code: shape reads for symbolic sizes, one ctypes call per
kernel with precomputed ``argtypes`` (the kernels take the numpy array objects
and read their data pointers in C, no ``arr.ctypes`` in Python), matmuls as
``gemm.matmul(a, b, out)`` into a preallocated output, and views of buffers as
``.T`` / ``transpose`` / ``reshape`` / an ``ndarray`` over the buffer (never
``as_strided``, ~2 us a call).

Buffers, per call:

* graph outputs (returned to the caller; in training also the values saved for
  backward) are fresh ``np.empty`` arrays on every call, never memory a later
  call writes;
* intermediates with static sizes live in a *pool* allocated on the first call
  and reused by later calls (no allocation, pages already mapped); a pool is
  taken off a list for the duration of a call and put back after it, so a
  concurrent call (another thread) or a call that raised gets its own pool;
* intermediates with symbolic sizes are allocated per call;
* within a call a dead buffer of the same size and dtype is recycled for a
  later one (an output only recycles per-call memory, never pool memory);
* the pieces of a ``cat`` extern that each fill a contiguous range of its output
  (:meth:`WrapperGen._cat_pieces_in_place`) are views of that output, written
  there by their own kernels: no copy (an unrolled LSTM's backward concatenates
  its 32 steps' gate gradients -- twice -- for its weight-gradient products; the
  copies were ~1.2 ms of its 18 ms step).
"""
from __future__ import annotations

import ctypes
from typing import Dict, List

import numpy as np
import sympy

from .. import config, gemm, ir
from ..scheduler import ExternGroup, FusedGroup
from ..sizevars import pyexpr, read_back_symbols


# the run-time helpers live in a sympy-free module (a graph-cache hit imports only that)
from ..runtime import _as_view, _contig, _index_error, _run_extern, _strided_view  # noqa: E402,F401


class WrapperGen:
    def __init__(self, graph, groups, kernel_names: Dict[int, str], kernel_params: Dict[int, List[str]],
                 size_syms: List[sympy.Symbol], index_checks=(), local=(), persistent=True):
        self.graph = graph
        self.groups = groups
        self.kernel_names = kernel_names
        self.kernel_params = kernel_params
        self.size_syms = size_syms
        self.index_checks = set(index_checks)
        self.local = set(local)
        self.globals: Dict[str, object] = {"np": np, "_strided_view": _strided_view, "_run_extern": _run_extern,
                                           "_ascontig": _contig, "_empty": np.empty, "_as_view": _as_view}
        self.pool: List[str] = []     # ``name = expr`` lines of the pool constructor
        self.persistent = persistent  # static-size intermediates live in a cross-call pool
        self.lines: List[str] = []
        self.packs: Dict[int, tuple] = {}   # shared right operands of products (_shared_right_operands)

    def _dtype_ref(self, dtype):
        name = f"_dt_{dtype.name}"
        self.globals[name] = dtype.np
        return name

    def _shape(self, size):
        items = [pyexpr(s) for s in size]
        return "(" + "".join(f"{i}, " for i in items) + ")"

    def _static(self, size) -> bool:
        return all(getattr(sympy.sympify(n), "is_Integer", False) for n in size)

    def view_expr(self, buf, size, stride, offset) -> str:
        """Python for a view (``size``, element ``stride``, ``offset``) of the contiguous
        buffer ``buf``: ``buf`` itself, ``.T``/``transpose``, ``reshape``, or an ``ndarray``
        over its memory -- each far cheaper per call than ``as_strided``."""
        base = list(buf.layout.size)
        base_st = _contig_strides(base)
        size, stride = list(size), list(stride)
        off0 = sympy.expand(sympy.sympify(offset)) == 0

        def same(a, b):
            return len(a) == len(b) and all(sympy.expand(sympy.sympify(x) - y) == 0 for x, y in zip(a, b))

        def eff(sz, st):   # strides of size-1 dims never matter
            return [0 if sympy.sympify(n) == 1 else st_ for n, st_ in zip(sz, st)]

        if off0 and same(size, base) and same(eff(size, stride), eff(base, base_st)):
            return buf.name
        if off0 and len(size) == len(base) and len(size) > 1:
            perm = _match_perm(size, eff(size, stride), base, eff(base, base_st))
            if perm is not None:
                return f"{buf.name}.T" if perm == (1, 0) else f"{buf.name}.transpose({perm!r})"
        if off0 and same(eff(size, stride), eff(size, _contig_strides(size))) and \
                sympy.expand(_numel(size) - _numel(base)) == 0:
            return f"{buf.name}.reshape({self._shape(size)})"
        isz = buf.layout.dtype.itemsize
        bst = "(" + "".join(f"{pyexpr(sympy.sympify(x) * isz)}, " for x in stride) + ")"
        return f"_as_view({buf.name}, {self._shape(size)}, {bst}, {pyexpr(sympy.sympify(offset) * isz)})"

    def generate(self, lib) -> str:
        g = self.graph
        L = self.lines
        L.append("def call(arrays):")
        names = g.input_names
        if names:
            L.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = arrays")
        # size symbols from the inputs; later occurrences become guards
        seen = {}
        for buf in g.graph_inputs:
            for d, s in enumerate(buf.layout.size):
                if isinstance(s, sympy.Symbol):
                    if s not in seen:
                        seen[s] = f"{buf.name}.shape[{d}]"
                        L.append(f"    {s.name} = {buf.name}.shape[{d}]")
                    else:
                        L.append(f"    if {buf.name}.shape[{d}] != {s.name}: raise _GuardError('{buf.name}', {d})")
        # a symbol no dimension holds as itself, read back from one linear in it (a*s + rest)
        bufs = list(g.graph_inputs)
        for s, pos, a, rest in read_back_symbols([b.layout.size for b in bufs], set(seen), pairs=True):
            dims = " + ".join(f"{bufs[i].name}.shape[{d}]" for i, d in pos)
            L.append(f"    {s.name} = ({dims} - ({pyexpr(rest)})) // ({a})")
            seen[s] = s.name
        self.size_symbols = {s.name for s in seen}   # what an extern's symbolic size argument may use
        for guard in g.sizevars.guards:
            L.append(f"    if ({pyexpr(guard)}) != 0: raise _GuardError('size', 0)")
        pool_at = len(L)          # where the pool is taken (filled in at the end)
        self.packs = self._shared_right_operands()
        # lifetimes
        outputs = {o.name for o in g.outputs if isinstance(o, ir.Buffer)}
        outputs |= {o[1].name for o in g.outputs if isinstance(o, tuple) and o[0] == "view"}
        last_use: Dict[str, int] = {}
        for gi, grp in enumerate(self.groups):
            for nm in grp.read_names():
                last_use[nm] = gi
            for nm in grp.names():
                last_use.setdefault(nm, gi)
        free: Dict[tuple, List[tuple]] = {}    # key -> [(name, pooled)]
        input_set = set(names)
        # only memory this wrapper allocated is recycled: a fallback's result may alias
        # its inputs (a numpy reference can return a view), so it is never reused
        owned = set()
        pooled = set()            # names whose memory belongs to the cross-call pool

        inplace = getattr(g, "inplace", None) or {}
        pieces, merged_cats, same_cats = self._cat_pieces_in_place(outputs, input_set, inplace)
        for nm, (cat, _, _) in pieces.items():
            # the output's memory holds the piece: alive while either is
            last_use[cat] = max(last_use.get(cat, -1), last_use.get(nm, -1))
        for nm, cat in same_cats.items():
            last_use[cat] = max(last_use.get(cat, -1), last_use.get(nm, -1))
        allocated = set()

        def alloc(buf):
            if buf.name in allocated:
                return
            allocated.add(buf.name)
            if buf.name in pieces:
                cat, start, numel = pieces[buf.name]
                alloc(g.buffers_by_name[cat])
                expr = f"{cat}.reshape(-1)[{start}:{start + numel}].reshape({self._shape(buf.layout.size)})"
                if cat in pooled:
                    pooled.add(buf.name)
                    self.pool.append(f"{buf.name} = {expr}  # a piece of {cat}")
                else:
                    L.append(f"    {buf.name} = {expr}  # a piece of {cat}")
                return
            if buf.name in inplace:
                # the new value of a mutated input, written straight into that input's memory
                # (Scheduler.inplace_outputs proved it safe): no buffer, no copy back
                L.append(f"    {buf.name} = {inplace[buf.name]}  # in place")
                return
            owned.add(buf.name)
            lay = buf.layout
            key = (str(sympy.expand(_numel(lay.size))), lay.dtype.name)
            is_out = buf.name in outputs
            pool = free.get(key, [])
            # an output never takes pool memory: the caller keeps it past this call
            pick = next((i for i in range(len(pool) - 1, -1, -1) if not (is_out and pool[i][1])), None)
            if pick is not None:
                old, old_pooled = pool.pop(pick)
                if old_pooled:
                    pooled.add(buf.name)
                    self.pool.append(f"{buf.name} = {old}.reshape({self._shape(lay.size)})")
                else:
                    L.append(f"    {buf.name} = {old}.reshape({self._shape(lay.size)})  # reuse")
            elif not is_out and self.persistent and self._static(lay.size):
                pooled.add(buf.name)
                self.pool.append(f"{buf.name} = _empty({self._shape(lay.size)}, {self._dtype_ref(lay.dtype)})")
            else:
                L.append(f"    {buf.name} = _empty({self._shape(lay.size)}, {self._dtype_ref(lay.dtype)})")

        for gi, grp in enumerate(self.groups):
            if isinstance(grp, FusedGroup):
                for n in grp.nodes:
                    if n.name not in self.local:
                        alloc(n.buf)
                kname = self.kernel_names[gi]
                fn = getattr(lib[kname], kname)
                params = self.kernel_params[gi]
                fn.argtypes = [ctypes.py_object] * len(params) + [ctypes.c_int64] * len(self.size_syms)
                fn.restype = None
                self.globals[f"_{kname}"] = fn
                args = list(params) + [s.name for s in self.size_syms]
                L.append(f"    _{kname}({', '.join(args)})")
                if gi in self.index_checks:
                    take = lib[kname].ember_take_index_error
                    take.argtypes, take.restype = [], ctypes.c_int
                    self.globals[f"_take_index_error_{kname}"] = take
                    self.globals["_index_error"] = _index_error
                    L.append(f"    _err = _take_index_error_{kname}()")
                    L.append(f"    if _err: _index_error('{kname}', _err)")
            elif grp.node.kernel.name in merged_cats:
                alloc(grp.node.kernel.outputs[0])
                L.append(f"    # {grp.node.kernel.name}: cat, its pieces written in place by their kernels")
            elif grp.node.kernel.outputs[0].name in same_cats:
                out = grp.node.kernel.outputs[0].name
                L.append(f"    {out} = {same_cats[out]}  # cat of the same pieces")
            else:
                self._extern(grp, alloc, gi)
            # release dead buffers
            for nm in sorted(grp.read_names() | grp.names()):
                if last_use.get(nm) == gi and nm in owned and nm not in outputs and nm not in input_set \
                        and nm not in self.local:
                    buf = g.buffers_by_name[nm]
                    lay = buf.layout
                    key = (str(sympy.expand(_numel(lay.size))), lay.dtype.name)
                    free.setdefault(key, []).append((nm, nm in pooled))
        outs = []
        for o in g.outputs:
            if isinstance(o, ir.Buffer):
                outs.append(o.name)
            elif o[0] == "input":
                outs.append(o[1])
            elif o[0] == "view":
                _, buf, size, stride, offset = o
                outs.append(self.view_expr(buf, size, stride, offset))
            else:
                outs.append("None")
        if self.pool:
            names_p = [ln.split(" = ")[0] for ln in self.pool]
            unpack = ", ".join(names_p) + ("," if len(names_p) == 1 else "")
            # list.pop is atomic: a check-then-pop could race with another thread's call
            L[pool_at:pool_at] = ["    try:", "        _p = _pools.pop()", "    except IndexError:",
                                  "        _p = _new_pool()", f"    {unpack} = _p"]
            L.append("    _pools.append(_p)")
            self.globals["_pools"] = []
        L.append(f"    return ({''.join(o + ', ' for o in outs)})")
        if self.pool:
            L.append("")
            L.append("def _new_pool():")
            L.append("    # intermediates with static sizes, reused by every call (see the module docstring)")
            L.extend("    " + ln for ln in self.pool)
            L.append(f"    return ({''.join(n + ', ' for n in names_p)})")
        return "\n".join(L) + "\n"

    def _cat_pieces_in_place(self, outputs, inputs, inplace):
        """The ``cat`` externs whose pieces can be written straight into their output: piece ->
        (cat output, first element, element count), and the set of those externs.

        A piece qualifies when it fills one contiguous range of the output (every dimension
        before the cat's is 1), is a whole buffer this wrapper allocates before its producer
        writes it (a fused kernel's, or an extern's with an output argument), appears once, and
        is neither a graph input or output nor written in place into an input, and the output
        has static sizes. Every piece of the cat, or none. A later cat of the same pieces in the
        same order along the same dimension (the LSTM's backward makes two) is the first one's
        output: third result, its output name -> the first's (neither may be a graph output:
        the caller would get two names for one array).

        Measured (the suite's LSTM, 32 steps, interleaved in one process): training step
        1.064x."""
        g = self.graph
        allocated_here = set()      # buffers whose memory alloc() provides before they are written
        for grp in self.groups:
            if isinstance(grp, FusedGroup):
                allocated_here.update(n.name for n in grp.nodes if n.name not in self.local)
            else:
                k = grp.node.kernel
                if getattr(k, "out_arg", False) and len(k.outputs) == 1 and k.kind != "cat":
                    allocated_here.add(k.outputs[0].name)
        pieces, cats, taken, same, first = {}, set(), set(), {}, {}
        for grp in self.groups:
            if not isinstance(grp, ExternGroup) or grp.node.kernel.kind != "cat":
                continue
            k = grp.node.kernel
            out = k.outputs[0]
            size = out.layout.size
            dim = getattr(k, "cat_dim", None)
            if dim is None or not self._static(size) or not out.layout.is_contiguous() or out.name in inplace:
                continue
            dim = int(dim) % len(size)
            if any(int(n) != 1 for n in size[:dim]):
                continue
            names = [_whole_buffer(x) for x in k.inputs]
            key = (tuple(names), dim, tuple(int(n) for n in size), out.layout.dtype)
            if key in first and out.name not in outputs and first[key] not in outputs:
                same[out.name] = first[key]
                continue
            if any(nm is None or nm in taken or nm not in allocated_here or nm in outputs or nm in inputs
                   or nm in inplace for nm in names) or len(set(names)) != len(names):
                continue
            bufs = [g.buffers_by_name[nm] for nm in names]
            if not all(b.layout.is_contiguous() and self._static(b.layout.size) and b.layout.dtype == out.layout.dtype
                       for b in bufs):
                continue
            start = 0
            for nm, b in zip(names, bufs):
                n = int(_numel(b.layout.size))
                pieces[nm] = (out.name, start, n)
                start += n
            assert start == int(_numel(size)), (k.name, start, size)
            taken.update(names)
            cats.add(k.name)
            first[key] = out.name
        return pieces, cats, same

    def _arg_exprs(self, k) -> List[str]:
        arrs = []
        for x in k.inputs:
            if isinstance(x, ir.Buffer):
                arrs.append(x.name)
            else:
                _, buf, size, stride, offset, _dt = x
                arrs.append(self.view_expr(buf, size, stride, offset))
        return arrs

    def _shared_right_operands(self) -> Dict[int, tuple]:
        """2-d matrix products that share their right operand (an unrolled RNN's recurrent
        weight): group index -> (pack variable, first use?, last use?). The operand is packed
        once (``gemm.pack_b``) and every product reads the packed copy (``gemm.matmul_packed``).
        Its value cannot change between the uses: a buffer is live from its write to its last
        read, and an output written in place into an input is scheduled after every read of it;
        a use with any write to the operand's memory in between is left alone all the same."""
        if config.gemm != "ember":
            return {}
        inplace = getattr(self.graph, "inplace", None) or {}
        uses: Dict[str, List[int]] = {}
        base: Dict[str, str] = {}
        for gi, grp in enumerate(self.groups):
            if not isinstance(grp, ExternGroup):
                continue
            k = grp.node.kernel
            if k.fn is not gemm.matmul or not getattr(k, "out_arg", False) or len(k.inputs) != 2:
                continue
            a, b = k.inputs
            if any(len(x.layout.size if isinstance(x, ir.Buffer) else x[2]) != 2 for x in (a, b)):
                continue
            expr = self._arg_exprs(k)[1]
            uses.setdefault(expr, []).append(gi)
            base[expr] = b.name if isinstance(b, ir.Buffer) else b[1].name
        out: Dict[int, tuple] = {}
        for expr, gis in uses.items():
            if len(gis) < 2:
                continue
            name = base[expr]
            if any(name in {inplace.get(n, n) for n in self.groups[j].names()} | set(self.groups[j].names())
                   for j in range(gis[0], gis[-1] + 1)):
                continue
            var = f"_pk{len({v[0] for v in out.values()})}"
            for j in gis:
                out[j] = (var, j == gis[0], j == gis[-1])
        return out

    def _sizes(self, k) -> str:
        """``, (value, ...)``: this call's values of the extern's symbolic size arguments."""
        if not k.size_args:
            return ""
        for e in k.size_args:
            missing = {str(x) for x in e.free_symbols} - self.size_symbols
            if missing:
                raise RuntimeError(f"{k.kind}: a size argument over {sorted(missing)}, which no input "
                                   f"of the graph carries (the graph runs eagerly)")
        return ", (" + "".join(f"{pyexpr(e)}, " for e in k.size_args) + ")"

    def _extern(self, grp: ExternGroup, alloc, gi: int = -1):
        k = grp.node.kernel
        fname = f"_extern_{k.name}"
        self.globals[fname] = k.fn
        arrs = self._arg_exprs(k)
        L = self.lines
        pack = self.packs.get(gi)
        if pack is not None:
            var, first, last = pack
            if first:
                self.globals["_gemm_pack_b"] = gemm.pack_b
                L.append(f"    {var} = _gemm_pack_b({arrs[1]})  # packed once for {sum(1 for v in self.packs.values() if v[0] == var)} products")
            self.globals[fname] = gemm.matmul_packed
            out = k.outputs[0]
            alloc(out)
            L.append(f"    {fname}({arrs[0]}, {var}, {out.name})  # {k.kind}")
            if last:
                L.append(f"    del {var}")
            return
        if getattr(k, "out_arg", False):
            # fn(*inputs, out): gemm.matmul, the convolution, cat: writes into the preallocated output
            out = k.outputs[0]
            alloc(out)
            L.append(f"    {fname}({', '.join(arrs)}, {out.name})  # {k.kind}")
            return
        self.globals[f"_args_{k.name}"] = k.args
        self.globals[f"_kwargs_{k.name}"] = k.kwargs
        call = f"_run_extern({fname}, _args_{k.name}, _kwargs_{k.name}, [{', '.join(arrs)}]{self._sizes(k)})"
        if len(k.outputs) == 1:
            L.append(f"    {k.outputs[0].name} = _ascontig({call})  # {k.kind}")
        else:
            tmp = f"_r_{k.name}"
            L.append(f"    {tmp} = {call}  # {k.kind}")
            for i, o in enumerate(k.outputs):
                L.append(f"    {o.name} = _ascontig({tmp}[{i}])")


def _whole_buffer(x):
    """The name of the buffer an extern input is, whole and in order (itself, or a contiguous
    reshape of a contiguous buffer), else None."""
    if isinstance(x, ir.Buffer):
        return x.name
    _, buf, size, stride, offset, _dt = x
    if sympy.sympify(offset) != 0 or not buf.layout.is_contiguous() or \
            sympy.expand(_numel(size) - _numel(buf.layout.size)) != 0 or \
            any(n != 1 and sympy.expand(sympy.sympify(a) - b) != 0
                for n, a, b in zip(size, stride, _contig_strides(size))):
        return None
    return buf.name


def _contig_strides(size):
    out, acc = [], sympy.Integer(1)
    for n in reversed(list(size)):
        out.append(acc)
        acc = acc * sympy.sympify(n)
    return list(reversed(out))


def _match_perm(size, stride, base, base_stride):
    """The permutation ``perm`` with ``size == base[perm]`` and ``stride == base_stride[perm]``
    (sympy-equal; size-1 dims carry stride 0), or None; identity is None too."""
    left = list(range(len(base)))
    perm = []
    for n, st in zip(size, stride):
        hit = next((p for p in left if sympy.expand(sympy.sympify(base[p]) - n) == 0 and
                    sympy.expand(sympy.sympify(base_stride[p]) - st) == 0), None)
        if hit is None:
            return None
        left.remove(hit)
        perm.append(hit)
    perm = tuple(perm)
    return None if perm == tuple(range(len(base))) else perm


def _numel(size):
    out = sympy.Integer(1)
    for s in size:
        out = out * s
    return out
