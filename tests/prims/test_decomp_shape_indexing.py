"""Decompositions of the shape/view/layout and indexing ops into prims.

Each case is traced with the full decomposition table, then the graph is run on fresh random
inputs of the same shapes and compared with eager (values, dtypes, shapes), in float32 and
float64; the joint forward+backward graph of a random-weighted sum is checked the same way,
and every graph must hold prims only. Non-contiguous (transposed-layout) inputs are checked in
float64. Ops left whole on purpose (boolean masks, data-dependent shapes) are checked to stay
whole.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.fx.experimental.proxy_tensor import make_fx
from ember.prims.table import decomposition_table

from .decomp_check import check_decomp, non_prim_targets


def rn(rng, dtype, *shape):
    return ember.tensor(rng.standard_normal(shape).astype(dtype.np))


def ri(rng, lo, hi, *shape):
    return ember.tensor(rng.integers(lo, hi, shape).astype(np.int64))


def T(*shapes):
    """make(): float tensors of the given shapes."""
    return lambda rng, dt: [rn(rng, dt, *s) for s in shapes]


def _setitem_adv(a, i, v):
    b = a * 1
    b[:, i] = v
    return b


def _setitem_basic(a, v):
    b = a * 1
    b[1:, ::2] = v
    return b


def _setitem_mask(a, v):
    b = a * 1
    b[a[..., 0] > 0.3] = v[0]
    return b


CASES = {
    # views
    "view": (lambda a: a.view(12, 5), T((3, 4, 5))),
    "view_infer": (lambda a: a.view(-1, 2, 5), T((3, 4, 5))),
    "reshape_copy": (lambda a: a.transpose(0, 2).reshape(-1, 3), T((3, 4, 5))),
    "flatten": (lambda a: a.flatten(1), T((3, 4, 5))),
    "unflatten": (lambda a: a.unflatten(1, (2, 2)), T((3, 4, 5))),
    "expand": (lambda a: a.expand(2, 3, 4, 5), T((3, 1, 5))),
    "expand_as": (lambda a, b: a.expand_as(b) * b, T((4, 1), (3, 4, 5))),
    "permute": (lambda a: a.permute(2, 0, 1), T((3, 4, 5))),
    "movedim": (lambda a: a.movedim(0, -1), T((3, 4, 5))),
    "transpose": (lambda a: a.transpose(-1, 0), T((3, 4, 5))),
    "t": (lambda a: a.t(), T((3, 4))),
    "mT": (lambda a: a.mT, T((2, 3, 4))),
    "squeeze": (lambda a: a.squeeze(), T((3, 1, 5, 1))),
    "squeeze_dim": (lambda a: a.squeeze(1).squeeze(-1), T((3, 1, 5, 1))),
    "unsqueeze": (lambda a: a.unsqueeze(1).unsqueeze(-1), T((3, 5))),
    "narrow": (lambda a: a.narrow(2, 1, 3), T((3, 4, 5))),
    "select": (lambda a: a.select(1, -1), T((3, 4, 5))),
    "getitem_basic": (lambda a: a[1, 1:3, ::2], T((3, 4, 5))),
    "getitem_none_ellipsis": (lambda a: a[None, ..., 2:, None], T((3, 4, 5))),
    "getitem_full": (lambda a: a[:], T((3, 4))),
    "diagonal": (lambda a: a.diagonal(1, 0, 2), T((3, 4, 5))),
    "diagonal_neg": (lambda a: a.diagonal(-1, 2, 1), T((3, 4, 5))),
    "diagonal_empty": (lambda a: a.diagonal(7), T((3, 4))),
    "diag_embed": (lambda a: ember.diag(a, 2), T((4,))),
    "diag_take": (lambda a: ember.diag(a, -1), T((4, 5))),
    "as_strided": (lambda a: a.as_strided((3, 3), (5, 1), 2), T((4, 5))),
    "as_strided_overlap": (lambda a: a.as_strided((4, 3), (2, 1), 1), T((4, 5))),
    "split": (lambda a: a.split(2, 1), T((3, 5, 2))),
    "split_sizes": (lambda a: a.split([1, 3, 1], -2), T((3, 5, 2))),
    "chunk": (lambda a: a.chunk(3, 2), T((2, 3, 7))),
    "tensor_split": (lambda a: a.tensor_split(3, 0), T((7, 2))),
    "unbind": (lambda a: a.unbind(1), T((3, 4, 5))),
    # copies / layout
    "clone": (lambda a: a.clone(), T((3, 4))),
    "contiguous": (lambda a: a.t().contiguous(), T((3, 4))),
    "to_dtype": (lambda a: a.to(ember.float16).to(a.dtype), T((3, 4))),
    "cat": (lambda a, b: ember.cat([a, b, a], 1), T((3, 4, 2), (3, 1, 2))),
    "cat_promote": (lambda a, b: ember.cat([a, b.to(ember.float16)], 0), T((2, 3), (1, 3))),
    "cat_legacy_empty": (lambda a: ember.cat([a, ember.zeros(0, dtype=a.dtype)], 0), T((2, 3))),
    "stack": (lambda a, b: ember.stack([a, b], -1), T((3, 4), (3, 4))),
    "hstack": (lambda a, b: ember.hstack([a, b]), T((3, 4), (3, 2))),
    "flip": (lambda a: a.flip(0, 2), T((3, 4, 5))),
    "fliplr": (lambda a: a.fliplr(), T((3, 4))),
    "roll": (lambda a: a.roll((1, -2), (0, 2)), T((3, 4, 5))),
    "roll_flat": (lambda a: a.roll(7), T((3, 4))),
    "tril": (lambda a: a.tril(1), T((2, 4, 5))),
    "triu": (lambda a: a.triu(-1), T((4, 3))),
    "repeat": (lambda a: a.repeat(2, 1, 3), T((4, 5))),
    "tile": (lambda a: a.tile(2), T((3, 2))),
    # advanced indexing (integer index tensors; fresh indices on the second draw)
    "index_1": (lambda a, i: a[i], lambda r, dt: [rn(r, dt, 5, 4), ri(r, -5, 5, 6)]),
    "index_mid": (lambda a, i: a[:, i, 1:4], lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, -4, 4, 2, 3)]),
    "index_adjacent": (lambda a, i, j: a[:, i, j],
                       lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, 0, 4, 3), ri(r, -5, 5, 3)]),
    "index_separated": (lambda a, i, j: a[i, :, j],
                        lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, 0, 3, 2, 1), ri(r, 0, 5, 3)]),
    "index_put": (lambda a, i, v: a.index_put((i,), v),
                  lambda r, dt: [rn(r, dt, 5, 4), ember.tensor(r.permutation(5)[:3]), rn(r, dt, 3, 4)]),
    "index_put_bcast": (lambda a, i, v: a.index_put((None, i), v),
                        lambda r, dt: [rn(r, dt, 3, 5, 2), ember.tensor(r.permutation(5)[:2]), rn(r, dt, 2)]),
    "index_put_acc": (lambda a, i, j, v: a.index_put((i, None, j), v, accumulate=True),
                      lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, -3, 3, 6), ri(r, 0, 5, 6), rn(r, dt, 6, 4)]),
    "setitem_adv": (_setitem_adv, lambda r, dt: [rn(r, dt, 3, 5), ember.tensor(r.permutation(5)[:2]),
                                                 rn(r, dt, 3, 2)]),
    "setitem_basic": (_setitem_basic, T((3, 4), (2, 2))),
    # (boolean-mask writes of one value are a select; the value's gradient, a masked sum
    # through `index`, has a data-dependent shape and stays whole: differentiate `a` only)
    "setitem_mask_value": (_setitem_mask, lambda r, dt: [rn(r, dt, 3, 4, 2), rn(r, dt, 1)], [0]),
    "index_put_mask_acc": (lambda a, v: a.index_put((None, a[0, :, 0] > 0), v, accumulate=True),
                           lambda r, dt: [rn(r, dt, 3, 4, 2), rn(r, dt)], [0]),
    "gather": (lambda a, i: a.gather(1, i), lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, 0, 4, 3, 6, 5)]),
    "gather_neg_dim": (lambda a, i: a.gather(-1, i), lambda r, dt: [rn(r, dt, 3, 4), ri(r, 0, 4, 2, 7)]),
    "scatter": (lambda a, i, s: a.scatter(1, i, s),
                lambda r, dt: [rn(r, dt, 3, 5), ember.tensor(np.stack([r.permutation(5)[:3] for _ in range(2)])),
                               rn(r, dt, 2, 4)]),
    "scatter_value": (lambda a, i: a.scatter(1, i, 1.5), lambda r, dt: [rn(r, dt, 3, 5), ri(r, 0, 5, 3, 2)]),
    "scatter_add": (lambda a, i, s: a.scatter_add(0, i, s),
                    lambda r, dt: [rn(r, dt, 3, 5), ri(r, 0, 3, 4, 5), rn(r, dt, 4, 5)]),
    "scatter_reduce_sum": (lambda a, i, s: a.scatter_reduce(1, i, s, "sum", include_self=False),
                           lambda r, dt: [rn(r, dt, 3, 5), ri(r, 0, 5, 3, 4), rn(r, dt, 3, 4)]),
    "scatter_reduce_mean": (lambda a, i, s: a.scatter_reduce(1, i, s, "mean"),
                            lambda r, dt: [rn(r, dt, 3, 5), ri(r, 0, 5, 3, 4), rn(r, dt, 3, 4)]),
    "index_select": (lambda a, i: a.index_select(1, i), lambda r, dt: [rn(r, dt, 3, 4, 2), ri(r, 0, 4, 6)]),
    "index_add": (lambda a, i, s: a.index_add(2, i, s, alpha=2.0),
                  lambda r, dt: [rn(r, dt, 3, 4, 5), ri(r, 0, 5, 3), rn(r, dt, 3, 4, 3)]),
    "index_copy": (lambda a, i, s: a.index_copy(0, i, s),
                   lambda r, dt: [rn(r, dt, 5, 3), ember.tensor(r.permutation(5)[:2]), rn(r, dt, 2, 3)]),
    "index_fill": (lambda a, i: a.index_fill(1, i, -2.0), lambda r, dt: [rn(r, dt, 3, 5), ri(r, -5, 5, 2)]),
    "take": (lambda a, i: a.take(i), lambda r, dt: [rn(r, dt, 3, 4), ri(r, -12, 12, 2, 3)]),
    # 0-d operands (the kernels treat them as 1-element vectors)
    "zero_dim_index_ops": (lambda a, s: (a.gather(0, ember.tensor([0, 0])), a.scatter_add(0, ember.tensor(0), s),
                                         a.index_add(0, ember.tensor([0]), s.reshape(1)),
                                         a.take(ember.tensor([0, -1]))), T((), ())),
    "zero_dim_views": (lambda a: (a.squeeze(), a.unsqueeze(0), a.t(), a.expand(3, 2), a.repeat(2, 3), a.view(1, 1),
                                  a.flip(()), ember.cat([a.reshape(1), a.expand(2)])), T(())),
    "put_acc": (lambda a, i, s: a.put(i, s, accumulate=True),
                lambda r, dt: [rn(r, dt, 3, 4), ri(r, -12, 12, 5), rn(r, dt, 5)]),
}

# in-place writes: traced with functionalize=True (the in-place op is recorded as its functional op)
FUNCTIONAL = {"setitem_adv", "setitem_basic", "setitem_mask_value"}

NONCONTIG = ["reshape_copy", "permute", "diagonal", "diag_take", "split", "cat", "flip", "roll",
             "tril", "repeat", "index_mid", "index_put", "gather", "scatter_add", "index_add", "take"]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_decomposition(name, dtype):
    fn, make, *diff = CASES[name]
    check_decomp(fn, make, dtype, diff=diff[0] if diff else None, functionalize=name in FUNCTIONAL)


@pytest.mark.parametrize("name", NONCONTIG)
def test_decomposition_noncontiguous(name):
    fn, make, *_ = CASES[name]
    check_decomp(fn, make, ember.float64, noncontig=True)


FAKE = ["reshape_copy", "diagonal", "diag_embed", "as_strided", "roll", "tril", "repeat", "index_adjacent",
        "index_put_acc", "scatter_reduce_mean", "take", "setitem_adv"]


@pytest.mark.parametrize("name", FAKE)
def test_decomposition_traced_on_fake_tensors(name):
    """Traced on fake tensors (metadata only), the graph is the same prims program: right on real data."""
    fn, make, *diff = CASES[name]
    check_decomp(fn, make, ember.float32, diff=diff[0] if diff else None, functionalize=name in FUNCTIONAL,
                 tracing_mode="fake")


@pytest.mark.parametrize("fn", [lambda a, m: a[m], lambda a, m: a.masked_select(m), lambda a, m: m.nonzero()],
                         ids=["bool_index", "masked_select", "nonzero"])
def test_data_dependent_ops_stay_whole(fn):
    """Boolean masks give data-dependent shapes: their ops are recorded whole, and still right."""
    rng = np.random.default_rng(2)
    a = rn(rng, ember.float64, 4, 3)
    m = ember.tensor(rng.random((4, 3)) > 0.5)
    gm = make_fx(fn, decomposition_table=decomposition_table())(a, m)
    assert non_prim_targets(gm)
    np.testing.assert_allclose(gm(a, m).numpy(), fn(a, m).numpy())


def test_int_and_bool_inputs():
    """Shape ops on integer and bool tensors keep their dtype."""
    rng = np.random.default_rng(3)
    x = ri(rng, -9, 9, 3, 4)
    b = ember.tensor(rng.random((3, 4)) > 0.5)
    f = lambda x, b: (x.t().reshape(-1), ember.cat([x, x]), b.flip(0), x.roll(1, 1), b.tril(), x[1:, ::2],
                      ember.stack([b, b]), x.repeat(2, 1), x.diagonal())  # noqa: E731
    gm = make_fx(f, decomposition_table=decomposition_table())(x, b)
    assert non_prim_targets(gm) == []
    x2, b2 = ri(rng, -9, 9, 3, 4), ember.tensor(rng.random((3, 4)) > 0.5)
    for got, ref in zip(gm(x2, b2), f(x2, b2)):
        assert got.dtype is ref.dtype
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_layout_decompositions_compile_with_inductor():
    """The prims of roll/diagonal/advanced indexing (flattening reshapes of permuted tensors, strided
    slices, index arithmetic) lower and compile with the CPU inductor, and agree with eager."""
    pytest.importorskip("ember.inductor.compile_fx")
    from ember.inductor.compile_fx import compile_graph
    rng = np.random.default_rng(8)

    def f(a, i):
        return a.roll(7).diagonal(1, 0, 2) * 2, a[:, i].flip(0), ember.diag(a[0, 0])

    a, i = rn(rng, ember.float32, 3, 4, 5), ri(rng, -4, 4, 3)
    gm = make_fx(f, decomposition_table=decomposition_table())(a, i)
    assert non_prim_targets(gm) == []
    try:
        compiled = compile_graph(gm, [a, i])
    except Exception as e:  # noqa: BLE001 - no C++ compiler is a skip, a lowering error is not
        if "compiler" in str(e).lower() or isinstance(e, FileNotFoundError):
            pytest.skip(f"no C++ toolchain: {e}")
        raise
    a2, i2 = rn(rng, ember.float32, 3, 4, 5), ri(rng, -4, 4, 3)
    for got, ref in zip(compiled([a2, i2]), f(a2, i2)):
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6)
