"""``ember._assert`` / ``ember._assert_async`` / ``ember.backends.cuda.sdp_kernel``: names model
code uses (timm's PatchEmbed calls ``torch._assert`` in forward), eager and compiled."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dynamo


def test_assert_passes_and_fails_like_python_assert():
    ember._assert(True, "never")
    with pytest.raises(AssertionError, match="height 3"):
        ember._assert(3 == 4, "height 3")


def test_assert_on_sizes_is_traced_without_a_break():
    def f(x):
        H = x.shape[2]
        ember._assert(H == 8, f"Input height ({H}) doesn't match model (8).")
        return x.flatten(2).transpose(1, 2) * 2

    x = ember.randn(2, 3, 8, 8)
    ex = dynamo.explain(f)(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons
    dynamo.reset()
    c = ember.compile(f)
    np.testing.assert_allclose(c(x).numpy(), f(x).numpy())
    with pytest.raises(AssertionError, match=r"Input height \(6\)"):
        c(ember.randn(2, 3, 6, 8))


def test_assert_async():
    ember._assert_async(ember.tensor(1))
    with pytest.raises(RuntimeError, match="nonzero"):
        ember._assert_async(ember.tensor(0.0))
    with pytest.raises(RuntimeError, match="custom"):
        ember._assert_async(ember.tensor(False), "custom")
    with pytest.raises(TypeError, match="must be Tensor"):
        ember._assert_async(1)


def test_sdp_kernel_context_switches_and_restores():
    q = ember.randn(1, 2, 4, 8)
    with pytest.warns(FutureWarning):
        ctx = ember.backends.cuda.sdp_kernel(enable_flash=False, enable_math=False)
    with ctx:
        assert not ember.backends.cuda.math_sdp_enabled()
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, q, q)
    assert ember.backends.cuda.math_sdp_enabled() and ember.backends.cuda.flash_sdp_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ember.backends.cuda.sdp_kernel(enable_flash=False):
            out = F.scaled_dot_product_attention(q, q, q)
    assert tuple(out.shape) == (1, 2, 4, 8)
