"""Audit of ``out=`` across ember's public API against torch (the oracle).

For every public callable of ``torch``, ``torch.linalg``, ``torch.special``, ``torch.fft`` and
``torch.nn.functional`` that ember also has, find a small valid call (a table of sample
argument lists tried in order, plus per-function overrides), learn whether torch takes
``out=`` for it (calling torch with an ``out`` of the result's shape and dtype), then call ember
the same way and classify what it does:

* ``ok``       -- the result is written into ``out`` and ``out`` is returned;
* ``ignored``  -- ``out`` left untouched (the silent wrong answer this audit exists to catch);
* ``wrong``    -- something else written into ``out``, or another object returned;
* ``raises``   -- ember refuses ``out=`` (TypeError / NotImplementedError naming it);
* ``error``    -- ember raised something else with ``out`` (while the call without works).

``python tests/ops/_out_audit.py`` prints the table. Imported by test_out_arguments.py.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np

_RNG = np.random.default_rng(0)


def _spd(n=4):
    a = _RNG.random((n, n)).astype(np.float32)
    return (a @ a.T + n * np.eye(n, dtype=np.float32)).astype(np.float32)


A = _spd() / 8            # symmetric positive definite, entries in (0, 1]
B = (_RNG.random((4, 4)) + 0.1).astype(np.float32)
V = (_RNG.random(4) + 0.1).astype(np.float32)
W = (_RNG.random(4) + 0.1).astype(np.float32)
B3 = (_RNG.random((2, 4, 4)) + 0.1).astype(np.float32)
C3 = (_RNG.random((2, 4, 4)) + 0.1).astype(np.float32)
IDX = _RNG.integers(0, 4, (4, 4)).astype(np.int64)
IDX1 = np.array([2, 0, 3], dtype=np.int64)
II = _RNG.integers(1, 20, (4, 4)).astype(np.int64)
IJ = _RNG.integers(1, 20, (4, 4)).astype(np.int64)
MASK = _RNG.random((4, 4)) > 0.5
SORTED = np.sort(_RNG.random(6).astype(np.float32))
CPLX = (_RNG.random((4, 4)) + 1j * _RNG.random((4, 4))).astype(np.complex64)


class D:
    """A dtype by name, converted per framework."""
    def __init__(self, name):
        self.name = name


GENERIC = [
    (A,), (A, B), (A, 0), (A, 1), (A, B, B), ([A, B],), ([A, B], 1), (A, 0, IDX), (A, 1, IDX1),
    (MASK, A, B), (V, W), (V,), (A, 2), (A, 0.5), (B3, C3), (A, B3, C3), (A, V), (V, A, W), (A, V, W),
    (II, IJ), (II,), (II, 2), (A, V, 0.5), (A, 0, True), (A, -1), (A, 2, 0), (A, 2, 1), (A, MASK),
    (A, B, 0.5), (A, B, A), (CPLX,), (A, D("float64")),
]

# per-function sample calls (args, kwargs): torch's signature differs from every generic one
OVERRIDES = {
    "polygamma": [((1, A), {})], "mvlgamma": [((A + 2, 2), {})],
    "searchsorted": [((SORTED, V), {})], "bucketize": [((V, SORTED), {})],
    "zeros": [(((3, 4),), {})], "ones": [(((3, 4),), {})], "empty": [(((3, 4),), {})],
    "full": [(((3, 4), 1.5), {})], "arange": [((5,), {}), ((1.0, 4.0, 0.5), {})],
    "range": [((0.0, 4.0), {})], "linspace": [((0.0, 1.0, 5), {})], "logspace": [((0.0, 1.0, 5), {})],
    "eye": [((3,), {})], "rand": [(((3, 4),), {})], "randn": [(((3, 4),), {})],
    "randint": [((0, 10, (3, 4)), {})], "randperm": [((6,), {})],
    "normal": [((A, B), {})], "poisson": [((A,), {})], "bernoulli": [((A / 2,), {})],
    "multinomial": [((A, 2), {})],
    "histc": [((A,), {"bins": 4})], "quantile": [((A, 0.5), {})], "nanquantile": [((A, 0.5), {})],
    "clamp": [((A, 0.2, 0.6), {})], "clip": [((A, 0.2, 0.6), {})],
    "index_select": [((A, 0, IDX1), {})], "take": [((A, IDX1), {})],
    "gather": [((A, 0, IDX), {})], "take_along_dim": [((A, IDX, 0), {})],
    "masked_select": [((A, MASK), {})], "diff": [((A,), {})],
    "kron": [((A, B), {})], "tensordot": [((A, B), {"dims": 1})], "cross": [((B[:3], A[:3]), {})],
    "matrix_power": [((A, 3), {})], "matrix_exp": [((A,), {})],
    "lu_solve": [], "lu_unpack": [], "cholesky_solve": [((B, A), {})],
    "triangular_solve": [((B, np.triu(A)), {})], "solve_triangular": [((np.triu(A), B), {"upper": True})],
    "vander": [((V, 3), {})], "renorm": [((A, 2, 0, 1.0), {})], "baddbmm": [((B3, B3, C3), {})],
    "addbmm": [((A, B3, C3), {})], "addmm": [((A, B, A), {})], "addmv": [((V, A, W), {})],
    "addr": [((A, V, W), {})], "addcmul": [((A, B, A), {})], "addcdiv": [((A, B, A), {})],
    "lerp": [((A, B, 0.3), {})], "cumsum": [((A, 0), {})], "cumprod": [((A, 0), {})],
    "logcumsumexp": [((A, 0), {})], "cummax": [((A, 0), {})], "cummin": [((A, 0), {})],
    "kthvalue": [((A, 2, 0), {})], "topk": [((A, 2), {})], "mode": [((II, 0), {})],
    "sort": [((A, 0), {})], "argsort": [((A, 0), {})], "msort": [((A,), {})],
    "max": [((A,), {}), ((A, 0), {}), ((A, B), {})], "min": [((A,), {}), ((A, 0), {}), ((A, B), {})],
    "aminmax": [((A,), {"dim": 0})], "nan_to_num": [((A,), {})], "frexp": [((A,), {})],
    "ldexp": [((A, II), {})], "float_power": [((A, 2), {})], "pow": [((A, 2), {}), ((A, B), {})],
    "tril": [((A,), {})], "triu": [((A,), {})], "diag": [((A,), {})], "diag_embed": [((V,), {})],
    "cat": [(([A, B],), {}), (([A, B], 1), {})], "concat": [(([A, B],), {})],
    "concatenate": [(([A, B],), {})], "stack": [(([A, B],), {})], "hstack": [(([A, B],), {})],
    "vstack": [(([A, B],), {})], "dstack": [(([A, B],), {})], "column_stack": [(([A, B],), {})],
    "row_stack": [(([A, B],), {})], "where": [((MASK, A, B), {})],
    "histogram": [((A,), {"bins": 4})], "nonzero": [((MASK,), {})], "argwhere": [((MASK,), {})],
    "index_add": [((A, 0, IDX1, B[:3]), {})], "index_copy": [((A, 0, IDX1, B[:3]), {})],
    "index_fill": [((A, 0, IDX1, 2.0), {})], "index_reduce": [((A, 0, IDX1, B[:3], "prod"), {})],
    "scatter": [((A, 0, IDX, B), {})], "scatter_add": [((A, 0, IDX, B), {})],
    "scatter_reduce": [((A, 0, IDX, B, "sum"), {})], "masked_fill": [((A, MASK, 2.0), {})],
    "masked_scatter": [((A, MASK, B), {})],
    "hardshrink": [((A,), {})], "softshrink": [((A,), {})],
    "logsumexp": [((A, 0), {})], "var": [((A, 0), {})], "std": [((A, 0), {})], "mean": [((A, 0), {})],
    "nanmean": [((A, 0), {})], "nansum": [((A, 0), {})], "sum": [((A, 0), {})], "prod": [((A, 0), {})],
    "median": [((A,), {}), ((A, 0), {})], "nanmedian": [((A,), {}), ((A, 0), {})],
    "norm": [((A,), {})], "dist": [((A, B), {})], "xlogy": [((A, B), {})],
    "gcd": [((II, IJ), {})], "lcm": [((II, IJ), {})], "heaviside": [((A - 0.5, B), {})],
    "matrix_rank": [((A,), {})], "pinv": [((A,), {})], "lstsq": [((A, B), {})],
    "householder_product": [((A, V[:3]), {})], "multi_dot": [(([A, B, A],), {})],
    "tensorinv": [((np.eye(4, dtype=np.float32).reshape(4, 2, 2) + 0.1 * A.reshape(4, 2, 2),), {"ind": 1})],
    "tensorsolve": [((A, V), {})], "vecdot": [((A, B), {})], "vector_norm": [((A,), {})],
    "matrix_norm": [((A,), {})], "diagonal": [], "chain_matmul": [((A, B, A), {})],
    "ldl_solve": [], "lu_factor_ex": [((A,), {})], "lu_factor": [((A,), {})], "lu": [((A,), {})],
    "unravel_index": [], "bincount": [], "block_diag": [], "cartesian_prod": [],
    "fftfreq": [((8,), {})], "rfftfreq": [((8,), {})], "fftshift": [], "ifftshift": [],
    "hermite_polynomial_h": [((A, 3), {})], "hermite_polynomial_he": [((A, 3), {})],
    "laguerre_polynomial_l": [((A, 3), {})], "legendre_polynomial_p": [((A, 3), {})],
    "chebyshev_polynomial_t": [((A, 3), {})], "chebyshev_polynomial_u": [((A, 3), {})],
    "chebyshev_polynomial_v": [((A, 3), {})], "chebyshev_polynomial_w": [((A, 3), {})],
    "shifted_chebyshev_polynomial_t": [((A, 3), {})], "shifted_chebyshev_polynomial_u": [((A, 3), {})],
    "shifted_chebyshev_polynomial_v": [((A, 3), {})], "shifted_chebyshev_polynomial_w": [((A, 3), {})],
    "zeta": [((A + 1.5, B), {})], "multigammaln": [((A + 2, 2), {})],
    "softmax": [((A, 0), {})], "log_softmax": [((A, 0), {})],
    "as_strided_copy": [((A, (2, 2), (1, 1)), {})], "expand_copy": [((A[:1], (3, 4)), {})],
    "narrow_copy": [((A, 0, 1, 2), {})], "permute_copy": [((A, (1, 0)), {})], "select_copy": [((A, 0, 1), {})],
    "transpose_copy": [((A, 0, 1), {})], "unfold_copy": [((A, 0, 2, 1), {})], "view_copy": [((A, (16,)), {})],
    "view_as_complex_copy": [((B3[0, :, :2].copy(),), {})], "cond": [((A,), {})],
}

# names never called: global state, I/O, and callables that are not ops
SKIP = {
    "manual_seed", "seed", "initial_seed", "set_rng_state", "get_rng_state", "save", "load", "compile",
    "vmap", "set_default_dtype", "set_default_device", "set_printoptions", "set_grad_enabled",
    "set_num_threads", "set_num_interop_threads", "use_deterministic_algorithms", "set_flush_denormal",
    "set_anomaly_enabled", "set_autocast_enabled", "set_warn_always", "from_file", "from_numpy",
    "frombuffer", "as_tensor", "tensor", "asarray", "sparse_coo_tensor", "sparse_csr_tensor",
    "cond", "while_loop", "autocast", "no_grad", "enable_grad", "inference_mode", "typename",
    "set_float32_matmul_precision", "set_default_tensor_type", "empty_like", "empty_strided",
    "empty_permuted", "wait", "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite",
    "sym_sum", "sym_fresh_size", "get_device_module", "load_library", "import_ir_module",
    "set_deterministic_debug_mode", "is_warn_always_enabled", "init_num_threads",
}
RANDOM = {"rand", "randn", "randint", "randperm", "normal", "poisson", "bernoulli", "multinomial",
          "rand_like", "randn_like", "randint_like", "empty", "dropout", "alpha_dropout",
          "feature_alpha_dropout", "rrelu", "native_dropout"}

NAMESPACES = [("", "", ""), ("linalg", "linalg", "linalg."), ("special", "special", "special."),
              ("fft", "fft", "fft."), ("nn.functional", "nn.functional", "nn.functional.")]


def _conv(obj, lib):
    if isinstance(obj, np.ndarray):
        return lib.tensor(obj.copy())
    if isinstance(obj, D):
        return getattr(lib, obj.name)
    if isinstance(obj, list):
        return [_conv(o, lib) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_conv(o, lib) for o in obj)
    if isinstance(obj, dict):
        return {k: _conv(v, lib) for k, v in obj.items()}
    return obj


def _is_result(r, torch):
    if isinstance(r, torch.Tensor):
        return not r.is_sparse
    return isinstance(r, tuple) and len(r) > 0 and all(isinstance(x, torch.Tensor) and not x.is_sparse
                                                        for x in r)


def _resolve(mod, path):
    for p in path.split(".") if path else ():
        mod = getattr(mod, p)
    return mod


def _names(tmod, emod):
    out = []
    for n in sorted(dir(tmod)):
        if n.startswith("_") or n in SKIP:
            continue
        try:
            tf = getattr(tmod, n)
            ef = getattr(emod, n)
        except Exception:
            continue
        if inspect.isclass(tf) or inspect.ismodule(tf) or not callable(tf) or inspect.isclass(ef) \
                or not callable(ef) or inspect.ismodule(ef):
            continue
        out.append(n)
    return out


def _empty_like_result(r, lib, rng):
    """An out= argument for a result like ``r``: same shape and dtype, random sentinel values."""
    def one(t):
        shape = tuple(t.shape)
        if t.dtype.is_floating_point or t.dtype.is_complex:
            arr = rng.standard_normal(shape) + 100.0
        elif str(t.dtype).endswith("bool"):
            arr = rng.random(shape) > 0.5
        else:
            arr = rng.integers(1000, 2000, shape)
        return lib.tensor(np.asarray(arr)).to(getattr(lib, str(t.dtype).split(".")[-1]))
    return tuple(one(t) for t in r) if isinstance(r, tuple) else one(r)


def _torch_sample(tf, name, torch):
    """(args, kwargs, result) of the first sample call torch accepts with out=; None if none."""
    cands = [(a, {}) for a in GENERIC] if name not in OVERRIDES else OVERRIDES[name]
    for args, kw in cands:
        targs, tkw = _conv(args, torch), _conv(kw, torch)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = tf(*targs, **tkw)
        except Exception:
            continue
        if not _is_result(r, torch):
            continue
        outs = _empty_like_result(r, torch, np.random.default_rng(1))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r2 = tf(*_conv(args, torch), out=outs, **_conv(kw, torch))
        except TypeError:
            continue
        except Exception:
            continue
        return args, kw, r2 if r2 is not None else r
    return None


def _same(a, b, ember):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y, ember) for x, y in zip(a, b))
    if tuple(a.shape) != tuple(b.shape):
        return False
    x, y = a.detach().numpy(), b.detach().numpy().astype(a.detach().numpy().dtype)
    return np.allclose(x, y, equal_nan=True, rtol=1e-5, atol=1e-6)


def _identical(ret, outs):
    if isinstance(outs, tuple):
        return isinstance(ret, tuple) and len(ret) == len(outs) and all(r is o for r, o in zip(ret, outs))
    return ret is outs


def classify(name, ef, args, kw, tres, ember):
    eargs, ekw = _conv(args, ember), _conv(kw, ember)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            base = ef(*eargs, **ekw)
        except Exception as e:
            return "sample-fails", f"{type(e).__name__}: {e}"[:120]
        outs = _empty_like_result(tres, ember, np.random.default_rng(1))
        before = tuple(o.clone() for o in outs) if isinstance(outs, tuple) else outs.clone()
        try:
            ret = ef(*_conv(args, ember), out=outs, **_conv(kw, ember))
        except (TypeError, NotImplementedError) as e:
            if "out" in str(e):
                return "raises", f"{type(e).__name__}: {e}"[:120]
            return "error", f"{type(e).__name__}: {e}"[:120]
        except Exception as e:
            return "error", f"{type(e).__name__}: {e}"[:120]
    if _identical(ret, outs) and (name in RANDOM or _same(base, outs, ember)):
        return "ok", ""
    if _same(before, outs, ember):
        return "ignored", "out left untouched"
    return "wrong", "returned another object" if not _identical(ret, outs) else "values differ"


def audit():
    """[(qualified name, torch takes out, ember class, detail)] for every common public callable."""
    import torch
    import ember
    rows = []
    for tpath, epath, prefix in NAMESPACES:
        tmod, emod = _resolve(torch, tpath), _resolve(ember, epath)
        for n in _names(tmod, emod):
            tf, ef = getattr(tmod, n), getattr(emod, n)
            s = _torch_sample(tf, n, torch)
            if s is None:
                continue
            args, kw, tres = s
            cls, detail = classify(n, ef, args, kw, tres, ember)
            rows.append((prefix + n, cls, detail))
    return rows


if __name__ == "__main__":
    import collections
    rows = audit()
    for r in rows:
        print(f"{r[0]:45s} {r[1]:12s} {r[2]}")
    print(collections.Counter(r[1] for r in rows))


def _wider(r, lib):
    """An out= argument one dtype wider than the result (float32 -> float64, complex64 ->
    complex128): torch's TensorIterator ops cast into it, its other kernels refuse it."""
    def one(t):
        name = str(t.dtype).split(".")[-1]
        wide = {"float32": "float64", "complex64": "complex128"}.get(name)
        return None if wide is None else lib.zeros(tuple(t.shape), dtype=getattr(lib, wide))
    if isinstance(r, tuple):
        outs = tuple(one(t) for t in r)
        return None if any(o is None for o in outs) else outs
    return one(r)


def dtype_strictness():
    """[(qualified name, torch accepts a wider out, ember accepts it)] where the two differ."""
    import torch
    import ember
    rows = []
    for tpath, epath, prefix in NAMESPACES:
        tmod, emod = _resolve(torch, tpath), _resolve(ember, epath)
        for n in _names(tmod, emod):
            tf, ef = getattr(tmod, n), getattr(emod, n)
            s = _torch_sample(tf, n, torch)
            if s is None:
                continue
            args, kw, tres = s
            tout = _wider(tres, torch)
            if tout is None:
                continue
            res = []
            for f, lib, o in ((tf, torch, tout), (ef, ember, _wider(tres, ember))):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        f(*_conv(args, lib), out=o, **_conv(kw, lib))
                        res.append(True)
                    except Exception:
                        res.append(False)
            if res[0] != res[1]:
                rows.append((prefix + n, res[0], res[1]))
    return rows
