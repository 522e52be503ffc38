"""ember.ao.quantization's names beyond the core flows -- QConfigMapping and the default mappings,
fixed-qparams / recording / reuse-input observers, the 4-bit and debug qconfigs, the fuser
methods, the module mappings, QuantType, add_quant_dequant -- against torch 2.13."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.ao.quantization as eq

torch = pytest.importorskip("torch")
import torch.ao.quantization as tq  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")

NAMES = ["QConfigMapping", "get_default_qconfig_mapping", "get_default_qat_qconfig_mapping", "qconfig_mapping",
         "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_convtranspose_bn", "get_fuser_method",
         "get_fuser_method_new", "fuser_method_mappings", "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS",
         "DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS",
         "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS", "DEFAULT_MODULE_TO_ACT_POST_PROCESS",
         "DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS", "get_default_static_quant_module_mappings",
         "get_default_qat_module_mappings", "get_default_dynamic_quant_module_mappings",
         "get_static_quant_module_class", "get_dynamic_quant_module_class", "FixedQParamsObserver",
         "FixedQParamsFakeQuantize", "default_fixed_qparams_range_0to1_observer",
         "default_fixed_qparams_range_neg1to1_observer", "default_symmetric_fixed_qparams_observer",
         "default_affine_fixed_qparams_observer", "default_fixed_qparams_range_0to1_fake_quant",
         "default_fixed_qparams_range_neg1to1_fake_quant", "default_symmetric_fixed_qparams_fake_quant",
         "default_affine_fixed_qparams_fake_quant", "RecordingObserver", "ReuseInputObserver",
         "default_reuse_input_observer", "default_reuse_input_qconfig", "default_debug_observer",
         "default_debug_qconfig", "float_qparams_weight_only_qconfig_4bit", "default_float_qparams_observer_4bit",
         "default_embedding_fake_quant_4bit", "default_embedding_qat_qconfig_4bit",
         "default_symmetric_qnnpack_qat_qconfig", "default_per_channel_symmetric_qnnpack_qat_qconfig",
         "add_quant_dequant", "no_observer_set", "QuantType", "quant_type", "get_quantized_operator",
         "get_default_qconfig_propagation_list", "get_default_compare_output_module_list",
         "get_default_float_to_quantized_operator_mappings", "get_default_qconfig_dict",
         "get_default_qat_qconfig_dict", "quantization_mappings"]


@pytest.mark.parametrize("ns", ["ember.ao.quantization", "ember.quantization"])
def test_names_present(ns):
    import importlib
    mod = importlib.import_module(ns)
    assert all(hasattr(tq, n) for n in NAMES)           # (the list is torch's)
    missing = [n for n in NAMES if not hasattr(mod, n)]
    assert not missing


def _name(obj):
    """A comparable name for a mapping key / value across the two libraries."""
    if isinstance(obj, str):
        return obj
    return getattr(obj, "__name__", repr(obj))


def _partial_desc(ctor):
    """(class name, keywords with dtypes / qschemes as strings) of an observer constructor."""
    p = getattr(ctor, "p", None)
    if p is None:
        return (_name(ctor), {})
    kw = {}
    for k, v in p.keywords.items():
        if hasattr(v, "p") or isinstance(v, type):
            v = _partial_desc(v)
        elif not isinstance(v, (int, float, bool, type(None))):
            v = str(v).replace("torch.", "").replace("ember.", "")
        kw[k] = v
    return (_name(p.func), kw)


def _qconfig_desc(qc):
    return None if qc is None else (_partial_desc(qc.activation), _partial_desc(qc.weight))


@pytest.mark.parametrize("qat", [False, True])
@pytest.mark.parametrize("backend", ["x86", "fbgemm", "qnnpack", "onednn"])
def test_default_qconfig_mapping_matches_torch(backend, qat):
    if qat:
        em, tm = eq.get_default_qat_qconfig_mapping(backend), tq.get_default_qat_qconfig_mapping(backend)
    else:
        em, tm = eq.get_default_qconfig_mapping(backend), tq.get_default_qconfig_mapping(backend)
    assert _qconfig_desc(em.global_qconfig) == _qconfig_desc(tm.global_qconfig)
    ekeys = [_name(k) for k in em.object_type_qconfigs]
    tkeys = [_name(k) for k in tm.object_type_qconfigs]
    assert ekeys == tkeys
    for (ek, ev), (tk, tv) in zip(em.object_type_qconfigs.items(), tm.object_type_qconfigs.items()):
        assert _qconfig_desc(ev) == _qconfig_desc(tv), ek
    # one shared qconfig object per fixed-qparams observer, as torch
    assert em.object_type_qconfigs["sigmoid"] is em.object_type_qconfigs[ember.nn.Sigmoid]
    assert em.object_type_qconfigs["tanh"] is not em.object_type_qconfigs["sigmoid"]
    if qat:
        with pytest.raises(AssertionError, match="Version number: 7 in get_default_qat_qconfig"):
            eq.get_default_qat_qconfig_mapping(backend, 7)
    with pytest.raises(AssertionError, match="backend: cuda not supported"):
        eq.get_default_qconfig_mapping("cuda")


def test_qconfig_mapping_api_and_repr():
    qc1, qc2 = eq.default_qconfig, eq.default_dynamic_qconfig
    m = (eq.QConfigMapping().set_global(qc1).set_object_type(ember.nn.Linear, qc2)
         .set_module_name_regex("foo.*bar", qc1).set_module_name_regex("foo.*", qc2)
         .set_module_name("mod1", None).set_module_name_object_type_order("foo.bar", ember.nn.functional.linear, 0,
                                                                           qc2))
    m.set_module_name_regex("foo.*bar", qc2)            # re-set keeps its place
    assert list(m.module_name_regex_qconfigs) == ["foo.*bar", "foo.*"]
    d = m.to_dict()
    assert set(d) == {"", "object_type", "module_name_regex", "module_name", "module_name_object_type_order"}
    assert d["module_name_object_type_order"] == [("foo.bar", ember.nn.functional.linear, 0, qc2)]
    back = eq.QConfigMapping.from_dict(d)
    assert back.to_dict() == d
    # repr: the same layout as torch's for string keys and None qconfigs
    e = eq.QConfigMapping().set_object_type("reshape", None).set_module_name("a.b", None)
    t = tq.QConfigMapping().set_object_type("reshape", None).set_module_name("a.b", None)
    assert repr(e) == repr(t)
    with pytest.warns(FutureWarning, match="get_default_qconfig_dict` is deprecated"):
        dd = eq.get_default_qconfig_dict()
    assert _qconfig_desc(dd[""]) == _qconfig_desc(tq.get_default_qconfig_mapping().global_qconfig)
    with pytest.warns(FutureWarning, match="get_default_qat_qconfig_dict` is deprecated"):
        eq.get_default_qat_qconfig_dict("qnnpack")


@pytest.mark.parametrize("name", ["default_debug_qconfig", "float_qparams_weight_only_qconfig_4bit",
                                  "default_embedding_qat_qconfig_4bit", "default_symmetric_qnnpack_qat_qconfig",
                                  "default_per_channel_symmetric_qnnpack_qat_qconfig", "default_reuse_input_qconfig"])
def test_new_qconfigs_match_torch(name):
    assert _qconfig_desc(getattr(eq, name)) == _qconfig_desc(getattr(tq, name))


def _rand(rng, shape, lo=-1.5, hi=1.5):
    return rng.uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("which", ["range_0to1", "range_neg1to1"])
def test_fixed_qparams_observer_and_fake_quant(which):
    rng = np.random.default_rng(3)
    eo = getattr(eq, f"default_fixed_qparams_{which}_observer")()
    to = getattr(tq, f"default_fixed_qparams_{which}_observer")()
    x = _rand(rng, (4, 5))
    assert eo(ember.tensor(x)).numpy().tobytes() == x.tobytes()
    (es, ez), (ts, tz) = eo.calculate_qparams(), to.calculate_qparams()
    assert es.numpy().tobytes() == ts.numpy().tobytes() and ez.numpy().tolist() == tz.numpy().tolist()
    assert str(ez.dtype) == "ember.int32" and (eo.quant_min, eo.quant_max) == (to.quant_min, to.quant_max)
    assert sorted(eo.state_dict()) == sorted(to.state_dict())
    ef = getattr(eq, f"default_fixed_qparams_{which}_fake_quant")()
    tf = getattr(tq, f"default_fixed_qparams_{which}_fake_quant")()
    assert ef.scale is ef.activation_post_process.scale
    for _ in range(3):
        x = _rand(rng, (3, 7))
        xe = ember.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        ye, yt = ef(xe), tf(xt)
        assert ye.detach().numpy().tobytes() == yt.detach().numpy().tobytes()
        g = _rand(rng, (3, 7))
        ye.backward(ember.tensor(g))
        yt.backward(torch.tensor(g))
        assert xe.grad.numpy().tobytes() == xt.grad.numpy().tobytes()
    assert ef.calculate_qparams()[0] is ef.scale
    assert repr(ef).replace("ember", "torch") == repr(tf)
    with pytest.raises(AssertionError, match="FixedQParamsFakeQuantize's observer must be a FixedQParamsObserver"):
        eq.FixedQParamsFakeQuantize(eq.MovingAverageMinMaxObserver)
    with pytest.raises(NotImplementedError, match="FixedQParamsObserver doesn't support dynamic quantization"):
        eq.FixedQParamsObserver(0.1, 0, is_dynamic=True)


def test_recording_and_reuse_input_observers():
    rng = np.random.default_rng(4)
    rec = eq.default_debug_observer()
    xs = [ember.tensor(_rand(rng, (2, 3))) for _ in range(3)]
    for x in xs:
        assert rec(x) is x
    vals = rec.get_tensor_value()
    assert len(vals) == 3 and all(v is not x and np.array_equal(v.numpy(), x.numpy()) for v, x in zip(vals, xs))
    xs[0].add_(1.0)
    assert not np.array_equal(vals[0].numpy(), xs[0].numpy())         # a copy, not the tensor
    with pytest.raises(Exception, match="calculate_qparams should not be called for RecordingObserver"):
        rec.calculate_qparams()
    reuse = eq.ReuseInputObserver()
    assert reuse.dtype is ember.quint8 and reuse(xs[1]) is xs[1]
    with pytest.raises(Exception, match="calculate_qparams should not be called for ReuseInputObserver"):
        reuse.calculate_qparams()


def test_4bit_float_qparams_observer_matches_torch():
    rng = np.random.default_rng(5)
    eo, to = eq.default_float_qparams_observer_4bit(), tq.default_float_qparams_observer_4bit()
    for _ in range(2):
        w = _rand(rng, (6, 9), -2, 3)
        eo(ember.tensor(w))
        to(torch.tensor(w))
    (es, ez), (ts, tz) = eo.calculate_qparams(), to.calculate_qparams()
    assert (eo.quant_min, eo.quant_max) == (to.quant_min, to.quant_max) == (0, 15)
    assert es.numpy().tobytes() == ts.numpy().tobytes() and ez.numpy().tobytes() == tz.numpy().tobytes()
    ef, tf = eq.default_embedding_fake_quant_4bit(), tq.default_embedding_fake_quant_4bit()
    assert (ef.quant_min, ef.quant_max, str(ef.dtype)) == (tf.quant_min, tf.quant_max,
                                                           str(tf.dtype).replace("torch", "ember"))


def _conv_bn_pair(lib, conv_cls, bn_cls, rng, transpose=False):
    nn = lib.nn
    conv = getattr(nn, conv_cls)(3, 4, 3)
    bn = getattr(nn, bn_cls)(4)
    return conv, bn


def _copy_params(src_pairs, rng):
    """Same random values into matching ember / torch parameters and buffers."""
    for em, tm in src_pairs:
        with torch.no_grad():
            for (_, tp), (_, ep) in zip(list(tm.named_parameters()) + list(tm.named_buffers()),
                                        list(em.named_parameters()) + list(em.named_buffers())):
                if tp.dtype != torch.float32:
                    continue
                v = rng.uniform(0.5, 1.5, tuple(tp.shape)).astype(np.float32)
                tp.copy_(torch.tensor(v))
                ep.data = ember.tensor(v)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_fuse_conv_bn_methods_match_torch(dims):
    rng = np.random.default_rng(dims)
    mods = {}
    for lib, name in ((ember, "e"), (torch, "t")):
        nn = lib.nn
        mods[name] = [getattr(nn, f"Conv{dims}d")(3, 4, 3), getattr(nn, f"BatchNorm{dims}d")(4), nn.ReLU(),
                      getattr(nn, f"ConvTranspose{dims}d")(4, 3, 2), getattr(nn, f"BatchNorm{dims}d")(3)]
    for em, tm in zip(mods["e"], mods["t"]):
        em.eval(), tm.eval()
    _copy_params(zip(mods["e"], mods["t"]), rng)
    x = _rand(rng, (2, 3) + (6,) * dims)
    ec, ebn, erelu, ect, ebn2 = mods["e"]
    tc, tbn, trelu, tct, tbn2 = mods["t"]
    for ef, tf in ((eq.fuse_conv_bn(False, ec, ebn), tq.fuse_conv_bn(False, tc, tbn)),
                   (eq.fuse_conv_bn_relu(False, ec, ebn, erelu), tq.fuse_conv_bn_relu(False, tc, tbn, trelu))):
        assert type(ef).__name__ == type(tf).__name__
        np.testing.assert_allclose(ef(ember.tensor(x)).detach().numpy(), tf(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
    y = _rand(rng, (2, 4) + (5,) * dims)
    ef, tf = eq.fuse_convtranspose_bn(False, ect, ebn2), tq.fuse_convtranspose_bn(False, tct, tbn2)
    np.testing.assert_allclose(ef(ember.tensor(y)).detach().numpy(), tf(torch.tensor(y)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    fm = eq.get_fuser_method((type(ec), ember.nn.ReLU))
    fused = fm(False, ec, erelu)
    assert type(fused).__name__ == f"ConvReLU{dims}d"
    with pytest.raises(Exception, match="Fusing ConvTranspose\\+BatchNorm not yet supported in QAT."):
        eq.fuse_convtranspose_bn(True, ect.train(), ebn2.train())


def test_fuse_linear_bn_and_errors():
    rng = np.random.default_rng(11)
    el, ebn = ember.nn.Linear(5, 4).eval(), ember.nn.BatchNorm1d(4).eval()
    tl, tbn = torch.nn.Linear(5, 4).eval(), torch.nn.BatchNorm1d(4).eval()
    _copy_params([(el, tl), (ebn, tbn)], rng)
    x = _rand(rng, (3, 5))
    np.testing.assert_allclose(eq.fuse_linear_bn(False, el, ebn)(ember.tensor(x)).detach().numpy(),
                               tq.fuse_linear_bn(False, tl, tbn)(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(AssertionError, match=r"Linear and BN both must be in the same mode \(train or eval\)."):
        eq.fuse_linear_bn(False, el.train(), ebn)
    with pytest.raises(AssertionError, match=r"Conv and BN both must be in the same mode"):
        eq.fuse_conv_bn(False, ember.nn.Conv2d(1, 2, 1), ember.nn.BatchNorm2d(2).eval())
    with pytest.raises(AssertionError, match="did not find fuser method for"):
        eq.get_fuser_method((ember.nn.ReLU, ember.nn.Linear))
    custom = eq.get_fuser_method((ember.nn.ReLU, ember.nn.Linear), {(ember.nn.ReLU, ember.nn.Linear): "mine"})
    assert custom == "mine"
    assert eq.get_fuser_method_new((ember.nn.Linear, ember.nn.ReLU),
                                   eq.fuser_method_mappings._DEFAULT_OP_LIST_TO_FUSER_METHOD) is \
        eq.get_fuser_method((ember.nn.Linear, ember.nn.ReLU))
    # fuse_modules moves hooks as torch: the first module's pre-hooks, the last one's hooks
    m = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.ReLU()).eval()
    calls = []
    m[0].register_forward_pre_hook(lambda mod, inp: calls.append("pre"))
    m[1].register_forward_hook(lambda mod, inp, out: calls.append("post"))
    fused = eq.fuse_modules(m, ["0", "1"])
    fused(ember.randn(2, 3))
    assert calls == ["pre", "post"] and type(fused[1]).__name__ == "Identity"


def test_module_mappings():
    nn = ember.nn
    nnq = ember.ao.nn.quantized
    static = eq.DEFAULT_STATIC_QUANT_MODULE_MAPPINGS
    assert static[nn.Conv1d] is nnq.Conv1d and static[nn.Conv3d] is nnq.Conv3d and static[nn.Linear] is nnq.Linear
    assert static[eq.QuantStub] is nnq.Quantize
    assert eq.get_default_static_quant_module_mappings() == static
    assert eq.get_default_static_quant_module_mappings() is not static
    assert eq.get_default_dynamic_quant_module_mappings() is eq.DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS
    assert eq.get_default_dynamic_quant_module_mappings()[nn.LSTM] is nnq.dynamic.LSTM
    assert eq.get_static_quant_module_class(nn.Conv2d) is nnq.Conv2d
    assert eq.get_dynamic_quant_module_class(nn.GRU) is nnq.dynamic.GRU
    for e_fn, t_fn, e_cls, t_cls in ((eq.get_static_quant_module_class, tq.get_static_quant_module_class,
                                      nn.Tanh, torch.nn.Tanh),
                                     (eq.get_dynamic_quant_module_class, tq.get_dynamic_quant_module_class,
                                      nn.Tanh, torch.nn.Tanh)):
        with pytest.raises(AssertionError) as te:
            t_fn(t_cls)
        with pytest.raises(AssertionError) as ee:
            e_fn(e_cls)
        assert str(ee.value).replace(str(e_cls), str(t_cls)) == str(te.value)
    prop = eq.get_default_qconfig_propagation_list()
    assert {nn.Sequential, nn.Conv1d, nn.Linear, nn.LSTM, eq.QuantStub} <= prop
    cmp = eq.get_default_compare_output_module_list()
    assert prop <= cmp and nnq.Conv3d in cmp
    assert eq.no_observer_set() == {ember.ao.nn.quantizable.LSTM, ember.ao.nn.quantizable.MultiheadAttention}
    assert eq.DEFAULT_MODULE_TO_ACT_POST_PROCESS[nn.Sigmoid] is eq.default_fixed_qparams_range_0to1_fake_quant
    assert eq.DEFAULT_QAT_MODULE_MAPPINGS[nn.Conv2d] is ember.ao.nn.qat.Conv2d


def test_get_quantized_operator_matches_torch():
    rng = np.random.default_rng(6)
    x = _rand(rng, (3, 8), -2, 2)
    e = ember.quantize_per_tensor(ember.tensor(x), 0.02, 110, ember.quint8)
    t = torch.quantize_per_tensor(torch.tensor(x), 0.02, 110, torch.quint8)
    F, tF = ember.nn.functional, torch.nn.functional
    eo = eq.get_quantized_operator(F.elu)(e, 0.015, 120)
    to = tq.get_quantized_operator(tF.elu)(t, 0.015, 120)
    assert eo.int_repr().numpy().tobytes() == to.int_repr().numpy().tobytes()
    eo = eq.get_quantized_operator(F.hardswish)(e, 0.01, 30)
    to = tq.get_quantized_operator(tF.hardswish)(t, 0.01, 30)
    assert eo.int_repr().numpy().tobytes() == to.int_repr().numpy().tobytes()
    assert set(eq.get_default_float_to_quantized_operator_mappings()) == {F.elu, F.hardswish, F.leaky_relu}
    with pytest.raises(AssertionError, match="does not have corresponding quantized op"):
        eq.get_quantized_operator(F.gelu)


def test_quant_type_and_add_quant_dequant():
    assert [(q.name, int(q)) for q in eq.QuantType] == [(q.name, int(q)) for q in tq.QuantType]
    from ember.ao.quantization.quant_type import _get_quant_type_to_str, _quant_type_from_str
    assert _get_quant_type_to_str(eq.QuantType.QAT) == "qat" and _quant_type_from_str("weight_only") == 3
    with pytest.raises(ValueError, match="Unknown QuantType name 'x'"):
        _quant_type_from_str("x")
    nn = ember.nn
    m = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    m[0].qconfig = eq.default_qconfig
    m[1][1].qconfig = eq.default_qconfig
    out = eq.add_quant_dequant(m)
    assert out is m and type(m[0]).__name__ == "QuantWrapper" and type(m[1][0]).__name__ == "ReLU"
    assert type(m[1][1]).__name__ == "QuantWrapper" and isinstance(m[1][1].module, nn.Linear)
    assert isinstance(eq.add_quant_dequant(m[0].module), nn.Module)


def test_granularity_and_block_sizes_match_torch():
    shape = (4, 6, 8)
    for name, args in (("PerTensor", ()), ("PerAxis", (1,)), ("PerRow", ()), ("PerToken", ())):
        e, t = getattr(eq, name)(*args), getattr(tq, name)(*args)
        assert eq.get_block_size(shape, e) == tq.get_block_size(shape, t)
    assert eq.get_block_size((4, 8), eq.PerGroup(4)) == tq.get_block_size((4, 8), tq.PerGroup(4)) == (1, 4)
    assert eq.PerAxis(1) == eq.PerAxis(1) and eq.PerAxis(1) != eq.PerAxis(0)
    with pytest.raises(AssertionError, match="Expecting input shape dim to be 2 for per group quantization"):
        eq.get_block_size(shape, eq.PerGroup(4))
    with pytest.raises(ValueError, match="Unsupported Granularity"):
        eq.get_block_size(shape, eq.PerBlock((1, 2, 2)))
    with pytest.raises(AssertionError, match="Please provide an instance of Granularity"):
        eq.get_block_size(shape, eq.PerTensor)
    for enum in ("MappingType", "ZeroPointDomain", "TorchAODType"):
        assert [m.name for m in getattr(eq, enum)] == [m.name for m in getattr(tq, enum)]
