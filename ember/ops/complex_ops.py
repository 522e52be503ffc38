"""Complex-number ops: the views between complex tensors and their real parts
(``view_as_real``, ``view_as_complex``, ``.real``, ``.imag``), conjugation, and the
functions that build or take apart complex numbers (``complex``, ``polar``, ``angle``,
``sgn``, ``isreal``).

Two of them are kernels (``view_as_real`` and ``view_as_complex``, the views that
reinterpret memory, and ``conj_physical``); everything else is a composite over them, so
autograd, metas and the compiler's fallback come from those records. ``.real`` is
``view_as_real(z)[..., 0]``: a view that writes through, with torch's strides.

ember materialises conjugation (``conj()`` is ``conj_physical()``, a copy) instead of
torch's lazy conjugate bit, so ``is_conj()`` is always False and ``resolve_conj()`` is the
identity; values, gradients and dtypes are torch's.

Gradients follow torch's convention for a real loss L of a complex z = x + iy: the
gradient is dL/dx + i dL/dy (the conjugate Wirtinger derivative, times two). The autograd
node (``autograd.graph.OpNode.apply``) gets it for every holomorphic op from the real
formula: ``conj(formula(conj(grad)))``. The ops here that are not holomorphic say so
(``complex_grad = "raw"``) and give the formula in that convention directly.
"""
from __future__ import annotations

import math

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import _meta, api
from ._exports import Exports
from .registry import defcomposite, defop

_export = Exports()


def _require_complex(name, a_dtype):
    if a_dtype.kind != "c":
        raise RuntimeError(f"{name} is only supported for complex tensors")


# ---------------------------------------------------------------------- views
def _as_real_geometry(shape, estrides, offset):
    """(shape, element strides, offset) of the float view of a complex array: a last dim of 2
    with stride 1, every other stride doubled (torch's ``view_as_real``)."""
    return tuple(shape) + (2,), tuple(2 * s for s in estrides) + (1,), 2 * offset


@defop("view_as_real(Tensor self) -> Tensor", view=True, save=(), method=False)
def view_as_real(xp, a):
    _require_complex("view_as_real", a.dtype)
    real = a.real      # numpy's float view of the same memory, the complex array's strides in bytes
    shape, st, _ = _as_real_geometry(a.shape, [s // a.itemsize for s in a.strides], 0)
    isz = real.itemsize
    return xp.lib.stride_tricks.as_strided(real, shape=shape, strides=tuple(s * isz for s in st))


@view_as_real.meta_fn
def _view_as_real_meta(a):
    if not a.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    data = a._data
    shape, st, off = _as_real_geometry(a.shape, a.stride(), a.storage_offset())
    storage = getattr(data, "storage", None)
    from .._fake import FakeArray
    return FakeArray(shape, a.dtype.to_real(), st, off, storage)


@view_as_real.derivative
def _view_as_real_bw(ctx, g):
    return (_view_as_complex_entry(g.contiguous()),)


def _check_as_complex(shape, estrides, offset, dt):
    if dt not in (_t.float32, _t.float64):
        if dt is _t.float16:
            raise _t._complex32_error()
        raise RuntimeError(f"view_as_complex is only supported for half, float and double tensors, but got "
                           f"a tensor of scalar type: {dt.legacy_name}")
    if not shape or shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if estrides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in estrides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return tuple(shape[:-1]), tuple(s // 2 for s in estrides[:-1]), offset // 2


@defop("view_as_complex(Tensor self) -> Tensor", view=True, save=(), method=False)
def view_as_complex(xp, a):
    dt = _t.from_numpy_dtype(a.dtype)
    isz = a.itemsize
    # the storage offset decides whether the pairs are aligned: only a tensor knows it, so the
    # public entry below checks it; here the array itself is the start of the view
    shape, st, _ = _check_as_complex(a.shape, [s // isz for s in a.strides], 0, dt)
    cdt = np.dtype(dt.to_complex().np)
    first = a[..., 0]      # the real part of each pair: the complex view's geometry, in floats
    byte_strides = tuple(s * 2 * isz for s in st)
    if xp is not np:
        return xp.lib.stride_tricks.as_strided(a.reshape(a.shape).view(cdt)[..., 0], shape=shape,
                                               strides=byte_strides)
    iface = dict(first.__array_interface__)
    iface.update(typestr=cdt.str, descr=[("", cdt.str)], shape=shape, strides=byte_strides)
    return np.asarray(_Interface(iface, first))


class _Interface:
    """An object numpy reads an array from (``__array_interface__``), keeping the memory's owner
    alive: how a float array's pairs are reinterpreted as complex numbers whatever its strides
    (``ndarray.view`` to a wider dtype needs a contiguous last dim)."""

    def __init__(self, iface, base):
        self.__array_interface__ = iface
        self.base = base


@view_as_complex.meta_fn
def _view_as_complex_meta(a):
    from .._fake import FakeArray
    if isinstance(a._data, FakeArray):
        a._data.storage.alignment_read = True     # (the offset's alignment decides: see _fake.py)
    shape, st, off = _check_as_complex(tuple(a.shape), a.stride(), a.storage_offset(), a.dtype)
    from .._fake import FakeArray
    return FakeArray(shape, a.dtype.to_complex(), st, off, getattr(a._data, "storage", None))


@view_as_complex.derivative
def _view_as_complex_bw(ctx, g):
    return (view_as_real.binding(g),)


view_as_complex.complex_grad = "raw"
_view_as_complex_binding = view_as_complex.binding


def _view_as_complex_entry(input):
    """``view_as_complex`` with torch's storage-offset check (the kernel sees only an array)."""
    if isinstance(input, Tensor) and input.storage_offset() % 2 and input.dtype in (_t.float32, _t.float64) \
            and input.ndim and input.shape[-1] == 2 and input.stride(-1) == 1:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return _view_as_complex_binding(input)


# ---------------------------------------------------------------------- conjugation
@defop("conj_physical(Tensor self) -> Tensor", tags=("pointwise",), save=(), inplace=True)
def conj_physical(xp, a):
    if a.dtype.kind != "c":
        return a.copy()
    return xp.conjugate(a)


@conj_physical.meta_fn
def _conj_physical_meta(a):
    return _meta.np_out(_meta.np_ufunc(a), a.dtype)


@conj_physical.derivative
def _conj_physical_bw(ctx, g):
    return (conj_physical(g) if g.dtype.is_complex else g,)


conj_physical.complex_grad = "raw"
_conj_physical_op = conj_physical
conj_physical = conj_physical.binding


@defcomposite("conj(Tensor self) -> Tensor")
def conj(self):
    """The complex conjugate: ``self`` for a real tensor (as torch), a materialised
    ``conj_physical`` for a complex one (ember has no lazy conjugate bit)."""
    return conj_physical(self) if self.dtype.is_complex else self


@defcomposite("resolve_conj(Tensor self) -> Tensor")
def resolve_conj(self):
    return self


@defcomposite("resolve_neg(Tensor self) -> Tensor")
def resolve_neg(self):
    return self


@_export(method=True)
def is_conj(input):
    """Always False: ember's ``conj()`` materialises (see the module docstring)."""
    return False


@_export(method=True)
def is_neg(input):
    return False


# ---------------------------------------------------------------------- parts
@defcomposite("real(Tensor self) -> Tensor", method=False)
def real(self):
    """The real part as a view (writes through); a real tensor is its own real part."""
    if not self.dtype.is_complex:
        return self
    return api.select(view_as_real.binding(self), -1, 0)


@defcomposite("imag(Tensor self) -> Tensor", method=False)
def imag(self):
    if not self.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return api.select(view_as_real.binding(self), -1, 1)


def _check_parts(real, imag, what="real"):
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor):
            raise TypeError(f"complex(): argument '{name}' (position {1 if name == 'real' else 2}) must be "
                            f"Tensor, not {type(t).__name__}")
    if real.dtype not in (_t.float16, _t.float32, _t.float64) or imag.dtype not in (
            _t.float16, _t.float32, _t.float64):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{real.dtype.legacy_name} and {imag.dtype.legacy_name}")
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype.legacy_name} but got scalar type "
                           f"{imag.dtype.legacy_name} for second argument")
    if real.dtype is _t.float16:
        raise _t._complex32_error()


@defcomposite("complex(Tensor real, Tensor imag) -> Tensor", method=False)
def complex(real, imag):
    """``real + i * imag`` (same float dtype; broadcast), as a fresh complex tensor."""
    _check_parts(real, imag)
    shape = api.broadcast_shapes(tuple(real.shape), tuple(imag.shape))
    pair = api.stack([real.expand(shape), imag.expand(shape)], -1)
    return _view_as_complex_entry(pair)


@defcomposite("polar(Tensor abs, Tensor angle) -> Tensor", method=False)
def polar(abs, angle):
    """``abs * (cos(angle) + i sin(angle))``."""
    _check_parts(abs, angle)
    return complex(abs * api.cos(angle), abs * api.sin(angle))


@defcomposite("angle(Tensor self) -> Tensor")
def angle(self):
    """The argument of each element: ``atan2(imag, real)`` for complex tensors (its gradient is
    torch's ``grad * i z / |z|^2``); pi for negative real numbers and 0 otherwise (NaN stays)."""
    if self.dtype.is_complex:
        im, re = imag(self), real(self)
        # atan2's derivative is 0/0 at z = 0, torch's angle gradient is 0 there: differentiate
        # atan2 at a safe point instead and take z = 0's value (+-0 or +-pi, by the zeros'
        # signs) without a gradient
        zero = (re == 0) & (im == 0)
        safe = api.atan2(api.where(zero, 0.0, im).to(im.dtype), api.where(zero, 1.0, re).to(re.dtype))
        return api.where(zero, api.atan2(im, re).detach(), safe)
    x = self if self.dtype.is_floating_point else self.to(_t.get_default_dtype())
    out = (x < 0).to(x.dtype) * math.pi
    return api.where(api.isnan(x), x, out)


@defcomposite("sgn(Tensor self) -> Tensor")
def sgn(self):
    """``z / |z|`` (0 at 0) for complex tensors; ``sign`` for real ones."""
    if not self.dtype.is_complex:
        return api.sign(self)
    a = api.abs(self)
    zero = a == 0
    safe = api.where(zero, 1.0, a).to(a.dtype)
    value = self / safe
    if not self.requires_grad:
        return api.where(zero, 0.0, value)
    # z / |z| differentiated as written squares |z| (0 for |z| < 1e-154: a NaN gradient where
    # torch's is finite). sgn is scale-invariant, so differentiate sgn(w) for w = z / |z|
    # (|z| held constant, |w| = 1) instead, keeping z / |z|'s value
    w = self / safe.detach()
    wa = api.abs(w)
    unit = w / api.where(zero, 1.0, wa).to(wa.dtype)
    return api.where(zero, 0.0, value.detach() + (unit - unit.detach()))


@defcomposite("isreal(Tensor self) -> Tensor")
def isreal(self):
    if not self.dtype.is_complex:
        return api.ones_like(self, dtype=_t.bool_)
    return imag(self) == 0


_export.install()
api.view_as_complex = _view_as_complex_entry


# ---------------------------------------------------------------------- ops torch does not define for complex
# numpy orders complex numbers lexicographically and has complex sort/max/clip, so these
# would silently return an answer where torch raises. Each raises torch's error instead
# (checked in its kernel, before any work; fake tensors reach the kernel's eager twin when a
# compiled graph with complex values runs eagerly, see ember/inductor's complex fallback).
def _nie(kname):
    return lambda dt: NotImplementedError(f'"{kname}" not implemented for \'{dt.legacy_name}\'')


def _err(cls, msg):
    return lambda dt: cls(msg)


_CLAMP = _err(NotImplementedError, "clamp is not supported for complex types")
_SORT = _err(RuntimeError, " Sort does not support complex dtypes on CPU")
_REJECT = {
    "lt": _nie("lt_cpu"), "le": _nie("le_cpu"), "gt": _nie("gt_cpu"), "ge": _nie("ge_cpu"),
    "max": _nie("max_all"), "min": _nie("min_all"),
    "max_dim": _err(RuntimeError, "max(): does not support complex input"),
    "min_dim": _err(RuntimeError, "min(): does not support complex input"),
    "amax": _nie("max_values_cpu"), "amin": _nie("min_values_cpu"), "aminmax": _nie("aminmax_cpu"),
    "argmax": _err(RuntimeError, "argmax(): does not support complex input"),
    "argmin": _err(RuntimeError, "argmin(): does not support complex input"),
    "maximum": _err(RuntimeError, "maximum not implemented for complex tensors."),
    "minimum": _err(RuntimeError, "minimum not implemented for complex tensors."),
    "fmax": _err(RuntimeError, "fmax not implemented for complex tensors."),
    "fmin": _err(RuntimeError, "fmin not implemented for complex tensors."),
    "relu": _CLAMP, "clamp": _CLAMP, "clamp_min": _CLAMP, "clamp_max": _CLAMP, "hardtanh": _CLAMP,
    "floor": _err(NotImplementedError, "floor is not supported for complex inputs"),
    "ceil": _err(NotImplementedError, "ceil is not supported for complex inputs"),
    "trunc": _err(NotImplementedError, "trunc is not supported for complex inputs"),
    "round": _nie("round_vml_cpu"), "frac": _nie("frac_cpu"),
    "sign": _err(NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex numbers. "
                                      "Please use torch.sgn instead."),
    "signbit": _err(NotImplementedError, "signbit is not implemented for complex tensors."),
    "sort": _SORT, "argsort": _SORT, "msort": _SORT,
    "topk": _err(RuntimeError, " topk does not support complex dtypes on CPU"),
    "cummax": _nie("cummax_cpu"), "cummin": _nie("cummin_cpu"), "median": _nie("median_cpu"),
    "median_dim": _nie("median_out"), "nanmedian": _nie("median_cpu"), "nanmedian_dim": _nie("median_out"),
    "mode": _nie("mode_cpu"), "kthvalue": _nie("kthvalue_cpu"), "unique": _nie("unique"),
    "unique_consecutive": _nie("unique"),
    "erf": _nie("erf_vml_cpu"), "erfc": _nie("erfc_vml_cpu"), "erfinv": _nie("erfinv_vml_cpu"),
    "lgamma": _nie("lgamma_vml_cpu"), "digamma": _nie("digamma"), "i0": _nie("i0_vml_cpu"),
    "logit": _nie("logit_cpu"), "atan2": _nie("atan2_cpu"), "copysign": _nie("copysign_cpu"),
    "hypot": _nie("hypot_cpu"), "nextafter": _nie("nextafter_cpu"), "xlogy": _nie("xlogy_cpu"),
    "gcd": _nie("gcd_cpu"), "lcm": _nie("lcm_cpu"),
    "heaviside": _err(RuntimeError, "heaviside is not yet implemented for complex tensors."),
    "deg2rad": _err(RuntimeError, "deg2rad is not supported for complex tensors."),
    "rad2deg": _err(RuntimeError, "rad2deg is not supported for complex tensors."),
    "remainder": _nie("remainder_cpu"), "fmod": _nie("fmod_cpu"), "floor_divide": _nie("div_floor_cpu"),
    "bitwise_and": _nie("bitwise_and_cpu"), "bitwise_or": _nie("bitwise_or_cpu"),
    "bitwise_xor": _nie("bitwise_xor_cpu"), "bitwise_not": _nie("bitwise_not_cpu"),
    "bitwise_left_shift": _nie("lshift_cpu"), "bitwise_right_shift": _nie("rshift_cpu"),
    "logsigmoid": _nie("log_sigmoid_cpu"), "mish": _nie("mish_cpu"), "elu": _nie("elu_cpu"),
    "celu": _nie("elu_cpu"), "selu": _nie("elu_cpu"), "leaky_relu": _nie("leaky_relu_cpu"),
    "gelu": _nie("GeluKernelImpl"), "softplus": _nie("softplus_cpu"), "hardsigmoid": _nie("hardsigmoid_cpu"),
    "hardswish": _nie("hardswish_cpu"), "hardshrink": _nie("hardshrink_cpu"),
    "softshrink": _nie("softshrink_check"), "threshold": _nie("threshold_cpu"), "relu6": _CLAMP,
    "glu": _nie("glu_cpu"), "_softmax": _nie("softmax_kernel_impl"), "softmax": _nie("softmax_kernel_impl"),
    "_log_softmax": _nie("log_softmax_kernel_impl"), "log_softmax": _nie("log_softmax_kernel_impl"),
    "histc": _nie("aminmax_cpu"), "bucketize": _nie("searchsorted_out_cpu"),
    "searchsorted": _nie("searchsorted_out_cpu"),
    "isposinf": _err(RuntimeError, "isposinf does not support complex inputs."),
    "isneginf": _err(RuntimeError, "isneginf does not support complex inputs."),
    "huber_loss": _nie("huber_cpu"), "smooth_l1_loss": _nie("smooth_l1_cpu"), "mse_loss": _nie("mse_cpu"),
    "binary_cross_entropy": _nie("binary_cross_entropy"),
    "binary_cross_entropy_with_logits": _nie("binary_cross_entropy_with_logits"),
    "nll_loss_nd": _nie("nll_loss_out_frame"), "bincount": _nie("bincount_cpu"),
    "poisson": _nie("poisson_cpu"), "max_pool_with_indices": _nie("max_pool2d"), "avg_pool": _nie("avg_pool2d"),
    "native_layer_norm": _nie("LayerNormKernelImpl"), "native_batch_norm": _nie("batch_norm"),
    "native_group_norm": _nie("GroupNormKernelImpl"), "scatter_reduce": _nie("scatter_reduce"),
    "cdist": lambda dt: RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {dt.legacy_name}"),
    "multinomial": lambda dt: RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                                           f"{dt.legacy_name}"),
    "isin": lambda dt: RuntimeError(f"Unsupported input type encountered for isin(): {dt.legacy_name}"),
    # supported for complex as torch (tests/ops/test_complex_more.py): the kernels compute in
    # complex and the autograd node conjugates their real formulas (holomorphic / bilinear)
    "logsumexp": None, "logcumsumexp": None, "renorm": None, "embedding_dense_backward": None,
    "convolution": None, "bilinear": None, "linalg_cross": None,
    "matrix_exp": None,     # supported: ember.ops.linalg_api computes it in complex128
    "nan_to_num": None,    # supported (below); listed so the coverage test sees it was considered
}


def _complex_arg(args):
    for a in args:
        if type(a) is np.ndarray:
            if a.dtype.kind == "c":
                return a.dtype
        elif type(a) is list:
            for x in a:
                if getattr(x, "dtype", None) is not None and x.dtype.kind == "c":
                    return x.dtype
        elif getattr(a, "dtype", None) is not None and getattr(a.dtype, "kind", "") == "c":
            return a.dtype     # a cupy array
    return None


def _rejecting(kernel, make_error):
    def k(xp, *args):
        d = _complex_arg(args)
        if d is not None:
            raise make_error(_t.from_numpy_dtype(d))
        return kernel(xp, *args)
    k.__name__ = getattr(kernel, "__name__", "kernel")
    k.__qualname__ = getattr(kernel, "__qualname__", k.__name__)
    k.__module__ = getattr(kernel, "__module__", __name__)    # the op's own module, for op inventories
    k.__wrapped__ = kernel
    return k


def _install_rejections():
    """Wrap each refusing op's kernel with the check (every dispatch path calls ``op.kernel``)
    and regenerate its binding, whose fast path then tests the dtypes inline and calls the
    unchecked kernel (see ``OpDef.complex_refusal``)."""
    from .registry import OPS, refresh_binding
    for name, make in _REJECT.items():
        op = OPS.get(name)
        if make is None or op is None or op.kernel is None:
            continue
        raw = op.kernel
        op.kernel = _rejecting(raw, make)
        op.complex_refusal, op.unchecked_kernel = make, raw
        ip = op.inplace_variant
        if ip is not None and ip.kernel is not None:
            ip.kernel = op.kernel
            ip.complex_refusal, ip.unchecked_kernel = make, raw
        refresh_binding(op)


_install_rejections()

from . import fft_ops  # noqa: E402,F401  (the DFT kernels ember.fft is built from)
from . import spectral  # noqa: E402,F401  (stft / istft)
