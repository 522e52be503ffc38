"""ember.onnx's TorchScript-era names, ExportableModule and InputObserver against torch.onnx."""
import numpy as np
import pytest

import ember
import ember.onnx as eo

torch = pytest.importorskip("torch")
import torch.onnx as to  # noqa: E402


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - compared
        return type(e).__name__, str(e)
    return None


def test_enums_match_torch():
    for name in ("TensorProtoDataType", "OperatorExportTypes", "JitScalarType"):
        e, t = getattr(eo, name), getattr(to, name)
        assert [(m.name, int(m.value)) for m in e] == [(m.name, int(m.value)) for m in t.__members__.values()]
    assert repr(eo.TensorProtoDataType.FLOAT) == repr(to.TensorProtoDataType.FLOAT)
    assert str(eo.OperatorExportTypes.ONNX_ATEN) == str(to.OperatorExportTypes.ONNX_ATEN)


def test_jit_scalar_type_conversions_match_torch():
    for em, tm in zip(eo.JitScalarType, to.JitScalarType):
        assert em.scalar_name() == tm.scalar_name()
        assert em.onnx_type().name == tm.onnx_type().name
        assert em.onnx_compatible() == tm.onnx_compatible()
        if em.name == "UNDEFINED":
            with pytest.raises(KeyError):
                em.torch_name()
            continue
        assert em.torch_name() == tm.torch_name()
        if em.name == "COMPLEX32":
            with pytest.raises(TypeError, match="complex32"):     # ember has no complex32 tensors
                em.dtype()
            continue
        assert str(em.dtype()).replace("ember.", "torch.") == str(tm.dtype())
        assert eo.JitScalarType.from_dtype(em.dtype()) == em
    for n in range(0, 21):
        assert _err(lambda: eo.JitScalarType.from_onnx_type(n)) is None or n in (0, 4, 8, 12, 13)
        if _err(lambda: to.JitScalarType.from_onnx_type(n)) is None:
            assert eo.JitScalarType.from_onnx_type(n).name == to.JitScalarType.from_onnx_type(n).name
    assert _err(lambda: eo.JitScalarType.from_onnx_type(99))[1] == _err(lambda: to.JitScalarType.from_onnx_type(99))[1]
    assert _err(lambda: eo.JitScalarType.from_dtype(None))[1] == _err(lambda: to.JitScalarType.from_dtype(None))[1]
    assert eo.JitScalarType.from_value(ember.zeros(2, dtype=ember.int8)) == eo.JitScalarType.INT8
    assert eo.JitScalarType.from_value(None, eo.JitScalarType.FLOAT) == eo.JitScalarType.FLOAT
    assert _err(lambda: eo.JitScalarType.from_value(3))[1] == _err(lambda: to.JitScalarType.from_value(3))[1]


def test_custom_op_symbolic_name_checks_match_torch():
    for name in ["foo", "aten::foo", "::foo", "a::b::c", "my-dom::x", "onnx::Add", "dom::", "::", "d::9x"]:
        got = _err(lambda: eo.register_custom_op_symbolic(name, lambda g: None, 18))
        exp = _err(lambda: to.register_custom_op_symbolic(name, lambda g: None, 18))
        assert (got and got[0]) == (exp and exp[0]) and (got and got[1]) == (exp and exp[1])
        assert _err(lambda: eo.unregister_custom_op_symbolic(name, 18)) == \
            _err(lambda: to.unregister_custom_op_symbolic(name, 18))
    fn = lambda g, x: x  # noqa: E731
    eo.register_custom_op_symbolic("::relu6x", fn, 18)
    assert eo._legacy.registered_custom_op_symbolics()[("aten::relu6x", 18)] is fn
    eo.unregister_custom_op_symbolic("aten::relu6x", 18)
    assert ("aten::relu6x", 18) not in eo._legacy.registered_custom_op_symbolics()


def test_select_model_mode_for_export_matches_torch():
    for mode in ("TRAINING", "EVAL", "PRESERVE"):
        for start in (True, False):
            em, tm = ember.nn.Linear(2, 2), torch.nn.Linear(2, 2)
            em.train(start)
            tm.train(start)
            with eo.select_model_mode_for_export(em, eo.TrainingMode[mode]), \
                    to.select_model_mode_for_export(tm, getattr(to.TrainingMode, mode)):
                assert em.training == tm.training
            assert em.training == tm.training == start
    with pytest.raises(TypeError, match="'mode' should be a torch.onnx.TrainingMode enum"):
        with eo.select_model_mode_for_export(ember.nn.Linear(1, 1), 1):
            pass


def test_producer_names():
    assert eo.producer_name == "ember" and isinstance(eo.producer_version, str)


pytest.importorskip("onnx")


class _Flagged(ember.nn.Module):
    def forward(self, x):
        self.seen = eo.is_in_onnx_export()
        return x * 2


def test_is_in_onnx_export_only_during_export():
    m = _Flagged()
    assert not eo.is_in_onnx_export()
    m(ember.randn(2))
    assert m.seen is False
    eo.export(m, (ember.randn(2, 3),))
    assert m.seen is True
    assert not eo.is_in_onnx_export()


def test_exportable_module_exports_itself():
    class Doubler(eo.ExportableModule):
        def forward(self, x):
            return x * 2

        def example_arguments(self):
            return (ember.randn(2, 3),), None

        def input_names(self):
            return ("inp",)

        def output_names(self):
            return ("out",)

    with pytest.raises(TypeError, match="abstract"):
        type("Bare", (eo.ExportableModule,), {"forward": lambda self, x: x})()
    for program in (Doubler().to_onnx(), eo.export(Doubler())):
        graph = program.model_proto.graph
        assert [i.name for i in graph.input] == ["inp"] and [o.name for o in graph.output] == ["out"]
        x = np.random.randn(2, 3).astype(np.float32)
        import onnx.reference
        (y,) = onnx.reference.ReferenceEvaluator(program.model_proto).run(None, {"inp": x})
        np.testing.assert_allclose(y, 2 * x)


def test_exportable_module_supplies_dynamic_shapes_and_explicit_options_win(monkeypatch):
    seen = []
    monkeypatch.setattr(eo._exporter, "_export", lambda model, args, f, **options: seen.append((args, options)))
    batch = ember.export.Dim("batch")

    class Dyn(eo.ExportableModule):
        def forward(self, x):
            return x

        def example_arguments(self):
            return (ember.ones(2, 3),), {"scale": 1.0}

        def dynamic_shapes(self):
            return ({0: batch},)

        def input_names(self):
            return ["a"]
    Dyn().to_onnx()
    Dyn().to_onnx(input_names=["mine"])
    eo.export(Dyn(), (ember.ones(4, 3),))          # given inputs: the module supplies nothing
    (a0, o0), (a1, o1), (a2, o2) = seen
    assert a0[0].shape == (2, 3) and o0["kwargs"] == {"scale": 1.0}
    assert o0["dynamic_shapes"] == ({0: batch},) and o0["input_names"] == ["a"] and o0["output_names"] is None
    assert o1["input_names"] == ["mine"]
    assert a2[0].shape == (4, 3) and "dynamic_shapes" not in o2


class _Add(ember.nn.Module):
    def forward(self, x, y=None, z=3):
        return x * 2 if y is None else x + y


class _TAdd(torch.nn.Module):
    def forward(self, x, y=None, z=3):
        return x * 2 if y is None else x + y


def _observe(mod, calls, lib):
    obs = (eo if lib is ember else to).InputObserver()
    with obs(mod):
        for args, kwargs in calls:
            mod(*[lib.tensor(a) for a in args], **{k: lib.tensor(v) for k, v in kwargs.items()})
    return obs


def _shapes_str(s):
    return repr(s)


@pytest.mark.parametrize("calls", [
    [((np.random.randn(2, 3), np.random.randn(2, 3)), {}), ((np.random.randn(4, 3), np.random.randn(4, 3)), {}),
     ((np.random.randn(5, 3), np.random.randn(5, 3)), {}), ((np.random.randn(6, 3), np.random.randn(6, 3)), {})],
    [((np.random.randn(2, 3),), {})],
    [((), {"x": np.random.randn(2, 3), "y": np.random.randn(2, 3)}),
     ((), {"x": np.random.randn(4, 3), "y": np.random.randn(4, 3)})],
    [((np.random.randn(2, 3, 7),), {}), ((np.random.randn(2, 5, 7),), {})],
])
def test_input_observer_matches_torch(calls):
    eobs, tobs = _observe(_Add(), calls, ember), _observe(_TAdd(), calls, torch)
    assert eobs.num_obs() == tobs.num_obs()
    assert repr(eobs.infer_dynamic_shapes()) == repr(tobs.infer_dynamic_shapes())
    assert repr(eobs.infer_dynamic_shapes(set_batch_dimension_for=True)) == \
        repr(tobs.infer_dynamic_shapes(set_batch_dimension_for=True))
    ea, ta = eobs.infer_arguments(), tobs.infer_arguments()
    assert type(ea) is type(ta)
    for e, t in (zip(ea.values(), ta.values()) if isinstance(ea, dict) else zip(ea, ta)):
        np.testing.assert_allclose(e.numpy(), t.numpy())


def test_input_observer_errors():
    obs = eo.InputObserver()
    assert _err(obs.infer_arguments) == _err(to.InputObserver().infer_arguments)
    with pytest.raises(ValueError, match="does not have a method 'nope'"):
        with obs(_Add(), method_name="nope"):
            pass
    m = _Add()
    with obs(m):
        m(ember.randn(2, 3))
        m(x=ember.randn(2, 3))
    assert "forward" not in vars(m)          # the observer's wrapper is gone
    with pytest.raises(NotImplementedError, match="different arguments"):
        obs.infer_dynamic_shapes()
