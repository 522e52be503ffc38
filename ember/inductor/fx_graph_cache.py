"""Graph-level compile cache: a warm compile skips lowering, scheduling and codegen.

The kernel cache (``codecache.py``) only saves the g++ run: a warm compile
still lowered the graph to loop IR, scheduled and fused it and generated the
C++ and the Python wrapper just to find the source hash. This cache (the
counterpart of PyTorch's ``FxGraphCache``) is keyed on what ``compile_graph``
is a function of and stores what it produces, so a hit -- in this process or
a new one -- only loads the shared objects and ``exec``-s the wrapper.

**Key** (sha256 over):

* the post-aot FX graph: per node its op, name, target (an op's registered
  name, a function's module and qualified name), arguments and keyword
  arguments (literals by ``repr``, nodes by name), and the metadata lowering
  reads: ``tensor_meta`` (shape, dtype, strides; symbolic sizes by their
  expression), or ``val``'s when a node has no ``tensor_meta``; ``gm.meta``;
* the example inputs' and the ``get_attr`` constants' shapes, strides and
  dtypes (values are not compiled in: constants are read at call time), and
  ``dynamic``;
* every plain value in ``ember.inductor.config`` (fusion, simd, flags ...),
  the compiler binary's identity (path, size, mtime), the CPU's identity;
* a hash of the inductor package's own source files and ``ember/types.py``
  (a code change invalidates every entry), the Python version, and this
  file's format version.

In two steps: the graph's part (nodes, metadata, example input layouts) is hashed into the
graph's **digest** (``graph_digest``), and the key hashes the digest with the compiler's
part (``env_lines``: config, compiler, CPU, Python, sources). The aot cache stores each
compiled graph's digest, so its warm hit hands inductor a ``LazyGraphModule`` carrying the
digest (``graph_digest_hint``): the entry is found without building or hashing the graph
(``ember/fx/lazy_graph_module.py``).

An argument the key cannot describe stably (an object whose ``repr`` is its
address, a tensor baked into the graph) makes the graph uncacheable: it is
compiled as before and nothing is stored.

**Value**: the C++ sources of each translation unit and their kernel-cache
keys (a missing or corrupt ``.so`` is rebuilt from the source), the wrapper
source, its globals pickled with the loaded-library pieces replaced by
references (``ctypes`` kernel functions by library index and symbol name,
numpy-reference fallbacks by op name, modules by name, closures an extern
lowering made -- the convolution's -- by their marshalled code and cell
values) that are resolved against the freshly loaded libraries, and the output bookkeeping
``CompiledGraph`` needs (input names, constant targets, output kinds, the
output structure, the fallback list).

**A hit imports no compiler**: ``compile_fx`` imports the sympy-based modules
(lowering, scheduler, codegen) only on a miss, and the wrapper's run-time
helpers live in the sympy-free ``runtime.py``; with sympy imported lazily
(``symbolic_shapes``), a process whose graphs all hit never loads it (its import
alone costs more than the 0.3 s a warm compile may take).

**Storage**: ``$EMBER_CACHE_DIR/inductor/fxgraph/<key[:2]>/<key>.fxg``: a
header line with the format version and the payload's sha256, then the
pickle. Written to a private temporary file and ``os.replace``-d into place,
so concurrent writers of one entry both succeed and a reader sees a whole
file or none. A header, checksum or unpickling mismatch (truncation, a
crashed writer, a foreign file) counts as ``corrupt``: logged, recompiled,
and the entry rewritten.

Bypassed (compiled as before, nothing read or written) when
``EMBER_FX_GRAPH_CACHE=0``, when ``config.profile_kernels`` is on (the
profiler wraps per-kernel timers that need the scheduler's groups), when the
``schedule`` or ``fusion`` log is on (their decisions are only visible while
compiling), for symbolic example sizes without ``dynamic=True``, and for fake example
inputs with concrete sizes under ``dynamic=True``. Fake inputs with concrete sizes
(aot's backward graphs) are cached like real ones: only their layout is read.

**Symbolic sizes of a caller** (``dynamic=True`` with fake inputs whose sizes are
dynamo's SymInts: aot's graphs of a ``compile(dynamic=True)`` model). Their sizes enter
the key as expressions over the caller's symbols (``s0``, ``s1``: named in the order
dynamo created them). Lowering adds the size guards it relied on to the caller's
ShapeEnv; the entry stores them (``shape_env_guards``), and a hit replays them
(``replay_shape_env_guards``) after checking that each holds for this compile's example
sizes -- one that does not means the entry was compiled under other decisions: it is
recompiled (and rewritten), never used. Before, a dynamic model's warm compile lowered
every graph again (nanoGPT training: 4.3 s against 0.1 s static).

Logging: ``ember.inductor.fx_graph_cache`` logs hit/miss/store/corrupt at
INFO (``EMBER_LOGS=fx_graph_cache`` turns it on); ``stats`` counts them.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib
import io
import logging
import os
import pickle
import shutil
import sys
import time
import types
from typing import Any, Dict, List, Optional

from ..runtime import disk_cache
from . import codecache, config
from ..runtime import code_cache as _code_cache

log = logging.getLogger("ember.inductor.fx_graph_cache")
log_code = logging.getLogger("ember.inductor.output_code")

FORMAT_VERSION = "1"
_MAGIC = b"EMBER-FXGRAPH"

stats = {"hits": 0, "misses": 0, "stores": 0, "corrupt": 0, "uncacheable": 0, "bypassed": 0}


def enabled() -> bool:
    return os.environ.get("EMBER_FX_GRAPH_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


disk_cache.log_from_env(log, "fx_graph_cache")


class Uncacheable(Exception):
    """The graph holds something the key cannot describe or the entry cannot store."""


# ---------------------------------------------------------------------------- key
def _fn_name(f) -> str:
    op = getattr(f, "_ember_op", None)
    if op is not None:
        if "custom" in op.tags:
            # (ember.library) a user's Python implementation: nothing in a key describes it
            raise Uncacheable(f"the graph calls the custom op {op.name}, whose code is not in the key")
        return "op:" + op.name
    if getattr(f, "_ember_hop", None) == "cond_op":
        raise Uncacheable("the graph holds a cond node, whose branch graphs are not in the key")
    mod, qn = getattr(f, "__module__", None), getattr(f, "__qualname__", None)
    if mod and qn and "<locals>" not in qn and "<lambda>" not in qn:
        return f"fn:{mod}.{qn}"
    raise Uncacheable(f"callable {f!r} has no stable name")


_LITERALS = (type(None), bool, int, float, complex, str, bytes)


def _canon(x) -> str:
    """A stable text for an FX argument (no object addresses, no dict-order surprises)."""
    t = type(x)
    if t in _LITERALS:
        return f"{t.__name__}:{x!r}"
    if hasattr(x, "op") and hasattr(x, "users") and hasattr(x, "name"):     # an fx Node
        return "%" + x.name
    if t is tuple or t is list:
        return ("(" if t is tuple else "[") + ",".join(_canon(v) for v in x) + ")"
    if isinstance(x, tuple) and hasattr(x, "_fields"):                     # a namedtuple
        return f"{_fn_name(t)}(" + ",".join(_canon(v) for v in x) + ")"
    if t is dict:
        return "{" + ",".join(f"{_canon(k)}:{_canon(v)}" for k, v in sorted(x.items(), key=lambda kv: repr(kv[0])))\
            + "}"
    if t is slice:
        return f"slice({_canon(x.start)},{_canon(x.stop)},{_canon(x.step)})"
    if isinstance(x, (types.FunctionType, types.BuiltinFunctionType, type)) or hasattr(x, "_ember_op"):
        return _fn_name(x)
    from ..tensor import Tensor
    if isinstance(x, Tensor):
        raise Uncacheable("a tensor is baked into the graph's arguments")
    r = repr(x)
    if " at 0x" in r or (t.__repr__ is object.__repr__):
        raise Uncacheable(f"argument of type {t.__name__} has no stable description")
    return f"{t.__module__}.{t.__qualname__}:{r}"


def _tensor_desc(v) -> str:
    try:
        shape = ",".join(str(s) for s in v.shape)
        stride = v.stride() if callable(getattr(v, "stride", None)) else getattr(v, "stride", None)
        stride = ",".join(str(s) for s in stride) if stride is not None else "?"
        return f"T[{shape}|{stride}|{v.dtype}]"
    except Exception as e:  # noqa: BLE001
        raise Uncacheable(f"cannot describe a node value: {type(e).__name__}: {e}") from e


def _meta_desc(meta: Dict[str, Any]) -> str:
    parts = []
    tm = meta.get("tensor_meta")
    if tm is not None:
        items = tm if isinstance(tm, (list, tuple)) and not hasattr(tm, "shape") else [tm]
        descs = []
        for m in items:
            if m is None:
                descs.append("None")
            elif hasattr(m, "shape"):
                descs.append(f"TM[{','.join(str(s) for s in m.shape)}|"
                             f"{','.join(str(s) for s in (getattr(m, 'stride', None) or ()))}|{m.dtype}]")
            else:
                descs.append(_canon(m))
        parts.append("tm=" + ";".join(descs))
    val = meta.get("val") if tm is None else None    # (tensor_meta already says it: skip the twin)
    if val is not None:
        items = val if isinstance(val, (list, tuple)) else [val]
        descs = []
        for v in items:
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                descs.append(_tensor_desc(v))
            elif v is None or type(v) in _LITERALS:
                descs.append(repr(v))
            else:
                descs.append(f"{type(v).__name__}:{v}")     # a SymInt: its expression
        parts.append("val=" + ";".join(descs))
    return " ".join(parts)


def _array_desc(a) -> str:
    return f"A[{a.shape}|{a.strides}|{a.dtype.str}]"


_src_hash: List[str] = []


def source_hash() -> str:
    """sha256 of the inductor package's .py files (and ember/types.py): the compiler itself."""
    if not _src_hash:
        root = os.path.dirname(os.path.abspath(__file__))
        files = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "__pycache__")))
            files += [os.path.join(d, f) for f in fs if f.endswith(".py")]
        files.append(os.path.join(os.path.dirname(root), "types.py"))
        from ..runtime.source_digest import tree_digest
        _src_hash.append(tree_digest(root, files))
    return _src_hash[0]


def _compiler_identity() -> str:
    path = shutil.which(config.cxx) or config.cxx
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        return f"{path}|{real}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        return path


def _config_desc() -> str:
    items = []
    for k in sorted(vars(config)):
        if k.startswith("_"):
            continue
        v = getattr(config, k)
        if isinstance(v, (type(None), bool, int, float, str, list, tuple, dict)):
            items.append(f"{k}={v!r}")
    return ";".join(items)


def bypass_reason(example_inputs, dynamic: bool = False) -> Optional[str]:
    """Why this compile must not use the cache (None: it may)."""
    if not enabled():
        return "EMBER_FX_GRAPH_CACHE=0"
    if getattr(config, "profile_kernels", False):
        return "config.profile_kernels"
    for n in ("schedule", "fusion"):
        if logging.getLogger(f"ember.inductor.{n}").isEnabledFor(logging.DEBUG):
            return f"the {n} log is on"
    import numpy as np
    envs = set()
    concrete_fake = False
    for t in example_inputs:
        arr = getattr(t, "_data", None)
        if arr is None:
            return "a non-tensor example input"
        sym = [s for s in tuple(arr.shape) + tuple(arr.strides) if type(s) is not int]
        if sym and not (dynamic and type(arr).__name__ == "FakeArray"):
            return "symbolic example sizes"
        envs.update(id(getattr(s, "env", None)) for s in sym)
        concrete_fake |= dynamic and type(arr) is not np.ndarray and not sym
    if len(envs) > 1 or id(None) in envs:
        return "symbolic example sizes from more than one ShapeEnv"
    if concrete_fake and not envs:
        return "fake example inputs with concrete sizes under dynamic=True"
    return None


def replay_shape_env_guards(compiled, example_inputs) -> bool:
    """Give the caller's ShapeEnv the size guards a stored graph was compiled under (a hit skips
    the lowering that added them). False, adding none, when one does not hold for these
    example sizes: the stored code is not this compile's (its entry is then recompiled)."""
    guards = getattr(compiled, "shape_env_guards", None) or []
    if not guards:
        return True
    env = next((getattr(s, "env", None) for t in example_inputs for s in t._data.shape
                if getattr(s, "env", None) is not None), None)
    if env is None:
        return False
    for rel in guards:
        if env._static_truth(rel) is not True and not bool(env.hint(rel)):
            log.info("fx graph cache: stored size guard %s does not hold for these sizes", rel)
            return False
    for rel in guards:
        env._add_guard(rel)
    return True


def graph_key(gm, example_inputs, dynamic: bool) -> str:
    """The cache key of compiling ``gm`` for ``example_inputs`` (see the module docstring)."""
    return key_from_digest(graph_digest(gm, example_inputs, dynamic))


def graph_digest(gm, example_inputs, dynamic: bool) -> str:
    """sha256 of what the graph and its example inputs contribute to the key (:func:`graph_lines`).

    Kept apart from the compiler's part so that a caller that knows a graph's digest without
    holding the graph -- the aot cache, whose hit rebuilds graphs lazily -- can find the entry
    (:func:`key_from_digest`) without rebuilding or hashing thousands of nodes."""
    return hashlib.sha256("\n".join(graph_lines(gm, example_inputs, dynamic)).encode()).hexdigest()


def key_from_digest(digest: str) -> str:
    """The key of a graph whose :func:`graph_digest` is ``digest``, under this process's compiler
    (config, g++, CPU, Python, inductor sources: :func:`env_lines`)."""
    return hashlib.sha256(("graph " + digest + "\n" + "\n".join(env_lines())).encode()).hexdigest()


def key_lines(gm, example_inputs, dynamic: bool) -> List[str]:
    """The text the key is made of, one line per item (diff two of them to see why a compile
    missed): the graph's lines (hashed into its digest) then the compiler's."""
    return graph_lines(gm, example_inputs, dynamic) + env_lines()


def graph_lines(gm, example_inputs, dynamic: bool) -> List[str]:
    """The graph's part of the key: its nodes, metadata and example input layouts."""
    lines: List[str] = []
    put = lines.append

    put(f"format {FORMAT_VERSION} dynamic {bool(dynamic)}")
    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = _fn_name(node.target)
        elif node.op == "get_attr":
            target = str(node.target)
            c = _getattr(gm, node.target)
            put("const " + (_array_desc(c._data) if hasattr(c, "_data") else _canon(c)))
        else:
            target = str(node.target)
        put(f"{node.op} {node.name} {target} {_canon(tuple(node.args))} {_canon(dict(node.kwargs))} "
            f"{_meta_desc(node.meta)}" + (" gradients" if node.meta.get("gradients") else ""))
    put("gm.meta " + _canon(dict(getattr(gm, "meta", {}) or {})))
    for t in example_inputs:
        put("input " + _array_desc(t._data))
    return lines


def env_lines() -> List[str]:
    """The compiler's part of the key: what else the generated code is a function of."""
    return ["config " + _config_desc(), "cxx " + _compiler_identity(), "cpu " + codecache.cpu_identity(),
            "python " + sys.version, "src " + source_hash()]


# ---------------------------------------------------------------------------- storage
def _path(key: str) -> str:
    return os.path.join(codecache.cache_dir(), "fxgraph", key[:2], key + ".fxg")


def _atomic_write(path: str, data: bytes) -> None:
    disk_cache.atomic_write(path, data, ".fxg")


def _read(path: str) -> Optional[dict]:
    """The stored entry, None when absent; raises ValueError when corrupt."""
    return disk_cache.read_entry(path, _MAGIC, FORMAT_VERSION, pickle.loads)


# ---------------------------------------------------------------------------- globals
def _fallback_fn(op_name: str):
    """The numpy-reference fallback of ``op_name``, as ``GraphLowering.fallback`` builds it."""
    import numpy as np
    from .. import prims  # noqa: F401 - registers the prims (a cache hit can come before any trace)
    from ..ops.registry import OPS
    kernel = OPS[op_name].kernel

    def fn(*arrays_args, **kw):
        return kernel(np, *arrays_args, **kw)

    fn.__name__ = op_name.replace(".", "_")
    return fn


def _fallback_ops(graph) -> Dict[int, str]:
    """id(closure) -> op name for every numpy-reference fallback of ``graph``; a closure
    whose shape is not ``fallback``'s (free variables other than the op's kernel) is
    left out and makes the entry uncacheable when pickled."""
    from ..ops.registry import OPS
    from . import ir
    out = {}
    for b in graph.buffers:
        if isinstance(b, ir.ExternKernel) and b.kind.startswith("fallback_"):
            name = b.kind[len("fallback_"):]
            fn = b.fn
            code = getattr(fn, "__code__", None)
            op = OPS.get(name)
            if op is None or code is None or code.co_freevars != ("kernel",) or \
                    fn.__closure__[0].cell_contents is not op.kernel:
                continue
            out[id(fn)] = name
    return out


def _global_names(code) -> set:
    """Global names ``code`` (and the code nested in it) reads or writes."""
    import dis
    names = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME"):
            names.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


def _make_function(module, code_bytes, name, defaults, kwdefaults, cells, needs_module):
    """Rebuild a closure pickled by :meth:`_Pickler.reducer_override`."""
    import builtins
    import marshal
    code = marshal.loads(code_bytes)
    glb = importlib.import_module(module).__dict__ if needs_module else {"__builtins__": builtins,
                                                                         "__name__": module}
    fn = types.FunctionType(code, glb, name, defaults, tuple(types.CellType(c) for c in cells))
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    def __init__(self, f, libs, fallbacks):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self._fallbacks = fallbacks
        self._libs = {id(lib): i for i, lib in enumerate(libs)}
        self._funcs = {}
        for i, lib in enumerate(libs):
            for name, v in vars(lib).items():
                if isinstance(v, ctypes._CFuncPtr):
                    self._funcs[id(v)] = (i, name)

    def persistent_id(self, obj):
        if isinstance(obj, ctypes._CFuncPtr):
            where = self._funcs.get(id(obj))
            if where is None:
                raise Uncacheable(f"a ctypes function {obj!r} outside the graph's libraries")
            return ("cfunc", where[0], where[1], list(obj.argtypes or []), obj.restype)
        if isinstance(obj, ctypes.CDLL):
            i = self._libs.get(id(obj))
            if i is None:
                raise Uncacheable("a shared library outside the graph's own")
            return ("lib", i)
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        if isinstance(obj, types.FunctionType) and id(obj) in self._fallbacks:
            return ("fallback", self._fallbacks[id(obj)])
        return None

    def reducer_override(self, obj):
        """A closure an extern lowering made (the convolution's ``conv``) by its code
        (``marshal``: the key pins the Python version and the inductor's source) and its
        cells' values. Its module is imported on load only if the code reads a global
        other than a builtin (most externs close over everything they use, so a hit stays
        clear of the sympy-based lowering modules)."""
        if isinstance(obj, types.FunctionType) and ("<locals>" in obj.__qualname__ or
                                                    obj.__name__ == "<lambda>"):
            import builtins
            import marshal
            cells = tuple(c.cell_contents for c in (obj.__closure__ or ()))
            needs_module = bool(_global_names(obj.__code__) - set(vars(builtins)))
            return (_make_function, (obj.__module__, marshal.dumps(obj.__code__), obj.__name__, obj.__defaults__,
                                     obj.__kwdefaults__, cells, needs_module))
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, libs):
        super().__init__(f)
        self._libs = libs

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "cfunc":
            _, i, name, argtypes, restype = pid
            fn = getattr(self._libs[i], name)
            fn.argtypes, fn.restype = argtypes, restype
            return fn
        if kind == "lib":
            return self._libs[pid[1]]
        if kind == "module":
            return importlib.import_module(pid[1])
        if kind == "fallback":
            return _fallback_fn(pid[1])
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


# ---------------------------------------------------------------------------- API
class _GraphInfo:
    """What ``CompiledGraph`` reads of a ``GraphLowering``, rebuilt from an entry."""

    def __init__(self, input_names, constants, outputs, out_spec, fallbacks):
        self.input_names = input_names
        self.constants = constants
        self.outputs = outputs
        self.out_spec = out_spec
        self.fallbacks = fallbacks


def _getattr(mod, target: str):
    obj = mod
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _constant_targets(gm) -> Dict[str, str]:
    """Input name -> get_attr target, named as ``GraphLowering`` names them (``const{i}``)."""
    out, n = {}, 0
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            out[f"const{n}"] = node.target
            n += 1
    return out


def lookup(key: str, gm):
    """The ``CompiledGraph`` stored under ``key`` (None on a miss or a corrupt entry)."""
    path = _path(key)
    t0 = time.perf_counter()
    try:
        entry = _read(path)
    except (ValueError, OSError) as e:
        stats["corrupt"] += 1
        log.warning("fx graph cache: entry %s is corrupt (%s); recompiling", path, e)
        return None
    if entry is None:
        stats["misses"] += 1
        log.info("fx graph cache miss %s", key[:16])
        return None
    try:
        libs = [codecache.load_key(k, s) for k, s in zip(entry["so_keys"], entry["sources"])]
        glb = _Unpickler(io.BytesIO(entry["globals"]), libs).load()
    except Exception as e:  # noqa: BLE001 - a stale or damaged entry is recompiled, never fatal
        stats["corrupt"] += 1
        log.warning("fx graph cache: entry %s cannot be rebuilt (%s: %s); recompiling", path,
                    type(e).__name__, e)
        return None
    from .compile_fx import CompiledGraph, GuardError
    glb["_GuardError"] = GuardError
    glb["_libs"] = libs
    exec(_code_cache.compile_source(entry["wrapper_src"], "<ember.inductor wrapper>"), glb)
    constants = {name: _getattr(gm, target) for name, target in entry["constants"].items()}
    info = _GraphInfo(entry["input_names"], constants, entry["outputs"], entry["out_spec"], entry["fallbacks"])
    cg = CompiledGraph(info, entry["source"], entry["wrapper_src"], glb["call"], entry["n_kernels"])
    cg.shape_env_guards = entry.get("shape_env_guards") or []
    stats["hits"] += 1
    log.info("fx graph cache hit %s (%.1f ms)", key[:16], (time.perf_counter() - t0) * 1e3)
    if log_code.isEnabledFor(logging.DEBUG):
        log_code.debug("generated C++ (fx graph cache hit):\n%s\nwrapper:\n%s",
                       entry["source"] or "(none)", entry["wrapper_src"])
    return cg


def save(key: str, gm, graph, compiled, sources: List[str], libs, wrapper_globals: Dict[str, Any]) -> bool:
    """Store what rebuilds ``compiled`` under ``key``; False (logged) when it cannot be stored."""
    try:
        buf = io.BytesIO()
        _Pickler(buf, libs, _fallback_ops(graph)).dump(dict(wrapper_globals))
        outputs = []
        for o in graph.outputs:
            if isinstance(o, tuple) and o[0] in ("input", "const"):
                outputs.append(o)
            elif isinstance(o, tuple) and o[0] == "view":
                outputs.append(("view",))
            elif getattr(o, "name", None) in (graph.inplace or {}):
                outputs.append(("input", graph.inplace[o.name]))   # computed into that input
            else:
                outputs.append(None)               # a buffer the wrapper returns
        consts = _constant_targets(gm)
        if set(consts) != set(graph.constants):
            raise Uncacheable("constant naming differs from GraphLowering's")
        entry = {
            "format": FORMAT_VERSION, "key": key, "sources": list(sources),
            "so_keys": [codecache.cache_key(s) for s in sources],
            "source": compiled.source, "wrapper_src": compiled.wrapper_src, "n_kernels": compiled.n_kernels,
            "globals": buf.getvalue(), "input_names": list(graph.input_names), "constants": consts,
            "outputs": outputs, "out_spec": graph.out_spec, "fallbacks": list(graph.fallbacks),
            "shape_env_guards": list(getattr(graph, "shape_env_guards", None) or []),
        }
        payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - an unstorable graph is simply not cached
        stats["uncacheable"] += 1
        log.info("fx graph cache: not storing %s: %s: %s", key[:16], type(e).__name__, e)
        return False
    framed = disk_cache.frame(_MAGIC, FORMAT_VERSION, payload)
    try:
        _atomic_write(_path(key), framed)
    except OSError as e:
        log.warning("fx graph cache: cannot write %s: %s", _path(key), e)
        return False
    stats["stores"] += 1
    log.info("fx graph cache store %s (%d bytes)", key[:16], len(payload))
    return True


def key_for(gm, example_inputs, dynamic: bool) -> Optional[str]:
    """The key to consult for this compile, or None when the cache is bypassed or the
    graph is uncacheable (both logged)."""
    digest = digest_for(gm, example_inputs, dynamic)
    return None if digest is None else key_from_digest(digest)


def digest_for(gm, example_inputs, dynamic: bool) -> Optional[str]:
    """:func:`graph_digest`, or None when the cache is bypassed or the graph is uncacheable
    (both logged). A graph that carries ``graph_digest_hint`` (the aot cache's lazily rebuilt
    graphs) is taken at its word: it is not rebuilt to be hashed."""
    reason = bypass_reason(example_inputs, dynamic)
    if reason is not None:
        stats["bypassed"] += 1
        log.info("fx graph cache bypassed: %s", reason)
        return None
    hint = getattr(gm, "graph_digest_hint", None)
    if hint is not None:
        return hint
    try:
        return graph_digest(gm, example_inputs, dynamic)
    except Uncacheable as e:
        stats["uncacheable"] += 1
        log.info("fx graph cache: graph not cacheable: %s", e)
        return None


def clear() -> None:
    """Delete every stored graph entry (the kernel .so files stay)."""
    shutil.rmtree(os.path.join(codecache.cache_dir(), "fxgraph"), ignore_errors=True)


__all__ = ["lookup", "save", "key_for", "digest_for", "graph_key", "graph_digest", "key_from_digest", "clear", "stats", "enabled", "Uncacheable"]
