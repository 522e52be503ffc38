"""Repeated expressions merged before partitioning (aot.config.cse, ember.fx.passes.cse), and batch
norm's backward on the forward's saved statistics (as torch's): a compiled training step's
forward computes the batch statistics once instead of again for the backward's recompute."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.aot import aot_function, config as aot_config
from ember.aot.backends import _identity_compiler


def _graphs(fn, inputs):
    """(forward graph, backward graph) the aot runtime compiles for ``fn``."""
    seen = []

    def fw(gm, ex):
        seen.append(gm)
        return _identity_compiler(gm, ex)
    from ember.prims.table import decomposition_table
    f = aot_function(fn, inputs, fw_compiler=fw, bw_compiler=fw, decompositions=decomposition_table())
    out = f(*inputs)
    (out[0] if isinstance(out, tuple) else out).sum().backward()
    return seen


def _count(gm, name):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and
               getattr(getattr(n.target, "_ember_op", None), "name", "") == name)


def _rand(*shape, seed=0, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ember.tensor(a, requires_grad=grad)


@pytest.mark.parametrize("cse", [True, False])
def test_repeated_expression_computed_once(cse, monkeypatch):
    monkeypatch.setattr(aot_config, "cse", cse)
    x = _rand(5, 6)
    fw = _graphs(lambda x: (x.sin() * 2 + x.sin() * 3).sum(), [x])[0]
    assert _count(fw, "prims.sin") == (1 if cse else 2)
    xe = x.detach().requires_grad_()
    (xe.sin() * 2 + xe.sin() * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def test_outputs_computed_alike_stay_distinct_tensors():
    x = _rand(4, 3, grad=False)
    f = ember.compile(lambda x: (x.cos() + 1, x.cos() + 1))
    a, b = f(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    a.add_(5.0)
    np.testing.assert_allclose(b.numpy(), (x.cos() + 1).numpy(), rtol=1e-6)


def test_random_ops_are_not_merged():
    x = ember.ones(20000) * 1.0
    f = ember.compile(lambda x: F.dropout(x, 0.5) + F.dropout(x, 0.5))
    v = f(x).numpy()
    # two masks: 0, 2 or 4 per element; one mask merged would give only 0 and 4
    assert set(np.unique(v).tolist()) == {0.0, 2.0, 4.0}
    assert 0.4 < (v == 2.0).mean() < 0.6


def test_batch_norm_training_forward_reads_its_input_for_the_statistics_once():
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
    bn = nn.BatchNorm2d(4)

    def step(x, w, b, g, rm, rv):
        return F.batch_norm(F.conv2d(x, w, padding=1), rm, rv, g, b, training=True)
    x = _rand(2, 3, 8, 8, grad=False)
    fw = _graphs(step, [x, conv.weight, bn.bias, bn.weight, bn.running_mean, bn.running_var])[0]
    # the mean (a sum), the centred sum of squares, the running variance's sum of squares: no
    # second mean and variance for the backward (before: sum + var + running sum + the recompute's
    # sum and var), and no prims.var, whose own first pass would sum the input again
    assert _count(fw, "prims.sum") == 3 and _count(fw, "prims.var") == 0, fw.code


def _bn_case(lib, x, w, b, create_graph):
    x = lib.tensor(x, requires_grad=True)
    w = lib.tensor(w, requires_grad=True)
    b = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
    loss = (y * y.detach().cos()).sum()
    if create_graph:
        gx, = lib.autograd.grad(loss, [x], create_graph=True)
        (gx * gx).sum().backward()
    else:
        loss.backward()
    return x.grad.detach().numpy(), w.grad.detach().numpy(), b.grad.detach().numpy() if b.grad is not None else None


@pytest.mark.parametrize("create_graph", [False, True])
def test_batch_norm_gradients_match_torch(create_graph):
    torch = pytest.importorskip("torch")      # (the 3.12/3.13 jobs run without torch)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float64)
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    got = _bn_case(ember, x, w, b, create_graph)
    want = _bn_case(torch, x, w, b, create_graph)
    for g, t in zip(got, want):
        if t is not None:
            np.testing.assert_allclose(g, t, rtol=1e-9, atol=1e-10)


def test_compiled_batch_norm_training_matches_eager():
    rng = np.random.default_rng(5)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1),
                      nn.BatchNorm2d(4))
    import copy
    mc = copy.deepcopy(m)
    x = ember.tensor(rng.standard_normal((4, 3, 10, 10)).astype(np.float32))
    m(x).pow(2).mean().backward()
    ember.compile(mc)(x).pow(2).mean().backward()
    for p, q in zip(m.parameters(), mc.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=2e-4, atol=2e-5)
    for p, q in zip(m.buffers(), mc.buffers()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)


def test_constants_told_apart_by_bits_and_type():
    """-0.0 == 0.0 in Python, yet clamp(min=-0.0) and clamp(min=0.0) differ on signed zeros
    (tests/ops/test_signed_zeros.py, compiled); 1, 1.0 and True hash alike too."""
    import numpy as np
    from ember.fx.passes.cse import _key
    from ember.fx import Graph
    g = Graph()
    x = g.placeholder("x")
    nodes = [g.call_function(ember.clamp, (x, v)) for v in (0.0, -0.0, np.float32(-0.0), 0, False, float("nan"))]
    keys = [_key(n) for n in nodes]
    assert len(set(keys)) == len(keys)
