"""nn.MultiheadAttention's body (``F.multi_head_attention_forward``, which returns a tuple) is
traced through by dynamo like user code: a Transformer encoder layer is one graph with no
break, and the compiled layer matches eager (values and gradients)."""
import numpy as np

import ember
import ember.nn as nn


def test_transformer_layer_is_one_graph_and_matches_eager():
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True)
    x = ember.randn(2, 5, 16)
    mask = ember.ones(5, 5).triu(1).bool()
    ex = ember.dynamo.explain(layer)(x, src_mask=mask)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    ember.compiler.reset()
    compiled = ember.compile(layer)
    out = compiled(x, src_mask=mask)
    ref = layer(x, src_mask=mask)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    g1 = ember.autograd.grad(out.sum(), list(layer.parameters()))
    g2 = ember.autograd.grad(ref.sum(), list(layer.parameters()))
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_multihead_attention_weights_output_compiled():
    ember.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    q, k = ember.randn(2, 3, 8), ember.randn(2, 4, 8)
    ember.compiler.reset()
    out, w = ember.compile(mha)(q, k, k)
    ref, rw = mha(q, k, k)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.detach().numpy(), rw.detach().numpy(), rtol=1e-5, atol=1e-6)
