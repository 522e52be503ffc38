"""aot with traceable wrapper subclass inputs (ember/aot/subclass.py): subclass inputs are
flattened into their inner tensors at the graph boundary, the joint graph is traced through the
subclass's ``__torch_dispatch__`` (plain ops only), subclass outputs are rebuilt with
``__tensor_unflatten__``; gradients equal eager's; what cannot be flattened runs eagerly or
raises a clear error."""
import importlib.util
import os

import numpy as np
import pytest

import ember
from ember.aot import aot_autograd
from ember.aot.subclass import flatten, meta_of, unflatten

_spec = importlib.util.spec_from_file_location(
    "_subclass_defs", os.path.join(os.path.dirname(__file__), "..", "dynamo", "test_subclass_compile.py"))
_defs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_defs)
TwoTensor, Scaled = _defs.TwoTensor, _defs.Scaled


def _rand(*shape, rng):
    return ember.tensor(rng.standard_normal(shape).astype(np.float32))


def _nested(rng, *shape):
    return TwoTensor(TwoTensor(_rand(*shape, rng=rng), _rand(*shape, rng=rng)),
                     TwoTensor(_rand(*shape, rng=rng), _rand(*shape, rng=rng)))


def _leaves(t):
    return [t] if type(t) is ember.Tensor else _leaves(t.a) + _leaves(t.b)


def _recording(graphs):
    def rec(gm, example_inputs):
        graphs.append(gm)
        return gm
    return aot_autograd(fw_compiler=rec, bw_compiler=rec)


def test_flatten_and_unflatten_round_trip_nested_and_with_context():
    rng = np.random.default_rng()
    x = _nested(rng, 2, 3)
    m = meta_of(x)
    assert m.n_flat == 4 and m.attrs == ["a", "b"] and m.inner[0].cls is TwoTensor
    flat = flatten(x, m)
    assert [f is g for f, g in zip(flat, _leaves(x))] == [True] * 4
    y = unflatten(iter(flat), m)
    assert type(y) is TwoTensor and y.a.b is x.a.b and tuple(y.shape) == (2, 3)
    s = Scaled(ember.tensor(rng.integers(-5, 5, (4,)).astype(np.int8)), ember.tensor(0.5), tag="t")
    ms = meta_of(s)
    assert ms.ctx == {"tag": "t"} and unflatten(iter(flatten(s, ms)), ms).tag == "t"
    assert meta_of(ember.zeros(2)) is None
    assert ms.same_structure(meta_of(Scaled(s.data_, ember.tensor(2.0), tag="t")))
    assert not ms.same_structure(meta_of(Scaled(s.data_, ember.tensor(2.0), tag="u")))


def test_nested_subclass_graph_is_traced_flat_and_matches_eager():
    rng = np.random.default_rng()

    def f(x, y):
        return (x * y).sin(), (x + 1).sum(0)
    gm = ember.fx.symbolic_trace(f)
    for _ in range(2):
        x, y = _nested(rng, 3, 2), _nested(rng, 3, 2)
        x.requires_grad_(True)
        graphs = []
        run = _recording(graphs)(gm, [x, y])
        got = run(x, y)
        want = f(x, y)
        fw, bw = graphs
        assert len([n for n in fw.graph.nodes if n.op == "placeholder"]) == 8     # 4 + 4 inner tensors
        assert all(type(n.meta.get("val", ember.zeros(0))) is ember.Tensor for g in graphs for n in g.graph.nodes)
        for c, e in zip(got, want):
            assert type(c) is TwoTensor and type(c.a) is TwoTensor
            for cl, el in zip(_leaves(c), _leaves(e)):
                np.testing.assert_allclose(cl.numpy(), el.numpy(), rtol=1e-5, atol=1e-6)
        seed = [_rand(2, rng=rng) for _ in range(4)]
        tangent = TwoTensor(TwoTensor(seed[0], seed[1]), TwoTensor(seed[2], seed[3]))
        gx = ember.autograd.grad(got[1], [x], tangent)[0]
        ex = ember.autograd.grad(want[1], [x], tangent)[0]
        assert type(gx) is TwoTensor and type(gx.b) is TwoTensor
        for cl, el in zip(_leaves(gx), _leaves(ex)):
            np.testing.assert_allclose(cl.numpy(), el.numpy(), rtol=1e-5, atol=1e-6)


def test_input_mutation_through_the_subclass_reaches_its_inner_tensors():
    rng = np.random.default_rng()

    def f(x):
        x.mul_(2)
        return x + 1
    x = TwoTensor(_rand(4, rng=rng), _rand(4, rng=rng))
    ref = TwoTensor(x.a.clone(), x.b.clone())
    ember.compiler.reset()
    got = ember.compile(f, backend="aot_eager")(x)
    want = f(ref)
    for c, e in ((got, want), (x, ref)):
        assert type(c) is TwoTensor
        np.testing.assert_allclose(c.a.numpy(), e.a.numpy(), rtol=1e-6)
        np.testing.assert_allclose(c.b.numpy(), e.b.numpy(), rtol=1e-6)


def test_plain_gradient_for_a_subclass_output_raises_a_clear_error():
    rng = np.random.default_rng()
    gm = ember.fx.symbolic_trace(lambda x: (x * 3).sum())
    x = TwoTensor(_rand(3, rng=rng), _rand(3, rng=rng)).requires_grad_(True)
    out = aot_autograd(fw_compiler=lambda g, e: g)(gm, [x])(x)
    with pytest.raises(RuntimeError, match=r"gradient for a .*TwoTensor at a compiled graph's boundary is a "
                                           r"Tensor, not a .*TwoTensor"):
        out.backward(ember.ones(()))


def test_untraceable_handler_runs_the_graph_eagerly(caplog):
    """A handler that reads data fails on fake inner tensors: aot runs that graph eagerly (logged)."""
    pt = ember.utils._pytree

    class Clamped(TwoTensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            a = pt.tree_map(lambda x: x.a if isinstance(x, TwoTensor) else x, args)
            b = pt.tree_map(lambda x: x.b if isinstance(x, TwoTensor) else x, args)
            oa, ob = func(*a, **(kwargs or {})), func(*b, **(kwargs or {}))
            if isinstance(oa, ember.Tensor) and oa.dtype.is_floating_point and float(oa.abs().max()) > 1:
                oa = oa / float(oa.abs().max())
            return Clamped(oa, ob) if isinstance(oa, ember.Tensor) else oa

        @staticmethod
        def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
            return Clamped(inner["a"], inner["b"], outer_size, outer_stride)

    rng = np.random.default_rng()
    gm = ember.fx.symbolic_trace(lambda x: x * 3)
    x = Clamped(_rand(5, rng=rng), _rand(5, rng=rng))
    import logging
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        got = aot_autograd(fw_compiler=lambda g, e: g)(gm, [x])(x)
    want = x * 3
    assert type(got) is Clamped and "eagerly" in caplog.text
    np.testing.assert_allclose(got.a.numpy(), want.a.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.b.numpy(), want.b.numpy(), rtol=1e-6)


def test_output_gradient_with_another_flatten_context_raises():
    """The compiled backward was traced for a tangent shaped like the output (its flatten context
    included): a gradient with another context cannot be fed to it."""
    pt = ember.utils._pytree

    class Labelled(TwoTensor):
        @staticmethod
        def __new__(cls, a, b, label="p"):
            return TwoTensor.__new__(cls, a, b)

        def __init__(self, a, b, label="p"):
            super().__init__(a, b)
            self.label = label

        def __tensor_flatten__(self):
            return ["a", "b"], self.label

        @staticmethod
        def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
            return Labelled(inner["a"], inner["b"], ctx)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            label = next(x.label for x in args if isinstance(x, Labelled))
            a = func(*pt.tree_map(lambda x: x.a if isinstance(x, TwoTensor) else x, args), **(kwargs or {}))
            b = func(*pt.tree_map(lambda x: x.b if isinstance(x, TwoTensor) else x, args), **(kwargs or {}))
            return Labelled(a, b, label) if isinstance(a, ember.Tensor) else a

    rng = np.random.default_rng()
    gm = ember.fx.symbolic_trace(lambda x: x * 2)
    x = Labelled(_rand(3, rng=rng), _rand(3, rng=rng)).requires_grad_(True)
    run = aot_autograd(fw_compiler=lambda g, e: g)(gm, [x])
    out = run(x)
    assert type(out) is Labelled and out.label == "p"
    out.backward(Labelled(ember.ones(3), ember.ones(3) * 2, "p"))          # as traced: fine
    np.testing.assert_allclose(x.grad.a.numpy(), np.full(3, 2.0))
    np.testing.assert_allclose(x.grad.b.numpy(), np.full(3, 4.0))
    with pytest.raises(RuntimeError, match="traced for a gradient shaped like the output"):
        run(x).backward(Labelled(ember.ones(3), ember.ones(3), "q"))
