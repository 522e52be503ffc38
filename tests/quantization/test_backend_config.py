"""ember.ao.quantization.backend_config against torch's: the config classes' dict forms and
reprs, the method-name patterns and observation types of the built-in backends, and a custom
BackendConfig steering prepare_fx as torch's does."""
import operator

import numpy as np
import pytest

import ember
import ember.nn as enn
from ember.ao import quantization as eq
from ember.ao.quantization import backend_config as eb
from ember.ao.quantization import quantize_fx as eqfx

torch = pytest.importorskip("torch")
import torch.ao.quantization.quantize_fx as tqfx  # noqa: E402  (loads torch's backend_config utils)
import torch.nn as tnn  # noqa: E402
from torch.ao import quantization as tq  # noqa: E402
from torch.ao.quantization import backend_config as tb  # noqa: E402
from torch.ao.quantization.backend_config import executorch as t_executorch, x86 as t_x86  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")

_DTYPES = [("quint8", "quint8"), ("qint8", "qint8"), ("float16", "float16"), ("float32", "float"),
           ("qint32", "qint32")]


def _t(dtype_name):
    return getattr(torch, dtype_name)


def _e(dtype_name):
    return getattr(ember, dtype_name)


def _normalize(obj):
    """A dict form with dtypes and enum members as comparable strings."""
    if isinstance(obj, dict):
        return {k: _normalize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_normalize(v) for v in obj)
    if isinstance(obj, (torch.dtype, ember.dtype)):
        return str(obj).split(".")[-1]
    if hasattr(obj, "name") and hasattr(obj, "value") and type(obj).__name__ == "ObservationType":
        return ("ObservationType", obj.name, obj.value)
    if type(obj).__name__ == "DTypeWithConstraints":
        return ("DTypeWithConstraints", _normalize(obj.dtype), obj.quant_min_lower_bound, obj.quant_max_upper_bound,
                obj.scale_min_lower_bound, obj.scale_max_upper_bound, obj.scale_exact_match,
                obj.zero_point_exact_match)
    return obj


def test_observation_type_members():
    assert [(m.name, m.value) for m in eb.ObservationType] == [(m.name, m.value) for m in tb.ObservationType]


@pytest.mark.parametrize("seed", range(4))
def test_dtype_config_dicts(seed):
    rng = np.random.default_rng(seed)
    names = ["quint8", "qint8", "float16", "float32", None]
    pick = [names[i] for i in rng.integers(0, len(names), 4)]
    dyn = [None, True, False][int(rng.integers(0, 3))]
    kw_e = {k: (None if n is None else _e(n)) for k, n in zip(("input_dtype", "output_dtype", "weight_dtype",
                                                                  "bias_dtype"), pick)}
    kw_t = {k: (None if n is None else _t(n)) for k, n in zip(("input_dtype", "output_dtype", "weight_dtype",
                                                                  "bias_dtype"), pick)}
    e, t = eb.DTypeConfig(**kw_e, is_dynamic=dyn), tb.DTypeConfig(**kw_t, is_dynamic=dyn)
    assert _normalize(e.to_dict()) == _normalize(t.to_dict())
    assert _normalize(eb.DTypeConfig.from_dict(e.to_dict()).to_dict()) == _normalize(e.to_dict())
    assert e.input_dtype == kw_e["input_dtype"] and e.weight_dtype == kw_e["weight_dtype"]


def test_dtype_with_constraints():
    e = eb.DTypeWithConstraints(dtype=ember.qint8, quant_min_lower_bound=-127, scale_exact_match=1 / 256)
    t = tb.DTypeWithConstraints(dtype=torch.qint8, quant_min_lower_bound=-127, scale_exact_match=1 / 256)
    assert _normalize(e) == _normalize(t)
    conf = eb.DTypeConfig(input_dtype=e)
    assert conf.input_dtype is ember.qint8 and conf.input_dtype_with_constraints is e
    with pytest.raises(ValueError, match="input_dtype"):
        eb.DTypeConfig.from_dict({"input_dtype": "int8"})


def test_backend_pattern_config_dicts():
    e = (eb.BackendPatternConfig((enn.Linear, enn.ReLU)).set_observation_type(
        eb.ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT).add_dtype_config(eb.DTypeConfig(input_dtype=ember.quint8))
        .set_root_module(enn.Linear)._set_input_type_to_index({"weight": 1}))
    t = (tb.BackendPatternConfig((tnn.Linear, tnn.ReLU)).set_observation_type(
        tb.ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT).add_dtype_config(tb.DTypeConfig(input_dtype=torch.quint8))
        .set_root_module(tnn.Linear)._set_input_type_to_index({"weight": 1}))
    ed, td = e.to_dict(), t.to_dict()
    assert sorted(ed) == sorted(td)
    assert _normalize(ed["dtype_configs"]) == _normalize(td["dtype_configs"])
    assert _normalize(ed["observation_type"]) == _normalize(td["observation_type"])
    back = eb.BackendPatternConfig.from_dict(ed)
    assert back.pattern == (enn.Linear, enn.ReLU) and back.root_module is enn.Linear
    assert back._input_type_to_index == {"weight": 1}
    with pytest.raises(ValueError, match="Only one of 'pattern' or 'pattern_complex_format' can be set"):
        eb.BackendPatternConfig(enn.Linear)._set_pattern_complex_format(enn.Linear)
    with pytest.raises(ValueError, match="Only one of 'pattern' or 'pattern_complex_format' can be set"):
        tb.BackendPatternConfig(tnn.Linear)._set_pattern_complex_format(tnn.Linear)


def test_backend_config_dict_round_trip():
    conf = eb.get_native_backend_config()
    d = conf.to_dict()
    assert sorted(d) == sorted(tb.get_native_backend_config().to_dict()) == ["configs", "name"]
    back = eb.BackendConfig.from_dict(d)
    assert back.name == "native" and len(back.configs) == len(conf.configs)
    assert [c.pattern for c in back.configs] == [c.pattern for c in conf.configs]
    with pytest.raises(ValueError, match="configs"):
        eb.BackendConfig.from_dict({"configs": [3]})


_GETTERS = [("get_native_backend_config", tb.get_native_backend_config),
            ("get_fbgemm_backend_config", tb.get_fbgemm_backend_config),
            ("get_qnnpack_backend_config", tb.get_qnnpack_backend_config),
            ("get_x86_backend_config", t_x86.get_x86_backend_config),
            ("get_tensorrt_backend_config", tb.get_tensorrt_backend_config),
            ("get_executorch_backend_config", t_executorch.get_executorch_backend_config)]


@pytest.mark.parametrize("name,torch_getter", _GETTERS)
def test_builtin_backend_names_and_method_patterns(name, torch_getter):
    e, t = getattr(eb, name)(), torch_getter()
    assert e.name == t.name
    t_methods = {c.pattern: c.observation_type.name for c in t.configs if isinstance(c.pattern, str)}
    e_methods = {c.pattern: c.observation_type.name for c in e.configs if isinstance(c.pattern, str)}
    assert e_methods == t_methods


def _find(conf, pattern):
    for c in conf.configs:
        if c.pattern == pattern:
            return c
    return None


@pytest.mark.parametrize("e_pat,t_pat", [
    (enn.Linear, tnn.Linear), (enn.Conv2d, tnn.Conv2d), ((enn.Conv2d, enn.BatchNorm2d, enn.ReLU),
                                                         (tnn.Conv2d, tnn.BatchNorm2d, tnn.ReLU)),
    ((enn.Linear, enn.ReLU), (tnn.Linear, tnn.ReLU)), (enn.ReLU, tnn.ReLU), (enn.MaxPool2d, tnn.MaxPool2d),
    (enn.Sigmoid, tnn.Sigmoid), (enn.BatchNorm2d, tnn.BatchNorm2d), (operator.add, operator.add),
    (ember.cat, torch.cat), (ember.add, torch.add), ((operator.add, enn.ReLU), (operator.add, tnn.ReLU)),
    (enn.LayerNorm, tnn.LayerNorm), (enn.Hardswish, tnn.Hardswish)])
def test_native_pattern_semantics_match_torch(e_pat, t_pat):
    e, t = _find(eb.get_native_backend_config(), e_pat), _find(tb.get_native_backend_config(), t_pat)
    assert e is not None and t is not None
    assert e.observation_type.name == t.observation_type.name
    assert (e.fuser_method is None) == (t.fuser_method is None)
    assert (e.root_module is None) == (t.root_module is None)
    if t.fused_module is not None:
        assert e.fused_module.__name__ == t.fused_module.__name__
    assert {(str(d.input_dtype), str(d.weight_dtype), bool(d.is_dynamic)) for d in e.dtype_configs} == \
        {(str(d.input_dtype).replace("torch", "ember"), str(d.weight_dtype).replace("torch", "ember"),
          bool(d.is_dynamic)) for d in t.dtype_configs}
    assert {k: v.name for k, v in e._num_tensor_args_to_observation_type.items()} == \
        {k: v.name for k, v in t._num_tensor_args_to_observation_type.items()}


def _linear_only(b, nn, lib_dtype):
    dc = b.DTypeConfig(input_dtype=lib_dtype.quint8, output_dtype=lib_dtype.quint8, weight_dtype=lib_dtype.qint8,
                       bias_dtype=lib_dtype.float)
    return b.BackendConfig("linear_only").set_backend_pattern_config(
        b.BackendPatternConfig(nn.Linear).add_dtype_config(dc).set_root_module(nn.Linear))


def _mlp(nn):
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.relu, self.fc2 = nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))
    return MLP


def _ops(gm):
    return [(n.op, n.target if n.op != "call_function" else n.target.__name__) for n in gm.graph.nodes]


def test_custom_backend_config_steers_prepare_as_torch():
    """Only nn.Linear in the backend: no fusion with the ReLU, the ReLU unobserved -- as torch."""
    torch.backends.quantized.engine = "x86"
    tm, em = _mlp(tnn)().eval(), _mlp(enn)().eval()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    t_ex, e_ex = (torch.randn(2, 4),), (ember.randn(2, 4),)
    tp = tqfx.prepare_fx(tm, tq.get_default_qconfig_mapping(), t_ex, backend_config=_linear_only(tb, tnn, torch))
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping(), e_ex, backend_config=_linear_only(eb, enn, ember))
    assert _ops(ep) == _ops(tp)
    assert [type(m).__name__ for m in ep.children()] == [type(m).__name__ for m in tp.children()]
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        tp(torch.tensor(x))
        ep(ember.tensor(x))
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t_out = tc(torch.tensor(x)).numpy()
    np.testing.assert_allclose(np.asarray(ec(ember.tensor(x)).numpy()), t_out,
                               atol=float(np.max(np.diff(np.unique(t_out)))) * 1.01, rtol=0)


def test_backend_pattern_getters_refused():
    conf = eb.BackendConfig("x").set_backend_pattern_config(
        eb.BackendPatternConfig(enn.Linear).add_dtype_config(eb.DTypeConfig(input_dtype=ember.quint8))
        ._set_root_node_getter(lambda p: p))
    with pytest.raises(NotImplementedError, match="root_node_getter"):
        eqfx.prepare_fx(_mlp(enn)().eval(), eq.get_default_qconfig_mapping(), (ember.randn(2, 4),),
                        backend_config=conf)
