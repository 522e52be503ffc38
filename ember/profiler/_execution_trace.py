"""``ExecutionTraceObserver``: the ops a program ran, with their tensors' identities, as
PyTorch's execution trace (the Chakra JSON that replay and simulation tools read).

    et = ExecutionTraceObserver().register_callback("trace.json")
    et.start(); model(x).sum().backward(); et.stop()
    et.unregister_callback()          # writes trace.json

What is recorded: every kernel op ember's dispatcher runs on the thread that called
``start()`` (forward and backward; ops run inside another op's kernel nest under it through
``ctrl_deps``), like ``ember.profiler.profile``. The file has torch's layout: ``schema``,
``pid``, ``time``, ``start_ts``/``finish_ts`` and ``nodes``; each node ``id``, ``name``
(``aten::mm``), ``ctrl_deps`` (its parent node), ``inputs``/``outputs`` (``values``, ``shapes``,
``types``, ``strides``) and ``attrs`` (``rf_id``, ``fw_parent``, ``seq_id``, ``scope``, ``tid``,
``fw_tid``, ``op_schema``, ``kernel_backend``, ``kernel_file``, ``tensor_range``). A tensor value
is ``[tensor id, storage id, offset, numel, itemsize, device]``: ids are stable while the
tensor (storage) lives, so replay tools can follow data from op to op. Not recorded:
``record_function`` ranges, other threads, compiled graphs' inner kernels (a compiled call is
one opaque region), process-group configuration.
"""
from __future__ import annotations

import gzip
import itertools
import json
import os
import threading
import time
import weakref
from typing import Any, Dict, List, Optional

from .._state import STATE

__all__ = ["ExecutionTraceObserver"]

_SCHEMA = "1.1.1-chakra.0.0.4"
_C10_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long", "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _dtype_name(dtype) -> str:
    name = str(dtype).replace("ember.", "")
    return _C10_NAMES.get(name, name)


class _Node:
    __slots__ = ("id", "name", "parent", "inputs", "outputs", "rf_id", "schema")

    def __init__(self, nid, name, parent, rf_id, schema):
        self.id = nid
        self.name = name
        self.parent = parent
        self.rf_id = rf_id
        self.schema = schema
        self.inputs = None
        self.outputs = None


class _TraceMode:
    """The dispatch mode that records each op (below autograd, at the bottom of the stack like the
    profiler's): a node opened when the op starts, finished with its outputs when it returns."""

    def __init__(self, observer):
        self.observer = observer
        self.thread = threading.get_ident()

    def __ember_dispatch__(self, op, args):
        from ..ops import registry
        if threading.get_ident() != self.thread:
            return registry.below_autograd(op, args)
        obs = self.observer
        node = obs._open(op, args)
        try:
            out = registry.below_autograd(op, args)
        finally:
            obs._stack.pop()
        node.outputs = obs._values(out if isinstance(out, (list, tuple)) else (out,))
        obs._nodes.append(node)
        return out


class ExecutionTraceObserver:
    """Records an execution trace between ``start()`` and ``stop()`` into the file given to
    ``register_callback``; the file is written when the observer is unregistered (or cleaned up).
    ``profile(execution_trace_observer=et)`` starts and stops it with the profiler's recording."""

    def __init__(self):
        self._registered = False
        self._execution_trace_running = False
        self.extra_resources_collection = False
        self.resources_dir = ""
        self.output_file_path = ""
        self._reset()

    def _reset(self):
        self._ids = itertools.count(3)           # 1: the process node, 2: the thread node
        self._rf_ids = itertools.count(1)
        self._nodes: List[_Node] = []
        self._stack: List[_Node] = []
        self._tensor_ids: Dict[int, Any] = {}     # id(tensor) -> (weakref, trace id)
        self._storage_ids: Dict[int, int] = {}    # storage data pointer -> trace id
        self._mode = None
        self._start_ts = None
        self._finish_ts = None

    def __del__(self):
        try:
            self.unregister_callback()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to report to
            pass

    # -- torch's API --------------------------------------------------------------------
    @staticmethod
    def build_execution_trace_obs_from_env() -> Optional["ExecutionTraceObserver"]:
        """An observer writing to a temporary file when ``ENABLE_PYTORCH_EXECUTION_TRACE=1``, else None."""
        if os.environ.get("ENABLE_PYTORCH_EXECUTION_TRACE", "0") != "1":
            return None
        import tempfile
        with tempfile.NamedTemporaryFile("w+t", suffix=".et.json", delete=False) as fp:
            path = fp.name
        return ExecutionTraceObserver().register_callback(path)

    def set_extra_resource_collection(self, val) -> None:
        self.extra_resources_collection = bool(val)

    def register_callback(self, output_file_path: str) -> "ExecutionTraceObserver":
        if not isinstance(output_file_path, (str, os.PathLike)):
            raise TypeError(f"ExecutionTraceObserver.register_callback(): output_file_path must be a path, got "
                            f"{type(output_file_path).__name__}")
        if not self._registered:
            self.output_file_path = os.fspath(output_file_path)
            self._reset()
            self._registered = True
        return self

    def unregister_callback(self) -> None:
        if self._registered:
            self.stop()
            self._write()
            self._registered = False

    @property
    def is_registered(self):
        return self._registered

    def is_running(self):
        return self._execution_trace_running

    def start(self) -> None:
        if self._registered and not self._execution_trace_running:
            self._mode = _TraceMode(self)
            STATE.modes.insert(0, self._mode)
            if self._start_ts is None:
                self._start_ts = time.perf_counter_ns() // 1000
            self._execution_trace_running = True

    def stop(self) -> None:
        if self._execution_trace_running:
            try:
                STATE.modes.remove(self._mode)
            except ValueError:
                pass
            self._mode = None
            self._finish_ts = time.perf_counter_ns() // 1000
            self._execution_trace_running = False

    def cleanup(self) -> None:
        self.unregister_callback()

    def get_output_file_path(self) -> Optional[str]:
        return self.output_file_path or None

    def get_resources_dir(self, can_create=False) -> Optional[str]:
        """Where extra resources would go (ember writes none): ``<trace name>_resources``."""
        if not self.output_file_path:
            return None
        d = os.path.splitext(self.output_file_path)[0] + "_resources"
        if can_create:
            os.makedirs(d, exist_ok=True)
        return d if os.path.isdir(d) else None

    # -- recording ---------------------------------------------------------------------
    def _open(self, op, args) -> _Node:
        from ..ops._aten_namespace import packet
        try:
            schema = str(packet(op).default._schema)
        except Exception:  # noqa: BLE001 - an op without a schema string: record the node without one
            schema = ""
        parent = self._stack[-1].id if self._stack else 2
        node = _Node(next(self._ids), f"aten::{op.name}", parent, next(self._rf_ids), schema)
        node.inputs = self._values(args)
        self._stack.append(node)
        return node

    def _tensor_value(self, t):
        key = id(t)
        hit = self._tensor_ids.get(key)
        if hit is None or hit[0]() is not t:
            hit = (weakref.ref(t), next(self._ids))
            self._tensor_ids[key] = hit
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - a tensor with no storage (meta, fake)
            ptr = None
        sid = self._storage_ids.get(ptr) if ptr is not None else None
        if sid is None:
            sid = next(self._ids)
            if ptr is not None:
                self._storage_ids[ptr] = sid
        return [hit[1], sid, t.storage_offset(), t.numel(), t.element_size(), str(t.device)]

    def _values(self, items) -> Dict[str, list]:
        from ..tensor import Tensor
        vals, shapes, types, strides = [], [], [], []
        for a in items:
            if isinstance(a, Tensor):
                vals.append(self._tensor_value(a))
                shapes.append(list(a.shape))
                types.append(f"Tensor({_dtype_name(a.dtype)})")
                strides.append(list(a.stride()))
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
                vals.append([self._tensor_value(x) for x in a])
                shapes.append([list(x.shape) for x in a])
                types.append("GenericList[" + ",".join(f"Tensor({_dtype_name(x.dtype)})" for x in a) + "]")
                strides.append([list(x.stride()) for x in a])
            else:
                vals.append(_plain(a))
                shapes.append([])
                types.append(_scalar_type(a))
                strides.append([])
        return {"values": vals, "shapes": shapes, "types": types, "strides": strides}

    # -- output ------------------------------------------------------------------------
    def _node_json(self, nid, name, parent, inputs, outputs, rf_id, schema, scope=0):
        return {"id": nid, "name": name, "ctrl_deps": parent, "inputs": inputs, "outputs": outputs,
                "attrs": [{"name": "rf_id", "type": "uint64", "value": rf_id},
                          {"name": "fw_parent", "type": "uint64", "value": 0},
                          {"name": "seq_id", "type": "int64", "value": -1},
                          {"name": "scope", "type": "uint64", "value": scope},
                          {"name": "tid", "type": "uint64", "value": 1},
                          {"name": "fw_tid", "type": "uint64", "value": 0},
                          {"name": "op_schema", "type": "string", "value": schema},
                          {"name": "kernel_backend", "type": "string", "value": ""},
                          {"name": "kernel_file", "type": "string", "value": ""},
                          {"name": "tensor_range", "type": "string", "value": ""}]}

    def _write(self):
        empty = {"values": [], "shapes": [], "types": [], "strides": []}
        nodes = [self._node_json(2, "[pytorch|profiler|execution_trace|thread]", 1, empty, empty, 0, "", scope=7)]
        nodes += [self._node_json(n.id, n.name, n.parent, n.inputs, n.outputs, n.rf_id, n.schema)
                  for n in self._nodes]
        nodes.append(self._node_json(1, "[pytorch|profiler|execution_trace|process]", 1, empty, empty, 0, "",
                                     scope=7))
        start = self._start_ts if self._start_ts is not None else time.perf_counter_ns() // 1000
        doc = {"schema": _SCHEMA, "pid": os.getpid(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
               "start_ts": start, "finish_ts": self._finish_ts if self._finish_ts is not None else start,
               "nodes": nodes}
        path = self.output_file_path
        opener = gzip.open if path.endswith(".gz") else open
        tmp = f"{path}.tmp{os.getpid()}"
        with opener(tmp, "wt") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
        self._nodes = []


def _plain(a):
    """A non-tensor argument as JSON: numbers, bools, strings and None as they are, the rest as text."""
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in a):
        return list(a)
    return str(a)


def _scalar_type(a) -> str:
    if a is None:
        return "None"
    if isinstance(a, bool):
        return "Bool"
    if isinstance(a, int):
        return "Int"
    if isinstance(a, float):
        return "Double"
    if isinstance(a, str):
        return "String"
    if isinstance(a, (list, tuple)):
        if all(isinstance(x, int) and not isinstance(x, bool) for x in a):
            return "GenericList[Int]" if a else "GenericList[]"
        return "GenericList"
    return type(a).__name__
