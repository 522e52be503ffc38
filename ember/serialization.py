"""``ember.save`` / ``ember.load``: a file format that never runs code.

A file is a zip archive holding

* ``ember_manifest.json``: the saved object as a JSON tree of typed nodes — dict (with
  ordered-ness and the ``_metadata`` a module state_dict carries), list, tuple, ember.Size,
  str, int, float (inf/nan included), bool, None, and tensor nodes (dtype, shape, device,
  requires_grad, whether it is a Parameter, and which storage entry holds its data), and storage
  nodes (an ``UntypedStorage``'s bytes, or a ``TypedStorage``'s bytes and dtype);
* ``storages/<n>``: each tensor's values as raw little-endian bytes in C order.

That JSON format is what ``ember.save(..., _use_new_zipfile_serialization=False)`` writes (and
the fallback for what torch's format cannot hold: nested, quantized, meta tensors); ``ember.load``
keeps reading it. By default ``ember.save`` writes PyTorch's zip checkpoint format
(ember/_torch_pickle.py), so ``torch.load`` reads ember checkpoints, and ``ember.load`` reads
``torch.save`` files with a restricted (weights-only) unpickler that never runs code from the
file unless ``weights_only=False`` is asked for.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections import OrderedDict

import numpy as np

from . import types as _t
from .tensor import Parameter, Tensor, _host

__all__ = ["save", "load", "FORMAT_VERSION", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals", "get_unsafe_globals_in_checkpoint"]

FORMAT_VERSION = 1
_MANIFEST = "ember_manifest.json"
_MAGIC = "ember.save"


# ---------------------------------------------------------------------- encoding
class _Writer:
    def __init__(self):
        self.storages = []   # raw byte strings
        self.by_id = {}      # id(tensor) -> node, so a tensor saved twice loads as one object
        self.storage_ids = {}  # (data_ptr, nbytes, device) -> entry: one storage saved twice loads as one
        self.keep = []       # keep saved objects alive while ids are in use

    def encode(self, obj, path="obj"):
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, bool):
            return {"t": "bool", "v": obj}
        if isinstance(obj, int) and type(obj) is int:
            return {"t": "int", "v": str(obj)}
        if isinstance(obj, float) and type(obj) is float:
            if math.isfinite(obj):
                return {"t": "float", "v": obj}
            return {"t": "float", "s": repr(obj)}
        if isinstance(obj, str) and type(obj) is str:
            return {"t": "str", "v": obj}
        if isinstance(obj, Tensor):
            return self._tensor(obj, path)
        from .storage import TypedStorage, UntypedStorage
        if isinstance(obj, (UntypedStorage, TypedStorage)):
            return self._storage(obj, path)
        if isinstance(obj, _t.dtype):
            return {"t": "dtype", "v": obj.name}
        if isinstance(obj, _t.device):
            return {"t": "device", "v": str(obj)}
        if isinstance(obj, _t.Size):
            return {"t": "size", "v": [int(s) for s in obj]}
        if type(obj) in (dict, OrderedDict):
            node = {"t": "dict", "ordered": type(obj) is OrderedDict,
                    "items": [[self.encode(k, f"{path} key"), self.encode(v, f"{path}[{k!r}]")]
                              for k, v in obj.items()]}
            meta = getattr(obj, "_metadata", None)
            if meta is not None:
                node["metadata"] = self.encode(meta, f"{path}._metadata")
            return node
        if type(obj) is list:
            return {"t": "list", "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if type(obj) is tuple:
            return {"t": "tuple", "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, (np.integer, np.floating, np.bool_)):
            return self.encode(obj.item(), path)
        raise TypeError(f"ember.save cannot store an object of type {type(obj).__module__}.{type(obj).__qualname__} "
                        f"(at {path}); it saves tensors, Parameters, and dict/OrderedDict/list/tuple/str/int/"
                        "float/bool/None containers of them (e.g. state_dicts) — never arbitrary Python objects")

    def _tensor(self, t, path):
        if id(t) in self.by_id:
            return {"t": "ref", "v": self.by_id[id(t)]}
        if getattr(t, "is_nested", False):   # its buffer and structure (ember/nested/_serial.py)
            from .nested._serial import saved_node
            return saved_node(self, t, path)
        if t._fake:
            if t.device.type == "meta":
                return self._meta_tensor(t)
            raise TypeError(f"ember.save cannot store a fake tensor (at {path})")
        quant = None
        if t.is_quantized:      # the integers as data, the quantizer in the node (ember/_quantized/serial.py)
            from ._quantized.serial import saved_form
            arr, quant = saved_form(t)
        else:
            arr = np.asarray(_host(t.detach()._data))
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        index = len(self.storages)
        self.storages.append(arr.tobytes())
        self.keep.append(t)
        self.by_id[id(t)] = index
        node = {"t": "tensor", "id": index, "dtype": t.dtype.name, "shape": list(arr.shape),
                "device": str(t.device), "requires_grad": bool(t.requires_grad),
                "parameter": isinstance(t, Parameter)}
        if quant is not None:
            node["quant"] = quant
        return node


    def _meta_tensor(self, t):
        """A tensor on the meta device: its shape and dtype, no bytes (as torch.save; it loads
        back onto the meta device whatever ``map_location`` says, as torch's)."""
        index = len(self.storages)
        self.storages.append(b"")
        self.keep.append(t)
        self.by_id[id(t)] = index
        return {"t": "tensor", "id": index, "dtype": t.dtype.name, "shape": [int(s) for s in t.shape],
                "device": "meta", "requires_grad": bool(t.requires_grad), "parameter": isinstance(t, Parameter)}

    def _storage(self, s, path):
        """A storage's bytes as one storage entry (as torch.save, which stores storages as such)."""
        from .storage import TypedStorage
        typed = isinstance(s, TypedStorage)
        us = s._untyped_storage if typed else s
        if us._fake is not None:
            raise TypeError(f"ember.save cannot store the storage of a fake tensor (at {path})")
        key = (us.data_ptr(), us.nbytes(), str(us.device))
        index = self.storage_ids.get(key)
        if index is None:
            index = self.storage_ids[key] = len(self.storages)
            self.storages.append(np.asarray(_host(us._buf)).tobytes())
            self.keep.append(us)
        return {"t": "storage", "id": index, "dtype": s.dtype.name if typed else None, "device": str(us.device)}


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save ``obj`` to a path or binary file in PyTorch's zip checkpoint format (``torch.load``
    reads it, with ``weights_only=True`` for state_dicts). What that format cannot hold (nested,
    quantized, meta tensors) is saved in ember's JSON format instead, which ``ember.load`` reads.
    ``_use_new_zipfile_serialization=False`` writes ember's JSON format (never a pickle)."""
    if pickle_module is not None:
        raise TypeError("ember.save writes pickles with its own pickler; pickle_module is not supported")
    if _use_new_zipfile_serialization:
        from . import _torch_pickle
        buf = io.BytesIO()
        try:
            name = "archive"
            if isinstance(f, (str, os.PathLike)):
                name = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
            _torch_pickle.write_zip(buf, obj, archive_name=name, protocol=2 if pickle_protocol is None
                                    else pickle_protocol, byteorder_record=not _disable_byteorder_record)
        except NotImplementedError:
            buf = None      # torch's format cannot hold it: ember's own format below
        if buf is not None:
            if isinstance(f, (str, os.PathLike)):
                with open(f, "wb") as fh:
                    fh.write(buf.getvalue())
            else:
                f.write(buf.getvalue())
            return
    w = _Writer()
    root = w.encode(obj)
    manifest = {"format": _MAGIC, "version": FORMAT_VERSION, "byteorder": "little", "root": root,
                "storages": len(w.storages)}
    data = json.dumps(manifest, separators=(",", ":")).encode("utf-8")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            _write_zip(fh, data, w.storages)
    else:
        _write_zip(f, data, w.storages)


def _write_zip(fh, manifest, storages):
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(_MANIFEST, manifest)
        for i, raw in enumerate(storages):
            z.writestr(f"storages/{i}", raw)


# ---------------------------------------------------------------------- decoding
def _np_dtype(name):
    dt = _t.as_dtype(getattr(__import__("ember"), name))
    return np.dtype(dt.np)


class _Reader:
    def __init__(self, z, map_location):
        self.z = z
        self.map_location = map_location
        self.tensors = {}
        self.storages = {}    # entry -> UntypedStorage (a storage saved twice loads as one object)

    def decode(self, node):
        t = node["t"]
        if t == "none":
            return None
        if t == "bool":
            return bool(node["v"])
        if t == "int":
            return int(node["v"])
        if t == "float":
            return float(node["s"]) if "s" in node else float(node["v"])
        if t == "str":
            return str(node["v"])
        if t == "dtype":
            import ember
            return getattr(ember, node["v"])
        if t == "device":
            return _t.device(node["v"])
        if t == "size":
            return _t.Size(node["v"])
        if t == "list":
            return [self.decode(v) for v in node["items"]]
        if t == "tuple":
            return tuple(self.decode(v) for v in node["items"])
        if t == "dict":
            cls = OrderedDict if node.get("ordered") else dict
            out = cls((self.decode(k), self.decode(v)) for k, v in node["items"])
            if "metadata" in node:
                meta = self.decode(node["metadata"])
                if cls is dict:
                    out = OrderedDict(out)
                out._metadata = meta
            return out
        if t == "ref":
            return self.tensors[node["v"]]
        if t == "tensor":
            return self._tensor(node)
        if t == "storage":
            return self._storage(node)
        if t == "nested":       # a nested tensor (ember/nested/_serial.py)
            from .nested._serial import from_node
            return from_node(self, node)
        raise RuntimeError(f"ember.load: unknown node type {t!r} in the manifest (file corrupt or from a newer "
                           "ember)")

    def _location(self, saved):
        ml = self.map_location
        if ml is None:
            return saved
        if isinstance(ml, (str, _t.device)):
            return str(ml)
        if isinstance(ml, dict):
            return str(ml.get(saved, saved))
        if callable(ml):
            return None  # applied to the tensor afterwards
        raise TypeError(f"ember.load: map_location must be None, a str, a device, a dict or a callable, got "
                        f"{type(ml).__name__}")

    def _storage(self, node):
        from .storage import TypedStorage, UntypedStorage
        us = self.storages.get(node["id"])
        if us is None:
            raw = self.z.read(f"storages/{node['id']}")
            us = UntypedStorage._wrap(np.frombuffer(raw, dtype=np.uint8).copy(), _t.cpu)
            loc = self._location(node["device"])
            if callable(self.map_location) and not isinstance(self.map_location, (str, dict, _t.device)):
                res = self.map_location(us, node["device"])
                us = us if res is None else res
            elif loc is not None and loc != "cpu":
                dev = _t.device(loc)
                if dev.type == "cuda":
                    import ember
                    if not ember.cuda.is_available():
                        raise RuntimeError("Attempting to deserialize object on a CUDA device but "
                                           "ember.cuda.is_available() is False. If you are running on a CPU-only "
                                           "machine, please use ember.load with map_location='cpu' to map your "
                                           "storages to the CPU.")
                us = us.to(device=dev)
            self.storages[node["id"]] = us
        if node.get("dtype") is None:
            return us
        return TypedStorage(wrap_storage=us, dtype=_t.as_dtype(node["dtype"]), _internal=True)

    def _tensor(self, node):
        import ember
        if node["device"] == "meta":
            t = ember.empty(node["shape"], dtype=getattr(ember, node["dtype"]), device="meta")
            return self._finish_tensor(node, t)
        raw = self.z.read(f"storages/{node['id']}")
        name = node["dtype"]
        np_dt = _np_dtype(name)
        arr = np.frombuffer(raw, dtype=np_dt.newbyteorder("<")).astype(np_dt, copy=True).reshape(node["shape"])
        dtype = getattr(ember, name)
        loc = self._location(node["device"])
        if "quant" in node:     # a quantized tensor (ember/_quantized/serial.py)
            from ._quantized.serial import from_saved
            t = from_saved(arr, name, node["quant"])
        else:
            t = ember.tensor(arr, dtype=dtype)
        if loc is not None and loc != "cpu":
            dev = _t.device(loc)
            if dev.type == "cuda" and not ember.cuda.is_available():
                raise RuntimeError("Attempting to deserialize object on a CUDA device but ember.cuda.is_available() "
                                   "is False. If you are running on a CPU-only machine, please use ember.load with "
                                   "map_location='cpu' to map your storages to the CPU.")
            t = t.to(dev)
        if callable(self.map_location) and not isinstance(self.map_location, (str, dict, _t.device)):
            res = self.map_location(t, node["device"])
            if res is not None:
                t = res
        return self._finish_tensor(node, t)

    def _finish_tensor(self, node, t):
        if node.get("parameter"):
            t = Parameter(t, requires_grad=node.get("requires_grad", True))
        elif node.get("requires_grad"):
            t.requires_grad_(True)
        self.tensors[node["id"]] = t
        return t


def _looks_like_pickle(head):
    return len(head) >= 2 and head[0] == 0x80 and head[1] <= 5


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """Load a ``torch.save`` zip checkpoint, an ``ember.save`` file (either format) or ember's old
    JSON format. ``weights_only=True`` (the default) unpickles with an allowlist of globals
    (tensors, Parameters, storages, containers, dtypes, Size, device): any other global raises
    ``pickle.UnpicklingError`` and no code in the file runs. ``weights_only=False`` resolves every
    global: UNSAFE, only for files you trust (as ``torch.load``)."""
    if pickle_module is not None:
        raise TypeError("ember.load uses its own unpickler; pickle_module is not supported")
    if weights_only is None:
        weights_only = True
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if _looks_like_pickle(data[:2]):     # torch's legacy (non-zip) format
        from . import _torch_pickle
        return _torch_pickle.load_legacy(io.BytesIO(data), map_location=map_location, weights_only=weights_only)
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RuntimeError("ember.load: not an ember.save / torch.save file (not a zip archive)") from None
    with z:
        names = z.namelist()
        if _MANIFEST not in names:
            if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
                from . import _torch_pickle
                return _torch_pickle.load_zip(z, map_location=map_location, weights_only=weights_only)
            raise RuntimeError("ember.load: not an ember.save / torch.save file (no ember_manifest.json or "
                               "data.pkl)")
        manifest = json.loads(z.read(_MANIFEST).decode("utf-8"))
        if manifest.get("format") != _MAGIC:
            raise RuntimeError("ember.load: not an ember.save file (bad manifest)")
        if manifest.get("version", 0) > FORMAT_VERSION:
            raise RuntimeError(f"ember.load: the file uses format version {manifest['version']}, newer than this "
                               f"ember understands ({FORMAT_VERSION})")
        return _Reader(z, map_location).decode(manifest["root"])


# ---------------------------------------------------------------------- the weights-only allowlist
def add_safe_globals(safe_globals):
    """Allow these classes/functions in ``ember.load(weights_only=True)`` of torch-format files
    (torch's ``add_safe_globals``): each an object, or ``(object, "module.name")`` when the name in the
    file differs from the object's own. Only for objects you trust: unpickling calls them."""
    from . import _torch_pickle
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals expects a list of objects, got {type(safe_globals).__name__}")
    _torch_pickle.add_user_globals(list(safe_globals))


def get_safe_globals():
    """The objects added by :func:`add_safe_globals` (in the order given)."""
    from . import _torch_pickle
    return list(_torch_pickle._user_globals_list)


def clear_safe_globals():
    """Forget every object added by :func:`add_safe_globals`."""
    from . import _torch_pickle
    _torch_pickle._user_globals.clear()
    _torch_pickle._user_globals_list.clear()


class safe_globals:
    """``with ember.serialization.safe_globals([Foo]):`` -- :func:`add_safe_globals` for the block only."""

    def __init__(self, safe_globals):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        from . import _torch_pickle
        self._saved = (dict(_torch_pickle._user_globals), list(_torch_pickle._user_globals_list))
        add_safe_globals(self.safe_globals)
        return self

    def __exit__(self, *exc):
        from . import _torch_pickle
        _torch_pickle._user_globals.clear()
        _torch_pickle._user_globals.update(self._saved[0])
        _torch_pickle._user_globals_list[:] = self._saved[1]
        return False


def get_unsafe_globals_in_checkpoint(f):
    """The ``module.name`` globals a torch-format checkpoint names that ``weights_only=True`` would
    refuse (defaults and :func:`add_safe_globals` considered), found without unpickling it."""
    from . import _torch_pickle
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return get_unsafe_globals_in_checkpoint(fh)
    pos = f.tell() if hasattr(f, "tell") else None
    try:
        if not zipfile.is_zipfile(f):
            raise ValueError("get_unsafe_globals_in_checkpoint: expected a torch.save zip archive")
        if pos is not None:
            f.seek(pos)
        with zipfile.ZipFile(f) as z:
            names = [n for n in z.namelist() if n.endswith("data.pkl")]
            if not names:
                raise ValueError("get_unsafe_globals_in_checkpoint: the archive has no data.pkl "
                                 "(an ember JSON-format file holds no pickle)")
            return _torch_pickle.unsafe_globals_in(z.read(names[0]))
    finally:
        if pos is not None:
            f.seek(pos)
