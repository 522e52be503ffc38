"""AOT-level compile cache: a warm compile skips the joint trace and the partition.

On a warm compile in a new process the FX graph cache (``ember/inductor/fx_graph_cache.py``)
already skips lowering and g++, but aot still traced the joint forward+backward graph on
fake tensors and partitioned it -- most of what a warm training compile cost. This cache
(the counterpart of PyTorch's ``AOTAutogradCache``) stores aot's *result*: the forward and
backward (or inference) FX graphs and the bookkeeping the runtime wrapper needs, so a hit
goes straight to the graph compilers (whose own FX graph cache then hits too: the rebuilt
graphs have the same node names, targets, arguments and ``tensor_meta``, hence the same key).

**Key** (sha256 over): the dynamo graph (per node: op, name, target, arguments, activation-checkpoint
region tags), its
``meta`` items that are plain values; the subgraphs its ``get_attr`` nodes read for a cond's branches
or a traced ``ember.func`` transform (``call_traced``, ``dynamo/variables/func_transforms.py``) --
their code is their nodes, keyed the same way, with each placeholder's example layout, each constant
tensor by value (sha256 of its elements), nested subgraphs and their ``meta``; per example input its shape, strides, dtype, device,
``requires_grad`` and which other inputs share its memory (aliasing changes
functionalization); training or inference; the decomposition table ("prims" when it
is ember's own, whose code the source hash covers; otherwise op name -> the
decomposition's qualified name, bypassed when one has none); ``memory_budget`` and every plain value in
``ember.aot.config``; the default dtype and the inference/anomaly flags; a hash of the sources the trace runs through (every ``.py`` file
of the ``ember`` package except ``inductor``, ``dynamo`` and ``benchmarks``: ops, meta
functions, derivatives, decompositions, make_fx, functionalization, partitioning); the
Python and numpy versions; this file's format version.

**Bypassed** (logged with the reason, compiled as before, nothing read or written) when
``EMBER_AOT_CACHE=0``; while a dispatch mode is active; when the function is not an FX graph (its code is unknown); when
the graph has ``call_module`` nodes or ``get_attr`` nodes other than those subgraphs (their values
or code are not in the key)
or calls a function outside ember and the standard library (its code is not hashed); for
``dynamic`` traces with symbolic sizes of aot's own (no dynamo ShapeEnv); not stored when a compiled graph has a ``call_module``
node or a constant that is not a numpy-backed tensor;
when ``aot_graphs``/``aot_joint_graph`` logging is on (those graphs exist only on a miss).

**Value**: each graph as its node list (op, name, target by op name or qualified name,
arguments with node references, ``meta`` with fake tensors by shape/dtype/strides, the
constant tensors the trace created, by value), the
graph's ``meta``, the joint graph's bookkeeping (outputs, mutated inputs, gradient inputs,
differentiable outputs, aliased outputs), the number of saved values and which are tensors,
the backward's example inputs (fakes) and the partition report; and per graph the digest
its compiler reported (``graph_digest``: inductor's ``fx_graph_cache`` digest), when it did.
The entry is written after the graph compilers ran (to have their digests), the graphs in it
as they were before (the compilers may add metadata).

**Symbolic sizes** (``compile(dynamic=True)``: dynamo's ShapeEnv and fake inputs). The
inputs enter the key by their sizes as expressions over dynamo's symbols (``s0``, ``s1``, named
in the order it created them), not their example values, so one entry serves every size. Sizes
in the stored graphs, their fakes and the backward's examples are stored as expressions and
bound to the caller's ShapeEnv when read. The trace adds size guards to that ShapeEnv (the
decisions it took on the example sizes: a max pool's "the size is even"); the entry stores
them (``shape_env_guards``) and a hit replays them (``replay_shape_env_guards``) after checking
each holds for this compile's example sizes -- one that does not means the graphs were traced
under other decisions: a miss, traced again. (The graph compilers' guards are inductor's FX
graph cache's to replay.) nanoGPT training, dynamic, warm compile in a new process: 4.3 s (both
caches bypassed) -> ~0.7 s.

**Lazy graphs**: each graph is pickled on its own inside the entry. A hit rebuilds a graph
stored without a digest at once; one stored with a digest comes back as a
``LazyGraphModule`` (``ember/fx/lazy_graph_module.py``) that a compiler saying
``accepts_lazy_graph`` (inductor) gets as it is: inductor looks its entry up by the digest,
and the graph -- thousands of nodes for an unrolled LSTM, whose rebuild also imports the
prims -- is built only when read (an inductor miss, an eager fallback, a recompile for
other strides). LSTM training's warm compile: 0.30 -> 0.12 s.

**Storage**: ``$EMBER_CACHE_DIR/aot/<key[:2]>/<key>.aot``, a header line (magic, format,
sha256 of the payload) then the pickle, written to a temporary file and ``os.replace``-d
(concurrent writers both succeed, readers see a whole file or none). A bad header,
checksum mismatch, unpickling failure or a graph that does not rebuild identically counts
as corrupt: logged, traced again, and rewritten.

``EMBER_LOGS=aot_cache`` logs hit/miss/store/bypass lines on ``ember.aot.cache``;
``stats`` counts them.
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from ..runtime import disk_cache

log = logging.getLogger("ember.aot.cache")

FORMAT_VERSION = "4"     # 3: fake dtypes by ember name (bfloat16), bfloat16 constants as uint16;
#                          4: joint records carry mutated_grad_inputs
_MAGIC = b"EMBER-AOT"

stats = {"hits": 0, "misses": 0, "stores": 0, "corrupt": 0, "bypassed": 0, "uncacheable": 0}

_STDLIB_MODULES = {"operator", "_operator", "builtins", "math", "functools"}


def enabled() -> bool:
    return os.environ.get("EMBER_AOT_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


disk_cache.log_from_env(log, "aot_cache")


class Uncacheable(Exception):
    """Something the key cannot describe or the entry cannot store."""


def cache_dir() -> str:
    return os.path.join(disk_cache.cache_root(), "aot")


def _path(key: str) -> str:
    return os.path.join(cache_dir(), key[:2], key + ".aot")


# ---------------------------------------------------------------------------- key
_src_hash: List[str] = []


def source_hash() -> str:
    """sha256 of the ember sources an aot trace runs through (see the module docstring)."""
    if not _src_hash:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        skip = {"inductor", "dynamo", "benchmarks", "__pycache__"}
        files = []
        for d, dirs, fs in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in skip and not x.startswith("."))
            files += [os.path.join(d, f) for f in fs if f.endswith(".py")]
        from ..runtime.source_digest import tree_digest
        _src_hash.append(tree_digest(root, files))
    return _src_hash[0]


def _target_name(t) -> str:
    from ..inductor.fx_graph_cache import _fn_name, Uncacheable as FxUncacheable
    try:
        name = _fn_name(t)
    except FxUncacheable as e:
        raise Uncacheable(str(e)) from e
    if name.startswith("fn:"):
        mod = getattr(t, "__module__", "") or ""
        if not (mod == "ember" or mod.startswith("ember.") or mod in _STDLIB_MODULES):
            raise Uncacheable(f"the graph calls {name[3:]}, whose code is not in the key")
    return name


def _alias_groups(inputs) -> List[str]:
    """Per input, the index of the first input whose memory it shares (itself if none), and
    where it starts relative to that one: inputs share memory when their elements may overlap
    or when they are views of the same tensor (the ``_base`` chain: how the functionalization
    tells inputs apart; disjoint views of one tensor are traced differently from two tensors'
    views, and ``(c, c[:])`` differently from ``(b[0:5], b[5:10])``).

    "May overlap" is ``np.may_share_memory``'s default test, the arrays' byte bounds; they are
    compared here as two vectors, one pass per input, because asking numpy pair by pair was
    quadratic in calls (an optimizer step over 200 tensors: 19,900 calls, ~0.1 s of every
    warm compile)."""
    import numpy as np
    from ..tensor import _data_ptr
    n = len(inputs)
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)     # lo == hi: no bytes (an empty or non-numpy array)
    root_first, root_of = {}, []
    for i, t in enumerate(inputs):
        a = t._data
        if type(a) is np.ndarray and a.size:
            lo[i], hi[i] = _byte_bounds(a)
        while t._base is not None:
            t = t._base
        root_of.append(root_first.setdefault(id(t), i))
    out, first = [], []
    for i in range(n):
        g = root_of[i]                   # the first input of the same tensor (i if none)
        if hi[i] > lo[i]:
            overlap = np.flatnonzero((lo[:g] < hi[i]) & (lo[i] < hi[:g]))
            if overlap.size:
                g = int(overlap[0])
        g = first[g] if g != i else i
        first.append(g)
        out.append(str(g) if g == i else f"{g}@{_data_ptr(inputs[i]._data) - _data_ptr(inputs[g]._data)}")
    return out


def _byte_bounds(a) -> Tuple[int, int]:
    """[first byte, one past the last byte] an ndarray's elements span (``storage._byte_span``)."""
    from ..storage import _byte_span
    return _byte_span(a)


def _is_prims_table(dec) -> bool:
    try:
        from ..prims.table import decomposition_table
    except ImportError:
        return False
    return dec == decomposition_table()


def bypass_reason(aot, training: bool) -> Optional[str]:
    if not enabled():
        return "EMBER_AOT_CACHE=0"
    if aot.dynamic and aot.shape_env is None:
        return "symbolic sizes of aot's own (only dynamo's ShapeEnv is keyed)"
    if getattr(aot.fn, "graph", None) is None:
        return "the compiled function is not an FX graph"
    logs = {s.strip() for s in os.environ.get("EMBER_LOGS", "").split(",")}
    for kind in ("aot_graphs", "aot_joint_graph"):
        if kind in logs or logs & {"all", "aot"} or \
                logging.getLogger(f"ember.aot.{kind}").isEnabledFor(logging.INFO):
            return f"the {kind} log is on (its graphs exist only when traced)"
    from .._state import STATE
    if STATE.modes:
        return "a dispatch mode is active (it could change what the trace records)"
    import numpy as np
    from ..tensor import Tensor
    for t in aot.example_inputs:
        if not isinstance(t, Tensor):
            return "a non-tensor example input"
        if type(t._data) is not np.ndarray:
            return "a fake or non-numpy example input"
    return None


def _is_cond(target) -> bool:
    return getattr(target, "_ember_hop", None) == "cond_op"


def _is_call_traced(target) -> bool:
    """Whether ``target`` is dynamo's ``call_traced`` (a traced ember.func transform's node).
    Looked up without importing dynamo: a graph can only hold it once dynamo is loaded."""
    mod = sys.modules.get("ember.dynamo.variables.func_transforms")
    return mod is not None and target is getattr(mod, "call_traced", None)


def _key_target(t) -> str:
    """A call_function target's name in the key; a cond names its hop (its branches are keyed by
    their get_attr nodes, see :func:`_subgraph_key_lines`)."""
    return "hop:cond" if _is_cond(t) else _target_name(t)


def _subgraph_of(gm, node):
    """The GraphModule a ``get_attr`` node reads when it is a subgraph whose only users are
    conds or ``call_traced`` nodes (they run it as plain ember ops: its nodes are its code);
    None for anything else (a parameter, a constant, a module)."""
    from ..fx.graph_module import GraphModule
    v = gm
    try:
        for part in node.target.split("."):
            v = getattr(v, part)
    except AttributeError:
        return None
    if not isinstance(v, GraphModule) or not node.users:
        return None
    if all(u.op == "call_function" and (_is_cond(u.target) or _is_call_traced(u.target)) for u in node.users):
        return v
    return None


def _subgraph_key_lines(sub, prefix: str, put) -> None:
    """Key lines for a subgraph: per node its op, name, target, arguments, region tags and, for a
    placeholder, the layout of the example it was traced on; its constant tensors (literals the
    trace made) by value; nested subgraphs likewise; its ``meta``. Anything the key cannot
    describe is Uncacheable (a bypass: an entry must never stand for another subgraph)."""
    from ..inductor.fx_graph_cache import _canon
    from .joint import REGION_TAGS
    put(f"{prefix} class {type(sub).__name__}")
    for node in sub.graph.nodes:
        if node.op == "call_module":
            raise Uncacheable(f"a call_module node ({node.target}) in subgraph {prefix}")
        extra = ""
        if node.op == "get_attr":
            nested = _subgraph_of(sub, node)
            if nested is not None:
                _subgraph_key_lines(nested, f"{prefix}.{node.target}", put)
            else:
                extra = " const " + _constant_desc(sub, node)
        elif node.op == "placeholder" and "val" in node.meta:
            extra = " val " + _example_desc(node.meta["val"])
        target = _key_target(node.target) if node.op == "call_function" else str(node.target)
        tags = "".join(f" {k}={node.meta[k]!r}" for k in REGION_TAGS if k in node.meta)
        put(f"{prefix} {node.op} {node.name} {target} {_canon(tuple(node.args))} "
            f"{_canon(dict(node.kwargs))}{tags}{extra}")
    put(f"{prefix} meta " + _canon(dict(getattr(sub, "meta", {}) or {})))


def _example_desc(v) -> str:
    """A placeholder example's layout (sizes may be dynamo's symbols: their expressions)."""
    from ..tensor import Tensor
    if not isinstance(v, Tensor):
        raise Uncacheable(f"a subgraph input's example is a {type(v).__name__}")
    a = v._data
    strides = a.estrides if hasattr(a, "estrides") else tuple(s // a.itemsize for s in a.strides)
    return f"{tuple(map(str, a.shape))} {tuple(map(str, strides))} {v.dtype.name} {v.device} rg={v.requires_grad}"


def _constant_desc(gm, node) -> str:
    """A constant tensor a subgraph reads, by value (dtype, layout, sha256 of its elements)."""
    import numpy as np
    from ..tensor import Tensor
    v = gm
    for part in node.target.split("."):
        v = getattr(v, part)
    if not isinstance(v, Tensor) or type(v._data) is not np.ndarray:
        raise Uncacheable(f"a subgraph's get_attr {node.target} is not a numpy-backed tensor")
    a = v._data
    digest = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
    return f"{v.dtype.name} {a.shape} {a.strides} rg={v.requires_grad} sha256={digest}"


def key_lines(aot, training: bool) -> List[str]:
    """The text the key hashes: the mode, then everything else about the compile (``_key_body``).
    Within one ``prepare()`` (a graph without symbolic sizes, whose training trace found no
    gradient and so compiles for inference next) the body is made once (``_key_body_memo``): the
    graph, inputs and settings cannot change in between, and an optimizer step's graph of ~800
    nodes took ~15 ms per body."""
    memo = getattr(aot, "_key_body_memo", None)
    body = memo.get("body") if memo is not None else None
    if body is None:
        body = _key_body(aot)
        if memo is not None:
            memo["body"] = body
    return [f"format {FORMAT_VERSION} training {bool(training)}"] + body


def _key_body(aot) -> List[str]:
    from ..inductor.fx_graph_cache import _canon, Uncacheable as FxUncacheable
    from . import config
    from .joint import REGION_TAGS
    import numpy as np
    lines = []
    put = lines.append
    gm = aot.fn
    try:
        for node in gm.graph.nodes:
            if node.op == "call_module":
                raise Uncacheable(f"a {node.op} node ({node.target}): its value/code is not in the key")
            if node.op == "get_attr":
                # only a subgraph a cond or a traced ember.func transform calls: keyed by its code
                sub = _subgraph_of(gm, node)
                if sub is None:
                    raise Uncacheable(f"a get_attr node ({node.target}): its value/code is not in the key")
                _subgraph_key_lines(sub, f"subgraph {node.target}", put)
            target = _key_target(node.target) if node.op == "call_function" else str(node.target)
            # (with an activation-checkpoint region's tags: they change the partition)
            tags = "".join(f" {k}={node.meta[k]!r}" for k in REGION_TAGS if k in node.meta)
            put(f"{node.op} {node.name} {target} {_canon(tuple(node.args))} {_canon(dict(node.kwargs))}{tags}")
        meta = {k: v for k, v in (getattr(gm, "meta", {}) or {}).items()
                if isinstance(v, (type(None), bool, int, float, str))}
        put("gm.meta " + _canon(meta))
        groups = _alias_groups(aot.example_inputs)
        fakes = aot.fake_inputs if aot.shape_env is not None else None
        for i, (t, g) in enumerate(zip(aot.example_inputs, groups)):
            a = t._data
            if fakes is None:
                layout = f"{a.shape} {a.strides}"
            else:      # dynamo's sizes: expressions over its symbols (s0, s1: named in creation order)
                f = fakes[i]._data
                layout = f"sym({','.join(map(str, f.shape))}) sym({','.join(map(str, f.estrides))}) {f.offset}"
            put(f"input {layout} {a.dtype.str} {t.device} rg={t.requires_grad} "
                f"leaf={t.grad_fn is None} alias={g}")
        if fakes is not None:
            # the guards dynamo's ShapeEnv holds when the trace starts: the trace decides a relation
            # they settle without a guard of its own (symbolic_shapes._static_truth), so an entry
            # is only valid where the same ones hold
            put("shape_env guards " + ";".join(sorted(str(g) for g in aot.shape_env.guards)))
        dec = aot.decompositions
        if dec is None:
            put("decomp none")
        elif isinstance(dec, str) or _is_prims_table(dec):   # ("prims": named, not yet imported)
            # ember's own table: its code is in the source hash; fallback_random keeps the random
            # ops whole instead of Philox (prims/decompositions/creation.py)
            from ..inductor import config as _inductor_config
            put(f"decomp prims fallback_random={bool(_inductor_config.fallback_random)}")
        else:
            items = []
            for op, fn in dec.items():
                items.append(f"{getattr(op, 'name', op)}={_target_name(fn)}")
            put("decomp " + ";".join(sorted(items)))
    except FxUncacheable as e:
        raise Uncacheable(str(e)) from e
    cfg = ";".join(f"{k}={getattr(config, k)!r}" for k in sorted(vars(config)) if not k.startswith("_") and
                   isinstance(getattr(config, k), (type(None), bool, int, float, str)))
    put(f"memory_budget {aot.memory_budget!r} config {cfg}")
    from .._state import STATE
    from ..types import get_default_dtype
    put(f"state inference={STATE.inference} anomaly={STATE.anomaly} default_dtype={get_default_dtype().name}")
    # the dispatcher's autocast casts are traced into the graph: a region's state is part of it
    put("autocast " + ("none" if STATE.autocast is None else
                       ";".join(f"{k}={v.name}" for k, v in sorted(STATE.autocast.items()))))
    put("python " + sys.version)
    put("numpy " + np.__version__)
    put("src " + source_hash())
    return lines


def key_for(aot, training: bool) -> Optional[str]:
    """The key for this compile, or None (bypassed or uncacheable; logged)."""
    reason = bypass_reason(aot, training)
    if reason is None:
        try:
            return hashlib.sha256("\n".join(key_lines(aot, training)).encode()).hexdigest()
        except Uncacheable as e:
            reason = str(e)
    stats["bypassed"] += 1
    log.info("aot cache bypassed: %s", reason)
    return None


# ---------------------------------------------------------------------------- graphs
class _Ref:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Pickler(pickle.Pickler):
    """Nodes by name, ember dtypes by name, op bindings by op name, fake tensors by layout."""

    _PLAIN = frozenset([int, float, str, bool, type(None), tuple, list, dict, bytes])

    def __init__(self, f, protocol, symbolic: bool = False):
        super().__init__(f, protocol=protocol)
        from ..fx.node import Node
        from ..ops.registry import OPS
        from ..tensor import Tensor
        from ..types import device, dtype
        self._classes = (Node, dtype, device, Tensor)
        self._ops = OPS
        self._symbolic = symbolic     # SymInts stored as their expressions (rebound on a hit)

    def _size(self, n):
        if type(n) is int:
            return n
        if self._symbolic and type(n).__name__ == "SymInt":
            return ("sym", n.expr)
        raise Uncacheable("a symbolic size in a graph")

    def persistent_id(self, obj):
        t = type(obj)
        if t in self._PLAIN:        # (the common case, checked first: this runs per object)
            return None
        Node, _dtype, _device, Tensor = self._classes
        if t is Node:
            return ("node", obj.name)
        if isinstance(obj, _dtype):
            return ("dtype", obj.name)
        if isinstance(obj, _device):
            return ("device", str(obj))
        if isinstance(obj, Tensor):
            a = obj._data
            if type(a).__name__ != "FakeArray":
                raise Uncacheable("a real tensor in a graph (a constant)")
            # the ember dtype's name: numpy spells ml_dtypes' bfloat16 '|V2', which reads back as void
            return ("fake", tuple(map(self._size, a.shape)), obj.dtype.name, tuple(map(self._size, a.estrides)),
                    self._size(a.offset), str(obj.device), bool(obj.requires_grad))
        if getattr(obj, "_ember_hop", None) == "cond_op":
            return ("hop", "cond")     # ember.ops.higher_order.cond (its branches: "subgraphs")
        op = getattr(obj, "_ember_op", None)
        if op is not None and callable(obj):
            if self._ops.get(op.name) is op and op.binding is obj:
                return ("op", op.name)
        if t.__name__ == "SymInt":
            return ("symint", self._size(obj)[1])
        if t.__name__ in ("SymBool", "SymFloat", "ShapeEnv"):
            raise Uncacheable(f"a {t.__name__} in a graph")
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, shape_env=None):
        super().__init__(f)
        from .. import types as _t
        from .._fake import FakeArray
        from ..fx.fake_tensor import make_fake
        from ..ops.registry import OPS
        self._t, self._fake, self._make_fake, self._ops = _t, FakeArray, make_fake, OPS
        self._refs: Dict[str, _Ref] = {}
        self._env = shape_env     # a symbolic entry's sizes become SymInts of this ShapeEnv

    def _symint(self, expr):
        env = self._env
        if env is None:
            raise pickle.UnpicklingError("a symbolic size, and no ShapeEnv to bind it to")
        unknown = expr.free_symbols - set(env.var_to_val)
        if unknown:
            raise pickle.UnpicklingError(f"symbols {sorted(map(str, unknown))} are not the caller's")
        from ..fx.experimental.symbolic_shapes import SymInt
        return SymInt(expr, env)

    def _size(self, n):
        return self._symint(n[1]) if type(n) is tuple else n

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "node":
            r = self._refs.get(pid[1])
            if r is None:
                r = self._refs[pid[1]] = _Ref(pid[1])
            return r
        if kind == "dtype":
            return self._t.as_dtype(pid[1])
        if kind == "op":
            op = self._ops.get(pid[1])
            if op is None and pid[1].startswith("prims."):
                from .. import prims  # noqa: F401 - registers the prims (not imported until needed)
                op = self._ops.get(pid[1])
            if op is None:
                raise pickle.UnpicklingError(f"unknown op {pid[1]!r}")
            return op.binding
        if kind == "hop":
            from .._higher_order_ops.cond_op import cond_op
            return cond_op
        if kind == "device":
            return self._t.device(pid[1])
        if kind == "symint":
            return self._symint(pid[1])
        if kind == "fake":
            _, shape, dt, estrides, offset, dev, rg = pid
            shape, estrides = tuple(map(self._size, shape)), tuple(map(self._size, estrides))
            t = self._make_fake(self._fake(shape, self._t.as_dtype(dt).np, estrides, self._size(offset)),
                                self._t.device(dev))
            if rg:
                t.requires_grad_(True)
            return t
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def _graph_record(gm) -> dict:
    """A graph as plain data. ``get_attr`` constants are tensors the trace created from
    literals (the dynamo graph has no ``get_attr``: the key bypasses those), so they are
    determined by the key and stored by value."""
    import numpy as np
    from ..tensor import Tensor
    from ..fx.graph_module import GraphModule
    nodes, consts, subgraphs = [], {}, {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            raise Uncacheable(f"the compiled graph has a call_module node ({n.target})")
        if n.op == "get_attr":
            v = gm
            for part in n.target.split("."):
                v = getattr(v, part)
            if isinstance(v, GraphModule) and n.users and all(
                    getattr(u.target, "_ember_hop", None) == "cond_op" for u in n.users):
                subgraphs[n.target] = _graph_record(v)      # a cond's branch
                nodes.append((n.op, n.name, n.target, tuple(n.args), dict(n.kwargs), dict(n.meta)))
                continue
            consts[n.target] = _constant_record(n.target, v)
        nodes.append((n.op, n.name, n.target, tuple(n.args), dict(n.kwargs), dict(n.meta)))
    return {"nodes": nodes, "meta": dict(getattr(gm, "meta", {}) or {}), "class_name": type(gm).__name__,
            "consts": consts, "subgraphs": subgraphs}


def _constant_record(target: str, v) -> tuple:
    """A ``get_attr`` constant as plain data: (array, dtype name, requires_grad)."""
    import numpy as np
    from ..tensor import Tensor
    if not isinstance(v, Tensor) or type(v._data) is not np.ndarray:
        raise Uncacheable(f"the compiled graph's constant {target} is not a numpy-backed tensor")
    arr = np.array(v._data)
    if v.dtype.name == "bfloat16":
        arr = arr.view(np.uint16)    # ml_dtypes' bfloat16 does not survive pickling (|V2)
    return arr, v.dtype.name, bool(v.requires_grad)


def _constants_from(consts: dict) -> dict:
    """get_attr target -> tensor, from :func:`_constant_record` data."""
    from ..tensor import _make
    from .. import types as _t
    root = {}
    for target, (arr, dt, rg) in consts.items():
        if dt == "bfloat16":
            arr = arr.view(_t.bfloat16.np)
        t = _make(arr)
        if t.dtype is not _t.as_dtype(dt):
            raise ValueError(f"constant {target} rebuilt as {t.dtype}, stored as {dt}")
        root[target] = t.requires_grad_(True) if rg else t
    return root


def constants_blob(gm) -> Optional[bytes]:
    """The graph's top-level tensor constants (``get_attr`` of a tensor), pickled apart from
    the graph: a warm compile's inductor cache hit reads them from the lazy graph
    (``LazyGraphModule(constants=...)``) without rebuilding its nodes. None when it has none
    or one cannot be stored (the lazy graph is then built to read them, as before)."""
    from ..tensor import Tensor
    consts = {}
    try:
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                v = gm
                for part in n.target.split("."):
                    v = getattr(v, part)
                if isinstance(v, Tensor):
                    consts[n.target] = _constant_record(n.target, v)
        return pickle.dumps(consts, protocol=pickle.HIGHEST_PROTOCOL) if consts else None
    except Exception as e:  # noqa: BLE001 - optional: the graph blob holds them too
        log.info("aot cache: graph constants kept with the graph only: %s: %s", type(e).__name__, e)
        return None


_LEAVES = frozenset((int, float, str, bool, type(None)))


def _rebuild_graph(rec: dict):
    from ..fx.graph import Graph
    from ..fx.graph_module import GraphModule
    from ..fx.passes.shape_prop import TensorMetadata
    from ..tensor import Tensor
    leaves = _LEAVES | {TensorMetadata, Tensor}       # values that hold no node (fakes: Tensor)
    g = Graph()
    env: Dict[str, Any] = {}

    def sub(a):
        t = type(a)
        if t in leaves:               # (most of a record: a warm compile rebuilds thousands of nodes)
            return a
        if t is _Ref:
            return env[a.name]
        if isinstance(a, tuple):
            items = [sub(x) for x in a]
            return t._make(items) if hasattr(a, "_fields") else t(items)
        if isinstance(a, list):
            return t(sub(x) for x in a)      # (fx's immutable_list included)
        if isinstance(a, dict):
            return t({k: sub(v) for k, v in a.items()})
        if t is slice:
            return slice(sub(a.start), sub(a.stop), sub(a.step))
        return a

    for op, name, target, args, kwargs, meta in rec["nodes"]:
        n = g.create_node(op, target, sub(args), sub(kwargs), name=name, _trusted=True)
        if n.name != name:
            raise ValueError(f"node {name} rebuilt as {n.name}")
        n.meta.update({k: sub(v) for k, v in meta.items()})
        env[name] = n
    root = _constants_from(rec["consts"]) if rec["consts"] else {}
    for target, sub_rec in rec.get("subgraphs", {}).items():
        root[target] = _rebuild_graph(sub_rec)
    gm = GraphModule(root, g, class_name=rec["class_name"])
    gm.meta.update(rec["meta"])
    return gm


# ---------------------------------------------------------------------------- storage
def _atomic_write(path: str, data: bytes) -> None:
    disk_cache.atomic_write(path, data, ".aot")


def _read(path: str, shape_env=None) -> Optional[dict]:
    """The entry's payload (still pickled pieces), None when absent; ValueError when corrupt."""
    return disk_cache.read_entry(path, _MAGIC, FORMAT_VERSION,
                                 lambda b: _Unpickler(io.BytesIO(b), shape_env).load())


def _joint_record(joint) -> dict:
    return {k: getattr(joint, k) for k in ("num_primals", "num_tangents", "num_outputs", "mutated_inputs",
                                           "grad_inputs", "diff_outputs", "output_is_tuple", "inference",
                                           "aliased_outputs", "mutated_grad_inputs", "grad_tangents",
                                           "double_backward")}


def _joint_from(rec: dict):
    from .joint import JointGraph
    return JointGraph(gm=None, **{k: v for k, v in rec.items() if k != "inference"},
                      inference=rec["inference"])


def graph_blob(gm, symbolic: bool = False) -> Optional[bytes]:
    """The graph as the entry stores it, taken *before* the graph compilers see it (they may
    add metadata); None (logged) when it cannot be stored. ``symbolic``: its sizes may be
    SymInts of dynamo's ShapeEnv (stored as expressions)."""
    try:
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL, symbolic=symbolic).dump(_graph_record(gm))
        return buf.getvalue()
    except Exception as e:  # noqa: BLE001 - an unstorable graph is simply not cached
        stats["uncacheable"] += 1
        log.info("aot cache: not storing a graph: %s: %s", type(e).__name__, e)
        return None


def _load_graph(blob: bytes, shape_env=None):
    return _rebuild_graph(_Unpickler(io.BytesIO(blob), shape_env).load())


def save(key: str, kind: str, symbolic: bool = False, **parts) -> bool:
    """Store an entry: ``kind`` is "training", "inference" or "no_grad_outputs" (training
    found no differentiable output: the caller compiles for inference). ``fw``/``bw`` are
    :func:`graph_blob` bytes (an entry with a None graph is not stored); ``digests`` maps
    "fw"/"bw" to the compiled graph's ``fx_graph_cache`` digest, or None; ``fw_consts``/
    ``bw_consts`` (optional) are :func:`constants_blob` bytes."""
    try:
        entry: Dict[str, Any] = {"format": FORMAT_VERSION, "key": key, "kind": kind}
        for name, v in parts.items():
            if name == "joint":
                v = _joint_record(v)
            elif name in ("fw", "bw") and not isinstance(v, bytes):
                raise Uncacheable(f"the {name} graph could not be stored")
            entry[name] = v
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL, symbolic=symbolic).dump(entry)
        payload = buf.getvalue()
    except Exception as e:  # noqa: BLE001 - an unstorable result is simply not cached
        stats["uncacheable"] += 1
        log.info("aot cache: not storing %s: %s: %s", key[:16], type(e).__name__, e)
        return False
    framed = disk_cache.frame(_MAGIC, FORMAT_VERSION, payload)
    try:
        _atomic_write(_path(key), framed)
    except OSError as e:
        log.warning("aot cache: cannot write %s: %s", _path(key), e)
        return False
    stats["stores"] += 1
    log.info("aot cache store %s %s (%d bytes)", kind, key[:16], len(payload))
    return True


def lookup(key: str, kind: str, shape_env=None) -> Optional[dict]:
    """The stored entry with its graphs rebuilt (GraphModules, a JointGraph without ``gm``),
    or None on a miss or a corrupt entry (logged).

    A graph stored with its inductor digest comes back as a :class:`LazyGraphModule`
    carrying it: inductor finds its compiled code by the digest and the graph is never
    built unless something reads it (``ember/fx/lazy_graph_module.py``). One stored without
    (another compiler, or none could be computed) is rebuilt here."""
    from ..fx.lazy_graph_module import LazyGraphModule
    path = _path(key)
    t0 = time.perf_counter()
    try:
        entry = _read(path, shape_env)
        if entry is not None:
            if entry["kind"] not in (kind, "no_grad_outputs"):
                raise ValueError(f"entry kind {entry['kind']!r}, expected {kind!r}")
            out = dict(entry)
            digests = out.get("digests") or {}
            for name in ("fw", "bw"):
                if name in out:
                    blob = out[name]
                    if digests.get(name) is not None:
                        cb = out.pop(f"{name}_consts", None)
                        out[name] = LazyGraphModule(lambda blob=blob: _load_graph(blob, shape_env), digests[name],
                                                    constants=None if cb is None else
                                                    (lambda cb=cb: _constants_from(pickle.loads(cb))))
                    else:
                        out[name] = _load_graph(blob, shape_env)
            if "joint" in out:
                out["joint"] = _joint_from(out["joint"])
    except Exception as e:  # noqa: BLE001 - a damaged entry is traced again, never fatal
        stats["corrupt"] += 1
        log.warning("aot cache: entry %s is corrupt (%s: %s); tracing again", path, type(e).__name__, e)
        return None
    if entry is None:
        stats["misses"] += 1
        log.info("aot cache miss %s %s", kind, key[:16])
        return None
    if not replay_shape_env_guards(out.get("shape_env_guards"), shape_env):
        stats["misses"] += 1
        log.info("aot cache miss %s %s: a stored size guard does not hold for these sizes", kind, key[:16])
        return None
    stats["hits"] += 1
    log.info("aot cache hit %s %s (%.1f ms)", kind, key[:16], (time.perf_counter() - t0) * 1e3)
    return out


def replay_shape_env_guards(guards, shape_env) -> bool:
    """Give dynamo's ShapeEnv the size guards the stored trace added (a hit skips the trace).
    False, adding none, when one does not hold for this compile's example sizes: the stored
    graphs were traced under other decisions (the caller traces again)."""
    if not guards:
        return True
    if shape_env is None:
        return False
    for rel in guards:
        if shape_env._static_truth(rel) is not True and not bool(shape_env.hint(rel)):
            return False
    for rel in guards:
        shape_env._add_guard(rel)
    return True


def clear() -> None:
    import shutil
    shutil.rmtree(cache_dir(), ignore_errors=True)


__all__ = ["key_for", "lookup", "save", "graph_blob", "clear", "stats", "enabled", "source_hash"]
