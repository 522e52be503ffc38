"""torch's ``out=`` contract, implemented once for every function that takes ``out=``.

A call ``f(..., out=t)`` computes ``f(...)`` as usual and writes the result into ``t``, which
it returns (the very object; a tuple-returning op takes and returns a tuple of them). The
rules, as PyTorch's:

* ``out`` must be a Tensor (a tuple/list of as many Tensors for a multi-output op);
* autograd: with grad mode on, no argument (``out`` included) may require grad -- PyTorch's
  out= variants have no derivative, so it raises instead of silently dropping the history;
* ``out`` may not have internal overlap (an expanded tensor), nor overlap an input partially
  (pointwise ops) or at all (``cat``/``stack``); any other aliasing is made correct by
  computing the whole result first and copying it in afterwards;
* device: the result's device must be ``out``'s;
* dtype: the result's dtype must cast to ``out``'s under torch's rules (``can_cast``), or, for
  the ops whose PyTorch kernel checks it exactly (``mm``, ``where``, linalg, ...), equal it;
* shape: an ``out`` of another shape is resized (with PyTorch's deprecation UserWarning when it
  had elements), as ``Tensor.resize_`` would: a tensor owning its memory can always be
  resized; a view only within its base's memory (ember cannot grow a base's memory under it);
* the write bumps ``out``'s version counter (it goes through ``copy_``, so tracing modes and
  functionalization see an ordinary in-place write).

Only the slow path of a call runs this: the generated op bindings test ``out is not None``
once and come here; the common call pays nothing else.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import types as _t
from .._state import STATE
from ..tensor import Tensor

# Ops whose PyTorch out= kernel insists on exactly the result dtype (no casting into a wider
# out): found by trying torch 2.13 with an out one dtype wider than its result (the audit in
# tests/ops/_out_audit.py, ``dtype_strictness``). Everything else follows TensorIterator's
# rule (the result type must be castable to out's dtype); multi-output ops are all exact.
STRICT_DTYPE = frozenset("""
abs absolute addbmm addmm addmv alias_copy amax amin baddbmm bmm ceil chain_matmul clamp clip complex
conj_physical cross detach_copy diag diagonal_copy dot fix floor frac frobenius_norm gather hardshrink
heaviside histc index_add index_copy index_reduce index_select inner inverse ldexp log_softmax
logcumsumexp masked_select matmul matrix_power mm msort mv nan_to_num nanquantile neg negative norm
nuclear_norm polar quantile renorm round scatter scatter_add scatter_reduce sgn sign slice_copy
slice_scatter softmax squeeze_copy t_copy take take_along_dim tensordot tril triu trunc unsqueeze_copy
vdot view_as_real_copy where linalg.cholesky linalg.det linalg.eigvalsh linalg.inv linalg.matmul
linalg.matrix_norm linalg.matrix_power linalg.multi_dot linalg.norm linalg.solve linalg.solve_triangular
linalg.svdvals linalg.vecdot linalg.vector_norm special.round fft.ifft fft.ihfft
as_strided_copy expand_copy narrow_copy permute_copy select_copy transpose_copy unfold_copy view_copy
view_as_complex_copy softshrink logsigmoid
""".split())

_OVERLAP_ANY = frozenset(("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack",
                          "column_stack", "row_stack"))


def _tensors_in(args):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, Tensor):
                    yield x


def _check_out_type(name, out, n):
    if n is None:
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
        return (out,)
    if not isinstance(out, (tuple, list)) or not all(isinstance(o, Tensor) for o in out):
        raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
    if len(out) != n:
        raise TypeError(f"{name}(): argument 'out' must be a tuple of {n} Tensors, got {len(out)}")
    return tuple(out)


def _array(t):
    d = t._data
    return d if isinstance(d, np.ndarray) else None


def _internal_overlap(t):
    a = _array(t)
    if a is None:
        return False
    return any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))


def _same_view(a, b):
    return (a.shape == b.shape and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def check_before(name, outs, inputs):
    """What PyTorch checks before computing: grad mode and overlap."""
    if STATE.grad_enabled:
        if any(t._requires_grad for t in inputs) or any(o._requires_grad for o in outs):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               f"differentiation, but one of the arguments requires grad.")
    for o in outs:
        if _internal_overlap(o):
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor "
                               "refers to a single memory location. Please clone() the tensor before "
                               "performing the operation.")
        oa = _array(o)
        if oa is None or oa.size == 0:
            continue
        for t in inputs:
            ia = _array(t)
            if ia is None or ia.size == 0 or not np.may_share_memory(oa, ia):
                continue
            if name in _OVERLAP_ANY or _POINTWISE[name] and not _same_view(oa, ia):
                if np.shares_memory(oa, ia):
                    raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                                       "written-to tensor refer to a single memory location. Please clone() "
                                       "the tensor before performing the operation.")


def _is_pointwise(name):
    from .registry import OPS
    op = OPS.get(name)
    return op is not None and "pointwise" in op.tags


class _PointwiseLookup(dict):
    def __missing__(self, name):
        v = self[name] = _is_pointwise(name)
        return v


_POINTWISE = _PointwiseLookup()


def _user_level():
    """The warning's stacklevel: the first frame outside ember (the user's call)."""
    import sys
    f, level = sys._getframe(2), 2
    while f is not None and (f.f_code.co_filename.startswith(_EMBER_DIR) or f.f_code.co_filename.startswith("<ember")):
        f, level = f.f_back, level + 1
    return level


_EMBER_DIR = __import__("os").path.dirname(__import__("os").path.dirname(__file__))


def resize_out(out, shape):
    """Resize ``out`` to ``shape`` in place, as an out= argument is (PyTorch's warning when it had
    elements). Contiguous strides, as PyTorch's ``resize_`` gives; a view is re-pointed within
    its base's memory when that memory is large enough, else it cannot be resized."""
    old = tuple(out.shape)
    if old == tuple(shape):
        return
    d = out._data
    n = int(np.prod(shape, dtype=np.int64))
    from .._fake import FakeArray
    if isinstance(d, FakeArray):
        # a traced graph cannot resize a tensor it was given (aot's functionalization has
        # no metadata write-back): refused while tracing, so dynamo runs this call eagerly
        # between two graphs (a graph break), which is correct for inputs and intermediates
        raise RuntimeError(f"ember: out= would resize its out tensor from {list(old)} to {list(shape)} "
                           f"while tracing; compiled graphs only write into an out of the result's "
                           f"shape (this call runs eagerly)")
    if out.numel() != 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(old)}, "
                      f"which does not match the required output shape {list(shape)}. This behavior is "
                      f"deprecated, and in a future PyTorch release outputs will not be resized unless they "
                      f"have zero elements. You can explicitly reuse an out tensor t by resizing it, "
                      f"inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=_user_level())
    if not isinstance(d, np.ndarray):
        # another backend (cupy): a fresh allocation for a tensor owning its memory
        if out._base is not None:
            _view_resize_error(old, shape)
        from .registry import xp_of
        out._data = xp_of(out.device).empty(tuple(shape), dtype=d.dtype)
        out._bump_version()
        return
    if out._base is None:
        if d.flags.c_contiguous and n <= d.size:
            out._data = d.reshape(-1)[:n].reshape(shape)
        else:
            # (PyTorch keeps the first elements of the storage; they are overwritten next anyway)
            out._data = np.empty(tuple(shape), dtype=d.dtype)
        out._bump_version()
        return
    # a view: a contiguous stretch of its base's memory starting where the view starts
    base = out._base._data
    if isinstance(base, np.ndarray) and base.flags.c_contiguous:
        flat = base.reshape(-1)
        start = (d.__array_interface__["data"][0] - flat.__array_interface__["data"][0])
        if start % d.itemsize == 0 and 0 <= start // d.itemsize and start // d.itemsize + n <= flat.size:
            k = start // d.itemsize
            out._data = flat[k:k + n].reshape(shape)
            out._bump_version()
            return
    _view_resize_error(old, shape)


def _view_resize_error(old, shape):
    raise RuntimeError(f"ember: out= needs to resize a view of shape {list(old)} to {list(shape)}, beyond "
                       f"the memory of its base; ember cannot grow a base's memory under its views. Pass an "
                       f"out tensor that owns its memory, or one of the result's shape")


def _check_and_write(name, o, r, strict, any_cast=False):
    if not isinstance(r, Tensor):
        raise RuntimeError(f"{name}(): out= is not supported for a result of type {type(r).__name__}")
    if r.device != o.device:
        raise RuntimeError(f"Expected out tensor to have device {r.device}, but got {o.device} instead")
    if strict:
        if r.dtype is not o.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {_cname(r.dtype)}, but got "
                               f"{_cname(o.dtype)} instead")
    elif not any_cast and not _t.can_cast(r.dtype, o.dtype):
        if name in _OVERLAP_ANY:     # torch's cat kernel checks its inputs' types, with a TypeError
            raise TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                            f"{o.dtype.legacy_name}")
        raise RuntimeError(f"result type {r.dtype.legacy_name} can't be cast to the desired output type "
                           f"{o.dtype.legacy_name}")
    resize_out(o, tuple(r.shape))
    from .. import no_grad
    with no_grad():
        o.copy_(r)


_CNAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
           "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
           "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
           "complex128": "c10::complex<double>"}


def _cname(dt):
    n = str(dt).replace("ember.", "")
    return _CNAMES.get(n, n)


def write_out(name, out, result, inputs=(), strict=None, any_cast=False):
    """Write ``result`` (a Tensor, or a tuple of them) into ``out`` after PyTorch's checks;
    returns ``out`` (a tuple-returning op: ``result``'s namedtuple type over the out tensors).
    ``check_before`` must have run before the result was computed."""
    if strict is None:
        strict = name in STRICT_DTYPE
    if isinstance(result, tuple):
        outs = _check_out_type(name, out, len(result))
        for o, r in zip(outs, result):
            # PyTorch's multi-output kernels (max/sort/topk/linalg) check each dtype exactly
            _check_and_write(name, o, r, True)
        rtype = type(result)
        if rtype is tuple:
            return outs
        return rtype(*outs) if hasattr(rtype, "_fields") else rtype(outs)
    _check_out_type(name, out, None)
    _check_and_write(name, out, result, strict, any_cast)
    return out


def torch_binding_error(err, fn, name, args, kwargs):
    """Python's TypeError for a call that does not bind to ``fn`` (a private entry function
    behind a public wrapper) in torch's argument parser's words: the public ``name``, the missing
    parameters before an unknown keyword, torch's quoting (``missing 1 required positional
    arguments: "dim"``; its plural/singular as it prints them)."""
    import inspect
    import re
    msg = str(err)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and ("unexpected keyword" in msg or "missing" in msg):
        pos = [p for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        missing = [p.name for i, p in enumerate(pos)
                   if p.default is p.empty and i >= len(args) and p.name not in kwargs]
        if missing:
            n = len(missing)
            return TypeError(f"{name}() missing {n} required positional argument{'s' if n == 1 else ''}: "
                             + ", ".join(f'"{m}"' for m in missing))
    return TypeError(re.sub(r"^[\w.]+\(\)", f"{name}()", msg))


def call_with_out(name, fn, args, kwargs, out, n_out=None):
    """``fn(*args, **kwargs)`` (which must not get ``out``) written into ``out``: the generic
    slow path of a hand-written function that takes ``out=``."""
    outs = _check_out_type(name, out, n_out) if n_out is not None or isinstance(out, Tensor) \
        else _check_out_type(name, out, len(out) if isinstance(out, (tuple, list)) else None)
    inputs = list(_tensors_in(args)) + list(_tensors_in(kwargs.values()))
    check_before(name, outs, inputs)
    return write_out(name, out, fn(*args, **kwargs), inputs)


def supports_out(name=None, n_out=None):
    """Decorator: the wrapped function gets torch's ``out=`` (keyword-only) through
    ``call_with_out``; without ``out`` it is called directly (one extra frame)."""
    def deco(fn):
        import functools
        nm = name or fn.__name__

        @functools.wraps(fn)
        def wrapper(*args, out=None, **kwargs):
            if out is None:
                try:
                    return fn(*args, **kwargs)
                except TypeError as e:
                    if e.__traceback__.tb_next is None:     # Python's own binding error
                        raise torch_binding_error(e, fn, nm, args, kwargs) from None
                    raise
            return call_with_out(nm, fn, args, kwargs, out, n_out)
        return wrapper
    return deco


def op_with_out(op, dispatcher, args, out):
    """The slow path of a generated registry binding called with ``out=``: run the op as the
    binding would without it (``dispatcher(op, args)``, args in schema order), then write into
    ``out``."""
    name = op.public_name
    outs = _check_out_type(name, out, None) if isinstance(out, Tensor) else \
        _check_out_type(name, out, len(out) if isinstance(out, (tuple, list)) else None)
    inputs = list(_tensors_in(args))
    check_before(name, outs, inputs)
    if name in _OUT_DTYPE_OPS and isinstance(out, Tensor):
        # torch's sum/prod/cumsum/cumprod accumulate in out's dtype unless dtype= is given
        i = next(k for k, p in enumerate(op.params) if p.name == "dtype")
        if args[i] is None:
            args = args[:i] + (out.dtype,) + args[i + 1:]
            return write_out(name, out, dispatcher(op, args), inputs, any_cast=True)
    return write_out(name, out, dispatcher(op, args), inputs)


_OUT_DTYPE_OPS = frozenset(("sum", "prod", "cumsum", "cumprod"))


def factory_with_out(fn, args, kwargs, out, name):
    """A factory (``zeros``, ``arange``, ``randn``, ...) given ``out=``: as PyTorch's, the values
    are made in ``out``'s dtype and on its device unless the call names them."""
    if isinstance(out, Tensor):
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = out.dtype
        if kwargs.get("device") is None:
            kwargs["device"] = out.device
    return call_with_out(name, fn, args, kwargs, out, None)


def _wrap(fn, name, factory):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            try:
                return fn(*args, **kwargs)
            except TypeError as e:
                if e.__traceback__.tb_next is None:         # Python's own binding error
                    raise torch_binding_error(e, fn, name, args, kwargs) from None
                raise
        if factory:
            return factory_with_out(fn, args, kwargs, out, name)
        return call_with_out(name, fn, args, kwargs, out, None)
    wrapper._ember_out = True
    fn._ember_public = wrapper      # what a TorchFunctionMode is shown (ember/_torch_function.py)
    return wrapper


# The hand-written public functions whose torch counterpart takes out= (the audit in
# tests/ops/test_out_arguments.py finds them): wrapped once at import by ``install``. The
# generated op bindings take out= themselves; cat/stack/where/max/min/median/sort/topk handle it in their
# entry functions (no wrapper frame on those hot calls).
FACTORIES = frozenset("arange empty eye full linspace logspace ones rand randint randn randperm range zeros "
                      "fftfreq rfftfreq".split())
TOP_LEVEL = """
alias_copy aminmax arange bernoulli chain_matmul cholesky cholesky_inverse cholesky_solve column_stack
cross cummax cummin detach_copy diagonal_copy dstack empty eye frexp frobenius_norm full histogram
hstack index_reduce inverse kthvalue linspace logspace lu mode multinomial mvlgamma nanmean
nanquantile nansum nonzero norm normal nuclear_norm ones qr quantile rand randint randn randperm
range row_stack scatter slice_copy slice_scatter slogdet split_copy squeeze_copy std svd t_copy
tensordot triangular_solve unbind_copy unsqueeze_copy var view_as_real_copy vstack zeros
as_strided_copy expand_copy narrow_copy permute_copy select_copy transpose_copy unfold_copy view_copy
split_with_sizes_copy view_as_complex_copy lu_solve lu_unpack histogramdd
""".split()
LINALG = """
cholesky cholesky_ex det eig eigh eigvals eigvalsh householder_product inv inv_ex ldl_factor ldl_factor_ex
lstsq lu lu_factor lu_factor_ex matmul matrix_norm matrix_power matrix_rank multi_dot norm pinv qr slogdet
solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vecdot vector_norm cross lu_solve ldl_solve
cond
""".split()
SPECIAL = """
airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t chebyshev_polynomial_u
chebyshev_polynomial_v chebyshev_polynomial_w entr erfcx hermite_polynomial_h hermite_polynomial_he i0e i1
i1e laguerre_polynomial_l legendre_polynomial_p log_ndtr modified_bessel_i0 modified_bessel_i1
modified_bessel_k0 modified_bessel_k1 multigammaln ndtr ndtri scaled_modified_bessel_k0
scaled_modified_bessel_k1 shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w spherical_bessel_j0 xlog1py zeta
""".split()
FFT = """
fft fft2 fftn hfft hfft2 hfftn ifft ifft2 ifftn ihfft ihfft2 ihfftn irfft irfft2 irfftn rfft rfft2 rfftn
fftfreq rfftfreq
""".split()
# torch.nn.functional: normalize handles out= itself; the shrinks and logsigmoid are wrapped.
# F.linear / F.gelu / F.softplus take out= in torch only through torch._C._nn; ember's refuse
# it with a TypeError rather than pay a wrapper frame on every call of these hot functions
FUNCTIONAL = ["hardshrink", "softshrink", "logsigmoid"]


def install(ns, names, prefix=""):
    """Give each function ``ns[name]`` torch's ``out=`` (see ``_wrap``); ``ns`` is a module's
    globals or a module. Names a namespace lacks, or that already take out=, are left alone."""
    get = ns.get if isinstance(ns, dict) else (lambda n: getattr(ns, n, None))
    for name in names:
        fn = get(name)
        if fn is None or not callable(fn) or getattr(fn, "_ember_out", False):
            continue
        w = _wrap(fn, prefix + name if prefix else name, name in FACTORIES)
        if isinstance(ns, dict):
            ns[name] = w
        else:
            setattr(ns, name, w)
