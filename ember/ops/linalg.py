"""Op family: linear algebra.

Kernels: ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``mv``, ``dot`` and the
einsum contraction ``_einsum`` (whose derivative is again an einsum, so it is
differentiable any number of times). Composites, built like PyTorch's
CompositeImplicit ops so the recorded graph has the same node names:
``matmul`` (dot / mv / mm / folded mm / expand+reshape+bmm), ``outer``,
``einsum`` (parsing, ellipsis and broadcasting, then ``_einsum``), ``linear``
(``addmm`` for a 2-D input with bias) and ``bilinear``.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import types as _t
from ..tensor import Tensor
from . import api
from ._helpers import grad_for, result_dtype, sum_to
from .registry import defcomposite, defop

# C++ type names PyTorch prints in dtype-mismatch messages.
_CNAME = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
          "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
          "uint8": "unsigned char", "bool": "bool"}


def _cname(arr):
    dt = _t.from_numpy_dtype(arr.dtype)
    return _CNAME.get(dt.name, dt.name)


def _check_same_dtype(a, b, what="m1 and m2"):
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected {what} to have the same dtype, but got: {_cname(a)} != {_cname(b)}")


def _check_bmm_dtypes(a, b):
    """bmm/baddbmm's batch1 and batch2 of one dtype, with torch 2.13's message."""
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_t.from_numpy_dtype(a.dtype).legacy_name} but found "
                           f"{_t.from_numpy_dtype(b.dtype).legacy_name}")


def _check_baddbmm_dtypes(s, a, b):
    """baddbmm's input, batch1 and batch2 of one dtype, with torch 2.13's message."""
    if not s.dtype == a.dtype == b.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_cname(s)}, batch1: {_cname(a)}, "
                           f"batch2: {_cname(b)}")


def _check_numeric(op, *arrs):
    for a in arrs:
        if a.dtype == np.bool_:
            raise RuntimeError(f"\"{op}\" not implemented for 'Bool'")


def _fresh(xp, out, *ins):
    """Kernels never return memory aliasing an input."""
    for a in ins:
        if out is a or (isinstance(out, np.ndarray) and np.shares_memory(out, a)):
            return xp.array(out, copy=True)
    return out


def _same_dtype(out, a):
    """numpy's matmul on bfloat16 (ml_dtypes) computes and returns float32; PyTorch
    accumulates in float32 too but returns the input dtype, so round once here."""
    out = out if hasattr(out, "dtype") else np.asarray(out)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


def _matmul_f32(xp, a, b):
    """addmm/baddbmm's product: float16 operands multiplied in float32 (as bfloat16's already
    are, see ``_same_dtype``), so that self is added before the one rounding (torch's result;
    a float16 product rounded first was one ulp off)."""
    if a.dtype == np.float16:
        return xp.matmul(a.astype(np.float32), b.astype(np.float32))
    return xp.matmul(a, b)


def _maybe_mul(t, s):
    return t if s == 1 else t * s


def _check_self_rank(s, shape):
    """``self`` of addmm/baddbmm is expanded to the result's shape: it cannot have more dims
    (numpy's broadcast_to raised a ValueError here)."""
    if s.ndim > len(shape):
        raise RuntimeError(f"expand(ember.{_t.from_numpy_dtype(s.dtype).legacy_name}Tensor{{{list(s.shape)}}}, "
                           f"size={list(shape)}): the number of sizes provided ({len(shape)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({s.ndim})")


# ---------------------------------------------------------------------- mm / bmm
@defop("mm(Tensor self, Tensor mat2) -> Tensor")
def mm(xp, a, b):
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    _check_same_dtype(a, b)
    _check_numeric("addmm_impl_cpu_", a)
    return _same_dtype(xp.matmul(a, b), a)


def _is_transposed(m):
    """A matrix laid out as the transpose of a contiguous one (``w.t()`` of a weight)."""
    st, sz = m.stride(), m.shape
    return st[0] == 1 and st[1] == sz[0] and sz[0] != 1 and sz[1] != 1


def _mm_grad_a(g, a, b):
    """d(a @ b)/da = g @ b.T, laid out like ``a``: computed transposed when ``a`` is (as PyTorch
    does), so a gradient flowing back through ``.t()`` lands C-ordered, in the layout the
    parameter has (no strided copy when it is accumulated into ``.grad``)."""
    return b.mm(g.t()).t() if _is_transposed(a) else g.mm(b.t())


def _mm_grad_b(g, a, b):
    """d(a @ b)/db = a.T @ g, laid out like ``b`` (see ``_mm_grad_a``)."""
    return g.t().mm(a).t() if _is_transposed(b) else a.t().mm(g)


@mm.derivative
def _mm_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (_mm_grad_a(g, a, b) if n[0] else None, _mm_grad_b(g, a, b) if n[1] else None)


@defop("bmm(Tensor self, Tensor mat2) -> Tensor")
def bmm(xp, a, b):
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    _check_bmm_dtypes(a, b)
    _check_numeric("bmm", a)
    return _same_dtype(xp.matmul(a, b), a)


@bmm.derivative
def _bmm_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (g.bmm(b.transpose(1, 2)) if n[0] else None, a.transpose(1, 2).bmm(g) if n[1] else None)


@defop("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
       inplace=True, save=("mat1", "mat2"))
def addmm(xp, s, a, b, beta=1, alpha=1):
    if a.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {a.ndim}-D tensor")
    if b.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {b.ndim}-D tensor")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    _check_same_dtype(a, b, "mat1 and mat2")
    _check_same_dtype(s, a, "self and mat2")
    _check_numeric("addmm_impl_cpu_", a)
    shape = (a.shape[0], b.shape[1])
    ss = s.shape
    n = len(ss)
    if ss != shape and not (n == 0 or n == 1 and ss[0] in (1, shape[1]) or
                            n == 2 and ss[0] in (1, shape[0]) and ss[1] in (1, shape[1])):
        _check_self_rank(s, shape)
        try:
            np.broadcast_shapes(ss, shape)
        except ValueError:
            raise RuntimeError(f"The expanded size of the tensor ({shape[-1]}) must match the existing size "
                               f"({s.shape[-1]}) at non-singleton dimension 1.  Target sizes: {list(shape)}.  "
                               f"Tensor sizes: {list(s.shape)}") from None
    out = _matmul_f32(xp, a, b)
    if alpha != 1:
        out = out * xp.asarray(alpha, dtype=out.dtype)
    if beta != 0:
        out = out + (s if beta == 1 else s * xp.asarray(beta, dtype=out.dtype))
    if out.shape != shape:
        out = xp.broadcast_to(out, shape)
    if not out.flags.c_contiguous:
        out = xp.ascontiguousarray(out)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


_addmm_binding = addmm.binding


@addmm.derivative
def _addmm_bw(ctx, g):
    s, a, b, beta, alpha = ctx.args
    n = ctx.needs_input_grad
    gs = sum_to(_maybe_mul(g, beta), s.shape) if n[0] else None
    ga = _maybe_mul(_mm_grad_a(g, a, b), alpha) if n[1] else None
    gb = _maybe_mul(_mm_grad_b(g, a, b), alpha) if n[2] else None
    return gs, ga, gb


@defop("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
       inplace=True, save=("batch1", "batch2"))
def baddbmm(xp, s, a, b, beta=1, alpha=1):
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    _check_baddbmm_dtypes(s, a, b)
    shape = (a.shape[0], a.shape[1], b.shape[2])
    _check_self_rank(s, shape)
    try:
        np.broadcast_shapes(s.shape, shape)
    except ValueError:
        raise RuntimeError(f"The expanded size of the tensor must match the existing size: target sizes "
                           f"{list(shape)}, tensor sizes {list(s.shape)}") from None
    out = _matmul_f32(xp, a, b)
    if alpha != 1:
        out = out * xp.asarray(alpha, dtype=out.dtype)
    if beta != 0:
        out = out + (s if beta == 1 else s * xp.asarray(beta, dtype=out.dtype))
    return xp.ascontiguousarray(xp.broadcast_to(out, shape)).astype(a.dtype, copy=False)


@baddbmm.derivative
def _baddbmm_bw(ctx, g):
    s, a, b, beta, alpha = ctx.args
    n = ctx.needs_input_grad
    gs = sum_to(_maybe_mul(g, beta), s.shape) if n[0] else None
    ga = _maybe_mul(g.bmm(b.transpose(1, 2)), alpha) if n[1] else None
    gb = _maybe_mul(a.transpose(1, 2).bmm(g), alpha) if n[2] else None
    return gs, ga, gb


# ---------------------------------------------------------------------- mv / dot
@defop("mv(Tensor self, Tensor vec) -> Tensor")
def mv(xp, a, v):
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
                           f"vec ({v.shape[0]})")
    _check_same_dtype(a, v, "m1 and m2")
    return _same_dtype(xp.matmul(a, v), a)


@mv.derivative
def _mv_bw(ctx, g):
    a, v = ctx.args
    n = ctx.needs_input_grad
    return (g.unsqueeze(1) * v.unsqueeze(0) if n[0] else None, a.t().mv(g) if n[1] else None)


@defop("dot(Tensor self, Tensor tensor) -> Tensor")
def dot(xp, a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] "
                           f"to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} "
                           f"elements respectively")
    if a.dtype != b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_t.from_numpy_dtype(a.dtype).legacy_name} and "
                           f"{_t.from_numpy_dtype(b.dtype).legacy_name}")
    return xp.asarray(xp.dot(a, b)).astype(a.dtype, copy=False)


@dot.derivative
def _dot_bw(ctx, g):
    a, b = ctx.args
    n = ctx.needs_input_grad
    return (b * g if n[0] else None, a * g if n[1] else None)


# ---------------------------------------------------------------------- matmul
def _unsafe_view(t, shape):
    from .shape import _unsafe_view as op
    return op.binding(t, tuple(shape))


def _should_fold(a, b):
    da, db = a.dim(), b.dim()
    big, small = (a, b) if da >= db else (b, a)
    if not (big.dim() >= 3 and small.dim() <= 2):
        return False
    if small.requires_grad:
        return True
    if da == 2:
        return False
    if big.numel() == 0:
        return True
    shp, st = tuple(big.shape), big.stride()
    return all(st[i] == st[i + 1] * shp[i + 1] for i in range(big.dim() - 2))


@defcomposite("matmul(Tensor self, Tensor other) -> Tensor")
def matmul(a, b):
    da, db = a.dim(), b.dim()
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(a, b)
    if da == 2 and db == 1:
        return mv(a, b)
    if da == 1 and db == 2:
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (1x{a.shape[0]} and "
                               f"{b.shape[0]}x{b.shape[1]})")
        return mm(a.unsqueeze(0), b).squeeze(0)
    if da == 2 and db == 2:
        return mm(a, b)
    if _should_fold(a, b):
        # fold the batch dims of the larger operand into matrix rows: one mm (PyTorch's rule)
        transpose = db > da
        t1 = b.mT if transpose else a
        t2 = (a.t() if da == 2 else a) if transpose else b
        k = t1.shape[-1]
        t2m = t2.unsqueeze(-1) if t2.dim() == 1 else t2
        if t2m.shape[0] != k:
            if transpose:
                raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                                   f"[{int(np.prod(b.shape[:-2]))}, {a.shape[-1]}] but got: "
                                   f"[{int(np.prod(b.shape[:-2]))}, {b.shape[-2]}].")
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({int(np.prod(t1.shape[:-1]))}x{k} "
                               f"and {t2m.shape[0]}x{t2m.shape[1]})")
        out = mm(t1.reshape(-1, k), t2m)
        shape = tuple(t1.shape[:-1]) + ((t2.shape[-1],) if t2.dim() == 2 else ())
        out = _unsafe_view(out, shape)
        return out.mT.contiguous() if transpose and t2.dim() == 2 else out
    # batched: broadcast the batch dims, expand, fold into one bmm
    a2 = a.unsqueeze(0) if da == 1 else a
    b2 = b.unsqueeze(-1) if db == 1 else b
    n, k = a2.shape[-2], a2.shape[-1]
    k2, p = b2.shape[-2], b2.shape[-1]
    if k != k2:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{int(np.prod(a2.shape[:-2]))}, {k}] but got: [{int(np.prod(b2.shape[:-2]))}, {k2}].")
    from ._helpers import broadcast_shapes
    batch = broadcast_shapes(tuple(a2.shape[:-2]), tuple(b2.shape[:-2]))
    nb = 1
    for n_b in batch:       # plain Python: sizes may be symbolic
        nb = nb * n_b
    ea = a2.expand(*batch, n, k).reshape(nb, n, k)
    eb = b2.expand(*batch, k, p).reshape(nb, k, p)
    out = bmm(ea, eb)
    shape = tuple(batch) + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    return _unsafe_view(out, shape)


# ---------------------------------------------------------------------- outer / linear / bilinear
@defcomposite("outer(Tensor self, Tensor vec2) -> Tensor")
def outer(a, b):
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {a.dim()}-D")
    return a.reshape(-1, 1) * b


@defcomposite("ger(Tensor self, Tensor vec2) -> Tensor")
def ger(a, b):
    return outer(a, b)


@defcomposite("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", method=False)
def linear(x, w, b=None):
    if b is not None and x.dim() == 2:
        return _addmm_binding(b, x, w.t())
    if b is not None and x.dim() >= 3 and x.is_contiguous():
        # fold leading dims, one addmm, view back (PyTorch: ViewBackward0 on top)
        k = x.shape[-1]
        out = addmm(b, x.reshape(-1, k), w.t())
        return out.view(*tuple(x.shape[:-1]), out.shape[-1])
    out = matmul(x, w.t())
    if b is not None:
        out = out + b
    return out


@defcomposite("bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor",
              method=False)
def bilinear(x1, x2, w, b=None):
    if w.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {w.dim()}")
    if x1.shape[-1] != w.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {x1.shape[-1]} but "
                           f"expected {w.shape[1]}")
    if x2.shape[-1] != w.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {x2.shape[-1]} but "
                           f"expected {w.shape[2]}")
    out = einsum("...i,oij,...j->...o", x1, w, x2)
    if b is not None:
        out = out + b
    return out


# ---------------------------------------------------------------------- einsum
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@defop("_einsum(str equation, Tensor[] operands) -> Tensor", method=False, function=False,
       grad_fn_name="EinsumBackward0")
def _einsum(xp, equation, arrs):
    dt = result_dtype(*arrs)
    if dt is _t.bfloat16 or dt is _t.float16:
        # numpy has no bfloat16 einsum (ml_dtypes) and would accumulate float16 in float16;
        # torch's half einsum is a float32-accumulating bmm rounded once: so is this (with three
        # or more operands torch rounds each pairwise contraction; here only the result)
        return _einsum_arrays(xp, equation, [a.astype(np.float32) for a in arrs], _t.float32).astype(dt.np)
    return _einsum_arrays(xp, equation, arrs, dt)


def _einsum_arrays(xp, equation, arrs, dt):
    arrs = [a.astype(dt.np, copy=False) for a in arrs]
    if dt.category == 2 and arrs:
        out = xp.einsum(equation, *arrs, optimize=len(arrs) > 2)
    else:
        out = xp.einsum(equation, *arrs)
    out = xp.asarray(out).astype(dt.np, copy=False)
    if not out.flags.c_contiguous:
        # numpy's layout here depends on its contraction path (a transposed view of a
        # tensordot result, an operand's permuted view, ...); C order is predictable
        # (the meta function promises it) and a fresh copy never aliases an input
        return xp.ascontiguousarray(out)
    return _fresh(xp, out, *arrs)


@_einsum.derivative
def _einsum_bw(ctx, g):
    equation, ops = ctx.args
    lhs, out_sub = equation.split("->")
    subs = lhs.split(",")
    grads = []
    for i, (s, x) in enumerate(zip(subs, ops)):
        if not ctx.needs_input_grad[i]:
            grads.append(None)
            continue
        terms = [out_sub] + [subs[j] for j in range(len(subs)) if j != i]
        tens = [g] + [ops[j] for j in range(len(ops)) if j != i]
        used = set("".join(subs) + out_sub)
        spare = [c for c in _LETTERS if c not in used]
        target, seen = [], {}
        for pos, c in enumerate(s):
            if c in seen:                       # a repeated label: diagonal -> eye factor
                nc = spare.pop(0)
                n = x.shape[pos]
                terms.append(c + nc)
                tens.append(api.eye(n, dtype=g.dtype, device=g.device))
                target.append(nc)
            else:
                seen[c] = pos
                target.append(c)
        present = set("".join(terms))
        keep = [c for c in target if c in present]
        gi = _einsum.binding(",".join(terms) + "->" + "".join(keep), tens)
        if len(keep) != len(target):          # labels summed only inside this operand: broadcast back
            shape = []
            for pos, c in enumerate(target):
                if c in present:
                    shape.append(x.shape[pos])
                else:
                    shape.append(1)
            gi = gi.reshape(tuple(shape)).expand(tuple(x.shape))
        grads.append(gi)
    return (grads,)


def _parse_einsum(equation, shapes):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs, rhs = eq, None
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the equation"
                           if len(shapes) > len(subs) else
                           "einsum(): fewer operands were provided than specified in the equation")
    for s in subs + ([rhs] if rhs is not None else []):
        for c in s.replace("...", ""):
            if c not in _LETTERS:
                raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(c)} in the equation "
                                   f"string, subscripts must be in [a-zA-Z]")
    used = set(c for c in eq if c in _LETTERS)
    spare = [c for c in _LETTERS if c not in used]
    ell_n = 0
    for s, shp in zip(subs, shapes):
        nl = len(s.replace("...", ""))
        if "..." in s:
            ell_n = max(ell_n, len(shp) - nl)
        elif nl != len(shp):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nl}) does not match the "
                               f"number of dimensions ({len(shp)}) for operand {subs.index(s)} and no "
                               f"ellipsis was given")
    ell = "".join(spare[:ell_n])
    out_subs = []
    for s, shp in zip(subs, shapes):
        if "..." in s:
            k = len(shp) - len(s.replace("...", ""))
            s = s.replace("...", ell[ell_n - k:] if k else "")
        out_subs.append(s)
    if rhs is None:
        counts = {}
        for s in out_subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        rhs = ell + "".join(sorted((c for c, n in counts.items() if n == 1 and c not in ell),
                                   key=lambda c: (c.islower(), c)))
    else:
        rhs = rhs.replace("...", ell)
    for c in rhs:
        if not any(c in s for s in out_subs):
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any "
                               f"input operand")
    if len(set(rhs)) != len(rhs):
        raise RuntimeError("einsum(): output subscript appears more than once in the output")
    return out_subs, rhs


def einsum(equation, *operands):
    """``einsum("ij,jk->ik", a, b)`` (also ``einsum(eq, [a, b])``)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for o in operands:
        if not isinstance(o, Tensor) and not hasattr(type(o), "__ember_function__"):
            raise TypeError(f"einsum(): argument 'operands' must be tuple of Tensors, not {type(o).__name__}")
    subs, rhs = _parse_einsum(equation, [tuple(o.shape) for o in operands])
    # broadcast size-1 labelled dims against the other operands
    sizes = {}
    for i, (s, o) in enumerate(zip(subs, operands)):
        for c, n in zip(s, o.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which does not "
                                       f"broadcast with previously seen size {sizes[c]}")
                sizes[c] = n
    ops = []
    for s, o in zip(subs, operands):
        want = tuple(sizes.get(c, 1) if n == 1 else n for c, n in zip(s, o.shape))
        if want != tuple(o.shape):
            seen = {}
            for c, n in zip(s, want):
                seen.setdefault(c, n)
            o = o.expand(tuple(want)) if len(set(s)) == len(s) else o
        ops.append(o)
    return _einsum.binding(",".join(subs) + "->" + rhs, list(ops))


setattr(api, "einsum", einsum)


# ---------------------------------------------------------------------- meta functions
# Output metadata from input metadata (see ember/ops/_meta.py); the checks reuse the
# kernels' own on ``_meta.info(t)`` so fake tensors raise the kernels' errors. numpy's
# matmul and einsum (made C order above), ascontiguousarray and dot results are C order.
from . import _meta as _M  # noqa: E402


def _mm_meta(a, b):
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    _check_same_dtype(_M.info(a), _M.info(b))
    _check_numeric("addmm_impl_cpu_", _M.info(a))
    return _M.out((a.shape[0], b.shape[1]), a.dtype)


mm.meta = _mm_meta


def _bmm_checks(a, b):
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")


@bmm.meta_fn
def _bmm_meta(a, b):
    _bmm_checks(a, b)
    _check_bmm_dtypes(_M.info(a), _M.info(b))
    _check_numeric("bmm", _M.info(a))
    return _M.out((a.shape[0], a.shape[1], b.shape[2]), a.dtype)


def _expanded_size_error(s, shape, msg):
    """The kernel's checks that ``self`` expands to the result's shape."""
    _check_self_rank(_M.info(s), shape)
    try:
        _M.broadcast_shapes(tuple(s.shape), shape)
    except RuntimeError:
        raise RuntimeError(msg) from None


@addmm.meta_fn
def _addmm_meta(s, a, b, beta=1, alpha=1):
    if a.ndim != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {a.ndim}-D tensor")
    if b.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix, got {b.ndim}-D tensor")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                           f"{b.shape[0]}x{b.shape[1]})")
    _check_same_dtype(_M.info(a), _M.info(b), "mat1 and mat2")
    _check_same_dtype(_M.info(s), _M.info(a), "self and mat2")
    _check_numeric("addmm_impl_cpu_", _M.info(a))
    shape = (a.shape[0], b.shape[1])
    s_shape = tuple(s.shape)
    _expanded_size_error(s, shape, f"The expanded size of the tensor ({shape[-1]}) must match the existing "
                         f"size ({s_shape[-1] if s_shape else 1}) at non-singleton dimension 1.  Target "
                         f"sizes: {list(shape)}.  Tensor sizes: {list(s_shape)}")
    return _M.out(shape, a.dtype)


@baddbmm.meta_fn
def _baddbmm_meta(s, a, b, beta=1, alpha=1):
    _bmm_checks(a, b)
    _check_baddbmm_dtypes(_M.info(s), _M.info(a), _M.info(b))
    shape = (a.shape[0], a.shape[1], b.shape[2])
    _expanded_size_error(s, shape, f"The expanded size of the tensor must match the existing size: target "
                         f"sizes {list(shape)}, tensor sizes {list(s.shape)}")
    return _M.out(shape, a.dtype)


@mv.meta_fn
def _mv_meta(a, v):
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
                           f"vec ({v.shape[0]})")
    _check_same_dtype(_M.info(a), _M.info(v), "m1 and m2")
    return _M.out((a.shape[0],), a.dtype)


@dot.meta_fn
def _dot_meta(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] "
                           f"to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} "
                           f"elements respectively")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{a.dtype.legacy_name} and {b.dtype.legacy_name}")
    return _M.out((), a.dtype)


@_einsum.meta_fn
def _einsum_meta(equation, ops):
    """The kernel's equation is already canonical (``subs->rhs``, no ellipsis, operands
    broadcast to agree on every label): each output label takes its size from an operand
    where it is not 1."""
    dt = _M.result_dtype(*ops)
    lhs, rhs = equation.split("->")
    sizes = {}
    for sub, o in zip(lhs.split(","), ops):
        for c, n in zip(sub, o.shape):
            if c not in sizes or (isinstance(sizes[c], int) and sizes[c] == 1):
                sizes[c] = n
    return _M.out(tuple(sizes[c] for c in rhs), dt)
