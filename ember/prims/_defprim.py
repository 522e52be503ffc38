"""The shared machinery of the prims: registration and argument checks.

A prim is an ordinary :class:`~ember.ops.registry.OpDef` (so it dispatches,
traces and fakes like every other op) registered as ``OPS["prims.<name>"]``
with the tag ``prim``. It is deliberately *not* bound on ``Tensor`` or the
``ember`` namespace: prims are the compiler's vocabulary, not the user's.
Its binding lives in ``ember.prims`` and prints in FX graphs as
``ember.prims.<name>``.

Why the checks live here: prims do no type promotion and no implicit
broadcasting, so a decomposition that forgets a ``convert_element_type`` or a
``broadcast_in_dim`` must fail loudly, in eager runs (the kernel) and in fake
runs (the meta) alike. :func:`defprim` runs the prim's ``check`` before both.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..ops import registry as _reg
from ..tensor import Tensor

PRIMS: dict = {}        # short name -> binding (what ``ember.prims`` exports)

_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)
_HALF = (np.dtype(np.float16), _t.bfloat16.np)


class PrimError(RuntimeError):
    """Bad input to a prim (shape, dtype, rank or argument value)."""


def fail(prim, msg):
    raise PrimError(f"prims.{prim}: {msg}")


def defprim(schema, *, meta, tags=(), check=None, doc=None):
    """Decorator over a numpy reference kernel ``kernel(xp, *args)``: register the prim.

    ``meta(*args)`` computes the output metadata (a FakeArray or a tuple of
    them); ``check(*args)``, if given, validates the arguments and runs before
    the kernel and before the meta (on arrays there, on Tensors here: use the
    accessors in this module that accept both)."""
    def deco(kernel):
        if check is not None:
            def run_kernel(xp, *args):
                check(*args)
                return kernel(xp, *args)

            def run_meta(*args):
                check(*args)
                return meta(*args)
        else:
            run_kernel, run_meta = kernel, meta
        run_kernel.__name__ = kernel.__name__
        op = _reg.OpDef(schema, run_kernel, tags=("prim",) + tuple(tags), method=False, function=False)
        short = op.name
        key = "prims." + short
        if key in _reg.OPS:
            raise ValueError(f"prim {key!r} registered twice")
        op.name = key
        op.public_name = key          # error messages say prims.<name>
        op.meta = run_meta
        b = op.binding
        b.__module__ = "ember.prims"
        b.__qualname__ = short
        b.__name__ = short
        b.__fx_name__ = key.replace("prims.", "ember.prims.", 1)
        b.__doc__ = f"{schema}\n\n{(doc or kernel.__doc__ or '').strip()}"
        op.__doc__ = b.__doc__
        _reg.OPS[key] = op
        PRIMS[short] = b
        return b
    return deco


# ---------------------------------------------------------------------- accessors (arrays or Tensors)
def is_tensorish(x):
    return isinstance(x, (Tensor, np.ndarray)) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                                   and not isinstance(x, _SCALARS))


def dtype_of(x):
    """ember dtype of an array (numpy dtype) or a Tensor."""
    d = x.dtype
    return d if isinstance(d, _t.dtype) else _t.from_numpy_dtype(d)


def shape_of(x):
    return tuple(x.shape)


def is_scalar(x):
    return isinstance(x, _SCALARS)


def same_shape(a, b):
    a, b = tuple(a), tuple(b)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            if x != y:
                return False
        elif not bool(x == y):
            return False
    return True


def fmt_shape(s):
    return "[" + ", ".join(str(v) for v in s) + "]"


def dtype_kinds(dt):
    return "bool" if dt is _t.bool_ else "integer" if dt.category == 1 else "floating"


def check_dtype(prim, name, x, allowed):
    """``allowed``: a set of kinds among 'bool', 'integer', 'floating'."""
    dt = dtype_of(x)
    if dtype_kinds(dt) not in allowed:
        want = " or ".join(sorted(allowed))
        fail(prim, f"argument '{name}' has dtype {dt.name}, but this prim takes {want} tensors "
                   f"(prims do no type promotion; use prims.convert_element_type)")
    return dt


def check_operands(prim, names, args):
    """Elementwise n-ary operands: at least one tensor; all tensors the same shape and dtype;
    a Python scalar takes the tensors' dtype (a float scalar with an integer/bool tensor,
    or an int scalar with a bool tensor, is a dtype mismatch)."""
    ref = None
    for n, a in zip(names, args):
        if is_scalar(a):
            continue
        if not is_tensorish(a):
            fail(prim, f"argument '{n}' must be a tensor or a Python number, not {type(a).__name__}")
        if ref is None:
            ref = (n, a)
            continue
        rn, r = ref
        if not same_shape(shape_of(a), shape_of(r)):
            fail(prim, f"argument '{n}' has shape {fmt_shape(shape_of(a))} but '{rn}' has "
                       f"{fmt_shape(shape_of(r))} — prims do not broadcast; use prims.broadcast_in_dim")
        if dtype_of(a) is not dtype_of(r):
            fail(prim, f"argument '{n}' has dtype {dtype_of(a).name} but '{rn}' has {dtype_of(r).name} — "
                       f"prims do no type promotion; use prims.convert_element_type")
    if ref is None:
        fail(prim, "needs at least one tensor operand (all arguments are Python numbers)")
    dt = dtype_of(ref[1])
    for n, a in zip(names, args):
        if is_scalar(a):
            cat = _t.scalar_category(a)
            if cat > dt.category:
                fail(prim, f"argument '{n}' is a Python {type(a).__name__} but the tensor operands have "
                           f"dtype {dt.name} — prims do no type promotion")
    return ref[1], dt


def as_int_list(prim, name, v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return [v]
    try:
        out = list(v)
    except TypeError:
        fail(prim, f"argument '{name}' must be a sequence of ints, not {type(v).__name__}")
    for x in out:
        if isinstance(x, bool) or not (isinstance(x, numbers.Integral) or hasattr(x, "expr")):
            fail(prim, f"argument '{name}' must be a sequence of ints, found {type(x).__name__}")
    return out


def check_dims(prim, name, dims, ndim, *, unique=True, sorted_=False):
    """Dims must be canonical (0 <= d < ndim): prims do not wrap negative dims."""
    dims = as_int_list(prim, name, dims)
    for d in dims:
        if not 0 <= d < ndim:
            fail(prim, f"argument '{name}' holds dim {d}, out of range for a tensor of rank {ndim} "
                       f"(prims take canonical dims in [0, {ndim}))")
    if unique and len(set(dims)) != len(dims):
        fail(prim, f"argument '{name}' repeats a dim: {list(dims)}")
    if sorted_ and list(dims) != sorted(dims):
        fail(prim, f"argument '{name}' must be increasing, got {list(dims)}")
    return tuple(int(d) for d in dims)


def check_dim(prim, name, dim, ndim):
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        fail(prim, f"argument '{name}' must be an int, not {type(dim).__name__}")
    n = max(ndim, 1)
    if not 0 <= dim < n:
        fail(prim, f"argument '{name}' is {dim}, out of range for a tensor of rank {ndim} "
                   f"(prims take canonical dims in [0, {n}))")
    return int(dim)


def compute_np(dt):
    """The numpy dtype the reference kernels compute in for ember dtype ``dt``: float32 for
    float16/bfloat16 and float8 (rounded once at the end, like PyTorch's CPU kernels), else itself."""
    return np.dtype(np.float32) if dt.np in _HALF or dt._limited == "float8" else dt.np


def scalar_array(xp, v, dt):
    """Python number ``v`` as a 0-d array of ember dtype ``dt``: integers wrap like a C cast
    (``int8 + 1000``), bools become 0/1, floats round to nearest."""
    if dt.category == 1:
        return xp.asarray(int(v)).astype(dt.np)
    if dt.category == 0:
        return xp.asarray(bool(v))
    return xp.asarray(float(v), dtype=np.float64).astype(dt.np)


def finish(xp, r, dt):
    """A kernel result as an array of exactly ember dtype ``dt``."""
    r = xp.asarray(r)
    if r.dtype != dt.np:
        if dt._limited == "float8" and xp is np:   # torch's rounding into float8 (ember/_float8.py)
            from .._float8 import to_float8
            return to_float8(r, dt.np)
        r = r.astype(dt.np)
    return r
