"""``ember.autocast``: automatic mixed precision regions, as ``torch.autocast``.

Inside ``with ember.autocast(device_type, dtype=...)`` the ops that gain from a lower precision
(matrix products and convolutions: ``LOWER_PRECISION``) cast their floating inputs to the
region's dtype, and the ops that need float32's range or accuracy (exp/log/pow, reductions,
softmax, norms, losses: ``FLOAT32[device_type]``) cast lower-precision inputs up to float32.
Defaults are PyTorch's: float16 on cuda, bfloat16 on cpu. float64 inputs are left alone (not
"eligible", as in PyTorch), and so are ops on another device type than the region's.

Where it acts. The dispatcher (``ember/ops/registry.py``) calls :func:`cast_args` before
autograd for the ops named here, so the casts are recorded (``ToCopyBackward0``) and gradients
reach float32 parameters in float32. A thread's regions are its own (``STATE.autocast``).

What differs from PyTorch. The cast of a weight is not cached across the ops of a region
(``cache_enabled`` is accepted and has no effect on values, only on PyTorch's speed). Compiled
code: a frame entered while a region is active, or a region entered inside a compiled frame,
runs eagerly (the graph break and the eager fallback are logged), so autocast never changes
what a compiled graph computes.
"""
from __future__ import annotations

import functools
import warnings
from typing import Dict, Optional

from .. import types as _t
from .._state import STATE

# ops (registry names, composites included) that run in the region's lower precision
LOWER_PRECISION = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution",
                             "chain_matmul", "prelu"})

# ops that run in float32, per device type (PyTorch's fp32 lists, restricted to ember's ops)
_COMMON_FP32 = {"mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "nll_loss_nd",
                "cdist", "prod",
                # losses composed in Python (ember/nn/functional.py), cast by autocast_args: no kernel
                # op of theirs reaches the dispatcher's cast_args
                "l1_loss", "kl_div", "soft_margin_loss", "margin_ranking_loss", "triplet_margin_loss",
                "poisson_nll_loss", "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
                "cosine_embedding_loss"}
FLOAT32: Dict[str, frozenset] = {
    # cpu: also the linear algebra and FFT ops (PyTorch's CPU fp32 list: its kernels have no
    # bfloat16/float16 versions), trace, polar and view_as_complex; not dist, renorm and
    # cumprod (fp32 on cuda only)
    "cpu": frozenset(_COMMON_FP32 | {
        "binary_cross_entropy", "trace", "polar", "view_as_complex", "geqrf_raw", "linalg_inv", "linalg_inv_ex",
        "linalg_cholesky", "linalg_cholesky_ex", "linalg_qr", "linalg_svd", "linalg_eig", "linalg_eigh",
        "linalg_lstsq", "linalg_solve", "_fft_r2c", "_fft_c2c", "_fft_c2r", "avg_pool", "max_pool_with_indices",
        # Python compositions, cast by autocast_args (PyTorch's names; not reflection_pad3d)
        "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
        "replication_pad3d", "grid_sampler"}),
    "cuda": frozenset(_COMMON_FP32 | {
        "dist", "cumprod", "renorm",
        "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "pow", "softplus",
        "native_layer_norm", "native_group_norm", "logsumexp", "cumsum", "sum", "softmax", "log_softmax",
        "_softmax", "_log_softmax", "linalg_vector_norm", "linalg_matrix_norm"}),
}


def _is_3d_pool(args):
    """avg_pool / max_pool_with_indices serve the 1-, 2- and 3-d poolings; PyTorch's CPU list
    names only the 3-d ones (avg_pool3d, max_pool3d), told apart by a 3-element kernel size."""
    k = args[1] if len(args) > 1 else None
    return isinstance(k, (tuple, list)) and len(k) == 3


# ops of a FLOAT32 list that take its float32 only for some arguments
FLOAT32_WHEN = {"avg_pool": _is_3d_pool, "max_pool_with_indices": _is_3d_pool}

# ops whose floating inputs are all cast to the widest of their dtypes (PyTorch's "promote"
# policy: cat, stack, index_copy; float64 inputs are not eligible, as for the other policies)
PROMOTE: Dict[str, frozenset] = {"cpu": frozenset({"cat", "stack", "index_copy"}),
                                 "cuda": frozenset({"cat", "stack", "index_copy"})}
DEVICE_TYPES = ("cpu", "cuda")
DEFAULT_DTYPE = {"cpu": _t.bfloat16, "cuda": _t.float16}
SUPPORTED_DTYPE = {"cpu": (_t.bfloat16, _t.float16), "cuda": (_t.float16, _t.bfloat16)}

# every op name the dispatcher must look at while a region is active
ALL_OPS = LOWER_PRECISION.union(*FLOAT32.values(), *PROMOTE.values())


def _region_dtype(device_type: str) -> Optional[_t.dtype]:
    regions = STATE.autocast
    return None if regions is None else regions.get(device_type)


def cast_args(op, args):
    """``args`` of ``op`` with floating tensors cast as the active region says (the same tuple
    when nothing applies)."""
    from ..tensor import Tensor
    dev = None
    for a in args:
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):   # cat / stack
            a = a[0]
        if isinstance(a, Tensor):
            dev = a.device.type
            break
    if dev is None:
        return args
    region = _region_dtype(dev)
    if region is None:
        return args
    if op.name in LOWER_PRECISION:
        target = region
    elif op.name in FLOAT32.get(dev, ()) and FLOAT32_WHEN.get(op.name, bool)(args):
        target = _t.float32
    elif op.name in PROMOTE.get(dev, ()):
        return _promote_args(args, dev)
    else:
        return args
    out, changed = [], False
    for a in args:
        if isinstance(a, Tensor) and a.dtype.is_floating_point and a.dtype is not _t.float64 \
                and a.dtype is not target and a.device.type == dev:
            a = a.to(target)
            changed = True
        out.append(a)
    return tuple(out) if changed else args


class _Composite:
    """Stands for an op in :func:`cast_args` where there is only a name: a function of
    ember.nn.functional composed of several ops, none of which autocast would cast."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def autocast_args(name, *args):
    """``args`` cast as the active region casts those of the op PyTorch calls ``name``
    (a tuple, ``args`` itself outside any region).

    Why: PyTorch's autocast casts at its kernels (l1_loss, kl_div, grid_sampler, ...), while
    ember composes those functions in Python from ops autocast leaves alone, so under a
    bfloat16 / float16 region they ran in the low precision PyTorch avoids. Called at the top
    of such a function, this gives its inputs the kernel's cast (float32 on the FLOAT32 lists)."""
    if STATE.autocast is None:
        return args
    return cast_args(_Composite(name), args)


def _eligible(a, dev):
    """A tensor autocast may cast: floating, not float64, on the region's device type."""
    from ..tensor import Tensor
    return isinstance(a, Tensor) and a.dtype.is_floating_point and a.dtype is not _t.float64 \
        and a.device.type == dev


def _promote_args(args, dev):
    """PyTorch's "promote" policy: the eligible floating tensors (top level, or in a list as
    cat's and stack's) cast to the widest of their dtypes. float16 with bfloat16 has no widest
    of the two in PyTorch's rule, which raises (its message)."""
    flat = [t for a in args for t in (a if isinstance(a, (list, tuple)) else (a,)) if _eligible(t, dev)]
    dtypes = {t.dtype for t in flat}
    if len(dtypes) < 2:
        return args
    if _t.float32 in dtypes:
        target = _t.float32
    else:   # {float16, bfloat16}
        raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")

    def cast(t):
        return t.to(target) if _eligible(t, dev) and t.dtype is not target else t

    return tuple(type(a)(cast(t) for t in a) if isinstance(a, (list, tuple)) else cast(a) for a in args)


class autocast:  # noqa: N801 - PyTorch's name
    """``with ember.autocast(device_type, dtype=None, enabled=True, cache_enabled=None):`` (also a
    decorator). Nested regions replace the outer one's dtype for their device type; leaving a
    region restores it."""

    def __init__(self, device_type: str, dtype: Optional[_t.dtype] = None, enabled: bool = True,
                 cache_enabled: Optional[bool] = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in DEVICE_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        # as PyTorch: no dtype means the thread's autocast dtype (set_autocast_dtype), by default
        # bfloat16 on cpu and float16 on cuda
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else _t.as_dtype(dtype)
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype not in SUPPORTED_DTYPE[device_type]:
            # PyTorch's behaviour and message: an unsupported dtype (float64, float32, an integer
            # type) is not an error; the region warns once, here (a decorated function warns
            # when decorated, not per call), and runs with autocast disabled. Its dtype is still
            # the region's get_autocast_dtype, as in PyTorch.
            name = device_type.upper()
            warnings.warn(f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{name} Autocast only supports dtypes of "
                          f"{', '.join(str(d) for d in SUPPORTED_DTYPE[device_type])} currently.",
                          UserWarning, stacklevel=2)
            self._enabled = False
        self._cache_enabled = cache_enabled
        self._saved = []

    def __enter__(self):
        prev = STATE.autocast
        self._saved.append(prev)
        # the thread's autocast dtype and cache flag are set for the region and restored after it
        # (ember.set_autocast_dtype / is_autocast_cache_enabled), and the nesting counted
        dtypes = _dtype_settings()
        self._saved_settings = getattr(self, "_saved_settings", [])
        self._saved_settings.append((dict(dtypes), is_autocast_cache_enabled()))
        dtypes[self.device] = self.fast_dtype
        if self._cache_enabled is not None:
            set_autocast_cache_enabled(bool(self._cache_enabled))
        autocast_increment_nesting()
        regions = dict(prev) if prev else {}
        if self._enabled:
            regions[self.device] = self.fast_dtype
        else:
            regions.pop(self.device, None)
        STATE.autocast = regions or None
        return self

    def __exit__(self, *exc):
        STATE.autocast = self._saved.pop()
        dtypes, cache = self._saved_settings.pop()
        STATE.autocast_dtypes = dtypes
        STATE.autocast_cache_enabled = cache
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapped


def is_autocast_enabled(device_type: Optional[str] = None) -> bool:
    """Whether a region is active for ``device_type`` (default: cuda, as PyTorch's)."""
    return _region_dtype(device_type or "cuda") is not None


def get_autocast_dtype(device_type: str) -> _t.dtype:
    """The active region's dtype for ``device_type``, else the thread's setting
    (``set_autocast_dtype``), else the default (bfloat16 on cpu, float16 on cuda)."""
    _check_device_type(device_type)
    return _region_dtype(device_type) or _dtype_settings().get(device_type) or DEFAULT_DTYPE[device_type]


def is_autocast_available(device_type: str) -> bool:
    return device_type in DEVICE_TYPES


# ---------------------------------------------------------------------- PyTorch's state functions
# torch.set_autocast_enabled & co. act on the same per-thread state as ``autocast`` regions:
# STATE.autocast (the enabled device types and their dtypes), and, kept on the thread-local
# STATE lazily, the autocast dtype per device type, the cache flag and the nesting depth.

def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise TypeError(f"expected a device type string, got {type(device_type).__name__}")
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")


def _dtype_settings() -> Dict[str, _t.dtype]:
    d = getattr(STATE, "autocast_dtypes", None)
    if d is None:
        d = STATE.autocast_dtypes = {}
    return d


def _check_bool(fn, value, pos):
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument 'enabled' (position {pos}) must be bool, not {type(value).__name__}")


def set_autocast_enabled(*args) -> None:
    """``set_autocast_enabled(device_type, enabled)`` (or the older ``set_autocast_enabled(enabled)``
    for cuda): switch autocasting for a device type on or off outside a ``with autocast`` block
    (it then uses ``get_autocast_dtype(device_type)``)."""
    if len(args) == 1:
        device_type, enabled = "cuda", args[0]
        _check_bool("set_autocast_enabled", enabled, 1)
    elif len(args) == 2:
        device_type, enabled = args
        _check_bool("set_autocast_enabled", enabled, 2)
    else:
        raise TypeError(f"set_autocast_enabled() takes 1 or 2 arguments ({len(args)} given)")
    _check_device_type(device_type)
    regions = dict(STATE.autocast) if STATE.autocast else {}
    if enabled:
        regions[device_type] = get_autocast_dtype(device_type)
    else:
        regions.pop(device_type, None)
    STATE.autocast = regions or None


def set_autocast_dtype(device_type: str, dtype) -> None:
    """The dtype autocasting uses for ``device_type`` (now, if enabled, and in later regions
    opened without a dtype)."""
    _check_device_type(device_type)
    dt = _t.as_dtype(dtype)
    _dtype_settings()[device_type] = dt
    if _region_dtype(device_type) is not None:
        regions = dict(STATE.autocast)
        regions[device_type] = dt
        STATE.autocast = regions


def _deprecated(old, new):
    import warnings
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled() -> bool:
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled) -> None:
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    _check_bool("set_autocast_cpu_enabled", enabled, 1)
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype() -> _t.dtype:
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype) -> None:
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> _t.dtype:
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype) -> None:
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled() -> bool:
    """PyTorch caches the casts of leaf tensors inside a region; ember casts afresh each time
    (see the module docstring), so the flag is state only: it is kept, scoped by regions, and
    read back, but changes no result."""
    return getattr(STATE, "autocast_cache_enabled", True)


def set_autocast_cache_enabled(enabled) -> None:
    _check_bool("set_autocast_cache_enabled", enabled, 1)
    STATE.autocast_cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Nothing to clear: ember keeps no cache of autocast casts."""


def autocast_increment_nesting() -> int:
    """One more autocast region entered on this thread; the new depth."""
    n = getattr(STATE, "autocast_nesting", 0) + 1
    STATE.autocast_nesting = n
    return n


def autocast_decrement_nesting() -> int:
    """One autocast region left on this thread; the new depth (as PyTorch, it may go negative
    when called without a matching increment)."""
    n = getattr(STATE, "autocast_nesting", 0) - 1
    STATE.autocast_nesting = n
    return n
