"""``nn.Embedding(max_norm=...)`` renormalises the rows it reads in tensor ops, so a compiled
model keeps it in its graph (torch.compile does; read through numpy it broke the graph) and
compiled training matches eager: the table's rows, the lookups and the gradients."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.inductor import config as inductor_config
from ember.nn import functional as Fm


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5])
def test_renorm_matches_the_row_by_row_rescale(dtype, norm_type):
    rng = np.random.default_rng()
    w0 = ember.from_numpy(rng.standard_normal((10, 6)) * 2).to(getattr(ember, dtype))
    idx = ember.from_numpy(rng.integers(0, 10, size=(3, 4)))
    a, b = w0.clone(), w0.clone()
    Fm._embedding_renorm_(a, idx, 1.5, norm_type)
    Fm._embedding_renorm_numpy(b, idx, 1.5, norm_type)     # the reference: numpy, row by row
    np.testing.assert_allclose(a.double().numpy(), b.double().numpy(), rtol=1e-15 if dtype == "float64" else 0,
                               atol=0)
    used = set(idx.reshape(-1).tolist())
    norms = ember.linalg.vector_norm(a.double(), norm_type, dim=1)
    for r in range(10):
        if r in used:
            assert norms[r].item() <= 1.5 * (1 + 1e-3)
        else:
            assert (a[r] == w0[r]).all()                     # rows not read are untouched


def test_compiled_training_matches_eager_in_one_graph():
    old = inductor_config.debug_lowering
    inductor_config.debug_lowering = True
    try:
        emb = ember.nn.Embedding(10, 6, max_norm=1.0)
        emb2 = ember.nn.Embedding(10, 6, max_norm=1.0)
        emb2.load_state_dict(emb.state_dict())
        ember.dynamo.reset()
        c = ember.compile(emb2)
        rng = np.random.default_rng()
        for _ in range(3):
            x = ember.from_numpy(rng.integers(0, 10, size=(2, 5)))
            cot = ember.from_numpy(rng.standard_normal((2, 5, 6)).astype(np.float32))
            y1, y2 = emb(x), c(x)
            (y1 * cot).sum().backward()
            (y2 * cot).sum().backward()
            np.testing.assert_array_equal(y2.detach().numpy(), y1.detach().numpy())
            np.testing.assert_array_equal(emb2.weight.detach().numpy(), emb.weight.detach().numpy())
            np.testing.assert_allclose(emb2.weight.grad.numpy(), emb.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
        assert ember.dynamo.counters["graph_breaks"] == 0
        assert ember.dynamo.counters["eager_fallback"] == 0
        assert ember.dynamo.explain(lambda t: F.embedding(t, emb.weight, max_norm=0.5))(x).graph_break_count == 0
    finally:
        inductor_config.debug_lowering = old
