"""Decompositions of the linear-algebra ops (ember/ops/linalg.py) into prims.

``mm``/``bmm`` map to the extern prims; ``addmm``/``baddbmm`` add the
broadcast ``self`` explicitly (``beta == 0`` ignores ``self`` entirely, NaN
included, as the kernel does); ``mv``/``dot`` are ``mm`` on reshaped vectors.
``_einsum`` (the contraction behind ``einsum`` and ``bilinear``) becomes, per
operand, diagonals for repeated labels and sums for labels that no one else
needs, then a left-to-right chain of pairwise contractions, each a permute +
reshape + ``prims.bmm``, and a final permute to the output order. The
composites (``matmul``, ``outer``, ``linear``, ``einsum``, ``bilinear``)
need nothing of their own: they trace into these ops.
"""
from __future__ import annotations

from ... import types as _t
from . import register_decomposition
from .shape import _diag_take, bcast, numel, permute, reshape, to

from ember import prims  # noqa: E402


def _scale(t, s):
    if s == 1:
        return t
    if not t.dtype.is_floating_point:
        s = int(s)          # the kernels cast the scalar to the integer dtype first (2.5 -> 2)
    return prims.mul(t, s)


def _add_self(out, s, beta, alpha, dt):
    """alpha * out + beta * s with s broadcast (the kernels' order of operations), in ``out``'s
    dtype (float32 for half-precision operands, see ``_prod``), rounded once to ``dt``."""
    out = _scale(out, alpha)
    if beta != 0:
        sb = to(bcast(s, tuple(out.shape)), out.dtype)
        out = prims.add(out, sb if beta == 1 else _scale(sb, beta))
    return to(out, dt)


_HALF = (_t.float16, _t.bfloat16)


def _prod(prim, a, b):
    """``prim(a, b)`` (prims.mm / prims.bmm). Half-precision operands are multiplied in
    float32 and the caller rounds once, at the end: the eager kernels (and torch's) accumulate
    in float32 and add ``self`` before rounding; a bfloat16 product rounded before addmm's bias
    add was one ulp off eager, and the inductor has no half-precision GEMM."""
    if a.dtype in _HALF:
        return prim(to(a, _t.float32), to(b, _t.float32))
    return prim(a, b)


def _mm_ok(a, b):
    return a.dtype is b.dtype and a.dtype is not _t.bool_


@register_decomposition("mm")
def mm(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or not _mm_ok(a, b):
        return NotImplemented
    return to(_prod(prims.mm, a, b), a.dtype)


@register_decomposition("bmm")
def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] or not _mm_ok(a, b):
        return NotImplemented
    return to(_prod(prims.bmm, a, b), a.dtype)


@register_decomposition("addmm")
def addmm(s, a, b, beta=1, alpha=1):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or not _mm_ok(a, b) or s.dtype is not a.dtype:
        return NotImplemented
    return _add_self(_prod(prims.mm, a, b), s, beta, alpha, a.dtype)


@register_decomposition("baddbmm")
def baddbmm(s, a, b, beta=1, alpha=1):
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] or \
            not _mm_ok(a, b) or s.dtype is not a.dtype:
        return NotImplemented
    return _add_self(_prod(prims.bmm, a, b), s, beta, alpha, a.dtype)


@register_decomposition("mv")
def mv(a, v):
    if a.ndim != 2 or v.ndim != 1 or a.shape[1] != v.shape[0] or not _mm_ok(a, v):
        return NotImplemented
    return reshape(to(_prod(prims.mm, a, reshape(v, (v.shape[0], 1))), a.dtype), (a.shape[0],))


@register_decomposition("dot")
def dot(a, b):
    if a.ndim != 1 or b.ndim != 1 or a.shape[0] != b.shape[0] or not _mm_ok(a, b):
        return NotImplemented
    return reshape(to(_prod(prims.mm, reshape(a, (1, a.shape[0])), reshape(b, (b.shape[0], 1))), a.dtype), ())


# ---------------------------------------------------------------------- einsum
class _Term:
    """One operand during the contraction: a tensor and one label per dim."""
    __slots__ = ("t", "labels")

    def __init__(self, t, labels):
        self.t = t
        self.labels = list(labels)

    def size(self, c):
        return self.t.shape[self.labels.index(c)]


def _take_diagonals(term):
    """Repeated labels inside one operand: keep the diagonal (the label's last dim)."""
    while True:
        seen = {}
        dup = None
        for i, c in enumerate(term.labels):
            if c in seen:
                dup = (seen[c], i)
                break
            seen[c] = i
        if dup is None:
            return term
        i, j = dup
        t = _diag_take(term.t, 0, i, j)
        labels = [c for k, c in enumerate(term.labels) if k not in (i, j)] + [term.labels[i]]
        term = _Term(t, labels)


def _sum_out(term, needed):
    dims = tuple(i for i, c in enumerate(term.labels) if c not in needed)
    if not dims:
        return term
    return _Term(prims.sum(term.t, dims), [c for c in term.labels if c in needed])


def _contract(a, b, needed):
    """Contract two terms; keep the labels in ``needed`` (labels of the output and later operands)."""
    la, lb = a.labels, b.labels
    batch = [c for c in la if c in lb and c in needed]
    contr = [c for c in la if c in lb and c not in needed]
    aonly = [c for c in la if c not in lb]
    bonly = [c for c in lb if c not in la]
    ta = permute(a.t, [la.index(c) for c in batch + aonly + contr])
    tb = permute(b.t, [lb.index(c) for c in batch + contr + bonly])
    B = numel(a.size(c) for c in batch)
    M = numel(a.size(c) for c in aonly)
    K = numel(a.size(c) for c in contr)
    N = numel(b.size(c) for c in bonly)
    out = prims.bmm(reshape(ta, (B, M, K)), reshape(tb, (B, K, N)))
    shape = [a.size(c) for c in batch + aonly] + [b.size(c) for c in bonly]
    return _Term(reshape(out, shape), batch + aonly + bonly)


@register_decomposition("_einsum")
def _einsum(equation, operands):
    if not operands:
        return NotImplemented
    dt = _t.result_type_from([o.dtype for o in operands if o.ndim], [o.dtype for o in operands if not o.ndim], [])
    if dt is _t.bool_:
        return NotImplemented        # bmm has no bool form
    lhs, out_sub = equation.split("->")
    subs = lhs.split(",")
    terms = [_take_diagonals(_Term(to(o, dt), s)) for s, o in zip(subs, operands)]
    out_labels = list(out_sub)

    def needed_after(k):
        need = set(out_labels)
        for t in terms[k + 1:]:
            need.update(t.labels)
        return need

    acc = None
    for k, term in enumerate(terms):
        need = needed_after(k)
        if acc is None:
            acc = _sum_out(term, need)
            continue
        acc = _sum_out(acc, need | set(term.labels))
        term = _sum_out(term, need | set(acc.labels))
        acc = _contract(acc, term, need)
    acc = _sum_out(acc, set(out_labels))
    out = permute(acc.t, [acc.labels.index(c) for c in out_labels])
    if out is operands[0] or out is terms[0].t:
        out = prims.clone(out)
    return out


def coverage_examples():
    """op name -> () -> example arguments, for ``python -m ember.prims.coverage``."""
    import ember
    r = ember.randn
    return {
        "baddbmm": lambda: (r(3, 5), r(2, 3, 4), r(2, 4, 5)),
        "_einsum": lambda: ("bij,bjk->bik", [r(2, 3, 4), r(2, 4, 5)]),
        "bilinear": lambda: (r(3, 4), r(3, 5), r(6, 4, 5), r(6)),
    }
