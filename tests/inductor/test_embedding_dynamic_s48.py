"""dynamic=True: the backward of select / slice (``_embed``: zeros with the gradient written
at a basic index) with a symbolic index -- ``x[:, -1]`` wraps to ``s0 - 1`` -- was left
undecomposed (the decomposition only took Python ints), so inductor raised "_embed is not a
prim" and the graph ran eagerly. Compared with ember eager (values and gradients) under
``strict_dynamic`` (a failed lowering raises), with no recompile across sizes."""
import numpy as np

import ember
import ember.nn as nn


def _rand(shape, seed):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _grads(params):
    return [p.grad.numpy().copy() for p in params]


def _run(f, params, inputs):
    """f compiled with dynamic=True against eager on each input: values, parameter gradients."""
    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for k, x in enumerate(inputs):
        for p in params:
            p.grad = None
        want = f(x)
        (want * _rand(tuple(want.shape), 50 + k)).sum().backward()
        gw = _grads(params)
        for p in params:
            p.grad = None
        got = c(x)
        (got * _rand(tuple(want.shape), 50 + k)).sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        for a, b in zip(_grads(params), gw):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert ember.dynamo.counters["recompiles"] == 0


def test_embedding_last_position_logits_compile_dynamic(strict_dynamic):
    ember.manual_seed(0)
    emb, lin = nn.Embedding(7, 8), nn.Linear(8, 7)

    def f(x):
        return lin(emb(x).cumsum(1))[:, -1]

    rng = np.random.default_rng(3)
    inputs = [ember.from_numpy(rng.integers(0, 7, (2, n))) for n in (3, 5, 6)]
    _run(f, [emb.weight, lin.weight, lin.bias], inputs)


def test_select_and_slice_backward_with_symbolic_index(strict_dynamic):
    w = _rand((5,), 1).requires_grad_(True)

    def f(x):
        y = (x * w).cumsum(1)
        return y[:, -1] + y[:, 1:-1].sum(1) * 2 + y[-1].sum(0) * 3 + y[:, -2]

    _run(f, [w], [_rand((3, n, 5), 10 + n) for n in (4, 6, 7)])
