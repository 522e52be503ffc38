"""Each op family: export a small function, check the ONNX model, run it in onnxruntime and
compare with ember eager -- on the example inputs and on fresh draws."""
import math

import numpy as np
import pytest

import onnx  # noqa: E402  (tests/onnx/conftest.py: collected only where installed)

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import dynamo  # noqa: E402

from _onnx_testing import Fn, check_export, op_types  # noqa: E402


def r(*shape):
    return ember.randn(*shape)


def pos(*shape):
    return ember.rand(*shape) + 0.5


W = {}


def w(name, *shape):
    """A fixed random weight per test case (captured as a constant of the graph)."""
    if name not in W:
        W[name] = ember.randn(*shape)
    return W[name]


CASES = {
    # matmuls
    "mm": (lambda a, b: a @ b, lambda: (r(3, 4), r(4, 5)), "MatMul"),
    "bmm": (lambda a, b: ember.bmm(a, b), lambda: (r(2, 3, 4), r(2, 4, 5)), "MatMul"),
    "matmul_bcast": (lambda a, b: a @ b, lambda: (r(2, 3, 4), r(4, 5)), "MatMul"),
    "addmm": (lambda b, x, m: ember.addmm(b, x, m, beta=0.5, alpha=2.0), lambda: (r(5), r(3, 4), r(4, 5)), "Gemm"),
    "linear_3d": (lambda x, wt, b: F.linear(x, wt, b), lambda: (r(2, 3, 4), r(5, 4), r(5)), "Gemm"),
    # convolutions
    "conv2d": (lambda x, k, b: F.conv2d(x, k, b, stride=2, padding=1, dilation=1),
               lambda: (r(2, 3, 9, 9), r(4, 3, 3, 3), r(4)), "Conv"),
    "conv2d_groups_dil": (lambda x, k: F.conv2d(x, k, None, stride=1, padding=2, dilation=2, groups=2),
                          lambda: (r(1, 4, 8, 8), r(6, 2, 3, 3)), "Conv"),
    "conv1d": (lambda x, k, b: F.conv1d(x, k, b, stride=2, padding=1, groups=2),
               lambda: (r(2, 4, 11), r(6, 2, 3), r(6)), "Conv"),
    "conv_transpose2d": (lambda x, k: F.conv_transpose2d(x, k, stride=2, padding=1, output_padding=1),
                         lambda: (r(1, 3, 5, 5), r(3, 2, 3, 3)), "ConvTranspose"),
    # normalization
    "batch_norm_eval": (lambda x, m, v, g, b: F.batch_norm(x, m, v, g, b, training=False, eps=1e-3),
                        lambda: (r(2, 3, 4, 4), r(3), pos(3), r(3), r(3)), "BatchNormalization"),
    "layer_norm": (lambda x, g, b: F.layer_norm(x, (4, 5), g, b, eps=1e-4), lambda: (r(2, 4, 5), r(4, 5), r(4, 5)),
                   "LayerNormalization"),
    "layer_norm_noaffine": (lambda x: F.layer_norm(x, (5,)), lambda: (r(3, 5),), "LayerNormalization"),
    # activations
    "relu": (lambda x: F.relu(x), lambda: (r(3, 4),), "Relu"),
    "gelu_erf": (lambda x: F.gelu(x), lambda: (r(3, 4),), "Erf"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda: (r(3, 4),), "Tanh"),
    "silu": (lambda x: F.silu(x), lambda: (r(3, 4),), "Sigmoid"),
    "sigmoid_tanh": (lambda x: ember.sigmoid(x) + ember.tanh(x), lambda: (r(3, 4),), "Sigmoid"),
    "softmax": (lambda x: F.softmax(x, dim=1), lambda: (r(2, 3, 4),), "Softmax"),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), lambda: (r(2, 3, 4),), "LogSoftmax"),
    "leaky_hardtanh_clamp": (lambda x: F.leaky_relu(x, 0.2) + F.hardtanh(x) + x.clamp(-0.3, 0.4) + x.clamp(min=0.1),
                             lambda: (r(3, 4),), "Clip"),
    # arithmetic
    "add_sub_alpha": (lambda a, b: ember.add(a, b, alpha=2) - ember.sub(b, a, alpha=0.5) + 1.5 - a * 3,
                      lambda: (r(3, 4), r(4)), "Sub"),
    "mul_div": (lambda a, b: a * b / (b.abs() + 1) + a / 2, lambda: (r(3, 4), r(3, 4)), "Div"),
    "pow": (lambda a, b: a ** 2 + a.abs() ** b + a.abs() ** 0.5, lambda: (r(3, 4), r(3, 4)), "Pow"),
    "unary": (lambda x: -x + ember.exp(x) + ember.log(x.abs() + 1) + ember.sqrt(x.abs()) + ember.rsqrt(x.abs() + 1),
              lambda: (r(3, 4),), "Exp"),
    "div_floor_int": (lambda a, b: ember.div(a, b, rounding_mode="floor") + ember.div(a, b, rounding_mode="trunc"),
                      lambda: (ember.randint(-20, 20, (3, 4)), ember.randint(1, 5, (3, 4))), "Floor"),
    "int_float_promotion": (lambda i, x: i * x + i + 1, lambda: (ember.randint(-5, 5, (3, 4)), r(3, 4)), "Cast"),
    # comparisons, where, masked_fill, casts
    "compare": (lambda a, b: ((a > b) | (a <= 0.1)) & (a != b) & ~(a == 0.5) & (a >= -2) & (b < 3),
                lambda: (r(3, 4), r(3, 4)), "Greater"),
    "where": (lambda c, a, b: ember.where(c > 0, a, b) + ember.where(a > 0, a, 0.0), lambda: (r(3, 4), r(3, 4), r(4)),
              "Where"),
    "masked_fill": (lambda x: x.masked_fill(x > 0.5, -1e4), lambda: (r(3, 4),), "Where"),
    "cast": (lambda x: (x > 0).float() + x.to(ember.float64).float() + x.to(ember.int64).to(ember.float32),
             lambda: (r(3, 4) * 4,), "Cast"),
    # shapes
    "reshape_view_permute": (lambda x: x.view(2, 6, 2).permute(2, 0, 1).reshape(4, 6).transpose(0, 1).flatten(),
                             lambda: (r(4, 6),), "Transpose"),
    "unsqueeze_squeeze_expand": (lambda x: x.unsqueeze(1).expand(3, 5, 4).sum(1) + x[None, :, None].squeeze()
                                 + x.unsqueeze(0).expand(2, -1, -1).squeeze(0)[1] + x.squeeze(0),
                                 lambda: (r(3, 4),), "Expand"),
    "flatten": (lambda x: x.flatten(1) + 1, lambda: (r(2, 3, 4),), "Reshape"),
    "cat_stack": (lambda a, b: ember.cat([a, b, a], dim=-1).sum(0) + ember.stack([a, b], 0).mean(0).sum(0).repeat(3),
                  lambda: (r(3, 4), r(3, 4)), "Concat"),
    "split_chunk": (lambda x: x.split(3, dim=1)[1] * x.chunk(3, dim=1)[2][:, :1] + x.split([2, 5], 1)[0].sum(),
                    lambda: (r(2, 7),), "Split"),
    "slice_select": (lambda x: x[:, 1:5:2] + x[1:, -3:-1][0] + x[..., 2:4][-1], lambda: (r(3, 6),), "Slice"),
    "select": (lambda x: x[1] + x[:, 2].sum() + x.select(1, -1).sum(), lambda: (r(3, 4),), "Gather"),
    "index_tensor": (lambda x, i: x[i] + x[:, i][:3].sum(0)[0], lambda: (r(5, 5), ember.tensor([0, 2, 1, 4])),
                     "Gather"),
    "index_select": (lambda x: x.index_select(1, ember.tensor([0, 3, 1])), lambda: (r(3, 4),), "Gather"),
    "index_two": (lambda x, i, j: x[i, j], lambda: (r(5, 4), ember.tensor([0, 2, 4]), ember.tensor([1, 3, 0])),
                  "GatherND"),
    "embedding": (lambda i, e: F.embedding(i, e), lambda: (ember.randint(0, 10, (2, 5)), r(10, 3)), "Gather"),
    # reductions
    "reductions": (lambda x: x.sum((0, 2)) + x.mean(-1).sum(0) + x.amax(2).amin(0)
                   + x.sum() + x.max() - x.min(),
                   lambda: (r(3, 4, 5),), "ReduceSum"),
    "max_dim": (lambda x: (x.max(1).values + x.min(1, keepdim=True).values.squeeze(1),
                           x.argmax(1), x.max(dim=0).indices),
                lambda: (r(3, 7),), "ArgMax"),
    "var_std": (lambda x: x.var(-1) + x.std(-1) + x.var(-1, unbiased=False) + x.std(0).sum() + x.var(),
                lambda: (r(3, 4),), "ReduceMean"),
    "cumsum": (lambda x: x.cumsum(1), lambda: (r(3, 4),), "CumSum"),
    # pooling
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, stride=2, padding=1) + 0, lambda: (r(1, 2, 7, 7),), "MaxPool"),
    "max_pool2d_ceil_dil": (lambda x: F.max_pool2d(x, 2, stride=2, dilation=2, ceil_mode=True),
                            lambda: (r(1, 2, 9, 9),), "MaxPool"),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)
                   + F.avg_pool2d(x, 2, stride=1, padding=1).sum(), lambda: (r(1, 2, 5, 6),), "AveragePool"),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1) + F.adaptive_avg_pool2d(x, (2, 3)).sum(),
                            lambda: (r(2, 3, 4, 6),), "ReduceMean"),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False) * 2, lambda: (r(3, 4),), "Mul"),
    # constants
    "tril_triu_consts": (lambda x: x.tril(-1) + x.triu(1) + ember.ones(4, 4).tril() + ember.zeros(4, 4)
                         + ember.full((4, 4), 2.5) + ember.arange(4).float() + ember.arange(1.0, 3.0, 0.5)[:4],
                         lambda: (r(4, 4),), "Trilu"),
    "causal_mask": (lambda s: s.masked_fill(ember.ones(4, 4, dtype=ember.bool).triu(1), float("-inf")).softmax(-1),
                    lambda: (r(2, 4, 4),), "Softmax"),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda: (r(2, 2, 5, 4), r(2, 2, 6, 4),
                                                                                 r(2, 2, 6, 4)), "Softmax"),
    "sdpa_causal_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                         + F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                         lambda: (r(1, 2, 5, 4), r(1, 2, 5, 4), r(1, 2, 5, 4), r(5, 5)), "Softmax"),
    "sdpa_bool_mask_scale": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > -1.0, scale=0.3),
                             lambda: (r(1, 2, 5, 4), r(1, 2, 5, 4), r(1, 2, 5, 4), r(5, 5)), "Softmax"),
    # further nn.functional ops that reach the graph as ember's helper ops
    "group_norm": (lambda x, g, b: F.group_norm(x, 2, g, b, eps=1e-4), lambda: (r(2, 4, 3, 3), r(4), r(4)), "Sqrt"),
    "interpolate": (lambda x: F.interpolate(x, scale_factor=2, mode="nearest")
                    + F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                    lambda: (r(1, 2, 3, 4),), "Gather"),
    "pad_modes": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5).sum() + F.pad(x, (1, 1), mode="reflect")
                  + F.pad(x, (1, 1), mode="replicate"), lambda: (r(1, 3, 4),), "Where"),
    "normalize": (lambda x: F.normalize(x, dim=-1), lambda: (r(3, 4),), "ReduceL2"),
    "einsum": (lambda a, b: ember.einsum("bij,bjk->bik", a, b), lambda: (r(2, 3, 4), r(2, 4, 5)), "Einsum"),
    "logsumexp_mish": (lambda x: ember.logsumexp(x, -1) + F.mish(x).sum(-1) + F.elu(x).sum(-1)
                       + F.softplus(x, beta=2.0).sum(-1), lambda: (r(3, 4),), "ReduceLogSumExp"),
    "sum_bool_mean_dtype": (lambda x: (x > 0).sum(-1) + x.mean(-1, dtype=ember.float64).long(), lambda: (r(3, 4) * 3,),
                            "ReduceSum"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op(name):
    fn, make, expected_op = CASES[name]
    prog = check_export(Fn(fn).eval(), make(), others=[make(), make()])
    assert expected_op in op_types(prog.model_proto)


def test_constant_weights_become_initializers():
    k = ember.randn(4, 3, 3, 3)
    prog = check_export(Fn(lambda x: F.conv2d(x, k, padding=1)), (r(1, 3, 5, 5),), others=[(r(1, 3, 5, 5),)])
    inits = prog.model_proto.graph.initializer
    arrays = [onnx.numpy_helper.to_array(t) for t in inits]
    assert any(a.shape == (4, 3, 3, 3) and np.array_equal(a, k.numpy()) for a in arrays)


def test_gelu_opset20_uses_gelu_op():
    if onnx.defs.onnx_opset_version() < 20:
        pytest.skip("onnx without opset 20")
    for approx in ("none", "tanh"):
        dynamo.reset()
        prog = check_export(Fn(lambda x: F.gelu(x, approximate=approx)), (r(3, 4),), others=[(r(3, 4),)],
                            opset_version=20)
        assert op_types(prog.model_proto) == ["Gelu"]


def test_float64_model():
    m = ember.nn.Linear(4, 3).double().eval()
    prog = check_export(m, (ember.randn(2, 4, dtype=ember.float64),), rtol=1e-12, atol=1e-12)
    assert prog.model_proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE


def test_gelu_values_against_formula():
    """The decomposed GELU at opset 18 equals the closed forms (not just ember's kernel)."""
    x = ember.linspace(-4, 4, 17)
    prog = ember.onnx.export(Fn(lambda t: (F.gelu(t), F.gelu(t, approximate="tanh"))), (x,))
    got_erf, got_tanh = prog(x)
    xs = x.numpy().astype(np.float64)
    erf = 0.5 * xs * (1 + np.vectorize(math.erf)(xs / math.sqrt(2)))
    tanh = 0.5 * xs * (1 + np.tanh(math.sqrt(2 / math.pi) * (xs + 0.044715 * xs ** 3)))
    np.testing.assert_allclose(got_erf.numpy(), erf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_tanh.numpy(), tanh, rtol=1e-5, atol=1e-6)


def test_symbolic_size_as_a_scalar_operand():
    """x * x.shape[0]: the size is read from the input at run time, not baked in."""
    from ember.export import Dim
    check_export(Fn(lambda x: x * x.shape[0] + x / x.shape[1]), (r(3, 4),), others=[(r(6, 4),), (r(2, 4),)],
                 dynamic_shapes={"xs": ({0: Dim("b")},)})


def test_outputs_that_are_inputs_or_repeated():
    x = r(3, 4)
    prog = check_export(Fn(lambda t: (t, t * 2, t)), (x,), others=[(r(3, 4),)])
    names = [o.name for o in prog.model_proto.graph.output]
    assert len(set(names)) == 3


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "maximum_or_lt": lambda a, b: ember.maximum(a, b) if isinstance(b, ember.Tensor) else a < b,
    "eq": lambda a, b: a == b, "ge": lambda a, b: a >= b,
    "where": lambda a, b: ember.where(a > 0, a, b),
}
DTYPE_MIXES = [(ember.float32, ember.float32), (ember.int64, ember.float32), (ember.int32, ember.int64),
               (ember.float32, 2.5), (ember.int64, 3), (ember.int32, 0.5), (ember.float64, ember.float32)]


def _draw(rng, dtype, shape):
    if dtype.is_floating_point:
        return ember.tensor(rng.standard_normal(shape) + 0.1, dtype=dtype)
    return ember.tensor(rng.integers(1, 9, size=shape) * rng.choice([-1, 1], size=shape), dtype=dtype)


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_promotion_and_broadcasting(op):
    """Mixed dtypes (tensor/tensor, tensor/Python scalar) and broadcast shapes: ONNX's binary
    ops need one element type, so the casts must reproduce torch's promotion exactly."""
    rng = np.random.default_rng(abs(hash(op)) % 2 ** 32)
    for da, db in DTYPE_MIXES:
        dynamo.reset()
        sa = tuple(int(s) for s in rng.integers(1, 4, size=2))
        sb = (sa[-1],) if rng.random() < 0.5 else (1,) + sa[1:]
        a = _draw(rng, da, sa)
        if isinstance(db, (int, float)):
            fn = (lambda s: (lambda x: BINARY[op](x, s)))(db)
            args = (a,)
        else:
            fn, args = BINARY[op], (a, _draw(rng, db, sb))
        check_export(Fn(fn), args, rtol=1e-6, atol=1e-6)
