"""scatter_reduce(reduce='prod') compiled through its decomposition (a one-hot block reduced by
prims.prod) against eager and torch: values, gradients, include_self both ways, integers,
dynamic sizes. It used to have no decomposition, so the compiled graph ran eagerly."""
import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.prims.table import decomposition_table


def _non_prims(gm):
    """call_function targets of ``gm`` that are not prims (getitem and size arithmetic aside)."""
    bad = []
    for n in gm.graph.nodes:
        t = n.target
        if n.op != "call_function" or getattr(t, "__name__", None) in ("getitem", "sym_size") or \
                getattr(t, "__module__", None) in ("_operator", "operator"):
            continue
        op = getattr(t, "_ember_op", None)
        if op is None or "prim" not in op.tags:
            bad.append(getattr(op, "name", str(t)))
    return bad


def _data(dtype, dim, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = (rng.uniform(0.5, 2, (4, 6)) * rng.choice([-1, 1], (4, 6))).astype(dtype)
        s = (rng.uniform(0.5, 2, (4, 5)) * rng.choice([-1, 1], (4, 5))).astype(dtype)
        x[0, 1] = 0
        s[1, 2] = 0
    else:
        x, s = rng.integers(-4, 5, (4, 6)).astype(dtype), rng.integers(-4, 5, (4, 5)).astype(dtype)
    return x, rng.integers(0, 3 if dim == 1 else 4, (3, 5)), s   # index narrower than both: repeats


def _t(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_(True) if grad else t


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype,dim", [(np.float64, 0), (np.float32, 1), (np.int64, 1), (np.int32, 0)])
def test_scatter_reduce_prod_compiles_and_matches(dtype, dim, include_self):
    torch = pytest.importorskip("torch")
    x, i, s = _data(dtype, dim, seed=dim + 2 * include_self)
    grad = np.dtype(dtype).kind == "f"

    def f(x, i, s):
        return x.scatter_reduce(dim, i, s, "prod", include_self=include_self) * 2

    ember.dynamo.reset()
    a1 = [_t(x, grad), _t(i), _t(s, grad)]
    a2 = [_t(x, grad), _t(i), _t(s, grad)]
    got = ember.compile(f, backend="inductor")(*a1)
    want = f(*a2)
    ref = torch.from_numpy(x).scatter_reduce(dim, torch.from_numpy(i), torch.from_numpy(s), "prod",
                                             include_self=include_self) * 2
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(want.detach().numpy(), ref.numpy(), rtol=rtol)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol)
    if grad:
        w = _t(np.random.default_rng(7).uniform(-1, 1, tuple(got.shape)).astype(dtype))
        (got * w).sum().backward()
        (want * w).sum().backward()
        for k in (0, 2):
            np.testing.assert_allclose(a1[k].grad.numpy(), a2[k].grad.numpy(), rtol=1e-5, atol=1e-7)
    c = ember.dynamo.counters
    assert c["compiled"] == 1 and c["eager_fallback"] == 0 and c["graph_breaks"] == 0, dict(c)


def test_scatter_reduce_prod_decomposes_to_prims_also_dynamic():
    x, i, s = _data(np.float64, 1, seed=5)

    def f(x, i, s):
        return x.scatter_reduce(1, i, s, "prod", include_self=False)
    for mode in ("real", "symbolic"):
        gm = make_fx(f, decomposition_table=decomposition_table(), tracing_mode=mode)(_t(x), _t(i), _t(s))
        assert not _non_prims(gm), _non_prims(gm)
        np.testing.assert_allclose(gm(_t(x), _t(i), _t(s)).numpy(), f(_t(x), _t(i), _t(s)).numpy(), rtol=1e-12)


def test_scatter_reduce_prod_large_block_stays_whole():
    """Beyond the one-hot block's size limit the op is left whole (its kernel runs), still right."""
    from ember.prims.decompositions import indexing as D
    rng = np.random.default_rng(6)
    x = rng.uniform(0.9, 1.1, (2, 3000))
    i = rng.integers(0, 3000, (2, 1500))
    s = rng.uniform(0.9, 1.1, (2, 1500))

    def f(x, i, s):
        return x.scatter_reduce(1, i, s, "prod")
    old = D._PROD_PAIRS_MAX
    try:
        D._PROD_PAIRS_MAX = 1 << 20
        gm = make_fx(f, decomposition_table=decomposition_table())(_t(x), _t(i), _t(s))
    finally:
        D._PROD_PAIRS_MAX = old
    assert "scatter_reduce" in _non_prims(gm), _non_prims(gm)
    np.testing.assert_allclose(gm(_t(x), _t(i), _t(s)).numpy(), f(_t(x), _t(i), _t(s)).numpy())
