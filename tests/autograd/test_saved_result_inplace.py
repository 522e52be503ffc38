"""An op that saves its outputs for backward but only reads some of them (batch norm in eval
mode: the statistics; max pooling and max/min/sort/topk/kthvalue/median/mode/cummax along a
dim: the indices) keeps working when the output it does not read is modified in place,
as torch's -- ``Conv2d -> BatchNorm2d -> ReLU(inplace=True)`` in eval mode, ``MaxPool2d`` ->
``relu_``. Reading the whole saved result failed the version check."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "batch_norm_eval": lambda ns, x: ns.relu_(ns.nn.functional.batch_norm(
        x * 1, ns.zeros(4) + 0.5, ns.ones(4) * 2, ns.linspace(0.5, 1.5, 4), None, False)),
    "max_pool2d": lambda ns, x: ns.relu_(ns.nn.functional.max_pool2d(x * 1, 2)),
    "max_pool2d_indices": lambda ns, x: ns.relu_(ns.nn.functional.max_pool2d(x * 1, 2, return_indices=True)[0]),
    "max_dim": lambda ns, x: (x * 1).max(1)[0].relu_(),
    "min_dim": lambda ns, x: (x * 1).min(1)[0].relu_(),
    "sort": lambda ns, x: (x * 1).sort(1)[0].relu_(),
    "topk": lambda ns, x: (x * 1).topk(2, 1)[0].relu_(),
    "kthvalue": lambda ns, x: (x * 1).kthvalue(2, 1)[0].relu_(),
    "median_dim": lambda ns, x: (x * 1).median(1)[0].relu_(),
    "cummax": lambda ns, x: (x * 1).cummax(1)[0].relu_(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inplace_on_unread_saved_output_matches_torch(name):
    x = np.random.default_rng(5).standard_normal((2, 4, 4, 4)).astype(np.float32)
    grads = []
    for ns in (torch, ember):
        t = ns.tensor(x).requires_grad_()
        out = CASES[name](ns, t)
        (out * ns.tensor(np.arange(out.numel(), dtype=np.float32).reshape(tuple(out.shape)))).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_eval_conv_bn_relu_inplace_backward_compiled():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.BatchNorm2d(4),
                            ember.nn.ReLU(inplace=True), ember.nn.MaxPool2d(2), ember.nn.ReLU(inplace=True)).eval()
    x = ember.tensor(np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32))
    m(x).sum().backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ember.compile(m)(x).sum().backward()
    for r, p in zip(ref, m.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), r.numpy(), rtol=1e-4, atol=1e-5)


def test_saved_output_that_is_read_still_checks_versions():
    x = ember.randn(5, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
