"""PT2E quantization (ember.ao.quantization.quantize_pt2e) against torch.

torch 2.13 no longer ships the PT2E flow itself (it moved to torchao), but it ships its
building blocks: the observers and ``torch.ops.quantized_decomposed``. So each model is checked
three ways:

* the observers ember's ``prepare_pt2e`` inserts (which values each one sees, in which order,
  which are shared) are replayed on torch's observers: the qparams must be bit for bit torch's;
* every quantize / dequantize of the converted graph is replayed with torch's
  ``quantized_decomposed`` ops on the same inputs: bit for bit;
* the whole X86 recipe is written out by hand in torch (BN folded with torch's
  ``fuse_conv_bn_weights``, torch's observers calibrated on torch's activations, q/dq placed
  where torch's X86InductorQuantizer puts them) and the converted model's output is compared.

The converted model also runs under ``ember.compile`` with the same numbers.
"""
import numpy as np
import pytest

import ember
import ember.nn as enn
from ember.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
from ember.ao.quantization.quantizer import (ComposableQuantizer, DerivedQuantizationSpec,
                                            FixedQParamsQuantizationSpec, QuantizationAnnotation, QuantizationSpec,
                                            Quantizer, SharedQuantizationSpec)
from ember.ao.quantization.quantizer.x86_inductor_quantizer import (X86InductorQuantizer,
                                                                   get_default_x86_inductor_quantization_config)

torch = pytest.importorskip("torch")
import torch.nn.functional as tF  # noqa: E402
import torch.ao.quantization.fx._decomposed  # noqa: E402,F401  (registers torch.ops.quantized_decomposed)
from torch.ao.quantization import observer as tobs  # noqa: E402
from torch.nn.utils.fusion import fuse_conv_bn_weights  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")

EPS = 2 ** -12


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a.detach().numpy() if hasattr(a, "detach") else a))


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _x86():
    return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


# ------------------------------------------------------------------------------------------ models
class CNN(enn.Module):
    """conv-bn-relu -> maxpool -> conv(no bias)-bn-relu -> adaptive avg pool -> flatten -> linear."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.relu1 = enn.Conv2d(3, 6, 3, padding=1), enn.BatchNorm2d(6), enn.ReLU()
        self.pool = enn.MaxPool2d(2)
        self.conv2, self.bn2 = enn.Conv2d(6, 8, 3, padding=1, bias=False), enn.BatchNorm2d(8)
        self.relu2 = enn.ReLU(inplace=True)
        self.gap, self.fc = enn.AdaptiveAvgPool2d(1), enn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        x = self.relu2(self.bn2(self.conv2(x)))
        return self.fc(ember.flatten(self.gap(x), 1))


class MLP(enn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.relu, self.fc2, self.fc3 = enn.Linear(6, 16), enn.ReLU(), enn.Linear(16, 12), enn.Linear(12, 4)

    def forward(self, x):
        return self.fc3(self.fc2(self.relu(self.fc1(x))))


class Residual(enn.Module):
    """conv-relu, then conv + skip add + relu (X86's conv-add-relu pattern)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.relu1 = enn.Conv2d(4, 4, 3, padding=1), enn.ReLU()
        self.conv2, self.relu2 = enn.Conv2d(4, 4, 3, padding=1), enn.ReLU()

    def forward(self, x):
        y = self.relu1(self.conv1(x))
        return self.relu2(self.conv2(y) + y)


def _randomize(m, rng):
    with ember.no_grad():
        for name, p in m.named_parameters():
            p.copy_(ember.tensor(_rand(rng, *p.shape, scale=0.5)))
        for mod in m.modules():
            if isinstance(mod, enn.BatchNorm2d):
                mod.running_mean.copy_(ember.tensor(_rand(rng, *mod.running_mean.shape, scale=0.3)))
                mod.running_var.copy_(ember.tensor(rng.uniform(0.5, 2.0, mod.running_var.shape).astype(np.float32)))
    return m.eval()


# ----------------------------------------------------------------------------- replay helpers
def _observers(m):
    """{name: observer} of a prepared model, in graph order (names sharing one instance kept)."""
    mods = dict(m.named_modules(remove_duplicate=False))
    return [(n.target, mods[n.target]) for n in m.graph.nodes if n.op == "call_module"]


def _record(m):
    """Record (observer id, input) for every observer call."""
    log = []
    seen = set()
    for _, obs in _observers(m):
        if id(obs) in seen:
            continue
        seen.add(id(obs))
        obs.register_forward_pre_hook(lambda mod, args: log.append((id(mod), args[0].detach().numpy().copy())))
    return log


def _torch_observer_like(obs):
    cls = type(obs).__name__
    kw = dict(dtype=getattr(torch, str(obs.dtype).split(".")[-1]), quant_min=obs.quant_min, quant_max=obs.quant_max,
              qscheme=getattr(torch, str(obs.qscheme).split(".")[-1]), eps=EPS)
    if cls == "PerChannelMinMaxObserver":
        return tobs.PerChannelMinMaxObserver(ch_axis=obs.ch_axis, **kw)
    if cls == "HistogramObserver":
        return tobs.HistogramObserver(**kw)
    if cls == "MinMaxObserver":
        return tobs.MinMaxObserver(**kw)
    raise AssertionError(cls)


def _replay_observers(m, log):
    """Feed torch observers what ember's saw, in the same order: qparams must be identical."""
    instances = {id(o): o for _, o in _observers(m)}
    twins = {k: _torch_observer_like(o) for k, o in instances.items()}
    for k, a in log:
        twins[k](torch.from_numpy(a))
    for k, o in instances.items():
        es, ez = o.calculate_qparams()
        ts, tz = twins[k].calculate_qparams()
        np.testing.assert_array_equal(es.numpy(), ts.numpy())
        np.testing.assert_array_equal(ez.numpy().astype(np.int64), tz.numpy().astype(np.int64))
    return instances


def _groups(m):
    """The observer sharing as a list of groups of (kind, observed node name)."""
    mods = dict(m.named_modules(remove_duplicate=False))
    by = {}
    for n in m.graph.nodes:
        if n.op == "call_module":
            by.setdefault(id(mods[n.target]), []).append(n.args[0].name)
    return sorted(sorted(v) for v in by.values())


def _replay_qdq(conv):
    """Every quantize / dequantize of the converted model, on the inputs it got, against torch."""
    q = ember.ops.quantized_decomposed
    tq = torch.ops.quantized_decomposed
    pairs = {q.quantize_per_tensor.default: tq.quantize_per_tensor.default,
             q.dequantize_per_tensor.default: tq.dequantize_per_tensor.default,
             q.quantize_per_channel.default: tq.quantize_per_channel.default,
             q.dequantize_per_channel.default: tq.dequantize_per_channel.default}
    checked = []

    def wrap(fn, tfn):
        def run(*args):
            out = fn(*args)
            targs = [_t(a) if isinstance(a, ember.Tensor) else
                     (getattr(torch, str(a).split(".")[-1]) if isinstance(a, ember.dtype) else a) for a in args]
            ref = tfn(*targs)
            np.testing.assert_array_equal(out.numpy(), ref.numpy())
            checked.append(fn)
            return out
        return run
    for n in conv.graph.nodes:
        if n.op == "call_function" and n.target in pairs:
            n.target = wrap(n.target, pairs[n.target])
    conv.recompile()
    return checked


def _calib(rng, shape, n=3):
    return [ember.tensor(_rand(rng, *shape, scale=1.5)) for _ in range(n)]


def _flow(model, example, calib, quantizer=None):
    exported = ember.export.export(model, (example,)).module()
    prepared = prepare_pt2e(exported, quantizer or _x86())
    log = _record(prepared)
    for c in calib:
        prepared(c)
    return prepared, log


# ------------------------------------------------------------------------------------------ tests
def test_quantized_decomposed_ops_match_torch():
    rng = np.random.default_rng(1)
    q, tq = ember.ops.quantized_decomposed, torch.ops.quantized_decomposed
    x = _rand(rng, 3, 5, 4, scale=4.0)
    for scale, zp, lo, hi, ed, td in [(0.0371, 7, 0, 255, ember.uint8, torch.uint8),
                                      (0.0213, -3, -128, 127, ember.int8, torch.int8)]:
        a = q.quantize_per_tensor.default(ember.tensor(x), scale, zp, lo, hi, ed)
        b = tq.quantize_per_tensor.default(torch.from_numpy(x), scale, zp, lo, hi, td)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(q.dequantize_per_tensor.default(a, scale, zp, lo, hi, ed).numpy(),
                                      tq.dequantize_per_tensor.default(b, scale, zp, lo, hi, td).numpy())
    s = (np.abs(_rand(rng, 5)) / 40 + 1e-3).astype(np.float32)
    z = rng.integers(-4, 4, 5).astype(np.int64)
    a = q.quantize_per_channel.default(ember.tensor(x), ember.tensor(s), ember.tensor(z), 1, -128, 127, ember.int8)
    b = tq.quantize_per_channel.default(torch.from_numpy(x), torch.from_numpy(s), torch.from_numpy(z), 1, -128, 127,
                                        torch.int8)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    da = q.dequantize_per_channel.default(a, ember.tensor(s), ember.tensor(z), 1, -128, 127, ember.int8)
    db = tq.dequantize_per_channel.default(b, torch.from_numpy(s), torch.from_numpy(z), 1, -128, 127, torch.int8)
    np.testing.assert_array_equal(da.numpy(), db.numpy())
    with pytest.raises(AssertionError, match="quant_min out of bounds"):
        q.quantize_per_tensor.default(ember.tensor(x), 0.1, 0, -1, 255, ember.uint8)
    with pytest.raises(AssertionError, match="Expecting input to have dtype"):
        q.dequantize_per_tensor.default(ember.tensor(x), 0.1, 0, 0, 255, ember.uint8)


def _torch_cnn(m, x, qp=None, obs=None):
    """torch's X86 recipe for CNN written out: calibrating (``obs``) or converted (``qp``)."""
    tq = torch.ops.quantized_decomposed

    def fold(conv, bn):
        return fuse_conv_bn_weights(_t(conv.weight), None if conv.bias is None else _t(conv.bias),
                                    _t(bn.running_mean), _t(bn.running_var), bn.eps, _t(bn.weight), _t(bn.bias))
    w1, b1 = fold(m.conv1, m.bn1)
    w2, b2 = fold(m.conv2, m.bn2)
    w3, b3 = _t(m.fc.weight), _t(m.fc.bias)

    def act(v, key):
        if obs is not None:
            return obs[key](v)
        s, z = qp[key]
        return tq.dequantize_per_tensor(tq.quantize_per_tensor(v, s, z, 0, 255, torch.uint8), s, z, 0, 255, torch.uint8)

    def wt(w, key):
        if obs is not None:
            obs[key](w)
            return w
        s, z = qp[key]
        return tq.dequantize_per_channel(tq.quantize_per_channel(w, s, z, 0, -128, 127, torch.int8), s, z, 0, -128,
                                         127, torch.int8)
    with torch.no_grad():
        y = tF.conv2d(act(x, "x"), wt(w1, "w1"), b1, padding=1).relu()
        y = act(tF.max_pool2d(act(y, "A"), 2), "A")
        y = tF.conv2d(y, wt(w2, "w2"), b2, padding=1).relu()
        y = act(tF.adaptive_avg_pool2d(act(y, "B"), 1), "B")
        y = act(torch.flatten(y, 1), "B")
        return tF.linear(y, wt(w3, "w3"), b3), (w1, b1, w2, b2)


def test_cnn_conv_bn_relu_against_torch():
    rng = np.random.default_rng(2)
    m = _randomize(CNN(), rng)
    calib = _calib(rng, (2, 3, 8, 8))
    prepared, log = _flow(m, calib[0], calib)
    # observer sharing: the maxpool's input and output (and conv2's input) share one; the avg
    # pool's, the flatten's and the linear's input another; the weights have their own
    assert _groups(prepared) == sorted(sorted(g) for g in [
        ["x"], ["_folded_conv_weight_0"], ["_folded_conv_weight_1"], ["fc_weight"],
        ["relu", "max_pool2d"], ["relu_1", "adaptive_avg_pool2d", "flatten"]])
    _replay_observers(prepared, log)

    # torch's recipe by hand: same folded weights, torch's observers on torch's activations
    twins = {"x": tobs.HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255, eps=EPS)}
    twins["A"] = tobs.HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255, eps=EPS)
    twins["B"] = tobs.HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255, eps=EPS)
    for k in ("w1", "w2", "w3"):
        twins[k] = tobs.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.int8, quant_min=-128, quant_max=127,
                                                 qscheme=torch.per_channel_symmetric, eps=EPS)
    for c in calib:
        _, folded = _torch_cnn(m, _t(c), obs=twins)
    np.testing.assert_allclose(prepared._folded_conv_weight_0.detach().numpy(), folded[0].numpy(), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(prepared._folded_conv_bias_1.detach().numpy(), folded[3].numpy(), rtol=1e-6,
                               atol=1e-6)
    mods = dict(prepared.named_modules(remove_duplicate=False))
    by_input = {n.args[0].name: mods[n.target] for n in prepared.graph.nodes if n.op == "call_module"}
    for key, name in [("x", "x"), ("A", "relu"), ("B", "relu_1"), ("w3", "fc_weight")]:
        es, ez = by_input[name].calculate_qparams()
        ts, tz = twins[key].calculate_qparams()
        np.testing.assert_allclose(es.numpy(), ts.numpy(), rtol=1e-5)
        np.testing.assert_array_equal(ez.numpy(), tz.numpy())

    converted = convert_pt2e(prepared)
    targets = [n.target for n in converted.graph.nodes if n.op == "call_function"]
    q = ember.ops.quantized_decomposed
    assert targets.count(q.quantize_per_tensor.default) == 6
    assert targets.count(q.quantize_per_channel.default) == 0          # folded into int8 constants
    assert targets.count(q.dequantize_per_channel.default) == 3
    frozen = [getattr(converted, n.target) for n in converted.graph.nodes
              if n.op == "get_attr" and n.target.startswith("_frozen_param")]
    assert len(frozen) == 3 and all(f.dtype == ember.int8 for f in frozen)
    assert not any(n.op == "call_module" for n in converted.graph.nodes)

    x = ember.tensor(_rand(rng, 2, 3, 8, 8, scale=1.5))
    out = converted(x).detach().numpy()
    # the converted model with torch's qparams from ember's observers: the hand-written recipe
    qp = {}
    for key, name in [("x", "x"), ("A", "relu"), ("B", "relu_1")]:
        s, z = by_input[name].calculate_qparams()
        qp[key] = (float(s), int(z))
    for key, name in [("w1", "_folded_conv_weight_0"), ("w2", "_folded_conv_weight_1"), ("w3", "fc_weight")]:
        s, z = by_input[name].calculate_qparams()
        qp[key] = (_t(s), _t(z))
    ref, _ = _torch_cnn(m, _t(x), qp=qp)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)
    # (inductor compiles the MLP's; aot_eager keeps this test short)
    compiled = ember.compile(converted, backend="aot_eager")
    np.testing.assert_allclose(compiled(x).detach().numpy(), out, rtol=1e-5, atol=1e-6)
    checked = _replay_qdq(converted)
    converted(x)
    assert len(checked) == 15


def test_mlp_linear_against_torch():
    rng = np.random.default_rng(3)
    m = _randomize(MLP(), rng)
    calib = _calib(rng, (5, 6))
    prepared, log = _flow(m, calib[0], calib)
    # fc1 + relu is one pattern (its output not observed); fc2's input is; fc3's input is fc2's
    # output (unobserved before it)
    assert _groups(prepared) == sorted(sorted(g) for g in [
        ["x"], ["fc1_weight"], ["fc2_weight"], ["fc3_weight"], ["relu"], ["linear_1"]])
    _replay_observers(prepared, log)
    converted = convert_pt2e(prepared)
    x = ember.tensor(_rand(rng, 7, 6, scale=1.5))
    out = converted(x).detach().numpy()

    # torch by hand with torch's observers on torch's activations
    tq = torch.ops.quantized_decomposed

    def hist():
        return tobs.HistogramObserver(dtype=torch.uint8, quant_min=0, quant_max=255, eps=EPS)
    acts = [hist() for _ in range(3)]
    ws = [_t(getattr(m, f"fc{i}").weight) for i in (1, 2, 3)]
    bs = [_t(getattr(m, f"fc{i}").bias) for i in (1, 2, 3)]
    for c in calib:
        y = _t(c)
        for i in range(3):
            acts[i](y)
            y = tF.linear(y, ws[i], bs[i])
            if i == 0:
                y = y.relu()
    wq = []
    for w in ws:
        o = tobs.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.int8, quant_min=-128, quant_max=127,
                                          qscheme=torch.per_channel_symmetric, eps=EPS)
        o(w)
        s, z = o.calculate_qparams()
        wq.append(tq.dequantize_per_channel(tq.quantize_per_channel(w, s, z, 0, -128, 127, torch.int8), s, z, 0, -128,
                                            127, torch.int8))
    y = _t(x)
    for i in range(3):
        s, z = acts[i].calculate_qparams()
        s, z = float(s), int(z)
        y = tq.dequantize_per_tensor(tq.quantize_per_tensor(y, s, z, 0, 255, torch.uint8), s, z, 0, 255, torch.uint8)
        y = tF.linear(y, wq[i], bs[i])
        if i == 0:
            y = y.relu()
    np.testing.assert_allclose(out, y.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ember.compile(converted)(x).detach().numpy(), out, rtol=1e-5, atol=1e-6)
    checked = _replay_qdq(converted)
    converted(x)
    assert len(checked) == 9


def test_residual_add_shares_the_skip_observer():
    rng = np.random.default_rng(4)
    m = _randomize(Residual(), rng)
    calib = _calib(rng, (2, 4, 6, 6))
    prepared, log = _flow(m, calib[0], calib)
    # conv2 + add + relu2 is one pattern: the add's other input (relu1's output) is quantized
    # with the same spec as conv2's input -> one shared observer; relu2's output is not observed
    assert _groups(prepared) == sorted(sorted(g) for g in [
        ["x"], ["conv1_weight"], ["conv2_weight"], ["relu"]])
    _replay_observers(prepared, log)
    add = next(n for n in prepared.graph.nodes if n.op == "call_function" and n.target is ember.add)
    ann = add.meta["quantization_annotation"]
    assert list(ann.input_qspec_map) == [next(n for n in prepared.graph.nodes if n.name == "relu")]
    converted = convert_pt2e(prepared)
    x = ember.tensor(_rand(rng, 2, 4, 6, 6, scale=1.5))
    out = converted(x).detach().numpy()
    tq = torch.ops.quantized_decomposed
    mods = dict(prepared.named_modules(remove_duplicate=False))
    del mods
    # torch by hand on ember's qparams (checked above to be torch's for the same values)
    qps = {}
    for n in converted.graph.nodes:
        if n.op == "call_function" and n.target is ember.ops.quantized_decomposed.quantize_per_tensor.default:
            qps[n.args[0].name] = (n.args[1], n.args[2])
    assert set(qps) == {"x", "relu"}

    def qdq(v, key):
        s, z = qps[key]
        return tq.dequantize_per_tensor(tq.quantize_per_tensor(v, s, z, 0, 255, torch.uint8), s, z, 0, 255, torch.uint8)

    def wq(w):
        o = tobs.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.int8, quant_min=-128, quant_max=127,
                                          qscheme=torch.per_channel_symmetric, eps=EPS)
        o(w)
        s, z = o.calculate_qparams()
        return tq.dequantize_per_channel(tq.quantize_per_channel(w, s, z, 0, -128, 127, torch.int8), s, z, 0, -128,
                                         127, torch.int8)
    y = tF.conv2d(qdq(_t(x), "x"), wq(_t(m.conv1.weight)), _t(m.conv1.bias), padding=1).relu()
    yq = qdq(y, "relu")
    ref = (tF.conv2d(yq, wq(_t(m.conv2.weight)), _t(m.conv2.bias), padding=1) + yq).relu()
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ember.compile(converted, backend="aot_eager")(x).detach().numpy(), out, rtol=1e-5,
                               atol=1e-6)


def test_fold_quantize_false_keeps_weight_quantize():
    rng = np.random.default_rng(5)
    m = _randomize(MLP(), rng)
    calib = _calib(rng, (4, 6), n=2)
    prepared, _ = _flow(m, calib[0], calib)
    x = ember.tensor(_rand(rng, 3, 6))
    converted = convert_pt2e(prepared, fold_quantize=False)
    q = ember.ops.quantized_decomposed
    targets = [n.target for n in converted.graph.nodes if n.op == "call_function"]
    assert targets.count(q.quantize_per_channel.default) == 3
    assert not any(n.op == "get_attr" and n.target.startswith("_frozen_param") for n in converted.graph.nodes)
    prepared2, _ = _flow(m, calib[0], calib)
    np.testing.assert_array_equal(convert_pt2e(prepared2)(x).detach().numpy(), converted(x).detach().numpy())


class Tied(enn.Module):
    """A Linear on a 3-d non-contiguous input (lowered to expand + bmm) with a tied weight."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = enn.Linear(4, 4, bias=False), enn.Linear(4, 4)
        self.fc2.weight = self.fc1.weight

    def forward(self, x):
        return self.fc2(self.fc1(x).transpose(1, 2))


def test_linear_lowerings_are_raised_to_linear():
    rng = np.random.default_rng(12)
    m = _randomize(Tied(), rng)
    calib = _calib(rng, (2, 4, 4), n=2)
    prepared, log = _flow(m, calib[0], calib)
    lin = [n for n in prepared.graph.nodes if n.op == "call_function" and n.target is ember.nn.functional.linear]
    assert len(lin) == 2 and not any(n.op == "call_function" and n.target in (ember.bmm, ember.mm, ember.addmm)
                                     for n in prepared.graph.nodes)
    # one weight observer instance for the tied weight, read by both linears
    assert _groups(prepared) == [["fc1_weight"], ["transpose"], ["x"]]
    assert len([n for n in prepared.graph.nodes if n.op == "call_module"]) == 3
    _replay_observers(prepared, log)
    converted = convert_pt2e(prepared)
    x = ember.tensor(_rand(rng, 2, 4, 4))
    np.testing.assert_allclose(converted(x).detach().numpy(), m(x).detach().numpy(), atol=0.1)
    np.testing.assert_allclose(ember.compile(converted, backend="aot_eager")(x).detach().numpy(),
                               converted(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_module_name_and_type_configs():
    rng = np.random.default_rng(6)
    m = _randomize(MLP(), rng)
    calib = _calib(rng, (4, 6), n=2)
    cfg = get_default_x86_inductor_quantization_config()
    qz = X86InductorQuantizer().set_global(cfg).set_module_name_qconfig("fc2", None)
    prepared, _ = _flow(m, calib[0], calib, qz)
    observed = {n.args[0].name for n in prepared.graph.nodes if n.op == "call_module"}
    assert "fc2_weight" not in observed and "fc1_weight" in observed and "fc3_weight" in observed
    qz = X86InductorQuantizer().set_module_type_qconfig(enn.Linear, cfg)
    prepared, _ = _flow(m, calib[0], calib, qz)
    assert {"fc1_weight", "fc2_weight", "fc3_weight"} <= {n.args[0].name for n in prepared.graph.nodes
                                                          if n.op == "call_module"}
    qz = X86InductorQuantizer().set_module_name_qconfig("fc3", cfg)
    prepared, _ = _flow(m, calib[0], calib, qz)
    assert {n.args[0].name for n in prepared.graph.nodes if n.op == "call_module"} == {"linear_1", "fc3_weight"}
    with pytest.raises(ValueError, match="Mixed QAT and Non-QAT"):
        X86InductorQuantizer().set_global(cfg).set_module_name_qconfig(
            "fc1", get_default_x86_inductor_quantization_config(is_qat=True))


def test_qat_linear_fake_quant_against_torch():
    rng = np.random.default_rng(7)
    m = MLP()
    _randomize(m, rng)
    m.train()
    x = ember.tensor(_rand(rng, 5, 6))
    exported = ember.export.export(m, (x,)).module()
    qz = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_qat=True))
    prepared = prepare_qat_pt2e(exported, qz)
    mods = dict(prepared.named_modules(remove_duplicate=False))
    fqs = [mods[n.target] for n in prepared.graph.nodes if n.op == "call_module"]
    assert fqs and all(type(f).__name__ == "FusedMovingAvgObsFakeQuantize" for f in fqs)
    out = prepared(x)
    out.sum().backward()
    assert m.fc1.weight.grad is not None or any(p.grad is not None for p in prepared.parameters())

    # torch: the same fake quantizers on the same values
    from torch.ao.quantization.fake_quantize import FusedMovingAvgObsFakeQuantize as TFQ
    act = lambda: TFQ(observer=tobs.MovingAverageMinMaxObserver, dtype=torch.uint8, quant_min=0,  # noqa: E731
                      quant_max=255, qscheme=torch.per_tensor_affine, eps=EPS)
    wfq = lambda: TFQ(observer=tobs.MovingAveragePerChannelMinMaxObserver, dtype=torch.int8,  # noqa: E731
                      quant_min=-128, quant_max=127, qscheme=torch.per_channel_symmetric, ch_axis=0, eps=EPS)
    y = _t(x)
    for i in (1, 2, 3):
        lin = getattr(m, f"fc{i}")
        y = tF.linear(act()(y), wfq()(_t(lin.weight)), _t(lin.bias))
        if i == 1:
            y = y.relu()
    np.testing.assert_allclose(out.detach().numpy(), y.detach().numpy(), rtol=1e-4, atol=1e-4)
    converted = convert_pt2e(prepared)
    q = ember.ops.quantized_decomposed
    assert sum(n.target is q.quantize_per_tensor.default for n in converted.graph.nodes) == 3
    assert converted(x).shape == (5, 4)


class _AddQuantizer(Quantizer):
    """A custom quantizer: both add inputs share one observer, the output has fixed qparams."""

    def annotate(self, model):
        from ember.ao.quantization.observer import MinMaxObserver
        act = QuantizationSpec(dtype=ember.int8, quant_min=-128, quant_max=127, qscheme=ember.per_tensor_affine,
                               observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=EPS))
        for n in model.graph.nodes:
            if n.op == "call_function" and n.target is ember.add:
                a, b = n.args
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={a: act, b: SharedQuantizationSpec((a, n))},
                    output_qspec=FixedQParamsQuantizationSpec(dtype=ember.int8, scale=1 / 64, zero_point=0,
                                                              quant_min=-128, quant_max=127,
                                                              qscheme=ember.per_tensor_affine),
                    _annotated=True)
        return model

    def validate(self, model):
        pass


class _Add(enn.Module):
    def forward(self, x, y):
        return x + y


def test_custom_quantizer_shared_and_fixed_specs():
    rng = np.random.default_rng(8)
    a, b = ember.tensor(_rand(rng, 4, 5)), ember.tensor(_rand(rng, 4, 5, scale=3.0))
    exported = ember.export.export(_Add(), (a, b)).module()
    prepared = prepare_pt2e(exported, _AddQuantizer())
    prepared(a, b)
    mods = dict(prepared.named_modules(remove_duplicate=False))
    obs = [mods[n.target] for n in prepared.graph.nodes if n.op == "call_module"]
    assert len(obs) == 3 and obs[0] is obs[1] and type(obs[2]).__name__ == "FixedQParamsObserver"
    t = tobs.MinMaxObserver(dtype=torch.int8, quant_min=-128, quant_max=127, eps=EPS)
    t(_t(a))
    t(_t(b))
    np.testing.assert_array_equal(obs[0].calculate_qparams()[0].numpy(), t.calculate_qparams()[0].numpy())
    converted = convert_pt2e(prepared)
    qs = [n.args[1:3] for n in converted.graph.nodes
          if n.op == "call_function" and n.target is ember.ops.quantized_decomposed.quantize_per_tensor.default]
    assert len(qs) == 3 and qs[0] == qs[1] and qs[2] == (1 / 64, 0)
    tq = torch.ops.quantized_decomposed

    def qdq(v, s, z):
        return tq.dequantize_per_tensor(tq.quantize_per_tensor(v, s, z, -128, 127, torch.int8), s, z, -128, 127,
                                        torch.int8)
    ref = qdq(qdq(_t(a), *qs[0]) + qdq(_t(b), *qs[0]), 1 / 64, 0)
    np.testing.assert_array_equal(converted(a, b).numpy(), ref.numpy())


def test_derived_bias_spec():
    from ember.ao.quantization.observer import MinMaxObserver

    class Q(Quantizer):
        def annotate(self, model):
            act = QuantizationSpec(dtype=ember.uint8, quant_min=0, quant_max=255, qscheme=ember.per_tensor_affine,
                                   observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=EPS))
            wspec = QuantizationSpec(dtype=ember.int8, quant_min=-127, quant_max=127,
                                     qscheme=ember.per_tensor_symmetric,
                                     observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=EPS))
            for n in model.graph.nodes:
                if n.op == "call_function" and n.target is ember.nn.functional.linear:
                    x, w, b = n.args

                    def derive(obs):
                        s1, _ = obs[0].calculate_qparams()
                        s2, _ = obs[1].calculate_qparams()
                        return (s1 * s2).to(ember.float32), ember.tensor([0], dtype=ember.int32)
                    bspec = DerivedQuantizationSpec(derived_from=[(x, n), (w, n)], derive_qparams_fn=derive,
                                                    dtype=ember.int32, quant_min=-2 ** 31, quant_max=2 ** 31 - 1,
                                                    qscheme=ember.per_tensor_symmetric)
                    n.meta["quantization_annotation"] = QuantizationAnnotation(
                        input_qspec_map={x: act, w: wspec, b: bspec}, _annotated=True)
            return model

        def validate(self, model):
            pass
    rng = np.random.default_rng(9)
    lin = enn.Linear(4, 3)
    _randomize(lin, rng)
    x = ember.tensor(_rand(rng, 2, 4))
    prepared = prepare_pt2e(ember.export.export(lin, (x,)).module(), Q())
    prepared(x)
    converted = convert_pt2e(prepared, fold_quantize=False)
    qn = [n for n in converted.graph.nodes
          if n.op == "call_function" and n.target is ember.ops.quantized_decomposed.quantize_per_tensor.default]
    assert len(qn) == 3
    by = {n.args[0].name: n.args for n in qn}
    by["x"] = by.pop("input_1")          # (Linear.forward's argument is named input)
    assert set(by) == {"x", "weight", "bias"}
    assert (by["x"][-1], by["weight"][-1], by["bias"][-1]) == (ember.uint8, ember.int8, ember.int32)
    assert by["bias"][1] == float(np.float32(by["x"][1]) * np.float32(by["weight"][1]))


def test_composable_quantizer_refuses_changed_annotations():
    class Changer(Quantizer):
        def annotate(self, model):
            for n in model.graph.nodes:
                if "quantization_annotation" in n.meta:
                    n.meta["quantization_annotation"] = QuantizationAnnotation(_annotated=True)
            return model

        def validate(self, model):
            pass
    rng = np.random.default_rng(10)
    m = _randomize(MLP(), rng)
    x = ember.tensor(_rand(rng, 2, 6))
    with pytest.raises(RuntimeError, match="Quantizer Changer has changed annotations on node"):
        prepare_pt2e(ember.export.export(m, (x,)).module(), ComposableQuantizer([_x86(), Changer()]))
    # composing quantizers that do not overlap works
    prepared = prepare_pt2e(ember.export.export(m, (x,)).module(), ComposableQuantizer([_x86()]))
    assert any(n.op == "call_module" for n in prepared.graph.nodes)


def test_errors():
    rng = np.random.default_rng(11)
    m = _randomize(MLP(), rng)
    x = ember.tensor(_rand(rng, 2, 6))
    exported = ember.export.export(m, (x,)).module()
    with pytest.raises(TypeError, match="ember.export.export"):
        prepare_pt2e(m, _x86())
    prepared = prepare_pt2e(exported, _x86())
    with pytest.raises(NotImplementedError, match=r"Calling eval\(\) is not supported yet."):
        prepared.eval()
    with pytest.raises(NotImplementedError, match=r"Calling train\(\) is not supported yet."):
        prepared.train()
    prepared(x)
    with pytest.raises(ValueError, match="Unexpected argument type for `use_reference_representation`"):
        convert_pt2e(prepared, use_reference_representation="yes")
    with pytest.raises(NotImplementedError, match="use_reference_representation=True"):
        convert_pt2e(prepared, use_reference_representation=True)

    # a Linear whose graph is no linear pattern (hand-built: exported Linears are all raised to
    # F.linear) is refused, not left float
    g = ember.fx.Graph()
    a, w = g.placeholder("a"), g.get_attr("fc.weight")
    w.meta["val"] = ember.empty(3, 4)
    bmm = g.call_function(ember.bmm, (a, g.call_function(ember.t, (w,))))
    bmm.meta["nn_module_stack"] = {"L__self__fc": ("fc", "ember.nn.modules.linear.Linear")}
    g.output(bmm)
    root = enn.Module()
    root.fc = enn.Linear(4, 3)
    with pytest.raises(NotImplementedError, match="the Linear module 'fc' was exported as bmm"):
        _x86().annotate(ember.fx.GraphModule(root, g))
    bn = CNN().train()
    ex = ember.export.export(bn, (ember.tensor(_rand(rng, 2, 3, 8, 8)),)).module()
    with pytest.raises(NotImplementedError, match="BatchNorm in training mode"):
        prepare_qat_pt2e(ex, X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_qat=True)))
    # torch's XNNPACKQuantizer quantizes conv1d; ember's PT2E flow does not: refused, not left float
    from ember.ao.quantization.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                  get_symmetric_quantization_config)
    c1 = enn.Sequential(enn.Conv1d(3, 4, 3)).eval()
    ex = ember.export.export(c1, (ember.tensor(_rand(rng, 2, 3, 8)),)).module()
    with pytest.raises(NotImplementedError, match="the Conv1d module '0' was exported as convolution"):
        prepare_pt2e(ex, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    with pytest.raises(ValueError, match="quant_min 5 must be <= quant_max 1"):
        QuantizationSpec(dtype=ember.int8, observer_or_fake_quant_ctr=None, quant_min=5, quant_max=1)


class XNet(enn.Module):
    """conv-relu, conv + skip add, a scalar mul, adaptive avg pool, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.relu = enn.Conv2d(3, 4, 3, padding=1), enn.ReLU()
        self.conv2, self.gap, self.fc = enn.Conv2d(4, 4, 1), enn.AdaptiveAvgPool2d(1), enn.Linear(4, 5)

    def forward(self, x):
        y = self.relu(self.conv(x))
        z = (self.conv2(y) + y) * 0.5
        return self.fc(ember.flatten(self.gap(z), 1))


@pytest.mark.parametrize("per_channel", [True, False])
def test_xnnpack_quantizer_against_torch_observers(per_channel):
    from ember.ao.quantization.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                  get_symmetric_quantization_config)
    rng = np.random.default_rng(13)
    m = _randomize(XNet(), rng)
    calib = _calib(rng, (2, 3, 6, 6), n=2)
    qz = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))
    prepared, log = _flow(m, calib[0], calib, qz)
    # every op's output observed (relu's read by conv2 and the add: one observer); the pool
    # and the flatten share the mul's; the scalar 0.5 became a quantized constant
    assert _groups(prepared) == sorted(sorted(g) for g in [
        ["x"], ["conv_weight"], ["conv2_weight"], ["fc_weight"], ["relu"], ["conv2d_1"], ["add"],
        ["_tensor_constant_0"], ["mul", "adaptive_avg_pool2d", "flatten"], ["linear"]])
    _replay_observers(prepared, log)
    converted = convert_pt2e(prepared)
    q = ember.ops.quantized_decomposed
    targets = [n.target for n in converted.graph.nodes if n.op == "call_function"]
    assert targets.count(q.dequantize_per_channel.default) == (3 if per_channel else 0)
    assert targets.count(q.quantize_per_tensor.default) == 8       # (weights and the constant folded)
    x = calib[1]                  # (inside the calibrated ranges: the float model's output within 0.1)
    out = converted(x).detach().numpy()
    np.testing.assert_allclose(out, m(x).detach().numpy(), atol=0.1)
    np.testing.assert_allclose(ember.compile(converted, backend="aot_eager")(x).detach().numpy(), out, rtol=1e-5,
                               atol=1e-6)
    checked = _replay_qdq(converted)
    converted(x)
    assert len(checked) == 8 + 10 + 3      # (relu's dequantize duplicated for its two users)


def test_x86_dynamic_linear_against_torch():
    rng = np.random.default_rng(14)
    m = _randomize(MLP(), rng)
    x = ember.tensor(_rand(rng, 5, 6, scale=1.5))
    qz = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    prepared = prepare_pt2e(ember.export.export(m, (x,)).module(), qz)
    prepared(x)
    converted = convert_pt2e(prepared)
    q = ember.ops.quantized_decomposed
    assert q.quantize_per_tensor.tensor is q.quantize_per_tensor_tensor.default       # (torch's spelling)
    targets = [n.target for n in converted.graph.nodes if n.op == "call_function"]
    assert targets.count(q.choose_qparams_tensor.default) == 3
    out = converted(x).detach().numpy()
    tq = torch.ops.quantized_decomposed
    y = _t(x)
    for i in (1, 2, 3):
        lin = getattr(m, f"fc{i}")
        w = _t(lin.weight)
        o = tobs.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.int8, quant_min=-128, quant_max=127,
                                          qscheme=torch.per_channel_symmetric, eps=EPS)
        o(w)
        ws, wz = o.calculate_qparams()
        w = tq.dequantize_per_channel(tq.quantize_per_channel(w, ws, wz, 0, -128, 127, torch.int8), ws, wz, 0, -128, 127,
                                      torch.int8)
        s, z = tq.choose_qparams.tensor(y, 0, 255, EPS, torch.uint8)
        y = tq.dequantize_per_tensor.tensor(tq.quantize_per_tensor.tensor(y, s, z, 0, 255, torch.uint8), s, z, 0, 255,
                                            torch.uint8)
        y = tF.linear(y, w, _t(lin.bias))
        if i == 1:
            y = y.relu()
    np.testing.assert_allclose(out, y.numpy(), rtol=1e-4, atol=1e-4)
    # the run-time qparams are torch's bit for bit
    s, z = q.choose_qparams_tensor.default(x, 0, 255, EPS, ember.uint8)
    ts, tz = tq.choose_qparams.tensor(_t(x), 0, 255, EPS, torch.uint8)
    assert s.dtype == ember.float64 and float(s) == float(ts) and int(z) == int(tz)
    np.testing.assert_allclose(ember.compile(converted, backend="aot_eager")(x).detach().numpy(), out, rtol=1e-5,
                               atol=1e-6)
