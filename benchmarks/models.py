"""The benchmark model zoo, written once against a torch-like namespace.

Every builder takes ``lib`` (``ember`` or ``torch``) and returns a
:class:`Case`: the model, a function drawing a fresh input batch, and the loss
used for training. The same file therefore measures ember eager, ember
compiled, PyTorch eager and torch.compile on identical programs.

Sizes follow issue 7: MLP (3 x [Linear 1024, GELU, LayerNorm], batch 64), a
nanoGPT-style transformer (4 layers, 4 heads, width 256, context 128), a small
ResNet on 32x32 images, an LSTM over 32 steps, and an AdamW step over ~10M
parameters. ``scale`` < 1 shrinks every model (for smoke tests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict


@dataclass
class Case:
    name: str
    model: Any
    make_input: Callable[[], Any]          # () -> input batch
    loss: Callable[[Any, Any], Any]        # (output, batch) -> scalar loss
    kind: str = "model"                    # "model" or "optimizer"


def _s(n: int, scale: float, lo: int = 2) -> int:
    return max(lo, int(round(n * scale)))


def mlp(lib, scale: float = 1.0) -> Case:
    nn = lib.nn
    d = _s(1024, scale, 8)
    layers = []
    for _ in range(3):
        layers += [nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d)]
    model = nn.Sequential(*layers)
    batch = _s(64, scale)
    return Case("mlp", model, lambda: lib.randn(batch, d), lambda out, x: out.pow(2).mean())


def nanogpt(lib, scale: float = 1.0) -> Case:
    nn, F = lib.nn, lib.nn.functional
    width, heads, layers = _s(256, scale, 8), 4, 4
    ctx, vocab, batch = _s(128, scale, 4), 512, _s(8, scale)
    width -= width % heads

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            hd = C // heads
            q = q.view(B, T, heads, hd).transpose(1, 2)
            k = k.view(B, T, heads, hd).transpose(1, 2)
            v = v.view(B, T, heads, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            mask = lib.ones(T, T, device=x.device).tril() == 0
            att = att.masked_fill(mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(ctx, width)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(lib.arange(T, device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    model = GPT()
    return Case("nanogpt", model, lambda: lib.randint(0, vocab, (batch, ctx)),
                lambda out, idx: F.cross_entropy(out.reshape(-1, vocab), idx.reshape(-1)))


def resnet(lib, scale: float = 1.0) -> Case:
    nn, F = lib.nn, lib.nn.functional
    c = _s(32, scale, 4)

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                           nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + (x if self.short is None else self.short(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
            self.layer1 = BasicBlock(c, c, 1)
            self.layer2 = BasicBlock(c, 2 * c, 2)
            self.layer3 = BasicBlock(2 * c, 4 * c, 2)
            self.fc = nn.Linear(4 * c, 10)

        def forward(self, x):
            x = self.layer3(self.layer2(self.layer1(self.stem(x))))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    batch, hw = _s(32, scale), 32 if scale >= 1 else 8
    return Case("resnet", ResNet(), lambda: lib.randn(batch, 3, hw, hw), lambda out, x: out.logsumexp(1).mean())


def lstm(lib, scale: float = 1.0) -> Case:
    nn = lib.nn
    din, hidden, steps, batch = _s(128, scale, 4), _s(256, scale, 4), _s(32, scale, 3), _s(32, scale)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(din, hidden)
            self.head = nn.Linear(hidden, 10)

        def forward(self, x):
            h = lib.zeros(x.shape[0], hidden, device=x.device)
            c = lib.zeros(x.shape[0], hidden, device=x.device)
            for t in range(x.shape[1]):         # unrolled over a Python loop
                h, c = self.cell(x[:, t], (h, c))
            return self.head(h)

    return Case("lstm", Net(), lambda: lib.randn(batch, steps, din), lambda out, x: out.pow(2).mean())


def adamw_step(lib, scale: float = 1.0, device: str = "cpu") -> Case:
    """An AdamW step over ~10M parameters (40 tensors of 500x500); the 'model' is the step."""
    n = _s(500, scale, 4)
    params = [lib.randn(n, n, device=device, requires_grad=True) for _ in range(40)]
    for p in params:
        p.grad = lib.randn(n, n, device=device)
    opt = lib.optim.AdamW(params, lr=1e-3)
    return Case("adamw", opt, lambda: None, lambda out, x: None, kind="optimizer")


BUILDERS: Dict[str, Callable[..., Case]] = {
    "mlp": mlp, "nanogpt": nanogpt, "resnet": resnet, "lstm": lstm, "adamw": adamw_step}


def build(name: str, lib, scale: float = 1.0, device: str = "cpu") -> Case:
    """``BUILDERS[name]`` with its parameters and input batches on ``device``
    ("cpu", "cuda"): the model is built on the CPU (same seed, same values) and moved."""
    if name == "adamw":
        return adamw_step(lib, scale, device)
    case = BUILDERS[name](lib, scale)
    if device != "cpu":
        case.model.to(device)
        make = case.make_input
        case.make_input = lambda: make().to(device)
    return case
