"""Higher-level differentiation: jacobian, hessian, vjp, jvp, hvp, vhp.

All are built on ``autograd.grad``; jvp uses the double-vjp identity
(the vjp is linear in its cotangent, so differentiating it again against a
dummy cotangent yields the jvp)."""
from __future__ import annotations

from ..tensor import Tensor
from .engine import grad as _grad
from .grad_mode import enable_grad


def _tup(x):
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _prep(inputs, create_graph):
    out = []
    for x in _tup(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"The inputs given to the function must be Tensors, got {type(x).__name__}")
        x = x.detach() if not create_graph else x
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        out.append(x)
    return tuple(out)


def _grad_or_zeros(outs, ins, cots, create_graph, retain=True):
    gs = _grad(outs, ins, cots, retain_graph=retain, create_graph=create_graph, allow_unused=True)
    from ..ops import api
    return tuple(g if g is not None else api.zeros_like(x) for g, x in zip(gs, ins))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    single_in = isinstance(inputs, Tensor)
    with enable_grad():
        ins = _prep(inputs, create_graph)
        out = func(*ins)
        single_out = isinstance(out, Tensor)
        outs = _tup(out)
        if v is None:
            if any(o.numel() != 1 for o in outs):
                raise RuntimeError("The vector v can only be None if the user-provided function returns a "
                                   "single Tensor with a single element.")
            from ..ops import api
            v = tuple(api.ones_like(o) for o in outs)
        vs = _tup(v)
        diff_outs = [o for o in outs if o.requires_grad]
        diff_vs = [vv for o, vv in zip(outs, vs) if o.requires_grad]
        if diff_outs:
            gs = _grad_or_zeros(diff_outs, ins, diff_vs, create_graph)
        else:
            from ..ops import api
            gs = tuple(api.zeros_like(x) for x in ins)
    outs_ret = tuple(o if create_graph else o.detach() for o in outs)
    gs = tuple(g if create_graph else g.detach() for g in gs)
    return (outs_ret[0] if single_out else outs_ret), (gs[0] if single_in else gs)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    from ..ops import api
    single_in = isinstance(inputs, Tensor)
    with enable_grad():
        ins = _prep(inputs, True)
        out = func(*ins)
        single_out = isinstance(out, Tensor)
        outs = _tup(out)
        if v is None:
            if any(x.numel() != 1 for x in ins):
                raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                                   "is a single Tensor with a single element.")
            v = tuple(api.ones_like(x) for x in ins)
        vs = _tup(v)
        dummies = tuple(api.zeros_like(o).requires_grad_(True) for o in outs)
        diff = [(o, d) for o, d in zip(outs, dummies) if o.requires_grad]
        if not diff:
            jv = tuple(api.zeros_like(o) for o in outs)
        else:
            g = _grad([o for o, _ in diff], ins, [d for _, d in diff], create_graph=True,
                      allow_unused=True)
            pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
            if pairs:
                jv = _grad([p[0] for p in pairs], dummies, [p[1] for p in pairs],
                           create_graph=create_graph, allow_unused=True)
                jv = tuple(j if j is not None else api.zeros_like(o) for j, o in zip(jv, outs))
            else:
                jv = tuple(api.zeros_like(o) for o in outs)
    outs_ret = tuple(o if create_graph else o.detach() for o in outs)
    jv = tuple(j if create_graph else j.detach() for j in jv)
    return (outs_ret[0] if single_out else outs_ret), (jv[0] if single_out else jv)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """J[i][j] = d out_i / d in_j, each of shape out_i.shape + in_j.shape."""
    from ..ops import api
    single_in = isinstance(inputs, Tensor)
    with enable_grad():
        ins = _prep(inputs, create_graph)
        out = func(*ins)
        single_out = isinstance(out, Tensor)
        outs = _tup(out)
        jac = []
        for o in outs:
            rows = [[] for _ in ins]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                if o.requires_grad:
                    gs = _grad_or_zeros((flat[k],), ins, None, create_graph)
                else:
                    gs = tuple(api.zeros_like(x) for x in ins)
                for j, g in enumerate(gs):
                    rows[j].append(g if create_graph else g.detach())
            per_in = []
            for j, x in enumerate(ins):
                if rows[j]:
                    per_in.append(api.stack(rows[j]).reshape(tuple(o.shape) + tuple(x.shape)))
                else:
                    per_in.append(api.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype))
            jac.append(per_in[0] if single_in else tuple(per_in))
    return jac[0] if single_out else tuple(jac)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    single_in = isinstance(inputs, Tensor)

    def jac_fn(*ins):
        with enable_grad():
            out = func(*ins)
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise RuntimeError("The function given to hessian should return a single Tensor with a "
                                   "single element")
            gs = _grad_or_zeros((out.reshape(()),), ins, None, True)
        return gs[0] if single_in else gs

    return jacobian(jac_fn, inputs, create_graph=create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    single_in = isinstance(inputs, Tensor)
    with enable_grad():
        ins = _prep(inputs, True)
        out = func(*ins)
        g = _grad_or_zeros((out,), ins, None, True)
        vs = _tup(v)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if pairs:
            res = _grad_or_zeros([p[0] for p in pairs], ins, [p[1] for p in pairs], create_graph)
        else:
            from ..ops import api
            res = tuple(api.zeros_like(x) for x in ins)
    out = out if create_graph else out.detach()
    res = tuple(r if create_graph else r.detach() for r in res)
    return out, (res[0] if single_in else res)


hvp = vhp  # the Hessian of a scalar function is symmetric
