"""``Tensor.dequantize()`` of a dense tensor: its float32 values, as torch's."""
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "uint8", "float32"])
def test_dense_dequantize_is_float32(dtype):
    e = ember.arange(6).to(getattr(ember, dtype)).dequantize()
    t = torch.arange(6).to(getattr(torch, dtype)).dequantize()
    assert str(e.dtype) == str(t.dtype).replace("torch", "ember") and e.tolist() == t.tolist()
    f = ember.ones(3)
    assert f.dequantize() is f
