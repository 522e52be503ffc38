"""The Python wrapper of a graph compiled to Triton, and the entry point
:func:`compile_graph_triton`.

Same pipeline as the CPU backend up to the scheduler (``GraphLowering`` ->
``Scheduler``); then ``codegen.triton.generate_kernels`` instead of the C++
emitter, and a generated ``call(arrays)`` that allocates buffers with the
device's array module (numpy under the interpreter, cupy on the GPU), launches
each kernel through a launcher from ``ember.runtime.triton_driver`` and runs
the externs. Per call it is straight-line code: shape reads for symbolic sizes,
one ``empty`` per buffer that needs memory (reusing dead buffers of the same
size and dtype), one launcher call per kernel.

``mode``:

* ``"interpret"`` -- kernels run under Triton's interpreter on numpy arrays
  (testing without a GPU; set ``TRITON_INTERPRET=1`` before importing triton);
* ``"cuda"`` -- kernels are compiled for the current GPU and launched on
  cupy's current stream (needs cupy); inputs are cuda tensors (cupy arrays),
  outputs are ember tensors on the inputs' cuda device. Externs run on the
  device through the array namespace (see :func:`_device_extern`): an
  extern's ``xp_fn(xp, *arrays, *args)`` when the lowering gives one, matmul
  as ``cupy.matmul`` (cuBLAS), a prim fallback as the prim's own kernel with
  ``xp = cupy``; any other extern (the CPU-native convolution helpers) is a
  ``TritonCodegenError`` naming it, so ``compile_fx`` runs that graph eagerly
  (on the device) instead. Verified without a GPU only: with a numpy-backed
  cupy stand-in and the kernels interpreted (``tests/cuda_device``), and the kernels
  compiled to PTX for sm_90 (``tests/inductor/test_triton_ptx.py``);
* ``"aot"`` -- nothing runs: every kernel is compiled for ``target`` (default
  ``("cuda", 90, 32)``) in every autotuning config, in a separate process
  (``triton_driver.aot_compile``); ``compiled`` holds the per-config results;
* ``"source"`` -- only generate (``source``, ``specs``, ``module``).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import sympy

from .. import ir
from ..graph import GraphLowering, unflatten
from ..scheduler import ExternGroup, FusedGroup, Scheduler
from ..sizevars import pyexpr
from ..virtualized import set_graph
from .triton import TritonCodegenError, generate_kernels


def _run_extern(fn, args, kwargs, arrays):
    def sub(a):
        if isinstance(a, ir.ExternArg):
            return arrays[a.i]
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        return a
    return fn(*[sub(a) for a in args], **{k: sub(v) for k, v in kwargs.items()})


def _numel(size):
    out = sympy.Integer(1)
    for s in size:
        out = out * s
    return out


def _device_extern(k, xp):
    """An extern kernel as a call on the device's arrays (``xp`` = cupy): the
    interface is ``k.xp_fn(xp, *arrays_and_args, **kwargs)`` (the same call
    signature as ``k.fn`` with the array module first). Until the lowering
    attaches one to every extern: matmul is ``xp.matmul`` into the preallocated
    output, a prim fallback (``fallback_<op>``) the op's own kernel -- written
    against ``xp`` -- with ``xp``; anything else cannot run on the GPU."""
    xp_fn = getattr(k, "xp_fn", None)
    if xp_fn is not None:
        return lambda *a, **kw: xp_fn(xp, *a, **kw)
    if k.kind == "mm":
        def mm(a, b, out):
            xp.matmul(a, b, out=out)
            return out
        return mm
    if k.kind.startswith("fallback_"):
        from ...ops.registry import OPS
        kernel = OPS[k.kind[len("fallback_"):]].kernel
        return lambda *a, **kw: kernel(xp, *a, **kw)
    raise TritonCodegenError(f"triton: extern {k.kind} has no device implementation (no xp_fn: it runs "
                             f"on host arrays only){' (' + k.reason + ')' if k.reason else ''}")


class TritonWrapperGen:
    def __init__(self, graph, groups, specs, launchers, xp, mode):
        self.graph = graph
        self.groups = groups
        self.specs = specs
        self.launchers = launchers
        self.mode = mode
        self.xp = xp
        self.globals: Dict[str, object] = {"_empty": xp.empty, "_run_extern": _run_extern,
                                           "_as_strided": xp.lib.stride_tricks.as_strided,
                                           "_ascontig": xp.ascontiguousarray}
        self.lines: List[str] = []

    def _dtype_ref(self, dtype):
        name = f"_dt_{dtype.name}"
        self.globals[name] = dtype.np
        return name

    @staticmethod
    def _shape(size):
        return "(" + "".join(f"{pyexpr(s)}, " for s in size) + ")"

    def _view(self, buf, size, stride, offset, itemsize_of):
        return (f"_as_strided({buf}.reshape(-1)[{pyexpr(offset)}:], {self._shape(size)}, "
                f"tuple(_s * {itemsize_of}.itemsize for _s in {self._shape(stride)}))")

    def generate(self) -> str:
        g = self.graph
        L = self.lines
        L.append("def call(arrays):")
        names = g.input_names
        if names:
            L.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = arrays")
        seen = set()
        for buf in g.graph_inputs:
            for d, s in enumerate(buf.layout.size):
                if isinstance(s, sympy.Symbol):
                    if s not in seen:
                        seen.add(s)
                        L.append(f"    {s.name} = {buf.name}.shape[{d}]")
                    else:
                        L.append(f"    if {buf.name}.shape[{d}] != {s.name}: raise _GuardError('{buf.name}', {d})")
        for guard in g.sizevars.guards:
            L.append(f"    if ({pyexpr(guard)}) != 0: raise _GuardError('size', 0)")
        outputs = {o.name for o in g.outputs if isinstance(o, ir.Buffer)}
        outputs |= {o[1].name for o in g.outputs if isinstance(o, tuple) and o[0] == "view"}
        last_use: Dict[str, int] = {}
        for gi, grp in enumerate(self.groups):
            for nm in grp.read_names():
                last_use[nm] = gi
            for nm in grp.names():
                last_use.setdefault(nm, gi)
        free: Dict[tuple, List[str]] = {}
        local = set()
        for sps in self.specs.values():
            for spec in sps:
                local |= spec.local

        def key_of(lay):
            return (str(sympy.expand(_numel(lay.size))), lay.dtype.name)

        def alloc(buf):
            lay = buf.layout
            pool = free.get(key_of(lay))
            if pool:
                L.append(f"    {buf.name} = {pool.pop()}.reshape({self._shape(lay.size)})  # reuse")
            else:
                L.append(f"    {buf.name} = _empty({self._shape(lay.size)}, {self._dtype_ref(lay.dtype)})")

        for gi, grp in enumerate(self.groups):
            if isinstance(grp, FusedGroup):
                sps = self.specs[gi]
                for n in grp.nodes:
                    if n.name not in sps[0].local:
                        alloc(n.buf)
                for spec in sps:
                    for nm, numel, dt, fill in spec.scratch:
                        self.globals["_full"] = self.xp.full
                        L.append(f"    {nm} = _full(({pyexpr(numel)},), {fill}, {self._dtype_ref(dt)})")
                    self.globals[f"_{spec.name}"] = self.launchers[spec.name]
                    args = [pyexpr(spec.xnumel)] + list(spec.params) + [s.name for s in spec.size_syms]
                    L.append(f"    _{spec.name}({', '.join(args)})")
            else:
                self._extern(grp, alloc)
            for nm in sorted(grp.read_names() | grp.names()):
                if last_use.get(nm) == gi and nm not in outputs and nm not in names and nm not in local:
                    buf = g.buffers_by_name[nm]
                    free.setdefault(key_of(buf.layout), []).append(nm)
        outs = []
        for o in g.outputs:
            if isinstance(o, ir.Buffer):
                outs.append(o.name)
            elif o[0] == "input":
                outs.append(o[1])
            elif o[0] == "view":
                _, buf, size, stride, offset = o
                outs.append(self._view(buf.name, size, stride, offset, buf.name))
            else:
                outs.append("None")
        L.append(f"    return ({''.join(o + ', ' for o in outs)})")
        return "\n".join(L) + "\n"

    def _extern(self, grp: ExternGroup, alloc):
        k = grp.node.kernel
        fname = f"_extern_{k.name}"
        fn = _device_extern(k, self.xp) if self.mode == "cuda" else k.fn
        self.globals[fname] = fn
        self.globals[f"_args_{k.name}"] = k.args
        self.globals[f"_kwargs_{k.name}"] = k.kwargs
        arrs = []
        for x in k.inputs:
            if isinstance(x, ir.Buffer):
                arrs.append(x.name)
            else:
                _, buf, size, stride, offset, _dt = x
                arrs.append(self._view(buf.name, size, stride, offset, buf.name))
        L = self.lines
        if getattr(k, "out_arg", False):
            out = k.outputs[0]
            alloc(out)
            L.append(f"    {fname}({', '.join(arrs)}, {out.name})  # {k.kind}")
            return
        if getattr(k, "size_args", None):
            raise RuntimeError(f"{k.kind}: a symbolic size argument of an extern call is not supported by the "
                               f"Triton wrapper (the graph runs eagerly)")
        call = f"_run_extern({fname}, _args_{k.name}, _kwargs_{k.name}, [{', '.join(arrs)}])"
        if len(k.outputs) == 1:
            L.append(f"    {k.outputs[0].name} = _ascontig({call})  # {k.kind}")
        else:
            tmp = f"_r_{k.name}"
            L.append(f"    {tmp} = {call}  # {k.kind}")
            for i, o in enumerate(k.outputs):
                L.append(f"    {o.name} = _ascontig({tmp}[{i}])")


class TritonCompiledGraph:
    """A graph compiled to Triton. ``source`` is the kernel module, ``wrapper_src``
    the generated ``call``; ``specs`` the kernels; ``compiled`` (``mode="aot"``)
    maps kernel names to their ``CompiledKernel`` per config."""

    def __init__(self, graph, source, wrapper_src, call, specs, module, compiled=None, xp=np, device=None,
                 host_inputs=()):
        self.graph = graph
        # lifted constants (parameters read with get_attr) live where the kernels run:
        # copied to the device once, here, not per call
        self._consts = [xp.asarray(graph.constants[n]._data) for n in graph.input_names if n in graph.constants]
        self.source = source
        self.wrapper_src = wrapper_src
        self._call = call
        self.specs = specs
        self.module = module
        self.compiled = compiled or {}
        self.fallbacks = list(graph.fallbacks)
        self.n_kernels = len(specs)
        self.device = device            # outputs that are device arrays become tensors there
        # a graph on the GPU may take 0-d CPU tensors (AdamW's step counts live on the CPU, as in
        # torch): the kernels read them through device pointers, so those inputs (known when
        # compiling: dynamo guards on devices) are copied over per call
        self._host_inputs = tuple(host_inputs)
        self._to_device = xp.asarray

    def as_variant(self):
        """This graph with ``compile_fx``'s calling convention (``(tensors, arrays)``)."""
        return _Variant(self)

    def __call__(self, *tensors):
        from ...tensor import Tensor, _make
        if self._call is None:
            raise RuntimeError("inductor: a graph compiled ahead of time only (mode='aot') cannot run")
        arrays = [t._data if isinstance(t, Tensor) else t for t in tensors]
        for i in self._host_inputs:
            arrays[i] = self._to_device(arrays[i])
        res = self._call(arrays + self._consts)
        outs = []
        for a, o in zip(res, self.graph.outputs):
            if isinstance(o, tuple) and o[0] == "input":
                outs.append(tensors[self.graph.input_names.index(o[1])])
            elif isinstance(o, tuple) and o[0] == "const":
                outs.append(o[1])
            else:
                # numpy results are CPU tensors, device arrays (cupy) tensors on the inputs' device
                outs.append(_make(a) if isinstance(a, np.ndarray) else _make(a, device=self.device))
        return unflatten(self.graph.out_spec, iter(outs))


class _Variant:
    """A :class:`TritonCompiledGraph` behind ``compile_fx``'s calling convention."""

    def __init__(self, cg):
        self.cg = cg
        self.graph, self.source, self.wrapper_src = cg.graph, cg.source, cg.wrapper_src
        self.fallbacks, self.n_kernels = cg.fallbacks, cg.n_kernels

    def __call__(self, tensors, arrays=None):
        return self.cg(*tensors)


class _GuardError(RuntimeError):
    def __init__(self, what, dim):
        super().__init__(f"inductor: input {what} (dim {dim}) violates a size guard of the compiled graph")


def compile_graph_triton(gm, example_inputs, mode="interpret", dynamic=False, target=None,
                         all_configs=True) -> TritonCompiledGraph:
    """Lower ``gm`` (an FX graph of prims), schedule it, generate Triton and make it
    callable per ``mode`` (module docstring)."""
    from ...runtime import triton_driver as drv
    from ..compile_fx import _ensure_meta
    _ensure_meta(gm, example_inputs)
    graph = GraphLowering(gm, example_inputs, dynamic=dynamic).run()
    with set_graph(graph):
        sched = Scheduler(graph)
        size_syms = sorted(graph.sizevars.var_to_val, key=lambda s: int(s.name[1:]))
        source, group_specs = generate_kernels(graph, sched.groups, size_syms)
        specs = {s.name: s for sps in group_specs.values() for s in sps}
        module = drv.KernelModule(source)
        compiled = {}
        launchers = {}
        if mode in ("aot", "source"):
            if mode == "aot":
                jobs = drv.aot_job(module, list(specs.values()), all_configs)
                for r in drv.aot_compile(jobs, **({"target": target} if target else {})):
                    compiled.setdefault(r["name"], []).append(r)
            return TritonCompiledGraph(graph, source, "", None, specs, module, compiled)
        device = None
        if mode == "interpret":
            ns = module.namespace("interpret")
            launchers = {n: drv.InterpretedLauncher(ns[n], s) for n, s in specs.items()}
            xp = np
        elif mode == "cuda":
            from ...runtime.cuda import cupy_module
            xp = cupy_module()
            device = next((t.device for t in example_inputs if getattr(t, "device", None) is not None
                           and t.device.type == "cuda"), None)
            if device is None:
                from ... import types as _t
                device = _t.device("cuda", int(xp.cuda.Device().id))
            ns = module.namespace("compile")
            launchers = drv.cuda_launchers(ns, specs, module)
            from .. import config
            if launchers and config.triton_precompile:
                distinct = {id(la): la.spec for la in launchers.values()}.values()
                drv.precompile(module, distinct, drv.device_target())
        else:
            raise ValueError(f"compile_graph_triton: unknown mode {mode!r}")
        wg = TritonWrapperGen(graph, sched.groups, group_specs, launchers, xp, mode)
        wrapper_src = wg.generate()
    glb = dict(wg.globals)
    glb["_GuardError"] = _GuardError
    exec(compile(wrapper_src, "<ember.inductor triton wrapper>", "exec"), glb)
    host_inputs = [] if mode != "cuda" else [
        i for i, t in enumerate(example_inputs) if getattr(t, "device", None) is not None and t.device.type == "cpu"]
    return TritonCompiledGraph(graph, source, wrapper_src, glb["call"], specs, module, xp=xp, device=device,
                               host_inputs=host_inputs)
