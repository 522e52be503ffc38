"""SyncBatchNorm, DataParallel and AdaptiveLogSoftmaxWithLoss against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch

RNG = np.random.default_rng(29)


def _copy_params(src_torch, dst_ember):
    for (n, p), (m, q) in zip(src_torch.named_parameters(), dst_ember.named_parameters()):
        assert n == m
        q.data = ember.tensor(p.detach().numpy().copy())


@needs_torch
def test_sync_batchnorm_is_local_batchnorm_and_converts_models():
    x = RNG.standard_normal((6, 3, 5)).astype(np.float32)
    e, t = ember.nn.SyncBatchNorm(3), torch.nn.SyncBatchNorm(3)
    np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(e.running_var.numpy(), t.running_var.numpy(), atol=1e-6)
    assert repr(e) == repr(t)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        e(ember.randn(3))
    net = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4),
                              ember.nn.Sequential(ember.nn.BatchNorm1d(4, affine=False)))
    net[1].eval()
    conv = ember.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert type(conv[1]) is ember.nn.SyncBatchNorm and type(conv[2][0]) is ember.nn.SyncBatchNorm
    assert conv[1].weight is net[1].weight and conv[1].running_mean is net[1].running_mean
    assert not conv[1].training and conv[2][0].weight is None
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    assert repr(torch.nn.SyncBatchNorm.convert_sync_batchnorm(tnet)) == \
        repr(ember.nn.SyncBatchNorm.convert_sync_batchnorm(ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3),
                                                                               ember.nn.BatchNorm2d(4))))


@needs_torch
def test_data_parallel_without_gpus_runs_the_module():
    lin = ember.nn.Linear(3, 2)
    dp = ember.nn.DataParallel(lin)
    x = ember.randn(4, 3)
    assert ember.equal(dp(x), lin(x)) and dp.module is lin and dp.device_ids == []
    assert repr(dp) == repr(torch.nn.DataParallel(torch.nn.Linear(3, 2)))
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    with pytest.raises(NotImplementedError, match="several GPUs"):
        ember.nn.DataParallel(lin, device_ids=[0, 1])


@needs_torch
@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax_matches_torch(head_bias):
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0, head_bias=head_bias).double()
    e = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0, head_bias=head_bias).double()
    _copy_params(t, e)
    assert repr(e) == repr(t)
    x = RNG.standard_normal((11, 8))
    y = RNG.integers(0, 20, size=11)
    y[:3] = [0, 7, 19]
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    eo, to = e(ex, ember.tensor(y)), t(tx, torch.tensor(y))
    np.testing.assert_allclose(eo.output.detach().numpy(), to.output.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(eo.loss.item(), to.loss.item(), rtol=1e-10)
    eo.loss.backward()
    to.loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (n, p), (_, q) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=n)
    np.testing.assert_allclose(e.log_prob(ember.tensor(x)).detach().numpy(), t.log_prob(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10)
    np.testing.assert_array_equal(e.predict(ember.tensor(x)).numpy(), t.predict(torch.tensor(x)).numpy())
    one = e(ember.tensor(x[0]), ember.tensor(y[0]))
    assert one.output.dim() == 0 and abs(one.output.item() - to.output[0].item()) < 1e-10


def test_adaptive_log_softmax_errors():
    with pytest.raises(ValueError, match="unique, positive integers sorted"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])
    m = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(ember.randn(2, 8), ember.tensor([1, 12]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(ember.randn(3, 8), ember.tensor([1, 2]))
