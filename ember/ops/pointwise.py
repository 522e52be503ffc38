"""Pointwise ops: arithmetic, math functions, comparisons, logical/bitwise,
clamping/selection, and the pointwise activations.

Each record: schema, a kernel over the array namespace (promotion via
``_helpers``), and a derivative formula in ember ops (so it can be
differentiated again). Broadcast gradients are reduced back with
``grad_for``.

Conventions shared by the kernels here:

* the result dtype follows PyTorch's promotion (``result_dtype``); float-only
  functions turn integer/bool results into the default float dtype;
* float16/bfloat16 are computed in float32 and rounded once at the end, the
  way PyTorch's CPU kernels do;
* Python integer scalars wrap into narrow integer dtypes (``int8 + 1000``)
  instead of raising, like PyTorch;
* gradients at kinks follow PyTorch (relu'(0) = 0, abs'(0) = 0, clamp passes
  the gradient at its bounds, maximum/minimum split ties evenly).
"""
from __future__ import annotations

import builtins
import cmath
import math

import numpy as np

from .. import types as _t
from ..tensor import Tensor, _make
from ..types import from_numpy_dtype
from . import _half_lanes, _native_small, api
from ._helpers import as_contiguous, broadcast_shapes, grad_for, int_zero_check, result_dtype
from .checked_scalar import check_fits, check_fits_floating
from .registry import defcomposite, defop as _defop

PW = ("pointwise",)
ND = PW + ("nondifferentiable",)
_SCALARS = (bool, int, float, complex, np.bool_, np.integer, np.floating, np.complexfloating)
_HALF = (_t.float16, _t.bfloat16)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# ---------------------------------------------------------------------- kernel helpers
def defop(schema, **kw):
    """``registry.defop`` with numpy's broadcasting ValueError turned into PyTorch's RuntimeError."""
    def deco(kernel):
        def checked(xp, *args):
            try:
                return kernel(xp, *args)
            except ValueError:
                shapes = [a.shape for a in args if hasattr(a, "shape") and hasattr(a, "ndim")]
                if len(shapes) > 1:
                    broadcast_shapes(*shapes)   # raises the RuntimeError when they do not broadcast
                raise
        checked.__name__ = kernel.__name__
        checked.__doc__ = kernel.__doc__
        return _defop(schema, **kw)(checked)
    return deco


def _is_scalar(x):
    return isinstance(x, _SCALARS)


def _dt(x):
    """ember dtype of a backend array."""
    return from_numpy_dtype(x.dtype)


def _floaty(dt):
    return dt if dt.category >= 2 else _t.get_default_dtype()


def _comp(dt):
    """The dtype a kernel computes in for result dtype ``dt``."""
    return _t.float32 if dt in _HALF else dt


def _arr(xp, x, dt):
    """``x`` (array or Python scalar) as an array of ember dtype ``dt``.

    Python integers wrap into narrow integer dtypes like PyTorch does (numpy
    would raise for ``int8 + 1000``)."""
    if _is_scalar(x):
        if dt.category == 1 and isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
            return xp.asarray(x).astype(dt.np)
        return xp.asarray(x, dtype=dt.np)
    if x.dtype != dt.np:
        return x.astype(dt.np)
    return x


def _arr_fit(xp, x, cdt, dt):
    """``_arr(xp, x, cdt)`` of a number PyTorch converts to ``dt`` with a check (a fill value, a
    bound, alpha): one that does not fit an integer ``dt`` raises instead of wrapping."""
    if _is_scalar(x):
        check_fits(x, dt)
    return _arr(xp, x, cdt)


def _operand(xp, x, dt, cdt):
    """``_arr(xp, x, cdt)`` of an operand of an op whose result dtype is ``dt``, rounded to ``dt``
    first when ``dt`` is float16/bfloat16 and the operand is of another dtype (a Python number,
    a 0-dim float32/float64/int64 tensor): torch's CPU TensorIterator casts every input to the
    common dtype before the kernel runs, so an add/sub/fmod/atan2/pow... kernel sees 3.3 as
    float16's 3.30078125 and only then computes in float32. The cast goes through float32, as
    c10::Half/BFloat16 are built from a float (see ``half_source``). mul, div and floor_divide
    read a one-element second operand unrounded (``_scalar_path_operand``)."""
    if dt in _HALF and (_is_scalar(x) or x.dtype != dt.np):
        with np.errstate(all="ignore"):
            x = (xp.asarray(x, dtype=np.float32) if _is_scalar(x) else x.astype(np.float32)).astype(dt.np)
    return _arr(xp, x, cdt)


def _scalar_path_operand(xp, x, dt, cdt, second):
    """An operand of mul / div / floor_divide (all rounding modes) with result dtype ``dt``. Their
    float16/bfloat16 CPU kernels read a one-element second operand (a Python number, a 0-dim or
    size-1 tensor: TensorIterator's ``is_scalar(2)``) unrounded, as ``original_scalar_value``;
    every other operand of another dtype (the first one, an int64 tensor of several elements) is
    cast to ``dt`` by TensorIterator before the kernel, as ``_operand``: int64 max // a float16
    tensor divides float16's inf (NaN), not 9.2e18."""
    if second and (_is_scalar(x) or x.size == 1):
        return _arr(xp, x, cdt)
    return _operand(xp, x, dt, cdt)


def _half_alpha(alpha, dt):
    """``alpha`` of add/sub/rsub as the float16/bfloat16 number torch's kernel multiplies by (the
    Scalar converted to the result dtype, through float32), as a float32."""
    return np.float32(np.float32(alpha).astype(dt.np))


def _alpha_scaled(xp, x_, y_, alpha, dt, x, y):
    """``y_ * alpha`` (float32 arrays of a half result ``dt``) as torch's add/sub kernel forms it
    before adding ``x_``: in float32 on its vector path, but rounded to ``dt`` on the scalar path
    that finishes each run (``_half_lanes``). ``x``, ``y``: the kernel's operands, to find those
    lanes; only a result laid out like one dense operand (the other a number or of size 1, or of
    the same shape and strides) is modelled, else the vector path's rounding is used throughout."""
    p = y_ * _half_alpha(alpha, dt)
    arrs = [v for v in (x, y) if not _is_scalar(v) and v.size > 1]
    if not arrs or any(type(v) is not np.ndarray for v in arrs) or \
            np.broadcast_shapes(np.shape(x_), np.shape(p)) != arrs[0].shape or \
            (len(arrs) == 2 and (arrs[1].shape != arrs[0].shape or arrs[1].strides != arrs[0].strides)):
        return p
    lanes = _half_lanes.elementwise_scalar_lanes(arrs[0])
    if lanes is None or not lanes.any():
        return p
    return np.where(lanes, p.astype(dt.np).astype(np.float32), p)


def _out(xp, r, dt):
    return xp.asarray(r).astype(dt.np, copy=False)


def _not_impl(kernel, dt):
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt.legacy_name}\'')


def _zeros(like):
    return api.zeros_like(like)


def _zeros_of(meta):
    """Zeros shaped like a (possibly unsaved) tensor argument."""
    return api.zeros(tuple(meta.shape), dtype=meta.dtype, device=meta.device)


def _mask_grad(mask, g):
    """``g`` where ``mask`` holds, 0 elsewhere (differentiable in ``g``)."""
    return api.where(mask, g, 0.0)


# ---------------------------------------------------------------------- erf family (numpy/cupy only)
def _cheb_fit(f, lo, hi, deg):
    """Chebyshev interpolant of ``f`` on [lo, hi] (coefficients, computed once: see ``_erf_fits``)."""
    from numpy.polynomial import chebyshev as C
    k = np.arange(deg + 1)
    t = np.cos(np.pi * (k + 0.5) / (deg + 1))
    x = 0.5 * (hi - lo) * t + 0.5 * (hi + lo)
    return lo, hi, C.chebfit(t, np.array([f(v) for v in x]), deg)


def _clenshaw(x, fit):
    """Evaluate a Chebyshev fit at ``x`` (float64 array), updating buffers in place
    (``np.multiply`` with ``out=`` reaches cupy through ``__array_ufunc__``)."""
    lo, hi, c = fit
    t = x * (2.0 / (hi - lo))
    t -= (lo + hi) / (hi - lo)
    t2 = t * 2.0
    b1 = t2 * 0.0
    b1 += c[-1]
    b2 = t2 * 0.0
    tmp = t2 * 0.0
    for ck in c[-2:0:-1]:
        np.multiply(t2, b1, out=tmp)
        tmp -= b2
        tmp += ck
        b2, b1, tmp = b1, tmp, b2
    b1 *= t
    b1 -= b2
    b1 += c[0]
    return b1


def _trim(fit, tol):
    """Drop the trailing Chebyshev coefficients below ``tol`` (relative to the first)."""
    lo, hi, c = fit
    keep = len(c)
    while keep > 2 and builtins.abs(c[keep - 1]) < tol * builtins.abs(c[0]):
        keep -= 1
    return lo, hi, c[:keep]


_ERF_FITS = {}


def _erf_fits(single):
    """(small-|x| erf fit, erfcx fits on [1, 8)), made on the first erf: fitting them at import
    cost ~2.5 ms of ``import ember`` (most of it importing numpy.polynomial). ``single``: the
    shorter series for float32/float16/bfloat16 results (relative error ~1e-10)."""
    fits = _ERF_FITS.get(single)
    if fits is None:
        small64 = _trim(_cheb_fit(lambda s: math.erf(math.sqrt(s)) / math.sqrt(s) if s > 0 else 2 / math.sqrt(math.pi),
                                  0.0, 1.0, 18), 1e-18)
        erfcx64 = [_trim(_cheb_fit(lambda v: math.erfc(v) * math.exp(v * v), a, b, 24), 1e-18)
                   for a, b in ((1, 2), (2, 4), (4, 8))]
        _ERF_FITS[False] = small64, erfcx64
        _ERF_FITS[True] = _trim(small64, 1e-10), [_trim(f, 1e-10) for f in erfcx64]
        fits = _ERF_FITS[single]
    return fits


_SQRT_PI = math.sqrt(math.pi)


def _erfc_pos(xp, z, fits):
    """erfc(z) for z >= 1 (float64 array), accurate to ~1e-14 relative."""
    out = xp.zeros_like(z)
    for fit in fits:
        m = (z >= fit[0]) & (z < fit[1])
        if m.any():
            v = z[m]
            out[m] = xp.exp(-v * v) * _clenshaw(v, fit)
    m = (z >= 8) & (z < 30)
    if m.any():
        v = z[m]
        t = 1.0 / (2.0 * v * v)
        ser = xp.ones_like(v)
        term = xp.ones_like(v)
        for k in range(1, 16):
            term = -term * (2 * k - 1) * t
            ser = ser + term
        out[m] = xp.exp(-v * v) / (v * _SQRT_PI) * ser
    return out


def _device_erf(xp):
    """cupy's own erf/erfc kernels (``cupyx.scipy.special``, CUDA's double-precision erf,
    within 2 ulp) when ``xp`` is cupy, else None. Why: on the GPU the Chebyshev path below is
    ~40 small kernels and six ``any()`` device-to-host syncs per call -- 75 of the 95 ms of
    ten eager MLP inference steps on an H100 (session 19's profile)."""
    if xp is np or getattr(xp, "__name__", "") != "cupy":
        return None
    try:
        from cupyx.scipy import special
    except ImportError:
        return None
    return special


def _erf_erfc(xp, x, single=False):
    """(erf(x), erfc(x)) for a float64 array (``single``: to float32 accuracy only)."""
    x = xp.asarray(x, dtype=np.float64)
    if xp is np:
        from ._native_special import erf_erfc     # the C library's erf/erfc when it can be built
        pair = erf_erfc(x)
        if pair is not None:
            return pair
    special = _device_erf(xp)
    if special is not None:
        return special.erf(x), special.erfc(x)
    small_fit, fits = _erf_fits(single)
    ax = xp.abs(x)
    erf = xp.empty_like(x)
    erfc = xp.empty_like(x)
    small = ax < 1.0
    if small.any():
        v = x[small]
        e = v * _clenshaw(v * v, small_fit)
        erf[small] = e
        erfc[small] = 1.0 - e
    big = ~small
    if big.any():
        v = x[big]
        ec = _erfc_pos(xp, xp.abs(v), fits)
        neg = v < 0
        ec = xp.where(xp.isnan(v), np.nan, ec)
        erf[big] = xp.where(neg, ec - 1.0, 1.0 - ec)
        erfc[big] = xp.where(neg, 2.0 - ec, ec)
    return erf, erfc


def _erfinv(xp, y, single=False):
    """Inverse error function of a float64 array: a closed-form first guess
    refined by Halley steps on erf (|y| <= 0.5) or on erfc (|y| > 0.5, where
    1 - |y| is exact, so the tails keep full relative accuracy). This is the fallback: where a
    C++ compiler is available, numpy arrays take the vectorised series of ``_erfinv_cpp``."""
    if xp is np:
        r = _native_small.erfinv(y)
        if r is not None:
            return r
    y = xp.asarray(y, dtype=np.float64)
    ay = xp.abs(y)
    ok = ay < 1.0
    w = xp.where(ok, ay, 0.0)
    # first guess (relative error ~2e-3): sqrt(sqrt(c^2 - l/a) - c), c = 2/(pi a) + l/2, l = log(1 - w^2)
    a = 0.147
    lg = xp.log1p(-w * w)
    c = 2.0 / (math.pi * a) + 0.5 * lg
    x = xp.sqrt(xp.maximum(xp.sqrt(c * c - lg / a) - c, 0.0))
    tail = w > 0.5
    rest = 1.0 - w
    k = 2.0 / _SQRT_PI
    for _ in range(2 if single else 4):
        e, ec = _erf_erfc(xp, x, single)
        f = xp.where(tail, rest - ec, e - w)        # both: erf(x) - w
        d = f / (k * xp.exp(-x * x))
        d = xp.where(xp.isfinite(d), d, 0.0)
        x = x - d / (1.0 + x * d)
    x = xp.where(w == 0, 0.0, x)
    out = xp.where(ok, x, xp.where(ay == 1.0, np.inf, np.nan))
    out = xp.where(xp.isnan(y), np.nan, out)
    return xp.where(xp.signbit(y), -out, out)      # (signbit: erfinv(-0.0) is -0.0, as PyTorch)


# ---------------------------------------------------------------------- arithmetic
def _scalar_of(v):
    """A Scalar argument given as a 0-d tensor (``add(x, y, alpha=torch.tensor(2.))``) as its
    Python number, as PyTorch's argument parser does (a fake tensor raises: data-dependent)."""
    return v.item() if isinstance(v, Tensor) else v


def _check_alpha(dt, alpha):
    if alpha is None or alpha == 1 and not isinstance(alpha, (bool, np.bool_)):
        return
    if isinstance(alpha, (bool, np.bool_)) and dt is not _t.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if dt.category < 2 and isinstance(alpha, (float, np.floating)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


_FAST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _addsub(xp, a, b, alpha, sign):
    if type(alpha) is int and alpha == 1 and type(a) is type(b) is np.ndarray and a.dtype == b.dtype \
            and a.dtype in _FAST_FLOATS:
        # hot path of eager arithmetic: same float dtype, nothing to promote or check
        try:
            return np.add(a, b) if sign > 0 else np.subtract(a, b)
        except ValueError:
            broadcast_shapes(a.shape, b.shape)  # raises PyTorch's size-mismatch error
            raise
    alpha = _scalar_of(alpha)
    dt = result_dtype(a, b)
    _check_alpha(dt, alpha)
    cdt = _comp(dt)
    a_ = _operand(xp, a, dt, cdt)
    b_ = _operand(xp, b, dt, cdt)
    if alpha != 1 or isinstance(alpha, (bool, np.bool_)):
        if dt in _HALF:
            check_fits(alpha, dt)
            b_ = _alpha_scaled(xp, a_, b_, alpha, dt, a, b)
        else:
            b_ = b_ * _arr_fit(xp, alpha, cdt, dt) if dt is not _t.bool_ else b_ & bool(alpha)
    if dt is _t.bool_:
        return _out(xp, a_ | b_, dt)
    with np.errstate(all="ignore"):
        return _out(xp, a_ + b_ if sign > 0 else a_ - b_, dt)


def _sub_bool_check(a, b):
    ab = (a.dtype == np.bool_) if not _is_scalar(a) else isinstance(a, (bool, np.bool_))
    bb = (b.dtype == np.bool_) if not _is_scalar(b) else isinstance(b, (bool, np.bool_))
    if ab and bb:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                           "`^` or `logical_xor()` operator instead.")
    if ab or bb:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


@defop("add(Tensor|Scalar self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, inplace=True,
       save=())
def add(xp, a, b, alpha=1):
    return _addsub(xp, a, b, alpha, 1)


@add.derivative
def _add_bw(ctx, g):
    a, b, alpha = ctx.args
    gb = grad_for(g, b) if ctx.needs_input_grad[1] else None
    if gb is not None and alpha != 1:
        gb = gb * alpha
    return grad_for(g, a) if ctx.needs_input_grad[0] else None, gb


@defop("sub(Tensor|Scalar self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, inplace=True,
       save=())
def sub(xp, a, b, alpha=1):
    _sub_bool_check(a, b)
    return _addsub(xp, a, b, alpha, -1)


@sub.derivative
def _sub_bw(ctx, g):
    a, b, alpha = ctx.args
    gb = grad_for(-g, b) if ctx.needs_input_grad[1] else None
    if gb is not None and alpha != 1:
        gb = gb * alpha
    return grad_for(g, a) if ctx.needs_input_grad[0] else None, gb


@defop("rsub(Tensor self, Tensor|Scalar other, *, Scalar alpha=1) -> Tensor", tags=PW, save=(),
       method=False, scalar_overload=("other",), grad_fn_name=lambda a: "RsubBackward1" if not hasattr(
           a[1], "_data") else "RsubBackward0")
def rsub(xp, a, b, alpha=1):
    """other - alpha * self."""
    _sub_bool_check(a, b)
    alpha = _scalar_of(alpha)
    dt = result_dtype(a, b)
    _check_alpha(dt, alpha)
    cdt = _comp(dt)
    a_ = _operand(xp, a, dt, cdt)
    b_ = _operand(xp, b, dt, cdt)
    if alpha != 1:
        if dt in _HALF:
            check_fits(alpha, dt)
            a_ = _alpha_scaled(xp, b_, a_, alpha, dt, b, a)
        else:
            a_ = a_ * _arr_fit(xp, alpha, cdt, dt)
    return _out(xp, b_ - a_, dt)


@rsub.derivative
def _rsub_bw(ctx, g):
    a, b, alpha = ctx.args
    ga = grad_for(-g, a) if ctx.needs_input_grad[0] else None
    if ga is not None and alpha != 1:
        ga = ga * alpha
    return ga, grad_for(g, b) if ctx.needs_input_grad[1] else None


@defop("mul(Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=PW, inplace=True)
def mul(xp, a, b):
    if type(a) is type(b) is np.ndarray and a.dtype == b.dtype and a.dtype in _FAST_FLOATS:
        try:
            return np.multiply(a, b)
        except ValueError:
            broadcast_shapes(a.shape, b.shape)  # raises PyTorch's size-mismatch error
            raise
    dt = result_dtype(a, b)
    cdt = _comp(dt)
    a_ = _scalar_path_operand(xp, a, dt, cdt, False)
    b_ = _scalar_path_operand(xp, b, dt, cdt, True)
    if dt is _t.bool_:
        return _out(xp, xp.logical_and(a_, b_), dt)
    with np.errstate(all="ignore"):
        return _out(xp, a_ * b_, dt)


@mul.derivative(save_if_grad={"self": "other", "other": "self"})
def _mul_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(g * b, a) if n[0] else None,
            grad_for(g * a, b) if n[1] else None)


def _floor_div(xp, a, b, dt, kname):
    """Python-style floor division in result dtype ``dt``.

    Half-precision results compute in float32, the operands rounded to the half
    type first as ``_scalar_path_operand`` says (a one-element second operand is
    not), as PyTorch's CPU kernels do."""
    if dt is _t.bool_:
        raise _not_impl(kname, dt)
    if dt.category == 1:
        a_, b_ = _arr(xp, a, dt), _arr(xp, b, dt)
        int_zero_check(xp, b_)
        return xp.floor_divide(a_, b_)
    cdt = _comp(dt)
    with np.errstate(all="ignore"):
        a_ = _scalar_path_operand(xp, a, dt, cdt, False)
        b_ = _scalar_path_operand(xp, b, dt, cdt, True)
        if dt in _HALF and not _second_is_scalar(b):
            return _half_floor_div_stepwise(xp, a_, b_, dt)
        return xp.floor_divide(a_, b_)


def _second_is_scalar(b):
    """Whether torch's CPU kernel reads ``b`` (the second operand) as one unrounded float
    (TensorIterator's ``is_scalar(2)``: a number or a one-element tensor)."""
    return _is_scalar(b) or b.size == 1


def _to_half(xp, x, dt):
    """Float32 array ``x`` rounded to half type ``dt`` and back: one step of a kernel that works
    on c10::Half / c10::BFloat16 values, each arithmetic result rounded to the type."""
    return x.astype(dt.np).astype(np.float32)


def _half_floor_div_stepwise(xp, a, b, dt):
    """Floor division of two float16/bfloat16 tensors (float32 arrays holding ``dt`` values) as
    PyTorch's CPU ``div_floor_floating(_vec)`` computes it on Half/BFloat16 operands: fmod, the
    subtraction, the division and the -1 / +1 fix-ups are each rounded to ``dt`` (Vectorized<Half>
    and c10::Half arithmetic both round every result), so 77312 // -320 in bfloat16 is -243, not
    the exact -242. A one-element second operand takes the float32 path instead (``_floor_div``)."""
    r = lambda x: _to_half(xp, x, dt)   # noqa: E731
    basic = r(a / b)
    mod = r(xp.fmod(a, b))
    # the vector kernel's fix-up for a quotient that overflows while ``a`` is finite
    num = xp.where((xp.abs(basic) == np.inf) & (xp.abs(a) != np.inf), a, r(a - mod))
    div = r(num / b)
    div = xp.where((mod != 0) & ((b < 0) ^ (mod < 0)), r(div - 1), div)
    fl = xp.floor(div)
    fl = xp.where(r(div - fl) > 0.5, r(fl + 1), fl)
    fl = xp.where(div == 0, xp.copysign(xp.zeros_like(fl), basic), fl)
    return xp.where(b == 0, basic, fl)


def _div_name(args):
    return "DivBackward2" if args[2] is not None else "DivBackward0"


@defop("div(Tensor|Scalar self, Tensor|Scalar other, *, str? rounding_mode=None) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_div_name)
def div(xp, a, b, rounding_mode=None):
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    dt = result_dtype(a, b)
    if rounding_mode is None:
        dt = _floaty(dt)
        cdt = _comp(dt)
        with np.errstate(all="ignore"):
            return _out(xp, xp.true_divide(_scalar_path_operand(xp, a, dt, cdt, False),
                                           _scalar_path_operand(xp, b, dt, cdt, True)), dt)
    if dt.is_complex:
        raise _not_impl(f"div_{rounding_mode}_cpu", dt)
    if rounding_mode == "floor":
        return _out(xp, _floor_div(xp, a, b, dt, "div_floor_cpu"), dt)
    if dt is _t.bool_:
        raise _not_impl("div_trunc_cpu", dt)
    if dt.category == 1:
        a_, b_ = _arr(xp, a, dt), _arr(xp, b, dt)
        int_zero_check(xp, b_)
        q = xp.floor_divide(a_, b_)
        fix = (q < 0) & (q * b_ != a_)
        return _out(xp, q + fix.astype(q.dtype), dt)
    cdt = _comp(dt)
    with np.errstate(all="ignore"):
        q = xp.true_divide(_scalar_path_operand(xp, a, dt, cdt, False),
                           _scalar_path_operand(xp, b, dt, cdt, True))
        if dt in _HALF and not _second_is_scalar(b):
            q = _to_half(xp, q, dt)   # torch's Half/BFloat16 kernel: trunc(a / b), a / b rounded first
        return _out(xp, xp.trunc(q), dt)


@div.derivative(save_if_grad={"self": "other"})
def _div_bw(ctx, g):
    a, b, mode = ctx.args
    n = ctx.needs_input_grad
    if mode is not None:
        return (_zeros_of(a) if n[0] else None, _zeros_of(b) if n[1] else None)
    gb = None
    if n[1]:
        # torch's -grad * ((self / other) / other), each step rounded (not -grad * self / other**2:
        # float32 7 / 1.5**2 differs in the last bit); ``div``, not ``/``: a number ``self`` is
        # a true division in torch, where ``7 / b`` (``__rtruediv__``) is reciprocal(b) * 7
        gb = grad_for(-g * a / (b * b) if g.dtype.is_complex else -g * api.div(api.div(a, b), b), b)
    return (grad_for(g / b, a) if n[0] else None, gb)


@defcomposite("rdiv(Tensor self, Tensor|Scalar other) -> Tensor", method=False)
def rdiv(self, other):
    """other / self, computed as PyTorch's ``__rtruediv__`` does: reciprocal(self) * other."""
    return api.reciprocal(self) * other


@defcomposite("true_divide(Tensor|Scalar self, Tensor|Scalar other) -> Tensor")
def true_divide(self, other):
    return api.div(self, other)


@defop("floor_divide(Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=PW, inplace=True,
       grad_fn_name="NotImplemented")
def floor_divide(xp, a, b):
    dt = result_dtype(a, b)
    return _out(xp, _floor_div(xp, a, b, dt, "div_floor_cpu"), dt)


@floor_divide.derivative
def _floor_divide_bw(ctx, g):
    raise RuntimeError("the derivative for 'floor_divide' is not implemented.")


def _need_a_tensor(name, a, b):
    """PyTorch's remainder / pow have (Tensor, Tensor), (Tensor, Scalar) and (Scalar, Tensor)
    overloads only: two numbers match none (unlike add / div, whose numbers both become tensors)."""
    if _is_scalar(a) and _is_scalar(b):
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"({type(a).__name__}, {type(b).__name__})")


def _mod_name(base):
    def name(args):
        if not isinstance(args[0], Tensor):
            return "NotImplemented"     # remainder(Scalar, Tensor): PyTorch has no derivative for it
        return f"{base}Backward1" if isinstance(args[1], Tensor) else f"{base}Backward0"
    return name


def _float_remainder(xp, a, b):
    """PyTorch's floating remainder: ``fmod`` moved into the divisor's sign by adding ``b``. A zero
    result keeps fmod's sign, the dividend's (remainder(-4., 2.) is -0.0); numpy's and Python's
    take the divisor's (+0.0)."""
    m = xp.fmod(a, b)
    fix = (m != 0) & ((b < 0) != (m < 0))
    if type(m) is np.ndarray:   # in place into fmod's result: its layout is the inputs' (where() is C order)
        return np.add(m, b, out=m, where=fix)
    return xp.where(fix, m + b, m)


def _def_mod(name, base, np_name, rounding, self_kind):
    """remainder (sign of the divisor, floor quotient) and fmod (sign of the dividend,
    truncated quotient): one kernel and one derivative shape, differing in the numpy
    function and the quotient's rounding. ``self_kind``: PyTorch has remainder(Scalar, Tensor)
    but no fmod(Scalar, Tensor)."""
    @defop(f"{name}({self_kind} self, Tensor|Scalar other) -> Tensor", tags=PW, inplace=True,
           grad_fn_name=_mod_name(base), scalar_overload=("self", "other"))
    def kernel(xp, a, b):
        _need_a_tensor(name, a, b)
        fn = getattr(xp, np_name)
        dt = result_dtype(a, b)
        if dt is _t.bool_:
            raise _not_impl(f"{name}_cpu", dt)
        if dt.category == 1:
            a_, b_ = _arr(xp, a, dt), _arr(xp, b, dt)
            int_zero_check(xp, b_)
            return _out(xp, fn(a_, b_), dt)
        cdt = _comp(dt)
        if np_name == "remainder":
            fn = lambda x, y: _float_remainder(xp, x, y)     # noqa: E731
        with np.errstate(all="ignore"):
            return _out(xp, fn(_operand(xp, a, dt, cdt), _operand(xp, b, dt, cdt)), dt)

    @kernel.derivative
    def _bw(ctx, g):
        a, b = ctx.args
        n = ctx.needs_input_grad
        if not isinstance(a, Tensor):
            raise RuntimeError(f"derivative for aten::{name} is not implemented")
        return (grad_for(g, a) if n[0] else None,
                grad_for(-g * api.div(a, b, rounding_mode=rounding), b) if n[1] else None)
    return kernel


remainder = _def_mod("remainder", "Remainder", "remainder", "floor", "Tensor|Scalar")
fmod = _def_mod("fmod", "Fmod", "fmod", "trunc", "Tensor")


@defop("neg(Tensor self) -> Tensor", tags=PW, inplace=True, save=())
def neg(xp, a):
    if a.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return xp.asarray(xp.negative(a))


@neg.derivative
def _neg_bw(ctx, g):
    return (-g,)


# ---------------------------------------------------------------------- pow
def _pow_name(args):
    if not isinstance(args[0], Tensor):
        return "PowBackward2"
    return "PowBackward1" if isinstance(args[1], Tensor) else "PowBackward0"


def _int_pow(xp, a_, b_):
    """Integer power; negative exponents give 1, -1 or 0 like PyTorch (1/a truncated)."""
    negative = b_ < 0
    if not bool(xp.any(negative)):
        return xp.power(a_, b_)
    safe = xp.where(negative, 0, b_).astype(b_.dtype)
    pos = xp.power(a_, safe)
    odd = (b_ % 2) != 0
    one = xp.ones_like(pos)
    inv = xp.where(a_ == 1, one, xp.where(a_ == -1, xp.where(odd, -one, one), 0 * one))
    return xp.where(negative, inv, pos)


@defop("pow(Tensor|Scalar self, Tensor|Scalar exponent) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_pow_name, scalar_overload=("self", "exponent"))
def pow(xp, a, b):
    _need_a_tensor("pow", a, b)
    dt = result_dtype(a, b)
    if dt is _t.bool_ and not _is_scalar(b):
        # PyTorch's Tensor-Tensor and Scalar-Tensor pow have no bool kernel; its Tensor-Scalar
        # pow takes a bool exponent (True is x ** 1, a copy; False is x ** 0, ones)
        raise _not_impl("pow", dt)
    if _is_scalar(b):
        _check_exponent(b, dt)
    if dt.category < 2:
        if _is_scalar(b) and not isinstance(b, (bool, np.bool_)) and b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        cdt = _t.uint8 if dt is _t.bool_ else dt
        return _out(xp, _int_pow(xp, _arr(xp, a, cdt), _arr(xp, b, cdt)), dt)
    cdt = _comp(dt)
    if _is_scalar(b) and not isinstance(b, bool) and dt is not _t.float16 and b in (0.5, -0.5):
        # PyTorch's pow(Tensor, Scalar) runs sqrt / rsqrt here (float, double, bfloat16):
        # (-inf) ** 0.5 is NaN and (-0.0) ** -0.5 is -inf, unlike C pow
        with np.errstate(all="ignore"):
            if b < 0 and dt is _t.bfloat16 and type(a) is np.ndarray:
                return _out(xp, _half_lanes.half_rsqrt(_arr(xp, a, cdt), dt.np, 2 * _half_lanes.half_vec_len()),
                            dt)     # its rsqrt kernel's arithmetic, in pow's blocks
            r = xp.sqrt(_arr(xp, a, cdt))
            return _out(xp, r if b > 0 else 1 / r, dt)
    if dt is _t.bfloat16 and _is_scalar(b) and not isinstance(b, bool) and b in (3, -2) and not _is_scalar(a):
        # PyTorch's bfloat16 pow(Tensor, 3 / -2) multiplies in bfloat16 (x * x rounded, then
        # times x, or its reciprocal, rounded again); float16 and other exponents round once
        a_ = _arr(xp, a, cdt)
        sq = _arr(xp, _arr(xp, a_ * a_, dt), cdt)
        with np.errstate(all="ignore"):
            return _out(xp, sq * a_ if b == 3 else 1 / sq, dt)
    if dt in (_t.float16, _t.bfloat16):
        # PyTorch rounds a Python-number base or exponent of pow to the tensor's dtype first
        # (bfloat16 ** 0.3 raises to 0.30078125)
        # (the exponent by a checked conversion, an error out of range; the base wraps to inf)
        # (a 0-dim tensor of another dtype is cast by TensorIterator: ``_operand``)
        a = _operand(xp, a, dt, dt)
        b = _scalar_to_low(xp, b, dt) if _is_scalar(b) else _operand(xp, b, dt, dt)
    a_ = _arr(xp, a, cdt)
    b_ = b if isinstance(b, (int, float)) and not isinstance(b, bool) else _arr(xp, b, cdt)
    with np.errstate(all="ignore"):
        return _out(xp, _c_pow(xp, a_, b_), dt)


def _check_exponent(b, dt):
    """pow(Tensor, Scalar) converts its exponent to an integer or float16 / bfloat16 result dtype
    by a checked conversion (float16 ** 65519 and int32 ** 2**40 raise, as PyTorch). A negative
    integer exponent of an integer result has its own error, which PyTorch reports first."""
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, float, np.integer, np.floating)):
        return
    if dt.category < 2 and b < 0:
        return
    check_fits(b, dt)
    if dt in _HALF:         # float32 / float64 take the exponent as a double, unchecked
        check_fits_floating(b, dt)


def _scalar_to_low(xp, v, dt):
    """A Python number rounded to float16/bfloat16 as PyTorch's checked conversion does: a
    finite number out of the dtype's range is an error."""
    r = _arr(xp, v, dt)
    if math.isfinite(float(v)) and not np.isfinite(np.float32(r)):
        raise RuntimeError(f"value cannot be converted to type c10::{'Half' if dt is _t.float16 else 'BFloat16'} "
                           f"without overflow")
    return r


def _c_pow(xp, a, b):
    """C's pow: numpy's (SIMD) power takes x ** 0.5 as sqrt(x), so (-inf) ** 0.5 is NaN and
    (-0.0) ** 0.5 is -0.0 there; C pow (PyTorch's std::pow) gives +inf and +0.0."""
    r = xp.power(a, b)
    if _is_scalar(b) and b != 0.5:
        return r
    fix = (b == 0.5) & ((a == 0) | (a == -np.inf))
    if fix.any():
        r = xp.where(fix, xp.where(a == 0, 0.0, np.inf).astype(r.dtype), r)
    return r


@pow.derivative
def _pow_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    ga = gb = None
    if n[0]:
        if _is_scalar(b):
            ga = _zeros(g) if b == 0 else g * b * a ** (b - 1)
        else:
            ga = grad_for(api.where(b == 0, 0.0, g * b * a ** (b - 1)), a)
    if n[1]:
        out = a ** b
        if _is_scalar(a):
            if a == 0:
                gb = grad_for(api.where(api.real(b) >= 0, 0.0, g * out * float("-inf")), b)
            else:
                if isinstance(a, complex) or b.dtype.is_complex:
                    la = cmath.log(a)      # the scalar base joins the complex dtype: log's principal branch
                else:
                    la = math.log(a) if a > 0 else float("nan")
                gb = grad_for(g * out * la, b)
        else:
            gb = grad_for(api.where((a == 0) & (api.real(b) >= 0), 0.0, g * out * api.log(a)), b)
    return ga, gb


@defcomposite("square(Tensor self) -> Tensor")
def square(self):
    return api.pow(self, 2)


@defop("reciprocal(Tensor self) -> Tensor", tags=PW, inplace=True, save=(), save_result=True)
def reciprocal(xp, a):
    dt = _floaty(_dt(a))
    with np.errstate(all="ignore"):
        return _out(xp, 1.0 / a.astype(_comp(dt).np, copy=False), dt)


@reciprocal.derivative
def _reciprocal_bw(ctx, g):
    r = ctx.result
    return (-g * r * r,)


# ---------------------------------------------------------------------- unary float functions
def _unary(name, fn, *, grad_fn_name=None, inplace=True, save=None, save_result=False, method=True,
           tags=PW):
    """Register a float-valued unary op ``name`` computing ``fn(xp, x)``."""
    def kernel(xp, a):
        dt = _floaty(_dt(a))
        with np.errstate(all="ignore"):
            r = fn(xp, a.astype(_comp(dt).np, copy=False))
        return _out(xp, r, dt)
    kernel.__name__ = name
    return defop(f"{name}(Tensor self) -> Tensor", tags=tags, inplace=inplace, grad_fn_name=grad_fn_name,
                 save=save, save_result=save_result, method=method)(kernel)


def _erf_kernel(which):
    """erf/erfc in float64 arithmetic; float32-accurate series for narrower dtypes."""
    return lambda xp, x: _erf_erfc(xp, x, x.dtype != np.float64)[which]


exp = _unary("exp", lambda xp, x: xp.exp(x), save=(), save_result=True)
exp.derivative(lambda ctx, g: (g * ctx.result,))

exp2 = _unary("exp2", lambda xp, x: xp.exp2(x), save=(), save_result=True)
exp2.derivative(lambda ctx, g: (g * ctx.result * _LN2,))

expm1 = _unary("expm1", lambda xp, x: xp.expm1(x), save=(), save_result=True)
expm1.derivative(lambda ctx, g: (g * (ctx.result + 1),))

log = _unary("log", lambda xp, x: xp.log(x))
log.derivative(lambda ctx, g: (g / ctx.args[0],))

log2 = _unary("log2", lambda xp, x: xp.log2(x))
log2.derivative(lambda ctx, g: (g / (ctx.args[0] * _LN2),))

log10 = _unary("log10", lambda xp, x: xp.log10(x))
log10.derivative(lambda ctx, g: (g / (ctx.args[0] * _LN10),))

log1p = _unary("log1p", lambda xp, x: xp.log1p(x), grad_fn_name="Log1PBackward0")
log1p.derivative(lambda ctx, g: (g / (ctx.args[0] + 1),))

sqrt = _unary("sqrt", lambda xp, x: xp.sqrt(x), save=(), save_result=True)
sqrt.derivative(lambda ctx, g: (g / (2 * ctx.result),))

def _rsqrt_kernel(xp, a):
    dt = _floaty(_dt(a))
    with np.errstate(all="ignore"):
        x = a.astype(_comp(dt).np, copy=False)
        if dt in _HALF and type(x) is np.ndarray:
            # torch's scalar lanes (a vector loop's tail) round the root to the half dtype first
            return _out(xp, _half_lanes.half_rsqrt(x, dt.np), dt)
        return _out(xp, 1.0 / xp.sqrt(x), dt)


_rsqrt_kernel.__name__ = "rsqrt"
rsqrt = defop("rsqrt(Tensor self) -> Tensor", tags=PW, inplace=True, save=(), save_result=True)(_rsqrt_kernel)


@rsqrt.derivative
def _rsqrt_bw(ctx, g):
    r = ctx.result
    if r.dtype in _HALF:
        return (-0.5 * g * r.pow(3),)       # torch's formula, rounded as its half steps
    return (-0.5 * g * r * r * r,)


sin = _unary("sin", lambda xp, x: xp.sin(x))
sin.derivative(lambda ctx, g: (g * api.cos(ctx.args[0]),))

cos = _unary("cos", lambda xp, x: xp.cos(x))
cos.derivative(lambda ctx, g: (-g * api.sin(ctx.args[0]),))

tan = _unary("tan", lambda xp, x: xp.tan(x), save=(), save_result=True)
tan.derivative(lambda ctx, g: (g * (1 + ctx.result * ctx.result),))

asin = _unary("asin", lambda xp, x: xp.arcsin(x))
asin.derivative(lambda ctx, g: (g * api.rsqrt(1 - ctx.args[0] * ctx.args[0]),))

acos = _unary("acos", lambda xp, x: xp.arccos(x))
acos.derivative(lambda ctx, g: (-g * api.rsqrt(1 - ctx.args[0] * ctx.args[0]),))

atan = _unary("atan", lambda xp, x: xp.arctan(x))
atan.derivative(lambda ctx, g: (g / (1 + ctx.args[0] * ctx.args[0]),))

sinh = _unary("sinh", lambda xp, x: xp.sinh(x))
sinh.derivative(lambda ctx, g: (g * api.cosh(ctx.args[0]),))

cosh = _unary("cosh", lambda xp, x: xp.cosh(x))
cosh.derivative(lambda ctx, g: (g * api.sinh(ctx.args[0]),))

tanh = _unary("tanh", lambda xp, x: xp.tanh(x), save=(), save_result=True)
tanh.derivative(lambda ctx, g: (g * (1 - ctx.result * ctx.result),))

asinh = _unary("asinh", lambda xp, x: xp.arcsinh(x))
asinh.derivative(lambda ctx, g: (g * api.rsqrt(ctx.args[0] * ctx.args[0] + 1),))

acosh = _unary("acosh", lambda xp, x: xp.arccosh(x))
acosh.derivative(lambda ctx, g: (g * api.rsqrt(ctx.args[0] * ctx.args[0] - 1),))

atanh = _unary("atanh", lambda xp, x: xp.arctanh(x))
atanh.derivative(lambda ctx, g: (g / (1 - ctx.args[0] * ctx.args[0]),))

sigmoid = _unary("sigmoid", lambda xp, x: 1.0 / (1.0 + xp.exp(-x)), save=(), save_result=True)
# torch's order: (g * (1 - y)) * y (float16 computes it in half steps, so the order shows)
sigmoid.derivative(lambda ctx, g: (g * (1 - ctx.result) * ctx.result,))

_TWO_OVER_SQRT_PI = 2.0 / _SQRT_PI

erf = _unary("erf", _erf_kernel(0))
erf.derivative(lambda ctx, g: (g * _TWO_OVER_SQRT_PI * api.exp(-ctx.args[0] * ctx.args[0]),))

erfc = _unary("erfc", _erf_kernel(1))
erfc.derivative(lambda ctx, g: (-g * _TWO_OVER_SQRT_PI * api.exp(-ctx.args[0] * ctx.args[0]),))

erfinv = _unary("erfinv", lambda xp, x: _erfinv(xp, x, x.dtype != np.float64), save=(), save_result=True)
@erfinv.derivative
def _erfinv_bw(ctx, g):
    r = ctx.result
    from .reduction import kernel_of, unrecorded
    if unrecorded(g, r) and r._data.ndim and g._data.ndim:
        # (the formula below as its kernels, without a dispatcher round each; arrays of at least
        # one dim, whose ufunc results stay arrays)
        mul = kernel_of("mul")
        out = mul(np, mul(np, g._data, _SQRT_PI / 2), kernel_of("exp")(np, mul(np, r._data, r._data)))
        if type(out) is np.ndarray:
            return (_make(out, g.device),)
    return (g * (_SQRT_PI / 2) * api.exp(r * r),)


@defop("atan2(Tensor self, Tensor other) -> Tensor", tags=PW, inplace=True)
def atan2(xp, a, b):
    dt = _floaty(result_dtype(a, b))
    cdt = _comp(dt)
    return _out(xp, xp.arctan2(_operand(xp, a, dt, cdt), _operand(xp, b, dt, cdt)), dt)


@atan2.derivative
def _atan2_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    d = a * a + b * b
    return (grad_for(g * b / d, a) if n[0] else None,
            grad_for(-g * a / d, b) if n[1] else None)


@defop("logit(Tensor self, float? eps=None) -> Tensor", tags=PW, inplace=True)
def logit(xp, a, eps=None):
    dt = _floaty(_dt(a))
    x = a.astype(_comp(dt).np, copy=False)
    if eps is not None:
        x = xp.clip(x, eps, 1.0 - eps).astype(x.dtype, copy=False)
    with np.errstate(all="ignore"):
        return _out(xp, xp.log(x / (1 - x)), dt)


@logit.derivative
def _logit_bw(ctx, g):
    x, eps = ctx.args
    d = g / (x * (1 - x))
    if eps is None:
        # PyTorch's logit_backward: NaN outside [0, 1] (where the forward is NaN too), not the
        # finite value the formula gives there
        return (api.where((x < 0) | (x > 1), float("nan"), d),)
    return (_mask_grad((x >= eps) & (x <= 1.0 - eps), d),)


# ---------------------------------------------------------------------- sign, abs, rounding
@defop("abs(Tensor self) -> Tensor", tags=PW, inplace=True)
def abs(xp, a):
    if a.dtype == np.bool_:
        raise _not_impl("abs_cpu", _t.bool_)
    return xp.asarray(xp.abs(a))


@abs.derivative
def _abs_bw(ctx, g):
    z = ctx.args[0]
    # complex: d|z| is torch's grad * z / |z| (0 at 0), i.e. grad * sgn(z)
    return (g * (api.sgn(z) if z.dtype.is_complex else api.sign(z)),)


@defop("sign(Tensor self) -> Tensor", tags=PW, inplace=True, save=())
def sign(xp, a):
    if a.dtype == np.bool_:
        return a.copy()
    x = a.astype(_comp(_dt(a)).np, copy=False)
    # (0 < x) - (x < 0), as PyTorch: NaN gives 0 (xp.sign would give NaN)
    return _out(xp, (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype), _dt(a))


@sign.derivative
def _sign_bw(ctx, g):
    return (_zeros(g),)


def _rounding(name, fn, kname):
    def kernel(xp, a):
        dt = _dt(a)
        if dt is _t.bool_:
            raise _not_impl(kname, dt)
        if dt.category < 2:
            return a.copy()
        return _out(xp, fn(xp, a.astype(_comp(dt).np, copy=False)), dt)
    kernel.__name__ = name
    op = defop(f"{name}(Tensor self) -> Tensor", tags=PW, inplace=True, save=())(kernel)
    op.derivative(lambda ctx, g: (_zeros(g),))
    return op


floor = _rounding("floor", lambda xp, x: xp.floor(x), "floor_vml_cpu")
ceil = _rounding("ceil", lambda xp, x: xp.ceil(x), "ceil_vml_cpu")
trunc = _rounding("trunc", lambda xp, x: xp.trunc(x), "trunc_vml_cpu")


@defop("round(Tensor self, *, int decimals=0) -> Tensor", tags=PW, inplace=True, save=(),
       grad_fn_name=lambda args: "RoundBackward1" if args[1] != 0 else "RoundBackward0")
def round(xp, a, decimals=0):
    dt = _dt(a)
    if dt is _t.bool_:
        raise _not_impl("round_vml_cpu", dt)
    if dt.category < 2:
        if decimals != 0:
            raise _not_impl("round_cpu", dt)
        return a.copy()
    x = a.astype(_comp(dt).np, copy=False)
    if decimals == 0:
        return _out(xp, xp.rint(x), dt)
    p = x.dtype.type(10.0 ** (-decimals if decimals < 0 else decimals))
    with np.errstate(all="ignore"):
        r = xp.rint(x / p) * p if decimals < 0 else xp.rint(x * p) / p
    return _out(xp, r, dt)


round.derivative(lambda ctx, g: (_zeros(g),))


@defop("frac(Tensor self) -> Tensor", tags=PW, inplace=True, save=())
def frac(xp, a):
    dt = _dt(a)
    if dt.category < 2:
        raise _not_impl("frac_cpu", dt)
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, x - xp.trunc(x), dt)


frac.derivative(lambda ctx, g: (g,))


@defop("copysign(Tensor self, Tensor|Scalar other) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=lambda args: "CopysignBackward0" if isinstance(args[1], Tensor) else "CopysignBackward1", scalar_overload=("other",), save_result=True)
def copysign(xp, a, b):
    dt = _floaty(result_dtype(a, b))
    cdt = _comp(dt)
    return _out(xp, xp.copysign(_arr(xp, a, cdt), _arr(xp, b, cdt)), dt)


@copysign.derivative
def _copysign_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    ga = None
    if n[0]:
        ga = grad_for(api.where(a == 0, 0.0, g * ctx.result / a), a)
    return ga, (_zeros_of(b) if n[1] else None)


# ---------------------------------------------------------------------- clamp, min/max, where, lerp
def _clamp_bool_check(lo, hi):
    """A bool clamp: PyTorch has no bool kernel for its Scalar overloads nor for two tensor
    bounds, but one tensor bound alone runs maximum / minimum, which take bool."""
    if lo is not None and hi is not None:
        raise _not_impl("clamp_scalar_cpu" if _is_scalar(lo) or _is_scalar(hi) else "clamp_cpu", _t.bool_)
    if _is_scalar(lo):
        raise _not_impl("clamp_min_scalar_cpu", _t.bool_)
    if _is_scalar(hi):
        raise _not_impl("clamp_max_scalar_cpu", _t.bool_)


def _clamp_checks(dt, lo, hi):
    """The kernel's (and meta's) errors: a bool clamp PyTorch has no kernel for, and a number
    bound that overflows a floating result dtype (PyTorch converts it by a checked conversion:
    float16 clamp(x, 65519) raises)."""
    if dt is _t.bool_:
        _clamp_bool_check(lo, hi)
    elif dt.is_floating_point:
        for bound in (lo, hi):
            if _is_scalar(bound):
                check_fits_floating(bound, dt)


def _clamp_kernel(xp, a, lo, hi, name):
    if lo is None and hi is None:
        raise RuntimeError(f"{name}: At least one of 'min' or 'max' must not be None")
    dt = result_dtype(a, lo, hi)
    _clamp_checks(dt, lo, hi)
    cdt = _comp(dt)
    x = _arr(xp, a, cdt)
    # (bound, x): numpy gives the second operand for equal ones; PyTorch keeps x (a signed zero)
    if lo is not None:
        x = xp.maximum(_arr_fit(xp, lo, cdt, dt), x)
    if hi is not None:
        x = xp.minimum(_arr_fit(xp, hi, cdt, dt), x)
    return _out(xp, x, dt)


def _clamp_name(args):
    return "ClampBackward0" if isinstance(args[1], Tensor) or isinstance(args[2], Tensor) else "ClampBackward1"


@defop("clamp(Tensor self, Tensor|Scalar? min=None, Tensor|Scalar? max=None) -> Tensor", tags=PW,
       inplace=True, grad_fn_name=_clamp_name, scalar_overload=("min", "max"))
def clamp(xp, a, lo=None, hi=None):
    return _clamp_kernel(xp, a, lo, hi, "torch.clamp")


@clamp.derivative
def _clamp_bw(ctx, g):
    x, lo, hi = ctx.args
    n = ctx.needs_input_grad
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        m = x <= hi
        mask = m if mask is None else mask & m
    gx = grad_for(_mask_grad(mask, g), x) if n[0] else None
    glo = ghi = None
    if n[1]:
        m = x < lo
        if hi is not None:
            m = m & (hi > lo)
        glo = grad_for(_mask_grad(m, g), lo)
    if n[2]:
        m = x > hi
        if lo is not None:
            m = m | (hi < lo)
        ghi = grad_for(_mask_grad(m, g), hi)
    return gx, glo, ghi


def _one_side_name(base):
    return lambda args: f"{base}Backward1" if isinstance(args[1], Tensor) else f"{base}Backward0"


@defop("clamp_min(Tensor self, Tensor|Scalar min) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_one_side_name("ClampMin"), scalar_overload=("min",))
def clamp_min(xp, a, lo):
    return _clamp_kernel(xp, a, lo, None, "torch.clamp_min")


@clamp_min.derivative
def _clamp_min_bw(ctx, g):
    x, lo = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(_mask_grad(x >= lo, g), x) if n[0] else None,
            grad_for(_mask_grad(x < lo, g), lo) if n[1] else None)


@defop("clamp_max(Tensor self, Tensor|Scalar max) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_one_side_name("ClampMax"), scalar_overload=("max",))
def clamp_max(xp, a, hi):
    return _clamp_kernel(xp, a, None, hi, "torch.clamp_max")


@clamp_max.derivative
def _clamp_max_bw(ctx, g):
    x, hi = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(_mask_grad(x <= hi, g), x) if n[0] else None,
            grad_for(_mask_grad(x > hi, g), hi) if n[1] else None)


def _minmax(name, npname, less):
    @defop(f"{name}(Tensor self, Tensor other) -> Tensor", tags=PW)
    def op(xp, a, b):
        dt = result_dtype(a, b)
        cdt = _comp(dt)
        return _out(xp, getattr(xp, npname)(_arr(xp, a, cdt), _arr(xp, b, cdt)), dt)

    @op.derivative
    def _bw(ctx, g):
        a, b = ctx.args
        n = ctx.needs_input_grad
        half = api.where(a == b, g / 2, g)
        # maximum: the smaller side gets nothing; minimum: the larger side
        ga = grad_for(api.where(less(a, b), 0.0, half), a) if n[0] else None
        gb = grad_for(api.where(less(b, a), 0.0, half), b) if n[1] else None
        return ga, gb
    return op


maximum = _minmax("maximum", "maximum", lambda u, v: u < v)
minimum = _minmax("minimum", "minimum", lambda u, v: u > v)


@defop("where(Tensor condition, Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=PW, method=False,
       save=("condition",), scalar_overload=("self", "other"))
def _where(xp, cond, a, b):
    if cond.dtype != np.bool_:
        if cond.dtype != np.uint8:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{_dt(cond).legacy_name}")
        cond = cond.astype(np.bool_)
    dt = result_dtype(a, b)
    return _out(xp, xp.where(cond, _arr_fit(xp, a, dt, dt), _arr_fit(xp, b, dt, dt)), dt)


@_where.derivative
def _where_bw(ctx, g):
    cond, a, b = ctx.args
    n = ctx.needs_input_grad
    return (None,
            grad_for(api.where(cond, g, 0.0), a) if n[1] else None,
            grad_for(api.where(cond, 0.0, g), b) if n[2] else None)


_MISSING = object()


def where(condition, input=_MISSING, other=_MISSING, *, out=None):
    """``where(condition, input, other)``; ``where(condition)`` is ``nonzero(condition, as_tuple=True)``."""
    if input is _MISSING and other is _MISSING:
        nz = getattr(api, "nonzero", None)
        if nz is None:
            raise RuntimeError("where(condition) needs ember.nonzero, which is not implemented yet")
        return nz(condition, as_tuple=True)
    if input is _MISSING or other is _MISSING:
        raise TypeError("where() expects either (condition) or (condition, input, other)")
    if out is not None:
        return _where.binding(condition, input, other, out=out)
    return _where.binding(condition, input, other)


where._ember_op = _where
where.__module__ = "ember"


def _where_method(self, condition, other):
    return _where.binding(condition, self, other)


def _lerp_name(args):
    return "LerpBackward1" if isinstance(args[2], Tensor) else "LerpBackward0"


@defop("lerp(Tensor self, Tensor end, Tensor|Scalar weight) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_lerp_name, scalar_overload=("weight",))
def lerp(xp, a, e, w):
    dt = _lerp_dtype(a, e, w, _dt, result_dtype)
    cdt = _comp(dt)
    a_, e_ = _arr(xp, a, cdt), _arr(xp, e, cdt)
    # a number weight is read as is; a 0-dim tensor of another dtype is cast to the result dtype
    # first (TensorIterator), so float16's 0.3 weight is 0.300048828125
    w_ = _arr(xp, w, cdt) if _is_scalar(w) else _operand(xp, w, dt, cdt)
    d = e_ - a_
    if _is_scalar(w):
        # one weight: only its branch is computed (half the passes; an optimizer's moving
        # averages are lerps by a number)
        r = a_ + w_ * d if bool(xp.abs(w_) < 0.5) else e_ - d * (1 - w_)
    else:
        r = xp.where(xp.abs(w_) < 0.5, a_ + w_ * d, e_ - d * (1 - w_))
    return _out(xp, r, dt)


def _lerp_dtype(a, e, w, dtype_of, promote):
    """lerp's result dtype, with PyTorch's checks: ``end`` must have ``self``'s dtype, and so must
    a tensor ``weight`` -- except a 0-dim one, which promotes like a number (a float32/float64/
    int64 0-dim weight keeps a float16 ``self`` float16; a complex one makes the result complex)."""
    dt = dtype_of(a)
    for nm, v in (("end", e), ("weight", w)):
        if not _is_scalar(v) and dtype_of(v) is not dt and (nm == "end" or v.ndim > 0):
            raise RuntimeError(f"expected dtype {_TORCH_NAMES.get(dt.name, dt.name)} for `{nm}` but got dtype "
                               f"{_TORCH_NAMES.get(dtype_of(v).name, dtype_of(v).name)}")
    if not _is_scalar(w) and dtype_of(w) is not dt:
        wdt = dtype_of(w)
        if wdt.is_complex and dt is _t.float16:
            raise NotImplementedError("\"lerp_kernel_tensor\" not implemented for 'ComplexHalf'")
        dt = promote(a, w) if dt.category >= 2 else dt
    if dt.category < 2:
        raise _not_impl("lerp_kernel_scalar" if _is_scalar(w) else "lerp_kernel_tensor", dt)
    return dt


_TORCH_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
                "complex128": "c10::complex<double>"}


@lerp.derivative
def _lerp_bw(ctx, g):
    a, e, w = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(g * (1 - w), a) if n[0] else None,
            grad_for(g * w, e) if n[1] else None,
            grad_for(g * (e - a), w) if n[2] else None)


def _addc_value(dt, value):
    if dt.category == 1:
        return int(value)
    if dt is _t.bool_:
        return bool(value)
    return value


@defop("addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", tags=PW,
       inplace=True)
def addcmul(xp, a, t1, t2, value=1):
    dt = result_dtype(a, t1, t2)
    cdt = _comp(dt)
    check_fits(value, dt)
    v = _addc_value(dt, value)
    if dt in _HALF:
        # torch's float16/bfloat16 kernel: fma(value * tensor1, tensor2, self) in float32, the
        # value unrounded (float64 holds the product of two float32 numbers exactly)
        vt1 = _arr(xp, v, cdt) * _arr(xp, t1, cdt)
        with np.errstate(all="ignore"):
            r = vt1.astype(np.float64) * _arr(xp, t2, _t.float64) + _arr(xp, a, _t.float64)
        return _out(xp, r.astype(np.float32), dt)
    a_, p = _arr(xp, a, cdt), _arr(xp, t1, cdt) * _arr(xp, t2, cdt)
    if dt is _t.bool_:
        return _out(xp, a_ | (p & v), dt)
    return _out(xp, a_ + _arr(xp, v, cdt) * p, dt)


@addcmul.derivative
def _addcmul_bw(ctx, g):
    a, t1, t2, value = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(g, a) if n[0] else None,
            grad_for(g * t2 * value, t1) if n[1] else None,
            grad_for(g * t1 * value, t2) if n[2] else None)


@defop("addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", tags=PW,
       inplace=True)
def addcdiv(xp, a, t1, t2, value=1):
    if _dt(t1).category < 2 and _dt(t2).category < 2:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
            "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
            "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    dt = result_dtype(a, t1, t2)
    cdt = _comp(dt)
    with np.errstate(all="ignore"):
        q = _arr(xp, t1, cdt) / _arr(xp, t2, cdt)
        return _out(xp, _arr(xp, a, cdt) + _arr_fit(xp, value, cdt, dt) * q, dt)


@addcdiv.derivative
def _addcdiv_bw(ctx, g):
    a, t1, t2, value = ctx.args
    n = ctx.needs_input_grad
    return (grad_for(g, a) if n[0] else None,
            grad_for(g * value / t2, t1) if n[1] else None,
            grad_for(-g * value * t1 / (t2 * t2), t2) if n[2] else None)


# ---------------------------------------------------------------------- classification, nan_to_num
def _classify(name, fn):
    def kernel(xp, a):
        if a.dtype.kind in "biu":   # integers are always finite
            return xp.full(a.shape, name == "isfinite", dtype=np.bool_)
        return xp.asarray(fn(xp, a.astype(_comp(_dt(a)).np, copy=False)))
    kernel.__name__ = name
    return defop(f"{name}(Tensor self) -> Tensor", tags=ND)(kernel)


isnan = _classify("isnan", lambda xp, x: xp.isnan(x))
isinf = _classify("isinf", lambda xp, x: xp.isinf(x))
isfinite = _classify("isfinite", lambda xp, x: xp.isfinite(x))
isposinf = _classify("isposinf", lambda xp, x: xp.isposinf(x))
isneginf = _classify("isneginf", lambda xp, x: xp.isneginf(x))


def _finfo(dt):
    import ml_dtypes
    return ml_dtypes.finfo(dt.np)


@defop("nan_to_num(Tensor self, float? nan=0.0, float? posinf=None, float? neginf=None) -> Tensor", tags=PW,
       inplace=True, save=("self",))
def nan_to_num(xp, a, nan=0.0, posinf=None, neginf=None):
    dt = _dt(a)
    if dt.category < 2:
        return a.copy()
    if dt.is_complex:     # each part on its own, as torch
        r = nan_to_num.kernel(xp, xp.ascontiguousarray(a.real), nan, posinf, neginf)
        i = nan_to_num.kernel(xp, xp.ascontiguousarray(a.imag), nan, posinf, neginf)
        return _out(xp, r + 1j * i, dt)
    fi = _finfo(dt)
    x = a.astype(_comp(dt).np, copy=False)
    big = float(fi.max)
    nan = 0.0 if nan is None else nan
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    r = xp.where(xp.isnan(x), nan, xp.where(xp.isposinf(x), posinf, xp.where(xp.isneginf(x), neginf, x)))
    return _out(xp, r, dt)


@nan_to_num.derivative
def _nan_to_num_bw(ctx, g):
    x = ctx.args[0]
    return (_mask_grad(api.isfinite(x), g),)


# ---------------------------------------------------------------------- masked_fill
def _masked_fill_name(args):
    return "MaskedFillBackward1" if isinstance(args[2], Tensor) else "MaskedFillBackward0"


@defop("masked_fill(Tensor self, Tensor mask, Tensor|Scalar value) -> Tensor", tags=PW, inplace=True,
       grad_fn_name=_masked_fill_name, scalar_overload=("value",), save=("mask",))
def masked_fill(xp, a, mask, value):
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_TORCH_NAMES.get(_dt(mask).name, _dt(mask).name)}")
    if not _is_scalar(value):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
    if mask.shape != a.shape:
        broadcast_shapes(mask.shape, a.shape)      # torch's broadcast error names the mask first
    dt = _dt(a)
    v = _arr_fit(xp, value, dt, dt) if _is_scalar(value) else value.astype(dt.np)
    # row-major, as PyTorch's (it fills a contiguous clone of self; np.where keeps a permuted order)
    r = _out(xp, xp.where(mask, v, a), dt)
    # (numpy's result is row-major for a row-major self of the result's shape: C order wins)
    return as_contiguous(xp, r, a if r.shape == a.shape else None)


@masked_fill.derivative
def _masked_fill_bw(ctx, g):
    a, mask, value = ctx.args
    n = ctx.needs_input_grad
    ga = grad_for(api.where(mask, 0.0, g), a) if n[0] else None
    gv = None
    if n[2]:
        gv = api.where(mask, g, 0.0).sum()
    return ga, None, gv


# ---------------------------------------------------------------------- comparisons
def _cmp(name, npname):
    @defop(f"{name}(Tensor self, Tensor|Scalar other) -> Tensor", tags=ND, inplace=True)
    def kernel(xp, a, b):
        dt = result_dtype(a, b)
        return xp.asarray(getattr(xp, npname)(_arr(xp, a, dt), _arr(xp, b, dt)))
    kernel.kernel.__name__ = npname
    return kernel


eq = _cmp("eq", "equal")
ne = _cmp("ne", "not_equal")
lt = _cmp("lt", "less")
le = _cmp("le", "less_equal")
gt = _cmp("gt", "greater")
ge = _cmp("ge", "greater_equal")


# ---------------------------------------------------------------------- logical / bitwise
def _logical(name, npname):
    @defop(f"{name}(Tensor self, Tensor other) -> Tensor", tags=ND, inplace=True)
    def op(xp, a, b):
        return xp.asarray(getattr(xp, npname)(a, b))
    op.kernel.__name__ = npname
    return op


logical_and = _logical("logical_and", "logical_and")
logical_or = _logical("logical_or", "logical_or")
logical_xor = _logical("logical_xor", "logical_xor")


@defop("logical_not(Tensor self) -> Tensor", tags=ND, inplace=True)
def logical_not(xp, a):
    return xp.asarray(xp.logical_not(a))


def _bitwise(name, npname, kname):
    # a Number first operand too (torch's Scalar_Tensor overload: bitwise_and(5, t))
    @defop(f"{name}(Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=ND, inplace=True)
    def op(xp, a, b):
        dt = result_dtype(a, b)
        if dt.is_floating_point:
            raise _not_impl(kname, dt)
        return _out(xp, getattr(xp, npname)(_arr(xp, a, dt), _arr(xp, b, dt)), dt)
    op.kernel.__name__ = npname
    return op


bitwise_and = _bitwise("bitwise_and", "bitwise_and", "bitwise_and_cpu")
bitwise_or = _bitwise("bitwise_or", "bitwise_or", "bitwise_or_cpu")
bitwise_xor = _bitwise("bitwise_xor", "bitwise_xor", "bitwise_xor_cpu")


@defop("bitwise_not(Tensor self) -> Tensor", tags=ND, inplace=True)
def bitwise_not(xp, a):
    dt = _dt(a)
    if dt.is_floating_point:
        raise _not_impl("bitwise_not_cpu", dt)
    if dt is _t.bool_:
        return xp.asarray(xp.logical_not(a))
    return xp.asarray(xp.invert(a))


def _shift(name, left):
    kname = "lshift_cpu" if left else "rshift_cpu"

    # a Number first operand too (torch's Scalar_Tensor overload: bitwise_left_shift(5, t))
    @defop(f"{name}(Tensor|Scalar self, Tensor|Scalar other) -> Tensor", tags=ND, inplace=True)
    def op(xp, a, b):
        dt = result_dtype(a, b)
        if dt.category != 1:
            raise _not_impl(kname, dt)
        a_, b_ = _arr(xp, a, dt), _arr(xp, b, dt)
        bits = dt.itemsize * 8
        out_of_range = (b_ < 0) | (b_ >= bits)
        amount = xp.where(out_of_range, 0, b_).astype(dt.np)
        if left:
            r = xp.where(out_of_range, 0, xp.left_shift(a_, amount))
        else:
            fill = xp.right_shift(a_, bits - 1) if dt.is_signed else xp.zeros_like(a_)
            r = xp.where(out_of_range, fill, xp.right_shift(a_, amount))
        return _out(xp, r, dt)
    return op


bitwise_left_shift = _shift("bitwise_left_shift", True)
bitwise_right_shift = _shift("bitwise_right_shift", False)


# ---------------------------------------------------------------------- activations
@defop("relu(Tensor self) -> Tensor", tags=PW, inplace=True, save=(), save_result=True)
def relu(xp, a):
    if a.dtype == np.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    # "x < 0 ? 0 : x", as PyTorch: keeps -0.0 and NaN. numpy's maximum(0, x) does so in one pass
    # for float32/float64 and integers; its float16 loop (and bfloat16's) returns +0.0 for
    # maximum(0, -0.0), so the half types take the select.
    if a.dtype.kind in "iu" or a.dtype in (np.float32, np.float64):
        return xp.asarray(xp.maximum(a.dtype.type(0), a))
    return xp.asarray(xp.where(a < 0, a.dtype.type(0), a))


@relu.derivative
def _relu_bw(ctx, g):
    return (_mask_grad(ctx.result > 0, g),)


def _float_act(name, kname):
    """Check of an activation that PyTorch only implements for floating dtypes."""
    def check(a):
        dt = _dt(a)
        if not dt.is_floating_point:
            raise _not_impl(kname, dt)
        return dt
    return check


@defop("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", tags=PW, inplace=True,
       method=False, save=("self",))
def hardtanh(xp, a, min_val=-1, max_val=1):
    dt = _dt(a)
    if dt is _t.bool_:
        raise _not_impl("hardtanh_cpu", dt)
    if dt is _t.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    x = a.astype(_comp(dt).np, copy=False)
    lo, hi = _arr_fit(xp, min_val, _comp(dt), dt), _arr_fit(xp, max_val, _comp(dt), dt)
    return _out(xp, xp.minimum(hi, xp.maximum(lo, x)), dt)     # ties keep x (a signed zero), as PyTorch


@hardtanh.derivative
def _hardtanh_bw(ctx, g):
    x, lo, hi = ctx.args
    return (_mask_grad((x > lo) & (x < hi), g),)


@defcomposite("relu6(Tensor self) -> Tensor", method=False)
def relu6(self):
    return api.hardtanh(self, 0.0, 6.0)


_leaky_check = _float_act("leaky_relu", "leaky_relu_cpu")


@defop("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", tags=PW, inplace=True, method=False)
def leaky_relu(xp, a, negative_slope=0.01):
    dt = _leaky_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, xp.where(x > 0, x, x * x.dtype.type(negative_slope)), dt)


@leaky_relu.derivative
def _leaky_relu_bw(ctx, g):
    x, slope = ctx.args
    return (api.where(x > 0, g, g * slope),)


_elu_check = _float_act("elu", "elu_cpu")


@defop("elu(Tensor self, Scalar alpha=1.0, Scalar scale=1.0, Scalar input_scale=1.0) -> Tensor", tags=PW,
       inplace=True, method=False)
def elu(xp, a, alpha=1.0, scale=1.0, input_scale=1.0):
    dt = _elu_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    with np.errstate(all="ignore"):
        r = xp.where(x > 0, x * scale, (xp.expm1(x * input_scale) * alpha) * scale)
    return _out(xp, r, dt)


@elu.derivative
def _elu_bw(ctx, g):
    x, alpha, scale, input_scale = ctx.args
    neg = g * (alpha * scale * input_scale) * api.exp(x * input_scale)
    return (api.where(x > 0, g * scale, neg),)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@defcomposite("selu(Tensor self) -> Tensor", method=False)
def selu(self):
    return api.elu(self, _SELU_ALPHA, _SELU_SCALE)


@defop("celu(Tensor self, Scalar alpha=1.0) -> Tensor", tags=PW, inplace=True, method=False)
def celu(xp, a, alpha=1.0):
    dt = _elu_check(a)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    x = a.astype(_comp(dt).np, copy=False)
    with np.errstate(all="ignore"):
        r = xp.where(x > 0, x, xp.expm1(x / alpha) * alpha)
    return _out(xp, r, dt)


@celu.derivative
def _celu_bw(ctx, g):
    x, alpha = ctx.args
    return (api.where(x > 0, g, g * api.exp(x / alpha)),)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


@defop("gelu(Tensor self, *, str approximate='none') -> Tensor", tags=PW, method=False)
def gelu(xp, a, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    dt = _float_act("gelu", "GeluKernelImpl")(a)
    if approximate == "tanh":
        x = a.astype(_comp(dt).np, copy=False)
        # torch's order: kappa * (x * x * x), one rounding per product as its kernel (and as
        # the decomposition and the derivative below, so compiled graphs share the tanh)
        r = 0.5 * x * (1 + xp.tanh(_GELU_K * (x + _GELU_C * (x * x * x))))
    else:
        x = a.astype(np.float64)
        r = 0.5 * x * (1 + _erf_erfc(xp, x * _SQRT1_2, dt is not _t.float64)[0])
    return _out(xp, r, dt)


@gelu.derivative
def _gelu_bw(ctx, g):
    x, approximate = ctx.args
    if approximate == "tanh":
        # torch's GeluBackward (tanh): x_cube = x_sq * x, inner = beta * (x + kappa * x_cube),
        # the derivative's 3 * kappa a product in the compute dtype (float32 for float32/half)
        x2 = x * x
        t = api.tanh(_GELU_K * (x + _GELU_C * (x2 * x)))
        three_c = 3 * _GELU_C if x.dtype is _t.float64 else float(np.float32(3) * np.float32(_GELU_C))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (_GELU_K * (1 + three_c * x2))
        return (g * d,)
    cdf = 0.5 * (1 + api.erf(x * _SQRT1_2))
    pdf = api.exp(-0.5 * x * x) * (1.0 / math.sqrt(2 * math.pi))
    return (g * (cdf + x * pdf),)


_silu_check = _float_act("silu", "silu_cpu")


@defop("silu(Tensor self) -> Tensor", tags=PW, inplace=True, method=False)
def silu(xp, a):
    dt = _dt(a) if a.dtype.kind == "c" else _silu_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    with np.errstate(all="ignore"):
        return _out(xp, x / (1 + xp.exp(-x)), dt)


@silu.derivative
def _silu_bw(ctx, g):
    x = ctx.args[0]
    if x.dtype.is_complex:
        raise RuntimeError("silu does not support automatic differentiation for outputs with complex dtype.")
    s = api.sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


_mish_check = _float_act("mish", "mish_cpu")


@defop("mish(Tensor self) -> Tensor", tags=PW, inplace=True, method=False)
def mish(xp, a):
    dt = _mish_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    with np.errstate(all="ignore"):
        return _out(xp, x * xp.tanh(xp.logaddexp(x.dtype.type(0), x)), dt)


@mish.derivative
def _mish_bw(ctx, g):
    x = ctx.args[0]
    t = api.tanh(api.softplus(x))
    return (g * (t + x * api.sigmoid(x) * (1 - t * t)),)


_softplus_check = _float_act("softplus", "softplus_cpu")


@defop("softplus(Tensor self, Scalar beta=1.0, Scalar threshold=20.0) -> Tensor", tags=PW, method=False)
def softplus(xp, a, beta=1.0, threshold=20.0):
    dt = _softplus_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    bx = x * x.dtype.type(beta)
    with np.errstate(all="ignore"):
        r = xp.where(bx > threshold, x, xp.logaddexp(x.dtype.type(0), bx) / x.dtype.type(beta))
    return _out(xp, r, dt)


@softplus.derivative
def _softplus_bw(ctx, g):
    x, beta, threshold = ctx.args
    bx = x * beta
    return (api.where(bx > threshold, g, g * api.sigmoid(bx)),)


_hs_check = _float_act("hardswish", "hardswish_cpu")


@defop("hardswish(Tensor self) -> Tensor", tags=PW, inplace=True, method=False)
def hardswish(xp, a):
    dt = _hs_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, x * xp.minimum(xp.maximum(x + 3, 0), 6) / 6, dt)


@hardswish.derivative
def _hardswish_bw(ctx, g):
    x = ctx.args[0]
    mid = g * (x / 3 + 0.5)
    return (api.where(x <= -3, 0.0, api.where(x < 3, mid, g)),)


_hsig_check = _float_act("hardsigmoid", "hardsigmoid_cpu")


@defop("hardsigmoid(Tensor self) -> Tensor", tags=PW, inplace=True, method=False)
def hardsigmoid(xp, a):
    dt = _hsig_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, xp.minimum(xp.maximum(x + 3, 0), 6) / 6, dt)


@hardsigmoid.derivative
def _hardsigmoid_bw(ctx, g):
    x = ctx.args[0]
    return (_mask_grad((x > -3) & (x < 3), g / 6),)


@defcomposite("softsign(Tensor self) -> Tensor", method=False)
def softsign(self):
    return self / (1 + api.abs(self))


@defcomposite("tanhshrink(Tensor self) -> Tensor", method=False)
def tanhshrink(self):
    return self - api.tanh(self)


@defop("threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", tags=PW, inplace=True, method=False)
def threshold(xp, a, threshold, value):
    dt = _dt(a)
    if dt is _t.bool_:
        raise _not_impl("threshold_cpu", dt)
    check_fits(threshold, dt)
    x = a.astype(_comp(dt).np, copy=False)
    # x <= threshold ? value : x, as PyTorch: NaN is kept (x > threshold would replace it)
    return _out(xp, xp.where(x <= threshold, _arr_fit(xp, value, _comp(dt), dt), x), dt)


@threshold.derivative
def _threshold_bw(ctx, g):
    x, th, _ = ctx.args
    return (_mask_grad((x <= th).logical_not(), g),)     # NaN passes the gradient, as PyTorch


_logsig_check = _float_act("logsigmoid", "log_sigmoid_cpu")


@defop("logsigmoid(Tensor self) -> Tensor", tags=PW, method=False, grad_fn_name="LogSigmoidBackward0")
def logsigmoid(xp, a):
    dt = _logsig_check(a)
    x = a.astype(_comp(dt).np, copy=False)
    with np.errstate(all="ignore"):
        # row-major, as PyTorch's (its log_sigmoid writes into a contiguous buffer)
        return as_contiguous(xp, _out(xp, xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x))), dt))


@logsigmoid.derivative
def _logsigmoid_bw(ctx, g):
    return (g * api.sigmoid(-ctx.args[0]),)


@defop("hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor", tags=PW)
def hardshrink(xp, a, lambd=0.5):
    dt = _float_act("hardshrink", "hardshrink_cpu")(a)
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, xp.where((x > lambd) | (x < -lambd), x, 0), dt)


@hardshrink.derivative
def _hardshrink_bw(ctx, g):
    x, lambd = ctx.args
    return (_mask_grad((x > lambd) | (x < -lambd), g),)


@defop("softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", tags=PW, method=False)
def softshrink(xp, a, lambd=0.5):
    dt = _float_act("softshrink", "softshrink_cpu")(a)
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    x = a.astype(_comp(dt).np, copy=False)
    return _out(xp, xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, 0)), dt)


@softshrink.derivative
def _softshrink_bw(ctx, g):
    x, lambd = ctx.args
    return (_mask_grad((x > lambd) | (x < -lambd), g),)


# ---------------------------------------------------------------------- hand-written entry points
def _inplace_alias(fn_name, target, *fixed):
    """An in-place entry point that forwards to another op's in-place variant."""
    def f(self, *args, **kwargs):
        return getattr(api, target)(self, *fixed, *args, **kwargs)
    f.__name__ = fn_name
    f.__qualname__ = fn_name
    f.__module__ = "ember"
    return f


def _install():
    setattr(api, "where", where)
    setattr(Tensor, "where", _where_method)
    extra = {
        "square_": _inplace_alias("square_", "pow_", 2),
        "true_divide_": _inplace_alias("true_divide_", "div_"),
        "relu6_": _inplace_alias("relu6_", "hardtanh_", 0.0, 6.0),
        "selu_": _inplace_alias("selu_", "elu_", _SELU_ALPHA, _SELU_SCALE),
        "clip_": _inplace_alias("clip_", "clamp_"),
    }
    for k, v in extra.items():
        setattr(api, k, v)
    for k in ("square_", "true_divide_", "clip_"):
        setattr(Tensor, k, extra[k])
    # PyTorch's aliases (same op, same grad_fn)
    aliases = {
        "clip": "clamp", "absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
        "arctan2": "atan2", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "divide": "div",
        "multiply": "mul", "subtract": "sub", "negative": "neg", "fix": "trunc", "greater": "gt",
        "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne", "sgn": "sign",
    }
    for new, old in aliases.items():
        setattr(api, new, getattr(api, old))
        if hasattr(Tensor, old):
            setattr(Tensor, new, getattr(Tensor, old))
        if hasattr(Tensor, old + "_"):
            setattr(Tensor, new + "_", getattr(Tensor, old + "_"))
            setattr(api, new + "_", getattr(api, old + "_"))
    setattr(api, "log_sigmoid", api.logsigmoid)


_install()


# ---------------------------------------------------------------------- meta functions
# Each kernel above has a meta function (what fake tensors run): the same
# argument checks in the same order, the kernel's result dtype, and its
# strides. The strides are the subtle part: a numpy kernel's output layout
# follows from the numpy calls it makes (see ``_meta.np_ufunc``/``np_astype``),
# and an ``astype`` to the compute dtype lays out an expanded input
# differently from a ufunc on it, so each meta replays the kernel's calls on
# layouts: ``_L(x, dt)`` is ``_arr(xp, x, dt)``, ``_U(...)`` a ufunc,
# ``_cast(x, dt)`` ``x.astype(dt, copy=False)``. A chain of ufuncs over one
# layout and its own ufunc results keeps that ufunc's layout
# (``x / (1 + exp(-x))`` is laid out like ``exp(x)``), so such chains are
# replayed as one ``_U``. The data-dependent checks (integer division by zero)
# cannot run without data: a fake run passes where eager raises.
from . import _meta as _M

_U = _M.np_ufunc


def _is_bool(x):
    return isinstance(x, (bool, np.bool_)) if _is_scalar(x) else x.dtype is _t.bool_


def _L(x, dt):
    """Layout of ``_arr(xp, x, dt)``: a scalar is 0-d (None), a tensor is cast to ``dt`` if needed.

    A scalar is converted as the kernel does, for the kernel's error when it does not fit ``dt``."""
    if _is_scalar(x):
        with np.errstate(all="ignore"):
            _arr(np, x, dt)
        return None
    return _M.np_astype(x, x.dtype is not dt)


def _L_fit(x, cdt, dt):
    """Layout of ``_arr_fit(xp, x, cdt, dt)``, with its error for a number that does not fit ``dt``."""
    if _is_scalar(x):
        check_fits(x, dt)
    return _L(x, cdt)


def _cast(a, dt):
    """Layout of ``a.astype(dt.np, copy=False)``."""
    return _M.np_astype(a, a.dtype is not dt)


def _bcast(*args):
    """The tensor arguments' broadcast shape, with the error the kernel raises (``defop`` above)."""
    shapes = [tuple(a.shape) for a in args if isinstance(a, Tensor)]
    if len(shapes) < 2:
        return shapes[0] if shapes else ()
    try:
        return _M.broadcast_shapes(*shapes)
    except RuntimeError:
        # the kernel's message (it names the first two shapes); sizes by their example values
        broadcast_shapes(*[tuple(_M._hint(s) for s in sh) for sh in shapes])
        raise


def _res(lay, dt):
    return _M.np_out(lay, dt)


def _unary_float_meta(a):
    """exp, log, sin, ...: integer/bool inputs give the default float dtype."""
    dt = _floaty(a.dtype)
    return _res(_U(_cast(a, _comp(dt))), dt)


def _erf_meta(a):
    # _erf_erfc fills an ``empty_like`` of its float64 input: 'K' copy layout of the input
    dt = _floaty(a.dtype)
    return _res(_M.np_astype(a, True), dt)


def _erfinv_meta(a):
    dt = _floaty(a.dtype)
    x = _cast(a, _comp(dt))
    return _res(_U(_M.np_astype(x, _comp(dt) is not _t.float64)), dt)


for _op in (exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt, sin, cos, tan, asin, acos, atan, sinh,
            cosh, tanh, asinh, acosh, atanh, sigmoid, reciprocal):
    _op.meta = _unary_float_meta
erf.meta = erfc.meta = _erf_meta
erfinv.meta = _erfinv_meta


@add.meta_fn
def _add_meta(a, b, alpha=1):
    return _addsub_meta(a, b, alpha)


@sub.meta_fn
def _sub_meta(a, b, alpha=1):
    _sub_bool_meta(a, b)
    return _addsub_meta(a, b, alpha)


def _sub_bool_meta(a, b):
    ab, bb = _is_bool(a), _is_bool(b)
    if ab and bb:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                           "`^` or `logical_xor()` operator instead.")
    if ab or bb:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _addsub_meta(a, b, alpha):
    alpha = _scalar_of(alpha)
    dt = _M.result_dtype(a, b)
    _check_alpha(dt, alpha)
    _bcast(a, b)
    cdt = _comp(dt)
    a_, b_ = _L(a, cdt), _L(b, cdt)
    if alpha != 1 or isinstance(alpha, (bool, np.bool_)):
        b_ = _U(b_, _L_fit(alpha, cdt, dt) if dt is not _t.bool_ else None)
    return _res(_U(a_, b_), dt)


@rsub.meta_fn
def _rsub_meta(a, b, alpha=1):
    _sub_bool_meta(a, b)
    alpha = _scalar_of(alpha)
    dt = _M.result_dtype(a, b)
    _check_alpha(dt, alpha)
    _bcast(a, b)
    cdt = _comp(dt)
    a_, b_ = _L(a, cdt), _L(b, cdt)
    if alpha != 1:
        a_ = _U(a_, _L_fit(alpha, cdt, dt))
    return _res(_U(b_, a_), dt)


def _binary_meta(a, b):
    """mul, maximum, minimum: PyTorch's promotion, computed in float32 for half types."""
    dt = _M.result_dtype(a, b)
    _bcast(a, b)
    cdt = _comp(dt)
    return _res(_U(_L(a, cdt), _L(b, cdt)), dt)


def _binary_float_meta(a, b):
    """atan2, copysign: float-valued, so integer inputs give the default float dtype."""
    dt = _floaty(_M.result_dtype(a, b))
    _bcast(a, b)
    cdt = _comp(dt)
    return _res(_U(_L(a, cdt), _L(b, cdt)), dt)


mul.meta = maximum.meta = minimum.meta = _binary_meta
atan2.meta = copysign.meta = _binary_float_meta


def _floor_div_meta(a, b, dt, kname):
    if dt is _t.bool_:
        raise _not_impl(kname, dt)
    _bcast(a, b)
    cdt = dt if dt.category == 1 else _comp(dt)
    return _res(_U(_L(a, cdt), _L(b, cdt)), dt)


@div.meta_fn
def _div_meta(a, b, rounding_mode=None):
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    dt = _M.result_dtype(a, b)
    if rounding_mode is None:
        return _binary_float_meta(a, b)
    if rounding_mode == "floor":
        return _floor_div_meta(a, b, dt, "div_floor_cpu")
    if dt is _t.bool_:
        raise _not_impl("div_trunc_cpu", dt)
    _bcast(a, b)
    if dt.category == 1:
        a_, b_ = _L(a, dt), _L(b, dt)
        q = _U(a_, b_)
        fix = _M.np_astype(_U(_U(q), _U(_U(q, b_), a_)), True)
        return _res(_U(q, fix), dt)
    cdt = _comp(dt)
    return _res(_U(_L(a, cdt), _L(b, cdt)), dt)


@floor_divide.meta_fn
def _floor_divide_meta(a, b):
    return _floor_div_meta(a, b, _M.result_dtype(a, b), "div_floor_cpu")


remainder.meta = lambda a, b: _floor_div_meta(a, b, _M.result_dtype(a, b), "remainder_cpu")
fmod.meta = lambda a, b: _floor_div_meta(a, b, _M.result_dtype(a, b), "fmod_cpu")


@neg.meta_fn
def _neg_meta(a):
    if a.dtype is _t.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return _res(_U(a), a.dtype)


@pow.meta_fn
def _pow_meta(a, b):
    _need_a_tensor("pow", a, b)
    dt = _M.result_dtype(a, b)
    if dt is _t.bool_ and not _is_scalar(b):
        raise _not_impl("pow", dt)
    if _is_scalar(b):
        _check_exponent(b, dt)
    _bcast(a, b)
    if dt.category < 2:
        if _is_scalar(b) and not isinstance(b, (bool, np.bool_)) and b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        cdt = _t.uint8 if dt is _t.bool_ else dt
        # the layout of the common case; a tensor exponent with negative entries takes a
        # where-chain in _int_pow whose layout can differ for expanded operands (data-dependent)
        return _res(_U(_L(a, cdt), _L(b, cdt)), dt)
    if dt in (_t.float16, _t.bfloat16) and _is_scalar(b) and not (b in (0.5, -0.5) and dt is _t.bfloat16):
        _scalar_to_low(np, b, dt)        # the kernel's checked conversion of the exponent raises too
    cdt = _comp(dt)
    return _res(_U(_L(a, cdt), _L(b, cdt)), dt)


@logit.meta_fn
def _logit_meta(a, eps=None):
    return _unary_float_meta(a)


# -- sign, abs, rounding
@abs.meta_fn
def _abs_meta(a):
    if a.dtype is _t.bool_:
        raise _not_impl("abs_cpu", _t.bool_)
    return _res(_U(a), a.dtype)


@sign.meta_fn
def _sign_meta(a):
    if a.dtype is _t.bool_:
        return _res(_M.np_contiguous(a.shape), a.dtype)      # a.copy(): C order
    return _res(_U(_cast(a, _comp(a.dtype))), a.dtype)


def _rounding_meta(kname):
    def meta(a, decimals=0):
        dt = a.dtype
        if dt is _t.bool_:
            raise _not_impl(kname, dt)
        if dt.category < 2:
            if decimals != 0:
                raise _not_impl("round_cpu", dt)
            return _res(_M.np_contiguous(a.shape), dt)       # a.copy(): C order
        return _res(_U(_cast(a, _comp(dt))), dt)
    return meta


floor.meta = _rounding_meta("floor_vml_cpu")
ceil.meta = _rounding_meta("ceil_vml_cpu")
trunc.meta = _rounding_meta("trunc_vml_cpu")
round.meta = _rounding_meta("round_vml_cpu")


@frac.meta_fn
def _frac_meta(a):
    if a.dtype.category < 2:
        raise _not_impl("frac_cpu", a.dtype)
    return _res(_U(_cast(a, _comp(a.dtype))), a.dtype)


# -- clamp, where, lerp, addcmul/addcdiv
def _clamp_meta_impl(a, lo, hi, name):
    if lo is None and hi is None:
        raise RuntimeError(f"{name}: At least one of 'min' or 'max' must not be None")
    dt = _M.result_dtype(a, lo, hi)
    _clamp_checks(dt, lo, hi)
    _bcast(a, lo, hi)
    cdt = _comp(dt)
    x = _L(a, cdt)
    if lo is not None:
        x = _U(x, _L_fit(lo, cdt, dt))
    if hi is not None:
        x = _U(x, _L_fit(hi, cdt, dt))
    return _res(x, dt)


clamp.meta = lambda a, lo=None, hi=None: _clamp_meta_impl(a, lo, hi, "torch.clamp")
clamp_min.meta = lambda a, lo: _clamp_meta_impl(a, lo, None, "torch.clamp_min")
clamp_max.meta = lambda a, hi: _clamp_meta_impl(a, None, hi, "torch.clamp_max")


@_where.meta_fn
def _where_meta(cond, a, b):
    c = cond
    if cond.dtype is not _t.bool_:
        if cond.dtype is not _t.uint8:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{cond.dtype.legacy_name}")
        c = _M.np_astype(cond, True)
    dt = _M.result_dtype(a, b)
    _bcast(cond, a, b)
    return _res(_U(c, _L_fit(a, dt, dt), _L_fit(b, dt, dt)), dt)


@lerp.meta_fn
def _lerp_meta(a, e, w):
    dt = _lerp_dtype(a, e, w, lambda v: v.dtype, _M.result_dtype)
    _bcast(a, e, w)
    cdt = _comp(dt)
    a_, e_, w_ = _L(a, cdt), _L(e, cdt), _L(w, cdt)
    d = _U(e_, a_)
    uw = _U(w_)
    r = _U(uw, _U(a_, _U(w_, d)), _U(e_, _U(d, uw)))
    return _res(r, dt)


@addcmul.meta_fn
def _addcmul_meta(a, t1, t2, value=1):
    dt = _M.result_dtype(a, t1, t2)
    _bcast(a, t1, t2)
    cdt = _comp(dt)
    p = _U(_L(t1, cdt), _L(t2, cdt))
    check_fits(value, dt)
    if dt is not _t.bool_:
        _L(_addc_value(dt, value), cdt)
    return _res(_U(_L(a, cdt), _U(p)), dt)


@addcdiv.meta_fn
def _addcdiv_meta(a, t1, t2, value=1):
    if t1.dtype.category < 2 and t2.dtype.category < 2:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
            "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
            "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
            "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
            "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    dt = _M.result_dtype(a, t1, t2)
    _bcast(a, t1, t2)
    cdt = _comp(dt)
    q = _U(_L(t1, cdt), _L(t2, cdt))
    return _res(_U(_L(a, cdt), _U(q, _L_fit(value, cdt, dt))), dt)


# -- classification, nan_to_num, masked_fill
def _classify_meta(a):
    if a.dtype.category < 2:                  # xp.full: C order
        return _res(_M.np_contiguous(a.shape), _t.bool_)
    return _res(_U(_cast(a, _comp(a.dtype))), _t.bool_)


for _op in (isnan, isinf, isfinite, isposinf, isneginf):
    _op.meta = _classify_meta


@nan_to_num.meta_fn
def _nan_to_num_meta(a, nan=0.0, posinf=None, neginf=None):
    if a.dtype.category < 2:                  # a.copy(): C order
        return _res(_M.np_contiguous(a.shape), a.dtype)
    return _res(_U(_cast(a, _comp(a.dtype))), a.dtype)


@masked_fill.meta_fn
def _masked_fill_meta(a, mask, value):
    if mask.dtype is not _t.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_TORCH_NAMES.get(mask.dtype.name, mask.dtype.name)}")
    if not _is_scalar(value) and value.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    shape = _bcast(mask, a, value)             # (torch's broadcast error names the mask first)
    _L_fit(value, a.dtype, a.dtype)
    return _M.out(tuple(shape), a.dtype)          # row-major, as the kernel's (and PyTorch's)


# -- comparisons, logical, bitwise
def _cmp_meta(a, b):
    dt = _M.result_dtype(a, b)
    _bcast(a, b)
    return _res(_U(_L(a, dt), _L(b, dt)), _t.bool_)


for _op in (eq, ne, lt, le, gt, ge):
    _op.meta = _cmp_meta


def _logical_meta(a, b):
    _bcast(a, b)
    return _res(_U(a, b), _t.bool_)


logical_and.meta = logical_or.meta = logical_xor.meta = _logical_meta
logical_not.meta = lambda a: _res(_U(a), _t.bool_)


def _bitwise_meta(kname):
    def meta(a, b):
        dt = _M.result_dtype(a, b)
        if dt.is_floating_point:
            raise _not_impl(kname, dt)
        _bcast(a, b)
        return _res(_U(_L(a, dt), _L(b, dt)), dt)
    return meta


bitwise_and.meta = _bitwise_meta("bitwise_and_cpu")
bitwise_or.meta = _bitwise_meta("bitwise_or_cpu")
bitwise_xor.meta = _bitwise_meta("bitwise_xor_cpu")


@bitwise_not.meta_fn
def _bitwise_not_meta(a):
    if a.dtype.is_floating_point:
        raise _not_impl("bitwise_not_cpu", a.dtype)
    return _res(_U(a), a.dtype)


def _shift_meta(left):
    kname = "lshift_cpu" if left else "rshift_cpu"

    def meta(a, b):
        dt = _M.result_dtype(a, b)
        if dt.category != 1:
            raise _not_impl(kname, dt)
        _bcast(a, b)
        a_, b_ = _L(a, dt), _L(b, dt)
        out_of_range = _U(b_)
        amount = _M.np_astype(_U(out_of_range, b_), True)
        if left:
            return _res(_U(out_of_range, _U(a_, amount)), dt)
        fill = _U(a_) if dt.is_signed else _M.np_astype(a_ if a_ is not None else _M.NpLayout((), ()), True)
        return _res(_U(out_of_range, fill, _U(a_, amount)), dt)
    return meta


bitwise_left_shift.meta = _shift_meta(True)
bitwise_right_shift.meta = _shift_meta(False)


# -- activations
@relu.meta_fn
def _relu_meta(a):
    if a.dtype is _t.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    return _res(_U(a), a.dtype)


@hardtanh.meta_fn
def _hardtanh_meta(a, min_val=-1, max_val=1):
    dt = a.dtype
    if dt is _t.bool_:
        raise _not_impl("hardtanh_cpu", dt)
    if dt is _t.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    x = _cast(a, _comp(dt))
    return _res(_U(x, _L_fit(min_val, _comp(dt), dt), _L_fit(max_val, _comp(dt), dt)), dt)


def _float_act_meta(kname, check=None):
    """An activation PyTorch implements for floating dtypes only; ``check(*args)`` for its own argument errors."""
    def meta(a, *args):
        dt = a.dtype
        if not dt.is_floating_point:
            raise _not_impl(kname, dt)
        if check is not None:
            check(*args)
        return _res(_U(_cast(a, _comp(dt))), dt)
    return meta


def _celu_check(alpha=1.0):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")


def _softshrink_check(lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")


leaky_relu.meta = _float_act_meta("leaky_relu_cpu")
elu.meta = _float_act_meta("elu_cpu")
celu.meta = _float_act_meta("elu_cpu", _celu_check)
silu.meta = _float_act_meta("silu_cpu")
mish.meta = _float_act_meta("mish_cpu")
softplus.meta = _float_act_meta("softplus_cpu")
hardswish.meta = _float_act_meta("hardswish_cpu")
hardsigmoid.meta = _float_act_meta("hardsigmoid_cpu")
def _logsigmoid_meta(a):
    _float_act_meta("log_sigmoid_cpu")(a)
    return _M.out(tuple(a.shape), a.dtype)        # row-major, as the kernel's (and PyTorch's)


logsigmoid.meta = _logsigmoid_meta
hardshrink.meta = _float_act_meta("hardshrink_cpu")
softshrink.meta = _float_act_meta("softshrink_cpu", _softshrink_check)


@gelu.meta_fn
def _gelu_meta(a, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    dt = a.dtype
    if not dt.is_floating_point:
        raise _not_impl("GeluKernelImpl", dt)
    if approximate == "tanh":
        return _res(_U(_cast(a, _comp(dt))), dt)
    return _res(_M.np_astype(a, True), dt)    # a.astype(float64): always a 'K' copy


@threshold.meta_fn
def _threshold_meta(a, threshold, value):
    dt = a.dtype
    if dt is _t.bool_:
        raise _not_impl("threshold_cpu", dt)
    check_fits(threshold, dt)
    return _res(_U(_cast(a, _comp(dt)), _L_fit(value, _comp(dt), dt)), dt)


# ---------------------------------------------------------------------- closeness
@defcomposite("isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor")
def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|self - other| <= atol + rtol * |other|`` elementwise, as torch.isclose: equal values
    (infinities of one sign included) are close, NaN is close to NaN only with ``equal_nan``,
    and both tensors must have one dtype (PyTorch refuses mixed dtypes too)."""
    if self.dtype != other.dtype:
        raise RuntimeError(f"{self.dtype.legacy_name} did not match {other.dtype.legacy_name}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol:g}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol:g}")
    close = self == other
    if equal_nan and self.dtype.is_floating_point:
        close = close | (api.isnan(self) & api.isnan(other))
    if rtol == 0 and atol == 0:
        return close
    if self.dtype is _t.bool_:
        # bools: their difference in the default float dtype, as PyTorch does
        self, other = self.to(_t.get_default_dtype()), other.to(_t.get_default_dtype())
    allowed = atol + api.abs(rtol * other)
    actual = api.abs(self - other)
    return close | (api.isfinite(actual) & (actual <= allowed))
