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
from typing import Dict, Optional

from .. import types as _t
from .._state import STATE

# ops (registry names, composites included) that run in the region's lower precision
LOWER_PRECISION = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution",
                             "chain_matmul", "prelu"})

# ops that run in float32, per device type (PyTorch's fp32 lists, restricted to ember's ops)
_COMMON_FP32 = {"mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "nll_loss_nd",
                "cdist", "dist", "prod", "cumprod", "renorm"}
FLOAT32: Dict[str, frozenset] = {
    "cpu": frozenset(_COMMON_FP32 | {"binary_cross_entropy"}),
    "cuda": frozenset(_COMMON_FP32 | {
        "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "pow", "softplus",
        "native_layer_norm", "native_group_norm", "logsumexp", "cumsum", "sum", "softmax", "log_softmax",
        "_softmax", "_log_softmax", "linalg_vector_norm", "linalg_matrix_norm"}),
}
DEVICE_TYPES = ("cpu", "cuda")
DEFAULT_DTYPE = {"cpu": _t.bfloat16, "cuda": _t.float16}
SUPPORTED_DTYPE = {"cpu": (_t.bfloat16, _t.float16), "cuda": (_t.float16, _t.bfloat16)}

# every op name the dispatcher must look at while a region is active
ALL_OPS = LOWER_PRECISION.union(*FLOAT32.values())


def _region_dtype(device_type: str) -> Optional[_t.dtype]:
    regions = STATE.autocast
    return None if regions is None else regions.get(device_type)


def cast_args(op, args):
    """``args`` of ``op`` with floating tensors cast as the active region says (the same tuple
    when nothing applies)."""
    from ..tensor import Tensor
    dev = None
    for a in args:
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
    elif op.name in FLOAT32.get(dev, ()):
        target = _t.float32
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
        self.fast_dtype = DEFAULT_DTYPE[device_type] if dtype is None else _t.as_dtype(dtype)
        self._enabled = bool(enabled)
        if self._enabled and self.fast_dtype not in SUPPORTED_DTYPE[device_type]:
            raise RuntimeError(f"In {device_type} autocast, but the target dtype is not supported: "
                               f"{self.fast_dtype}. Supported: "
                               f"{', '.join(str(d) for d in SUPPORTED_DTYPE[device_type])}")
        self._cache_enabled = cache_enabled
        self._saved = []

    def __enter__(self):
        prev = STATE.autocast
        self._saved.append(prev)
        regions = dict(prev) if prev else {}
        if self._enabled:
            regions[self.device] = self.fast_dtype
        else:
            regions.pop(self.device, None)
        STATE.autocast = regions or None
        return self

    def __exit__(self, *exc):
        STATE.autocast = self._saved.pop()
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
    """The active region's dtype for ``device_type``, else its default."""
    return _region_dtype(device_type) or DEFAULT_DTYPE[device_type]


def is_autocast_available(device_type: str) -> bool:
    return device_type in DEVICE_TYPES
