"""The Python wrapper of a compiled graph: allocate buffers (numpy), call the
C++ kernels through ctypes and the externs, return the outputs.

It is generated as Python source (logged with ``output_code``) so the per-call
work is straight-line code: shape reads for symbolic sizes, ``np.empty`` per
buffer (or the reuse of a dead buffer of the same size and dtype), and one
ctypes call per kernel with precomputed ``argtypes``.
"""
from __future__ import annotations

import ctypes
from typing import Dict, List

import numpy as np
import sympy

from .. import ir
from ..scheduler import ExternGroup, FusedGroup
from ..sizevars import pyexpr


def _strided_view(arr, offset, shape, strides):
    flat = arr.reshape(-1)
    return np.lib.stride_tricks.as_strided(flat[offset:], shape=shape,
                                           strides=tuple(s * arr.itemsize for s in strides))


def _contig(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _index_error(kname):
    raise IndexError(f"inductor: an index is out of bounds (kernel {kname}); the eager prim raises here too")


def _run_extern(fn, args, kwargs, arrays):
    """Call a fallback on numpy arrays. Its results are made contiguous and never
    alias its inputs (a reference may return a view), so the wrapper's buffer
    lifetimes and reuse stay valid."""
    def sub(a):
        if isinstance(a, ir.ExternArg):
            return arrays[a.i]
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        return a
    res = fn(*[sub(a) for a in args], **{k: sub(v) for k, v in kwargs.items()})

    def own(x):
        x = np.asarray(x)
        if not x.flags.c_contiguous or any(np.may_share_memory(x, a) for a in arrays):
            x = np.array(x, order="C")
        return x
    if isinstance(res, (tuple, list)):
        return tuple(own(r) for r in res)
    return own(res)


class WrapperGen:
    def __init__(self, graph, groups, kernel_names: Dict[int, str], kernel_params: Dict[int, List[str]],
                 size_syms: List[sympy.Symbol], index_checks=(), local=()):
        self.graph = graph
        self.groups = groups
        self.kernel_names = kernel_names
        self.kernel_params = kernel_params
        self.size_syms = size_syms
        self.index_checks = set(index_checks)
        self.local = set(local)
        self.globals: Dict[str, object] = {"np": np, "_strided_view": _strided_view, "_run_extern": _run_extern,
                                           "_ascontig": _contig, "_empty": np.empty}
        self.lines: List[str] = []

    def _dtype_ref(self, dtype):
        name = f"_dt_{dtype.name}"
        self.globals[name] = dtype.np
        return name

    def _shape(self, size):
        items = [pyexpr(s) for s in size]
        return "(" + "".join(f"{i}, " for i in items) + ")"

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
        for guard in g.sizevars.guards:
            L.append(f"    if ({pyexpr(guard)}) != 0: raise _GuardError('size', 0)")
        # lifetimes
        outputs = {o.name for o in g.outputs if isinstance(o, ir.Buffer)}
        outputs |= {o[1].name for o in g.outputs if isinstance(o, tuple) and o[0] == "view"}
        last_use: Dict[str, int] = {}
        for gi, grp in enumerate(self.groups):
            for nm in grp.read_names():
                last_use[nm] = gi
            for nm in grp.names():
                last_use.setdefault(nm, gi)
        free: Dict[tuple, List[str]] = {}
        input_set = set(names)
        # only memory this wrapper allocated is recycled: a fallback's result may alias
        # its inputs (a numpy reference can return a view), so it is never reused
        owned = set()

        def alloc(buf):
            owned.add(buf.name)
            lay = buf.layout
            key = (str(sympy.expand(_numel(lay.size))), lay.dtype.name)
            pool = free.get(key)
            if pool:
                old = pool.pop()
                L.append(f"    {buf.name} = {old}.reshape({self._shape(lay.size)})  # reuse")
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
                    L.append(f"    if _take_index_error_{kname}(): _index_error('{kname}')")
            else:
                self._extern(grp, alloc)
            # release dead buffers
            for nm in sorted(grp.read_names() | grp.names()):
                if last_use.get(nm) == gi and nm in owned and nm not in outputs and nm not in input_set \
                        and nm not in self.local:
                    buf = g.buffers_by_name[nm]
                    lay = buf.layout
                    key = (str(sympy.expand(_numel(lay.size))), lay.dtype.name)
                    free.setdefault(key, []).append(nm)
        outs = []
        for o in g.outputs:
            if isinstance(o, ir.Buffer):
                outs.append(o.name)
            elif o[0] == "input":
                outs.append(o[1])
            elif o[0] == "view":
                _, buf, size, stride, offset = o
                outs.append(f"_strided_view({buf.name}, {pyexpr(offset)}, {self._shape(size)}, "
                            f"{self._shape(stride)})")
            else:
                outs.append("None")
        L.append(f"    return ({''.join(o + ', ' for o in outs)})")
        return "\n".join(L) + "\n"

    def _extern(self, grp: ExternGroup, alloc):
        k = grp.node.kernel
        fname = f"_extern_{k.name}"
        self.globals[fname] = k.fn
        self.globals[f"_args_{k.name}"] = k.args
        self.globals[f"_kwargs_{k.name}"] = k.kwargs
        arrs = []
        for x in k.inputs:
            if isinstance(x, ir.Buffer):
                arrs.append(x.name)
            else:
                _, buf, size, stride, offset, _dt = x
                arrs.append(f"_strided_view({buf.name}, {pyexpr(offset)}, {self._shape(size)}, "
                            f"{self._shape(stride)})")
        L = self.lines
        if getattr(k, "out_arg", False):
            out = k.outputs[0]
            alloc(out)
            L.append(f"    {fname}({', '.join(arrs)}, {out.name})  # {k.kind}")
            return
        call = f"_run_extern({fname}, _args_{k.name}, _kwargs_{k.name}, [{', '.join(arrs)}])"
        if len(k.outputs) == 1:
            L.append(f"    {k.outputs[0].name} = _ascontig({call})  # {k.kind}")
        else:
            tmp = f"_r_{k.name}"
            L.append(f"    {tmp} = {call}  # {k.kind}")
            for i, o in enumerate(k.outputs):
                L.append(f"    {o.name} = _ascontig({tmp}[{i}])")


def _numel(size):
    out = sympy.Integer(1)
    for s in size:
        out = out * s
    return out
