"""Stand-ins for ``triton.language.extra.libdevice`` under Triton's interpreter.

Why: generated kernels call CUDA's libdevice (``tan``, ``erfinv``, ``lgamma``,
``rint`` ...) for math that ``triton.language`` itself does not offer, but the
interpreter (``TRITON_INTERPRET=1``) cannot run ``extern_elementwise`` calls.
Interpreted kernels are plain Python over numpy-backed handles, so each
function here computes the same math with numpy (or the prim's own numpy
reference) on the handle's data, in the operand's dtype. The compiled
(PTX) path always uses the real libdevice; the generated module picks its
``_lib`` when it is loaded (see ``triton.py``).
"""
from __future__ import annotations

import math

import numpy as np


def _tl():
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle
    return tl, TensorHandle


def _wrap(data, scalar_ty):
    tl, TensorHandle = _tl()
    data = np.asarray(data)
    if data.ndim == 0:
        return tl.tensor(TensorHandle(data.reshape(1), scalar_ty), scalar_ty)
    return tl.tensor(TensorHandle(data, scalar_ty), tl.block_type(scalar_ty, list(data.shape)))


def _data(x):
    h = x.handle
    d = h.data
    # a 0-d (scalar) tensor is stored as a 1-element array
    return d.reshape(()) if not x.type.is_block() and d.size == 1 else d


def _unary(fn):
    def f(x, _semantic=None):
        d = _data(x)
        with np.errstate(all="ignore"):
            r = np.asarray(fn(d)).astype(d.dtype)
        return _wrap(r, x.dtype.scalar if hasattr(x.dtype, "scalar") else x.dtype)
    return f


def _binary(fn):
    def f(x, y, _semantic=None):
        a, b = _data(x), _data(y)
        with np.errstate(all="ignore"):
            r = np.asarray(fn(a, b)).astype(a.dtype)
        return _wrap(r, x.dtype.scalar)
    return f


def _prim_ref(name):
    def fn(d):
        from ...ops.registry import OPS
        return OPS[f"prims.{name}"].kernel(np, d)
    return fn


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])

exp = _unary(np.exp)
exp2 = _unary(np.exp2)
expm1 = _unary(np.expm1)
log = _unary(np.log)
log2 = _unary(np.log2)
log10 = _unary(np.log10)
log1p = _unary(np.log1p)
sin = _unary(np.sin)
cos = _unary(np.cos)
tan = _unary(np.tan)
asin = _unary(np.arcsin)
acos = _unary(np.arccos)
atan = _unary(np.arctan)
sinh = _unary(np.sinh)
cosh = _unary(np.cosh)
tanh = _unary(np.tanh)
asinh = _unary(np.arcsinh)
acosh = _unary(np.arccosh)
atanh = _unary(np.arctanh)
erf = _unary(lambda d: _erf(d.astype(np.float64)))
erfc = _unary(lambda d: _erfc(d.astype(np.float64)))
erfinv = _unary(_prim_ref("erfinv"))
lgamma = _unary(_prim_ref("lgamma"))
sqrt = _unary(np.sqrt)
rint = _unary(np.rint)
trunc = _unary(np.trunc)
floor = _unary(np.floor)
ceil = _unary(np.ceil)
pow = _binary(np.power)
atan2 = _binary(np.arctan2)
fmod = _binary(np.fmod)
copysign = _binary(np.copysign)


def signbit(x, _semantic=None):
    tl, _ = _tl()
    return _wrap(np.signbit(_data(x)).astype(np.int32), tl.int32)
