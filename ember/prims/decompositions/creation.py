"""Decompositions of the creation ops (ember/ops/creation.py) and the copy
ops (ember/ops/copy.py) into prims.

``full``/``empty`` become ``prims.full`` (``empty``'s values are unspecified,
so zeros are as good as any). ``_random`` (the record behind ``uniform_``,
``normal_``, ``random_``, ``bernoulli_``, ``exponential_``) becomes Philox:
``prims.rng_seed`` draws a fresh seed from ember's global generator each
time the graph runs, then ``philox_rand``/``philox_randn`` give the bits.
Compiled random numbers therefore differ from eager ones (numpy's PCG64
stream) by design, but have the same distribution and follow
``ember.manual_seed``. ``copy`` (``copy_``'s functional form) is a convert +
broadcast; ``fill`` a ``full``.
"""
from __future__ import annotations

from ... import types as _t
from ..table import register_decomposition
from .pointwise import bcast, comp, is_tensor, to

from ember import prims  # noqa: E402


def _scalar_dtype(v):
    return _t.default_for_category(_t.scalar_category(v))


@register_decomposition("full")
def _full(size, fill_value, *, dtype=None, device=None):
    dt = _t.as_dtype(dtype) if dtype is not None else _scalar_dtype(fill_value)
    return prims.full(tuple(size), fill_value, dt, device)


@register_decomposition("empty")
def _empty(size, *, dtype=None, device=None):
    dt = _t.as_dtype(dtype) if dtype is not None else _t.get_default_dtype()
    return prims.full(tuple(size), 0, dt, device)


def _uniform01(shape, dt, device):
    """(u in [0, 1) of float dtype ``dt``) from a fresh Philox seed."""
    seed = prims.rng_seed(device)
    offset = prims.full((), 0, _t.int64, device)
    return prims.philox_rand(shape, seed, offset, dt, device)


@register_decomposition("_random")
def _random(self, kind, a=0.0, b=1.0, generator=None):
    if generator is not None:
        # an explicit generator has its own (numpy) stream: keep the op whole
        return NotImplemented
    from ...inductor import config as _inductor_config
    if _inductor_config.fallback_random:
        # eager's stream, draw for draw: the op stays whole and runs its eager kernel
        return NotImplemented
    dt = self.dtype
    shape = tuple(self.shape)
    dev = self.device
    fdt = dt if dt.is_floating_point else _t.float64
    cdt = comp(fdt)
    if kind == "uniform":
        u = _uniform01(shape, _t.float64, dev)
        r = prims.add(prims.mul(u, float(b) - float(a)), float(a)) if (a, b) != (0.0, 1.0) else u
        out = to(r, dt)
        if dt.is_floating_point and dt.itemsize > 1 and float(b) > float(a):
            # the float64 draw cast to dt can round up to b: keep [a, b) as eager's draw does
            from ...ops.creation import largest_below
            out = prims.minimum(out, float(largest_below(float(b), dt.np)))
        return out
    if kind == "normal":
        seed = prims.rng_seed(dev)
        z = prims.philox_randn(shape, seed, prims.full((), 0, _t.int64, dev), _t.float64, dev)
        r = prims.add(prims.mul(z, float(b)), float(a)) if (a, b) != (0.0, 1.0) else z
        return to(r, dt)
    from ..._mt19937 import check_random_args
    check_random_args(kind, a, b)
    if kind in ("random", "random_default"):
        lo, hi = int(a), int(b)
        u = _uniform01(shape, _t.float64, dev)
        r = prims.floor(prims.add(prims.mul(u, float(hi - lo)), float(lo)))
        return to(prims.minimum(r, float(hi - 1)), dt)
    if kind == "bernoulli":
        u = _uniform01(shape, _t.float64, dev)
        return to(prims.lt(u, float(a)), dt)
    if kind == "exponential":
        u = _uniform01(shape, _t.float64, dev)
        r = prims.div(prims.neg(prims.log1p(prims.neg(u))), float(a))
        return to(r, dt)
    raise ValueError(f"unknown random kind {kind!r}")


@register_decomposition("copy")
def _copy(self, src):
    dt = self.dtype
    shape = tuple(self.shape)
    if not is_tensor(src):
        return prims.full(shape, src, dt, self.device)
    from .pointwise import common_shape
    bshape = common_shape(self, src)
    if tuple(bshape) != shape:
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape {list(bshape)}")
    r = bcast(to(src, dt), shape)
    return prims.clone(r) if r is src or r._base is not None else r


@register_decomposition("fill")
def _fill(self, value):
    shape = tuple(self.shape)
    if is_tensor(value):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions.")
        return prims.clone(bcast(to(value, self.dtype), shape))
    return prims.full(shape, value, self.dtype, self.device)
