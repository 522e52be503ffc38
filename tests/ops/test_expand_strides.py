"""``expand``'s strides as torch's ``inferExpandGeometry``: a 0-dim tensor expands with every
stride 0 (size-1 dims too); otherwise new leading size-1 dims take the next dim's extent."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [((), (1,)), ((), (1, 1)), ((), (2, 1)), ((), (1, 3)), ((3,), (1, 3)), ((3,), (1, 1, 3)),
         ((3,), (2, 3)), ((1,), (1,)), ((1,), (4,)), ((2, 1), (2, 5)), ((2, 1), (1, 2, 1)), ((1, 1), (3, 1, 1))]


@pytest.mark.parametrize("src,size", CASES, ids=[f"{s}->{t}" for s, t in CASES])
def test_expand_strides_match_torch(src, size):
    a = np.random.default_rng(0).standard_normal(src).astype(np.float32)
    e, t = ember.tensor(a).expand(*size), torch.tensor(a).expand(*size)
    assert e.stride() == t.stride() and tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    # the meta path (fake tensors, compiled graphs) agrees with eager
    from ember.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(lambda x: x.expand(*size), tracing_mode="fake")(ember.tensor(a))
    node = [n for n in gm.graph.nodes if n.op == "call_function"][-1]
    assert tuple(node.meta["val"].stride()) == t.stride()
