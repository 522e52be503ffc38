"""Top-level runtime settings that PyTorch scripts call at start-up (``torch.set_num_threads``,
``torch.set_float32_matmul_precision``, ``torch.use_deterministic_algorithms``, ...), with
PyTorch's names, return values and argument checks. What each one controls in ember is said in
its docstring; several are recorded and reported only, because ember on CPU has nothing to switch."""
from __future__ import annotations

import numbers
import warnings

__all__ = ["get_num_threads", "set_num_threads", "get_num_interop_threads", "set_num_interop_threads",
           "set_float32_matmul_precision", "get_float32_matmul_precision", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "set_deterministic_debug_mode", "get_deterministic_debug_mode", "set_default_device",
           "get_default_device", "set_warn_always", "is_warn_always_enabled", "set_flush_denormal",
           "is_anomaly_enabled", "set_anomaly_enabled", "is_anomaly_check_nan_enabled", "is_inference", "get_device"]

_state = {
    "interop_threads": None,        # None: not set (reported as the default below)
    "matmul_precision": "highest",
    "deterministic": False,
    "deterministic_warn_only": False,
    "warn_always": False,
}


def _check_int(name, n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise RuntimeError(f"{name} expects an int, but got {type(n).__name__}")
    if n <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return int(n)


# ---------------------------------------------------------------------- threads
def get_num_threads():
    """Threads ember's parallel CPU work uses: its OpenMP kernels (compiled graphs, native
    convolution and GEMM, the fused optimizer step) and, through them, OpenBLAS's matmul jobs.
    ``set_num_threads`` value, else ``OMP_NUM_THREADS``, else the cores this process may run on."""
    from ._openmp import num_threads
    return num_threads()


def set_num_threads(n):
    """Use ``n`` threads for ember's intra-op parallel work: sets ``ember.inductor.config.threads``,
    which the native convolution and GEMM kernels, the fused optimizer step and newly compiled
    kernels (their ``omp parallel num_threads(n)``) read at each call, and sets the thread count of
    every loaded OpenBLAS (numpy's matmul: its jobs per call) — unlike at import, this explicit call
    overrides ``OPENBLAS_NUM_THREADS``. Kernels compiled before the call keep the count they were
    compiled with."""
    n = _check_int("set_num_threads", n)
    from .inductor import config
    config.threads = n
    try:
        from ._blas_threads import openblas_libraries
        for _path, handle, _setter, nthreads in openblas_libraries():
            if hasattr(handle, nthreads):
                import ctypes
                fn = getattr(handle, nthreads)
                fn.argtypes, fn.restype = [ctypes.c_int], None
                fn(n)
    except Exception:  # noqa: BLE001 - no OpenBLAS control here: ember's own kernels still follow
        pass


def get_num_interop_threads():
    """Inter-op threads (recorded only: ember runs the ops of a graph one after another)."""
    n = _state["interop_threads"]
    return n if n is not None else get_num_threads()


def set_num_interop_threads(n):
    """Record the inter-op thread count (validated like PyTorch; ember has no inter-op pool)."""
    _state["interop_threads"] = _check_int("set_num_interop_threads", n)


# ---------------------------------------------------------------------- float32 matmul precision
_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision):
    """Record the float32 matmul precision ('highest', 'high' or 'medium'). ember always computes
    float32 matmuls in full float32 on CPU (as PyTorch does on CPUs without TF32/bf16 paths), so
    this only changes what ``get_float32_matmul_precision`` reports. An unknown string warns and is
    ignored, as in PyTorch."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _state["matmul_precision"]


# ---------------------------------------------------------------------- determinism
def use_deterministic_algorithms(mode, *, warn_only=False):
    """Record the deterministic-algorithms flag. ember's CPU kernels are deterministic already
    (fixed reduction orders; scatter with duplicate indices writes the last value), so there is no
    nondeterministic op to refuse or warn about."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _state["deterministic"] = mode
    _state["deterministic_warn_only"] = warn_only


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic_warn_only"]


def set_deterministic_debug_mode(debug_mode):
    """0 / 'default': off; 1 / 'warn': on, warn only; 2 / 'error': on."""
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, (str, numbers.Integral)):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = modes[debug_mode]
    if debug_mode == 0:
        use_deterministic_algorithms(False)
    elif debug_mode == 1:
        use_deterministic_algorithms(True, warn_only=True)
    elif debug_mode == 2:
        use_deterministic_algorithms(True)
    else:
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")


def get_deterministic_debug_mode():
    if are_deterministic_algorithms_enabled():
        return 1 if is_deterministic_algorithms_warn_only_enabled() else 2
    return 0


# ---------------------------------------------------------------------- default device
def set_default_device(device):
    """The device factories (``zeros``, ``tensor``, ``arange``, a module's parameters ...) use
    when not given one, for this thread, as torch's: ``'cpu'`` (``None`` resets to it),
    ``'meta'`` (shapes and dtypes only: how a large model is built without memory, then
    ``to_empty`` / ``load_state_dict(assign=True)``) or ``'cuda'``. ``from_numpy`` and copies of
    existing tensors keep their device."""
    from ._state import DEFAULT_DEVICE_SET, STATE
    from .types import cpu, device as _device
    if device is None:
        STATE.default_device = cpu
        return
    if not isinstance(device, (str, int, _device)):
        raise TypeError(f"set_default_device(): argument 'device' must be a device or a string, not "
                        f"{type(device).__name__}")
    STATE.default_device = d = _device(device)
    if d.type != "cpu":
        DEFAULT_DEVICE_SET[0] = True


def get_default_device():
    from ._state import STATE
    return STATE.default_device


# ---------------------------------------------------------------------- warnings / denormals
def set_warn_always(b):
    """Record whether warnings PyTorch issues only once should always be issued."""
    if not isinstance(b, bool):
        raise TypeError(f"_set_warnAlways(): argument 'arg0' (position 1) must be bool, not {type(b).__name__}")
    _state["warn_always"] = b


def is_warn_always_enabled():
    return _state["warn_always"]


def set_flush_denormal(mode):
    """Flushing denormals is not supported: ember's arithmetic runs in numpy and its compiled
    kernels, whose floating-point control state ember does not change. Returns ``False`` (PyTorch's
    answer on CPUs without flush-to-zero support; on x86 with SSE3 PyTorch returns ``True``)."""
    if not isinstance(mode, bool):
        raise TypeError(f"set_flush_denormal(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    return False


# ---------------------------------------------------------------------- autograd / tensor queries
def is_anomaly_enabled():
    from .autograd.anomaly_mode import is_anomaly_enabled as _e
    return _e()


def is_anomaly_check_nan_enabled():
    from ._state import STATE
    return bool(STATE.anomaly_check_nan)


def set_anomaly_enabled(enabled, check_nan=True):
    """Switch anomaly detection on or off (``ember.autograd.set_detect_anomaly``)."""
    from .autograd.anomaly_mode import set_detect_anomaly
    set_detect_anomaly(enabled, check_nan)


def _check_tensor(fn, t):
    from .tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not {type(t).__name__}")


def is_inference(input):
    """Whether ``input`` is an inference tensor (``Tensor.is_inference()`` where ember has it; ember's
    inference_mode does not mark tensors otherwise, so False)."""
    _check_tensor("is_inference", input)
    m = getattr(input, "is_inference", None)
    return bool(m()) if callable(m) else False


def get_device(input):
    """The device ordinal: -1 for CPU tensors (and the index of any other device)."""
    _check_tensor("get_device", input)
    dev = input.device
    if getattr(dev, "type", "cpu") == "cpu":
        return -1
    idx = getattr(dev, "index", None)
    return 0 if idx is None else int(idx)
