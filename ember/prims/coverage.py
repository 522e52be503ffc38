"""``python -m ember.prims.coverage``: how every op reaches the prims.

For each op in the registry that is neither a prim nor an in-place variant,
the table says whether it is

* ``composite`` — implemented in other ember ops, so it decomposes through
  them (no entry of its own needed);
* ``decomp``    — has a registered decomposition;
* ``extern``    — deliberately kept whole (the reason is given), or
* ``MISSING``   — none of these (the exit status is then 1),

and how many distinct prims its decomposition reaches, found by tracing it
with :func:`~ember.fx.experimental.proxy_tensor.make_fx` and the full table
on the small example inputs in ``EXAMPLES`` (``?`` with the reason when there
are none or the trace fails). Ops that trace to an extern prim (``mm``,
``convolution``, ``sort``, ...) are marked with it. The last line gives the
total prim count.
"""
from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Dict, Optional, Tuple

# ops kept whole on purpose: name -> why
EXTERN: Dict[str, str] = {
    "nonzero": "data-dependent output shape (a graph break in dynamo; no prim can express it)",
    "masked_select": "data-dependent output shape (a graph break in dynamo; no prim can express it)",
    "bincount": "data-dependent output shape (length max(input) + 1; no prim can express it)",
    "unique": "data-dependent output shape (number of distinct values; no prim can express it)",
    "unique_consecutive": "data-dependent output shape (number of runs; no prim can express it)",
    "multinomial": "PyTorch's exponential race / cumulative search over ember's Mersenne Twister at run time",
    "_random_mt": "PyTorch's serial random kernels (cauchy_, log_normal_, geometric_) over ember's Mersenne "
                  "Twister at run time",
    "nextafter": "numpy ufunc kernel (the next representable float, bit-level); no prim",
    "gcd": "numpy ufunc kernel (Euclid's loop per element); no prim",
    "lcm": "numpy ufunc kernel (from gcd); no prim",
    "view_dtype": "a bit reinterpretation (Tensor.view(dtype): numpy's view); no bit-cast prim",
    "randperm": "a random permutation (numpy's Generator.permutation, ember's generator at run time)",
    "linalg_inv": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_det": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_slogdet": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_solve": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_cholesky": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_qr": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_eigh": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_eig": "LAPACK factorisation (numpy.linalg, geev); no prim",
    "linalg_svd": "LAPACK factorisation (numpy.linalg); no prim",
    "linalg_lu_factor_ex": "LU with partial pivoting (numpy loop, ember.ops.linalg_extra); no prim",
    "_lu_perm": "row permutation from LAPACK pivots (a sequential swap loop); no prim",
    "linalg_solve_triangular": "triangular substitution (numpy loop, ember.ops.linalg_extra); no prim",
    "linalg_inv_ex": "LAPACK factorisation (numpy.linalg) reporting info; no prim",
    "linalg_solve_ex": "LAPACK factorisation (numpy.linalg) reporting info; no prim",
    "linalg_cholesky_ex": "LAPACK factorisation (numpy.linalg) reporting info; no prim",
    "linalg_lstsq": "least squares through SVD / QR (numpy.linalg); no prim",
    "linalg_ldl_factor_ex": "Bunch-Kaufman LDL^T (LAPACK sytf2 in numpy); no prim",
    "linalg_ldl_solve": "LDL^T solve (LAPACK sytrs in numpy); no prim",
    "matrix_exp": "scaling and squaring with a Pade approximant and a LAPACK solve (numpy.linalg); no prim",
    "binomial": "PyTorch's binomial sampler (BTRS / inversion) over ember's Mersenne Twister at run time",
    "poisson": "PyTorch's Poisson sampler (PTRS / product of uniforms) over ember's Mersenne Twister at run time",
    "_standard_gamma": "PyTorch's gamma sampler (Marsaglia-Tsang) over ember's Mersenne Twister at run time",
    "_sample_dirichlet": "PyTorch's Dirichlet sampler (normalised gammas) over ember's Mersenne Twister at run time",
    "_standard_gamma_grad": "series / continued fraction iterated to convergence (ember.ops.sampling_extra); no prim",
    "_dirichlet_grad": "continued fraction iterated to convergence (ember.ops.sampling_extra); no prim",
}
# complex values: the prims and inductor are real-valued, so the nodes of a dynamo graph that
# read or compute a complex tensor run as eager ops and are never decomposed; the real segments
# around them are compiled (ember.aot.complex_split)
_COMPLEX_EAGER = "complex values: nodes reading or computing them run as eager ops (ember.aot.complex_split)"
EXTERN.update({name: _COMPLEX_EAGER for name in ("_fft_c2c", "_fft_c2r", "_fft_r2c", "conj_physical",
                                                 "view_as_complex", "view_as_real")})
EXTERN.update(__import__("ember.ops.special_extra", fromlist=["EXTERN"]).EXTERN)  # its numpy kernels

EXTERN_PRIMS = ("mm", "bmm", "convolution", "sort", "topk")


def _examples() -> Dict[str, Callable[[], Tuple[Any, ...]]]:
    """op name -> () -> positional arguments of a small example call (fresh random data)."""
    import ember
    r = lambda *s: ember.randn(*s)  # noqa: E731
    pos = lambda *s: ember.rand(*s) + 0.5  # noqa: E731
    unit = lambda *s: ember.rand(*s) * 1.8 - 0.9  # noqa: E731
    ints = lambda *s: ember.randint(-5, 6, s)  # noqa: E731
    ex: Dict[str, Callable[[], Tuple[Any, ...]]] = {}
    for n in ("neg", "abs", "sign", "exp", "exp2", "expm1", "sin", "cos", "tan", "atan", "sinh", "cosh", "tanh",
              "asinh", "sigmoid", "erf", "erfc", "floor", "ceil", "trunc", "round", "frac", "relu", "hardtanh",
              "leaky_relu", "elu", "celu", "gelu", "silu", "mish", "softplus", "hardswish", "hardsigmoid",
              "logsigmoid", "hardshrink", "softshrink", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
              "nan_to_num", "reciprocal", "square", "relu6", "selu", "softsign", "tanhshrink", "logical_not"):
        ex[n] = lambda: (r(3, 4),)
    for n in ("log", "log2", "log10", "log1p", "sqrt", "rsqrt", "acosh"):
        ex[n] = lambda: (pos(3, 4),)
    ex["acosh"] = lambda: (pos(3, 4) + 1.0,)
    for n in ("asin", "acos", "atanh", "erfinv", "logit"):
        ex[n] = lambda: (unit(3, 4),)
    for n in ("add", "sub", "rsub", "mul", "div", "rdiv", "true_divide", "floor_divide", "remainder", "fmod",
              "pow", "atan2", "copysign", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
              "logical_and", "logical_or", "logical_xor", "clamp_min", "clamp_max"):
        ex[n] = lambda: (r(3, 4), r(4))
    ex["pow"] = lambda: (pos(3, 4), r(4))
    for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"):
        ex[n] = lambda: (ints(3, 4), ember.randint(0, 4, (4,)))
    ex["bitwise_not"] = lambda: (ints(3, 4),)
    ex["clamp"] = lambda: (r(3, 4), -0.5, 0.5)
    ex["where"] = lambda: (r(3, 4) > 0, r(3, 4), r(4))
    ex["lerp"] = lambda: (r(3, 4), r(3, 4), r(4))
    ex["addcmul"] = lambda: (r(3, 4), r(3, 4), r(4))
    ex["addcdiv"] = lambda: (r(3, 4), r(3, 4), pos(4))
    ex["masked_fill"] = lambda: (r(3, 4), r(3, 4) > 0, 2.0)
    ex["threshold"] = lambda: (r(3, 4), 0.1, 2.0)
    ex["isclose"] = lambda: (r(3, 4), r(4), 1e-3, 1e-5, True)
    # ember.ops.search
    ex["searchsorted"] = lambda: (ember.sort(r(3, 5), -1)[0], r(3, 4))
    ex["bucketize"] = lambda: (r(3, 4), ember.sort(r(5))[0])
    ex["isin"] = lambda: (ints(3, 4), ints(5))
    ex["count_nonzero"] = lambda: (ints(3, 4), [1])
    for n in ("median", "nanmedian"):
        ex[n] = lambda: (r(3, 4),)
    for n in ("median_dim", "nanmedian_dim", "cummax", "cummin", "logcumsumexp"):
        ex[n] = lambda: (r(3, 4), 1)
    ex["kthvalue"] = lambda: (r(3, 4), 2, 1)
    ex["mode"] = lambda: (ints(3, 4), 1)
    ex["histc"] = lambda: (r(3, 4), 5, -1.0, 1.0)
    # ember.ops.lapack (composites; the LAPACK kernels are EXTERN)
    ex["linalg_cross"] = lambda: (r(4, 3), r(4, 3), -1)
    ex["linalg_vecdot"] = lambda: (r(3, 4), r(4))
    ex["linalg_matrix_norm"] = lambda: (r(2, 3, 4), "fro", [-2, -1])
    for n in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any"):
        ex[n] = lambda: (r(3, 4), [1])
    ex["prod"] = lambda: (r(3, 4), 1)
    for n in ("max", "min"):
        ex[n] = lambda: (r(3, 4),)
    for n in ("max_dim", "min_dim", "argmax", "argmin", "cumsum", "cumprod", "_reverse_cumsum", "_softmax",
              "_log_softmax", "softmax", "log_softmax", "sort", "argsort"):
        ex[n] = lambda: (r(3, 4), 1)
    ex["_softmax"] = lambda: (r(3, 4), 1, False)
    ex["_log_softmax"] = lambda: (r(3, 4), 1, False)
    for n in ("var", "std", "var_mean", "std_mean"):
        ex[n] = lambda: (r(3, 4), [1])
    ex["linalg_vector_norm"] = lambda: (r(3, 4), 2, [1])
    ex["topk"] = lambda: (r(3, 4), 2, 1)
    ex["_reduction_gather"] = lambda: (r(3, 4), ember.randint(0, 4, (3, 2)), 1)
    ex["_reduction_scatter"] = lambda: (r(3, 1), ember.randint(0, 4, (3, 1)), 1, [3, 4])
    ex["full"] = lambda: ((2, 3), 1.5)
    ex["empty"] = lambda: ((2, 3),)
    ex["_random"] = lambda: (r(3, 4), "uniform")
    ex["copy"] = lambda: (r(3, 4), r(4).double())
    ex["fill"] = lambda: (r(3, 4), 2.0)
    # other families
    ex["mm"] = lambda: (r(3, 4), r(4, 5))
    ex["bmm"] = lambda: (r(2, 3, 4), r(2, 4, 5))
    ex["addmm"] = lambda: (r(5), r(3, 4), r(4, 5))
    ex["mv"] = lambda: (r(3, 4), r(4))
    ex["dot"] = lambda: (r(4), r(4))
    ex["matmul"] = lambda: (r(2, 3, 4), r(4, 5))
    ex["linear"] = lambda: (r(3, 4), r(5, 4), r(5))
    ex["outer"] = lambda: (r(3), r(4))
    ex["ger"] = lambda: (r(3), r(4))
    ex["view"] = lambda: (r(3, 4), [12])
    ex["reshape"] = lambda: (r(3, 4), [4, 3])
    ex["expand"] = lambda: (r(3, 1), [3, 4])
    ex["permute"] = lambda: (r(2, 3, 4), [2, 0, 1])
    ex["transpose"] = lambda: (r(3, 4), 0, 1)
    ex["t"] = lambda: (r(3, 4),)
    ex["unsqueeze"] = lambda: (r(3, 4), 1)
    ex["squeeze"] = lambda: (r(3, 1, 4),)
    ex["clone"] = lambda: (r(3, 4),)
    ex["contiguous"] = lambda: (r(3, 4),)
    ex["select"] = lambda: (r(3, 4), 0, 1)
    ex["cat"] = lambda: ([r(3, 4), r(2, 4)],)
    ex["stack"] = lambda: ([r(3, 4), r(3, 4)],)
    ex["flip"] = lambda: (r(3, 4), [0])
    ex["tril"] = lambda: (r(3, 4),)
    ex["triu"] = lambda: (r(3, 4),)
    ex["gather"] = lambda: (r(3, 4), 1, ember.randint(0, 4, (3, 2)))
    ex["index_select"] = lambda: (r(3, 4), 0, ember.randint(0, 3, (2,)))
    ex["embedding"] = lambda: (r(5, 3), ember.randint(0, 5, (2, 3)))
    ex["convolution"] = lambda: (r(1, 2, 5, 5), r(3, 2, 3, 3), r(3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    ex["mse_loss"] = lambda: (r(3, 4), r(3, 4))
    # ember.ops.shape_extra
    ex["diff"] = lambda: (r(3, 4), 2, 0, r(1, 4), r(2, 4))
    ex["trace"] = lambda: (r(3, 4),)
    ex["diag_embed"] = lambda: (r(2, 3), 1, 0, 2)
    ex["rot90"] = lambda: (r(3, 4), 1, [0, 1])
    ex["_repeat_interleave_int"] = lambda: (r(3, 4), 2, 1)
    ex["_repeat_interleave_tensor"] = lambda: (r(3, 4), ember.tensor([1, 0, 2]), 0)
    ex["unfold"] = lambda: (r(3, 5), 1, 2, 1)
    ex["glu"] = lambda: (r(3, 4), 1)
    ex["kron"] = lambda: (r(2, 3), r(3, 2))
    ex["block_diag"] = lambda: ([r(2, 3), r(3), r(1, 2)],)
    ex["meshgrid"] = lambda: ([r(3), r(4)],)
    ex["cartesian_prod"] = lambda: ([r(3), r(4)],)
    ex["combinations"] = lambda: (r(4), 2, True)
    ex["cdist"] = lambda: (r(2, 3, 4), r(2, 5, 4), 2.0)
    # a family may list examples for its ops next to their decompositions (coverage_examples())
    from . import decompositions as _d
    for fam in _d._FAMILIES:
        more = getattr(sys.modules.get(f"{_d.__name__}.{fam}"), "coverage_examples", None)
        if more is not None:
            for k, v in more().items():
                ex.setdefault(k, v)
    return ex


def _prim_targets(gm) -> set:
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is not operator.getitem:
            op = getattr(n.target, "_ember_op", None)
            out.add(op.name if op is not None else getattr(n.target, "__name__", str(n.target)))
    return out


def trace_prims(op, args) -> set:
    """The distinct ops (prims, hopefully) the traced decomposition of ``op(*args)`` calls."""
    from ..fx.experimental.proxy_tensor import make_fx
    from .table import decomposition_table

    binding = op.binding

    def call(*a):
        return binding(*a)
    gm = make_fx(call, decomposition_table=decomposition_table())(*args)
    return _prim_targets(gm)


def rows():
    """One dict per op: name, kind, detail, prims (an int or '?'), note."""
    from ..ops import registry as _reg
    from . import all_prims
    from .table import decomposition_table

    table = decomposition_table()
    all_prims()
    examples = _examples()
    out = []
    for name in sorted(_reg.OPS):
        op = _reg.OPS[name]
        if "prim" in op.tags or "inplace" in op.tags:
            continue
        if op in table:
            kind = "decomp"
        elif op.composite is not None:
            kind = "composite"
        elif name in EXTERN:
            kind = "extern"
        else:
            kind = "MISSING"
        row = {"name": name, "kind": kind, "prims": "?", "note": ""}
        if kind == "extern":
            row["note"] = EXTERN[name]
            row["prims"] = 0
            out.append(row)
            continue
        if kind == "MISSING":
            row["note"] = "no decomposition, not composite, not marked extern"
        ex = examples.get(name)
        if ex is None:
            row["note"] = row["note"] or "no example inputs in ember.prims.coverage"
            out.append(row)
            continue
        try:
            targets = trace_prims(op, ex())
        except Exception as e:  # noqa: BLE001 - reported, not raised
            row["note"] = f"trace failed: {type(e).__name__}: {str(e)[:80]}"
            out.append(row)
            continue
        non_prims = sorted(t for t in targets if not t.startswith("prims."))
        prims_ = sorted(t for t in targets if t.startswith("prims."))
        row["prims"] = len(prims_)
        ext = [p[len("prims."):] for p in prims_ if p[len("prims."):] in EXTERN_PRIMS]
        notes = []
        if ext:
            notes.append("extern prim " + ", ".join(ext))
        if non_prims:
            notes.append("still calls " + ", ".join(non_prims))
        row["note"] = "; ".join(notes)
        out.append(row)
    return out


def main(argv: Optional[list] = None) -> int:
    from . import all_prims
    table = rows()
    prims_ = all_prims()
    w = max(len(r["name"]) for r in table)
    print(f"{'op':<{w}}  {'kind':<9}  {'prims':>5}  note")
    print("-" * (w + 40))
    counts: Dict[str, int] = {}
    for r in table:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
        print(f"{r['name']:<{w}}  {r['kind']:<9}  {str(r['prims']):>5}  {r['note']}")
    print("-" * (w + 40))
    total = len(table)
    covered = total - counts.get("MISSING", 0)
    print(f"{total} ops: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
          f"; covered {covered}/{total} ({100.0 * covered / max(total, 1):.0f}%)")
    ext = [n for n in sorted(prims_) if n in EXTERN_PRIMS]
    print(f"prims: {len(prims_)} (extern: {', '.join(ext)})")
    return 0 if not counts.get("MISSING") else 1


if __name__ == "__main__":
    sys.exit(main())
