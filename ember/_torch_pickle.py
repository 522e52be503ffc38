"""PyTorch's checkpoint format (``torch.save``'s zip archive) read and written without torch.

An archive ``<name>/`` holds ``data.pkl`` (a pickle of the saved object), ``data/<key>`` (each
storage's raw bytes), ``byteorder`` ("little"/"big"), ``version`` and ``.format_version``. In the
pickle a tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
backward_hooks)`` and a storage is a persistent id ``('storage', torch.<Legacy>Storage, key,
location, numel)``; a Parameter is ``torch._utils._rebuild_parameter(tensor, requires_grad,
hooks)``.

Reading (``weights_only=True``, the default) uses a restricted unpickler: only the globals listed
in ``_SAFE`` resolve (onto ember's own objects); any other global raises
``pickle.UnpicklingError("Weights only load failed ...")`` naming it, so no code in the file
runs. ``weights_only=False`` maps the same torch names onto ember and resolves every other global
normally -- as unsafe as ``torch.load(weights_only=False)``: only load files you trust.

Writing needs no torch: the pickler emits the GLOBAL opcodes for torch's names itself
(``_Global`` stand-ins), so ``torch.load(f, weights_only=True)`` reads ember's files.
"""
from __future__ import annotations

import codecs
import io
import pickle
import sys
import weakref
from collections import Counter, OrderedDict

import numpy as np

from . import types as _t

_TORCH_PREFIXES = ("torch.", "torch")


def _dtypes():
    import ember
    out = {}
    for n in dir(ember):
        d = getattr(ember, n, None)
        if isinstance(d, _t.dtype):
            out[d.name] = d
    return out


def _storage_dtype_map():
    """'FloatStorage' -> ember.float32, ... (the legacy storage classes torch pickles)."""
    out = {}
    for d in _dtypes().values():
        out.setdefault(f"{d.legacy_name}Storage", d)
    return out


class _StorageType:
    """What ``torch.FloatStorage`` etc. resolve to while loading: the dtype of that storage."""

    def __init__(self, dtype, untyped=False):
        self.dtype = dtype
        self.untyped = untyped


# ---------------------------------------------------------------------- rebuild functions
def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    import ember
    from .storage import TypedStorage
    dtype = storage.dtype if isinstance(storage, TypedStorage) else ember.uint8
    us = storage._untyped_storage if isinstance(storage, TypedStorage) else storage
    t = ember.empty(0, dtype=dtype, device=us.device)
    t.set_(us, int(storage_offset), tuple(int(s) for s in size), tuple(int(s) for s in stride))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    from .tensor import Parameter
    return Parameter(data, requires_grad=requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    p = _rebuild_parameter(data, requires_grad)
    for k, v in (state or {}).items():
        setattr(p, k, v)
    return p


def _rebuild_from_type_v2(func, new_type, args, state):
    from .tensor import Parameter, Tensor
    ret = func(*args)
    if new_type is not Tensor and not isinstance(ret, new_type):
        if new_type is Parameter:
            ret = Parameter(ret, requires_grad=ret.requires_grad)
        else:
            ret = ret.as_subclass(new_type)
    if state:
        for k, v in state.items():
            setattr(ret, k, v)
    return ret


def _safe_globals():
    import ember
    from .tensor import Parameter, Tensor
    from .storage import UntypedStorage
    rc = {
        ("collections", "OrderedDict"): OrderedDict,
        ("collections", "Counter"): Counter,
        ("torch.nn.parameter", "Parameter"): Parameter,
        ("torch", "Size"): _t.Size,
        ("torch", "Tensor"): Tensor,
        ("torch._tensor", "Tensor"): Tensor,
        ("torch", "device"): _t.device,
        ("_codecs", "encode"): codecs.encode,
        ("builtins", "bytearray"): bytearray,
        ("builtins", "set"): set,
        ("builtins", "complex"): complex,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
        ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
        ("torch", "UntypedStorage"): _StorageType(ember.uint8, untyped=True),
        ("torch.storage", "UntypedStorage"): _StorageType(ember.uint8, untyped=True),
    }
    for name, d in _dtypes().items():
        rc[("torch", name)] = d
    for sname, d in _storage_dtype_map().items():
        rc[("torch", sname)] = _StorageType(d)
    del UntypedStorage
    return rc


_UNSAFE_MESSAGE = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, do those steps "
    "only if you trust the source of the checkpoint. \n\t(1) Re-running `ember.load` with `weights_only` set to "
    "`False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got the file "
    "from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check the recommended "
    "steps in the following error message.\n\tWeightsUnpickler error: ")

# ``ember.serialization.add_safe_globals`` / ``safe_globals``: what the user allows beyond the
# defaults, as ``(module, name) -> object``; ``_user_globals_list`` keeps the objects in the order given
_user_globals = {}
_user_globals_list = []


def _global_name(entry):
    """``obj`` or ``(obj, "module.name")`` (torch's two spellings) -> ((module, name), obj)."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str) or "." not in entry[1]:
            raise ValueError(f"safe globals: expected an object or (object, 'module.name'), got {entry!r}")
        obj, full = entry
        module, _, name = full.rpartition(".")
        return (module, name), obj
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if module is None or name is None:
        raise ValueError(f"safe globals: {entry!r} has no __module__/__qualname__; pass (obj, 'module.name')")
    return (module, name), entry


def add_user_globals(entries):
    for e in entries:
        key, obj = _global_name(e)
        _user_globals[key] = obj
        _user_globals_list.append(e)


def _unsupported(module, name):
    return pickle.UnpicklingError(
        f"{_UNSAFE_MESSAGE}Unsupported global: GLOBAL {module}.{name} was not an allowed global by default. "
        f"Please use `ember.serialization.add_safe_globals([{module}.{name}])` or the "
        f"`ember.serialization.safe_globals([{module}.{name}])` context manager to allowlist this global if you "
        f"trust this class/function.")


# ---------------------------------------------------------------------- reading
class _Loader:
    def __init__(self, read_record, byteorder, map_location):
        self.read_record = read_record
        self.byteorder = byteorder
        self.map_location = map_location
        self.storages = {}
        self.legacy = {}

    def legacy_storage(self, pid):
        """torch's legacy (non-zip) format: ('storage', type, root_key, location, numel, view); the
        bytes follow the pickles, filled in by ``load_legacy``."""
        from .storage import TypedStorage, UntypedStorage
        _, stype, key, location, numel, view = pid
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"{_UNSAFE_MESSAGE}persistent id storage type {stype!r} is not a storage")
        if view is not None:
            raise NotImplementedError("ember.load: storage views of torch's legacy checkpoint format are not "
                                      "supported")
        us = self.storages.get(key)
        if us is None:
            raw = np.zeros(int(numel) * stype.dtype.itemsize, dtype=np.uint8)
            us = UntypedStorage._wrap(raw, _t.cpu)
            self.legacy[key] = (raw, stype.dtype)
            us = self._place(us, str(location))
            self.storages[key] = us
        return us if stype.untyped else TypedStorage(wrap_storage=us, dtype=stype.dtype, _internal=True)

    def storage(self, pid):
        from .storage import TypedStorage, UntypedStorage
        if isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage":
            return self.legacy_storage(pid)
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
            raise pickle.UnpicklingError(f"{_UNSAFE_MESSAGE}Unknown persistent id {pid!r}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"{_UNSAFE_MESSAGE}persistent id storage type {stype!r} is not a storage")
        us = self.storages.get(key)
        if us is None:
            raw = np.frombuffer(self.read_record(f"data/{key}"), dtype=np.uint8).copy()
            if self.byteorder == "big" and stype.dtype.itemsize > 1 and not stype.untyped:
                np_dt = np.dtype(stype.dtype.np)
                raw = raw.view(np_dt.newbyteorder(">")).astype(np_dt).view(np.uint8)
            us = UntypedStorage._wrap(raw, _t.cpu)
            us = self._place(us, str(location))
            self.storages[key] = us
        if stype.untyped:
            return us
        return TypedStorage(wrap_storage=us, dtype=stype.dtype, _internal=True)

    def _place(self, us, location):
        ml = self.map_location
        target = location
        if ml is not None:
            if isinstance(ml, (str, _t.device)):
                target = str(ml)
            elif isinstance(ml, dict):
                target = str(ml.get(location, location))
            elif callable(ml):
                res = ml(us, location)
                return us if res is None else res
            else:
                raise TypeError(f"ember.load: map_location must be None, a str, a device, a dict or a callable, "
                                f"got {type(ml).__name__}")
        dev = _t.device(target)
        if dev.type == "cpu":
            return us
        if dev.type == "cuda":
            import ember
            if not ember.cuda.is_available():
                raise RuntimeError("Attempting to deserialize object on a CUDA device but ember.cuda.is_available() "
                                   "is False. If you are running on a CPU-only machine, please use ember.load with "
                                   "map_location=ember.device('cpu') to map your storages to the CPU.")
        return us.to(device=dev)


_PY2_MODULES = ("__builtin__", "copy_reg", "exceptions")


def _py2_names(up, module, name):
    """Protocol < 3 pickles name Python 2 modules (``__builtin__.set``): map them as pickle does."""
    if module in _PY2_MODULES:
        import _compat_pickle
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
    return module, name


class _RestrictedUnpickler(pickle.Unpickler):
    """weights_only=True: only the default allowlist (``_safe_globals``) and the user's
    ``add_safe_globals`` resolve; storages come through the loader's persistent ids."""

    def __init__(self, f, loader, safe):
        super().__init__(f, encoding="utf-8")
        self._loader = loader
        self._safe = safe

    def find_class(self, module, name):
        module, name = _py2_names(self, module, name)
        obj = self._safe.get((module, name))
        if obj is None:
            obj = _user_globals.get((module, name))
        if obj is None:
            obj = self._unlisted(module, name)
        return obj

    def _unlisted(self, module, name):
        raise _unsupported(module, name)

    def persistent_load(self, pid):
        return self._loader.storage(pid)


class _FullUnpickler(_RestrictedUnpickler):
    """weights_only=False: torch's names map onto ember, everything else resolves normally (UNSAFE)."""

    def _unlisted(self, module, name):
        if module == "torch" or module.startswith("torch."):
            import importlib
            emod = "ember" + module[len("torch"):]
            try:
                return getattr(importlib.import_module(emod), name)
            except (ImportError, AttributeError):
                pass
        return pickle.Unpickler.find_class(self, module, name)


def load_zip(z, map_location=None, weights_only=True):
    """Load torch's zip checkpoint from an open ``zipfile.ZipFile``."""
    names = z.namelist()
    pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
    if not pkl:
        raise RuntimeError("ember.load: the zip archive has no data.pkl record (not a torch.save file)")
    pkl = min(pkl, key=len)
    prefix = pkl[: -len("data.pkl")]

    def read_record(rel):
        return z.read(prefix + rel)

    byteorder = "little"
    if prefix + "byteorder" in names:
        byteorder = read_record("byteorder").decode("ascii").strip()
        if byteorder not in ("little", "big"):
            raise ValueError("Unknown endianness type: " + byteorder)
    loader = _Loader(read_record, byteorder, map_location)
    cls = _RestrictedUnpickler if weights_only else _FullUnpickler
    return cls(io.BytesIO(read_record("data.pkl")), loader, _safe_globals()).load()


def load_legacy(f, map_location=None, weights_only=True):
    """torch's legacy format (``_use_new_zipfile_serialization=False``): pickles of the magic
    number, protocol version and sys info, the object, the storage keys; then each storage as an
    int64 element count and its raw bytes."""
    loader = _Loader(None, sys.byteorder, map_location)
    safe = _safe_globals()
    head = [_RestrictedUnpickler(f, loader, safe).load()]
    if type(head[0]) is not int or head[0] != 0x1950A86A20F9469CFC6C:
        raise RuntimeError("Invalid magic number; corrupt file?")
    head += [_RestrictedUnpickler(f, loader, safe).load() for _ in range(2)]
    if head[1] != 1001:
        raise RuntimeError(f"Invalid protocol version: {head[1]}")
    little = head[2].get("little_endian", True) if isinstance(head[2], dict) else True
    cls = _RestrictedUnpickler if weights_only else _FullUnpickler
    result = cls(f, loader, safe).load()
    keys = _RestrictedUnpickler(f, loader, safe).load()
    for key in keys:
        raw, dtype = loader.legacy[key]
        n = int.from_bytes(f.read(8), "little" if little else "big")
        data = f.read(n * dtype.itemsize)
        if len(data) != raw.size:
            raise RuntimeError("ember.load: truncated legacy torch checkpoint")
        arr = np.frombuffer(data, dtype=np.uint8)
        if not little and dtype.itemsize > 1:
            np_dt = np.dtype(dtype.np)
            arr = arr.view(np_dt.newbyteorder(">")).astype(np_dt).view(np.uint8)
        raw[:] = arr
    return result


# ---------------------------------------------------------------------- writing
class _Global:
    """Pickles as ``GLOBAL module name`` without importing it (torch need not be installed)."""

    __slots__ = ("module", "name", "__weakref__")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __call__(self, *args, **kwargs):     # (pickle's save_reduce wants a callable; never called)
        raise RuntimeError(f"{self.module}.{self.name} is a pickling stand-in, not callable")


_GLOBALS = {}


def _g(module, name):
    key = (module, name)
    g = _GLOBALS.get(key)
    if g is None:
        g = _GLOBALS[key] = _Global(module, name)
    return g


class _TorchPickler(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, f, protocol=2):
        super().__init__(f, protocol=protocol)
        self.storages = {}      # key -> bytes
        self.storage_keys = {}  # (data_ptr, nbytes) -> key
        self.storage_dtypes = {}
        self.keep = []

    def _save_global_direct(self, obj):
        g = obj if isinstance(obj, _Global) else _g("torch", obj.name)
        self.write(pickle.GLOBAL + g.module.encode("utf-8") + b"\n" + g.name.encode("utf-8") + b"\n")
        self.memoize(obj)

    dispatch[_Global] = _save_global_direct
    dispatch[_t.dtype] = _save_global_direct

    def persistent_id(self, obj):
        from .storage import TypedStorage, UntypedStorage
        if isinstance(obj, TypedStorage):
            us, dtype = obj._untyped_storage, obj.dtype
            stype, numel = _g("torch", f"{dtype.legacy_name}Storage"), us.nbytes() // dtype.itemsize
        elif isinstance(obj, UntypedStorage):
            import ember
            us, dtype = obj, ember.uint8
            stype, numel = _g("torch", "UntypedStorage"), us.nbytes()
        else:
            return None
        if us._fake is not None:
            raise NotImplementedError("ember.save in torch's format cannot store a fake/meta tensor's storage")
        if us.device.type != "cpu":
            raise NotImplementedError(f"ember.save in torch's format stores cpu storages only (got {us.device})")
        ident = (us.data_ptr(), us.nbytes())
        prev = self.storage_dtypes.get(ident[0])
        if prev is not None and prev is not dtype and us.nbytes() > 0:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different types")
        self.storage_dtypes[ident[0]] = dtype
        key = self.storage_keys.get(ident)
        if key is None:
            key = self.storage_keys[ident] = str(len(self.storage_keys))
            self.storages[key] = np.asarray(_host_buf(us)).tobytes()
            self.keep.append(us)
        return ("storage", stype, key, "cpu", numel)

    def reducer_override(self, obj):
        from .tensor import Parameter, Tensor
        if isinstance(obj, Tensor):
            if isinstance(obj, Parameter):
                plain = obj.detach()
                self.keep.append(plain)
                return (_g("torch._utils", "_rebuild_parameter"),
                        (plain, bool(obj.requires_grad), OrderedDict()))
            if type(obj) is not Tensor:
                raise NotImplementedError(f"ember.save in torch's format: tensor subclass {type(obj).__name__} "
                                          "is not supported")
            return self._tensor(obj)
        if isinstance(obj, _t.Size):
            return (_g("torch", "Size"), (tuple(int(s) for s in obj),))
        if isinstance(obj, _t.device):
            return (_g("torch", "device"), (str(obj),))
        return NotImplemented

    def _tensor(self, t):
        if getattr(t, "is_nested", False) or t.is_quantized or t._fake:
            raise NotImplementedError("ember.save in torch's format: nested, quantized and fake/meta tensors are "
                                      "not supported")
        if t.device.type != "cpu":
            raise NotImplementedError(f"ember.save in torch's format stores cpu tensors only (got {t.device})")
        if t.is_sparse if isinstance(getattr(t, "is_sparse", False), bool) else False:
            raise NotImplementedError("ember.save in torch's format: sparse tensors are not supported")
        stride = t.stride()
        if any(s < 0 for s in stride):
            t = t.contiguous()
            stride = t.stride()
        self.keep.append(t)
        return (_g("torch._utils", "_rebuild_tensor_v2"),
                (t._typed_storage(), t.storage_offset(), tuple(int(s) for s in t.shape), tuple(stride),
                 bool(t.requires_grad), OrderedDict()))


def _host_buf(us):
    from .tensor import _host
    return _host(us._buf)


def dumps_archive(obj, protocol=2):
    """(data.pkl bytes, {key: raw bytes}) for ``obj`` in torch's format."""
    buf = io.BytesIO()
    p = _TorchPickler(buf, protocol=protocol)
    p.dump(obj)
    return buf.getvalue(), p.storages


def write_zip(fh, obj, archive_name="archive", protocol=2, byteorder_record=True):
    import zipfile
    data, storages = dumps_archive(obj, protocol)
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(f"{archive_name}/data.pkl", data)
        z.writestr(f"{archive_name}/.format_version", "1")
        z.writestr(f"{archive_name}/.storage_alignment", "64")
        if byteorder_record:
            z.writestr(f"{archive_name}/byteorder", sys.byteorder)
        for key, raw in storages.items():
            z.writestr(f"{archive_name}/data/{key}", raw)
        z.writestr(f"{archive_name}/version", "3\n")


# ---------------------------------------------------------------------- plain pickle of ember tensors
_BLOBS = weakref.WeakValueDictionary()


class _StorageBlob:
    """One object per live storage, so tensors sharing a storage pickle it once (pickle's memo is
    by object identity and ``untyped_storage()`` returns a fresh wrapper every call)."""

    __slots__ = ("us", "__weakref__")

    def __init__(self, us):
        self.us = us

    def __reduce__(self):
        return (_storage_from_bytes, (np.asarray(_host_buf(self.us)).tobytes(), str(self.us.device)))


def _blob_of(us):
    key = (us.data_ptr(), us.nbytes(), str(us.device))
    b = _BLOBS.get(key)
    if b is None:
        b = _StorageBlob(us)
        _BLOBS[key] = b
    return b


def _storage_from_bytes(raw, device="cpu"):
    from .storage import UntypedStorage
    us = UntypedStorage._wrap(np.frombuffer(raw, dtype=np.uint8).copy(), _t.cpu)
    if device != "cpu":
        us = us.to(device=_t.device(device))
    return us


def _typed_storage_from(us, dtype):
    from .storage import TypedStorage
    return TypedStorage(wrap_storage=us, dtype=dtype, _internal=True)


def reduce_tensor(t):
    """``Tensor.__reduce_ex__``: storage (shared within one pickle), offset, size, stride, dtype,
    requires_grad, and the class (Parameter stays a Parameter) and instance attributes."""
    from .tensor import Tensor
    if getattr(t, "is_nested", False) or t.is_quantized or t._fake:
        raise NotImplementedError("pickling nested, quantized or fake/meta ember tensors is not supported; "
                                  "use ember.save")
    src = t.detach()
    stride = src.stride()
    if any(s < 0 for s in stride):
        src = src.contiguous()
        stride = src.stride()
    blob = _blob_of(src.untyped_storage())
    state = {k: v for k, v in t.__dict__.items() if not k.startswith("_") and k not in ("dtype", "device")}
    return (_rebuild_ember_tensor,
            (type(t), blob, src.storage_offset(), tuple(int(s) for s in src.shape), tuple(stride), t.dtype,
             bool(t.requires_grad), state or None))


def _rebuild_ember_tensor(cls, us, offset, size, stride, dtype, requires_grad, state=None):
    import ember
    from .tensor import Parameter, Tensor
    if isinstance(us, _StorageBlob):     # copy.copy (reduce without pickling): share the storage
        us = us.us
    t = ember.empty(0, dtype=dtype, device=us.device)
    t.set_(us, offset, size, stride)
    if cls is Parameter or (isinstance(cls, type) and issubclass(cls, Parameter)):
        t = Parameter(t, requires_grad=requires_grad) if cls is Parameter else cls(t, requires_grad=requires_grad)
    else:
        if requires_grad:
            t.requires_grad_(True)
        if cls is not Tensor:
            t = t.as_subclass(cls)
    if state:
        for k, v in state.items():
            setattr(t, k, v)
    return t


def reduce_storage(s):
    from .storage import TypedStorage
    if isinstance(s, TypedStorage):
        return (_typed_storage_from, (s._untyped_storage, s.dtype))
    if s._fake is not None:
        raise NotImplementedError("pickling the storage of a fake ember tensor is not supported")
    return (_storage_from_bytes, (np.asarray(_host_buf(s)).tobytes(), str(s.device)))


_STRING_OPS = frozenset(("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                         "BINSTRING", "STRING"))


def unsafe_globals_in(data_pkl: bytes):
    """The ``module.name`` globals a pickle names that the weights-only loader would refuse (torch's
    ``get_unsafe_globals_in_checkpoint``), read from its opcodes without running it. ``STACK_GLOBAL``
    takes its module and name from the two strings pushed last (directly or from the memo)."""
    import pickletools
    safe = _safe_globals()
    found, pushed, memo = [], [], {}
    for op, arg, _ in pickletools.genops(data_pkl):
        name = op.name
        if name in _STRING_OPS:
            pushed.append(arg)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(arg))
        elif name == "GLOBAL":
            found.append(tuple(arg.split(" ", 1)))
        elif name == "STACK_GLOBAL" and len(pushed) >= 2 and all(isinstance(v, str) for v in pushed[-2:]):
            found.append((pushed[-2], pushed[-1]))
        else:
            pushed.append(None)      # anything else on the stack: not a string a later STACK_GLOBAL reads
    out = []
    for module, name in found:
        module, name = _py2_names(None, module, name)
        key = (module, name)
        if key not in safe and key not in _user_globals and f"{module}.{name}" not in out:
            out.append(f"{module}.{name}")
    return out
