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


def test_quantized_engine_is_x86():
    assert ember.backends.quantized.engine == torch.backends.quantized.engine == "x86"
    ember.backends.quantized.engine = "x86"
    with pytest.raises(RuntimeError, match="bogus is not a valid value for quantized engine"):
        ember.backends.quantized.engine = "bogus"
    with pytest.raises(RuntimeError, match="x86 engine only"):
        ember.backends.quantized.engine = "qnnpack"
    assert "x86" in ember.backends.quantized.supported_engines
