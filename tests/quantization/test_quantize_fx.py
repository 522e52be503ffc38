"""FX graph mode quantization (ember.ao.quantization.quantize_fx) against torch's: the observed
graph's op sequence and observer sharing, and calibrate -> convert_fx / convert_to_reference_fx
outputs bit for bit on the same weights and data; dynamic quantization, QAT, qconfig mappings,
custom configs, and the errors for what is not supported."""
import copy
import operator

import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.nn.functional as eF
from ember.ao import quantization as eq
from ember.ao.quantization import quantize_fx as eqfx

torch = pytest.importorskip("torch")
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as tF  # noqa: E402
from torch.ao import quantization as tq  # noqa: E402
from torch.ao.quantization import quantize_fx as tqfx  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(autouse=True)
def _x86_engine():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "x86"         # (the engine ember's kernels mirror)
    yield
    torch.backends.quantized.engine = old


def _models(nn, F, lib):
    """The same small models for torch (nn, F, lib = torch) and ember."""
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.relu, self.fc2 = nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.relu = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(4 * 3 * 3, 5)

        def forward(self, x):
            x = self.pool(self.relu(self.bn(self.conv(x))))
            return self.fc(x.flatten(1))

    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(lib.randn(5, 4))
            self.b = nn.Parameter(lib.randn(5))

        def forward(self, x, y):
            a = F.linear(x, self.w, self.b)
            b = lib.add(a, y)
            c = lib.cat([a, b], 1)
            return F.relu(c).view(c.shape[0], -1)

    class Shapes(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.fc = nn.Linear(3 * 4 * 4, 6)
            self.fc2 = nn.Linear(6, 2)

        def forward(self, x):
            y = self.conv(x)
            z = y.reshape(y.shape[0], -1)
            z = F.relu(self.fc(z))
            z = lib.sigmoid(z) * z
            return self.fc2(z.view(-1, 6))

    class Broad(nn.Module):
        """Quantized modules with their own output qparams (Hardswish, ELU, LeakyReLU, LayerNorm), a
        fixed-range op (Sigmoid, tanh), add + relu and mul of tensors, linear + BatchNorm1d folding."""
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.conv2 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Conv2d(3, 4, 1)
            self.hs, self.elu, self.lrelu = nn.Hardswish(), nn.ELU(), nn.LeakyReLU(0.1)
            self.avg, self.sig, self.ln = nn.AdaptiveAvgPool2d(2), nn.Sigmoid(), nn.LayerNorm(16)
            self.fc, self.bn1 = nn.Linear(16, 6), nn.BatchNorm1d(6)

        def forward(self, x):
            y = self.bn(self.conv(x))
            y = F.relu(self.hs(y) + self.elu(y))
            y = self.avg(self.lrelu(y) * self.sig(self.conv2(x)))
            y = self.ln(y.reshape(y.shape[0], -1))
            return lib.tanh(self.bn1(self.fc(y))).mean(1)

    return {"mlp": (MLP, [(2, 4)]), "cnn": (CNN, [(2, 3, 8, 8)]), "functional": (Functional, [(2, 4), (2, 5)]),
            "shapes": (Shapes, [(3, 2, 4, 4)]), "broad": (Broad, [(2, 3, 6, 6)])}


T_MODELS = _models(tnn, tF, torch)
E_MODELS = _models(enn, eF, ember)


def _copy_weights(tm, em):
    em.load_state_dict({k: ember.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})


def _pair(name, seed, train=False):
    torch.manual_seed(seed)
    tm = T_MODELS[name][0]()
    for mod in tm.modules():
        if isinstance(mod, (tnn.BatchNorm2d, tnn.BatchNorm1d)):
            with torch.no_grad():
                mod.running_mean.uniform_(-1, 1)
                mod.running_var.uniform_(0.5, 2)
                mod.weight.uniform_(0.5, 2)
                mod.bias.uniform_(-0.5, 0.5)
    em = E_MODELS[name][0]()
    _copy_weights(tm, em)
    tm.train(train)
    em.train(train)
    return tm, em, T_MODELS[name][1]


def _data(rng, shapes):
    arrs = [(rng.standard_normal(s) * rng.uniform(0.5, 3)).astype(np.float32) for s in shapes]
    return tuple(torch.tensor(a) for a in arrs), tuple(ember.tensor(a) for a in arrs)


def _target_name(node):
    t = node.target
    if node.op == "call_function":
        name = getattr(t, "__name__", str(t))
        return {"_cat_entry": "cat"}.get(name, name)
    if node.op in ("call_module", "get_attr"):
        return None                     # (module names: compared separately)
    return t


def _op_sequence(gm):
    return [(n.op, _target_name(n)) for n in gm.graph.nodes]


def _observer_groups(gm):
    """Observer node names grouped by the observer instance they call (who shares with whom)."""
    groups = {}
    for n in gm.graph.nodes:
        if n.op == "call_module" and n.target.startswith("activation_post_process_"):
            groups.setdefault(id(getattr(gm, n.target)), []).append(n.target)
    return sorted(sorted(v) for v in groups.values())


def _np(x):
    return np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)



def _calibrate(tp, ep, rng, shapes, n=3):
    for _ in range(n):
        t_in, e_in = _data(rng, shapes)
        tp(*t_in)
        ep(*e_in)


@pytest.mark.parametrize("name", ["mlp", "cnn", "functional", "shapes", "broad"])
@pytest.mark.parametrize("seed", [0, 1])
def test_static_ptq_matches_torch(name, seed):
    rng = np.random.default_rng(seed)
    tm, em, shapes = _pair(name, seed)
    t_ex, e_ex = _data(rng, shapes)
    tp = tqfx.prepare_fx(tm, tq.get_default_qconfig_mapping("x86"), t_ex)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping("x86"), e_ex)
    assert isinstance(ep, eqfx.ObservedGraphModule)
    # observers where torch puts them, numbered as torch numbers them, shared as torch shares them
    assert _op_sequence(ep) == _op_sequence(tp)
    assert [n.target for n in ep.graph.nodes if n.op == "call_module"] == \
        [n.target for n in tp.graph.nodes if n.op == "call_module"]
    assert _observer_groups(ep) == _observer_groups(tp)
    for (tn, tmod), (en, emod) in zip(tp.named_children(), ep.named_children()):
        assert (tn, type(tmod).__name__) == (en, type(emod).__name__)
    _calibrate(tp, ep, rng, shapes)
    tr = tqfx.convert_to_reference_fx(copy.deepcopy(tp))
    er = eqfx.convert_to_reference_fx(ep)
    tc = tqfx.convert_fx(tp)
    ec = eqfx.convert_fx(ep)
    # the qparams buffers torch names for the model's input and the reference graph agree;
    # ember's float linear / conv may differ from torch's in the last bit (summation order), which
    # can move an observed max (so a scale) by an ulp: then outputs agree to one quantization step
    t_bufs, e_bufs = dict(tr.named_buffers()), dict(er.named_buffers())
    shared = [k for k in t_bufs if ("scale" in k or "zero_point" in k) and k in e_bufs]
    assert shared
    exact = True
    for k in shared:
        np.testing.assert_allclose(_np(e_bufs[k]), t_bufs[k].numpy(), rtol=1e-6, atol=0)
        exact = exact and np.array_equal(_np(e_bufs[k]), t_bufs[k].numpy())
    for _ in range(2):
        t_in, e_in = _data(rng, shapes)
        for e_out, t_out in ((ec(*e_in), tc(*t_in)), (er(*e_in), tr(*t_in))):
            if exact:
                np.testing.assert_array_equal(_np(e_out), t_out.numpy())
            else:
                step = float(np.max(np.abs(np.diff(np.unique(t_out.numpy())))) if t_out.numel() > 1 else 1.0)
                np.testing.assert_allclose(_np(e_out), t_out.numpy(), atol=step * 1.01, rtol=0)
    # quantized submodules: the same classes under the same names
    assert [(n, type(m).__name__) for n, m in ec.named_children()] == \
        [(n, type(m).__name__) for n, m in tc.named_children()]
    assert [(n, m._get_name()) for n, m in er.named_modules() if n] == \
        [(n, m._get_name()) for n, m in tr.named_modules() if n]


def test_converted_graph_ops():
    """The lowered functional model: quantize inputs, quantized linear / add, cat and relu / view
    on quantized values, one dequantize at the output -- as torch's."""
    rng = np.random.default_rng(3)
    tm, em, shapes = _pair("functional", 3)
    t_ex, e_ex = _data(rng, shapes)
    tp = tqfx.prepare_fx(tm, tq.get_default_qconfig_mapping("x86"), t_ex)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping("x86"), e_ex)
    _calibrate(tp, ep, rng, shapes)
    ec, tc = eqfx.convert_fx(ep), tqfx.convert_fx(tp)

    def compute_ops(gm):
        return [_target_name(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    e_ops = [o for o in compute_ops(ec) if o not in ("dequantize",)]
    t_ops = [o for o in compute_ops(tc) if o not in ("dequantize",)]
    assert e_ops == t_ops
    assert compute_ops(ec).count("dequantize") == compute_ops(tc).count("dequantize") == 1


def _linear_dynamic_mappings():
    return (tq.QConfigMapping().set_object_type(tnn.Linear, tq.default_dynamic_qconfig)
            .set_object_type(tnn.ReLU, tq.default_dynamic_qconfig),
            eq.QConfigMapping().set_object_type(enn.Linear, eq.default_dynamic_qconfig)
            .set_object_type(enn.ReLU, eq.default_dynamic_qconfig))


@pytest.mark.parametrize("seed", [0, 1])
def test_dynamic_linear_matches_torch(seed):
    rng = np.random.default_rng(seed)
    tm, em, shapes = _pair("mlp", seed)
    tmap, emap = _linear_dynamic_mappings()
    t_ex, e_ex = _data(rng, shapes)
    tp, ep = tqfx.prepare_fx(tm, tmap, t_ex), eqfx.prepare_fx(em, emap, e_ex)
    assert _op_sequence(ep) == _op_sequence(tp)
    assert [type(m).__name__ for m in ep.children()] == [type(m).__name__ for m in tp.children()]
    _calibrate(tp, ep, rng, shapes)
    tr, er = tqfx.convert_to_reference_fx(copy.deepcopy(tp)), eqfx.convert_to_reference_fx(copy.deepcopy(ep))
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    assert [m._get_name() for m in ec.children()] == [m._get_name() for m in tc.children()] == \
        ["DynamicQuantizedLinearReLU", "DynamicQuantizedLinear"]
    assert ec.code.replace("ember", "torch") == tc.code
    assert er.code.replace("ember", "torch") == tr.code
    for _ in range(2):
        t_in, e_in = _data(rng, shapes)
        np.testing.assert_allclose(_np(ec(*e_in)), tc(*t_in).detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(er(*e_in)), tr(*t_in).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_qat_matches_torch(name):
    rng = np.random.default_rng(5)
    tm, em, shapes = _pair(name, 5, train=True)
    t_ex, e_ex = _data(rng, shapes)
    tp = tqfx.prepare_qat_fx(tm, tq.get_default_qat_qconfig_mapping("x86"), t_ex)
    ep = eqfx.prepare_qat_fx(em, eq.get_default_qat_qconfig_mapping("x86"), e_ex)
    assert _op_sequence(ep) == _op_sequence(tp)
    assert [(n, type(m).__name__) for n, m in ep.named_modules() if n] == \
        [(n, type(m).__name__) for n, m in tp.named_modules() if n]
    for _ in range(3):                      # (plain SGD steps, written out)
        t_in, e_in = _data(rng, shapes)
        lt, le = tp(*t_in).pow(2).mean(), ep(*e_in).pow(2).mean()
        np.testing.assert_allclose(float(le), float(lt), rtol=1e-4)
        lt.backward()
        le.backward()
        with torch.no_grad():
            for p in tp.parameters():
                if p.grad is not None:
                    p -= 0.05 * p.grad
                    p.grad = None
        with ember.no_grad():
            for p in ep.parameters():
                if p.grad is not None:
                    p -= 0.05 * p.grad
                    p.grad = None
    tp.eval()
    ep.eval()
    tc, ec = tqfx.convert_fx(copy.deepcopy(tp)), eqfx.convert_fx(ep)
    assert [(n, type(m).__name__) for n, m in ec.named_children()] == \
        [(n, type(m).__name__) for n, m in tc.named_children()]
    t_in, e_in = _data(rng, shapes)
    t_out = tc(*t_in).numpy()
    step = float(np.max(np.diff(np.unique(t_out))))
    np.testing.assert_allclose(_np(ec(*e_in)), t_out, atol=step * 1.01, rtol=0)


@pytest.mark.parametrize("scalar", [3.0, -0.5])
def test_scalar_mul_matches_torch(scalar):
    """A tensor times a Python number: the output shares the input's observer and the lowered op
    keeps the kernel's own qparams (quantized::mul_scalar), as torch."""
    def make(nn):
        class ScalarMul(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

            def forward(self, x):
                return self.fc2((self.fc(x) * scalar) * 2.0)
        return ScalarMul
    torch.manual_seed(0)
    tm, em = make(tnn)().eval(), make(enn)().eval()
    _copy_weights(tm, em)
    rng, shapes = np.random.default_rng(4), [(3, 4)]
    t_ex, e_ex = _data(rng, shapes)
    tp = tqfx.prepare_fx(tm, tq.get_default_qconfig_mapping(), t_ex)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping(), e_ex)
    assert _op_sequence(ep) == _op_sequence(tp)
    assert _observer_groups(ep) == _observer_groups(tp)
    _calibrate(tp, ep, rng, shapes)
    tr, er = tqfx.convert_to_reference_fx(copy.deepcopy(tp)), eqfx.convert_to_reference_fx(copy.deepcopy(ep))
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    t_in, e_in = _data(rng, shapes)
    for e_out, t_out in ((ec(*e_in), tc(*t_in)), (er(*e_in), tr(*t_in))):
        t_out = t_out.detach().numpy()
        np.testing.assert_allclose(_np(e_out), t_out, atol=float(np.max(np.diff(np.unique(t_out)))) * 1.01, rtol=0)


def test_module_called_twice():
    """One conv module called at two places: the reference graph serves both calls; convert_fx
    (one quantized module cannot have two output qparams) refuses, naming the module."""
    class Twice(enn.Module):
        def __init__(self):
            super().__init__()
            self.fc = enn.Linear(4, 4)

        def forward(self, x):
            return self.fc(self.fc(x))
    ex = (ember.randn(3, 4),)
    ep = eqfx.prepare_fx(Twice().eval(), eq.get_default_qconfig_mapping(), ex)
    ep(*ex)
    ref = eqfx.convert_to_reference_fx(ep)
    assert type(ref.fc).__name__ == "Linear" and ref.fc._get_name() == "QuantizedLinear(Reference)"
    np.testing.assert_allclose(_np(ref(*ex)), _np(ep(*ex)), atol=0.1)
    with pytest.raises(NotImplementedError, match="module 'fc' called more than once"):
        eqfx.convert_fx(ep)


def test_qat_requires_train_mode():
    with pytest.raises(AssertionError, match="train mode"):
        eqfx.prepare_qat_fx(E_MODELS["mlp"][0]().eval(), eq.get_default_qat_qconfig_mapping(), (ember.randn(2, 4),))


def _global(lib_q):
    return lib_q.get_default_qconfig("x86")


@pytest.mark.parametrize("case", ["module_name_none", "object_type_linear_none", "regex", "object_type_function",
                                  "order"])
def test_qconfig_mapping_variants_match_torch(case):
    rng = np.random.default_rng(7)
    name = "functional" if case in ("object_type_function", "order") else "mlp"
    tm, em, shapes = _pair(name, 7)

    def build(q, nn, F, lib):
        m = q.QConfigMapping().set_global(_global(q))
        if case == "module_name_none":
            return m.set_module_name("fc2", None)
        if case == "object_type_linear_none":
            return m.set_object_type(nn.Linear, None).set_object_type(nn.ReLU, None)
        if case == "regex":
            return m.set_module_name_regex("fc.*", None).set_module_name("fc2", _global(q))
        if case == "object_type_function":
            return m.set_object_type(lib.add, None)
        return m.set_module_name_object_type_order("", lib.add, 0, None)
    tmap, emap = build(tq, tnn, tF, torch), build(eq, enn, eF, ember)
    t_ex, e_ex = _data(rng, shapes)
    tp, ep = tqfx.prepare_fx(tm, tmap, t_ex), eqfx.prepare_fx(em, emap, e_ex)
    assert _op_sequence(ep) == _op_sequence(tp)
    assert _observer_groups(ep) == _observer_groups(tp)
    _calibrate(tp, ep, rng, shapes)
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    assert [_target_name(n) for n in ec.graph.nodes if n.op in ("call_function", "call_method")
            if _target_name(n) != "dequantize"] == \
        [_target_name(n) for n in tc.graph.nodes if n.op in ("call_function", "call_method")
         if _target_name(n) != "dequantize"]
    t_in, e_in = _data(rng, shapes)
    t_out = tc(*t_in).detach().numpy()
    np.testing.assert_allclose(_np(ec(*e_in)), t_out, atol=float(np.max(np.diff(np.unique(t_out)))) * 1.01,
                               rtol=0)


def test_fusion_qconfig_conflict_raises_as_torch():
    em = E_MODELS["mlp"][0]().eval()
    emap = eq.QConfigMapping().set_object_type(enn.Linear, eq.default_dynamic_qconfig)
    with pytest.raises(LookupError, match="During fusion, we need to specify the same qconfigs for all module types "
                                          "in .*LinearReLU.* offending type: .*ReLU"):
        eqfx.prepare_fx(em, emap, (ember.randn(2, 4),))


def test_example_inputs_required():
    em = E_MODELS["mlp"][0]().eval()
    with pytest.raises(TypeError) as e_err:
        eqfx.prepare_fx(em, eq.get_default_qconfig_mapping())
    with pytest.raises(TypeError) as t_err:
        tqfx.prepare_fx(T_MODELS["mlp"][0]().eval(), tq.get_default_qconfig_mapping())
    assert str(e_err.value) == str(t_err.value)
    with pytest.raises(TypeError) as e_err:
        eqfx.prepare_qat_fx(E_MODELS["mlp"][0](), eq.get_default_qat_qconfig_mapping())
    with pytest.raises(TypeError) as t_err:
        tqfx.prepare_qat_fx(T_MODELS["mlp"][0](), tq.get_default_qat_qconfig_mapping())
    assert str(e_err.value) == str(t_err.value)


def test_fuse_fx_matches_torch():
    rng = np.random.default_rng(11)
    tm, em, shapes = _pair("cnn", 11)
    tf, ef = tqfx.fuse_fx(tm), eqfx.fuse_fx(em)
    assert [(n, type(m).__name__) for n, m in ef.named_modules() if n] == \
        [(n, type(m).__name__) for n, m in tf.named_modules() if n]
    t_in, e_in = _data(rng, shapes)
    np.testing.assert_allclose(_np(ef(*e_in)), tf(*t_in).detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(ef(*e_in)), _np(em(*e_in)), rtol=1e-4, atol=1e-5)


def test_quantization_tracer_leaves_and_scopes():
    class Inner(enn.Module):
        def __init__(self):
            super().__init__()
            self.fc = enn.Linear(3, 3)

        def forward(self, x):
            return eF.relu(self.fc(x)) + 1

    class Outer(enn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.skip = Inner(), Inner()

        def forward(self, x):
            return self.skip(self.inner(x))

    tracer = eqfx.QuantizationTracer(["skip"], [])
    graph = tracer.trace(Outer())
    calls = [(n.op, n.target) for n in graph.nodes if n.op == "call_module"]
    assert calls == [("call_module", "inner.fc"), ("call_module", "skip")]
    relu = next(n for n in graph.nodes if n.op == "call_function" and n.target is not operator.add)
    assert tracer.node_name_to_scope[relu.name] == ("inner", Inner)


def test_untraceable_model_gives_ember_fx_error():
    class Branchy(enn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x
    from ember.fx.proxy import TraceError
    with pytest.raises(TraceError, match="control flow"):
        eqfx.prepare_fx(Branchy().eval(), eq.get_default_qconfig_mapping(), (ember.randn(2),))


def test_unsupported_options_raise():
    from ember.ao.quantization.fx.custom_config import ConvertCustomConfig, PrepareCustomConfig
    em = E_MODELS["mlp"][0]().eval()
    qmap = eq.get_default_qconfig_mapping()
    ex = (ember.randn(2, 4),)
    cases = [
        (PrepareCustomConfig().set_standalone_module_name("fc1", qmap, ex, None, None), "standalone modules"),
        (PrepareCustomConfig().set_float_to_observed_mapping(enn.Linear, enn.Linear), "custom modules"),
        (PrepareCustomConfig().set_input_quantized_indexes([0]), "quantized model inputs"),
    ]
    for config, what in cases:
        with pytest.raises(NotImplementedError, match=f"ember.ao.quantization.quantize_fx: {what}.* is not supported"):
            eqfx.prepare_fx(em, qmap, ex, prepare_custom_config=config)
    ep = eqfx.prepare_fx(em, qmap, ex)
    ep(*ex)
    with pytest.raises(NotImplementedError, match="custom modules"):
        eqfx.convert_fx(ep, ConvertCustomConfig().set_observed_to_quantized_mapping(enn.Linear, enn.Linear))
    lstm = enn.Sequential(enn.LSTM(4, 4)).eval()
    with pytest.raises(NotImplementedError, match="quantizing LSTM .*'0'.* is not supported"):
        eqfx.prepare_fx(lstm, qmap, (ember.randn(2, 1, 4),))
    lstm_skipped = eqfx.prepare_fx(lstm, eq.QConfigMapping().set_global(qmap.global_qconfig)
                                   .set_module_name("0", None), (ember.randn(2, 1, 4),))
    assert not any(n.op == "call_module" and n.target.startswith("activation") for n in lstm_skipped.graph.nodes)

    class ScalarAdd(enn.Module):
        def __init__(self):
            super().__init__()
            self.fc = enn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x) + 1.0
    class SoftmaxHardswish(enn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.sm = enn.Linear(4, 4), enn.Softmax(1)

        def forward(self, x):
            return eF.hardswish(self.sm(self.fc(x)))
    with pytest.raises(NotImplementedError, match="quantizing Softmax \\(module 'sm'\\) is not supported"):
        eqfx.prepare_fx(SoftmaxHardswish().eval(), qmap, ex)
    with pytest.raises(NotImplementedError, match="quantizing the function hardswish"):
        eqfx.prepare_fx(SoftmaxHardswish().eval(), copy.deepcopy(qmap).set_object_type(enn.Softmax, None), ex)
    kept = eqfx.prepare_fx(SoftmaxHardswish().eval(), copy.deepcopy(qmap).set_object_type(enn.Softmax, None)
                           .set_object_type(eF.hardswish, None), ex)
    assert sum(n.op == "call_module" and n.target.startswith("activation") for n in kept.graph.nodes) == 2
    sp = eqfx.prepare_fx(ScalarAdd().eval(), qmap, ex)
    sp(*ex)
    eqfx.convert_to_reference_fx(sp)(*ex)
    with pytest.raises(NotImplementedError, match="add of a tensor and a scalar .*quantized::add_scalar"):
        eqfx.convert_fx(sp)
    with pytest.raises(ValueError, match="expects the GraphModule prepare_fx"):
        eqfx.convert_fx(ember.fx.symbolic_trace(em))


def test_observed_module_deepcopy_keeps_sharing_and_state():
    rng = np.random.default_rng(2)
    _, em, shapes = _pair("functional", 2)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping(), _data(rng, shapes)[1])
    cp = copy.deepcopy(ep)
    assert isinstance(cp, eqfx.ObservedGraphModule)
    assert _observer_groups(cp) == _observer_groups(ep)
    for _ in range(2):
        e_in = _data(rng, shapes)[1]
        ep(*e_in)
        cp(*e_in)
    e_in = _data(rng, shapes)[1]
    np.testing.assert_array_equal(_np(eqfx.convert_fx(cp)(*e_in)), _np(eqfx.convert_fx(ep)(*e_in)))


def test_preserved_attributes():
    from ember.ao.quantization.fx.custom_config import PrepareCustomConfig
    em = E_MODELS["mlp"][0]().eval()
    em.tag = "keep me"
    ex = (ember.randn(2, 4),)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping(), ex,
                         prepare_custom_config=PrepareCustomConfig().set_preserved_attributes(["tag"]))
    ep(*ex)
    assert ep.tag == "keep me"
    assert eqfx.convert_fx(ep).tag == "keep me"


def test_custom_config_dicts_match_torch():
    from ember.ao.quantization.fx.custom_config import ConvertCustomConfig, FuseCustomConfig, PrepareCustomConfig
    from torch.ao.quantization.fx import custom_config as tcc
    e = (PrepareCustomConfig().set_non_traceable_module_names(["a", "b"]).set_non_traceable_module_classes([int])
         .set_input_quantized_indexes([0]).set_output_quantized_indexes([0, 1]).set_preserved_attributes(["x"])
         .set_float_to_observed_mapping(str, int))
    t = (tcc.PrepareCustomConfig().set_non_traceable_module_names(["a", "b"]).set_non_traceable_module_classes([int])
         .set_input_quantized_indexes([0]).set_output_quantized_indexes([0, 1]).set_preserved_attributes(["x"])
         .set_float_to_observed_mapping(str, int))
    assert e.to_dict() == t.to_dict()
    assert PrepareCustomConfig.from_dict(t.to_dict()).to_dict() == t.to_dict()
    ec = ConvertCustomConfig().set_observed_to_quantized_mapping(str, int).set_preserved_attributes(["y"])
    tc = tcc.ConvertCustomConfig().set_observed_to_quantized_mapping(str, int).set_preserved_attributes(["y"])
    assert ec.to_dict() == tc.to_dict()
    assert ConvertCustomConfig.from_dict(tc.to_dict()).to_dict() == tc.to_dict()
    assert FuseCustomConfig().set_preserved_attributes(["z"]).to_dict() == \
        tcc.FuseCustomConfig().set_preserved_attributes(["z"]).to_dict()
    assert FuseCustomConfig.from_dict({"preserved_attributes": ["z"]}).preserved_attributes == ["z"]
    assert repr(FuseCustomConfig().set_preserved_attributes(["z"])) == \
        repr(tcc.FuseCustomConfig().set_preserved_attributes(["z"]))


def test_float16_dynamic_linear():
    rng = np.random.default_rng(9)
    tm, em, shapes = _pair("mlp", 9)
    tmap = (tq.QConfigMapping().set_object_type(tnn.Linear, tq.float16_dynamic_qconfig)
            .set_object_type(tnn.ReLU, tq.float16_dynamic_qconfig))
    emap = (eq.QConfigMapping().set_object_type(enn.Linear, eq.float16_dynamic_qconfig)
            .set_object_type(enn.ReLU, eq.float16_dynamic_qconfig))
    t_ex, e_ex = _data(rng, shapes)
    tp, ep = tqfx.prepare_fx(tm, tmap, t_ex), eqfx.prepare_fx(em, emap, e_ex)
    assert _op_sequence(ep) == _op_sequence(tp)
    _calibrate(tp, ep, rng, shapes)
    with pytest.raises(NotImplementedError, match="float16 dynamic quantization\\) in convert_to_reference_fx"):
        eqfx.convert_to_reference_fx(ep)
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    assert [m._get_name() for m in ec.children()] == [m._get_name() for m in tc.children()]
    t_in, e_in = _data(rng, shapes)
    np.testing.assert_allclose(_np(ec(*e_in)), tc(*t_in).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_functional_linear_refused():
    _, em, shapes = _pair("functional", 0)
    with pytest.raises(NotImplementedError, match="dynamic quantization of the functional linear"):
        eqfx.prepare_fx(em.eval(), eq.QConfigMapping().set_global(eq.default_dynamic_qconfig),
                        _data(np.random.default_rng(0), shapes)[1])


def test_nested_model_code_matches_torch():
    """Nested Sequentials: the prepared and the reference models' generated code is torch's
    (observer names, qparam buffer names from the module paths, op order)."""
    def make(nn):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
                self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 3 * 3, 10), nn.ReLU(), nn.Dropout(0.2),
                                          nn.Linear(10, 2))

            def forward(self, x):
                return self.head(self.features(x))
        return Net
    torch.manual_seed(0)
    tm, em = make(tnn)().eval(), make(enn)().eval()
    _copy_weights(tm, em)
    rng, shapes = np.random.default_rng(0), [(2, 3, 8, 8)]
    t_ex, e_ex = _data(rng, shapes)
    tp = tqfx.prepare_fx(tm, tq.get_default_qconfig_mapping(), t_ex)
    ep = eqfx.prepare_fx(em, eq.get_default_qconfig_mapping(), e_ex)
    assert ep.code.replace("ember", "torch") == tp.code
    _calibrate(tp, ep, rng, shapes)
    tr, er = tqfx.convert_to_reference_fx(copy.deepcopy(tp)), eqfx.convert_to_reference_fx(copy.deepcopy(ep))
    assert er.code.replace("ember", "torch") == tr.code
    tc, ec = tqfx.convert_fx(tp), eqfx.convert_fx(ep)
    assert [(n, m._get_name()) for n, m in ec.named_modules() if n] == \
        [(n, m._get_name()) for n, m in tc.named_modules() if n]
    t_in, e_in = _data(rng, shapes)
    t_out = tc(*t_in).numpy()
    np.testing.assert_allclose(_np(ec(*e_in)), t_out, atol=float(np.max(np.diff(np.unique(t_out)))) * 1.01, rtol=0)
