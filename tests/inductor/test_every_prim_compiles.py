"""Every prim, compiled by the CPU inductor, equals its eager reference -- for each dtype it
takes (float32, float64, int32, int64, bool), on contiguous inputs, on strided views
(a transpose, a stepped slice), on broadcast operands, and with symbolic sizes.

Why one table for all of them: the other inductor tests pin families in depth (every
pointwise op in ``test_pointwise.py``, reductions and views in ``test_reductions_views.py``,
...), each on the inputs its author chose. This file is the completeness check of issue 7's
first "done when": ``test_the_table_names_every_prim`` fails when a prim is added without a
case here, and each case runs on every layout and size mode.

One graph per dtype holds every case, so each (dtype, static/symbolic) pair costs one g++ run.
The symbolic graph is traced once on fakes whose first dim is a symbol and then called at three
sizes; it must compile once and run every prim in C++ (no per-size recompile, no fallback),
except the three prims that are numpy calls by design (``EXTERN_BY_DESIGN``)."""
import numpy as np
import pytest

import ember
import ember.prims as P
from ember.fx.experimental.proxy_tensor import make_fx
from ember.fx.experimental.symbolic_shapes import ShapeEnv
from ember.fx.fake_tensor import FakeTensorMode
from ember.inductor import compile_fx
from ember.inductor.dynamic import compile_fx_symbolic
from ember.prims import all_prims
from ember.tensor import _make

from ._helpers import _flat, assert_same
from .test_pointwise import DOMAIN, FLOAT_BINARY, INT_BINARY, UNARY_BOOL

# prims the compiled graph calls as numpy functions, and why
EXTERN_BY_DESIGN = {
    "sort": "a comparison sort has no loop-IR form; numpy's, as torch's inductor calls aten's",
    "topk": "a selection; numpy's partition/sort, as sort",
    "rng_seed": "draws from ember's global generator, a side effect each call must repeat",
}

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
COLS = 9            # the static trailing size
SIZES = (6, 11, 1)  # the leading size: traced at 6, then called at each (symbolic mode)

# the pointwise families as test_pointwise.py lists them (that file checks their values in depth);
# rounding reads any values here: ties are rare in random data and round half to even alike
UNARY_FLOAT = {**DOMAIN, "round": "any"}
UNARY_INT = ["abs", "neg", "sign", "bitwise_not"]
UNARY_TO_BOOL = UNARY_BOOL
BINARY_FLOAT = FLOAT_BINARY
BINARY_INT = INT_BINARY
BINARY_BOOL = ["bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "minimum"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
REDUCE_NUMERIC = ["sum", "prod", "amax", "amin"]


def _dt(name):
    return getattr(ember, name)


# ------------------------------------------------------------------------------------ inputs
def _values(rng, kind, shape, dtype, domain="any"):
    """Fresh random values of ``dtype`` (numpy) in ``domain``; never zeros where a divisor or a
    shift count reads them."""
    if kind == "f":
        lo, hi = {"any": (-3, 3), "pos": (0.05, 6), "unit": (-0.95, 0.95), "ge1": (1.01, 6)}[domain]
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if kind == "i":
        if domain == "divisor":   # nonzero, both signs
            return (rng.integers(1, 9, size=shape) * rng.choice([-1, 1], size=shape)).astype(dtype)
        if domain == "shift":
            return rng.integers(0, 6, size=shape).astype(dtype)
        return rng.integers(-40, 40, size=shape).astype(dtype)
    return rng.random(size=shape) < 0.5


def _layouts(rng, kind, n, dtype, domain):
    """The same (n, COLS) values three ways: contiguous, a transpose's view, a stepped slice."""
    c = _values(rng, kind, (n, COLS), dtype, domain)
    t = np.ascontiguousarray(_values(rng, kind, (n, COLS), dtype, domain).T).T     # strides (1, n)
    s = np.empty((n, 2 * COLS), dtype)
    s[:, ::2] = _values(rng, kind, (n, COLS), dtype, domain)
    s[:, 1::2] = s[:, ::2]
    return {"c": c, "t": t, "s": s[:, ::2]}


def make_inputs(dtype, n, seed):
    """name -> numpy array, every input the dtype's graph reads, for leading size ``n``."""
    rng = np.random.default_rng(seed)
    kind = {"float32": "f", "float64": "f", "bool": "b"}.get(dtype, "i")
    domains = ["any", "pos", "unit", "ge1"] if kind == "f" else (["any", "divisor", "shift"] if kind == "i"
                                                                 else ["any"])
    ins = {}
    for dom in domains:
        for lay, arr in _layouts(rng, kind, n, dtype, dom).items():
            ins[f"{dom}_{lay}"] = arr
    ins["row"] = _values(rng, kind, (COLS,), dtype, "divisor" if kind == "i" else "pos" if kind == "f" else "any")
    if kind == "f":   # special values for the NaN/inf-aware ops
        sp = rng.uniform(-3, 3, size=(n, COLS)).astype(dtype)
        sp.flat[rng.integers(0, sp.size, size=max(1, sp.size // 4))] = rng.choice(
            np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype), size=max(1, sp.size // 4))
        ins["special"] = sp
    # indexing: a permutation of each column (scatter's writes never collide), indices with repeats
    ins["perm"] = np.argsort(rng.random((n, COLS)), axis=0).astype(np.int64)
    ins["idx_rows"] = rng.integers(0, n, size=(n, COLS)).astype(np.int64)
    ins["idx_cols"] = rng.integers(0, COLS, size=(3,)).astype(np.int64)
    ins["neg_cols"] = rng.integers(-COLS, 0, size=(1,)).astype(np.int64)     # index_put: from the end
    ins["pick"] = rng.integers(0, n, size=(4,)).astype(np.int64)
    ins["seed"] = np.array(int(rng.integers(0, 2 ** 40)), np.int64)
    ins["offset"] = np.array(int(rng.integers(0, 2 ** 20)) * 4, np.int64)
    return ins


# ------------------------------------------------------------------------------------ the cases
def _kind(dtype):
    return {"float32": "f", "float64": "f", "bool": "b"}.get(dtype, "i")


def graph_fn(dtype):
    """The function of every case for ``dtype``: takes the inputs (sorted by name) and returns a
    dict ``"prim/case" -> tensor``; also the set of prims it calls."""
    kind, dt = _kind(dtype), _dt(dtype)
    used = set()

    def call(name, *args):
        used.add(name)
        return getattr(P, name)(*args)

    def fn(v):
        out = {}
        a = v["any_c"]
        n = a.shape[0]
        shape = [n, COLS]
        row_b = call("broadcast_in_dim", v["row"], shape, [1])        # a stride-0 operand
        layouts = {lay: v[f"any_{lay}"] for lay in "cts"}

        # ---- pointwise
        if kind == "f":
            for op, dom in UNARY_FLOAT.items():
                for lay in "cts":
                    out[f"{op}/{lay}"] = call(op, v[f"{dom}_{lay}"])
            for op in UNARY_TO_BOOL:
                out[f"{op}/special"] = call(op, v["special"])
                out[f"{op}/t"] = call(op, v["any_t"])
            for op in BINARY_FLOAT:
                lhs = {lay: v[f"pos_{lay}"] if op == "pow" else layouts[lay] for lay in "cts"}
                out[f"{op}/c,t"] = call(op, lhs["c"], v["pos_t"])
                out[f"{op}/s,bcast"] = call(op, lhs["s"], row_b)
                out[f"{op}/t,scalar"] = call(op, lhs["t"], 1.75)
            for op in ("maximum", "minimum"):
                out[f"{op}/nan"] = call(op, v["special"], v["any_s"])
        elif kind == "i":
            for op in UNARY_INT:
                for lay in "cts":
                    out[f"{op}/{lay}"] = call(op, layouts[lay])
            for op in ("isnan", "isinf", "isfinite", "signbit"):
                out[f"{op}/t"] = call(op, v["any_t"])
            out["logical_not/s"] = call("logical_not", v["any_s"])
            for op in BINARY_INT:
                rhs = "shift" if op.startswith("shift") else "divisor"
                out[f"{op}/c,t"] = call(op, layouts["c"], v[f"{rhs}_t"])
                out[f"{op}/s,s"] = call(op, layouts["s"], v[f"{rhs}_s"])
                if rhs == "divisor":
                    out[f"{op}/t,bcast"] = call(op, layouts["t"], row_b)
                out[f"{op}/t,scalar"] = call(op, layouts["t"], 3)
        else:
            out["logical_not/t"] = call("logical_not", layouts["t"])
            out["bitwise_not/s"] = call("bitwise_not", layouts["s"])
            for op in BINARY_BOOL:
                out[f"{op}/c,t"] = call(op, layouts["c"], layouts["t"])
                out[f"{op}/s,bcast"] = call(op, layouts["s"], row_b)
        for op in LOGICAL:
            out[f"{op}/t,s"] = call(op, layouts["t"], layouts["s"])
            out[f"{op}/c,bcast"] = call(op, layouts["c"], row_b)
        for op in COMPARE:
            out[f"{op}/t,s"] = call(op, layouts["t"], layouts["s"])
            out[f"{op}/c,bcast"] = call(op, layouts["c"], row_b)
            out[f"{op}/s,scalar"] = call(op, layouts["s"], True if kind == "b" else 1)
        cond = call("gt", layouts["t"], layouts["s"]) if kind != "b" else layouts["t"]
        out["where/t,s,bcast"] = call("where", cond, layouts["s"], row_b)
        out["where/scalar"] = call("where", cond, layouts["c"], True if kind == "b" else 2)
        for to in DTYPES:
            out[f"convert_element_type/{to}"] = call("convert_element_type", layouts["t"], _dt(to))

        # ---- reductions and scans, over each dim and both, on the strided layouts
        num = kind != "b"
        for dims in ([0], [1], [0, 1]):
            k = "".join(map(str, dims))
            for op in (REDUCE_NUMERIC if num else ["amax", "amin"]):
                # an integer product of many values wraps: take it over signs (-1, 0, 1)
                src = {lay: call("sign", x) for lay, x in layouts.items()} if op == "prod" and kind == "i" \
                    else layouts
                out[f"{op}/{k},t"] = call(op, src["t"], dims)
                out[f"{op}/{k},s"] = call(op, src["s"], dims)
            for op in ("any", "all"):
                out[f"{op}/{k},t"] = call(op, layouts["t"], dims)
            if kind == "f":
                out[f"var/{k},s"] = call("var", layouts["s"], dims, 1.0)
                out[f"var/{k},t"] = call("var", layouts["t"], dims, 0.0)
        for d in (0, 1):
            out[f"argmax/{d},t"] = call("argmax", layouts["t"], d)
            out[f"argmin/{d},s"] = call("argmin", layouts["s"], d)
            if kind == "f":
                out[f"argmax/{d},nan"] = call("argmax", v["special"], d)
            if num:
                out[f"cumsum/{d},t"] = call("cumsum", layouts["t"], d)
                out[f"cumprod/{d},s"] = call("cumprod", (v["unit_s"] if kind == "f" else
                                                         call("sign", layouts["s"])), d)

        # ---- views and data movement (composed with a pointwise op, so each is an index rewrite
        # inside a kernel, not only a view handed back)
        t = layouts["t"]
        out["broadcast_in_dim/3d"] = call("broadcast_in_dim", t, [2, n, COLS], [1, 2])
        out["reshape/flat"] = call("reshape", t, [n * COLS])
        out["reshape/split"] = call("reshape", layouts["s"], [n, 3, 3])
        out["permute/t"] = call("permute", t, [1, 0])
        e = call("expand_dims", t, [0, 2])
        out["expand_dims/t"] = e
        out["squeeze/t"] = call("squeeze", e, [0, 2])
        out["slice/step"] = call("slice", t, [0, 1], [n, COLS], [2, 3])
        out["slice/tail"] = call("slice", layouts["s"], [n // 2, 2], [n, 7])
        out["as_strided/c"] = call("as_strided", a, [n - 1, 4], [COLS, 2], 1)
        out["cat/0"] = call("cat", [t, layouts["s"], a], 0)
        out["cat/1"] = call("cat", [t, row_b], 1)
        fill = True if kind == "b" else 7
        out["pad/edges"] = call("pad", t, fill, [[1, 2, 0], [0, 1, 1]])
        out["pad/crop"] = call("pad", layouts["s"], fill, [[0, 0, 0], [-2, 1, 0]])
        out["flip/t"] = call("flip", t, [0, 1])
        out["clone/s"] = call("clone", layouts["s"])

        # ---- indexing
        out["gather/0"] = call("gather", t, 0, v["idx_rows"])
        out["gather/1"] = call("gather", layouts["s"], 1, call("remainder", v["idx_rows"], COLS))
        out["scatter/0"] = call("scatter", t, 0, v["perm"], layouts["s"])
        out["scatter/scalar"] = call("scatter", layouts["s"], 0, v["perm"], fill)
        red_src = layouts["c"] if kind != "b" else t
        for op in ("scatter_amax", "scatter_amin"):
            out[f"{op}/0"] = call(op, t, 0, v["idx_rows"], red_src)
        if num:
            # float sums in any order are rounded differently: scatter unique rows for floats
            out["scatter_add/0"] = call("scatter_add", t, 0, v["perm"] if kind == "f" else v["idx_rows"],
                                        layouts["c"])
        else:
            out["scatter_add/0"] = call("scatter_add", t, 0, v["perm"], layouts["c"])
        out["index_select/0"] = call("index_select", t, 0, v["pick"])
        out["index_select/1"] = call("index_select", layouts["s"], 1, v["idx_cols"])
        pick_vals = call("broadcast_in_dim", v["row"], [4, COLS], [1])
        out["index_put/set"] = call("index_put", t, [v["pick"]], pick_vals, False)
        if num:
            out["index_put/acc"] = call("index_put", layouts["s"], [v["pick"]], pick_vals, True)
        out["index_put/2d"] = call("index_put", t, [v["pick"], v["neg_cols"]],
                                   call("slice", v["row"], [0], [1]), False)

        # ---- creation
        if kind != "b":
            out["iota/n"] = call("iota", n, 3, 2, dt)
        out["full/shape"] = call("full", shape, fill, dt)
        if kind == "f":
            out["philox_rand/shape"] = call("philox_rand", shape, v["seed"], v["offset"], dt)
            out["philox_randn/shape"] = call("philox_randn", [n, 5], v["seed"], v["offset"], dt)

        # ---- externs
        if kind != "b":
            out["mm/t,s^T"] = call("mm", t, call("permute", layouts["s"], [1, 0]))
            b3 = call("reshape", layouts["c"], [n, 3, 3])
            out["bmm/views"] = call("bmm", b3, call("permute", b3, [0, 2, 1]))
        if kind == "f":   # a batch of n one-channel 3x3 images (the transposed view's rows)
            x4 = call("reshape", t, [n, 1, 3, 3])
            w = call("reshape", v["row"], [1, 1, 3, 3])
            out["convolution/2d"] = call("convolution", x4, w, call("slice", v["row"], [0], [1]), [1, 1],
                                         [1, 1], [1, 1], False, [0, 0], 1)
        vals, idx = call("sort", t, 0, False, True)
        out["sort/vals"], out["sort/idx"] = vals, idx
        vals, idx = call("topk", layouts["s"], 3, 1, True, True)
        out["topk/vals"], out["topk/idx"] = vals, idx
        return out

    return fn, used


def _kernelised(out):
    """Each output feeds a pointwise op too (a view output alone can be handed back as a view
    of the input; composed, the compiled kernel must read it through the index rewrite)."""
    res = dict(out)
    for k, x in out.items():
        if x.dtype == ember.bool:
            res[k + "|not"] = P.logical_not(x)
        else:
            res[k + "|neg"] = P.neg(x)
    return res


# ------------------------------------------------------------------------------------ running
TOL = {"float32": dict(rtol=2e-6, atol=1e-6), "float64": dict(rtol=1e-13, atol=1e-14)}
LOOSE = {"float32": dict(rtol=5e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12)}
# outputs whose float results may differ in the last bits: sums reassociate across the
# compiled loop's vector lanes and threads, products and convolutions too
REASSOCIATING = ("sum/", "prod/", "var/", "cumsum/", "cumprod/", "mm/", "bmm/", "convolution/",
                 "scatter_add/", "index_put/acc")


def _positional(fn, names):
    """``fn`` over positional inputs, returning a flat tuple (sorted by case name, see _keys)."""
    def g(*arrays):
        out = _kernelised(fn(dict(zip(names, arrays))))
        return tuple(x for k in sorted(out) for x in (out[k] if isinstance(out[k], tuple) else (out[k],)))
    return g


def _keys(fn, names, tensors):
    out = _kernelised(fn(dict(zip(names, tensors))))
    return sorted(out)


def _compare(dtype, got, want, keys):
    assert len(got) == len(want) == len(keys)
    failures = []
    for k, g, w in zip(keys, got, want):
        tol = {}
        if dtype in TOL:
            tol = LOOSE[dtype] if k.startswith(REASSOCIATING) else TOL[dtype]
        try:
            assert_same(g, w, **tol)
        except AssertionError as e:
            failures.append(f"{k}: {str(e).strip()[:300]}")
    assert not failures, f"{len(failures)} outputs differ:\n" + "\n".join(failures)


def _check_fallbacks(cf):
    for fb in cf.compiled.fallbacks:
        assert fb.split(":")[0].removeprefix("prims.") in EXTERN_BY_DESIGN, f"unexpected fallback: {fb}"


def test_the_table_names_every_prim():
    covered = set()
    for dtype in DTYPES:
        fn, used = graph_fn(dtype)
        ins = make_inputs(dtype, SIZES[0], seed=0)
        fn({k: _make(v) for k, v in ins.items()})
        covered |= used
    missing = set(all_prims()) - covered - {"rng_seed"}
    assert not missing, f"prims without a compiled case here: {sorted(missing)}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_static(dtype):
    fn, _ = graph_fn(dtype)
    ins = make_inputs(dtype, SIZES[0], seed=DTYPES.index(dtype))
    names = sorted(ins)
    tensors = [_make(ins[k]) for k in names]
    g = _positional(fn, names)
    gm = make_fx(g)(*tensors)
    cf = compile_fx(gm, tensors)
    assert cf.compiled is not None, cf.eager_reason
    _check_fallbacks(cf)
    keys = _keys(fn, names, tensors)
    for call in range(2):   # twice: preallocated/reused buffers must not leak between calls
        if call:
            ins = make_inputs(dtype, SIZES[0], seed=99)
            tensors = [_make(ins[k]) for k in names]
        got, want = cf(*tensors), gm(*tensors)
        _compare(dtype, _flat(got), _flat(want), keys)


@pytest.mark.parametrize("dtype", DTYPES)
def test_symbolic_sizes(dtype):
    fn, _ = graph_fn(dtype)
    ins = make_inputs(dtype, SIZES[0], seed=7)
    names = sorted(ins)
    g = _positional(fn, names)
    env = ShapeEnv()
    mode = FakeTensorMode(env)
    fakes = []
    for k in names:
        # traced on contiguous twins: a non-dense view's fake keeps concrete sizes (fake_tensor.py),
        # and compiled symbolic graphs take contiguous inputs (strided ones are copied: the calls
        # below pass the strided layouts through that adapter)
        x = _make(ins[k].copy())    # (C order)
        dyn = [0] if x.ndim >= 1 and k not in ("row", "idx_cols", "neg_cols", "pick") else []
        fakes.append(mode.from_tensor(x, symbolic=True, source=k, dynamic_dims=dyn))
    with mode:
        gm = make_fx(g, tracing_mode="symbolic")(*fakes)
    # the backend's path for symbolic graphs: one compilation for contiguous inputs of any
    # size (a strided input is copied first; the static test covers strided reads)
    sg = compile_fx_symbolic(gm, fakes)
    assert getattr(sg, "eager_reason", None) is None, sg.eager_reason
    cf = sg.compiled
    assert cf.compiled is not None, cf.eager_reason
    _check_fallbacks(cf)
    assert "const int64_t s0" in cf.compiled.source     # the size is a kernel argument
    keys = _keys(fn, names, [_make(ins[k]) for k in names])
    for i, n in enumerate(SIZES):
        ins = make_inputs(dtype, n, seed=100 + i)
        tensors = [_make(ins[k]) for k in names]
        got, want = sg(*tensors), gm(*tensors)
        _compare(dtype, _flat(got), _flat(want), keys)
    assert len(cf.variants) == 1, "one compilation serves every size"
