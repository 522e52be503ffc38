"""Which ops run on torch's partially supported dtypes: uint16/uint32/uint64 and the float8 family.

torch 2.13 stores these dtypes, converts to and from them and moves them around (views, cat,
indexing, copies), but its CPU kernels are compiled for few of them: ``uint16 + uint16`` raises
``"add_stub" not implemented for 'UInt16'`` while ``uint16 * uint16`` works. numpy would happily
compute every op, so ember keeps one allow-list here (measured against torch 2.13 by
tests/ops/test_new_dtypes.py) and one check:

* each op that is not allowed for a family gets ``op.limited_refusal`` (the error factory); its
  kernel is wrapped with a check of the first tensor argument (``self``), which every dispatch
  path reaches, and its generated binding tests ``self.dtype._limited`` inline and calls the
  unwrapped kernel otherwise (ember/ops/registry.py, like the complex refusal);
* the check decides on the dtype torch picks its kernel by: ``self`` promoted with the operands
  it promotes with (``other``, ``exponent``). A pair torch refuses raises torch's promotion error
  (``ember.types``); ``uint16 + 1.5`` is float32, which every op runs;
* a few composite ops (``_COMPOSITES``) get the same check on their body, so that a constituent
  op does not answer (or raise another kernel's name) first.

Two ops compute float8 themselves: ``mul`` (float32 product rounded as torch) and
float8_e8m0fnu's ``isfinite``. Conversions into float8 use ember/_float8.py (torch's
saturation of float8_e4m3fn, its float8_e8m0fnu rounding): the conversion kernels (``_to_copy``,
``copy``, ``fill``, ``full``) are wrapped for that when the target is float8.

Not reached: functions outside the registry written over other ops (``Tensor.equal``,
``nansum``): they answer, or raise their constituents' errors.
"""
from __future__ import annotations

import numpy as np

from .. import types as _t
from .._float8 import fits_float8, needs_torch_rounding, to_float8

# Ops that only rearrange, copy or convert elements: torch runs them on every dtype.
_STRUCTURAL = frozenset("""
    _to_copy copy copy_ fill fill_ clone empty full cat stack view view_dtype _reshape_alias _unsafe_view _restride
    as_strided alias permute expand select slice t transpose squeeze unsqueeze split split_with_sizes unbind
    diagonal diag repeat roll _basic_index index masked_select where
""".split())

# What else torch 2.13's CPU kernels do per family (the probe in tests/ops/test_new_dtypes.py).
_ALLOWED = {
    "uint": _STRUCTURAL | frozenset("""
        _random _random_ mul mul_ div div_ eq eq_ ne ne_ bitwise_and bitwise_and_ bitwise_or bitwise_or_
        bitwise_xor bitwise_xor_ sum prod sort argsort cumsum cumprod unique unique_consecutive any all isnan
        isfinite isinf isposinf isneginf signbit trunc floor ceil round nan_to_num
        exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh
        sigmoid sqrt rsqrt erf erfc erfinv reciprocal lgamma digamma logit special_i0 sinc deg2rad rad2deg
        atan2 equal allclose isclose
    """.split()),
    # float8: the conversions and moves, comparisons for equality, and float8 * float8 (computed
    # in float32 and rounded as torch, ``_float8_mul``). torch also takes abs of (and matmuls) some
    # float8 dtypes -- ember refuses those with its own error (below) rather than risk rounding
    # them differently.
    "float8": _STRUCTURAL | frozenset("isnan any all eq eq_ ne ne_ index_select mul mul_".split()),
}
# torch's sub-byte dtypes (ember.types.SUBBYTE_DTYPES): made, viewed and moved, never computed on,
# converted or filled (a fill of zero -- zeros(), zero_() -- writes zero bytes: allowed, see
# ember/ops/checked_scalar.py). The bit containers and float4_e2m1fn_x2 also copy; uint1..7 and
# int1..7 do not (torch's "copy_kernel" has no case for them).
_SUBBYTE_MOVES = frozenset("""
    empty full fill fill_ cat stack view view_dtype _reshape_alias _unsafe_view _restride as_strided alias permute
    expand select slice t transpose squeeze unsqueeze split split_with_sizes unbind _basic_index flip index_select
""".split())
_ALLOWED["subbyte"] = _SUBBYTE_MOVES
_ALLOWED["bits"] = _SUBBYTE_MOVES | frozenset("clone copy copy_ repeat diag roll where".split())
_ALLOWED["subbyte"] |= frozenset("roll where".split())
# the float8 dtypes differ among themselves: e8m0fnu has a compiled isfinite and no index_put
_ALLOWED_BY_DTYPE = {"float8_e8m0fnu": _ALLOWED["float8"] | {"isfinite"}}
for _n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    _ALLOWED_BY_DTYPE[_n] = _ALLOWED["float8"] | {"index_put", "index_put_"}
_ALLOWED_BY_DTYPE["float8_e5m2"] |= {"isfinite"}
# ops that run on a limited dtype but through their own kernel here (see ``_guarded``): always wrapped
_OWN_KERNEL = frozenset(("mul", "mul_", "isfinite"))

# torch's ops that float8 tensors do run but ember refuses (see above)
_TORCH_RUNS_FLOAT8 = frozenset("abs abs_ mm bmm".split())

# The name of the kernel torch's error names, where it is not the op's own name.
_KERNEL = {
    "add": "add_stub", "sub": "add_stub", "rsub": "add_stub", "floor_divide": "div_floor_cpu",
    "remainder": "remainder_cpu", "neg": "neg_cpu", "abs": "abs_cpu", "lt": "lt_cpu", "le": "le_cpu",
    "gt": "gt_cpu", "ge": "ge_cpu", "bitwise_not": "bitwise_not_cpu", "bitwise_left_shift": "lshift_cpu",
    "bitwise_right_shift": "rshift_cpu", "max": "max_all", "min": "min_all", "amax": "max_values_cpu",
    "amin": "min_values_cpu", "argmax": "argmax_cpu", "argmin": "argmin_cpu", "maximum": "maximum_cpu",
    "minimum": "minimum_cpu", "clamp": "clamp_scalar_cpu", "clamp_min": "clamp_min_scalar_cpu",
    "clamp_max": "clamp_max_scalar_cpu", "relu": "clamp_min_scalar_cpu", "mm": "addmm_impl_cpu_",
    "addmm": "addmm_impl_cpu_", "flip": "flip_cpu", "nonzero": "nonzero_count_cpu", "sign": "sign_cpu",
    "gather": "scatter_gather_tensor_cpu", "scatter": "scatter_gather_tensor_cpu", "topk": "topk_cpu",
    "min_dim": "min_cpu", "max_dim": "max_cpu", "lerp": "lerp_kernel_scalar", "bincount": "bincount_cpu",
    "logical_and": "logical_and_cpu", "logical_or": "logical_or_cpu", "logical_xor": "logical_xor_cpu",
    "logical_not": "logical_not_cpu", "cummax": "cummax_cpu", "cummin": "cummin_cpu",
    "sort": "sorting_kernel_method_name", "argsort": "sorting_kernel_method_name",
    "cumsum": "cumsum_out_cpu", "prod": "prod_out_cpu", "sum": "sum_cpu", "div": "div_cpu",
    "exp": "exp_vml_cpu", "sin": "sin_vml_cpu", "sqrt": "sqrt_vml_cpu", "trunc": "trunc_vml_cpu",
    "floor": "floor_vml_cpu", "ceil": "ceil_vml_cpu", "cos": "cos_vml_cpu", "log": "log_vml_cpu",
    "tanh": "tanh_cpu", "sigmoid": "sigmoid_cpu", "round": "round_cpu", "isfinite": "isfinite",
    "bitwise_and": "bitwise_and_cpu", "bitwise_or": "bitwise_or_cpu", "bitwise_xor": "bitwise_xor_cpu",
    "median": "median_cpu", "nanmedian": "nanmedian_cpu", "kthvalue": "kthvalue_cpu",
    "searchsorted": "searchsorted_out_cpu",
    "bucketize": "searchsorted_out_cpu", "count_nonzero": "nonzero_count_cpu", "cumprod": "cumprod_out_cpu",
    "index_add": "index_add_", "take": "take_cpu", "fmod": "fmod_cpu", "atan2": "atan2_cpu", "frac": "frac_cpu",
    "nansum": "nansum_cpu", "equal": "equal_notnan_cpu", "index_fill": "index_fill_", "index_copy": "index_copy_",
}
_FLOAT8_KERNEL = {"gather": "gather_expanded_index", "mean": "sum_cpu", "round": "round_vml_cpu",
                  "sigmoid": "sigmoid_cpu_reduced_float", "tanh": "tanh_vml_cpu", "ceil": "ceil_vml_cpu",
                  "isclose": "mul_cpu_reduced_float", "allclose": "mul_cpu_reduced_float"}
# the sub-byte dtypes' kernels torch names where the uint family runs the op
_SUBBYTE_KERNEL = {"eq": "eq_cpu", "ne": "ne_cpu", "mul": "mul_cpu", "equal": "equal_notnan_cpu", "div": "div_true_cpu",
                   "isnan": "ne_cpu", "any": "copy_", "all": "copy_", "_random": "check_uniform_bounds",
                   "exp": "exp_vml_cpu", "sin": "sin_vml_cpu"}
# float8 with a number as the other operand: torch's "reduced float" scalar kernels
_FLOAT8_SCALAR_KERNEL = {"div": "div_cpu_reduced_float", "floor_divide": "div_floor_cpu_reduced_float",
                         "mul": "mul_cpu_reduced_float"}
# composite ops (no kernel of their own here) that torch refuses with their own kernel's name: their
# composite is wrapped with the check, so a limited self does not reach a constituent op first
# (rarely hot ones only: the wrapper is one more Python frame on every call, whatever the dtype)
_COMPOSITES = frozenset("""
    count_nonzero masked_scatter median nanmedian kthvalue cummax cummin searchsorted bucketize isclose
""".split())


def _legacy_err(op_name, dt, kernel=None):
    base = op_name[:-1] if op_name.endswith("_") and not op_name.startswith("_") else op_name
    torch_runs = _TORCH_RUNS_FLOAT8 - {"abs", "mm", "bmm"} if dt.name == "float8_e8m0fnu" else _TORCH_RUNS_FLOAT8
    if base == "bitwise_not" and dt._limited == "float8":
        return TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    if dt._limited == "float8" and base in torch_runs:
        return NotImplementedError(f"ember: {base} on {dt.name} tensors is not supported (ember converts, "
                                   f"copies and moves float8 tensors only; convert to float32 first)")
    if dt._limited == "subbyte" and base in ("clone", "copy", "contiguous", "repeat", "diag", "masked_fill",
                                              "_to_copy", "sort", "argsort"):
        return NotImplementedError(f'"copy_kernel" not implemented for \'{dt._legacy}\'')
    if dt._limited in ("subbyte", "bits") and base in ("index", "_index", "index_select", "masked_select",
                                                       "index_put"):
        return NotImplementedError(f'"{"index_cpu" if "index" in base and base != "index_select" else base}" '
                                   f'not implemented for \'{dt._legacy}\'')
    if base == "mean" and dt._limited == "uint":
        return RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating "
                            f"point or complex dtype. Got: {dt._legacy}")
    if base in ("std", "var", "std_mean", "var_mean"):
        if dt._limited == "uint":
            return RuntimeError("std and var only support floating point and complex dtypes")
        return RuntimeError(f"std_var_all: Unsupported dtype {dt._legacy}")
    if dt._limited in ("subbyte", "bits"):
        kernel = kernel or _SUBBYTE_KERNEL.get(base)
    kernel = kernel or (_FLOAT8_KERNEL.get(base) if dt._limited == "float8" else None) or _KERNEL.get(base, base)
    return NotImplementedError(f'"{kernel}" not implemented for \'{dt._legacy}\'')


def is_allowed(op_name, dt) -> bool:
    """Whether ``op_name`` runs on tensors of the limited dtype ``dt``."""
    allowed = _ALLOWED_BY_DTYPE.get(dt.name) or _ALLOWED[dt._limited]
    return op_name in allowed


_LIMITED_NP = {d.np: d for d in _t.LIMITED_DTYPES}


def _first_arg_dtype(x):
    """The limited ember dtype of a kernel's first tensor argument (an array, a list of arrays
    or a number), or None."""
    if type(x) is list:
        x = x[0] if x else None
    d = getattr(x, "dtype", None)
    return _LIMITED_NP.get(d) if d is not None else None


def _common_dtype(dt, args, operands):
    """The dtype torch dispatches the kernel on: ``self``'s dtype promoted with the operands it
    promotes with (``other``/``exponent``: tensors by torch's three tiers, numbers by category).
    A pair torch refuses raises its promotion error here, before any kernel is looked for."""
    dims, zero_dims, scalars = [dt], [], []
    for i in operands:
        x = args[i] if i < len(args) else None
        if x is None:
            continue
        d = getattr(x, "dtype", None)
        if d is None:
            scalars.append(x)
        elif getattr(x, "ndim", 0):
            dims.append(_t.from_numpy_dtype(d))
        else:
            zero_dims.append(_t.from_numpy_dtype(d))
    if len(dims) == 1 and not zero_dims and not scalars:
        return dt
    return _t.result_type_from(dims, zero_dims, scalars)


def _kernel_name(base, dt, args, pos, operands):
    if dt._limited == "float8" and base in _FLOAT8_SCALAR_KERNEL and any(
            i < len(args) and not hasattr(args[i], "dtype") for i in operands):
        return _FLOAT8_SCALAR_KERNEL[base]
    if base in ("_softmax", "softmax", "_log_softmax", "log_softmax"):
        x, dim = args[pos], args[pos + 1] if pos + 1 < len(args) else -1
        nd = getattr(x, "ndim", 1)
        last = nd <= 1 or not isinstance(dim, int) or dim % nd == nd - 1
        return ("log_" if "log" in base else "") + ("softmax_lastdim_kernel_impl" if last else "softmax_kernel_impl")
    return None


def _guarded(op, kernel, pos):
    name = op.name
    base = name[:-1] if name.endswith("_") and not name.startswith("_") else name
    # the operands torch promotes with self to choose the kernel's dtype
    operands = tuple(i for i in op.tensor_pos if i != pos and op.params[i].name in ("other", "exponent"))
    is_mul = base == "mul"
    is_isfinite = name == "isfinite"

    def k(xp, *args, **kwargs):          # (the inductor's fallbacks pass keyword-only params by name)
        dt = _first_arg_dtype(args[pos]) if pos < len(args) else None
        if dt is not None:
            common = _common_dtype(dt, args, operands)
            if common._limited is None:
                # e.g. uint16 + 1.5: torch computes in float32, as the kernel does
                return kernel(xp, *args, **kwargs)
            dt = common
            if is_mul and dt._limited == "float8" and operands and hasattr(args[operands[0]], "dtype") \
                    and xp is np:
                return _float8_mul(args[pos], args[operands[0]], dt.np)
            if is_isfinite and dt is _t.float8_e8m0fnu:
                # torch: a float8_e8m0fnu has no infinity, so every element is finite (NaN too)
                return xp.ones(args[pos].shape, dtype=bool)
            if not is_allowed(name, dt) or (is_mul and dt._limited == "float8"):
                raise _legacy_err(name, dt, _kernel_name(base, dt, args, pos, operands))
        return kernel(xp, *args, **kwargs)
    k.__name__ = getattr(kernel, "__name__", "kernel")
    k.__qualname__ = getattr(kernel, "__qualname__", k.__name__)
    k.__module__ = getattr(kernel, "__module__", __name__)
    k.__wrapped__ = kernel
    return k


def _guarded_composite(op, fn):
    """A composite op's body with the check on its first tensor argument (a Tensor here)."""
    name = op.name
    base = name[:-1] if name.endswith("_") and not name.startswith("_") else name
    pos = min(op.tensor_pos + op.list_pos)
    as_float = base in ("allclose", "isclose")

    def f(*args, **kwargs):
        x = args[pos] if pos < len(args) else None
        dt = getattr(x, "dtype", None)
        if dt is not None and getattr(dt, "_limited", None) is not None:
            if not is_allowed(name, dt):
                raise _legacy_err(name, dt, _kernel_name(base, dt, args, pos, ()))
            if as_float and dt._limited == "uint":
                # torch compares unsigned tensors exactly; float64 holds them exactly below 2**53
                args = tuple(a.to(_t.float64) if getattr(a, "dtype", None) is dt else a for a in args)
        return fn(*args, **kwargs)
    f.__name__ = getattr(fn, "__name__", name)
    f.__qualname__ = getattr(fn, "__qualname__", f.__name__)
    f.__module__ = getattr(fn, "__module__", __name__)
    f.__wrapped__ = fn
    return f


# ---------------------------------------------------------------------- float8 arithmetic / conversions
def _float8_mul(a, b, np_dtype):
    """torch's float8 product: each operand widened to float32, multiplied, rounded back with
    torch's conversion (ml_dtypes' own product rounds overflow and NaN signs differently)."""
    with np.errstate(all="ignore"):
        return to_float8(np.multiply(a.astype(np.float32), b.astype(np.float32)), np_dtype)


# The four conversion kernels (_to_copy, copy, fill, full) call these when their target dtype is
# a float8 one (one inline ``dt._limited == "float8"`` test in each kernel: a wrapper around the
# kernel cost every dense ``to``/``copy_``/``fill_``/``zeros`` a Python frame, ~0.25 us).
def float8_source(xp, a, dt):
    """``a`` rounded into float8 ``dt`` as torch rounds (``_to_copy``'s source)."""
    if needs_torch_rounding(dt.np) and xp is np and a.dtype != dt.np:
        return to_float8(a, dt.np)
    return a


def float8_copy_source(xp, self, src):
    """``copy_``'s source for a float8 ``self`` array: arrays rounded, numbers checked and rounded."""
    if xp is np and needs_torch_rounding(self.dtype):
        if isinstance(src, np.ndarray) and src.dtype != self.dtype:
            return to_float8(src, self.dtype)
        if not isinstance(src, np.ndarray) and not isinstance(src, (bool, np.bool_)):
            _check_float8_value(src, self.dtype)
            return _rounded(src, self.dtype)
    return src


def _rounded(value, np_dtype):
    """A Python number as the float it becomes in float8 ``np_dtype`` (torch's rounding): the
    kernels' own cast of it is then exact."""
    return float(to_float8(np.asarray(value, dtype=np.float64), np_dtype).astype(np.float32))


def _check_float8_value(value, np_dtype):
    if not fits_float8(value, np_dtype):
        dt = _t.from_numpy_dtype(np_dtype)
        raise RuntimeError(f"value cannot be converted to type c10::{dt._legacy} without overflow")


def float8_fill_value(xp, self, value):
    """``fill_``'s value for a float8 ``self`` array."""
    if xp is np and needs_torch_rounding(self.dtype):
        if isinstance(value, np.ndarray):
            return to_float8(value, self.dtype)
        if not isinstance(value, (bool, np.bool_)):
            # torch checks the value only when it fills more than one element; zero_() (fill 0)
            # writes zero bytes in torch, which is 2**-127 in float8_e8m0fnu: not checked
            if self.size > 1 and value != 0:
                _check_float8_value(value, self.dtype)
            return _rounded(value, self.dtype)
    return value


def float8_full_value(xp, size, fill_value, dt):
    """``full``'s fill value for float8 ``dt``."""
    if xp is np and not isinstance(fill_value, (bool, np.bool_)) and needs_torch_rounding(dt.np):
        n = 1
        for s in size:
            n *= s
        # zeros() is full(0.0): 0 is not checked (torch's zeros writes zero bytes)
        if n > 1 and fill_value != 0:
            _check_float8_value(fill_value, dt.np)
        return _rounded(fill_value, dt.np)
    return fill_value


# ---------------------------------------------------------------------- sub-byte conversions
def _subbyte_of(arr):
    """The sub-byte ember dtype of a numpy array (its structured dtype), or None."""
    d = _LIMITED_NP.get(getattr(arr, "dtype", None))
    return d if d is not None and d._limited in ("subbyte", "bits") else None


def _refuse_subbyte_conversion(src_np, dt, copy_into=False):
    """torch's refusal of a conversion into or out of a sub-byte dtype (``"copy_"`` names the
    sub-byte side: the target when both are); same-dtype copies pass, except for uint1..7 /
    int1..7, which torch cannot copy at all (``"copy_kernel"``)."""
    src = _subbyte_of(np.empty(0, src_np)) if src_np is not None else None
    if src is dt:
        if dt._limited == "subbyte" and not copy_into:     # (copy_ between two of them: a memcpy)
            raise NotImplementedError(f'"copy_kernel" not implemented for \'{dt._legacy}\'')
        return
    bad = dt if dt._limited in ("subbyte", "bits") else src
    if bad is not None:
        raise NotImplementedError(f'"copy_" not implemented for \'{bad._legacy}\'')


def limited_source(xp, a, dt):
    """``_to_copy``'s source when the target ``dt`` is a limited dtype: float8 rounded as torch,
    a sub-byte target refused unless ``a`` already has that dtype (bits / float4 copies)."""
    if dt._limited in ("subbyte", "bits"):
        _refuse_subbyte_conversion(a.dtype, dt)
        return a
    return float8_source(xp, a, dt) if dt._limited == "float8" else a


def limited_copy_source(xp, self, src, dt):
    """``copy_``'s source for a limited ``self`` of dtype ``dt`` (see :func:`limited_source`;
    a number written into a sub-byte tensor is refused by ember/ops/checked_scalar.py)."""
    if dt._limited in ("subbyte", "bits"):
        if hasattr(src, "dtype"):
            _refuse_subbyte_conversion(src.dtype, dt, copy_into=True)
        return src
    return float8_copy_source(xp, self, src) if dt._limited == "float8" else src


def refuse_subbyte_source(a, dt):
    """A conversion out of a sub-byte array ``a`` into ``dt`` (a dtype with no ``_limited``
    family: checked by the conversion kernels only when ``a``'s numpy dtype is structured)."""
    _refuse_subbyte_conversion(a.dtype, dt)


_CONVERSIONS = frozenset(("_to_copy", "copy", "fill", "full"))   # float8-aware kernels: not guarded


# ---------------------------------------------------------------------- install
def install():
    """Wrap every kernel op's kernel with the check (once; call after all ops are registered)
    and regenerate the bindings of the refusing ones (their fast path tests the dtype inline).
    The regenerated bindings' code objects come from their own on-disk group (_binding_cache):
    compiling ~250 of them on every import cost ~0.3 s."""
    from . import _binding_cache
    with _binding_cache.group("limited_dtypes"):
        _install()


def _install():
    from .registry import OPS, refresh_binding
    done = set()
    for op in list(OPS.values()):
        if op.composite is not None and op.name in _COMPOSITES and not hasattr(op.composite, "__wrapped__"):
            op.composite = _guarded_composite(op, op.composite)
            refresh_binding(op)
            continue
        if op.kernel is None or id(op) in done or getattr(op, "limited_refusal", None):
            continue
        base = op.functional if op.functional is not None else op
        if base.name in _CONVERSIONS:
            done.update((id(base), id(base.inplace_variant)))
            continue
        if base.name not in _OWN_KERNEL and all(is_allowed(base.name, d) for d in _t.LIMITED_DTYPES):
            done.add(id(op))
            continue
        pos = (base.tensor_pos + base.list_pos)
        if not pos:
            done.add(id(op))
            continue
        first = min(pos)
        raw = base.kernel
        checked = _guarded(base, raw, first)
        for o in (base, base.inplace_variant):
            if o is None:
                continue
            o.kernel = checked
            o.limited_refusal = _legacy_err
            if o.unchecked_kernel is None:
                o.unchecked_kernel = raw
            done.add(id(o))
        refresh_binding(base)    # in-place bindings reach the kernel through the functional op's run
