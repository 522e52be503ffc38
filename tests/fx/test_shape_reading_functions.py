"""Functions that read their arguments' sizes before calling ops (``F.conv2d``, ``F.max_pool2d``,
``ember.flatten``, the losses, ...) trace as one call_function node each, as torch.fx records
torch's, and the GraphModule computes what the function does."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "conv1d": lambda m, F, x, w: F.conv1d(x.flatten(2), w[:, :, 0]),
    "conv2d": lambda m, F, x, w: F.conv2d(x, w),
    "conv_transpose2d": lambda m, F, x, w: F.conv_transpose2d(x, w.transpose(0, 1)),
    "flatten": lambda m, F, x, w: m.flatten(x, 1),
    "max_pool2d": lambda m, F, x, w: F.max_pool2d(x, 2),
    "avg_pool2d": lambda m, F, x, w: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda m, F, x, w: F.adaptive_avg_pool2d(x, 1),
    "interpolate": lambda m, F, x, w: F.interpolate(x, scale_factor=2),
    "pad": lambda m, F, x, w: F.pad(x, (1, 1)),
    "chunk": lambda m, F, x, w: m.chunk(x, 2, 1)[0],
    "tensor_split": lambda m, F, x, w: m.tensor_split(x, 2, 1)[1],
    "einsum": lambda m, F, x, w: m.einsum("bchw->bhwc", x),
    "cross_entropy": lambda m, F, x, w: F.cross_entropy(x.flatten(1), m.zeros(2, dtype=m.int64)),
    "mse_loss": lambda m, F, x, w: F.mse_loss(x, x * 2),
    "group_norm": lambda m, F, x, w: F.group_norm(x, 1),
    "normalize": lambda m, F, x, w: F.normalize(x),
    "unfold": lambda m, F, x, w: F.unfold(x, 2),
    "narrow": lambda m, F, x, w: m.narrow(x, 1, 0, 2),
    "movedim": lambda m, F, x, w: m.movedim(x, 1, 3),
    "hstack": lambda m, F, x, w: m.hstack([x, x]),
    "zeros_like": lambda m, F, x, w: m.zeros_like(x) + x,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_traces_as_one_node_like_torch(name):
    fn = CASES[name]
    rng = np.random.default_rng(len(name))
    xa = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    wa = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ex, ew = ember.tensor(xa), ember.tensor(wa)
    tx, tw = torch.tensor(xa), torch.tensor(wa)
    gm = ember.fx.symbolic_trace(lambda x: fn(ember, ember.nn.functional, x, ew))
    tgm = torch.fx.symbolic_trace(lambda x: fn(torch, torch.nn.functional, x, tw))
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    tcalls = [n for n in tgm.graph.nodes if n.op in ("call_function", "call_method")]
    assert len(calls) == len(tcalls)
    out, ref = gm(ex), fn(ember, ember.nn.functional, ex, ew)
    assert np.allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert np.allclose(out.numpy(), fn(torch, torch.nn.functional, tx, tw).numpy(), rtol=1e-4, atol=1e-5)


def test_resnet_style_forward_traces():
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = ember.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = ember.nn.Linear(8, 5)

        def forward(self, x):
            y = ember.nn.functional.max_pool2d(ember.relu(self.conv(x)), 2)
            y = ember.nn.functional.adaptive_avg_pool2d(y, (1, 1))
            return self.fc(ember.flatten(y, 1))
    net = Net()
    gm = ember.fx.symbolic_trace(net)
    x = ember.randn(2, 3, 8, 8)
    assert np.allclose(gm(x).detach().numpy(), net(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "ember.flatten(" in gm.code and "ember.nn.functional.max_pool2d(" in gm.code


def test_functions_are_restored_after_tracing():
    before = (ember.flatten, ember.nn.functional.conv2d)
    ember.fx.symbolic_trace(lambda x: ember.flatten(x, 1))
    assert (ember.flatten, ember.nn.functional.conv2d) == before


def test_delete_all_unused_submodules_keeps_called_subtrees():
    def build(m):
        class Inner(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = m.nn.Linear(3, 3)
                self.b = m.nn.Linear(3, 3)

            def forward(self, x):
                return self.b(self.a(x))

        class Outer(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()
                self.unused = m.nn.Linear(3, 3)

            def forward(self, x):
                return self.inner(x)

        class T(m.fx.Tracer):
            def is_leaf_module(self, mod, qn):
                return qn == "inner" or super().is_leaf_module(mod, qn)
        root = Outer()
        gm = m.fx.GraphModule(root, T().trace(root))
        gm.delete_all_unused_submodules()
        return gm
    e, t = build(ember), build(torch)
    assert [n for n, _ in e.named_modules()] == [n for n, _ in t.named_modules()] == ["", "inner", "inner.a", "inner.b"]
    x = ember.randn(2, 3)
    assert e(x).shape == (2, 3)
