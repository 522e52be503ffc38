"""The cuda device, backed by cupy (written against cupy 14's API).

A cuda tensor's data is a ``cupy.ndarray``; every op runs the same kernel as on
the CPU with ``xp = cupy`` (``ember.ops.registry.xp_of``), so matmul is
``cupy.matmul`` (cuBLAS) and elementwise/reduction ops are cupy's kernels.
Launches are asynchronous on cupy's *current stream*, as PyTorch's are on its
current stream: reading a value on the host (``.item()``, ``.cpu()``,
``.tolist()``, printing) synchronises through cupy's device -> host copy;
``ember.cuda.synchronize()`` waits for all work of the device.

Without cupy (or without a GPU) nothing here is imported until a tensor asks
for ``device='cuda'``, which then fails with an error saying what is missing;
importing ember and using the CPU stay unaffected.
"""
from __future__ import annotations

import contextlib

_cupy = None
_error = None


def _load():
    global _cupy, _error
    if _cupy is not None or _error is not None:
        return
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            raise RuntimeError("the CUDA driver reports no GPU")
        _cupy = cupy
    except Exception as e:  # ImportError, CUDARuntimeError (no driver / no device), ...
        _error = e


def _reset():
    """Forget what :func:`_load` found (and the array modules cached per device):
    the next cuda request imports cupy again. For tests that install a cupy
    stand-in and for a process that installs cupy after importing ember."""
    global _cupy, _error
    _cupy = None
    _error = None
    from ..ops import registry
    for dev in [d for d in registry._XP if d.type == "cuda"]:
        del registry._XP[dev]


def _missing_message():
    if isinstance(_error, ImportError):
        what = "cupy is not installed (pip install 'ember[cuda]', or cupy-cuda12x / cupy-cuda13x)"
    else:
        what = f"cupy is installed but no usable NVIDIA GPU was found ({type(_error).__name__}: {_error})"
    return f"ember: device='cuda' needs cupy and an NVIDIA GPU with a working driver; {what}"


def is_available() -> bool:
    _load()
    return _cupy is not None


def cupy_module(dev=None):
    """cupy, after making ``dev``'s GPU current; a clear error when it cannot be used."""
    _load()
    if _cupy is None:
        raise RuntimeError(_missing_message()) from _error
    if dev is not None and getattr(dev, "index", None) is not None:
        _cupy.cuda.Device(dev.index).use()
    return _cupy


def device_count() -> int:
    _load()
    if _cupy is None:
        return 0
    try:
        return int(_cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        from .. import types as _t
        device = _t.as_device(device)
    idx = getattr(device, "index", None)
    return current_device() if idx is None else int(idx)


def current_device() -> int:
    return int(cupy_module().cuda.Device().id)


def set_device(device):
    cupy_module().cuda.Device(_index(device)).use()


@contextlib.contextmanager
def device(dev):
    """``with ember.cuda.device(i):`` -- cupy's current device inside."""
    with cupy_module().cuda.Device(_index(dev)):
        yield


def get_device_name(device=None) -> str:
    props = cupy_module().cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None):
    cc = str(cupy_module().cuda.Device(_index(device)).compute_capability)
    return int(cc[:-1]), int(cc[-1])


def synchronize(device=None):
    """Wait for all work queued on the device, on every stream (``cudaDeviceSynchronize``)."""
    cupy_module().cuda.Device(_index(device)).synchronize()


# ----------------------------------------------------------------------- memory
def memory_allocated(device=None) -> int:
    """Bytes held by live cuda tensors (cupy's default pool: ``used_bytes()``)."""
    return int(cupy_module().get_default_memory_pool().used_bytes())


def memory_reserved(device=None) -> int:
    """Bytes the pool holds from the driver: live plus cached free blocks (``total_bytes()``)."""
    return int(cupy_module().get_default_memory_pool().total_bytes())


def max_memory_allocated(device=None) -> int:
    """An upper bound of the peak of :func:`memory_allocated` since the last
    :func:`empty_cache`: cupy's pool keeps no peak counter, but it keeps freed
    blocks reserved until ``free_all_blocks``, so the reserved bytes are at least
    the peak (they can exceed it by rounding and fragmentation)."""
    return memory_reserved(device)


def empty_cache():
    cupy_module().get_default_memory_pool().free_all_blocks()


# ----------------------------------------------------------------------- streams and events
class Stream:
    """A CUDA stream (PyTorch's ``torch.cuda.Stream`` surface over ``cupy.cuda.Stream``).
    ``with ember.cuda.stream(s):`` (or ``with s:``) makes it cupy's current stream,
    so ember's kernels, cupy's and the Triton launches all go there."""

    def __init__(self, device=None, priority=0, *, _cupy_stream=None):
        cp = cupy_module()
        if _cupy_stream is None:
            with cp.cuda.Device(_index(device)):
                _cupy_stream = cp.cuda.Stream(non_blocking=False)
        self._cs = _cupy_stream

    @property
    def cuda_stream(self) -> int:
        return int(self._cs.ptr)

    def synchronize(self):
        self._cs.synchronize()

    def query(self) -> bool:
        return bool(self._cs.done)

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        self._cs.wait_event(event._ev)

    def wait_stream(self, stream):
        self._cs.wait_event(stream._cs.record())

    def __enter__(self):
        self._cs.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cs.__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __repr__(self):
        return f"<ember.cuda.Stream cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (``torch.cuda.Event`` over ``cupy.cuda.Event``); ``record()``
    without a stream records on the *current* stream, as PyTorch does (cupy's
    default would be the null stream)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._ev = cupy_module().cuda.Event(block=blocking, disable_timing=not enable_timing,
                                            interprocess=interprocess)

    def record(self, stream=None):
        cs = (stream._cs if stream is not None else cupy_module().cuda.get_current_stream())
        self._ev.record(cs)

    def wait(self, stream=None):
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        return bool(self._ev.done)

    def synchronize(self):
        self._ev.synchronize()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, timing enabled)."""
        return float(cupy_module().cuda.get_elapsed_time(self._ev, end_event._ev))


def current_stream(device=None) -> Stream:
    cp = cupy_module()
    return Stream(_cupy_stream=cp.cuda.get_current_stream())


def default_stream(device=None) -> Stream:
    return Stream(_cupy_stream=cupy_module().cuda.Stream.null)


@contextlib.contextmanager
def stream(s):
    """``with ember.cuda.stream(s):`` -- ``s`` is the current stream inside (None: no change)."""
    if s is None:
        yield
        return
    with s:
        yield


def manual_seed(seed):
    """ember's random ops draw from ember's own generator on every device (see
    ``ember.manual_seed``): there is no separate cuda generator to seed."""


def manual_seed_all(seed):
    """See :func:`manual_seed`."""
