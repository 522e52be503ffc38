"""Tensor printing, byte-for-byte compatible with PyTorch's ``repr``.

Everything here is a pure function of a numpy array plus a little metadata
(dtype name, device, autograd state), so the Tensor class only has to gather
those fields and call :func:`tensor_repr` (or :func:`repr_of`, which reads them
off a tensor-like object).

How a tensor is printed
-----------------------
1. If the tensor has more than ``threshold`` elements it is *summarised*: only
   the first and last ``edgeitems`` entries of every long dimension are shown,
   with ``...`` in between.
2. One formatter is chosen for all (shown) elements:

   * bool / integer: ``str(value)``, right-aligned to the widest value;
   * floating point, looking only at the finite non-zero values:
       - all of them integral -> "integer mode" (``7.``, ``-3.``), unless the
         ratio max/min of their magnitudes exceeds 1000 or the max exceeds
         1e8, in which case scientific mode;
       - otherwise fixed-point with ``precision`` decimals, unless
         max/min > 1000, max > 1e8 or min < 1e-4 -> scientific mode;
       - ``sci_mode`` in the print options overrides that choice.
     The column width is the widest formatted finite non-zero value; nan and
     inf are padded to it (but never truncated).
3. Nested dimensions are bracketed; rows wrap so a line stays within
   ``linewidth``; dimension ``d`` is separated by ``d - 1`` blank lines.
4. Suffixes (device, size of empty tensors, non-default dtype,
   ``requires_grad=True`` or ``grad_fn=<Name>``) are appended, each moved to
   its own line if it would overflow ``linewidth``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Iterator, Optional, Sequence

import numpy as np

__all__ = [
    "DTYPE_PREFIX",
    "PrintOptions",
    "get_printoptions",
    "set_printoptions",
    "printoptions",
    "tensor_repr",
    "tensor_str",
    "repr_of",
    "format_dtype",
    "format_device",
]

#: How dtypes are spelled in printed suffixes (``dtype=ember.float64``).
DTYPE_PREFIX = "ember."

# torch's default complex dtype: complex128 under a float64 default, complex64 otherwise
_COMPLEX_FOR = {"float32": "complex64", "float64": "complex128", "float16": "complex64",
                "bfloat16": "complex64"}


def _unnamed_dtypes(default_dtype: str) -> frozenset:
    """dtypes left out of a non-empty tensor's repr: the defaults for their kind."""
    return frozenset({default_dtype, _COMPLEX_FOR.get(default_dtype, ""), "int64", "bool"})

_FLOAT_KINDS = ("f",)


@dataclasses.dataclass
class PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: Optional[bool] = None


_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}

_OPTS = PrintOptions()


def set_printoptions(
    precision: Optional[int] = None,
    threshold: Optional[float] = None,
    edgeitems: Optional[int] = None,
    linewidth: Optional[int] = None,
    profile: Optional[str] = None,
    sci_mode: Optional[bool] = None,
) -> None:
    """Set the print options (same meaning and defaults as torch.set_printoptions).

    ``profile`` ("default", "short" or "full") first resets precision,
    threshold, edgeitems and linewidth; explicit arguments then override it.
    ``sci_mode`` is always assigned: ``None`` means "choose automatically".
    """
    if profile is not None:
        try:
            values = _PROFILES[profile]
        except KeyError:
            raise ValueError(
                f"set_printoptions: unknown profile {profile!r}; "
                f"expected one of {sorted(_PROFILES)}"
            ) from None
        for key, val in values.items():
            setattr(_OPTS, key, val)
    if precision is not None:
        _OPTS.precision = int(precision)
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = int(edgeitems)
    if linewidth is not None:
        _OPTS.linewidth = int(linewidth)
    _OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options as a dict (a copy)."""
    return dataclasses.asdict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Context manager: temporarily change print options."""
    saved = dataclasses.replace(_OPTS)
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        for field in dataclasses.fields(PrintOptions):
            setattr(_OPTS, field.name, getattr(saved, field.name))


# --------------------------------------------------------------------------
# element formatting


class _ElementFormatter:
    """Chooses one textual format for every element of a (summarised) array."""

    def __init__(self, values: np.ndarray, opts: PrintOptions):
        self.opts = opts
        self.is_float = values.dtype.kind in _FLOAT_KINDS or _is_ml_float(values.dtype)
        self.is_bool = values.dtype == np.bool_
        self.int_mode = True
        self.sci_mode = False
        self.width = 1

        flat = values.reshape(-1)
        if not self.is_float:
            if flat.size:
                self.width = max(len(self._plain(v)) for v in flat.tolist())
            return

        as_double = flat.astype(np.float64)
        if values.dtype.name == "float8_e8m0fnu":
            # no zero and no infinity: torch compares with 0 converted to it (2**-127), and its
            # isfinite is true for NaN too (only infinities are not finite)
            finite_nonzero = as_double[~np.isinf(as_double) & (as_double != 2.0 ** -127)]
        else:
            finite_nonzero = as_double[np.isfinite(as_double) & (as_double != 0)]
        if finite_nonzero.size == 0:
            # only zeros, nan and inf: integer mode, width from nothing
            return

        magnitudes = np.abs(finite_nonzero)
        lo = float(magnitudes.min())
        hi = float(magnitudes.max())
        p = opts.precision
        vals = finite_nonzero.tolist()

        self.int_mode = bool(np.all(finite_nonzero == np.ceil(finite_nonzero)))
        if opts.sci_mode is not None:
            self.sci_mode = bool(opts.sci_mode)
        elif self.int_mode:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
        else:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4

        # the column width is that of the widest finite non-zero value
        if self.sci_mode:
            self.width = max(len(f"{v:.{p}e}") for v in vals)
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") for v in vals) + 1
        else:
            self.width = max(len(f"{v:.{p}f}") for v in vals)

    @staticmethod
    def _plain(value: Any) -> str:
        return str(value)

    def format(self, value: Any) -> str:
        if self.is_float:
            value = float(value)
            p = self.opts.precision
            if self.sci_mode:
                text = f"{value:{self.width}.{p}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if math.isfinite(value):
                    text += "."
            else:
                text = f"{value:.{p}f}"
        else:
            text = self._plain(value)
        return text.rjust(self.width)


class _ComplexFormatter:
    """torch's two formatters for a complex tensor: one chosen over the real parts, one over
    the imaginary parts. An element is the real part padded to its column, then the
    imaginary part unpadded with its sign and ``j`` (``-1.5000+0.2500j``); a line holds as
    many elements as fit both widths plus the ``j``."""

    def __init__(self, values: np.ndarray, opts: PrintOptions):
        self.real = _ElementFormatter(np.ascontiguousarray(values.real), opts)
        self.imag = _ElementFormatter(np.ascontiguousarray(values.imag), opts)
        self.width = self.real.width + self.imag.width + 1

    def format(self, value: Any) -> str:
        value = complex(value)
        real_str = self.real.format(value.real)
        imag_str = (self.imag.format(value.imag) + "j").lstrip()
        if imag_str[0] in "+-":
            return real_str + imag_str
        return real_str + "+" + imag_str


def _is_ml_float(dt: np.dtype) -> bool:
    # bfloat16 / float8 from ml_dtypes register as kind 'V' with a float name
    name = getattr(dt, "name", "")
    return dt.kind == "V" and ("float" in name)


# --------------------------------------------------------------------------
# layout


def _edge_indices(n: int, edge: int, summarize: bool) -> Optional[Sequence[int]]:
    """Indices kept along a dimension of size n, or None if it is not cut."""
    if summarize and n > 2 * edge:
        return list(range(edge)) + list(range(n - edge, n))
    return None


def _summarised(arr: np.ndarray, edge: int) -> np.ndarray:
    """The sub-array of elements that will actually be shown."""
    for axis in range(arr.ndim):
        keep = _edge_indices(arr.shape[axis], edge, True)
        if keep is not None:
            arr = np.take(arr, keep, axis=axis)
    return arr


def _layout(arr: np.ndarray, indent: int, summarize: bool, fmt: _ElementFormatter,
            opts: PrintOptions) -> str:
    edge = opts.edgeitems
    if arr.ndim == 0:
        return fmt.format(arr.item())

    n = arr.shape[0]
    cut = summarize and n > 2 * edge

    if arr.ndim == 1:
        if cut:  # convert only what is shown: a long vector stays cheap
            cells = [fmt.format(v) for v in arr[:edge].tolist()] + [" ..."] + \
                    [fmt.format(v) for v in arr[n - edge:].tolist()]
        else:
            cells = [fmt.format(v) for v in arr.tolist()]
        per_line = max(1, (opts.linewidth - indent) // (fmt.width + 2))
        lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"

    rows = range(edge) if cut else range(n)
    parts = [_layout(arr[i], indent + 1, summarize, fmt, opts) for i in rows]
    if cut:
        parts.append("...")
        parts.extend(_layout(arr[i], indent + 1, summarize, fmt, opts)
                     for i in range(n - edge, n))
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def tensor_str(array: np.ndarray, indent: int = 0,
               opts: Optional[PrintOptions] = None) -> str:
    """The bracketed body of a tensor's repr (what ``str`` shows inside ``tensor(...)``)."""
    opts = opts or _OPTS
    arr = np.asarray(array)
    if arr.size == 0:
        return "[]"
    summarize = arr.size > opts.threshold
    shown = _summarised(arr, opts.edgeitems) if summarize else arr
    fmt = _ComplexFormatter(shown, opts) if arr.dtype.kind == "c" else _ElementFormatter(shown, opts)
    return _layout(arr, indent, summarize, fmt, opts)


# --------------------------------------------------------------------------
# suffixes and the full repr


def format_dtype(dtype_name: str) -> str:
    return DTYPE_PREFIX + dtype_name


def format_device(device: Any) -> str:
    """'cpu', 'cuda:0', ... from a string or an object with .type/.index."""
    if device is None:
        return "cpu"
    if isinstance(device, str):
        return device
    dtype = getattr(device, "type", None)
    if dtype is None:
        return str(device)
    index = getattr(device, "index", None)
    return dtype if index is None else f"{dtype}:{index}"


def _join_suffixes(body: str, suffixes: Sequence[str], indent: int,
                   opts: PrintOptions) -> str:
    line_len = len(body) - body.rfind("\n") + 1
    out = [body]
    for suffix in suffixes:
        if line_len + len(suffix) + 2 > opts.linewidth:
            out.append(",\n" + " " * indent + suffix)
            line_len = indent + len(suffix)
        else:
            out.append(", " + suffix)
            line_len += len(suffix) + 2
    out.append(")")
    return "".join(out)


def _dtype_name_of(array: Optional[np.ndarray]) -> str:
    if array is None:
        return "float32"
    dt = np.asarray(array).dtype
    return "bool" if dt == np.bool_ else dt.name


def tensor_repr(
    array: Optional[np.ndarray],
    *,
    dtype_name: Optional[str] = None,
    default_dtype: str = "float32",
    device: Any = "cpu",
    requires_grad: bool = False,
    grad_fn_name: Optional[str] = None,
    prefix: str = "tensor",
    shape: Optional[Sequence[int]] = None,
) -> str:
    """PyTorch-identical ``repr`` of a tensor given as a numpy array.

    array            the values (numpy, any dtype incl. ml_dtypes.bfloat16);
                     ``None`` for a tensor without data (meta / fake): printed
                     as ``tensor(..., size=(...))`` and ``shape`` is required.
    dtype_name       "float32", "bfloat16", ...; default: the array's dtype.
    default_dtype    the current default floating dtype (ember.get_default_dtype()).
                     A non-empty tensor whose dtype is the default for its kind
                     (that, int64, bool, matching complex) shows no dtype
                     suffix; an empty one omits it only for ``default_dtype``.
    device           "cpu", "cuda:0" or an object with ``.type``/``.index``.
    grad_fn_name     e.g. "MulBackward0"; wins over ``requires_grad``.
    """
    opts = _OPTS
    if dtype_name is None:
        dtype_name = _dtype_name_of(array)
    is_default_dtype = dtype_name in _unnamed_dtypes(default_dtype)

    head = prefix + "("
    indent = len(head)
    suffixes = []

    dev = format_device(device)
    if dev.split(":", 1)[0] != "cpu":
        suffixes.append(f"device='{dev}'")

    if array is None:
        if shape is None:
            raise ValueError("tensor_repr: a tensor without data needs `shape`")
        body = "..."
        suffixes.append("size=" + _shape_str(shape))
        if not is_default_dtype:
            suffixes.append("dtype=" + format_dtype(dtype_name))
    else:
        arr = np.asarray(array)
        if arr.size == 0:
            if arr.ndim != 1:
                suffixes.append("size=" + _shape_str(arr.shape))
            if dtype_name != default_dtype:
                suffixes.append("dtype=" + format_dtype(dtype_name))
            body = "[]"
        else:
            if not is_default_dtype:
                suffixes.append("dtype=" + format_dtype(dtype_name))
            body = tensor_str(arr, indent, opts)

    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")

    return _join_suffixes(head + body, suffixes, indent, opts)


def _shape_str(shape: Sequence[int]) -> str:
    return str(tuple(int(s) for s in shape))


def _grad_fn_display_name(grad_fn: Any) -> Optional[str]:
    if grad_fn is None:
        return None
    name = getattr(grad_fn, "name", None)
    if callable(name):
        text = name()
        return text.rsplit("::", 1)[-1]
    return type(grad_fn).__name__


def _fake_repr(t: Any) -> str:
    """``FakeTensor(..., size=(s0, 3), dtype=...)``: a fake tensor has no values to show."""
    parts = ["...", f"size=({', '.join(str(s) for s in t.shape)}{',' if t.ndim == 1 else ''})"]
    if t.dtype.name != "float32":
        parts.append(f"dtype={t.dtype}")
    if t.device.type != "cpu":
        parts.append(f"device='{t.device}'")
    if t.grad_fn is not None:
        parts.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    from ._torch_function import DISPATCH_CLASSES     # a wrapper subclass (no __repr__ of its own)
    name = type(t).__name__ if type(t) in DISPATCH_CLASSES else "FakeTensor"
    return f"{name}({', '.join(parts)})"


def _meta_repr(t: Any, prefix: str) -> str:
    """``tensor(..., device='meta', size=(2, 3), dtype=...)``: torch's form for a tensor on the
    meta device (no values; the dtype shown unless it is the default floating dtype)."""
    from .types import get_default_dtype
    parts = ["...", "device='meta'", f"size=({', '.join(str(s) for s in t.shape)}{',' if t.ndim == 1 else ''})"]
    if t.dtype is not get_default_dtype():
        parts.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        parts.append(f"grad_fn=<{_grad_fn_display_name(t.grad_fn)}>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    return f"{prefix}({', '.join(parts)})"


def repr_of(t: Any, prefix: str = "tensor", default_dtype: Optional[str] = None) -> str:
    """``repr`` of an ember Tensor (duck-typed: ``_data``, ``dtype``, ``device``,
    ``requires_grad``, ``grad_fn``, ``shape``)."""
    dtype = getattr(t, "dtype", None)
    dtype_name = getattr(dtype, "name", None) if dtype is not None else None
    data = getattr(t, "_data", None)
    if getattr(t, "_fake", False):
        return _meta_repr(t, prefix) if t.device.type == "meta" else _fake_repr(t)
    if getattr(dtype, "_limited", None) in ("subbyte", "bits"):
        # torch's sub-byte dtypes have no element values to print (ember.types.SUBBYTE_DTYPES)
        raise NotImplementedError(f'"_local_scalar_dense_cpu" not implemented for \'{dtype.legacy_name}\'')
    if data is not None and not isinstance(data, np.ndarray):
        # a device array (cupy) or anything array-like: bring it to host
        get = getattr(data, "get", None)
        data = get() if callable(get) else np.asarray(data)
    shape = tuple(getattr(t, "shape", ())) if data is None else None
    return tensor_repr(
        data,
        dtype_name=dtype_name,
        device=getattr(t, "device", "cpu"),
        requires_grad=bool(getattr(t, "requires_grad", False)),
        grad_fn_name=_grad_fn_display_name(getattr(t, "grad_fn", None)),
        prefix=prefix,
        shape=shape,
        default_dtype=default_dtype or _current_default_dtype(),
    )


def _current_default_dtype() -> str:
    """ember.get_default_dtype().name if the core provides it, else float32."""
    import sys

    ember = sys.modules.get("ember")
    getter = getattr(ember, "get_default_dtype", None)
    if getter is None:
        return "float32"
    try:
        return getattr(getter(), "name", "float32")
    except Exception:
        return "float32"
