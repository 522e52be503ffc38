"""Families of one-op programs: each ember function / Tensor method / nn.functional / module
captured into one graph and equal to eager on fresh inputs."""
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

from ._util import check


def pos34():
    return (ember.randn(3, 4).abs() + 0.5,)


def any34():
    return (ember.randn(3, 4),)


UNARY = ["abs", "neg", "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "floor", "ceil",
         "round", "sign", "reciprocal", "rsqrt", "erf", "log1p", "expm1", "square", "exp2", "log2", "log10",
         "trunc", "frac", "atan", "asinh", "sinh", "cosh", "logical_not", "isnan", "isfinite", "clone",
         "contiguous", "float", "double", "half", "long", "bool"]
UNARY = [n for n in UNARY if hasattr(ember.Tensor, n)]


@pytest.mark.parametrize("name", UNARY)
def test_tensor_method_unary(name):
    check(lambda x: getattr(x, name)() * 1, pos34)


@pytest.mark.parametrize("name", [n for n in UNARY if callable(getattr(ember, n, None))
                                  and not isinstance(getattr(ember, n), ember.dtype)])
def test_ember_function_unary(name):
    fn = getattr(ember, name)
    check(lambda x: fn(x), pos34)


BINARY_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "and": lambda a, b: (a > 1) & (b > 1), "or": lambda a, b: (a > 1) | (b > 1), "xor": lambda a, b: (a > 1) ^ (b > 1),
    "scalar_left": lambda a, b: 2.5 - a * 3 / b, "iadd": lambda a, b: _iadd(a.clone(), b),
    "maximum": lambda a, b: ember.maximum(a, b), "minimum": lambda a, b: ember.minimum(a, b),
    "atan2": lambda a, b: ember.atan2(a, b), "where": lambda a, b: ember.where(a > b, a, b),
    "lerp": lambda a, b: ember.lerp(a, b, 0.3), "addcmul": lambda a, b: ember.addcmul(a, a, b, value=0.5),
}


def _iadd(a, b):
    a += b
    a *= 2
    a -= b
    return a


@pytest.mark.parametrize("name", sorted(BINARY_OPS))
def test_binary(name):
    fn = BINARY_OPS[name]
    check(lambda a, b: fn(a, b), lambda: (ember.randn(3, 4).abs() + 0.5, ember.randn(3, 4).abs() + 0.5))


REDUCTIONS = {
    "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(1, keepdim=True), "mean": lambda x: x.mean(0),
    "prod": lambda x: x.prod(1), "amax": lambda x: x.amax(1), "amin": lambda x: x.amin(0),
    "max_dim": lambda x: x.max(dim=1), "min_dim": lambda x: x.min(1)[1], "max_all": lambda x: x.max(),
    "argmax": lambda x: x.argmax(1), "argmin": lambda x: x.argmin(), "var": lambda x: x.var(1),
    "std": lambda x: x.std(0, unbiased=False) if True else None, "norm": lambda x: x.norm(),
    "logsumexp": lambda x: x.logsumexp(1), "cumsum": lambda x: x.cumsum(1), "cumprod": lambda x: x.cumprod(0),
    "all": lambda x: (x > -10).all(), "any": lambda x: (x > 0).any(1), "softmax": lambda x: x.softmax(-1),
    "topk": lambda x: x.topk(2, dim=1), "sort": lambda x: x.sort(dim=1)[0], "count": lambda x: (x > 0).sum(),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction(name):
    fn = REDUCTIONS[name]
    check(lambda x: fn(x), any34)


SHAPE = {
    "view": lambda x: x.view(2, 6), "reshape": lambda x: x.reshape(4, -1), "permute": lambda x: x.permute(1, 0),
    "transpose": lambda x: x.transpose(0, 1).contiguous(), "flatten": lambda x: x.flatten(),
    "unsqueeze": lambda x: x.unsqueeze(-1), "squeeze": lambda x: x.unsqueeze(0).squeeze(0),
    "expand": lambda x: x[:, :1].expand(3, 4), "repeat": lambda x: x.repeat(2, 1), "flip": lambda x: x.flip(0),
    "roll": lambda x: ember.roll(x, 1, 0), "narrow": lambda x: x.narrow(1, 1, 2), "select": lambda x: x.select(0, 1),
    "tril": lambda x: x.tril(), "triu": lambda x: ember.triu(x, 1), "cat": lambda x: ember.cat([x, x], 1),
    "stack": lambda x: ember.stack([x, x]), "split": lambda x: x.split([1, 3], dim=1),
    "chunk": lambda x: x.chunk(2), "unbind": lambda x: x.unbind(1), "gather":
        lambda x: x.gather(1, ember.zeros(3, 2, dtype=ember.int64)),
    "index_select": lambda x: x.index_select(1, ember.tensor([0, 2])), "masked_fill":
        lambda x: x.masked_fill(x > 0, 0.0), "clamp": lambda x: x.clamp(-0.5, 0.5), "t": lambda x: x.t(),
    "getitem_mix": lambda x: x[1:, None, ::2], "setitem_slice": lambda x: _setitem(x.clone()),
    "movedim": lambda x: ember.movedim(x.unsqueeze(0), 0, 2), "einsum": lambda x: ember.einsum("ij,kj->ik", x, x),
}


def _setitem(y):
    y[1:, :2] = 0.0
    y[0] = y[2] * 2
    return y


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_shape_op(name):
    fn = SHAPE[name]
    check(lambda x: fn(x), any34)


FUNCTIONAL = {
    "relu": lambda x: F.relu(x), "gelu": lambda x: F.gelu(x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": lambda x: F.silu(x), "elu": lambda x: F.elu(x), "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "softplus": lambda x: F.softplus(x), "softmax": lambda x: F.softmax(x, dim=1),
    "log_softmax": lambda x: F.log_softmax(x, dim=0), "hardtanh": lambda x: F.hardtanh(x),
    "layer_norm": lambda x: F.layer_norm(x, (4,)), "normalize": lambda x: F.normalize(x, dim=1),
    "dropout_eval": lambda x: F.dropout(x, 0.5, training=False), "linear": lambda x: F.linear(x, x),
    "mse": lambda x: F.mse_loss(x, x * 0.5), "l1": lambda x: F.l1_loss(x, x.flip(0)),
    "smooth_l1": lambda x: F.smooth_l1_loss(x, x * 2), "cross_entropy":
        lambda x: F.cross_entropy(x, ember.tensor([0, 3, 1])),
    "nll": lambda x: F.nll_loss(F.log_softmax(x, 1), ember.tensor([1, 1, 2])),
    "bce_logits": lambda x: F.binary_cross_entropy_with_logits(x, (x > 0).float()),
    "pad": lambda x: F.pad(x, (1, 2)), "tanh": lambda x: ember.tanh(x), "sigmoid": lambda x: F.sigmoid(x),
    "mish": lambda x: F.mish(x), "hardswish": lambda x: F.hardswish(x),
    "logsigmoid": lambda x: F.logsigmoid(x), "cosine_similarity": lambda x: F.cosine_similarity(x, x.flip(0)),
    "one_hot": lambda x: F.one_hot(x.argmax(1), 4),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional(name):
    fn = FUNCTIONAL[name]
    check(lambda x: fn(x), any34)


def image():
    return (ember.randn(2, 3, 8, 8),)


MODULES = {
    "linear": (lambda: nn.Linear(4, 5), any34),
    "linear_nobias": (lambda: nn.Linear(4, 5, bias=False), any34),
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1), lambda: (ember.randn(2, 3, 10),)),
    "conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2), image),
    "batchnorm2d_train": (lambda: nn.BatchNorm2d(3), image),
    "batchnorm2d_eval": (lambda: nn.BatchNorm2d(3).eval(), image),
    "batchnorm1d": (lambda: nn.BatchNorm1d(4), any34),
    "layernorm": (lambda: nn.LayerNorm(4), any34),
    "groupnorm": (lambda: nn.GroupNorm(1, 3), image),
    "maxpool": (lambda: nn.MaxPool2d(2), image),
    "avgpool": (lambda: nn.AvgPool2d(2), image),
    "adaptive_avgpool": (lambda: nn.AdaptiveAvgPool2d(1), image),
    "dropout_eval": (lambda: nn.Dropout(0.3).eval(), any34),
    "gelu": (lambda: nn.GELU(), any34),
    "softmax": (lambda: nn.Softmax(dim=1), any34),
    "flatten": (lambda: nn.Flatten(), image),
    "identity": (lambda: nn.Sequential(nn.Identity(), nn.ReLU()), any34),
    "embedding": (lambda: nn.Embedding(7, 3), lambda: (ember.tensor([[1, 2], [6, 0]]),)),
    "rnn_cell": (lambda: nn.RNNCell(4, 3), any34),
    "gru_cell": (lambda: nn.GRUCell(4, 3), any34),
    "lstm_cell": (lambda: nn.LSTMCell(4, 3), any34),
    "module_list_seq": (lambda: nn.Sequential(*[nn.Linear(4, 4) for _ in range(4)]), any34),
    "mha": (lambda: _MHA(), lambda: (ember.randn(2, 5, 8),)),
    "transformer_layer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                          lambda: (ember.randn(2, 5, 8),)),
}


class _MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module(name):
    make, inputs = MODULES[name]
    ember.manual_seed(0)
    m = make()
    check(m, inputs)
