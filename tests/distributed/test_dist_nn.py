"""ember.distributed.nn.functional (differentiable collectives) on 3 forked ranks, compared
value for value and gradient for gradient with torch.distributed.nn on a torch gloo group
running the same script (one spawned group per library for the whole file)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from ._launch import run_ranks

WS = 3


def _script(rank, ws, libname):
    """Every differentiable collective forward and backward; returns {name: numpy array}."""
    import importlib
    lib = importlib.import_module(libname)
    importlib.import_module(libname + ".distributed.nn")
    dist = lib.distributed
    F = dist.nn.functional
    rng = np.random.default_rng(500 + rank)
    out = {}

    def leaf(*shape):
        return lib.tensor(rng.standard_normal(shape), requires_grad=True)

    def weights(*shape):
        return lib.tensor(rng.standard_normal(shape))

    def np_(t):
        return t.detach().numpy().copy()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # all_reduce: SUM and MAX (backward: all_reduce of the gradients with the same op)
        for op in ("SUM", "MAX"):
            x, w = leaf(2, 3), weights(2, 3)
            y = F.all_reduce(x, op=getattr(dist.ReduceOp, op))
            (y * w).sum().backward()
            out[f"all_reduce_{op}"], out[f"all_reduce_{op}_grad"] = np_(y), np_(x.grad)
            out[f"all_reduce_{op}_input_untouched"] = np_(x)
        # all_gather (backward: reduce-scatter)
        x = leaf(4)
        ys = F.all_gather(x)
        sum((y * weights(4)).sum() for y in ys).backward()
        out["all_gather"] = np.stack([np_(y) for y in ys])
        out["all_gather_grad"] = np_(x.grad)
        # reduce_scatter (backward: all_gather)
        ins = [leaf(2, 2) for _ in range(ws)]
        y = F.reduce_scatter(lib.zeros(2, 2, dtype=lib.float64), ins)
        (y * weights(2, 2)).sum().backward()
        out["reduce_scatter"] = np_(y)
        out["reduce_scatter_grads"] = np.stack([np_(t.grad) for t in ins])
        # broadcast from rank 1 (backward: sum onto the source, zeros elsewhere)
        x = leaf(3)
        y = F.broadcast(x, src=1)
        (y * weights(3)).sum().backward()
        out["broadcast"], out["broadcast_grad"] = np_(y), np_(x.grad)
        # reduce onto rank 2 (backward: broadcast of rank 2's gradient)
        x = leaf(3)
        y = F.reduce(x, dst=2)
        (y * weights(3)).sum().backward()
        out["reduce"], out["reduce_grad"] = np_(y), np_(x.grad)
        # gather onto rank 0 (backward: scatter)
        x = leaf(2)
        ys = F.gather(x, dst=0)
        sum((y * weights(2)).sum() for y in ys).backward()
        out["gather"] = np.stack([np_(y) for y in ys])
        out["gather_grad"] = np_(x.grad)
        # scatter from rank 1 (backward: gather onto the source)
        xs = [leaf(2) for _ in range(ws)]
        y = F.scatter(xs, src=1)
        (y * weights(2)).sum().backward()
        out["scatter"] = np_(y)
        out["scatter_grads"] = np.stack([np_(t.grad) for t in xs])
        # all_to_all (backward: all_to_all the other way; torch's gloo needs equal shapes)
        xs = [leaf(2, 2) for g in range(ws)]
        outs = [lib.zeros(2, 2, dtype=lib.float64) for _ in range(ws)]
        ys = F.all_to_all(outs, xs)
        sum((y * weights(*y.shape)).sum() for y in ys).backward()
        out["all_to_all"] = np.concatenate([np_(y) for y in ys])
        out["all_to_all_grads"] = np.concatenate([np_(t.grad) for t in xs])
        # all_to_all_single with uneven splits (backward: splits swapped)
        in_splits = [(rank + g) % 3 + 1 for g in range(ws)]
        out_splits = [(g + rank) % 3 + 1 for g in range(ws)]
        x = leaf(sum(in_splits), 2)
        y = F.all_to_all_single(lib.zeros(sum(out_splits), 2, dtype=lib.float64), x, out_splits, in_splits)
        (y * weights(*y.shape)).sum().backward()
        out["all_to_all_single"], out["all_to_all_single_grad"] = np_(y), np_(x.grad)
        # a chain: all_gather -> local math -> all_reduce, then backward through both
        x = leaf(3)
        z = F.all_reduce(lib.stack(F.all_gather(x * x)).sum(0) * (rank + 1))
        (z * weights(3)).sum().backward()
        out["chain"], out["chain_grad"] = np_(z), np_(x.grad)
    out["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    out.update(_funcol(lib, rank, ws, libname, rng))
    if libname == "ember":
        out["ember_only"] = _ember_only(rank, ws)
    return out


def _funcol(lib, rank, ws, libname, rng):
    """torch.distributed._functional_collectives: values, gradients and the async path."""
    import importlib
    fc = importlib.import_module(libname + ".distributed._functional_collectives")
    dist = lib.distributed
    world = list(range(ws))
    out = {}

    def leaf(*shape):
        return lib.tensor(rng.standard_normal(shape), requires_grad=True)

    def np_(t):
        return fc.wait_tensor(t).detach().numpy().copy()
    x, w = leaf(2, 3), lib.tensor(rng.standard_normal((2, 3)))
    y = fc.all_reduce(x, "sum", dist.group.WORLD)
    (y * w).sum().backward()
    out["fc_all_reduce"], out["fc_all_reduce_grad"] = np_(y), x.grad.numpy().copy()
    for dim in (0, 1):
        x = leaf(2, 3)
        y = fc.all_gather_single(x, dim, world)
        (y * lib.tensor(rng.standard_normal(tuple(y.shape)))).sum().backward()
        out[f"fc_all_gather_{dim}"], out[f"fc_all_gather_{dim}_grad"] = np_(y), x.grad.numpy().copy()
        x = leaf(ws * 2, ws) if dim == 0 else leaf(2, ws * 2)
        y = fc.reduce_scatter_single(x, "sum", dim, dist.group.WORLD)
        (y * lib.tensor(rng.standard_normal(tuple(y.shape)))).sum().backward()
        out[f"fc_reduce_scatter_{dim}"], out[f"fc_reduce_scatter_{dim}_grad"] = np_(y), x.grad.numpy().copy()
    ins = [(rank + g) % 2 + 1 for g in range(ws)]
    outs = [(g + rank) % 2 + 1 for g in range(ws)]
    x = leaf(sum(ins), 2)
    y = fc.all_to_all_single(x, outs, ins, dist.group.WORLD)
    (y * lib.tensor(rng.standard_normal(tuple(y.shape)))).sum().backward()
    out["fc_all_to_all"], out["fc_all_to_all_grad"] = np_(y), x.grad.numpy().copy()
    # the asynchronous path: no gradient needed; used through ops, .wait() and wait_tensor
    a = lib.tensor(rng.standard_normal((3,)))
    r1 = fc.all_reduce(a, "max", world)
    r2 = fc.broadcast(a, 1, dist.group.WORLD)
    r3 = fc.permute_tensor(a, [(g + 1) % ws for g in range(ws)], dist.group.WORLD)
    r4 = fc.all_reduce_coalesced([a, a * 2], "sum", world)
    out["fc_async"] = np.stack([(r1 + 0).numpy(), r2.wait().numpy(), np_(r3), np_(r4[0]), np_(r4[1])])
    out["fc_async_input_untouched"] = a.numpy().copy()
    out["types_fc_async"] = [type(r).__name__ for r in (r1, r2, r3, r4[0])] + [type(r1 + 0).__name__]
    return out


def _ember_only(rank, ws):
    """What torch's gloo cannot do or does differently: _all_gather_base's backward,
    subgroups, errors."""
    import ember
    import ember.distributed as dist
    from ember.distributed.nn import functional as F
    got = {}
    x = ember.tensor([float(rank), 2.0 * rank], requires_grad=True)
    out = ember.zeros(2 * ws, dtype=ember.float32)
    y = F._all_gather_base(out, x)
    (y * ember.arange(2 * ws, dtype=ember.float32)).sum().backward()
    got["agb"], got["agb_grad"] = y.detach().numpy().copy(), x.grad.numpy().copy()
    import ember.distributed._functional_collectives as fc

    def err(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
    x = ember.ones(ws, 2)
    got["fc_errors"] = [
        err(lambda: fc.all_reduce(x, "mean", [0, 1, 2])),
        err(lambda: fc.all_reduce(x, "sum", "default_pg")),
        err(lambda: fc.all_reduce(x, "sum", 7)),
        err(lambda: fc.all_reduce(x, "sum", [0, 1])),
        err(lambda: fc.reduce_scatter_single(ember.ones(ws + 1, 2), "sum", 0, [0, 1, 2])),
        err(lambda: fc.all_to_all_single(x, [1, 1, 1], None, [0, 1, 2])),
        err(lambda: fc.all_reduce(ember.ones(2, requires_grad=True), "max", [0, 1, 2]).sum().backward()),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fc.all_gather_tensor(ember.tensor([float(rank)]), 0, [0, 1, 2])
    got["fc_deprecated"] = (y.tolist(), [str(w.message) for w in caught])
    z = fc.all_reduce(ember.ones(2), "sum", [0, 1, 2])
    got["fc_raw"] = (type(z).__name__, z._data.tolist(), z.completed())     # internal reads wait too
    sub = dist.new_group([0, 2])
    if rank in (0, 2):
        x = ember.tensor([rank + 1.0], requires_grad=True)
        y = F.all_reduce(x, group=sub)
        (y * (rank + 1)).sum().backward()
        got["sub"] = (y.item(), x.grad.item())
    else:
        try:
            F.all_reduce(ember.ones(1), group=sub)
        except RuntimeError as e:
            got["sub_err"] = str(e)
    return got


NAMES = ["fc_all_reduce", "fc_all_gather_0", "fc_all_gather_1", "fc_reduce_scatter_0", "fc_reduce_scatter_1",
         "fc_all_to_all", "fc_async", "all_reduce_SUM", "all_reduce_MAX", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather",
         "scatter", "all_to_all", "all_to_all_single", "chain"]


def test_differentiable_collectives_on_3_ranks():
    """One spawned ember group and one torch group for every check (xdist would otherwise
    spawn them again on each worker that picks a test of this file)."""
    ember_out = run_ranks(_script, WS, "ember", timeout=60)
    _check_ember_only(ember_out)
    torch = pytest.importorskip("torch")   # noqa: F841 - the oracle
    torch_out = run_ranks(_script, WS, "torch", backend="torch", timeout=60)
    for name in NAMES:
        _check_matches_torch(ember_out, torch_out, name)
    _check_deprecation_warnings(ember_out, torch_out)
    for r in range(WS):
        assert ember_out[r]["types_fc_async"] == torch_out[r]["types_fc_async"]


def _check_matches_torch(ember_out, torch_out, name):
    for r in range(WS):
        keys = [k for k in torch_out[r] if k == name or k.startswith(name + "_")]
        assert keys, name
        for k in keys:
            if k == "reduce" and r != 2:
                continue        # non-destination contents are unspecified (gloo leaves partial sums)
            np.testing.assert_allclose(ember_out[r][k], torch_out[r][k], rtol=1e-12, atol=1e-12,
                                       err_msg=f"rank {r}: {k}")


def _check_deprecation_warnings(ember_out, torch_out):
    for r in range(WS):
        assert ember_out[r]["warnings"] == torch_out[r]["warnings"]
        assert len(ember_out[r]["warnings"]) == 5


def _check_ember_only(ember_out):
    # y = concat(x_0..x_2) with x_r = [r, 2r]; d(sum y*arange)/dx_r summed over the 3 ranks
    for r in range(WS):
        got = ember_out[r]["ember_only"]
        np.testing.assert_array_equal(got["agb"], [0, 0, 1, 2, 2, 4])
        np.testing.assert_array_equal(got["agb_grad"], [WS * 2 * r, WS * (2 * r + 1)])
    errs = ember_out[0]["ember_only"]["fc_errors"]
    assert errs[0][0] == "ValueError" and "'mean'" in errs[0][1]
    assert errs[1][0] == "NotImplementedError"
    assert errs[2] == ("ValueError", "Invalid type for group, must be one of List, Processgroup, DeviceMesh or "
                                     "(DeviceMesh, int).")
    assert errs[3][0] == "ValueError" and "new_group([0, 1])" in errs[3][1]
    assert errs[4] == ("AssertionError", "input dimension 0 (4 must be a multiple of group_size 3)")
    assert errs[5] == ("AssertionError", "output_split_sizes and input_split_sizes must either be specified "
                                         "together or both set to None")
    assert errs[6] == ("RuntimeError", "all_reduce backward only supports 'sum' reduction, got 'max'")
    assert ember_out[1]["ember_only"]["fc_deprecated"] == (
        [0.0, 1.0, 2.0], ["`torch.distributed._functional_collectives.all_gather_tensor` is deprecated. Please use "
                          "`torch.distributed._functional_collectives.all_gather_single` instead."])
    assert ember_out[2]["ember_only"]["fc_raw"] == ("AsyncCollectiveTensor", [3.0, 3.0], True)
    # group {0, 2}: y = 1 + 3 = 4 on both; grad of x_r = sum over members of (member + 1) = 1 + 3
    assert ember_out[0]["ember_only"]["sub"] == (4.0, 4.0)
    assert ember_out[2]["ember_only"]["sub"] == (4.0, 4.0)
    assert "not a member of the group" in ember_out[1]["ember_only"]["sub_err"]
