"""Every layer against torch.nn: repr, state_dict keys/shapes, forward and backward with the same weights."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from oracle import needs_torch, torch
from _helpers import compare_layer

pytestmark = needs_torch

R = np.random.default_rng(1234)


def f(*shape):
    return R.uniform(-2, 2, size=shape)


def ints(high, *shape):
    return R.integers(0, high, size=shape)


# (id, constructor, inputs, options)
LAYERS = [
    ("Linear", lambda nn: nn.Linear(5, 3), [f(4, 5)], {}),
    ("Linear-nobias-3d", lambda nn: nn.Linear(5, 3, bias=False), [f(2, 4, 5)], {}),
    ("Bilinear", lambda nn: nn.Bilinear(3, 4, 2), [f(5, 3), f(5, 4)], {}),
    ("Identity", lambda nn: nn.Identity(3, foo=1), [f(2, 3)], {}),
    ("Flatten", lambda nn: nn.Flatten(), [f(2, 3, 4)], {}),
    ("Unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [f(4, 6)], {}),
    ("Conv1d", lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), [f(2, 4, 9)], {}),
    ("Conv1d-reflect", lambda nn: nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect"), [f(2, 2, 7)], {}),
    ("Conv2d", lambda nn: nn.Conv2d(3, 4, 3, padding=1), [f(2, 3, 6, 5)], {}),
    ("Conv2d-same-dil", lambda nn: nn.Conv2d(2, 4, (3, 2), padding="same", dilation=2, bias=False),
     [f(1, 2, 7, 6)], {}),
    ("Conv2d-stride-groups", lambda nn: nn.Conv2d(4, 4, 3, stride=2, groups=4), [f(2, 4, 7, 7)], {}),
    ("ConvTranspose2d", lambda nn: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1),
     [f(2, 3, 4, 5)], {}),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(2), [f(2, 3, 6, 6)], {}),
    ("MaxPool2d-pad", lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), [f(1, 2, 7, 7)], {}),
    ("AvgPool2d", lambda nn: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), [f(2, 2, 7, 6)], {}),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((2, 3)), [f(2, 3, 7, 8)], {}),
    ("AdaptiveAvgPool2d-1", lambda nn: nn.AdaptiveAvgPool2d(1), [f(2, 3, 5, 5)], {}),
    ("BatchNorm1d-train", lambda nn: nn.BatchNorm1d(4), [f(8, 4)], {}),
    ("BatchNorm1d-3d-eval", lambda nn: nn.BatchNorm1d(4), [f(3, 4, 5)], {"train": False}),
    ("BatchNorm2d-train", lambda nn: nn.BatchNorm2d(3, momentum=None), [f(4, 3, 5, 5)], {}),
    ("BatchNorm2d-noaffine", lambda nn: nn.BatchNorm2d(3, affine=False), [f(4, 3, 2, 2)], {}),
    ("BatchNorm2d-nostats", lambda nn: nn.BatchNorm2d(3, track_running_stats=False), [f(4, 3, 2, 2)],
     {"train": False}),
    ("LayerNorm", lambda nn: nn.LayerNorm(6), [f(3, 4, 6)], {}),
    ("LayerNorm-2d-nobias", lambda nn: nn.LayerNorm([4, 6], bias=False), [f(3, 4, 6)], {}),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 6), [f(3, 6, 4)], {}),
    ("RMSNorm", lambda nn: nn.RMSNorm(6), [f(3, 6)], {}),
    ("RMSNorm-eps", lambda nn: nn.RMSNorm([2, 6], eps=1e-3), [f(3, 2, 6)], {}),
    ("Embedding", lambda nn: nn.Embedding(10, 4), [ints(10, 3, 5)], {}),
    ("Embedding-pad", lambda nn: nn.Embedding(10, 4, padding_idx=2), [np.array([[2, 3, 2], [1, 2, 9]])], {}),
    ("Dropout-eval", lambda nn: nn.Dropout(0.5), [f(4, 5)], {"train": False}),
    ("ReLU", lambda nn: nn.ReLU(), [f(4, 5)], {}),
    ("ReLU6", lambda nn: nn.ReLU6(), [f(4, 5) * 4], {}),
    ("LeakyReLU", lambda nn: nn.LeakyReLU(0.2), [f(4, 5)], {}),
    ("ELU", lambda nn: nn.ELU(0.7), [f(4, 5)], {}),
    ("SELU", lambda nn: nn.SELU(), [f(4, 5)], {}),
    ("CELU", lambda nn: nn.CELU(1.3), [f(4, 5)], {}),
    ("GELU", lambda nn: nn.GELU(), [f(4, 5)], {}),
    ("GELU-tanh", lambda nn: nn.GELU("tanh"), [f(4, 5)], {}),
    ("SiLU", lambda nn: nn.SiLU(), [f(4, 5)], {}),
    ("Mish", lambda nn: nn.Mish(), [f(4, 5)], {}),
    ("Softplus", lambda nn: nn.Softplus(beta=2.0, threshold=3.0), [f(4, 5)], {}),
    ("Hardtanh", lambda nn: nn.Hardtanh(-0.5, 1.5), [f(4, 5)], {}),
    ("Hardswish", lambda nn: nn.Hardswish(), [f(4, 5) * 2], {}),
    ("Hardsigmoid", lambda nn: nn.Hardsigmoid(), [f(4, 5) * 2], {}),
    ("Sigmoid", lambda nn: nn.Sigmoid(), [f(4, 5)], {}),
    ("Tanh", lambda nn: nn.Tanh(), [f(4, 5)], {}),
    ("Softmax", lambda nn: nn.Softmax(dim=1), [f(4, 5)], {}),
    ("LogSoftmax", lambda nn: nn.LogSoftmax(dim=-1), [f(3, 4, 5)], {}),
    ("Softmin", lambda nn: nn.Softmin(dim=0), [f(4, 5)], {}),
    ("CrossEntropyLoss", lambda nn: nn.CrossEntropyLoss(), [f(6, 4), ints(4, 6)], {}),
    ("CrossEntropyLoss-opts", lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=1,
                                                             reduction="sum"), [f(6, 4), ints(4, 6)], {}),
    ("CrossEntropyLoss-weight", lambda nn: nn.CrossEntropyLoss(weight=nn_tensor(nn, [1.0, 2.0, 0.5, 1.5])),
     [f(6, 4), ints(4, 6)], {}),
    ("CrossEntropyLoss-probs", lambda nn: nn.CrossEntropyLoss(), [f(6, 4), np.full((6, 4), 0.25)], {}),
    ("NLLLoss", lambda nn: nn.NLLLoss(reduction="none"), [f(6, 4), ints(4, 6)], {}),
    ("MSELoss", lambda nn: nn.MSELoss(), [f(3, 4), f(3, 4)], {}),
    ("L1Loss", lambda nn: nn.L1Loss(reduction="sum"), [f(3, 4), f(3, 4)], {}),
    ("SmoothL1Loss", lambda nn: nn.SmoothL1Loss(beta=0.5), [f(3, 4), f(3, 4)], {}),
    ("HuberLoss", lambda nn: nn.HuberLoss(delta=0.7), [f(3, 4), f(3, 4)], {}),
    ("BCELoss", lambda nn: nn.BCELoss(), [R.uniform(0.05, 0.95, (3, 4)), R.uniform(0, 1, (3, 4))], {}),
    ("BCEWithLogitsLoss", lambda nn: nn.BCEWithLogitsLoss(pos_weight=nn_tensor(nn, [1.0, 2.0, 3.0, 0.5])),
     [f(3, 4), R.uniform(0, 1, (3, 4))], {}),
    ("KLDivLoss", lambda nn: nn.KLDivLoss(reduction="batchmean"), [f(3, 4), R.uniform(0.1, 1, (3, 4))], {}),
    ("CosineSimilarity", lambda nn: nn.CosineSimilarity(dim=1), [f(3, 4), f(3, 4)], {}),
    ("MultiheadAttention", lambda nn: nn.MultiheadAttention(8, 2), [f(5, 3, 8), f(4, 3, 8), f(4, 3, 8)], {}),
    ("MultiheadAttention-bf-perhead", lambda nn: nn.MultiheadAttention(8, 4, batch_first=True),
     [f(3, 5, 8), f(3, 4, 8), f(3, 4, 8)], {"call": lambda m, q, k, v: m(q, k, v, average_attn_weights=False)}),
    ("MultiheadAttention-kvdim-masks", lambda nn: nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True,
                                                                        add_zero_attn=True),
     [f(5, 2, 8), f(4, 2, 3), f(4, 2, 5)],
     {"call": lambda m, q, k, v: m(q, k, v, key_padding_mask=_mask(m, [[False, False, True, False],
                                                                        [False, True, False, False]]),
                                   attn_mask=_mask(m, np.triu(np.ones((5, 4), bool), 2)))}),
    ("MultiheadAttention-floatmask-noweights", lambda nn: nn.MultiheadAttention(8, 2, bias=False),
     [f(5, 2, 8), f(5, 2, 8), f(5, 2, 8)],
     {"call": lambda m, q, k, v: m(q, k, v, need_weights=False, attn_mask=_fmask(m, 5)), "outputs": lambda o: o[0]}),
    ("MultiheadAttention-unbatched", lambda nn: nn.MultiheadAttention(8, 2), [f(5, 8), f(4, 8), f(4, 8)], {}),
    ("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), [f(5, 3, 8)], {}),
    ("TransformerEncoderLayer-prenorm-gelu-bf",
     lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", norm_first=True,
                                           batch_first=True), [f(3, 5, 8)], {}),
    ("TransformerEncoder-masked", lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
                                                                   2, norm=nn.LayerNorm(8)), [f(5, 3, 8)],
     {"call": lambda m, x: m(x, mask=_causal(m, 5), src_key_padding_mask=_mask(m, [[False] * 4 + [True],
                                                                                  [False] * 5, [False] * 5]))}),
    ("TransformerEncoder-eval", lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2),
     [f(5, 3, 8)], {"train": False, "grad": False}),
    ("RNN", lambda nn: nn.RNN(3, 4), [f(5, 2, 3)], {}),
    ("RNN-relu-2l-bi", lambda nn: nn.RNN(3, 4, 2, nonlinearity="relu", bidirectional=True), [f(5, 2, 3)], {}),
    ("LSTM", lambda nn: nn.LSTM(3, 4), [f(5, 2, 3)], {}),
    ("LSTM-2l-bi-bf-h0", lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
     [f(2, 5, 3), f(4, 2, 4), f(4, 2, 4)], {"call": lambda m, x, h, c: m(x, (h, c))}),
    ("LSTM-proj-unbatched", lambda nn: nn.LSTM(3, 4, proj_size=2, bias=False), [f(5, 3)], {}),
    ("GRU", lambda nn: nn.GRU(3, 4, num_layers=2), [f(5, 2, 3), f(2, 2, 4)], {}),
    ("GRU-bi", lambda nn: nn.GRU(3, 4, bidirectional=True, batch_first=True), [f(2, 5, 3)], {}),
    ("RNNCell", lambda nn: nn.RNNCell(3, 4), [f(2, 3), f(2, 4)], {}),
    ("LSTMCell", lambda nn: nn.LSTMCell(3, 4), [f(2, 3), f(2, 4), f(2, 4)],
     {"call": lambda m, x, h, c: m(x, (h, c))}),
    ("GRUCell", lambda nn: nn.GRUCell(3, 4, bias=False), [f(2, 3)], {}),
    ("Sequential-MLP", lambda nn: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 2)),
     [f(3, 4)], {}),
]


def nn_tensor(nn, values):
    return (torch.tensor(values) if nn is torch.nn else ember.tensor(values))


def _is_torch(m):
    return isinstance(m, torch.nn.Module)


def _mask(m, values):
    arr = np.asarray(values, dtype=bool)
    return torch.tensor(arr) if _is_torch(m) else ember.tensor(arr)


def _fmask(m, n):
    arr = np.random.default_rng(5).uniform(-1, 0, (n, n)).astype(np.float32)
    return torch.tensor(arr) if _is_torch(m) else ember.tensor(arr)


def _causal(m, n):
    arr = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
    return torch.tensor(arr) if _is_torch(m) else ember.tensor(arr)


@pytest.mark.parametrize("name,ctor,inputs,opts", LAYERS, ids=[c[0] for c in LAYERS])
def test_repr_and_state_dict(name, ctor, inputs, opts):
    em, tm = ctor(ember.nn), ctor(torch.nn)
    assert repr(em) == repr(tm)
    se, st = em.state_dict(), tm.state_dict()
    assert list(se) == list(st)
    for k in se:
        assert tuple(se[k].shape) == tuple(st[k].shape), k
        assert se[k].dtype.name == str(st[k].dtype).replace("torch.", ""), k
    assert [k for k, _ in em.named_parameters()] == [k for k, _ in tm.named_parameters()]
    assert [k for k, _ in em.named_modules()] == [k for k, _ in tm.named_modules()]


@pytest.mark.parametrize("name,ctor,inputs,opts", LAYERS, ids=[c[0] for c in LAYERS])
def test_forward_backward(name, ctor, inputs, opts):
    rtol = atol = 2e-5 if any(s in name for s in ("LSTM", "GRU", "RNN", "Transformer", "Attention")) else None
    compare_layer(ctor, inputs, rtol=rtol, atol=atol, **opts)


@pytest.mark.parametrize("name", ["Linear", "Conv2d", "LSTM", "MultiheadAttention", "TransformerEncoderLayer",
                                  "BatchNorm1d-train", "GroupNorm"])
def test_float64(name):
    _, ctor, inputs, opts = next(c for c in LAYERS if c[0] == name)
    compare_layer(ctor, inputs, dtype="float64", rtol=1e-10, atol=1e-10, **opts)


def test_batchnorm_running_stats_over_steps():
    em, tm = compare_layer(lambda nn: nn.BatchNorm2d(3, momentum=0.3), [f(4, 3, 2, 2)])
    for _ in range(3):
        x = f(5, 3, 2, 2).astype(np.float32)
        em(ember.tensor(x))
        tm(torch.tensor(x))
    np.testing.assert_allclose(em.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(em.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert em.num_batches_tracked.item() == tm.num_batches_tracked.item() == 4
    em.eval()
    tm.eval()
    x = f(2, 3, 2, 2).astype(np.float32)
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_embedding_padding_idx_gets_no_grad_and_from_pretrained():
    w = ember.randn(5, 3)
    e = ember.nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and repr(e) == "Embedding(5, 3)"
    e2 = ember.nn.Embedding.from_pretrained(w, freeze=False, padding_idx=1)
    assert e2.weight.requires_grad
    e2(ember.tensor([1, 1, 2])).sum().backward()
    assert np.all(e2.weight.grad.numpy()[1] == 0) and np.all(e2.weight.grad.numpy()[2] == 1)
    e3 = ember.nn.Embedding(6, 2, padding_idx=-1)
    assert e3.padding_idx == 5 and np.all(e3.weight.detach().numpy()[5] == 0)


def test_dropout_train_mode_statistics():
    ember.manual_seed(0)
    d = ember.nn.Dropout(0.25)
    y = d(ember.ones(20000)).numpy()
    assert np.all((y == 0) | np.isclose(y, 1 / 0.75))
    assert abs((y == 0).mean() - 0.25) < 0.02
    d.eval()
    assert np.all(d(ember.ones(10)).numpy() == 1)


def test_conv_transpose_output_size():
    em, tm = compare_layer(lambda nn: nn.ConvTranspose2d(2, 3, 3, stride=2), [f(1, 2, 4, 4)],
                           call=lambda m, x: m(x, output_size=[10, 10]))
