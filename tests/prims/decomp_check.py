"""Shared checker for the decomposition tests: trace with the full table, run on fresh inputs.

``check_decomp(fn, make, dtype)``: ``make(rng, dtype)`` draws the inputs (a list; float tensors
are the differentiable ones unless ``diff`` names the positions). The function is traced
(``functionalize=True`` for in-place code) with
``make_fx(fn, decomposition_table=decomposition_table())`` on one draw, the GraphModule is run
on a second, fresh draw (same shapes) and compared with eager ``fn`` there: shapes, dtypes,
values. With ``grad=True`` the same is done for ``ember.autograd.grad`` of a fixed
random-weighted sum of the float outputs with respect to the differentiable inputs (the graph
is then the joint forward+backward graph). Every graph must hold prims only. ``tracing_mode``
"fake" traces on fake tensors (the decompositions then run on metadata only).
"""
from __future__ import annotations

import operator

import numpy as np

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.prims.table import decomposition_table

TOL = {ember.float64: (1e-9, 1e-11), ember.float32: (2e-4, 2e-5)}


def _size_arithmetic(target):
    """Size computations of a symbolic trace (``sym_size`` and Python operators on SymInts)."""
    return getattr(target, "__name__", None) == "sym_size" or \
        getattr(target, "__module__", None) in ("_operator", "operator")


def non_prim_targets(gm):
    """Names of the call_function targets of ``gm`` that are neither prims nor getitem (nor, in a
    symbolic trace, size arithmetic)."""
    bad = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem or _size_arithmetic(n.target):
            continue
        op = getattr(n.target, "_ember_op", None)
        if op is None or "prim" not in op.tags:
            bad.append(getattr(op, "name", str(n.target)))
    return sorted(set(bad))


def assert_prims_only(gm):
    bad = non_prim_targets(gm)
    assert not bad, f"graph holds non-prim ops {bad}:\n{gm.code}"


def noncontiguous(t):
    """The same values in a transposed (non-contiguous) layout."""
    if t.ndim < 2:
        return t
    rev = tuple(range(t.ndim - 1, -1, -1))
    return ember.tensor(np.ascontiguousarray(t.numpy().transpose(rev))).permute(*rev)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _weights(outs, seed=123):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(tuple(o.shape)).astype(o.dtype.np))
            if o is not None and o.dtype.is_floating_point else None for o in outs]


def compare(got, ref, dtype, what):
    got, ref = _flat(got), _flat(ref)
    assert len(got) == len(ref), what
    rtol, atol = TOL.get(dtype, TOL[ember.float32])
    for i, (a, b) in enumerate(zip(got, ref)):
        assert tuple(a.shape) == tuple(b.shape), f"{what}[{i}]: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert a.dtype is b.dtype, f"{what}[{i}]: dtype {a.dtype} != {b.dtype}"
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{what}[{i}]")


def _tensors(args):
    return [a for a in args if isinstance(a, ember.Tensor)]


def _prepare(args, diff, noncontig):
    out = []
    for i, a in enumerate(args):
        if isinstance(a, ember.Tensor):
            a = a.detach()
            if noncontig and a.dtype.is_floating_point:
                a = noncontiguous(a)
            if i in diff:
                a.requires_grad_(True)
        out.append(a)
    return out


def check_decomp(fn, make, dtype=ember.float64, *, grad=True, diff=None, noncontig=False, seed=0,
                 functionalize=False, tracing_mode="real"):
    rng = np.random.default_rng(seed)
    a1, a2 = make(rng, dtype), make(rng, dtype)
    if diff is None:
        diff = [i for i, a in enumerate(a1) if isinstance(a, ember.Tensor) and a.dtype.is_floating_point]
    table = decomposition_table()
    # forward
    x1, x2 = _prepare(a1, (), noncontig), _prepare(a2, (), noncontig)
    trace = (lambda f: make_fx(f, decomposition_table=table, tracing_mode=tracing_mode,
                               functionalize=functionalize))
    unwrap = (lambda out: out[0]) if functionalize else (lambda out: out)
    gm = trace(fn)(*x1)
    assert_prims_only(gm)
    compare(unwrap(gm(*_tensors(x2))), fn(*x2), dtype, "forward")
    if not grad or not diff:
        return gm
    # values and gradients together (the joint graph)
    ws = _weights(_flat(fn(*x1)))

    def joint(*args):
        outs = _flat(fn(*args))
        tot = None
        for o, w in zip(outs, ws):
            if w is None:
                continue
            s = (o * w).sum()
            tot = s if tot is None else tot + s
        grads = ember.autograd.grad(tot, [args[i] for i in diff])
        return (*outs, *grads)

    y1, y2 = _prepare(a1, diff, noncontig), _prepare(a2, diff, noncontig)
    gj = trace(joint)(*y1)
    assert_prims_only(gj)
    got = unwrap(gj(*[a.detach() for a in _tensors(y2)]))
    compare(got, joint(*y2), dtype, "forward+backward")
    return gj
