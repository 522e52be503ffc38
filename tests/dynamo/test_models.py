"""Whole models compile to the expected number of graphs and match eager."""
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import dynamo

from ._util import CountingBackend, assert_same, check


@pytest.fixture(autouse=True)
def _print_breaks(monkeypatch):
    """print() is this file's graph-break device: keep it a break (by default a print of constants
    is replayed after the graph, tests/dynamo/test_logging_calls.py)."""
    monkeypatch.setattr(ember.dynamo.config, "replay_logging_calls", False)


class UnrolledLSTM(nn.Module):
    def __init__(self, d_in=4, d_h=6):
        super().__init__()
        self.cell = nn.LSTMCell(d_in, d_h)
        self.head = nn.Linear(d_h, 2)
        self.d_h = d_h

    def forward(self, xs):
        b = xs.shape[1]
        h = ember.zeros(b, self.d_h)
        c = ember.zeros(b, self.d_h)
        outs = []
        for t in range(xs.shape[0]):
            h, c = self.cell(xs[t], (h, c))
            outs.append(self.head(h))
        return ember.stack(outs)


class HandLSTM(nn.Module):
    """An LSTM written with ember ops, unrolled over a Python loop."""

    def __init__(self, d_in=4, d_h=5):
        super().__init__()
        self.wx = nn.Linear(d_in, 4 * d_h)
        self.wh = nn.Linear(d_h, 4 * d_h, bias=False)
        self.d_h = d_h

    def forward(self, xs):
        h = xs.new_zeros(xs.shape[1], self.d_h) if hasattr(xs, "new_zeros") else ember.zeros(xs.shape[1], self.d_h)
        c = ember.zeros_like(h)
        for x in xs:
            gates = self.wx(x) + self.wh(h)
            i, f, g, o = gates.chunk(4, dim=-1)
            c = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
            h = ember.sigmoid(o) * ember.tanh(c)
        return h


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 3)

    def forward(self, idx):
        return self.proj(self.emb(idx)).mean(dim=1)


class BranchyModel(nn.Module):
    """A data-dependent branch: exactly one graph break, results still equal eager."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        if y.mean() > 0:
            y = self.b(y)
        return y.relu()


class PrintingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x).relu()
        print("activation mean computed")
        return y * 2


MODELS = {
    "lstm_cell_unrolled": (UnrolledLSTM, lambda: (ember.randn(5, 3, 4),), 1),
    "hand_lstm": (HandLSTM, lambda: (ember.randn(6, 2, 4),), 1),
    "embedding": (Embedder, lambda: (ember.randint(0, 10, (2, 5)),), 1),
    "printing": (PrintingModel, lambda: (ember.randn(3, 4),), 2),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(name):
    cls, inputs, graphs = MODELS[name]
    ember.manual_seed(0)
    m = cls()
    check(m, inputs, graphs=graphs)


def test_branchy_model_breaks_once():
    ember.manual_seed(0)
    m = BranchyModel()
    cnt = CountingBackend()
    cm = ember.compile(m, backend=cnt)
    for _ in range(4):
        x = ember.randn(3, 4)
        assert_same(m(x), cm(x))
    assert dynamo.counters["graph_breaks"] >= 1
    assert 2 <= cnt.frame_count <= 3   # before the branch + one resume per branch taken


def test_training_step_matches_eager():
    """Gradients through a compiled forward equal eager ones (eager backend keeps autograd)."""
    ember.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    cm = ember.compile(m, backend="eager")
    x, y = ember.randn(5, 4), ember.randn(5, 1)
    loss = F.mse_loss(cm(x), y)
    loss.backward()
    g_comp = [p.grad.clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    F.mse_loss(m(x), y).backward()
    for a, p in zip(g_comp, m.parameters()):
        assert_same(p.grad, a)
