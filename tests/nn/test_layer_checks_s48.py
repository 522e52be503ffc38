"""Session 48: layers against PyTorch -- argument checks, EmbeddingBag(sparse=True), PReLU on 0-d.

Each test was a mismatch: InstanceNorm ran on a wrong channel count (torch: an error with affine,
a warning without) and on one spatial element (torch: "more than 1 spatial element"); GroupNorm's,
RMSNorm's, LocalResponseNorm's and max_unpool's messages differed; PReLU didn't check its channel
count and gave a (1,) result for a 0-d input; nn.Bilinear (an einsum) checked nothing; EmbeddingBag
refused sparse=True (torch: sparse COO gradient without the padding entries) and checked its
arguments in another order and wording."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from _util_s48 import close, same_error, torch_or_skip

import ember


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", ["instance_affine_channels", "instance_spatial_1", "instance_spatial_1_tracked",
                                  "instance_unbatched_spatial_1", "group_ctor", "rms_shape", "lrn_2d",
                                  "prelu_channels", "prelu_1d", "bilinear_batch", "bilinear_rank", "bilinear_bias",
                                  "unpool_size"])
def test_layer_argument_checks(case):
    def fn(lib):
        nn = lib.nn
        if case == "instance_affine_channels":
            return nn.InstanceNorm1d(4, affine=True)(lib.tensor(_rand(2, 3, 5)))
        if case == "instance_spatial_1":
            return nn.InstanceNorm1d(3)(lib.tensor(_rand(2, 3, 1)))
        if case == "instance_spatial_1_tracked":
            return nn.InstanceNorm2d(3, track_running_stats=True)(lib.tensor(_rand(2, 3, 1, 1)))
        if case == "instance_unbatched_spatial_1":
            return lib.nn.functional.instance_norm(lib.tensor(_rand(1, 3, 1)))
        if case == "group_ctor":
            return nn.GroupNorm(4, 6)
        if case == "rms_shape":
            return nn.RMSNorm([3, 5])(lib.tensor(_rand(2, 4, 5)))
        if case == "lrn_2d":
            return nn.LocalResponseNorm(2)(lib.tensor(_rand(3, 4)))
        if case == "prelu_channels":
            return nn.PReLU(3)(lib.tensor(_rand(2, 4)))
        if case == "prelu_1d":
            return lib.nn.functional.prelu(lib.tensor(_rand(5)), lib.tensor(_rand(3)))
        if case == "bilinear_batch":
            return nn.Bilinear(3, 4, 5)(lib.tensor(_rand(2, 3)), lib.tensor(_rand(3, 4)))
        if case == "bilinear_rank":
            return lib.nn.functional.bilinear(lib.tensor(_rand(2, 3)), lib.tensor(_rand(2, 1, 4)),
                                              lib.tensor(_rand(5, 3, 4)))
        if case == "bilinear_bias":
            return lib.nn.functional.bilinear(lib.tensor(_rand(2, 3)), lib.tensor(_rand(2, 4)),
                                              lib.tensor(_rand(5, 3, 4)), lib.tensor(_rand(6)))
        y, i = lib.nn.functional.max_pool2d(lib.tensor(_rand(1, 1, 4, 4)), 2, return_indices=True)
        return lib.nn.functional.max_unpool2d(y, i, 2, output_size=(9, 9))
    same_error(fn)


def test_instance_norm_channel_mismatch_without_affine_warns():
    torch_or_skip()
    m = ember.nn.InstanceNorm1d(4)
    x = _rand(2, 3, 5)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = m(ember.tensor(x))
    assert any("does not match num_features" in str(r.message) for r in w)
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.InstanceNorm1d(4)(torch.tensor(x))
    close(out, want, rtol=1e-5, atol=1e-5)


def test_prelu_zero_dim_input():
    torch = torch_or_skip()
    outs = []
    for lib in (torch, ember):
        m = lib.nn.PReLU(init=0.3)
        x = lib.tensor(-1.5, requires_grad=True)
        y = m(x)
        y.backward()
        outs.append((y, x.grad, m.weight.grad))
    for a, b in zip(*outs):
        close(b, a)


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_module_values(bias):
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm = torch.nn.Bilinear(3, 4, 5, bias=bias)
    em = ember.nn.Bilinear(3, 4, 5, bias=bias)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    a, b = _rand(2, 6, 3), _rand(2, 6, 4, seed=1)
    grads = []
    for lib, m in ((torch, tm), (ember, em)):
        x1, x2 = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        y = m(x1, x2)
        y.pow(2).sum().backward()
        grads.append((y, x1.grad, x2.grad, m.weight.grad))
    for t, e in zip(*grads):
        close(e, t, rtol=1e-4, atol=1e-5)


def _bag_inputs(lib):
    return lib.tensor(np.array([1, 2, 4, 5, 4, 3, 2, 9, 2])), lib.tensor(np.array([0, 2, 2, 5]))


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 2, -8])
def test_embedding_bag_sparse_gradient(mode, padding_idx):
    torch = torch_or_skip()
    w = _rand(10, 3)
    g = _rand(4, 3, seed=1)
    res = []
    for lib in (torch, ember):
        m = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w), freeze=False, mode=mode, sparse=True,
                                                padding_idx=padding_idx)
        inp, off = _bag_inputs(lib)
        out = m(inp, off)
        out.backward(lib.tensor(g))
        grad = m.weight.grad
        assert grad.is_sparse
        res.append((out, grad, grad._indices()))
    (to, tg, ti), (eo, eg, ei) = res
    close(eo, to)
    close(eg, tg)
    # the padding entries are left out of the gradient's indices, as torch's
    assert ei.numpy().tolist() == ti.numpy().tolist()


@pytest.mark.parametrize("case", ["max_sparse", "max_freq", "mode", "psw_shape", "offsets_dim",
                                  "offsets_none", "weight_dim", "psw_mode"])
def test_embedding_bag_argument_checks(case):
    def fn(lib):
        F = lib.nn.functional
        w = lib.tensor(_rand(10, 3))
        inp, off = _bag_inputs(lib)
        if case == "max_sparse":
            return lib.nn.EmbeddingBag(10, 3, mode="max", sparse=True)(inp, off)
        if case == "max_freq":
            return F.embedding_bag(inp, w, off, mode="max", scale_grad_by_freq=True)
        if case == "mode":
            return F.embedding_bag(inp, w, off, mode="median")
        if case == "psw_shape":
            return F.embedding_bag(inp, w, off, mode="sum", per_sample_weights=lib.tensor(_rand(4)))
        if case == "offsets_dim":
            return F.embedding_bag(inp, w, off.reshape(2, 2))
        if case == "offsets_none":
            return F.embedding_bag(inp, w)
        if case == "weight_dim":
            return F.embedding_bag(inp, lib.tensor(_rand(10)), off)
        return F.embedding_bag(inp.reshape(3, 3), w, mode="mean", per_sample_weights=lib.tensor(_rand(4)))
    same_error(fn)
