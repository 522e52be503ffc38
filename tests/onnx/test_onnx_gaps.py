"""ONNX export of what used to be refused: split along a dynamic dimension, avg_pool with
ceil_mode/divisor_override, adaptive_avg_pool with uneven windows (values checked in onnxruntime
against torch's eager results), a forward argument named ``input`` (its ONNX name is torch's),
and the error for boolean-mask indexing (no data-dependent output sizes in ember.export)."""
import numpy as np
import pytest

import onnx  # noqa: E402,F401  (tests/onnx/conftest.py: collected only where installed)

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.export import Dim  # noqa: E402

from _onnx_testing import Fn, check_export, np_of, run_ort  # noqa: E402

torch = pytest.importorskip("torch")


def _draw(*shape):
    return np.random.default_rng().standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------- split on a dynamic dim
@pytest.mark.parametrize("fn,example,others", [
    (lambda x: [t * 1 for t in x.split(2, dim=0)], 5, ()),               # the trace fixed 3 pieces, size 5
    (lambda x: x.split(2, dim=0)[0] * 2, 5, (6, 9, 2)),
    (lambda x: x.split(3, dim=0)[1] + 1, 5, (4, 6)),
    (lambda x: [t.sum(0) for t in x.chunk(3, dim=0)], 7, (8, 9)),
])
def test_split_along_a_dynamic_dimension(fn, example, others):
    prog = check_export(Fn(fn), (ember.randn(example, 7),),
                        others=[(ember.randn(k, 7),) for k in others],
                        dynamic_shapes={"xs": ({0: Dim.AUTO},)})
    assert "Slice" in [n.op_type for n in prog.model_proto.graph.node]


def test_split_along_a_dynamic_dimension_with_symbolic_sizes():
    """split_with_sizes whose sizes come from the input's size (x.size(0) // 2 ...)."""
    def fn(x, y):
        n = y.shape[0]
        a, b = x.split([n, x.shape[0] - n], dim=0)
        return a * 2, b - 1
    check_export(Fn(fn), (ember.randn(7, 3), ember.randn(3)),
                 others=[(ember.randn(9, 3), ember.randn(4)), (ember.randn(5, 3), ember.randn(2))],
                 dynamic_shapes={"xs": ({0: Dim.AUTO}, {0: Dim.AUTO})})


def test_unbind_along_a_dynamic_dimension_is_refused_by_export():
    from ember.export import ConstraintViolationError
    with pytest.raises(ConstraintViolationError, match="specialized it to be a constant"):
        ember.onnx.export(Fn(lambda x: x.unbind(0)[0]), (ember.randn(4, 3),), dynamic_shapes={"xs": ({0: Dim("b")},)})


# ---------------------------------------------------------------------- pooling vs torch
_POOLS = [
    ("avg_pool2d", (3, 2, 1), dict(ceil_mode=True), (1, 2, 8, 7)),
    ("avg_pool2d", (3, 2, 1), dict(ceil_mode=True, count_include_pad=False), (2, 2, 8, 7)),
    ("avg_pool2d", (2, 2, 0), dict(ceil_mode=True), (1, 3, 5, 5)),
    ("avg_pool2d", (3, 1, 1), dict(divisor_override=4), (1, 2, 6, 6)),
    ("avg_pool2d", (3, 2, 1), dict(ceil_mode=True, divisor_override=5), (1, 2, 9, 6)),
    ("avg_pool2d", ((3, 2), (2, 3), (1, 0)), dict(ceil_mode=True), (1, 2, 9, 7)),
    ("avg_pool1d", (4, 3, 2), dict(ceil_mode=True), (2, 3, 10)),
    ("avg_pool1d", (4, 3, 2), dict(ceil_mode=True, count_include_pad=False), (2, 3, 11)),
    ("adaptive_avg_pool2d", ((3, 4),), {}, (2, 3, 7, 10)),
    ("adaptive_avg_pool2d", ((5, None),), {}, (2, 3, 7, 10)),
    ("adaptive_avg_pool2d", (4,), {}, (1, 2, 6, 9)),
    ("adaptive_avg_pool1d", (3,), {}, (2, 3, 7)),
    ("adaptive_avg_pool3d", ((2, 3, 4),), {}, (1, 2, 5, 7, 9)),
]


@pytest.mark.parametrize("name,args,kw,shape", _POOLS)
def test_pooling_matches_torch(name, args, kw, shape):
    mine = Fn(lambda x: getattr(F, name)(x, *args, **kw))
    prog = ember.onnx.export(mine, (ember.randn(*shape),))
    onnx.checker.check_model(prog.model_proto, full_check=True)
    for _ in range(2):
        x = _draw(*shape)
        want = getattr(torch.nn.functional, name)(torch.tensor(x), *args, **kw).numpy()
        got = run_ort(prog.model_proto, [x])[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_pooling_over_a_dynamic_size_with_ceil_mode_is_refused_naming_it():
    with pytest.raises(ember.onnx.UnsupportedOperatorError, match="ceil_mode/divisor_override over a dynamic"):
        ember.onnx.export(Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)), (ember.randn(1, 2, 8, 7),),
                          dynamic_shapes={"xs": ({2: Dim.AUTO},)})


# ---------------------------------------------------------------------- input names
class _Named(ember.nn.Module):
    def forward(self, input, other):
        return input * 2 + other


class _TNamed(torch.nn.Module):
    def forward(self, input, other):
        return input * 2 + other


def test_an_argument_named_input_keeps_its_name_as_torch():
    """torch.onnx.export (dynamo, 2.13's default) names graph inputs after torch.export's
    placeholders: ``input`` stays ``input`` (FX's namespace alone would make it ``input_1``)."""
    tep = torch.export.export(_TNamed(), (torch.randn(2, 3), torch.randn(2, 3)))
    theirs = [n.name for n in tep.graph.nodes if n.op == "placeholder"]
    ep = ember.export.export(_Named(), (ember.randn(2, 3), ember.randn(2, 3)))
    assert [n.name for n in ep.graph.nodes if n.op == "placeholder"] == theirs == ["input", "other"]
    assert ep.graph_signature.user_inputs == list(tep.graph_signature.user_inputs)
    prog = ember.onnx.export(_Named(), (ember.randn(2, 3), ember.randn(2, 3)))
    assert [i.name for i in prog.model_proto.graph.input] == theirs
    a, b = _draw(2, 3), _draw(2, 3)
    np.testing.assert_allclose(run_ort(prog.model_proto, [a, b])[0], a * 2 + b, rtol=1e-6)
    # the program still runs, prints and round-trips with that name
    x = ember.randn(2, 3)
    np.testing.assert_allclose(np_of(ep.module()(x, x)), np_of(x) * 3, rtol=1e-6)
    assert "def forward(self, input, other)" in ep.graph_module.code
    import io
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    loaded = ember.export.load(buf)
    assert [n.name for n in loaded.graph.nodes if n.op == "placeholder"] == ["input", "other"]
    np.testing.assert_allclose(np_of(loaded.module()(x, x)), np_of(x) * 3, rtol=1e-6)


# ---------------------------------------------------------------------- boolean masks
def test_boolean_mask_indexing_is_refused_naming_it():
    """torch.export traces ``x[x > 0]`` with an unbacked size; ember.export has no data-dependent
    sizes, so the export stops with an error naming the construct."""
    with pytest.raises(Exception, match="boolean-mask indexing"):
        ember.onnx.export(Fn(lambda x: x[x > 0]), (ember.randn(4, 3),))


def test_derived_dims_reach_onnx_as_expressions():
    class Pairs(ember.nn.Module):
        def forward(self, x, y):
            return x.reshape(-1, 2).sum(1) + y
    dx = Dim("dx", max=10)
    prog = check_export(Pairs(), (ember.randn(8), ember.randn(4)),
                        others=[(ember.randn(12), ember.randn(6)), (ember.randn(20), ember.randn(10))],
                        dynamic_shapes={"x": {0: 2 * dx}, "y": {0: dx}})
    dims = [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in prog.model_proto.graph.input]
    assert dims == [["2*dx"], ["dx"]]
